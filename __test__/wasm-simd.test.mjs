// The WebAssembly module is built with SIMD (simd128); its results must be
// those of a build without it, bit for bit. npm/build-wasm.mjs --modules
// builds both from the sources here (cargo: nothing to do when they are
// current; the scalar build's first time takes a minute or two), and each
// module runs the same computations in its own process (one core binding
// per process): every op's value and adjoint, eager and compiled, the GP
// value and gradient at n = 50 and 200, and a Hessian. The module the
// package ships (src/js/grad.wasm.js, which every runtime in `npm test`
// loads) must be the SIMD build of these sources.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

const self = fileURLToPath(import.meta.url);
const root = fileURLToPath(new URL('..', import.meta.url));

// ---------------------------------------------------------------- the computations (child)

/** Every number of a result, as bits ('nan' for any NaN: its payload is the engine's). */
function bits(x, out = []) {
  const one = (v) => {
    if (Number.isNaN(v)) return out.push('nan');
    const b = new DataView(new ArrayBuffer(8));
    b.setFloat64(0, v);
    out.push(b.getBigUint64(0).toString(16));
  };
  if (typeof x === 'number') one(x);
  else if (x instanceof Float64Array || Array.isArray(x)) for (const v of x) bits(v, out);
  else if (x && typeof x === 'object' && x.data instanceof Float64Array) bits(x.data, out);
  else if (x && typeof x === 'object') for (const k of Object.keys(x).sort()) bits(x[k], out);
  else throw new Error(`unexpected ${typeof x}`);
  return out;
}

function computations(G, models) {
  let s = 12345;
  const rand = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296) * 2 - 1;
  const data = (n, f = rand) => Float64Array.from({ length: n }, f);
  const T = (shape, f) => G.tensor(data(shape.reduce((a, b) => a * b, 1), f), shape);
  const pos = () => 0.2 + 2 * Math.abs(rand());
  /** A symmetric positive-definite n×n matrix (a kernel matrix plus a ridge). */
  const spd = (n) => {
    const x = data(n, () => 5 * rand());
    return G.tensor(Float64Array.from({ length: n * n }, (_, k) => {
      const i = Math.floor(k / n);
      const j = k % n;
      return Math.exp(-((x[i] - x[j]) ** 2) / 2) + (i === j ? 0.1 : 0);
    }), [n, n]);
  };
  /** A lower-triangular n×n matrix with a diagonal in [1, 2). */
  const lower = (n) => G.tensor(Float64Array.from({ length: n * n }, (_, k) => {
    const i = Math.floor(k / n);
    const j = k % n;
    return j > i ? 0 : j === i ? 1 + Math.abs(rand()) : 0.3 * rand();
  }), [n, n]);

  // Each case: a function of its parameters (an object), and the parameters.
  // The op's output is weighted by fixed random numbers and summed, so that
  // its whole adjoint reaches the parameters.
  const cases = [];
  const weighed = (op) => (p) => {
    const y = op(p);
    const n = G.isTensor(y) ? y.data.length : y.data?.length ?? 1;
    return n === 1 && !G.isTensor(y) ? G.mul(y, 0.7) : G.sum(G.mul(y, w(y)));
  };
  const weights = new Map();
  const w = (y) => {
    const shape = y.shape ?? [];
    const key = shape.join('x');
    if (!weights.has(key)) weights.set(key, shape.length === 0 ? 0.7 : T(shape, rand));
    return weights.get(key);
  };
  const add = (name, op, params) => cases.push({ name, f: weighed(op), params });

  const [m, n] = [37, 41];
  for (const op of ['add', 'sub', 'mul', 'div', 'maximum', 'minimum']) {
    const f = (p) => G[op](p.a, p.b);
    const b = op === 'div' ? pos : rand;
    add(`${op} same`, f, { a: T([m, n], rand), b: T([m, n], b) });
    add(`${op} scalar left`, f, { a: rand(), b: T([m, n], b) });
    add(`${op} scalar right`, f, { a: T([m, n], rand), b: op === 'div' ? pos() : rand() });
    add(`${op} row left`, f, { a: T([n], rand), b: T([m, n], b) });
    add(`${op} row right`, f, { a: T([m, n], rand), b: T([n], b) });
    add(`${op} vectors`, f, { a: T([101], rand), b: T([101], b) });
  }
  const unary = { neg: rand, exp: rand, log: pos, sqrt: pos, square: rand, tanh: rand, sigmoid: rand, relu: rand, lgamma: pos };
  for (const [op, g] of Object.entries(unary)) add(op, (p) => G[op](p.a), { a: T([m, n], g) });
  add('pow 2.5', (p) => G.pow(p.a, 2.5), { a: T([m, n], pos) });
  add('pow 3', (p) => G.pow(p.a, 3), { a: T([m, n], rand) });
  add('sum', (p) => G.sum(p.a), { a: T([m, n], rand) });
  add('mean', (p) => G.mean(p.a), { a: T([m, n], rand) });
  add('transpose', (p) => G.transpose(p.a), { a: T([m, n], rand) });
  add('diagPart', (p) => G.diagPart(p.a), { a: T([m, m], rand) });
  add('trace', (p) => G.trace(p.a), { a: T([m, m], rand) });
  add('reshape', (p) => G.reshape(p.a, [n, m]), { a: T([m, n], rand) });
  add('slice', (p) => G.slice(p.a, [3, 5], [20, 17]), { a: T([m, n], rand) });
  add('concat rows', (p) => G.concat([p.a, p.b]), { a: T([m, n], rand), b: T([5, n], rand) });
  add('concat columns', (p) => G.concat([p.a, p.b], { axis: 1 }), { a: T([m, n], rand), b: T([m, 3], rand) });
  add('dot', (p) => G.dot(p.a, p.b), { a: T([101], rand), b: T([101], rand) });
  add('addDiag scalar', (p) => G.addDiag(p.a, p.b), { a: T([m, m], rand), b: rand() });
  add('addDiag vector', (p) => G.addDiag(p.a, p.b), { a: T([m, m], rand), b: T([m], rand) });
  for (const [a, b, c] of [[37, 41, 29], [3, 4, 5], [64, 64, 64], [7, 1, 9], [1, 13, 6]]) {
    add(`matmul ${a}x${b} ${b}x${c}`, (p) => G.matmul(p.a, p.b), { a: T([a, b], rand), b: T([b, c], rand) });
  }
  add('matmul matrix vector', (p) => G.matmul(p.a, p.b), { a: T([m, n], rand), b: T([n], rand) });
  // 157: the tiled factorization of large orders (both builds), with a remainder row.
  for (const k of [1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 31, 37, 64, 101, 157]) add(`cholesky ${k}`, (p) => G.cholesky(p.a), { a: spd(k) });
  for (const k of [5, 37]) {
    add(`triangularSolve lower vector ${k}`, (p) => G.triangularSolve(p.t, p.b), { t: lower(k), b: T([k], rand) });
    add(`triangularSolve lower matrix ${k}`, (p) => G.triangularSolve(p.t, p.b), { t: lower(k), b: T([k, 13], rand) });
    add(`triangularSolve upper matrix ${k}`, (p) => G.triangularSolve(G.transpose(p.t), p.b, { lower: false }), { t: lower(k), b: T([k, 13], rand) });
    add(`solveGeneral vector ${k}`, (p) => G.solveGeneral(p.a, p.b), { a: T([k, k], rand), b: T([k], rand) });
    add(`solveGeneral matrix ${k}`, (p) => G.solveGeneral(p.a, p.b), { a: T([k, k], rand), b: T([k, 3], rand) });
    add(`logdetPSD ${k}`, (p) => G.logdetPSD(p.a), { a: spd(k) });
    add(`solvePSD ${k}`, (p) => G.solvePSD(p.a, p.b), { a: spd(k), b: T([k], rand) });
    add(`inv ${k}`, (p) => G.inv(p.a), { a: spd(k) });
  }

  const out = {};
  for (const c of cases) {
    for (const [how, vg] of [['eager', G.valueAndGrad(c.f)], ['compiled', G.compile(c.f)]]) {
      try {
        out[`${c.name} (${how})`] = bits(vg(c.params)).join(' ');
      } catch (e) {
        out[`${c.name} (${how})`] = `error: ${e.message}`;
      }
    }
  }
  for (const size of [50, 200]) {
    const f = G.compile(models.gp(G, models.gpData(size)));
    out[`gp${size} compiled`] = bits([f({ l: 1.2, v: 0.9 }), f({ l: 0.7, v: 1.3 })]).join(' ');
  }
  const h = G.hessian(models.gp(G, models.gpData(50)))({ l: 1.2, v: 0.9 });
  out['gp50 hessian'] = bits(h).join(' ');
  return out;
}

if (process.argv[2] === '--child') {
  const { install } = await import('../src/js/binding.js');
  const { loadWasm } = await import('../src/js/wasm.js');
  const G = await import('../src/js/api.js');
  const models = await import('../bench/models.mjs');
  install(loadWasm(readFileSync(process.argv[3])));
  // Exit once the pipe has taken it all (an exit at once cuts it short).
  process.stdout.write(JSON.stringify(computations(G, models)), () => process.exit(0));
}

// The shipped module's own `exp` (src/core/math/host_exp.rs) against this
// engine's Math.exp: the inputs where they differ, as text.
if (process.argv[2] === '--exp') {
  const { install } = await import('../src/js/binding.js');
  const { loadWasm } = await import('../src/js/wasm.js');
  const G = await import('../src/js/api.js');
  install(loadWasm());
  let s = 0x9e3779b9;
  const rand = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296);
  const xs = [1, -1, 0, -0, 0.5 * Math.LN2, -0.5 * Math.LN2, 1.5 * Math.LN2, 2 ** -28, -(2 ** -28), 2 ** -29, 5e-324];
  xs.push(709.78, 709.782712893384, 709.8, -708.3, -708.4, -720, -745.1332191019411, -746, Infinity, -Infinity, NaN);
  for (let i = 0; i < 200_000; i++) {
    const u = rand();
    xs.push([-750 + 1460 * u, -3 + 6 * u, (u - 0.5) * 1e-7, (u - 0.5) * 60][i % 4]);
  }
  const got = G.exp(G.tensor(Float64Array.from(xs), [xs.length])).value.data;
  const differ = xs.filter((x, i) => !Object.is(got[i], Math.exp(x))).slice(0, 5);
  process.stdout.write(JSON.stringify({ count: xs.length, differ: differ.map(String) }), () => process.exit(0));
}

// ---------------------------------------------------------------- the test (parent)

/** Build both modules (npm/build-wasm.mjs --modules): their paths. */
function buildModules() {
  const r = spawnSync(process.execPath, [`${root}/npm/build-wasm.mjs`, '--modules'], { encoding: 'utf8', maxBuffer: 1 << 24 });
  assert.equal(r.status, 0, `npm/build-wasm.mjs --modules failed:\n${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').at(-1));
}

function run(path) {
  const r = spawnSync(process.execPath, [self, '--child', path], { encoding: 'utf8', maxBuffer: 1 << 26 });
  assert.equal(r.status, 0, `the computations on ${path} failed:\n${r.stderr}`);
  return JSON.parse(r.stdout);
}

// Only the parent tests: a child that registered the tests too would spawn a
// child of its own, and so on without end.
const parent = process.argv[2] !== '--child' && process.argv[2] !== '--exp';

if (parent) test('the WebAssembly core computes exp as Math.exp does, bit for bit', () => {
  const r = spawnSync(process.execPath, [self, '--exp'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const { count, differ } = JSON.parse(r.stdout);
  assert.ok(count > 200_000, `only ${count} inputs`);
  assert.deepEqual(differ, [], `exp differs from Math.exp at ${differ.join(', ')}`);
});

if (parent) test('the SIMD module gives the scalar build\'s bits, and is the module the package ships', { timeout: 900_000 }, () => {
  const { simd, scalar } = buildModules();
  const simdBytes = readFileSync(simd);
  const scalarBytes = readFileSync(scalar);
  assert.notDeepEqual(simdBytes, scalarBytes, 'the two builds are the same module: simd128 did not reach the build');

  // The shipped module is this SIMD build (so every runtime's tests run it).
  const shipped = /'([A-Za-z0-9+/=]+)'/.exec(readFileSync(`${root}/src/js/grad.wasm.js`, 'utf8'))[1];
  assert.ok(
    Buffer.from(shipped, 'base64').equals(simdBytes),
    'src/js/grad.wasm.js is not the SIMD build of these sources: run `npm run build:wasm`',
  );

  const a = run(simd);
  const b = run(scalar);
  assert.deepEqual(Object.keys(a), Object.keys(b));
  const differ = Object.keys(a).filter((k) => a[k] !== b[k]);
  assert.deepEqual(differ, [], `results differ between the SIMD and scalar builds: ${differ.join(', ')}`);
  // The computations ran (a case that failed alike on both would hide here).
  const failed = Object.keys(a).filter((k) => a[k].startsWith('error:'));
  assert.deepEqual(failed, [], `cases that threw: ${failed.map((k) => `${k}: ${a[k]}`).join('; ')}`);
  assert.ok(Object.keys(a).length > 150, `only ${Object.keys(a).length} cases`);
});
