// WebAssembly modules against each other and against the native addon, in the
// same minutes: the workloads of bench/run.mjs and bench/small.mjs, each
// module in its own child process (one core binding per process), the
// children taking turns for several rounds, the median of the rounds' medians
// reported. Built for judging a change to the wasm build (SIMD) on a shared
// machine whose load drifts: a module measured minutes apart from another is
// not compared with it.
//
//   node bench/wasm.mjs [--rounds 3] [--quick] [--cpu] [--no-native] [label=file.wasm ...] [workload ...]
//
// --cpu times by the process's CPU time instead of the clock: on a machine
// whose other core's load comes and goes, what a process is not scheduled
// for is then not counted (what it loses to a busy neighbour still is).
//
// A module is a raw .wasm file or a grad.wasm.js (base64); with none given,
// src/js/grad.wasm.js. Labels are free text (`scalar=/tmp/a.wasm`).
// Median µs per call, value and gradient, eager (e) and compiled (c).

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { install } from '../src/js/binding.js';
import { loadWasm } from '../src/js/wasm.js';
import * as G from '../src/js/api.js';
import { measure } from './measure.mjs';
import { gp, gpData, mlp, mlpSetup, regression, regressionData, regressionParams } from './models.mjs';

const argv = process.argv.slice(2);
const self = fileURLToPath(import.meta.url);

/** A module's bytes: a raw .wasm file, or a grad.wasm.js holding it in base64. */
function moduleBytes(file) {
  if (!file.endsWith('.js')) return readFileSync(file);
  const m = /'([A-Za-z0-9+/=]+)'/.exec(readFileSync(file, 'utf8'));
  if (!m) throw new Error(`${file}: no base64 module in it`);
  return Buffer.from(m[1], 'base64');
}

// ---------------------------------------------------------------- workloads

const Y = [28, 8, -3, 7, -1, 1, 18, 12];
const SIGMA = [15, 10, 16, 11, 9, 11, 10, 18];

/** bench/small.mjs's eight schools, every parameter a scalar. */
function hierarchical(p) {
  const { add, mul, sub, div, exp, square } = G;
  const tau = exp(p.logTau);
  let lp = add(mul(-0.5, square(div(p.mu, 5))), sub(p.logTau, mul(0.5, square(div(tau, 5)))));
  for (let j = 0; j < 8; j++) {
    const r = div(sub(Y[j], add(p.mu, mul(tau, p[`eta${j}`]))), SIGMA[j]);
    lp = sub(lp, add(mul(0.5, square(p[`eta${j}`])), mul(0.5, square(r))));
  }
  return lp;
}

/** The same with the group effects as one vector. */
function hierarchicalVector(p) {
  const { add, mul, sub, div, exp, square, sum } = G;
  const tau = exp(p.logTau);
  const prior = add(mul(-0.5, square(div(p.mu, 5))), sub(p.logTau, mul(0.5, square(div(tau, 5)))));
  const r = div(sub(Y, add(p.mu, mul(tau, p.eta))), SIGMA);
  return sub(prior, mul(0.5, add(sum(square(p.eta)), sum(square(r)))));
}

/** bench/run.mjs's chain of ~200 ops on three scalars. */
function chain200(p) {
  const { add, mul, sub, tanh, exp, square } = G;
  let x = p.a;
  let y = p.b;
  for (let i = 0; i < 28; i++) {
    x = tanh(add(mul(x, 0.9), y));
    y = sub(y, mul(p.c, exp(mul(x, -0.5))));
  }
  return sub(add(mul(x, y), square(p.c)), 1);
}

/** bench/small.mjs's chain of 200 ops on one scalar. */
function chain(x) {
  let y = x;
  for (let i = 0; i < 200; i++) y = i % 3 === 0 ? G.mul(y, 0.999) : i % 3 === 1 ? G.add(y, 0.001) : G.tanh(y);
  return y;
}

const workloads = [
  { name: 'regression', make: () => [regression(G, regressionData()), [regressionParams()]] },
  { name: 'gp50', make: () => [gp(G, gpData(50)), [{ l: 1.2, v: 0.9 }]] },
  { name: 'gp200', make: () => [gp(G, gpData(200)), [{ l: 1.2, v: 0.9 }]], batches: 7 },
  { name: 'mlp', make: () => { const { params, batch } = mlpSetup(G); return [mlp(G), [params, batch]]; } },
  { name: 'chain200', make: () => [chain200, [{ a: 0.3, b: -0.2, c: 0.1 }]] },
  { name: 'floor', make: () => [(x) => G.square(x), [1.5]] },
  { name: 'hier', make: () => [hierarchical, [{ mu: 1.5, logTau: 0.7, ...Object.fromEntries(Y.map((_, j) => [`eta${j}`, 0.1 * (j - 3.5)])) }]] },
  { name: 'vector', make: () => [hierarchicalVector, [{ mu: 1.5, logTau: 0.7, eta: Y.map((_, j) => 0.1 * (j - 3.5)) }]] },
  { name: 'chain', make: () => [chain, [0.3]] },
];

// ---------------------------------------------------------------- child

/** Median CPU µs per call over 9 batches of at least 50 ms of CPU each. */
function cpuMedian(fn) {
  for (let i = 0; i < 5; i++) fn();
  const per = [];
  for (let b = 0; b < 9; b++) {
    const c0 = process.cpuUsage();
    for (let k = 1; ; k++) {
      fn();
      const c = process.cpuUsage(c0);
      if (c.user + c.system >= 50_000) {
        per.push((c.user + c.system) / k);
        break;
      }
    }
  }
  return per.sort((a, b) => a - b)[4];
}

if (argv[0] === '--child') {
  const [, spec, quick, cpu, ...names] = argv;
  install(spec === 'native' ? createRequire(import.meta.url)('../binding.cjs') : loadWasm(moduleBytes(spec)));
  const out = {};
  for (const w of workloads.filter((w) => names.includes(w.name))) {
    const [f, args] = w.make();
    const opts = quick === '1' ? { batches: 3, batchMs: 2, warmupMs: 10 } : { batches: w.batches ?? 11 };
    const eager = G.valueAndGrad(f);
    const compiled = G.compile(f);
    const time = cpu === '1' ? cpuMedian : (fn) => measure(fn, opts).median;
    out[w.name] = { e: time(() => eager(...args)), c: time(() => compiled(...args)) };
  }
  process.stdout.write(JSON.stringify(out));
  process.exit(0);
}

// ---------------------------------------------------------------- parent

let rounds = 3;
const modules = [];
const names = [];
let native = true;
let quick = false;
let cpu = false;
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === '--rounds') rounds = Number(argv[++i]);
  else if (a === '--quick') quick = true;
  else if (a === '--cpu') cpu = true;
  else if (a === '--no-native') native = false;
  else if (a.includes('=')) {
    const [label, file] = a.split(/=(.*)/s);
    modules.push({ label, spec: file });
  } else names.push(a);
}
if (modules.length === 0) modules.push({ label: 'wasm', spec: fileURLToPath(new URL('../src/js/grad.wasm.js', import.meta.url)) });
if (native) modules.unshift({ label: 'native', spec: 'native' });
const picked = workloads.filter((w) => names.length === 0 || names.some((n) => w.name.includes(n))).map((w) => w.name);

const runs = new Map(modules.map((m) => [m.label, []]));
for (let r = 0; r < rounds; r++) {
  // Each round in a different order, so no module always follows the same one.
  const order = modules.map((_, i) => modules[(i + r) % modules.length]);
  for (const m of order) {
    const c = spawnSync(process.execPath, [self, '--child', m.spec, quick ? '1' : '0', cpu ? '1' : '0', ...picked], { encoding: 'utf8', maxBuffer: 1 << 24 });
    if (c.status !== 0) throw new Error(`${m.label} failed:\n${c.stderr}`);
    runs.get(m.label).push(JSON.parse(c.stdout));
  }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const h = s.length >> 1;
  return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2;
};
const num = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
const labels = modules.map((m) => m.label);
console.log(`# median ${cpu ? 'CPU ' : ''}µs per call over ${rounds} rounds (each a median of batches); e eager, c compiled\n`);
console.log(`| workload | ${labels.flatMap((l) => [`${l} e`, `${l} c`]).join(' | ')} |`);
console.log(`|---|${labels.map(() => '---:|---:').join('|')}|`);
for (const name of picked) {
  const cells = labels.flatMap((l) => ['e', 'c'].map((k) => num(median(runs.get(l).map((x) => x[name][k])))));
  console.log(`| ${name} | ${cells.join(' | ')} |`);
}
