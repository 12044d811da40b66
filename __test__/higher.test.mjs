// Forward mode and second order: jvp, hvp, hessian, the forward-mode
// jacobian, and their compiled and rebuilt-from-JSON forms.
//
//   1. every op through jvp (against central differences of the forward
//      value along the tangent) and through hvp (against central differences
//      of valueAndGrad's gradient along the direction);
//   2. closed forms: d²log|A|, lgamma's Hessian (trigamma), and the plain-JS
//      exact references of shared/bench/higher.mjs (regression, GP,
//      reaction-diffusion, MLP);
//   3. consistency: Hessian symmetry, hvp = H·v, jvp = J·v, forward and
//      reverse Jacobians;
//   4. argument and result forms (maps in the caller's key order, tensors,
//      nested rows, numbers, inputs, unused parameters);
//   5. eager, compiled and rebuilt plans (JSON text, structuredClone, a
//      Worker) agree bit for bit;
//   6. compile traces f once per shape signature whatever method is used;
//   7. error messages.
//
// Every reference number is computed here in plain JavaScript, or by finite
// differences of values and gradients, never by the derivative under test.

import { describe, test, after } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import * as G from '../index.js';
import {
  makeRng, flat, relErr, assertClose, packParams, throwsMsg, randomSPD,
  matmulJS, invJS, traceJS, digammaJS,
} from './helpers.mjs';
import { sameBits } from './fixtures/bits.mjs';
import {
  regressionData, regression, regressionParams, regressionHessian,
  gpData, gp, gpParams, gpExact,
  rdData, rd, rdValue, rdJacobian,
  mlpSetup, mlp, mlpDirection, mlpHVP, mlpFlat,
} from '../bench/higher-models.mjs';
import { regressionHand } from '../bench/models.mjs';

const FD_TOL = 1e-6; // finite differences against autodiff
const FD_STEP = 1e-5; // central differences: truncation ~h², rounding ~eps/h
const TIGHT = 1e-12; // two exact computations of one quantity

// --------------------------------------------------------------------------
// plain-JS utilities for this file
// --------------------------------------------------------------------------

/** A structural description of a value's form: number / number[] / number[][] / tensor. */
function formOf(v) {
  if (typeof v === 'number') return 'number';
  if (v && v.data instanceof Float64Array && Array.isArray(v.shape)) return `tensor[${v.shape.join(',')}]`;
  if (Array.isArray(v) && Array.isArray(v[0])) return `rows${v.length}x${v[0].length}`;
  if (Array.isArray(v)) return `array${v.length}`;
  if (ArrayBuffer.isView(v)) return `typed${v.length}`;
  if (v && typeof v === 'object') return `{${Object.keys(v).map((k) => `${k}:${formOf(v[k])}`).join(',')}}`;
  return typeof v;
}

/** The gradient form valueAndGrad gives for a parameter form (SPEC §6 table). */
function gradientFormOf(x) {
  if (typeof x === 'number') return 'number';
  if (x && x.data instanceof Float64Array && Array.isArray(x.shape)) return `tensor[${x.shape.join(',')}]`;
  if (ArrayBuffer.isView(x)) return `array${x.length}`;
  if (Array.isArray(x) && (Array.isArray(x[0]) || ArrayBuffer.isView(x[0]))) return `rows${x.length}x${x[0].length}`;
  if (Array.isArray(x)) return `array${x.length}`;
  return `{${Object.keys(x).map((k) => `${k}:${gradientFormOf(x[k])}`).join(',')}}`;
}

/** A random value of the same structure as `x` (unpacked from a flat random vector). */
function randomLike(rng, x, symmetricKeys = []) {
  const P = packParams(x);
  const d = P.unpack(Float64Array.from(rng.vector(P.x.length)));
  const symmetrize = (M) => {
    for (let i = 0; i < M.length; i++) for (let j = 0; j < i; j++) M[i][j] = M[j][i];
    return M;
  };
  if (symmetricKeys === true) return symmetrize(d);
  for (const k of symmetricKeys) symmetrize(d[k]);
  return d;
}

/** Central differences, along direction d, of a vector-valued function of a flat point. */
function fdAlong(fn, x0, d, h = FD_STEP) {
  let scale = 1;
  for (const xi of x0) scale = Math.max(scale, Math.abs(xi));
  const step = h * scale;
  const xp = Float64Array.from(x0, (xi, i) => xi + step * d[i]);
  const xm = Float64Array.from(x0, (xi, i) => xi - step * d[i]);
  const a = fn(xp);
  const b = fn(xm);
  return a.map((ai, i) => (ai - b[i]) / (2 * step));
}

/** Forward value of f (any output rank) at a flat point laid out like P, flattened. */
const valueAt = (f, P, inputs) => (z) => flat(G.valueAndGrad(f).value(P.unpack(z), inputs));
/** valueAndGrad's gradient of scalar f at a flat point laid out like P, flattened in P's key order. */
const gradientAt = (f, P, inputs) => (z) => P.flatGrad(G.valueAndGrad(f)(P.unpack(z), inputs).gradient);

/** The Jacobian by reverse mode one output at a time (valueAndGrad of y·eᵢ): an independent reference. */
function rowsByGradient(f, x, inputs) {
  const P = packParams(x);
  const m = flat(G.valueAndGrad(f).value(x, inputs)).length;
  return Array.from({ length: m }, (_, i) => {
    const e = new Array(m).fill(0);
    e[i] = 1;
    const yi = (p, d) => G.dot(G.reshape(f(p, d), [m]), e);
    return P.flatGrad(G.valueAndGrad(yi)(x, inputs).gradient);
  });
}

const matVec = (M, v) => M.map((row) => row.reduce((s, a, j) => s + a * v[j], 0));

/** assert relErr(actual, expected) <= tol with a readable message. */
function near(actual, expected, tol, label) {
  const err = relErr(actual, expected);
  assert.ok(err <= tol, `${label}: relErr ${err} > ${tol}\n  got      ${flat(actual).slice(0, 12).join(', ')}\n  expected ${flat(expected).slice(0, 12).join(', ')}`);
}

/** The largest |H[i][j] − H[j][i]| over max(1, max |H|). */
function asymmetry(H) {
  let num = 0;
  let den = 1;
  for (let i = 0; i < H.length; i++) {
    assert.equal(H[i].length, H.length, 'Hessian must be square');
    for (let j = 0; j < H.length; j++) {
      num = Math.max(num, Math.abs(H[i][j] - H[j][i]));
      den = Math.max(den, Math.abs(H[i][j]));
    }
  }
  return num / den;
}

/** The thrown message of fn (which must throw an Error). */
function messageOf(fn) {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof Error, `expected an Error, got ${e}`);
    return e.message;
  }
  assert.fail('expected a throw');
}

/** All four rebuilt forms of a compiled function's plan. */
function rebuilt(c) {
  const json = c.toJSON();
  return [
    ['compileFromJSON(toJSON())', G.compileFromJSON(json)],
    ['through JSON.stringify', G.compileFromJSON(JSON.parse(JSON.stringify(json)))],
    ['through structuredClone', G.compileFromJSON(structuredClone(json))],
  ];
}

// --------------------------------------------------------------------------
// 1. every op, through jvp and hvp
// --------------------------------------------------------------------------

const opRng = makeRng(20251201);
const num = (lo = -1, hi = 1) => opRng.uniform(lo, hi);
const vec = (n, lo = -1, hi = 1) => opRng.vector(n, lo, hi);
const mat = (m, n, lo = -1, hi = 1) => opRng.matrix(m, n, lo, hi);
const away = () => opRng.awayFromZero(0.5, 1.5);
const awayVec = (n) => Array.from({ length: n }, away);
const awayMat = (m, n) => Array.from({ length: m }, () => awayVec(n));
/** b's entries at least 0.2 from a's (broadcasting a as maximum/minimum would). */
const apart = (a, shape) => {
  const at = (i, j) => (typeof a === 'number' ? a : Array.isArray(a[0]) ? a[i][j] : a[j]);
  const off = () => opRng.awayFromZero(0.2, 0.8);
  if (shape.length === 0) return at(0, 0) + off();
  if (shape.length === 1) return Array.from({ length: shape[0] }, (_, j) => at(0, j) + off());
  return Array.from({ length: shape[0] }, (_, i) => Array.from({ length: shape[1] }, (_, j) => at(i, j) + off()));
};
/** A triangular-solve operand: random, with a diagonal of magnitude 2..3. */
const triangular = (n) => {
  const T = mat(n, n);
  for (let i = 0; i < n; i++) T[i][i] = opRng.awayFromZero(2, 3);
  return T;
};
/** Well-conditioned general square matrix. */
const general = (n) => {
  const A = mat(n, n);
  for (let i = 0; i < n; i++) A[i][i] += 3;
  return A;
};

/**
 * [name, f, x, { sym, inputs }]: f(p, d?) returns any rank; sym lists the
 * matrix parameters that must stay symmetric (directions are symmetrized).
 */
const opCases = [];

const binaryShapes = [
  ['same shapes [2×3]', (g) => [g(2, 3), g(2, 3)]],
  ['vectors [4]', (g) => [g(4), g(4)]],
  ['scalar left', (g) => [g(), g(2, 3)]],
  ['scalar right', (g) => [g(2, 3), g()]],
  ['row left: [3] against [2×3]', (g) => [g(3), g(2, 3)]],
  ['row right: [2×3] against [3]', (g) => [g(2, 3), g(3)]],
];
const plainGen = (m, n) => (m === undefined ? num() : n === undefined ? vec(m) : mat(m, n));
const awayGen = (m, n) => (m === undefined ? away() : n === undefined ? awayVec(m) : awayMat(m, n));
for (const [opName, op] of [['add', G.add], ['sub', G.sub], ['mul', G.mul], ['div', G.div]]) {
  for (const [shapeName, make] of binaryShapes) {
    const [a] = make(plainGen);
    const [, b] = make(opName === 'div' ? awayGen : plainGen);
    opCases.push([`${opName}, ${shapeName}`, (p) => op(p.a, p.b), { a, b }]);
  }
}
opCases.push(['add, three operands (variadic)', (p) => G.add(p.a, p.b, p.c), { a: vec(3), b: num(), c: mat(2, 3) }]);
opCases.push(['mul, three operands (variadic)', (p) => G.mul(p.a, p.b, p.c), { a: vec(3), b: num(), c: mat(2, 3) }]);
opCases.push(['mul by an input', (p, d) => G.mul(p.a, d.k), { a: mat(2, 3) }, { inputs: { k: mat(2, 3) } }]);
opCases.push(['div of an input by a parameter', (p, d) => G.div(d.k, p.a), { a: awayVec(3) }, { inputs: { k: vec(3) } }]);
opCases.push(['div of an input matrix by a scalar parameter (a kernel\'s D²/ℓ²)', (p, d) => G.div(d.k, p), away(), { inputs: { k: mat(2, 3) } }]);

for (const [opName, op] of [['maximum', G.maximum], ['minimum', G.minimum]]) {
  const a = mat(2, 3);
  opCases.push([`${opName}, same shapes, away from ties`, (p) => op(p.a, p.b), { a, b: apart(a, [2, 3]) }]);
  const s = num();
  opCases.push([`${opName}, scalar left, away from ties`, (p) => op(p.a, p.b), { a: s, b: apart(s, [2, 3]) }]);
  const r = vec(3);
  opCases.push([`${opName}, row right, away from ties`, (p) => op(p.b, p.a), { a: r, b: apart(r, [2, 3]) }]);
}
opCases.push(['relu, away from 0', (x) => G.relu(x), awayMat(2, 3)]);

const unaries = [
  ['neg', (x) => G.neg(x), () => mat(2, 3)],
  ['exp', (x) => G.exp(x), () => mat(2, 3)],
  ['log', (x) => G.log(x), () => mat(2, 3, 0.3, 2)],
  ['sqrt', (x) => G.sqrt(x), () => mat(2, 3, 0.3, 2)],
  ['square', (x) => G.square(x), () => mat(2, 3)],
  ['tanh', (x) => G.tanh(x), () => mat(2, 3, -2, 2)],
  ['sigmoid', (x) => G.sigmoid(x), () => mat(2, 3, -3, 3)],
  ['lgamma', (x) => G.lgamma(x), () => mat(2, 3, 0.4, 4)],
  ['pow, k = 2.5', (x) => G.pow(x, 2.5), () => mat(2, 3, 0.3, 2)],
  ['pow, k = -1.5', (x) => G.pow(x, -1.5), () => vec(4, 0.5, 2)],
  ['pow, k = 3, any sign', (x) => G.pow(x, 3), () => vec(4)],
  ['pow, k = 1, any sign', (x) => G.pow(x, 1), () => vec(4)],
];
for (const [name, f, gen] of unaries) opCases.push([name, f, gen()]);
opCases.push(['exp of a number parameter', (x) => G.exp(x), 0.3]);
opCases.push(['tanh of a tensor parameter', (x) => G.tanh(x), G.tensor(vec(6), [2, 3])]);
opCases.push(['log of a Float64Array parameter', (x) => G.log(x), Float64Array.from(vec(4, 0.5, 2))]);

opCases.push(['sum of a matrix (inside exp)', (x) => G.exp(G.sum(x)), mat(2, 3, -0.3, 0.3)]);
opCases.push(['mean of a matrix (inside square)', (x) => G.square(G.mean(x)), mat(2, 3)]);
opCases.push(['matmul, matrix × matrix', (p) => G.matmul(p.A, p.B), { A: mat(2, 3), B: mat(3, 4) }]);
opCases.push(['matmul, matrix × vector', (p) => G.matmul(p.A, p.v), { A: mat(3, 2), v: vec(2) }]);
opCases.push(['matmul, input matrix × parameter vector', (p, d) => G.matmul(d.X, p), vec(3), { inputs: { X: mat(4, 3) } }]);
opCases.push(['dot', (p) => G.dot(p.u, p.v), { u: vec(4), v: vec(4) }]);
opCases.push(['transpose', (x) => G.transpose(x), mat(2, 3)]);
opCases.push(['diagPart', (x) => G.diagPart(x), mat(3, 3)]);
opCases.push(['trace (inside square)', (x) => G.square(G.trace(x)), mat(3, 3)]);
opCases.push(['addDiag, scalar diagonal', (p) => G.addDiag(p.A, p.s), { A: mat(3, 3), s: num() }]);
opCases.push(['addDiag, vector diagonal', (p) => G.addDiag(p.A, p.d), { A: mat(3, 3), d: vec(3) }]);
opCases.push(['reshape [2×3] → [3×2]', (x) => G.reshape(x, [3, 2]), mat(2, 3)]);
opCases.push(['reshape [6] → [2×3]', (x) => G.reshape(x, [2, 3]), vec(6)]);
opCases.push(['reshape [2×3] → [6]', (x) => G.reshape(x, [6]), mat(2, 3)]);
opCases.push(['reshape [1] → scalar', (x) => G.exp(G.reshape(x, [])), vec(1)]);
opCases.push(['slice of a vector', (x) => G.slice(x, [1], [3]), vec(5)]);
opCases.push(['slice of a matrix', (x) => G.slice(x, [1, 1], [2, 2]), mat(3, 4)]);
opCases.push(['concat of vectors and a scalar', (p) => G.concat([p.a, p.s, 0.5, p.b]), { a: vec(2), s: num(), b: vec(3) }]);
opCases.push(['concat of matrices, axis 0', (p) => G.concat([p.A, p.B], { axis: 0 }), { A: mat(2, 3), B: mat(1, 3) }]);
opCases.push(['concat of matrices, axis 1', (p) => G.concat([p.A, p.B], { axis: 1 }), { A: mat(2, 3), B: mat(2, 2) }]);
opCases.push(['cholesky', (A) => G.cholesky(A), randomSPD(opRng, 3), { sym: true }]);
opCases.push(['triangularSolve, lower, matrix right-hand side', (p) => G.triangularSolve(p.T, p.B, { lower: true }), { T: triangular(3), B: mat(3, 2) }]);
opCases.push(['triangularSolve, lower, vector right-hand side', (p) => G.triangularSolve(p.T, p.b), { T: triangular(3), b: vec(3) }]);
opCases.push(['triangularSolve, upper, matrix right-hand side', (p) => G.triangularSolve(p.T, p.B, { lower: false }), { T: triangular(3), B: mat(3, 2) }]);
opCases.push(['triangularSolve, upper, vector right-hand side', (p) => G.triangularSolve(p.T, p.b, { lower: false }), { T: triangular(3), b: vec(3) }]);
opCases.push(['solveGeneral, matrix right-hand side', (p) => G.solveGeneral(p.A, p.B), { A: general(3), B: mat(3, 2) }]);
opCases.push(['solveGeneral, vector right-hand side', (p) => G.solveGeneral(p.A, p.b), { A: general(3), b: vec(3) }]);
opCases.push(['inv', (A) => G.inv(A), general(3)]);
opCases.push(['logdetPSD', (A) => G.logdetPSD(A), randomSPD(opRng, 3), { sym: true }]);
opCases.push(['solvePSD, matrix right-hand side', (p) => G.solvePSD(p.A, p.B), { A: randomSPD(opRng, 3), B: mat(3, 2) }, { sym: ['A'] }]);
opCases.push(['solvePSD, vector right-hand side', (p) => G.solvePSD(p.A, p.b), { A: randomSPD(opRng, 3), b: vec(3) }, { sym: ['A'] }]);
opCases.push(['cholesky of a matrix built from a parameter (S Sᵀ + 3I)', (S) => G.cholesky(G.addDiag(G.matmul(S, G.transpose(S)), 3)), mat(3, 3)]);

/**
 * A scalar objective from an op's output y: ½ Σ W₁∘y² + Σ W₂∘y, so its
 * Hessian holds both the op's first derivatives (through y²) and its second.
 */
function scalarize(f, x, inputs, rng) {
  const y = G.valueAndGrad(f).value(x, inputs);
  const W1 = typeof y === 'number' ? rng.uniform(0.5, 1.5) : randomLike(rng, y);
  const W2 = typeof y === 'number' ? rng.uniform(-1, 1) : randomLike(rng, y);
  return (p, d) => {
    const out = f(p, d);
    return G.add(G.mul(0.5, G.sum(G.mul(W1, G.square(out)))), G.sum(G.mul(W2, out)));
  };
}

describe('1. every op through jvp (central differences of the value) and hvp (of the gradient)', () => {
  for (const [name, f, x, opts = {}] of opCases) {
    describe(name, () => {
      const rng = makeRng(name.length * 7919 + 1);
      const inputs = opts.inputs;
      const sym = opts.sym ?? [];
      const v = randomLike(rng, x, sym);
      const P = packParams(x);
      const vFlat = P.flatGrad(v);
      const s = scalarize(f, x, inputs, rng);

      test('jvp: value is the forward value, tangent is the directional derivative', () => {
        const forward = G.valueAndGrad(f).value(x, inputs);
        const { value, tangent } = G.jvp(f)(x, v, inputs);
        assert.equal(formOf(value), formOf(forward), 'value form');
        assert.equal(formOf(tangent), formOf(forward), 'tangent form');
        assertClose(value, forward, 1e-14, 'value');
        near(flat(tangent), fdAlong(valueAt(f, P, inputs), P.x, vFlat), FD_TOL, 'tangent vs finite differences');
      });

      test('hvp: gradient is valueAndGrad\'s, hvp is the derivative of the gradient along v', () => {
        const vg = G.valueAndGrad(s)(x, inputs);
        const r = G.hvp(s)(x, v, inputs);
        assert.equal(typeof r.value, 'number');
        assertClose(r.value, vg.value, 1e-14, 'value');
        assert.equal(formOf(r.gradient), gradientFormOf(x), 'gradient form');
        assert.equal(formOf(r.hvp), gradientFormOf(x), 'hvp form');
        near(P.flatGrad(r.gradient), P.flatGrad(vg.gradient), TIGHT, 'gradient vs valueAndGrad');
        near(P.flatGrad(r.hvp), fdAlong(gradientAt(s, P, inputs), P.x, vFlat), FD_TOL, 'hvp vs finite differences of the gradient');
      });

      test('hessian: symmetric, H·v equals hvp, gradient equals hvp\'s', () => {
        const r = G.hessian(s)(x, inputs);
        const h = G.hvp(s)(x, v, inputs);
        const q = P.x.length;
        assert.equal(r.hessian.length, q);
        assert.ok(asymmetry(r.hessian) <= TIGHT, `asymmetry ${asymmetry(r.hessian)}`);
        assert.equal(formOf(r.gradient), gradientFormOf(x), 'gradient form');
        near(P.flatGrad(r.gradient), P.flatGrad(h.gradient), TIGHT, 'gradient');
        near(matVec(r.hessian, vFlat), P.flatGrad(h.hvp), TIGHT, 'H·v vs hvp');
        assertClose(r.value, h.value, 0, 'value');
      });

      test('eager, compiled and rebuilt plans agree bit for bit (jvp, hvp, hessian)', () => {
        const eJ = G.jvp(f)(x, v, inputs);
        const eH = G.hvp(s)(x, v, inputs);
        const eHs = G.hessian(s)(x, inputs);
        const cf = G.compile(f);
        const cs = G.compile(s);
        sameBits(cf.jvp(x, v, inputs), eJ, 'compiled jvp');
        sameBits(cs.hvp(x, v, inputs), eH, 'compiled hvp');
        sameBits(cs.hessian(x, inputs), eHs, 'compiled hessian');
        sameBits(cf.jvp(x, v, inputs), eJ, 'compiled jvp, replayed');
        sameBits(cs.hvp(x, v, inputs), eH, 'compiled hvp, replayed');
        for (const [how, r] of rebuilt(cf)) sameBits(r.jvp(x, v, inputs), eJ, `${how} jvp`);
        for (const [how, r] of rebuilt(cs)) {
          sameBits(r.hvp(x, v, inputs), eH, `${how} hvp`);
          sameBits(r.hessian(x, inputs), eHs, `${how} hessian`);
        }
      });
    });
  }
});

// --------------------------------------------------------------------------
// 2. closed forms
// --------------------------------------------------------------------------

describe('2. closed forms', () => {
  const rng = makeRng(4242);
  const symmetric = (n) => {
    const M = rng.matrix(n, n);
    for (let i = 0; i < n; i++) for (let j = 0; j < i; j++) M[i][j] = M[j][i];
    return M;
  };

  describe('d² log|A| along (U, V) = −tr(A⁻¹ U A⁻¹ V)', () => {
    const n = 4;
    const A = randomSPD(rng, n);
    const U = symmetric(n);
    const V = symmetric(n);
    const Ai = invJS(A);
    const expected = -traceJS(matmulJS(matmulJS(Ai, U), matmulJS(Ai, V)));
    const logdet = (M) => G.logdetPSD(M);

    test('hvp: ⟨U, H·V⟩, and the gradient is A⁻¹', () => {
      for (const h of [G.hvp(logdet), G.compile(logdet).hvp]) {
        const r = h(A, V);
        near(r.gradient, Ai, TIGHT, 'gradient = A⁻¹');
        const got = flat(U).reduce((acc, u, i) => acc + u * flat(r.hvp)[i], 0);
        near([got], [expected], TIGHT, 'bilinear form');
        // symmetric in the two directions
        const swapped = h(A, U);
        const got2 = flat(V).reduce((acc, u, i) => acc + u * flat(swapped.hvp)[i], 0);
        near([got2], [expected], TIGHT, 'bilinear form, directions swapped');
      }
    });

    test('hessian: uᵀ H v over the 16 entries', () => {
      for (const h of [G.hessian(logdet), G.compile(logdet).hessian]) {
        const r = h(A);
        assert.equal(r.hessian.length, n * n);
        const got = flat(U).reduce((acc, u, i) => acc + u * matVec(r.hessian, flat(V))[i], 0);
        near([got], [expected], TIGHT, 'uᵀ H v');
      }
    });

    test('jvp: d log|A| along V = tr(A⁻¹ V)', () => {
      const r = G.jvp(logdet)(A, V);
      near([r.tangent], [traceJS(matmulJS(Ai, V))], TIGHT, 'tangent');
    });
  });

  test('powers at 0: the Hessian of Σ (x + x²/2 + x³/3) is diag(1 + 2x), and that of Σ x¹ is 0 (no 0 · 0⁻¹)', () => {
    const x = [0, -0.5, 1.5];
    const poly = (z) => G.add(G.sum(G.pow(z, 1)), G.mul(0.5, G.sum(G.pow(z, 2))), G.mul(1 / 3, G.sum(G.pow(z, 3))));
    const linear = (z) => G.sum(G.pow(z, 1));
    for (const [how, make] of [['eager', (f) => G.hessian(f)], ['compiled', (f) => G.compile(f).hessian]]) {
      const H = make(poly)(x).hessian;
      near(H.flat(), x.flatMap((xi, i) => x.map((_, j) => (i === j ? 1 + 2 * xi : 0))), TIGHT, `${how}: polynomial`);
      assert.deepEqual(make(linear)(x).hessian.flat().map(Math.abs), [0, 0, 0, 0, 0, 0, 0, 0, 0], `${how}: Σ x¹`);
    }
    assert.deepEqual(G.hvp(linear)(x, [1, 1, 1]).hvp.map(Math.abs), [0, 0, 0], 'hvp of Σ x¹');
  });

  describe('lgamma: the Hessian is diagonal with trigamma on it', () => {
    const x = [1, 0.5, 2.3, 3.3, 4];
    const f = (z) => G.sum(G.lgamma(z));
    const pi2 = Math.PI * Math.PI;

    test('ψ\'(1) = π²/6, ψ\'(0.5) = π²/2, ψ\'(4) = π²/6 − 1 − 1/4 − 1/9, ψ\'(x) = ψ\'(x+1) + 1/x²', () => {
      for (const [how, h] of [['eager', G.hessian(f)], ['compiled', G.compile(f).hessian]]) {
        const { hessian: H } = h(x);
        for (let i = 0; i < x.length; i++) {
          for (let j = 0; j < x.length; j++) if (i !== j) assert.equal(Math.abs(H[i][j]), 0, `${how}: H[${i}][${j}] = ${H[i][j]}`);
        }
        near([H[0][0]], [pi2 / 6], TIGHT, `${how}: ψ'(1)`);
        near([H[1][1]], [pi2 / 2], TIGHT, `${how}: ψ'(0.5)`);
        near([H[4][4]], [pi2 / 6 - 1 - 1 / 4 - 1 / 9], TIGHT, `${how}: ψ'(4)`);
        near([H[2][2] - H[3][3]], [1 / (2.3 * 2.3)], TIGHT, `${how}: ψ'(2.3) − ψ'(3.3)`);
      }
    });

    test('hvp along ones is the trigamma vector; jvp along ones is Σ digamma', () => {
      const ones = x.map(() => 1);
      const H = G.hessian(f)(x).hessian;
      const r = G.hvp(f)(x, ones);
      near(r.hvp, H.map((row, i) => row[i]), TIGHT, 'hvp = diag(H)');
      near(r.gradient, x.map(digammaJS), 1e-10, 'gradient = digamma');
      const t = G.jvp((z) => G.lgamma(z))(x, ones);
      near(t.tangent, x.map(digammaJS), 1e-10, 'jvp tangent = digamma');
    });
  });

  describe('regression: the 15×15 Hessian', () => {
    const d = regressionData();
    const q = regressionParams();
    const f = regression(G, d);
    const expected = regressionHessian(d, q);

    test('eager hessian equals regressionHessian; gradient the hand-derived one', () => {
      const r = G.hessian(f)(q);
      assert.equal(r.hessian.length, 15);
      near(r.hessian, expected, 1e-10, 'hessian');
      const hand = regressionHand(d)(q);
      near([r.value], [hand.value], 1e-12, 'value');
      near(packParams(q).flatGrad(r.gradient), packParams(q).flatGrad(hand.gradient), 1e-10, 'gradient');
      assert.deepEqual(Object.keys(r.gradient), ['intercept', 'beta', 'logSigma']);
    });

    test('compiled hessian equals regressionHessian', () => {
      near(G.compile(f).hessian(q).hessian, expected, 1e-10, 'compiled hessian');
    });

    test('eager, compiled and rebuilt hessians agree bit for bit', () => {
      // The compiled ones run eight directions a group: the first group's
      // beta directions start at lane 1 (the intercept's is lane 0), the
      // second's run past X's row, both read one load a row.
      const c = G.compile(f);
      const eager = G.hessian(f)(q);
      for (const [how, r] of [['compiled', c.hessian(q)], ['rebuilt', G.compileFromJSON(c.toJSON()).hessian(q)]]) {
        assert.deepStrictEqual(r.hessian, eager.hessian, `${how} hessian`);
        assert.deepStrictEqual(r.gradient, eager.gradient, `${how} gradient`);
      }
    });

    test('hvp along each basis direction is a column of regressionHessian', () => {
      const h = G.compile(f).hvp;
      const P = packParams(q);
      for (const j of [0, 5, 14]) {
        const e = new Float64Array(15);
        e[j] = 1;
        near(P.flatGrad(h(q, P.unpack(e)).hvp), expected.map((row) => row[j]), 1e-10, `column ${j}`);
      }
    });
  });

  for (const n of [20, 50]) {
    describe(`GP log marginal likelihood, n = ${n}: the 2×2 Hessian`, () => {
      const d = gpData(n);
      const p = gpParams();
      const f = gp(G, d);
      const e = gpExact(d, p);

      test('eager and compiled hessian and gradient equal gpExact', () => {
        for (const [how, h] of [['eager', G.hessian(f)], ['compiled', G.compile(f).hessian]]) {
          const r = h(p);
          near([r.value], [e.value], 1e-9, `${how} value`);
          near([r.gradient.l, r.gradient.v], e.gradient, 1e-9, `${how} gradient`);
          near(r.hessian, e.hessian, 1e-9, `${how} hessian`);
        }
      });

      test('hvp along (1, −2) equals gpExact\'s H·v', () => {
        const r = G.hvp(f)(p, { l: 1, v: -2 });
        const Hv = matVec(e.hessian, [1, -2]);
        near([r.hvp.l, r.hvp.v], Hv, 1e-9, 'hvp');
      });
    });
  }

  describe('reaction–diffusion rd30: the 30×30 Jacobian', () => {
    const d = rdData(30);
    const f = rd(G, d);
    const J = rdJacobian(d, d.u);
    const n = d.n;
    const eye = Array.from({ length: n }, (_, i) => Array.from({ length: n }, (_, j) => (i === j ? 1 : 0)));

    test('the forward value is rdValue (the workload is what the reference says)', () => {
      near(G.valueAndGrad(f).value(d.u), rdValue(d, d.u), 1e-12, 'value');
    });

    test('eager SPEC jacobian (square: forward)', () => {
      near(G.jacobian(f)(d.u), J, 1e-12, 'jacobian');
    });

    test('compiled .jacobian (square: forward)', () => {
      near(G.compile(f).jacobian(d.u), J, 1e-12, 'compiled jacobian');
    });

    test('compiled .jacobian of [f(u); u] (tall: forward) is [J; I]', () => {
      const tall = (u) => G.concat([f(u), u]);
      near(G.compile(tall).jacobian(d.u), [...J, ...eye], 1e-12, 'compiled forward jacobian');
    });

    test('eager SPEC jacobian of [f(u); u] (tall: forward) is [J; I]', () => {
      const tall = (u) => G.concat([f(u), u]);
      near(G.jacobian(tall)(d.u), [...J, ...eye], 1e-12, 'eager forward jacobian');
    });

    test('compiled .jacobian over {u, w} with w unread (wide: reverse) is [J | 0]', () => {
      const wide = (p) => f(p.u);
      const got = G.compile(wide).jacobian({ u: d.u, w: [0.5, 0.25] });
      near(got, J.map((row) => [...row, 0, 0]), 1e-12, 'compiled reverse jacobian');
    });

    test('jvp along a direction is J·v', () => {
      const v = makeRng(5).vector(n);
      for (const [how, j] of [['eager', G.jvp(f)], ['compiled', G.compile(f).jvp]]) {
        const r = j(d.u, v);
        near(r.value, rdValue(d, d.u), 1e-12, `${how} value`);
        near(r.tangent, matVec(J, v), 1e-12, `${how} tangent`);
      }
    });
  });

  describe('MLP: H·v over all 321 parameters, the batch as inputs', () => {
    const { params, batch } = mlpSetup(G);
    const v = mlpDirection(G);
    const f = mlp(G);
    const expected = mlpHVP(params, batch, v);

    test('eager hvp equals mlpHVP', () => {
      const r = G.hvp(f)(params, v, batch);
      assert.equal(formOf(r.hvp), formOf(G.valueAndGrad(f)(params, batch).gradient));
      near(mlpFlat(r.hvp), expected, 1e-10, 'hvp');
      near(mlpFlat(r.gradient), mlpFlat(G.valueAndGrad(f)(params, batch).gradient), TIGHT, 'gradient');
    });

    test('compiled and rebuilt hvp equal mlpHVP and the eager result bit for bit', () => {
      const e = G.hvp(f)(params, v, batch);
      const c = G.compile(f);
      const r = c.hvp(params, v, batch);
      near(mlpFlat(r.hvp), expected, 1e-10, 'compiled hvp');
      sameBits(r, e, 'compiled vs eager');
      for (const [how, rb] of rebuilt(c)) sameBits(rb.hvp(params, v, batch), e, how);
    });

    test('jvp of the loss along v equals gradient·v', () => {
      const r = G.jvp(f)(params, v, batch);
      const g = mlpFlat(G.valueAndGrad(f)(params, batch).gradient);
      const vf = mlpFlat(v);
      near([r.tangent], [g.reduce((s, gi, i) => s + gi * vf[i], 0)], TIGHT, 'tangent');
    });
  });

  // Solves of a fixed matrix run in lanes of eight directions (lane_products.rs).
  describe('a fixed covariance and triangle: H = −K⁻¹ − diag(σ(x)(1 − σ(x))) + 2 T⁻ᵀT⁻¹', () => {
    const n = 20;
    const K = randomSPD(rng, n);
    const T = rng.matrix(n, n).map((row, i) => row.map((t, j) => (j < i ? 0 : i === j ? 2 + Math.abs(t) : 0.3 * t)));
    const x = rng.vector(n);
    const f = (p, d) => G.sub(
      G.add(G.mul(-0.5, G.dot(p, G.solvePSD(d.K, p))), G.sum(G.square(G.triangularSolve(T, p, { lower: false })))),
      G.sum(G.log(G.add(1, G.exp(p)))),
    );
    const Ki = invJS(K);
    const Ti = invJS(T);
    const TtT = matmulJS(Ti.map((_, i) => Ti.map((row) => row[i])), Ti);
    const expected = Ki.map((row, i) => row.map((k, j) => {
      const s = 1 / (1 + Math.exp(-x[i]));
      return -k + 2 * TtT[i][j] - (i === j ? s * (1 - s) : 0);
    }));

    test('eager, compiled and rebuilt Hessians equal it, and central differences of the gradient', () => {
      const eager = G.hessian(f)(x, { K });
      near(eager.hessian, expected, 1e-10, 'eager Hessian');
      const c = G.compile(f);
      sameBits(c.hessian(x, { K }), eager, 'compiled vs eager');
      for (const [how, r] of rebuilt(c)) sameBits(r.hessian(x, { K }), eager, how);
      const fd = x.map((_, j) => {
        const h = FD_STEP;
        const at = (d) => c(x.map((v, k) => (k === j ? v + d : v)), { K }).gradient;
        const [plus, minus] = [at(h), at(-h)];
        return plus.map((g, i) => (g - minus[i]) / (2 * h));
      });
      near(fd, expected, FD_TOL, 'central differences');
    });

    test('hvp equals H·v, compiled and eager', () => {
      const v = rng.vector(n);
      const Hv = expected.map((row) => row.reduce((acc, h, j) => acc + h * v[j], 0));
      near(G.compile(f).hvp(x, v, { K }).hvp, Hv, 1e-10, 'compiled hvp');
      near(G.hvp(f)(x, v, { K }).hvp, Hv, 1e-10, 'eager hvp');
    });
  });
  describe('tr(A⁻¹S) through inv of a 12×12 parameter: uᵀHv = tr(A⁻¹UA⁻¹VA⁻¹S) + tr(A⁻¹VA⁻¹UA⁻¹S)', () => {
    // From 12 columns the solves' adjoints take faer's kernels, and each of
    // the 144 directions solves its tangent with the factors the first left.
    const n = 12;
    const A = rng.matrix(n, n).map((row, i) => row.map((a, j) => (i === j ? a + 4 : a)));
    const S = rng.matrix(n, n);
    const f = (M) => G.trace(G.matmul(G.inv(M), S));
    const Ai = invJS(A);
    const along = (U, V) => {
      const AiU = matmulJS(Ai, U);
      const AiV = matmulJS(Ai, V);
      const AiS = matmulJS(Ai, S);
      return traceJS(matmulJS(matmulJS(AiU, AiV), AiS)) + traceJS(matmulJS(matmulJS(AiV, AiU), AiS));
    };

    test('eager, compiled and rebuilt Hessians agree bit for bit and with the closed form', () => {
      const eager = G.hessian(f)(A);
      const c = G.compile(f);
      sameBits(c.hessian(A), eager, 'compiled vs eager');
      for (const [how, r] of rebuilt(c)) sameBits(r.hessian(A), eager, how);
      const H = eager.hessian;
      assert.equal(H.length, n * n);
      assert.ok(asymmetry(H) <= TIGHT, `asymmetry ${asymmetry(H)}`);
      for (let k = 0; k < 3; k++) {
        const [U, V] = [rng.matrix(n, n), rng.matrix(n, n)];
        const got = flat(U).reduce((acc, u, e) => acc + u * matVec(H, flat(V))[e], 0);
        near([got], [along(U, V)], 1e-10, `uᵀHv, pair ${k}`);
      }
    });

    test('hvp equals H·v, and the columns match central differences of the gradient', () => {
      const c = G.compile(f);
      const H = c.hessian(A).hessian;
      const V = rng.matrix(n, n);
      near(flat(c.hvp(A, V).hvp), matVec(H, flat(V)), 1e-10, 'compiled hvp');
      near(flat(G.hvp(f)(A, V).hvp), matVec(H, flat(V)), 1e-10, 'eager hvp');
      for (const e of [0, 13, 143]) {
        const at = (d) => flat(c(A.map((row, i) => row.map((a, j) => (i * n + j === e ? a + d : a)))).gradient);
        const [plus, minus] = [at(FD_STEP), at(-FD_STEP)];
        near(plus.map((g, i) => (g - minus[i]) / (2 * FD_STEP)), H.map((row) => row[e]), FD_TOL, `column ${e}`);
      }
    });
  });
});

// --------------------------------------------------------------------------
// 3. consistency
// --------------------------------------------------------------------------

describe('3. consistency between jvp, hvp, hessian and jacobian', () => {
  const rng = makeRng(777);
  const x = { W: rng.matrix(2, 3), x: rng.vector(3), s: 0.7 };
  const f = (p) => G.add(
    G.sum(G.tanh(G.matmul(p.W, p.x))),
    G.mul(p.s, G.sum(G.exp(G.mul(0.3, p.x)))),
    G.logdetPSD(G.addDiag(G.matmul(p.W, G.transpose(p.W)), 2)),
    G.mul(G.square(p.s), G.dot(p.x, p.x)),
  );
  const P = packParams(x);
  const q = P.x.length;

  test('entries past half the largest double stay finite: the symmetrizing mean does not overflow', () => {
    // Closed forms: (e^x)'' = e^x at 709.5; (6e307·x²)'' = 1.2e308; ∂²(1.5e308·x·y)/∂x∂y = 1.5e308.
    const big = (p) => G.add(G.sum(G.exp(p.e)), G.mul(6e307, G.square(p.s)), G.mul(1.5e308, p.x, p.y));
    const at = { e: [709.5], s: 1, x: 1, y: 1 };
    const eE = G.hvp((p) => G.sum(G.exp(p)))([709.5], [1]).hvp[0];
    assert.ok(Math.abs(eE / Math.exp(709.5) - 1) < 1e-15);
    const want = [
      [eE, 0, 0, 0],
      [0, 1.2e308, 0, 0],
      [0, 0, 0, 1.5e308],
      [0, 0, 1.5e308, 0],
    ];
    for (const h of [G.hessian(big), G.compile(big).hessian]) assert.deepEqual(h(at).hessian, want);
  });

  test('a divisor past 1e154: its derivative is formed as (g/y)·(x/y), never through y², on every path', () => {
    const s = (p, i) => G.sum(G.slice(p, [i], [1]));
    const q = (p) => G.div(s(p, 0), s(p, 1));
    const close = (got, want) => assert.ok(Math.abs(got - want) <= 1e-15 * Math.abs(want), `${got} vs ${want}`);
    // x/y at (1e300, 1e160): ∇ = (1/y, −x/y²) = (1e-160, −1e-20); along (0, 1), −1e-20.
    const rows = [G.grad(q)([1e300, 1e160]), G.jacobian(q)([1e300, 1e160])[0], G.compile(q).jacobian([1e300, 1e160])[0]];
    for (const g of rows) {
      close(g[0], 1e-160);
      close(g[1], -1e-20);
    }
    close(G.jvp(q)([1e300, 1e160], [0, 1]).tangent, -1e-20);
    // x²/y at x = y = 1e200: ∇ = (2x/y, −x²/y²) = (2, −1), H = [[2/y, −2x/y²], [−2x/y², 2x²/y³]] = 1e-200·[[2, −2], [−2, 2]].
    const h = (p) => G.mul(s(p, 0), q(p));
    const want = [[2e-200, -2e-200], [-2e-200, 2e-200]];
    for (const f of [G.hessian(h), G.compile(h).hessian]) {
      const r = f([1e200, 1e200]);
      close(r.gradient[0], 2);
      close(r.gradient[1], -1);
      r.hessian.forEach((row, i) => row.forEach((x, j) => close(x, want[i][j])));
    }
    const hv = G.hvp(h)([1e200, 1e200], [1, 0]).hvp;
    close(hv[0], 2e-200);
    close(hv[1], -2e-200);
    // g·x past the largest double: d/dy 1e300·(1e10/y) at y = 1e10 is −1e300·1e10/y² = −1e290.
    const scaled = (y) => G.mul(1e300, G.div(1e10, y));
    close(G.grad(scaled)(1e10), -1e290);
    close(G.compile(scaled)(1e10).gradient, -1e290);
  });

  test("where a partial is infinite (log at 1e-300), the Hessian's entries that do not meet it are the true ones", () => {
    const s = (p, i) => G.sum(G.slice(p, [i], [1]));
    // Σ log x: diag(−1/x²) = [−∞ (−1e600), −1], off the diagonal 0.
    // log(x₀)·x₁: [[−x₁/x₀², 1/x₀], [1/x₀, 0]] = [[−∞, 1e300], [1e300, 0]].
    const cases = [
      [(x) => G.sum(G.log(x)), [1e-300, 1], [[-Infinity, 0], [0, -1]]],
      [(x) => G.mul(G.log(s(x, 0)), s(x, 1)), [1e-300, 2], [[-Infinity, 1 / 1e-300], [1 / 1e-300, 0]]],
    ];
    for (const [f, x, want] of cases) {
      for (const h of [G.hessian(f), G.compile(f).hessian]) {
        h(x).hessian.forEach((row, i) => row.forEach((v, j) => {
          const w = want[i][j];
          assert.ok(Number.isFinite(w) ? Math.abs(v - w) <= 1e-15 * Math.abs(w) : Object.is(v, w), `[${i}][${j}]: ${v} vs ${w}`);
        }));
      }
    }
  });

  test('the Hessian is symmetric and matches finite differences of the gradient, column by column', () => {
    for (const [how, h] of [['eager', G.hessian(f)], ['compiled', G.compile(f).hessian]]) {
      const H = h(x).hessian;
      assert.equal(H.length, q);
      assert.ok(asymmetry(H) <= TIGHT, `${how}: asymmetry ${asymmetry(H)}`);
      for (let j = 0; j < q; j++) {
        const e = new Float64Array(q);
        e[j] = 1;
        near(H.map((row) => row[j]), fdAlong(gradientAt(f, P), P.x, e), FD_TOL, `${how} column ${j}`);
      }
    }
  });

  test('hvp(x, v) equals hessian·v for several directions', () => {
    const H = G.hessian(f)(x).hessian;
    const c = G.compile(f);
    for (let k = 0; k < 3; k++) {
      const v = randomLike(rng, x);
      const want = matVec(H, P.flatGrad(v));
      near(P.flatGrad(G.hvp(f)(x, v).hvp), want, TIGHT, `eager direction ${k}`);
      near(P.flatGrad(c.hvp(x, v).hvp), want, TIGHT, `compiled direction ${k}`);
    }
  });

  test('jvp of a scalar objective equals gradient·v', () => {
    const v = randomLike(rng, x);
    const g = P.flatGrad(G.valueAndGrad(f)(x).gradient);
    const vf = P.flatGrad(v);
    const want = g.reduce((s, gi, i) => s + gi * vf[i], 0);
    near([G.jvp(f)(x, v).tangent], [want], TIGHT, 'eager');
    near([G.compile(f).jvp(x, v).tangent], [want], TIGHT, 'compiled');
  });

  const M = rng.matrix(7, 3);
  const N = rng.matrix(2, 5);
  const tall = (z) => G.concat([G.tanh(G.matmul(M, z)), G.exp(z), G.mul(G.sum(G.square(z)), z)]); // 3 → 13
  const wide = (z) => G.add(G.matmul(N, G.tanh(z)), G.mul(G.sum(G.exp(z)), [1, -1])); // 5 → 2
  const xt = rng.vector(3);
  const xw = rng.vector(5);

  test('tall f: compiled .jacobian (forward) equals reverse rows', () => {
    near(G.compile(tall).jacobian(xt), rowsByGradient(tall, xt), TIGHT, 'compiled .jacobian');
  });

  test('tall f: eager SPEC jacobian (forward) equals reverse rows', () => {
    near(G.jacobian(tall)(xt), rowsByGradient(tall, xt), TIGHT, 'eager SPEC jacobian');
  });

  test('wide f: compiled .jacobian (reverse) equals reverse rows', () => {
    near(G.compile(wide).jacobian(xw), rowsByGradient(wide, xw), TIGHT, 'compiled .jacobian');
  });

  test('wide f: eager SPEC jacobian (reverse) equals reverse rows', () => {
    near(G.jacobian(wide)(xw), rowsByGradient(wide, xw), TIGHT, 'eager SPEC jacobian');
  });

  test('forward and reverse Jacobians of the same function agree (tall f, then forced to reverse by an unread block)', () => {
    // The same map seen with an extra unread parameter: {z, pad[20]} has more columns (23) than rows (13), so it is reversed.
    const padded = (p) => tall(p.z);
    const pad = new Array(20).fill(0.1);
    const reverse = G.compile(padded).jacobian({ z: xt, pad }).map((row) => row.slice(0, 3));
    const forward = G.compile(tall).jacobian(xt);
    near(forward, reverse, TIGHT, 'forward vs reverse');
    const zeros = G.compile(padded).jacobian({ z: xt, pad }).map((row) => row.slice(3));
    assert.ok(zeros.every((row) => row.every((e) => e === 0)), 'unread columns are zeros');
  });

  test('where forward mode meets 0 × ∞, the Jacobian is the reverse rows: eager, compiled and rebuilt alike', () => {
    // log of a negative off-diagonal entry is NaN, and its tangent 2·log(x)·0 is NaN too,
    // though that entry does not depend on p; a reverse sweep never multiplies the term.
    const A = [[0.13, 1.05], [-0.17, 0.59]];
    const logDiag = (p) => G.reshape(G.square(G.log(G.addDiag(A, p))), [4]); // 1 → 4: forward first
    const p = 0.4;
    const d = (a) => (2 * Math.log(a + p)) / (a + p);
    // relu(p) = 0 for p < 0, lgamma(0) = ∞: the tangent is digamma(0)·0, the reverse row relu's 0.
    const reluLgamma = (t) => G.mul(G.lgamma(G.relu(t)), [1, 2]);
    for (const [name, f, x, want] of [
      ['log of addDiag', logDiag, p, [[d(0.13)], [0], [0], [d(0.59)]]],
      ['lgamma of relu', reluLgamma, -0.85, [[0], [0]]],
    ]) {
      const c = G.compile(f);
      const got = [G.jacobian(f)(x), c.jacobian(x), G.compileFromJSON(c.toJSON()).jacobian(x)];
      near(got[0], want, TIGHT, `${name}: eager`);
      assert.ok(got[0].every((row) => row.every(Number.isFinite)), `${name}: every entry finite`);
      assert.deepStrictEqual(got[1], got[0], `${name}: compiled, bit for bit`);
      assert.deepStrictEqual(got[2], got[0], `${name}: rebuilt, bit for bit`);
    }
  });

  test('where the reverse rows meet 0 × ∞ too, forward mode\'s finite entries are kept: eager, compiled and rebuilt alike', () => {
    // [x, log x] at x = [0, 2]: forward mode gives column 0 = [1, 0, ∞, 0], column 1 = [0, 1, NaN, 0.5];
    // every reverse row but log x₀'s multiplies log's zero adjoint by 1/x₀ = ∞.
    const f = (x) => G.concat([x, G.log(x)]);
    const want = [[1, 0], [0, 1], [Infinity, 0], [0, 0.5]];
    const c = G.compile(f);
    assert.deepStrictEqual(G.jacobian(f)([0, 2]), want, 'eager');
    assert.deepStrictEqual(c.jacobian([0, 2]), want, 'compiled');
    assert.deepStrictEqual(G.compileFromJSON(c.toJSON()).jacobian([0, 2]), want, 'rebuilt');
    // sqrt at [0, 1]: ∂√x₁/∂x₀ is 0·∞ forward and 0/(2·1) reverse; ∂√x₀/∂x₀ is ∞ either way.
    assert.deepStrictEqual(G.jacobian(G.sqrt)([0, 1]), [[Infinity, 0], [0, 0.5]], 'sqrt, eager');
    assert.deepStrictEqual(G.compile(G.sqrt).jacobian([0, 1]), [[Infinity, 0], [0, 0.5]], 'sqrt, compiled');
    // A map and a matrix output: the column of a₀ keeps its finite entries.
    const g = (p) => G.concat([G.reshape(G.concat([p.a, p.b]), [1, 3]), G.reshape(G.concat([G.log(p.a), G.mul(p.b, p.b)]), [1, 3])], { axis: 0 });
    const wantG = [[1, 0, 0], [0, 1, 0], [0, 0, 1], [Infinity, 0, 0], [0, 1, 0], [0, 0, 6]];
    assert.deepStrictEqual(G.compile(g).jacobian({ a: [0, 1], b: 3 }), wantG, 'map, compiled');
  });

  test('jvp equals jacobian·v (tall and wide, eager and compiled)', () => {
    for (const [name, g, z] of [['tall', tall, xt], ['wide', wide, xw]]) {
      const v = makeRng(name.length).vector(z.length);
      const want = matVec(rowsByGradient(g, z), v);
      near(G.jvp(g)(z, v).tangent, want, TIGHT, `${name}, eager`);
      near(G.compile(g).jvp(z, v).tangent, want, TIGHT, `${name}, compiled`);
    }
  });

  test('compiled jvp equals compiled .jacobian·v (tall: forward, wide: reverse)', () => {
    for (const [name, g, z] of [['tall', tall, xt], ['wide', wide, xw]]) {
      const v = makeRng(name.length).vector(z.length);
      const c = G.compile(g);
      near(matVec(c.jacobian(z), v), c.jvp(z, v).tangent, TIGHT, name);
    }
  });

  test('SPEC jacobian: a scalar input and a vector output (forward) give the m×1 column', () => {
    const J = G.jacobian((t) => G.mul(G.exp(t), [1, 2, 3]))(0.5);
    near(J, [[Math.exp(0.5)], [2 * Math.exp(0.5)], [3 * Math.exp(0.5)]], TIGHT, 'column');
    assert.deepEqual(J.map((r) => r.length), [1, 1, 1]);
  });

  const X = rng.matrix(2, 2);
  const eX = flat(X).map(Math.exp);
  test('SPEC jacobian: a matrix input is flattened row-major (tall: forward)', () => {
    const tallM = (Z) => G.concat([G.reshape(G.exp(Z), [4]), G.reshape(Z, [4])]); // 4 → 8
    const I4 = [0, 1, 2, 3].map((i) => [0, 1, 2, 3].map((j) => (i === j ? 1 : 0)));
    near(G.jacobian(tallM)(X), [...I4.map((row, i) => row.map((d) => d * eX[i])), ...I4], TIGHT, 'tall');
  });

  test('SPEC jacobian: a matrix input is flattened row-major (wide: reverse)', () => {
    const wideM = (Z) => G.matmul(G.exp(Z), [1, 2]); // 4 → 2
    near(G.jacobian(wideM)(X), [[eX[0], 2 * eX[1], 0, 0], [0, 0, eX[2], 2 * eX[3]]], TIGHT, 'wide');
  });

  test('compiled .jacobian of a matrix-valued f: rows are the output flattened row-major', () => {
    const g = (p) => G.mul(G.exp(p.a), p.B); // scalar a, B [2×3] → [2×3]
    const x0 = { a: 0.2, B: rng.matrix(2, 3) };
    const ref = rowsByGradient(g, x0);
    near(G.compile(g).jacobian(x0), ref, TIGHT, 'compiled .jacobian (reverse: 7 columns, 6 rows)');
    assert.equal(ref.length, 6);
    const B = x0.B;
    const h = (a) => G.mul(G.exp(a), B); // 1 column, 6 rows: forward
    near(G.compile(h).jacobian(0.2), B.flat().map((b) => [Math.exp(0.2) * b]), TIGHT, 'compiled .jacobian (forward)');
  });

  test('compiled .jacobian with inputs', () => {
    const g = (z, d) => G.mul(d.k, G.exp(z));
    const ins = { k: [2, 3, 4, 5] };
    const z = [0.1, 0.2, 0.3, 0.4];
    const c = G.compile(g);
    const want = z.map((zi, i) => z.map((_, j) => (i === j ? ins.k[i] * Math.exp(zi) : 0)));
    near(c.jacobian(z, ins), want, TIGHT, 'with inputs');
    const ins2 = { k: [1, 1, 1, 1] };
    near(c.jacobian(z, ins2), z.map((zi, i) => z.map((_, j) => (i === j ? Math.exp(zi) : 0))), TIGHT, 'new inputs are read');
  });
});

// --------------------------------------------------------------------------
// 4. forms
// --------------------------------------------------------------------------

describe('4. argument and result forms', () => {
  const rng = makeRng(99);
  // Keys deliberately not sorted: z, a, m.
  const f = (p) => G.add(
    G.mul(G.sum(G.square(p.z)), p.a),
    G.sum(G.mul(G.exp(p.m), p.m)),
    G.mul(G.square(p.a), G.sum(G.matmul(p.m, p.z))),
  );
  const xA = { z: rng.vector(3), a: 0.8, m: rng.matrix(2, 3) };
  const xB = { m: xA.m, a: xA.a, z: xA.z };
  /** A reference Hessian in P's flat order: finite differences of the gradient, column by column. */
  const fdHessian = (g, x) => {
    const P = packParams(x);
    const q = P.x.length;
    const cols = Array.from({ length: q }, (_, j) => {
      const e = new Float64Array(q);
      e[j] = 1;
      return fdAlong(gradientAt(g, P), P.x, e);
    });
    return cols[0].map((_, i) => cols.map((c) => c[i]));
  };
  /** Maps a flat index in order `from` to the same entry in order `to`. */
  const permutation = (from, to) => {
    const PA = packParams(from);
    const idx = Float64Array.from(PA.x, (_, i) => i);
    return packParams(to).flatGrad(PA.unpack(idx));
  };

  test('eager hessian: flattened in the caller\'s key order, gradient keys in that order', () => {
    for (const x of [xA, xB]) {
      const r = G.hessian(f)(x);
      assert.deepEqual(Object.keys(r.gradient), Object.keys(x));
      near(r.hessian, fdHessian(f, x), FD_TOL, `order ${Object.keys(x)}`);
    }
    const HA = G.hessian(f)(xA).hessian;
    const HB = G.hessian(f)(xB).hessian;
    const perm = permutation(xA, xB); // perm[i] = index in A of B's i-th entry
    near(HB, perm.map((i) => perm.map((j) => HA[i][j])), 1e-14, 'B is A permuted');
  });

  test('compiled hessian traced in one key order, called in another: the caller\'s order', () => {
    const c = G.compile(f);
    const HA = c.hessian(xA);
    near(HA.hessian, fdHessian(f, xA), FD_TOL, 'traced order');
    const HB = c.hessian(xB);
    assert.deepEqual(Object.keys(HB.gradient), Object.keys(xB));
    near(HB.hessian, fdHessian(f, xB), FD_TOL, 'other order');
    sameBits(HB, G.hessian(f)(xB), 'compiled vs eager, other order');
  });

  test('rebuilt plan called in another key order: the caller\'s order', () => {
    const c = G.compile(f);
    c(xA);
    const r = G.compileFromJSON(c.toJSON());
    const HB = r.hessian(xB);
    assert.deepEqual(Object.keys(HB.gradient), Object.keys(xB));
    near(HB.hessian, fdHessian(f, xB), FD_TOL, 'rebuilt, other order');
  });

  test('compiled hvp and jvp in another key order: keyed results in the caller\'s order', () => {
    const c = G.compile(f);
    const vA = randomLike(rng, xA);
    const vB = { m: vA.m, a: vA.a, z: vA.z };
    const rA = c.hvp(xA, vA);
    const rB = c.hvp(xB, vB);
    assert.deepEqual(Object.keys(rB.hvp), ['m', 'a', 'z']);
    assert.deepEqual(Object.keys(rB.gradient), ['m', 'a', 'z']);
    for (const k of ['m', 'a', 'z']) {
      sameBits(rB.hvp[k], rA.hvp[k], `hvp.${k}`);
      sameBits(rB.gradient[k], rA.gradient[k], `gradient.${k}`);
    }
    sameBits(c.jvp(xB, vB), c.jvp(xA, vA), 'jvp');
    // The tangent's own key order does not matter either.
    sameBits(c.jvp(xA, vB), c.jvp(xA, vA), 'jvp, tangent keys in another order');
  });

  test('compiled .jacobian over a map: columns are x flattened in the caller\'s key order', () => {
    const g = (p) => G.concat([G.mul(p.b, 2), G.mul(p.a, 3), G.exp(p.c), G.mul(p.a, p.c)]); // 4 columns, 6 rows: forward
    const x1 = { b: 0.5, a: 0.25, c: [0.1, 0.2] };
    const x2 = { c: x1.c, a: x1.a, b: x1.b };
    const c = G.compile(g);
    near(c.jacobian(x1), rowsByGradient(g, x1), TIGHT, 'traced order');
    near(c.jacobian(x2), rowsByGradient(g, x2), TIGHT, 'other order');
  });

  test('tensor parameters: gradient and hvp are new tensors with their own Float64Array', () => {
    const t = G.tensor(rng.vector(6), [2, 3]);
    const s = G.tensor([0.4], []);
    const x = { t, s };
    const before = Array.from(t.data);
    const v = { t: G.tensor(rng.vector(6), [2, 3]), s: G.tensor([1], []) };
    const g = (p) => G.add(G.sum(G.exp(G.mul(p.t, p.s))), G.square(p.s));
    for (const [how, h] of [['eager', G.hvp(g)], ['compiled', G.compile(g).hvp]]) {
      const r = h(x, v);
      assert.equal(formOf(r.hvp), '{t:tensor[2,3],s:tensor[]}', how);
      assert.equal(formOf(r.gradient), '{t:tensor[2,3],s:tensor[]}', how);
      assert.notEqual(r.hvp.t.data, t.data);
      assert.notEqual(r.hvp.t.data, r.gradient.t.data);
      assert.notEqual(r.hvp.t.data, v.t.data);
      near(packParams(x).flatGrad(r.hvp), fdAlong(gradientAt(g, packParams(x)), packParams(x).x, packParams(x).flatGrad(v)), FD_TOL, `${how} hvp`);
    }
    const H = G.hessian(g)(x);
    assert.equal(H.hessian.length, 7);
    assert.equal(formOf(H.gradient), '{t:tensor[2,3],s:tensor[]}');
    assert.deepEqual(Array.from(t.data), before, 'the caller\'s tensor is not written');
  });

  test('jvp returns number / number[] / number[][] whatever the parameter form', () => {
    const t = G.tensor(rng.vector(4), [2, 2]);
    const tv = G.tensor(rng.vector(4), [2, 2]);
    const r1 = G.jvp((z) => G.exp(z))(t, tv);
    assert.equal(formOf(r1.value), 'rows2x2');
    assert.equal(formOf(r1.tangent), 'rows2x2');
    const r2 = G.jvp((z) => G.reshape(G.exp(z), [4]))(t, tv);
    assert.equal(formOf(r2.tangent), 'array4');
    const r3 = G.jvp((z) => G.sum(G.exp(z)))(t, tv);
    assert.equal(formOf(r3.tangent), 'number');
    assert.equal(formOf(r3.value), 'number');
    const rc = G.compile((z) => G.exp(z)).jvp(t, tv);
    assert.equal(formOf(rc.tangent), 'rows2x2');
    near(r1.tangent, flat(t).map((e, i) => Math.exp(e) * tv.data[i]), TIGHT, 'tangent');
  });

  test('nested matrices with Float64Array rows, Float64Array vectors and number parameters', () => {
    const m = [Float64Array.from(rng.vector(2)), Float64Array.from(rng.vector(2))];
    const w = Float64Array.from(rng.vector(2));
    const x = { m, w, k: 1.3 };
    const v = { m: rng.matrix(2, 2), w: rng.vector(2), k: -0.4 };
    const g = (p) => G.mul(p.k, G.sum(G.tanh(G.matmul(p.m, p.w))));
    const P = packParams(x);
    for (const [how, h] of [['eager', G.hvp(g)], ['compiled', G.compile(g).hvp]]) {
      const r = h(x, v);
      assert.equal(formOf(r.hvp), '{m:rows2x2,w:array2,k:number}', how);
      assert.equal(formOf(r.gradient), '{m:rows2x2,w:array2,k:number}', how);
      near(P.flatGrad(r.hvp), fdAlong(gradientAt(g, P), P.x, P.flatGrad(v)), FD_TOL, `${how} hvp`);
    }
    const single = G.hvp((k) => G.mul(G.exp(k), G.square(k)))(0.7, 1);
    assert.equal(typeof single.hvp, 'number');
    assert.equal(typeof single.gradient, 'number');
    const e7 = Math.exp(0.7);
    near([single.hvp], [e7 * (0.49 + 4 * 0.7 + 2)], TIGHT, 'number parameter: (x² + 4x + 2)eˣ');
    const H = G.hessian((k) => G.mul(G.exp(k), G.square(k)))(0.7);
    assert.equal(formOf(H.hessian), 'rows1x1');
    near(H.hessian, [[e7 * (0.49 + 4 * 0.7 + 2)]], TIGHT, 'number parameter: 1×1 Hessian');
  });

  test('inputs: no gradient for them, the Hessian is over the parameters only, and new inputs are read', () => {
    const g = (p, d) => G.sum(G.mul(d.k, G.exp(G.mul(p, d.s))));
    const z = [0.1, 0.2, 0.3];
    const ins = { k: [1, 2, 3], s: 2 };
    const want = (k, s) => z.map((zi, i) => z.map((_, j) => (i === j ? k[i] * s * s * Math.exp(s * zi) : 0)));
    const c = G.compile(g);
    for (const [how, h] of [['eager', G.hessian(g)], ['compiled', c.hessian]]) {
      const r = h(z, ins);
      assert.equal(formOf(r.gradient), 'array3', how);
      near(r.hessian, want(ins.k, ins.s), TIGHT, how);
      const r2 = h(z, { k: [3, 2, 1], s: 0.5 });
      near(r2.hessian, want([3, 2, 1], 0.5), TIGHT, `${how}, other inputs`);
    }
    const rh = c.hvp(z, [1, 0, -1], { k: [3, 2, 1], s: 0.5 });
    near(rh.hvp, matVec(want([3, 2, 1], 0.5), [1, 0, -1]), TIGHT, 'compiled hvp, other inputs');
    const rj = c.jvp(z, [1, 0, -1], { k: [3, 2, 1], s: 0.5 });
    near([rj.tangent], [[3, 2, 1].reduce((s, k, i) => s + k * 0.5 * Math.exp(0.5 * z[i]) * [1, 0, -1][i], 0)], TIGHT, 'compiled jvp, other inputs');
  });

  test('a parameter the objective never reads gets zeros in its form (gradient, hvp, Hessian rows and columns)', () => {
    const g = (p) => G.sum(G.exp(p.used));
    const x = { unusedT: G.tensor([1, 2, 3, 4], [2, 2]), used: [0.1, 0.2], unusedN: 5, unusedM: [[1, 2]] };
    const v = { unusedT: G.tensor([1, 1, 1, 1], [2, 2]), used: [1, 1], unusedN: 1, unusedM: [[1, 1]] };
    for (const [how, h] of [['eager', G.hvp(g)], ['compiled', G.compile(g).hvp]]) {
      const r = h(x, v);
      assert.equal(formOf(r.hvp), '{unusedT:tensor[2,2],used:array2,unusedN:number,unusedM:rows1x2}', how);
      assert.deepEqual(Array.from(r.hvp.unusedT.data), [0, 0, 0, 0]);
      assert.equal(r.hvp.unusedN, 0);
      assert.deepEqual(r.hvp.unusedM, [[0, 0]]);
      assert.deepEqual(Array.from(r.gradient.unusedT.data), [0, 0, 0, 0]);
      assert.equal(r.gradient.unusedN, 0);
      near(r.hvp.used, [Math.exp(0.1), Math.exp(0.2)], TIGHT, `${how} hvp.used`);
    }
    for (const [how, h] of [['eager', G.hessian(g)], ['compiled', G.compile(g).hessian]]) {
      const r = h(x);
      assert.equal(r.hessian.length, 9);
      const usedAt = [4, 5];
      for (let i = 0; i < 9; i++) {
        for (let j = 0; j < 9; j++) {
          const want = i === j && usedAt.includes(i) ? Math.exp(x.used[i - 4]) : 0;
          assert.ok(Math.abs(r.hessian[i][j] - want) <= 1e-15 * Math.max(1, want), `${how}: H[${i}][${j}] = ${r.hessian[i][j]}, expected ${want}`);
        }
      }
    }
    const rj = G.jvp(g)(x, v);
    near([rj.tangent], [Math.exp(0.1) + Math.exp(0.2)], TIGHT, 'jvp ignores the unused tangents');
  });

  test('the caller\'s parameter, tangent and input arrays are never written', () => {
    const x = { a: [0.3, -0.2], M: [[1, 0.5], [0.5, 2]] };
    const v = { a: [1, 2], M: [[0, 1], [1, 0]] };
    const ins = { k: [2, 3] };
    const snap = JSON.stringify([x, v, ins]);
    const g = (p, d) => G.add(G.sum(G.mul(d.k, G.exp(p.a))), G.logdetPSD(p.M), G.dot(p.a, G.solvePSD(p.M, p.a)));
    const c = G.compile(g);
    G.jvp(g)(x, v, ins); G.hvp(g)(x, v, ins); G.hessian(g)(x, ins);
    c.jvp(x, v, ins); c.hvp(x, v, ins); c.hessian(x, ins); c.jacobian(x, ins);
    assert.equal(JSON.stringify([x, v, ins]), snap);
  });
});

// --------------------------------------------------------------------------
// 5. bit for bit: eager, compiled, rebuilt, in a Worker
// --------------------------------------------------------------------------

const workerSource = `
const { parentPort, workerData } = require('node:worker_threads');
import(workerData.url).then((G) => {
  parentPort.on('message', ({ id, json, text, x, v, ins, noHessian }) => {
    try {
      const r = G.compileFromJSON(text === undefined ? json : JSON.parse(text));
      const hessian = noHessian ? null : r.hessian(x, ins);
      const hvp = r.hvp(x, v, ins);
      const jvp = r.jvp(x, v, ins);
      const again = noHessian ? null : r.hessian(x, ins);
      parentPort.postMessage({ id, hessian, hvp, jvp, again });
    } catch (e) {
      parentPort.postMessage({ id, error: String(e && e.stack) });
    }
  });
  parentPort.postMessage({ ready: true });
}, (e) => parentPort.postMessage({ ready: false, error: String(e && e.stack) }));
`;

function higherWorker() {
  const w = new Worker(workerSource, { eval: true, workerData: { url: new URL('../index.js', import.meta.url).href } });
  let seq = 0;
  const pending = new Map();
  let markReady;
  let failReady;
  const ready = new Promise((resolve, reject) => {
    markReady = resolve;
    failReady = reject;
  });
  w.on('message', (m) => {
    if ('ready' in m) {
      if (m.ready) markReady();
      else failReady(new Error(m.error));
      return;
    }
    const p = pending.get(m.id);
    pending.delete(m.id);
    if (m.error) p.reject(new Error(m.error));
    else p.resolve(m);
  });
  w.on('error', (e) => {
    failReady(e);
    for (const p of pending.values()) p.reject(e);
  });
  const ask = async (msg) => {
    await ready;
    return new Promise((resolve, reject) => {
      const id = ++seq;
      pending.set(id, { resolve, reject });
      w.postMessage({ ...msg, id });
    });
  };
  return { ask, terminate: () => w.terminate() };
}

describe('5. eager, compiled and rebuilt plans agree bit for bit, also in a Worker', () => {
  const worker = higherWorker();
  after(() => worker.terminate());

  const rng = makeRng(5150);
  const A = randomSPD(rng, 3);
  const cases = [
    ['BENCH regression', regression(G, regressionData()), () => {
      const x = regressionParams();
      return { x, v: randomLike(rng, x) };
    }],
    ['BENCH gp, n = 20', gp(G, gpData(20)), () => ({ x: gpParams(), v: { l: 0.3, v: -1.1 } })],
    // Past the lanes' size, the tangent plan lays out its values by
    // liveness (src/core/plan/values.rs): what no sweep reads shares blocks.
    ['BENCH gp, n = 120', gp(G, gpData(120)), () => ({ x: gpParams(), v: { l: -0.7, v: 0.4 } })],
    ['BENCH mlp (tensor parameters, inputs)', mlp(G), () => {
      const { params, batch } = mlpSetup(G);
      return { x: params, v: mlpDirection(G), ins: batch, noHessian: true };
    }],
    ['linear algebra on raw parameters, keys unsorted, static arguments', (p) => G.add(
      G.logdetPSD(p.A),
      G.dot(p.b, G.solvePSD(p.A, p.b)),
      G.sum(G.mul(G.concat([G.slice(p.b, [1], [1]), 0.5, p.b]), [1, 2, 2, 3, -1])),
      G.sum(G.square(G.triangularSolve(p.A, p.b, { lower: false }))),
      G.sum(G.mul(G.reshape(G.inv(p.A), [9]), G.lgamma(G.add(G.reshape(p.A, [9]), 2)))),
      G.pow(G.sum(G.sigmoid(p.b)), 1.5),
    ), () => ({ x: { b: [0.5, -0.3, 0.2], A }, v: { b: [1, 0, -1], A: [[0, 1, 0], [1, 0, 0], [0, 0, 1]] } })],
    // Eager sees an input as a constant, a plan as an input; a constant made
    // by ops stays ops eagerly and is folded when compiled. Neither may
    // change how the Cholesky tangent is taken.
    ['a symmetric input matrix through solvePSD', (p, d) => {
      const K = G.addDiag(G.mul(d.K, G.exp(p.l)), G.exp(p.n));
      return G.add(G.dot([1, 2], G.solvePSD(K, [1, 2])), G.sum(K));
    }, () => ({ x: { l: 0.1, n: -1 }, v: { l: 1, n: 1 }, ins: { K: [[2, 1], [1, 2]] } })],
    ['a constant built by matmul, folded when compiled, through solvePSD', (p) => {
      const C = [[0.5, 0.25], [0.125, 1.5]];
      const K = G.addDiag(G.mul(G.matmul(C, G.transpose(C)), G.exp(p.l)), G.exp(p.n));
      return G.add(G.dot([1, 2], G.solvePSD(K, [1, 2])), G.sum(K));
    }, () => ({ x: { l: 0.2, n: -0.2 }, v: { l: 1, n: 1 } })],
  ];

  for (const [name, f, args] of cases) {
    test(name, async () => {
      const { x, v, ins, noHessian } = args();
      const eager = {
        hessian: noHessian ? undefined : G.hessian(f)(x, ins),
        hvp: G.hvp(f)(x, v, ins),
        jvp: G.jvp(f)(x, v, ins),
      };
      const c = G.compile(f);
      if (!noHessian) sameBits(c.hessian(x, ins), eager.hessian, 'compiled hessian');
      sameBits(c.hvp(x, v, ins), eager.hvp, 'compiled hvp');
      sameBits(c.jvp(x, v, ins), eager.jvp, 'compiled jvp');
      const json = c.toJSON();
      for (const [how, r] of rebuilt(c)) {
        if (!noHessian) sameBits(r.hessian(x, ins), eager.hessian, `${how} hessian`);
        sameBits(r.hvp(x, v, ins), eager.hvp, `${how} hvp`);
        sameBits(r.jvp(x, v, ins), eager.jvp, `${how} jvp`);
      }
      // (the MLP's 321×321 Hessian is not needed to show its plan travels)
      for (const msg of [{ json }, { text: JSON.stringify(json) }, { json: structuredClone(json) }]) {
        const how = msg.text ? 'Worker, JSON text' : 'Worker, structured clone';
        const got = await worker.ask({ ...msg, x, v, ins, noHessian });
        if (!noHessian) {
          sameBits(got.hessian, eager.hessian, `${how}, hessian`);
          sameBits(got.again, eager.hessian, `${how}, hessian again`);
        }
        sameBits(got.hvp, eager.hvp, `${how}, hvp`);
        sameBits(got.jvp, eager.jvp, `${how}, jvp`);
      }
    });
  }
});

describe('5a. the gradient hessian and hvp give is valueAndGrad\'s, bit for bit', () => {
  // The tangent's sweep would give ∇f too, through the tangent rules: div's
  // and cholesky's round otherwise than their adjoints (most random points
  // differ in the last bit), and behind a relu that blocks an infinite
  // partial, sqrt'(0)·0 = NaN where the gradient is 0.
  const rng = makeRng(5151);
  const cases = [
    ['div', (p) => G.sum(G.div(p, G.add(1, G.square(p)))), () => rng.vector(3, -2, 2)],
    ['cholesky', (p) => G.sum(G.cholesky(G.addDiag(G.matmul(G.reshape(p, [3, 1]), G.reshape(p, [1, 3])), 1))), () => rng.vector(3, -2, 2)],
    ['sqrt behind relu', (p) => G.sum(G.mul(p, G.sqrt(G.relu(p)))), () => [-1, 4]],
    ['BENCH gp, n = 20', gp(G, gpData(20)), () => ({ l: rng.uniform(0.8, 1.6), v: rng.uniform(0.5, 1.5) })],
    // 4 900-value adjoints, in blocks shared by when they are live.
    ['BENCH gp, n = 70', gp(G, gpData(70)), () => ({ l: rng.uniform(0.8, 1.6), v: rng.uniform(0.5, 1.5) })],
  ];
  for (const [name, f, point] of cases) {
    test(name, () => {
      const c = G.compile(f);
      c(point());
      const r = G.compileFromJSON(c.toJSON());
      for (let k = 0; k < 8; k++) {
        const x = point();
        const want = G.valueAndGrad(f)(x);
        const g = want.gradient;
        assert.ok(flat(Array.isArray(g) ? g : Object.values(g)).every(Number.isFinite), `${name}: a finite gradient`);
        const v = randomLike(rng, x);
        for (const [how, g] of [['eager', G], ['compiled', c], ['rebuilt', r]]) {
          const hessian = (how === 'eager' ? G.hessian(f) : g.hessian)(x);
          const hvp = (how === 'eager' ? G.hvp(f) : g.hvp)(x, v);
          sameBits(hessian.gradient, want.gradient, `${name}, ${how} hessian, point ${k}`);
          sameBits(hessian.value, want.value, `${name}, ${how} hessian value, point ${k}`);
          sameBits(hvp.gradient, want.gradient, `${name}, ${how} hvp, point ${k}`);
          sameBits(hvp.value, want.value, `${name}, ${how} hvp value, point ${k}`);
        }
      }
    });
  }
  // An empty parameter is alike at every point of a compiled Hessian's
  // batch (batch/directions.rs); counted with the directions, it left what
  // reads it out of the value at x (mean of none is NaN; compiled gave 0).
  test('an empty parameter, before or after the others', () => {
    const e = new Float64Array(0);
    const cases = [
      [(p) => G.add(G.mean(G.sub(p.e, p.e)), G.mul(p.x, p.x)), { x: 0.5, e }],
      [(p) => G.add(G.mul(p.x, p.x), G.mean(G.sub(p.e, p.e))), { e, x: 0.5 }],
      [(p) => G.add(G.sum(G.square(p.x)), G.mul(p.s, G.mean(p.e))), { x: [0.5, -2], s: 3, e }],
    ];
    for (const [f, x] of cases) {
      const c = G.compile(f);
      c(x);
      const r = G.compileFromJSON(c.toJSON());
      const want = G.valueAndGrad(f)(x);
      assert.ok(Number.isNaN(want.value), 'the mean of no values is NaN');
      const v = Object.fromEntries(Object.entries(x).map(([k, a]) => [k, typeof a === 'number' ? 1 : Array.isArray(a) ? a.map(() => 1) : e]));
      for (const [how, g] of [['eager', null], ['compiled', c], ['rebuilt', r]]) {
        const hessian = (g === null ? G.hessian(f) : g.hessian)(x);
        const hvp = (g === null ? G.hvp(f) : g.hvp)(x, v);
        for (const [what, got] of [['hessian', hessian], ['hvp', hvp]]) {
          sameBits(got.value, want.value, `${how} ${what} value`);
          sameBits(got.gradient, want.gradient, `${how} ${what} gradient`);
        }
      }
    }
  });
});

describe('5b. Jacobians agree bit for bit: eager, compiled (columns eight at a time in lanes), rebuilt', () => {
  // 19 values in and out: two full groups of lanes and one of three; rounding
  // everywhere (tanh, a dense constant matrix, a scale read as an input).
  const rng = makeRng(1902);
  const n = 19;
  const M = Array.from({ length: n }, () => rng.vector(n));
  const u = rng.vector(n);
  const square = (p, d) => G.add(G.matmul(M, G.tanh(p)), G.mul(d.s, G.square(p), G.sub(1.5, p)));
  const tall = (p, d) => G.concat([square(p, d), G.exp(G.slice(p, [2], [5]))]);
  const wide = (p, d) => G.slice(square(p, d), [3], [7]);
  const ins = { s: 2.5 };
  for (const [name, f] of [['square (forward)', square], ['tall (forward)', tall], ['wide (reverse)', wide]]) {
    test(name, () => {
      const eager = G.jacobian((p) => f(p, ins))(u);
      const c = G.compile(f);
      sameBits(c.jacobian(u, ins), eager, 'compiled');
      sameBits(c.jacobian(u, ins), eager, 'compiled, again (the lanes kept)');
      for (const [how, r] of rebuilt(c)) sameBits(r.jacobian(u, ins), eager, how);
      // And the Jacobian it claims: central differences of the value.
      const value = (x) => c.value(x, ins);
      const h = 1e-6;
      for (const j of [0, 8, 18]) {
        const up = u.slice(); const down = u.slice();
        up[j] += h; down[j] -= h;
        const [fu, fd] = [value(up), value(down)];
        eager.forEach((row, i) => assert.ok(Math.abs(row[j] - (fu[i] - fd[i]) / (2 * h)) < 1e-6 * (1 + Math.abs(row[j])), `${name}: J[${i}][${j}]`));
      }
    });
  }
});

describe('5b2. Sparse Jacobians: columns no row shares take one direction (src/core/pattern.rs)', () => {
  // 24 columns: three groups of lanes each way, where the colors need one.
  const n = 24;
  const rng = makeRng(2412);
  const u = rng.vector(n);
  const band = Array.from({ length: n }, (_, i) => Array.from({ length: n }, (_, j) => (i === j ? -2 : Math.abs(i - j) === 1 ? 1 : 0)));
  const zero = [0];
  const shift = {
    left: (p) => G.concat([zero, G.slice(p, [0], [n - 1])]),
    right: (p) => G.concat([G.slice(p, [1], [n - 1]), zero]),
  };
  // Each: the function, and its Jacobian in closed form (an entry not listed is 0).
  const cases = {
    'a stencil written as a dense constant (matmul)': [
      (p) => G.add(G.matmul(band, p), G.mul(3, G.square(p), G.sub(1, p))),
      (i, j) => band[i][j] + (i === j ? 3 * (2 * u[i] - 3 * u[i] * u[i]) : 0),
    ],
    'a stencil by slices and concatenation': [
      (p) => G.add(G.sub(G.add(shift.left(p), shift.right(p)), G.mul(2, p)), G.exp(p)),
      (i, j) => (i === j ? -2 + Math.exp(u[i]) : Math.abs(i - j) === 1 ? 1 : 0),
    ],
    'a transpose, and a tall concatenation': [
      // Entry e = c·4 + r of the transposed 4×6 is parameter r·6 + c; then tanh of the first six.
      (p) => G.concat([G.reshape(G.transpose(G.reshape(p, [4, 6])), [n]), G.tanh(G.slice(p, [0], [6]))]),
      (i, j) => (i < n ? ((i % 4) * 6 + Math.floor(i / 4) === j ? 1 : 0) : i - n === j ? 1 - Math.tanh(u[j]) ** 2 : 0),
    ],
  };
  for (const [name, [f, exact]] of Object.entries(cases)) {
    test(name, () => {
      const c = G.compile(f);
      const J = c.jacobian(u);
      const m = J.length;
      for (let i = 0; i < m; i++) {
        for (let j = 0; j < n; j++) {
          const want = exact(i, j);
          if (want === 0) assert.ok(Object.is(J[i][j], 0), `${name}: J[${i}][${j}] = ${J[i][j]}, an exact +0`);
          else assert.ok(Math.abs(J[i][j] - want) <= 1e-12 * Math.abs(want), `${name}: J[${i}][${j}] = ${J[i][j]} against ${want}`);
        }
      }
      sameBits(G.jacobian(f)(u), J, `${name}: eager`);
      sameBits(c.jacobian(u), J, `${name}: compiled, again (the colors kept)`);
      for (const [how, r] of rebuilt(c)) sameBits(r.jacobian(u), J, `${name}: ${how}`);
      // The rows by reverse sweeps: the gradient of each output alone.
      for (const i of [0, 11, m - 1]) {
        const g = G.valueAndGrad((p) => G.sum(G.slice(f(p), [i], [1])))(u).gradient;
        g.forEach((x, j) => assert.ok(Math.abs(x - J[i][j]) <= 1e-12 * (1 + Math.abs(x)), `${name}: row ${i} by reverse, column ${j}`));
      }
      // And central differences of the value.
      const h = 1e-6;
      for (const j of [0, 5, n - 1]) {
        const up = u.slice(); const down = u.slice();
        up[j] += h; down[j] -= h;
        const [fu, fd] = [c.value(up), c.value(down)];
        J.forEach((row, i) => assert.ok(Math.abs(row[j] - (fu[i] - fd[i]) / (2 * h)) < 1e-6 * (1 + Math.abs(row[j])), `${name}: FD J[${i}][${j}]`));
      }
    });
  }
  test('an infinite tangent in a shared direction gives way to the reverse rows where it is not finite', () => {
    // √x at x = 0 has an infinite derivative; colored with a column whose
    // rows multiply it by a constant zero, 0·∞ would be NaN there. A reverse
    // row multiplies that zero by ∞ too, where forward mode's entry off the
    // band is an exact 0 (output i does not depend on x₃), which stands.
    const x = u.map((v) => Math.abs(v) + 0.5);
    x[3] = 0;
    const f = (p) => G.matmul(band, G.sqrt(p));
    const J = G.compile(f).jacobian(x);
    sameBits(G.jacobian(f)(x), J, 'eager');
    for (const i of [2, 3, 4, 9]) {
      const g = G.valueAndGrad((p) => G.sum(G.slice(f(p), [i], [1])))(x).gradient;
      g.forEach((v, j) => {
        if (Number.isNaN(v)) assert.ok(band[i][j] === 0 && Object.is(J[i][j], 0), `row ${i}, column ${j}: ${J[i][j]}, off the band, where the reverse row meets 0·∞`);
        else assert.ok(Object.is(v, J[i][j]) || Math.abs(v - J[i][j]) <= 1e-12 * (1 + Math.abs(v)), `row ${i}, column ${j}: ${J[i][j]} against the reverse row's ${v}`);
      });
    }
    assert.ok(Number.isNaN(G.valueAndGrad((p) => G.sum(G.slice(f(p), [9], [1])))(x).gradient[3]), "row 9's reverse sweep meets 0·∞ at x₃");
    assert.ok(!Number.isFinite(J[3][3]) && Number.isFinite(J[3][4]), 'the infinite entry, and a finite one beside it');
  });
});

describe('5c. a getter that calls again while the arguments are packed', () => {
  // The compiled jvp and forward Jacobian pack their arguments into buffers
  // kept from call to call; a call from inside a getter takes new ones.
  const f = (p, d) => G.mul(d.s, G.square(p), G.sub(1.5, p));
  const u = [0.3, -0.7, 1.1];
  const other = [2, 3, 4];
  const calling = (method) => {
    const x = u.slice();
    let calls = 0;
    Object.defineProperty(x, 1, { enumerable: true, get: () => (calls++ === 0 && method(), u[1]) });
    return x;
  };
  test('jacobian and jvp', () => {
    const c = G.compile(f);
    const ins = { s: 2 };
    const inner = [];
    const outerJ = c.jacobian(calling(() => inner.push(c.jacobian(other, { s: 3 }))), ins);
    sameBits(outerJ, G.jacobian((p) => f(p, ins))(u), 'outer jacobian');
    sameBits(inner[0], G.jacobian((p) => f(p, { s: 3 }))(other), 'inner jacobian');
    const v = [1, 0, -1];
    const outer = c.jvp(calling(() => inner.push(c.jvp(other, v, { s: 3 }))), v, ins);
    sameBits(outer, G.jvp((p) => f(p, ins))(u, v), 'outer jvp');
    sameBits(inner[1], G.jvp((p) => f(p, { s: 3 }))(other, v), 'inner jvp');
  });
});

// --------------------------------------------------------------------------
// 6. compile caching
// --------------------------------------------------------------------------

describe('6. compile traces f once per shape signature, whatever method is used', () => {
  test('plain call, value, hvp, hessian, jvp and jacobian share one trace', () => {
    let calls = 0;
    const f = (p) => {
      calls++;
      return G.add(G.sum(G.exp(p.a)), G.mul(p.b, G.sum(G.square(p.a))));
    };
    const c = G.compile(f);
    const x = { a: [0.1, 0.2], b: 0.5 };
    const v = { a: [1, 0], b: 1 };
    c(x);
    c.value(x);
    c.hvp(x, v);
    c.hessian(x);
    c.jvp(x, v);
    c.jacobian(x);
    assert.equal(calls, 1, 'one signature, one trace');
    const x2 = { a: [0.1, 0.2, 0.3], b: 0.5 };
    const v2 = { a: [1, 0, 0], b: 1 };
    c.hvp(x2, v2);
    c.hessian(x2);
    c.jvp(x2, v2);
    c(x2);
    c.jacobian(x2);
    assert.equal(calls, 2, 'a second signature, a second trace');
    c.jvp(x, v);
    c.hessian(x);
    c.hvp({ b: 0.7, a: [0.3, 0.4] }, v); // same signature, other key order and values
    assert.equal(calls, 2, 'back to the first signature: no new trace');
  });

  test('the first call may be hessian, jvp or hvp; with inputs too', () => {
    for (const first of ['hessian', 'jvp', 'hvp', 'jacobian']) {
      let calls = 0;
      const f = (z, d) => {
        calls++;
        return G.sum(G.mul(d.k, G.exp(z)));
      };
      const c = G.compile(f);
      const z = [0.1, 0.2];
      const args = { hessian: [z, { k: [1, 2] }], jvp: [z, [1, 1], { k: [1, 2] }], hvp: [z, [1, 1], { k: [1, 2] }], jacobian: [z, { k: [1, 2] }] };
      c[first](...args[first]);
      c(z, { k: [3, 4] });
      c.hessian(z, { k: [5, 6] });
      c.jvp(z, [0, 1], { k: [5, 6] });
      c.hvp(z, [0, 1], { k: [5, 6] });
      c.jacobian(z, { k: [5, 6] });
      c.value(z, { k: [5, 6] });
      assert.equal(calls, 1, `first ${first}`);
      near(c.hessian(z, { k: [5, 6] }).hessian, [[5 * Math.exp(0.1), 0], [0, 6 * Math.exp(0.2)]], TIGHT, `first ${first}: the replay reads the inputs`);
    }
  });

  test('a rebuilt plan never calls f', () => {
    let calls = 0;
    const f = (z) => {
      calls++;
      return G.sum(G.exp(z));
    };
    const c = G.compile(f);
    c.hessian([1, 2]);
    const r = G.compileFromJSON(c.toJSON());
    r.hessian([1, 2]);
    r.hvp([1, 2], [1, 1]);
    r.jvp([1, 2], [1, 1]);
    r.jacobian([1, 2]);
    assert.equal(calls, 1);
  });
});

// --------------------------------------------------------------------------
// 7. errors
// --------------------------------------------------------------------------

describe('7. errors', () => {
  test('not a function', () => {
    for (const bad of [5, null, undefined, 'f', {}]) {
      throwsMsg(() => G.jvp(bad), 'jvp: expected a function');
      throwsMsg(() => G.hvp(bad), 'hvp: expected a function');
      throwsMsg(() => G.hessian(bad), 'hessian: expected a function');
    }
  });

  const sq = (z) => G.sum(G.square(z));
  const mapF = (p) => G.add(G.sum(G.square(p.a)), G.sum(G.exp(p.b)));
  const xm = { a: [1, 2], b: [0.5, 0.25] };

  /** The same call on eager, compiled (traced by a good call first) and rebuilt forms. */
  const forms = (f, x, ins) => {
    const c = G.compile(f);
    c(x, ins);
    return [
      ['eager', { jvp: G.jvp(f), hvp: G.hvp(f), hessian: G.hessian(f) }],
      ['compiled', c],
      ['rebuilt', G.compileFromJSON(c.toJSON())],
    ];
  };

  test('tangent shaped unlike a single parameter', () => {
    for (const [how, h] of forms(sq, [1, 2])) {
      assert.throws(() => h.jvp([1, 2], [1, 2, 3]), { message: 'jvp: the tangent is shaped [3], unlike the parameter ([2])' }, how);
      assert.throws(() => h.hvp([1, 2], [1, 2, 3]), { message: 'hvp: the tangent is shaped [3], unlike the parameter ([2])' }, how);
      assert.throws(() => h.hvp([1, 2], [[1, 2]]), { message: 'hvp: the tangent is shaped [1×2], unlike the parameter ([2])' }, how);
      assert.throws(() => h.jvp([1, 2], 1), { message: 'jvp: the tangent is shaped scalar, unlike the parameter ([2])' }, how);
    }
  });

  test('map tangent: a parameter shaped otherwise, a missing key, an extra key, not a map', () => {
    for (const [how, h] of forms(mapF, xm)) {
      assert.throws(() => h.hvp(xm, { a: [1, 1], b: [1, 2, 3] }), { message: 'hvp: tangent "b" is shaped [3], unlike parameter "b" ([2])' }, how);
      assert.throws(() => h.jvp(xm, { a: [1, 1], b: [1, 2, 3] }), { message: 'jvp: tangent "b" is shaped [3], unlike parameter "b" ([2])' }, how);
      assert.throws(() => h.jvp(xm, { a: [1, 1] }), { message: 'jvp: the tangent has no key "b"; it needs one per parameter' }, how);
      assert.throws(() => h.hvp(xm, { a: [1, 1] }), { message: 'hvp: the tangent has no key "b"; it needs one per parameter' }, how);
      assert.throws(() => h.jvp(xm, { a: [1, 1], b: [1, 1], z: 1 }), { message: 'jvp: the tangent has key "z", which is not a parameter' }, how);
      assert.throws(() => h.jvp(xm, [1, 1, 1, 1]), { message: 'jvp: the tangent must be a {name: value} map with the parameters\' keys' }, how);
      assert.throws(() => h.hvp(xm, 3), { message: 'hvp: the tangent must be a {name: value} map with the parameters\' keys' }, how);
    }
  });

  test('a tangent that is not a value at all: asTensor\'s message, with the function\'s prefix', () => {
    for (const [how, h] of forms(sq, [1, 2])) {
      assert.throws(() => h.hvp([1, 2], { a: [1, 2] }), { message: 'hvp: the tangent must be a number, a non-empty array, or a tensor' }, how);
    }
    for (const [how, h] of forms(mapF, xm)) {
      assert.throws(() => h.jvp(xm, { a: 'x', b: [1, 1] }), { message: 'jvp: tangent "a" must be a number, a non-empty array, or a tensor' }, how);
      assert.throws(() => h.hvp(xm, { a: [[1], [1, 2]], b: [1, 1] }), { message: 'hvp: tangent "a" is not rectangular (row 1 has length 2, expected 1)' }, how);
    }
  });

  test('non-scalar objective for hvp and hessian, eager and compiled', () => {
    const vecF = (z) => G.square(z);
    const c = G.compile(vecF);
    const want = (where) => `${where}: the objective must return a scalar, got [2]. Reduce it with sum() or mean() first.`;
    throwsMsg(() => G.hvp(vecF)([1, 2], [1, 1]), want('hvp'));
    throwsMsg(() => G.hessian(vecF)([1, 2]), want('hessian'));
    throwsMsg(() => c.hvp([1, 2], [1, 1]), want('hvp'));
    throwsMsg(() => c.hessian([1, 2]), want('hessian'));
    c.value([1, 2]);
    const r = G.compileFromJSON(c.toJSON());
    throwsMsg(() => r.hvp([1, 2], [1, 1]), want('hvp'));
    throwsMsg(() => r.hessian([1, 2]), want('hessian'));
    // jvp takes non-scalar objectives
    near(G.jvp(vecF)([1, 2], [1, 1]).tangent, [2, 4], TIGHT, 'jvp of a vector');
    near(c.jvp([1, 2], [1, 1]).tangent, [2, 4], TIGHT, 'compiled jvp of a vector');
  });

  test('a hand-built Var: jvp, hvp and hessian say it has no forward rule; jacobian still works', () => {
    // h = 2x with its own closure: its backward is g → 2g, consistent with its value.
    const doubled = (x) => new G.Var({ data: Float64Array.of(2 * x.data[0]), shape: [] }, [x], (g) => [Float64Array.of(2 * g[0])]);
    const f = (x) => G.mul(doubled(x), doubled(x)); // 4x², derivative 8x
    const tall = (x) => G.concat([G.mul(doubled(x), doubled(x)), x, doubled(x)]); // [4x², x, 2x]
    for (const [how, fns] of [['eager', { jvp: G.jvp(f), hvp: G.hvp(f), hessian: G.hessian(f) }], ['compiled', G.compile(f)]]) {
      assert.throws(() => fns.jvp(3, 1), (e) => e instanceof Error && /has no forward rule/.test(e.message), `${how} jvp`);
      assert.throws(() => fns.hvp(3, 1), (e) => e instanceof Error && /has no forward rule/.test(e.message), `${how} hvp`);
      assert.throws(() => fns.hessian(3), (e) => e instanceof Error && /has no forward rule/.test(e.message), `${how} hessian`);
    }
    // valueAndGrad honours it (SPEC §2) and so does the SPEC jacobian, even where it would pick forward mode.
    assert.deepEqual(G.valueAndGrad(f)(3), { value: 36, gradient: 24 });
    assert.deepEqual(G.jacobian(f)(3), [[24]]);
    assert.deepEqual(G.jacobian(tall)(3), [[24], [1], [2]]);
    assert.deepEqual(G.compile(tall).jacobian(3), [[24], [1], [2]]);
    // A vector parameter feeding a hand-built node, 2 inputs and 3 outputs (forward would be picked).
    const summed = (x) => new G.Var({ data: Float64Array.of(x.data[0] + x.data[1]), shape: [] }, [x], (g) => [Float64Array.of(g[0], g[0])]);
    const g3 = (x) => G.concat([G.square(summed(x)), x]);
    assert.deepEqual(G.jacobian(g3)([1, 2]), [[6, 6], [1, 0], [0, 1]]);
  });

  test('a matrix that is not positive definite: valueAndGrad\'s message from jvp, hvp and hessian, eager and compiled', () => {
    const f = (A) => G.logdetPSD(A);
    const good = [[2, 0.5], [0.5, 1]];
    const bad = [[1, 2], [2, 1]];
    const want = messageOf(() => G.valueAndGrad(f)(bad));
    assert.match(want, /^cholesky: matrix is not positive definite \(pivot /);
    const dir = [[1, 0], [0, 1]];
    throwsMsg(() => G.jvp(f)(bad, dir), want);
    throwsMsg(() => G.hvp(f)(bad, dir), want);
    throwsMsg(() => G.hessian(f)(bad), want);
    // compiled: traced at a good matrix, then replayed at the bad one, then good again
    const c = G.compile(f);
    const ok = { jvp: c.jvp(good, dir), hvp: c.hvp(good, dir), hessian: c.hessian(good) };
    throwsMsg(() => c.jvp(bad, dir), want);
    throwsMsg(() => c.hvp(bad, dir), want);
    throwsMsg(() => c.hessian(bad), want);
    // (jacobian is not bound to valueAndGrad's wording; it must still name the failure)
    assert.throws(() => c.jacobian(bad), /cholesky: matrix is not positive definite \(pivot /);
    sameBits(c.jvp(good, dir), ok.jvp, 'jvp after a failed replay');
    sameBits(c.hvp(good, dir), ok.hvp, 'hvp after a failed replay');
    sameBits(c.hessian(good), ok.hessian, 'hessian after a failed replay');
    // compiled, traced at the bad matrix itself
    throwsMsg(() => G.compile(f).hessian(bad), want);
    throwsMsg(() => G.compile(f).hvp(bad, dir), want);
    throwsMsg(() => G.compile(f).jvp(bad, dir), want);
    // rebuilt
    const r = G.compileFromJSON(c.toJSON());
    throwsMsg(() => r.hessian(bad), want);
    throwsMsg(() => r.hvp(bad, dir), want);
    sameBits(r.hessian(good), ok.hessian, 'rebuilt hessian after a failure');
  });

  test('a Hessian past the cap on values is refused at once, eager and compiled', () => {
    const x = new Float64Array(20000).fill(0.5);
    const want = 'hessian: 20000 parameters make a 20000×20000 Hessian of 400000000 entries, more than the 268435456 a value may hold';
    throwsMsg(() => G.hessian(sq)(x), want);
    const c = G.compile(sq);
    throwsMsg(() => c.hessian(x), want);
    throwsMsg(() => c.hessian(x), want);
    const r = G.compileFromJSON(c.toJSON());
    throwsMsg(() => r.hessian(x), want);
    // The same plan still answers hvp at that size, and a small one still answers hessian.
    const small = G.compile(sq).hessian([1, 2]);
    assert.deepEqual(small.hessian, [[2, 0], [0, 2]]);
    const big = c.hvp(x, new Float64Array(20000).fill(1));
    assert.equal(big.hvp.length, 20000);
    assert.ok(big.hvp.every((e) => e === 2));
  });

  test('a Jacobian past the cap on values is refused before its sweeps, eager and compiled', () => {
    // 30000 outputs over 10000 inputs: one sweep per column or row would take minutes and gigabytes.
    const x = new Float64Array(10000).fill(0.5);
    const want = 'jacobian: a 30000×10000 Jacobian holds 300000000 entries, more than the 268435456 a value may hold';
    const f = (p) => G.concat([p, p, p]);
    // A hand-built node sends the compiled one to the eager reverse rows (valueAndGrad's forms).
    const same = (v) => new G.Var(v.value, [v], (g) => [g]);
    const handBuilt = (p) => G.concat([same(p), p, p]);
    const t0 = performance.now();
    throwsMsg(() => G.jacobian(f)(x), want);
    throwsMsg(() => G.jacobian(handBuilt)(x), want);
    throwsMsg(() => G.compile(f).jacobian(x), want);
    throwsMsg(() => G.compile(handBuilt).jacobian(x), want);
    assert.ok(performance.now() - t0 < 5000, 'refused at once');
    // No columns: no entries, but 2^20 + 1 rows of empty arrays, refused as toNested refuses them.
    const u = new Float64Array(2 ** 20 + 1);
    const wide = (p) => G.add(u, G.sum(p));
    const empty = 'jacobian: a 1048577×0 Jacobian has too many rows to return as nested arrays';
    throwsMsg(() => G.jacobian(wide)(new Float64Array(0)), empty);
    throwsMsg(() => G.compile(wide).jacobian(new Float64Array(0)), empty);
    const rows = G.compile((p) => G.add(u.subarray(1), G.sum(p))).jacobian(new Float64Array(0));
    assert.ok(rows.length === 2 ** 20 && rows.every((r) => Array.isArray(r) && r.length === 0));
  });

  test('the wrong shape for a compiled plan\'s signature from a rebuilt plan names the signature', () => {
    const c = G.compile(sq);
    c([1, 2]);
    const r = G.compileFromJSON(c.toJSON());
    assert.throws(() => r.hessian([1, 2, 3]), /compileFromJSON: this plan was built for arguments shaped v2, got v3\./);
    assert.throws(() => r.hvp([1, 2, 3], [1, 1, 1]), /compileFromJSON: this plan was built for arguments shaped v2, got v3\./);
    assert.throws(() => r.jvp([1, 2, 3], [1, 1, 1]), /compileFromJSON: this plan was built for arguments shaped v2, got v3\./);
  });
});
