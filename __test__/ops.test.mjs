// Forward values and gradients of every op (SPEC §3, §4, §5).
//
// Forward values are compared with independent plain-JS computations; every
// gradient comes from valueAndGrad of a composed scalar objective, usually
// sum(mul(W, op(...))) with a fixed random W, and is compared with central
// finite differences (relErr <= 1e-7, see helpers.mjs for the definition).

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as G from '../index.js';
import {
  makeRng, assertClose, checkGrad, relErr, flat,
  matmulJS, transposeJS, choleskyJS, invJS, triSolveJS, logdetSPDJS, traceJS,
  randomSPD, lgammaJS, digammaJS, zerosJS,
} from './helpers.mjs';

const FD_TOL = 1e-7;

// --------------------------------------------------------------------------
// small plain-JS utilities for this file
// --------------------------------------------------------------------------

/** Random value of a shape: [] -> number, [n] -> number[], [m,n] -> number[][]. */
function randOf(rng, shape, gen) {
  if (shape.length === 0) return gen();
  if (shape.length === 1) return Array.from({ length: shape[0] }, gen);
  return Array.from({ length: shape[0] }, () => Array.from({ length: shape[1] }, gen));
}

const shapeOf = (v) => (typeof v === 'number' ? [] : Array.isArray(v[0]) ? [v.length, v[0].length] : [v.length]);

/** Element (i, j) of an operand broadcast against an output of shape `out`. */
function at(v, i, j) {
  if (typeof v === 'number') return v;
  if (Array.isArray(v[0])) return v[i][j];
  return v[j];
}

function outShape(sa, sb) {
  return sa.length >= sb.length ? sa : sb;
}

/** Plain-JS broadcast of a binary function; returns nested output. */
function broadcastJS(a, b, fn) {
  const so = outShape(shapeOf(a), shapeOf(b));
  if (so.length === 0) return fn(a, b);
  if (so.length === 1) return Array.from({ length: so[0] }, (_, j) => fn(at(a, 0, j), at(b, 0, j)));
  return Array.from({ length: so[0] }, (_, i) => Array.from({ length: so[1] }, (_, j) => fn(at(a, i, j), at(b, i, j))));
}

/** Closed-form adjoint of operand `v` (reduced over broadcast axes). */
function adjointJS(a, b, W, which, partial) {
  const v = which === 'a' ? a : b;
  const sv = shapeOf(v);
  const so = outShape(shapeOf(a), shapeOf(b));
  const rows = so.length === 2 ? so[0] : 1;
  const cols = so.length === 0 ? 1 : so[so.length - 1];
  const g = sv.length === 0 ? [0] : sv.length === 1 ? new Array(sv[0]).fill(0) : zerosJS(sv[0], sv[1]);
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++) {
      const w = so.length === 0 ? W : so.length === 1 ? W[j] : W[i][j];
      const x = so.length === 0 ? a : at(a, i, j);
      const y = so.length === 0 ? b : at(b, i, j);
      const c = w * partial(x, y);
      if (sv.length === 0) g[0] += c;
      else if (sv.length === 1) g[j] += c;
      else g[i][j] += c;
    }
  }
  return sv.length === 0 ? g[0] : g;
}

function checkShape(v, shape, label = '') {
  assert.ok(v instanceof G.Var, `${label}: result must be a Var`);
  assert.deepEqual(Array.from(v.shape), shape, `${label}: shape`);
  assert.equal(v.data.length, shape.reduce((p, d) => p * d, 1), `${label}: data length`);
}

// --------------------------------------------------------------------------
// Binary elementwise ops and broadcasting
// --------------------------------------------------------------------------

const BINARY = {
  add: { js: (x, y) => x + y, da: () => 1, db: () => 1 },
  sub: { js: (x, y) => x - y, da: () => 1, db: () => -1 },
  mul: { js: (x, y) => x * y, da: (x, y) => y, db: (x, y) => x },
  div: { js: (x, y) => x / y, da: (x, y) => 1 / y, db: (x, y) => -x / (y * y), safeRight: true },
  maximum: { js: (x, y) => (x >= y ? x : y), da: (x, y) => (x >= y ? 1 : 0), db: (x, y) => (x >= y ? 0 : 1), noTies: true },
  minimum: { js: (x, y) => (x <= y ? x : y), da: (x, y) => (x <= y ? 1 : 0), db: (x, y) => (x <= y ? 0 : 1), noTies: true },
};

const BROADCAST_CASES = [
  { name: 'matrix with matrix', sa: [3, 4], sb: [3, 4] },
  { name: 'vector with vector', sa: [5], sb: [5] },
  { name: 'scalar with scalar', sa: [], sb: [] },
  { name: 'scalar left, matrix right', sa: [], sb: [3, 4] },
  { name: 'matrix left, scalar right', sa: [3, 4], sb: [] },
  { name: 'scalar left, vector right', sa: [], sb: [5] },
  { name: 'vector left, scalar right', sa: [5], sb: [] },
  { name: 'row vector left, matrix right', sa: [4], sb: [3, 4] },
  { name: 'matrix left, row vector right', sa: [3, 4], sb: [4] },
];

function operandsFor(opName, sa, sb, seed) {
  const spec = BINARY[opName];
  const rng = makeRng(seed);
  for (let attempt = 0; attempt < 1000; attempt++) {
    const a = randOf(rng, sa, () => rng.uniform(-1.5, 1.5));
    const b = randOf(rng, sb, spec.safeRight ? () => rng.awayFromZero(0.5, 1.5) : () => rng.uniform(-1.5, 1.5));
    if (spec.noTies) {
      const gaps = flat(broadcastJS(a, b, (x, y) => Math.abs(x - y)));
      if (gaps.some((d) => d < 0.05)) continue;
    }
    return { a, b };
  }
  throw new Error('could not draw operands');
}

describe('binary elementwise ops with broadcasting', () => {
  let seed = 101;
  for (const opName of Object.keys(BINARY)) {
    const spec = BINARY[opName];
    for (const c of BROADCAST_CASES) {
      const caseSeed = seed++;
      test(`${opName}: ${c.name}`, () => {
        const { a, b } = operandsFor(opName, c.sa, c.sb, caseSeed);
        const so = outShape(c.sa, c.sb);
        const rngW = makeRng(caseSeed + 7777);
        const W = randOf(rngW, so, () => rngW.uniform(-1, 1));

        // forward, with constant operands
        const out = G[opName](a, b);
        checkShape(out, so, opName);
        assertClose(out.data, flat(broadcastJS(a, b, spec.js)), 0, `${opName} forward`);

        // gradient vs finite differences
        const objective = (p) => G.sum(G.mul(W, G[opName](p.a, p.b)));
        const { gradient } = checkGrad(objective, { a, b }, { tol: FD_TOL, label: `${opName} ${c.name}` });

        // gradient vs the closed-form adjoint (sum for a scalar, column sums
        // for a row-broadcast vector), both operands
        const ga = adjointJS(a, b, W, 'a', spec.da);
        const gb = adjointJS(a, b, W, 'b', spec.db);
        assert.ok(relErr(gradient.a, ga) <= 1e-12, `adjoint of a: ${gradient.a} vs ${ga}`);
        assert.ok(relErr(gradient.b, gb) <= 1e-12, `adjoint of b: ${gradient.b} vs ${gb}`);
        assert.deepEqual(shapeOf(gradient.a), c.sa);
        assert.deepEqual(shapeOf(gradient.b), c.sb);
      });
    }
  }

  test('add: a broadcast scalar gets the sum of W, a broadcast row vector the column sums', () => {
    const rng = makeRng(4242);
    const W = rng.matrix(3, 4);
    const M = rng.matrix(3, 4);
    const { gradient } = G.valueAndGrad((p) => G.sum(G.mul(W, G.add(G.add(p.s, M), p.r))))({ s: 0.3, r: [1, 2, 3, 4] });
    const sumW = W.flat().reduce((s, w) => s + w, 0);
    const colSums = [0, 1, 2, 3].map((j) => W[0][j] + W[1][j] + W[2][j]);
    assert.ok(Math.abs(gradient.s - sumW) <= 1e-14 * Math.max(1, Math.abs(sumW)));
    assertClose(gradient.r, colSums, 1e-14);
  });

  test('sub with the broadcast operand on the right negates its column sums', () => {
    const rng = makeRng(4243);
    const W = rng.matrix(2, 3);
    const M = rng.matrix(2, 3);
    const { gradient } = G.valueAndGrad((p) => G.sum(G.mul(W, G.sub(M, p.r))))({ r: [0.1, 0.2, 0.3] });
    assertClose(gradient.r, [0, 1, 2].map((j) => -(W[0][j] + W[1][j])), 1e-14);
  });
});

describe('variadic add and mul equal the nested form exactly', () => {
  const rng = makeRng(555);
  const A = rng.matrix(3, 4);
  const B = rng.matrix(3, 4);
  const v = rng.vector(4);
  const s = 0.7;
  const t = -1.3;
  const W = rng.matrix(3, 4);

  for (const op of ['add', 'mul']) {
    const f = G[op];
    const cases = [
      { n: 3, variadic: (p) => f(p.A, p.v, p.s), nested: (p) => f(f(p.A, p.v), p.s) },
      { n: 4, variadic: (p) => f(p.s, p.A, p.B, p.v), nested: (p) => f(f(f(p.s, p.A), p.B), p.v) },
      { n: 5, variadic: (p) => f(p.v, p.A, p.s, p.B, p.t), nested: (p) => f(f(f(f(p.v, p.A), p.s), p.B), p.t) },
    ];
    for (const c of cases) {
      test(`${op} with ${c.n} operands`, () => {
        const params = { A, B, v, s, t };
        const obj1 = (p) => G.sum(G.mul(W, c.variadic(p)));
        const obj2 = (p) => G.sum(G.mul(W, c.nested(p)));
        const r1 = G.valueAndGrad(obj1)(params);
        const r2 = G.valueAndGrad(obj2)(params);
        assert.equal(r1.value, r2.value);
        assert.deepEqual(r1.gradient, r2.gradient);
        // forward data bit for bit, constants only
        const d1 = c.variadic(params);
        const d2 = c.nested(params);
        assert.deepEqual(Array.from(d1.shape), [3, 4]);
        assert.deepEqual(Array.from(d1.data), Array.from(d2.data));
        // and also against finite differences
        checkGrad(obj1, params, { tol: FD_TOL, label: `${op} x${c.n}` });
      });
    }
  }

  test('variadic add forward matches plain JS', () => {
    const out = G.add(A, v, s, B);
    const expect = A.map((row, i) => row.map((a, j) => a + v[j] + s + B[i][j]));
    assertClose(out.data, flat(expect), 0);
  });
});

// --------------------------------------------------------------------------
// Unary elementwise ops
// --------------------------------------------------------------------------

const sigmoidJS = (x) => 1 / (1 + Math.exp(-x));

const UNARY = {
  neg: { js: (x) => -x, d: () => -1, lo: -2, hi: 2, ftol: 0 },
  exp: { js: Math.exp, d: Math.exp, lo: -2, hi: 2, ftol: 1e-14 },
  log: { js: Math.log, d: (x) => 1 / x, lo: 0.3, hi: 3, ftol: 1e-14 },
  sqrt: { js: Math.sqrt, d: (x) => 0.5 / Math.sqrt(x), lo: 0.3, hi: 3, ftol: 0 },
  square: { js: (x) => x * x, d: (x) => 2 * x, lo: -2, hi: 2, ftol: 0 },
  tanh: { js: Math.tanh, d: (x) => 1 - Math.tanh(x) ** 2, lo: -2, hi: 2, ftol: 1e-14 },
  sigmoid: { js: sigmoidJS, d: (x) => sigmoidJS(x) * (1 - sigmoidJS(x)), lo: -3, hi: 3, ftol: 1e-14 },
  relu: { js: (x) => (x > 0 ? x : 0), d: (x) => (x > 0 ? 1 : 0), lo: -2, hi: 2, ftol: 0, awayFromZero: true },
  lgamma: { js: lgammaJS, d: digammaJS, lo: 0.2, hi: 4, ftol: 1e-12 },
};

describe('unary elementwise ops', () => {
  let seed = 300;
  for (const opName of Object.keys(UNARY)) {
    const spec = UNARY[opName];
    for (const shape of [[], [5], [3, 4]]) {
      const caseSeed = seed++;
      test(`${opName} on ${shape.length === 0 ? 'a scalar' : `shape [${shape}]`}`, () => {
        const rng = makeRng(caseSeed);
        const gen = spec.awayFromZero
          ? () => rng.awayFromZero(0.1, 2)
          : () => rng.uniform(spec.lo, spec.hi);
        const x = randOf(rng, shape, gen);
        const W = randOf(rng, shape, () => rng.uniform(-1, 1));

        const out = G[opName](x);
        checkShape(out, shape, opName);
        assertClose(out.data, flat(x).map(spec.js), spec.ftol, `${opName} forward`);

        const objective = (p) => G.sum(G.mul(W, G[opName](p.x)));
        const { gradient } = checkGrad(objective, { x }, { tol: FD_TOL, label: opName });
        const expected = flat(x).map((xi, i) => flat(W)[i] * spec.d(xi));
        assert.ok(relErr(gradient.x, expected) <= 1e-12, `${opName} closed-form derivative: ${flat(gradient.x)} vs ${expected}`);
        assert.deepEqual(shapeOf(gradient.x), shape);
      });
    }
  }

  test('lgamma at known values', () => {
    const xs = [1, 2, 0.5, 3.5, 10, 0.25, 1e-3, 30];
    const expected = [
      0, 0, 0.5 * Math.log(Math.PI), Math.log((15 / 8) * Math.sqrt(Math.PI)),
      Math.log(362880), 1.2880225246980774, 6.907178885383854, 71.25703896716801,
    ];
    assertClose(G.lgamma(xs).data, expected, 1e-12, 'lgamma');
  });

  test('digamma (the lgamma derivative) at known values', () => {
    const EULER = 0.5772156649015329;
    const { gradient } = G.valueAndGrad((p) => G.sum(G.lgamma(p.x)))({ x: [1, 0.5, 2, 5] });
    assertClose(gradient.x, [-EULER, -EULER - 2 * Math.LN2, 1 - EULER, 1 + 1 / 2 + 1 / 3 + 1 / 4 - EULER], 1e-13);
  });
});

describe('pow', () => {
  const exponents = [2, 3, 0.5, -1.5, 2.7, 1, 0, -2];
  let seed = 900;
  for (const k of exponents) {
    const caseSeed = seed++;
    test(`pow(x, ${k}) forward and gradient`, () => {
      const rng = makeRng(caseSeed);
      const x = rng.matrix(2, 3, 0.4, 2.5);
      const W = rng.matrix(2, 3);
      const out = G.pow(x, k);
      checkShape(out, [2, 3], 'pow');
      assertClose(out.data, flat(x).map((v) => v ** k), 1e-14, 'pow forward');
      const { gradient } = checkGrad((p) => G.sum(G.mul(W, G.pow(p.x, k))), { x }, { tol: FD_TOL, label: `pow ${k}` });
      const expected = flat(x).map((v, i) => flat(W)[i] * k * v ** (k - 1));
      assert.ok(relErr(gradient.x, expected) <= 1e-12);
    });
  }

  test('pow with an integer exponent on negative bases', () => {
    const x = [-1.5, -0.3, 0.8, 2];
    assertClose(G.pow(x, 3).data, x.map((v) => v ** 3), 1e-14);
    const { gradient } = checkGrad((p) => G.sum(G.pow(p.x, 3)), { x }, { tol: FD_TOL, label: 'pow 3 negative' });
    assertClose(gradient.x, x.map((v) => 3 * v * v), 1e-13);
  });

  test('pow of a scalar parameter', () => {
    const { value, gradient } = G.valueAndGrad((p) => G.pow(p.s, 2.5))({ s: 1.7 });
    assertClose(value, 1.7 ** 2.5, 1e-14);
    assertClose(gradient.s, 2.5 * 1.7 ** 1.5, 1e-14);
  });
});

// --------------------------------------------------------------------------
// Reductions
// --------------------------------------------------------------------------

describe('reductions', () => {
  const rng = makeRng(1200);
  const cases = [
    { name: 'scalar', x: 1.25 },
    { name: 'vector', x: rng.vector(6) },
    { name: 'matrix', x: rng.matrix(3, 5) },
  ];
  for (const c of cases) {
    test(`sum of a ${c.name}`, () => {
      const xs = flat(c.x);
      const out = G.sum(c.x);
      checkShape(out, [], 'sum');
      assertClose(out.data[0], xs.reduce((s, v) => s + v, 0), 1e-14);
      const { gradient } = checkGrad((p) => G.mul(-1.7, G.sum(p.x)), { x: c.x }, { tol: FD_TOL, label: 'sum' });
      assertClose(gradient.x, xs.map(() => -1.7), 1e-15);
    });
    test(`mean of a ${c.name}`, () => {
      const xs = flat(c.x);
      const out = G.mean(c.x);
      checkShape(out, [], 'mean');
      assertClose(out.data[0], xs.reduce((s, v) => s + v, 0) / xs.length, 1e-14);
      const { gradient } = checkGrad((p) => G.mul(2.3, G.mean(p.x)), { x: c.x }, { tol: FD_TOL, label: 'mean' });
      assertClose(gradient.x, xs.map(() => 2.3 / xs.length), 1e-14);
    });
  }
  test('sum of a nonlinear map', () => {
    const x = rng.matrix(2, 3);
    checkGrad((p) => G.square(G.sum(G.exp(p.x))), { x }, { tol: FD_TOL, label: 'square(sum(exp))' });
  });
});

// --------------------------------------------------------------------------
// Shape and matrix ops
// --------------------------------------------------------------------------

describe('matmul, dot, transpose, diagPart, trace, addDiag', () => {
  const rng = makeRng(1500);

  test('matmul: matrix times matrix', () => {
    const A = rng.matrix(3, 4);
    const B = rng.matrix(4, 2);
    const W = rng.matrix(3, 2);
    const out = G.matmul(A, B);
    checkShape(out, [3, 2], 'matmul');
    assertClose(out.data, flat(matmulJS(A, B)), 1e-14);
    checkGrad((p) => G.sum(G.mul(W, G.matmul(p.A, p.B))), { A, B }, { tol: FD_TOL, label: 'matmul' });
    // closed form: dA = W B^T, dB = A^T W
    const { gradient } = G.valueAndGrad((p) => G.sum(G.mul(W, G.matmul(p.A, p.B))))({ A, B });
    assertClose(gradient.A, flat(matmulJS(W, transposeJS(B))), 1e-13);
    assertClose(gradient.B, flat(matmulJS(transposeJS(A), W)), 1e-13);
  });

  test('matmul: matrix times vector', () => {
    const A = rng.matrix(3, 4);
    const x = rng.vector(4);
    const w = rng.vector(3);
    const out = G.matmul(A, x);
    checkShape(out, [3], 'matmul vector');
    assertClose(out.data, matmulJS(A, x), 1e-14);
    checkGrad((p) => G.sum(G.mul(w, G.matmul(p.A, p.x))), { A, x }, { tol: FD_TOL, label: 'matmul vec' });
  });

  test('matmul: nonlinear composition', () => {
    const A = rng.matrix(2, 3);
    const B = rng.matrix(3, 3);
    checkGrad((p) => G.sum(G.tanh(G.matmul(G.matmul(p.A, p.B), G.transpose(p.B)))), { A, B }, { tol: FD_TOL, label: 'matmul chain' });
  });

  test('dot', () => {
    const u = rng.vector(5);
    const v = rng.vector(5);
    const out = G.dot(u, v);
    checkShape(out, [], 'dot');
    assertClose(out.data[0], u.reduce((s, ui, i) => s + ui * v[i], 0), 1e-14);
    const { gradient } = checkGrad((p) => G.mul(1.5, G.dot(p.u, p.v)), { u, v }, { tol: FD_TOL, label: 'dot' });
    assertClose(gradient.u, v.map((x) => 1.5 * x), 1e-14);
    assertClose(gradient.v, u.map((x) => 1.5 * x), 1e-14);
    checkGrad((p) => G.dot(p.u, p.u), { u }, { tol: FD_TOL, label: 'dot(u,u)' });
  });

  test('transpose', () => {
    const A = rng.matrix(3, 4);
    const W = rng.matrix(4, 3);
    const out = G.transpose(A);
    checkShape(out, [4, 3], 'transpose');
    assert.deepEqual(Array.from(out.data), flat(transposeJS(A)));
    const { gradient } = checkGrad((p) => G.sum(G.mul(W, G.transpose(p.A))), { A }, { tol: FD_TOL, label: 'transpose' });
    assertClose(gradient.A, flat(transposeJS(W)), 0);
  });

  test('diagPart', () => {
    const A = rng.matrix(4, 4);
    const w = rng.vector(4);
    const out = G.diagPart(A);
    checkShape(out, [4], 'diagPart');
    assert.deepEqual(Array.from(out.data), A.map((r, i) => r[i]));
    const { gradient } = checkGrad((p) => G.sum(G.mul(w, G.diagPart(p.A))), { A }, { tol: FD_TOL, label: 'diagPart' });
    assertClose(gradient.A, flat(A.map((r, i) => r.map((_, j) => (i === j ? w[i] : 0)))), 0);
  });

  test('trace', () => {
    const A = rng.matrix(4, 4);
    const out = G.trace(A);
    checkShape(out, [], 'trace');
    assertClose(out.data[0], traceJS(A), 1e-15);
    const { gradient } = checkGrad((p) => G.mul(-0.8, G.trace(p.A)), { A }, { tol: FD_TOL, label: 'trace' });
    assertClose(gradient.A, flat(A.map((r, i) => r.map((_, j) => (i === j ? -0.8 : 0)))), 1e-15);
    checkGrad((p) => G.trace(G.matmul(p.A, p.A)), { A }, { tol: FD_TOL, label: 'trace(A A)' });
  });

  test('addDiag with a scalar alpha', () => {
    const A = rng.matrix(3, 3);
    const W = rng.matrix(3, 3);
    const out = G.addDiag(A, 0.75);
    checkShape(out, [3, 3], 'addDiag');
    assert.deepEqual(Array.from(out.data), flat(A.map((r, i) => r.map((a, j) => (i === j ? a + 0.75 : a)))));
    const { gradient } = checkGrad((p) => G.sum(G.mul(W, G.addDiag(p.A, p.alpha))), { A, alpha: 0.75 }, { tol: FD_TOL, label: 'addDiag scalar' });
    assertClose(gradient.alpha, traceJS(W), 1e-14);
    assertClose(gradient.A, flat(W), 0);
  });

  test('addDiag with a vector alpha', () => {
    const A = rng.matrix(3, 3);
    const W = rng.matrix(3, 3);
    const alpha = [0.1, -0.2, 0.3];
    const out = G.addDiag(A, alpha);
    assert.deepEqual(Array.from(out.data), flat(A.map((r, i) => r.map((a, j) => (i === j ? a + alpha[i] : a)))));
    const { gradient } = checkGrad((p) => G.sum(G.mul(W, G.addDiag(p.A, p.alpha))), { A, alpha }, { tol: FD_TOL, label: 'addDiag vector' });
    assertClose(gradient.alpha, W.map((r, i) => r[i]), 0);
    checkGrad((p) => G.sum(G.exp(G.addDiag(p.A, G.square(p.alpha)))), { A, alpha }, { tol: FD_TOL, label: 'addDiag nonlinear' });
  });
});

describe('reshape', () => {
  const rng = makeRng(1700);

  test('matrix to matrix, to vector, and back', () => {
    const M = rng.matrix(2, 3);
    const r1 = G.reshape(M, [3, 2]);
    checkShape(r1, [3, 2], 'reshape');
    assert.deepEqual(Array.from(r1.data), flat(M));
    const r2 = G.reshape(M, [6]);
    checkShape(r2, [6], 'reshape');
    assert.deepEqual(Array.from(r2.data), flat(M));
    const v = rng.vector(6);
    const r3 = G.reshape(v, [2, 3]);
    checkShape(r3, [2, 3], 'reshape');
    assert.deepEqual(Array.from(r3.data), v);

    const W = rng.matrix(3, 2);
    checkGrad((p) => G.sum(G.mul(W, G.reshape(p.M, [3, 2]))), { M }, { tol: FD_TOL, label: 'reshape 2x3->3x2' });
    const W2 = rng.matrix(2, 3);
    const { gradient } = checkGrad((p) => G.sum(G.mul(W2, G.reshape(p.v, [2, 3]))), { v }, { tol: FD_TOL, label: 'reshape 6->2x3' });
    assertClose(gradient.v, flat(W2), 0);
    checkGrad((p) => G.sum(G.square(G.reshape(p.M, [6]))), { M }, { tol: FD_TOL, label: 'reshape 2x3->6' });
  });

  test('to [] from a one-element vector and matrix', () => {
    const s1 = G.reshape([2.5], []);
    checkShape(s1, [], 'reshape to []');
    assert.equal(s1.data[0], 2.5);
    assert.equal(s1.isScalar, true);
    const s2 = G.reshape([[-4]], []);
    checkShape(s2, [], 'reshape [1x1] to []');
    assert.equal(s2.data[0], -4);
    const { gradient } = checkGrad((p) => G.mul(3, G.square(G.reshape(p.v, []))), { v: [1.5] }, { tol: FD_TOL, label: 'reshape [1]->[]' });
    assertClose(gradient.v, [9], 1e-14);
  });

  test('from [] to [1] and [1, 1]', () => {
    const a = G.reshape(3.25, [1]);
    checkShape(a, [1], 'reshape [] -> [1]');
    assert.equal(a.data[0], 3.25);
    const b = G.reshape(3.25, [1, 1]);
    checkShape(b, [1, 1], 'reshape [] -> [1,1]');
    const { gradient } = checkGrad((p) => G.sum(G.mul([[2]], G.exp(G.reshape(p.s, [1, 1])))), { s: 0.4 }, { tol: FD_TOL, label: 'reshape []->[1,1]' });
    assertClose(gradient.s, 2 * Math.exp(0.4), 1e-14);
    checkGrad((p) => G.sum(G.mul([5], G.reshape(p.s, [1]))), { s: 0.4 }, { tol: FD_TOL, label: 'reshape []->[1]' });
  });
});

describe('slice', () => {
  const rng = makeRng(1800);

  test('rank 1', () => {
    const v = rng.vector(7);
    const out = G.slice(v, [2], [3]);
    checkShape(out, [3], 'slice');
    assert.deepEqual(Array.from(out.data), v.slice(2, 5));
    const w = [0.5, -1, 2];
    const { gradient } = checkGrad((p) => G.sum(G.mul(w, G.slice(p.v, [2], [3]))), { v }, { tol: FD_TOL, label: 'slice 1' });
    assert.deepEqual(gradient.v, [0, 0, 0.5, -1, 2, 0, 0]);
    // whole range and single element
    assert.deepEqual(Array.from(G.slice(v, [0], [7]).data), v);
    assert.deepEqual(Array.from(G.slice(v, [6], [1]).data), [v[6]]);
  });

  test('rank 2', () => {
    const M = rng.matrix(4, 5);
    const out = G.slice(M, [1, 2], [2, 3]);
    checkShape(out, [2, 3], 'slice 2');
    assert.deepEqual(Array.from(out.data), [...M[1].slice(2, 5), ...M[2].slice(2, 5)]);
    const W = rng.matrix(2, 3);
    const { gradient } = checkGrad((p) => G.sum(G.mul(W, G.slice(p.M, [1, 2], [2, 3]))), { M }, { tol: FD_TOL, label: 'slice 2' });
    const expected = zerosJS(4, 5);
    for (let i = 0; i < 2; i++) for (let j = 0; j < 3; j++) expected[1 + i][2 + j] = W[i][j];
    assert.deepEqual(gradient.M, expected);
    // a column and a row
    assert.deepEqual(Array.from(G.slice(M, [0, 4], [4, 1]).data), M.map((r) => r[4]));
    assert.deepEqual(Array.from(G.slice(M, [3, 0], [1, 5]).data), M[3]);
  });

  test('overlapping slices accumulate', () => {
    const v = rng.vector(5);
    const { gradient } = checkGrad((p) => G.add(G.sum(G.slice(p.v, [0], [3])), G.sum(G.slice(p.v, [2], [3]))), { v }, { tol: FD_TOL, label: 'slice overlap' });
    assert.deepEqual(gradient.v, [1, 1, 2, 1, 1]);
  });
});

describe('concat', () => {
  const rng = makeRng(1900);

  test('scalars and vectors, mixing numbers, arrays and Vars', () => {
    const s = 0.3;
    const v = rng.vector(3);
    const out = G.concat([G.variable(s), 2, v, [7, 8], G.variable(-1)]);
    checkShape(out, [8], 'concat flat');
    assert.deepEqual(Array.from(out.data), [s, 2, ...v, 7, 8, -1]);
    const w = rng.vector(8);
    const { gradient } = checkGrad((p) => G.sum(G.mul(w, G.concat([p.s, 2, p.v, [7, 8], p.t]))), { s, v, t: -1 }, { tol: FD_TOL, label: 'concat flat' });
    assertClose(gradient.s, w[0], 0);
    assertClose(gradient.v, w.slice(2, 5), 0);
    assertClose(gradient.t, w[7], 0);
  });

  test('scalars only', () => {
    const out = G.concat([1, G.variable(2), 3]);
    checkShape(out, [3], 'concat scalars');
    assert.deepEqual(Array.from(out.data), [1, 2, 3]);
    checkGrad((p) => G.sum(G.square(G.concat([p.a, 1, p.b]))), { a: 0.5, b: -2 }, { tol: FD_TOL, label: 'concat scalars' });
  });

  test('matrices on axis 0 (the default)', () => {
    const A = rng.matrix(2, 3);
    const B = rng.matrix(1, 3);
    const out = G.concat([A, [[1, 2, 3]], B]);
    checkShape(out, [4, 3], 'concat axis 0');
    assert.deepEqual(Array.from(out.data), [...flat(A), 1, 2, 3, ...flat(B)]);
    const explicit = G.concat([A, [[1, 2, 3]], B], { axis: 0 });
    assert.deepEqual(Array.from(explicit.data), Array.from(out.data));
    const W = rng.matrix(4, 3);
    const { gradient } = checkGrad((p) => G.sum(G.mul(W, G.concat([p.A, [[1, 2, 3]], p.B]))), { A, B }, { tol: FD_TOL, label: 'concat axis 0' });
    assert.deepEqual(gradient.A, W.slice(0, 2));
    assert.deepEqual(gradient.B, W.slice(3, 4));
  });

  test('matrices on axis 1', () => {
    const A = rng.matrix(2, 3);
    const B = rng.matrix(2, 2);
    const out = G.concat([A, [[1], [2]], B], { axis: 1 });
    checkShape(out, [2, 6], 'concat axis 1');
    assert.deepEqual(Array.from(out.data), [...A[0], 1, ...B[0], ...A[1], 2, ...B[1]]);
    const W = rng.matrix(2, 6);
    const { gradient } = checkGrad((p) => G.sum(G.mul(W, G.concat([p.A, [[1], [2]], p.B], { axis: 1 }))), { A, B }, { tol: FD_TOL, label: 'concat axis 1' });
    assert.deepEqual(gradient.A, W.map((r) => r.slice(0, 3)));
    assert.deepEqual(gradient.B, W.map((r) => r.slice(4, 6)));
  });

  test('the same Var twice', () => {
    const v = [1, 2];
    const { gradient } = checkGrad((p) => G.sum(G.mul([1, 2, 3, 4], G.concat([p.v, p.v]))), { v }, { tol: FD_TOL, label: 'concat twice' });
    assert.deepEqual(gradient.v, [4, 6]);
  });
});

// --------------------------------------------------------------------------
// Linear algebra
// --------------------------------------------------------------------------

/** A = X X^T + n I from a parameter X, built with the package's ops. */
const spdFrom = (X, n) => G.addDiag(G.matmul(X, G.transpose(X)), n);
const spdFromJS = (X) => {
  const n = X.length;
  const A = matmulJS(X, transposeJS(X));
  for (let i = 0; i < n; i++) A[i][i] += n;
  return A;
};

/** A random triangular-friendly matrix: well away from zero on the diagonal. */
function triangularish(rng, n) {
  const T = rng.matrix(n, n);
  for (let i = 0; i < n; i++) T[i][i] = rng.awayFromZero(2, 3);
  return T;
}

describe('cholesky', () => {
  const rng = makeRng(2100);
  const n = 4;

  test('forward equals a plain-JS Cholesky factor, lower triangular', () => {
    const A = randomSPD(rng, n);
    const L = G.cholesky(A);
    checkShape(L, [n, n], 'cholesky');
    const Lref = choleskyJS(A);
    assertClose(L.data, flat(Lref), 1e-13);
    for (let i = 0; i < n; i++) for (let j = i + 1; j < n; j++) assert.equal(L.data[i * n + j], 0);
  });

  test('gradient through A = X X^T + nI', () => {
    const X = rng.matrix(n, n);
    const W = rng.matrix(n, n);
    checkGrad((p) => G.sum(G.mul(W, G.cholesky(spdFrom(p.X, n)))), { X }, { tol: FD_TOL, label: 'cholesky' });
    checkGrad((p) => G.sum(G.square(G.cholesky(spdFrom(p.X, n)))), { X }, { tol: FD_TOL, label: 'cholesky sq' });
  });

  test('A given directly: the adjoint is symmetric and matches symmetric directional derivatives', () => {
    const A = randomSPD(rng, n);
    const W = rng.matrix(n, n);
    const f = (M) => G.sum(G.mul(W, G.cholesky(M)));
    const { gradient } = G.valueAndGrad((p) => f(p.A))({ A });
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < i; j++) {
        assert.ok(Math.abs(gradient.A[i][j] - gradient.A[j][i]) <= 1e-12 * Math.max(1, Math.abs(gradient.A[i][j])),
          `adjoint not symmetric at ${i},${j}`);
      }
    }
    for (let trial = 0; trial < 3; trial++) {
      const E = rng.matrix(n, n);
      for (let i = 0; i < n; i++) for (let j = 0; j < i; j++) E[i][j] = E[j][i];
      const along = (t) => f(A.map((r, i) => r.map((a, j) => a + t * E[i][j]))).data[0];
      const h = 1e-6;
      const fd = (along(h) - along(-h)) / (2 * h);
      const analytic = gradient.A.reduce((s, r, i) => s + r.reduce((s2, g, j) => s2 + g * E[i][j], 0), 0);
      assert.ok(relErr(analytic, fd) <= FD_TOL, `directional ${analytic} vs ${fd}`);
    }
  });
});

describe('triangularSolve', () => {
  const rng = makeRng(2200);
  const n = 4;
  for (const lower of [true, false]) {
    for (const rhs of ['vector', 'matrix']) {
      test(`${lower ? 'lower' : 'upper'} with a ${rhs} right-hand side`, () => {
        const T = triangularish(rng, n); // full matrix: the other triangle must be ignored
        const B = rhs === 'vector' ? rng.vector(n) : rng.matrix(n, 2);
        const out = G.triangularSolve(T, B, { lower });
        checkShape(out, rhs === 'vector' ? [n] : [n, 2], 'triangularSolve');
        assertClose(out.data, flat(triSolveJS(T, B, lower)), 1e-13);

        const W = rhs === 'vector' ? rng.vector(n) : rng.matrix(n, 2);
        const { gradient } = checkGrad((p) => G.sum(G.mul(W, G.triangularSolve(p.T, p.B, { lower }))), { T, B },
          { tol: FD_TOL, label: 'triangularSolve' });
        // T's gradient is exactly zero on the triangle it does not read
        for (let i = 0; i < n; i++) {
          for (let j = 0; j < n; j++) {
            const outside = lower ? j > i : j < i;
            if (outside) assert.equal(gradient.T[i][j], 0, `gradient.T[${i}][${j}] should be 0`);
          }
        }
      });
    }
  }

  test('lower is the default', () => {
    const T = triangularish(rng, 3);
    const b = rng.vector(3);
    assert.deepEqual(Array.from(G.triangularSolve(T, b).data), Array.from(G.triangularSolve(T, b, { lower: true }).data));
    assertClose(G.triangularSolve(T, b).data, triSolveJS(T, b, true), 1e-13);
    assertClose(G.triangularSolve(T, b, {}).data, triSolveJS(T, b, true), 1e-13);
  });
});

describe('logdetPSD, solvePSD', () => {
  const rng = makeRng(2300);
  const n = 4;

  test('logdetPSD forward and gradient', () => {
    const A = randomSPD(rng, n);
    const out = G.logdetPSD(A);
    checkShape(out, [], 'logdetPSD');
    assertClose(out.data[0], logdetSPDJS(A), 1e-13);
    const X = rng.matrix(n, n);
    checkGrad((p) => G.logdetPSD(spdFrom(p.X, n)), { X }, { tol: FD_TOL, label: 'logdetPSD' });
  });

  for (const rhs of ['vector', 'matrix']) {
    test(`solvePSD with a ${rhs} right-hand side`, () => {
      const A = randomSPD(rng, n);
      const B = rhs === 'vector' ? rng.vector(n) : rng.matrix(n, 3);
      const out = G.solvePSD(A, B);
      checkShape(out, rhs === 'vector' ? [n] : [n, 3], 'solvePSD');
      assertClose(out.data, flat(matmulJS(invJS(A), B)), 1e-12);

      const X = rng.matrix(n, n);
      const W = rhs === 'vector' ? rng.vector(n) : rng.matrix(n, 3);
      checkGrad((p) => G.sum(G.mul(W, G.solvePSD(spdFrom(p.X, n), p.B))), { X, B }, { tol: FD_TOL, label: 'solvePSD' });
    });
  }

  test('quadratic form y^T A^-1 y', () => {
    const X = rng.matrix(n, n);
    const y = rng.vector(n);
    const { value } = checkGrad((p) => G.dot(p.y, G.solvePSD(spdFrom(p.X, n), p.y)), { X, y }, { tol: FD_TOL, label: 'quad form' });
    const Ainv = invJS(spdFromJS(X));
    assertClose(value, y.reduce((s, yi, i) => s + yi * matmulJS(Ainv, y)[i], 0), 1e-12);
  });
});

describe('solveGeneral, inv', () => {
  const rng = makeRng(2400);
  const n = 4;
  const general = () => {
    const A = rng.matrix(n, n);
    for (let i = 0; i < n; i++) A[i][i] += 3;
    return A;
  };

  for (const rhs of ['vector', 'matrix']) {
    test(`solveGeneral with a ${rhs} right-hand side`, () => {
      const A = general();
      const B = rhs === 'vector' ? rng.vector(n) : rng.matrix(n, 2);
      const out = G.solveGeneral(A, B);
      checkShape(out, rhs === 'vector' ? [n] : [n, 2], 'solveGeneral');
      assertClose(out.data, flat(matmulJS(invJS(A), B)), 1e-12);
      const W = rhs === 'vector' ? rng.vector(n) : rng.matrix(n, 2);
      checkGrad((p) => G.sum(G.mul(W, G.solveGeneral(p.A, p.B))), { A, B }, { tol: FD_TOL, label: 'solveGeneral' });
    });
  }

  test('solveGeneral needs pivoting', () => {
    const A = [[0, 2, 1], [1, 0, 3], [4, 1, 0]];
    const b = [1, 2, 3];
    assertClose(G.solveGeneral(A, b).data, matmulJS(invJS(A), b), 1e-13);
    checkGrad((p) => G.sum(G.solveGeneral(p.A, b)), { A }, { tol: FD_TOL, label: 'solveGeneral pivot' });
  });

  test('inv forward and gradient', () => {
    const A = general();
    const out = G.inv(A);
    checkShape(out, [n, n], 'inv');
    assertClose(out.data, flat(invJS(A)), 1e-12);
    const W = rng.matrix(n, n);
    checkGrad((p) => G.sum(G.mul(W, G.inv(p.A))), { A }, { tol: FD_TOL, label: 'inv' });
    // closed form: d sum(W ∘ A^-1) / dA = -A^-T W A^-T
    const { gradient } = G.valueAndGrad((p) => G.sum(G.mul(W, G.inv(p.A))))({ A });
    const AiT = transposeJS(invJS(A));
    const expected = matmulJS(matmulJS(AiT, W), AiT).map((r) => r.map((x) => -x));
    assert.ok(relErr(gradient.A, expected) <= 1e-11);
  });

  test('inv of an SPD matrix built from a parameter', () => {
    const X = rng.matrix(3, 3);
    checkGrad((p) => G.trace(G.inv(spdFrom(p.X, 3))), { X }, { tol: FD_TOL, label: 'trace inv' });
  });
});
