// compile, valueAndGradFns and splitValueAndGrad (SPEC §6–§7).
//
// The central promise: a compiled closure gives exactly the numbers of
// valueAndGrad — every value and every gradient entry compared with
// Object.is — on every op and on the benchmark workloads, while tracing the
// objective once per shape signature.

import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import * as G from '../index.js';
import {
  Var, tensor, isTensor,
  add, sub, mul, div, neg, exp, log, sqrt, square, pow, tanh, sigmoid, maximum, minimum, relu, lgamma,
  sum, mean, matmul, dot, transpose, diagPart, trace, addDiag, reshape, slice, concat,
  cholesky, triangularSolve, logdetPSD, solvePSD, solveGeneral, inv,
  valueAndGrad, valueAndGradFns, splitValueAndGrad, compile,
} from '../index.js';
import {
  regressionData, regression, regressionParams, gpData, gp, mlpSetup, mlp,
} from '../bench/models.mjs';

// ---------------------------------------------------------------- helpers

function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 4294967296;
  };
}

/** Deterministic data of a shape, as nested arrays (number for a scalar). */
function data(shape, seed, lo = -1.5, hi = 1.5) {
  const r = rng(seed);
  const u = () => lo + (hi - lo) * r();
  if (shape.length === 0) return u();
  if (shape.length === 1) return Array.from({ length: shape[0] }, u);
  return Array.from({ length: shape[0] }, () => Array.from({ length: shape[1] }, u));
}

/** Weights of a shape, distinct per entry, so that every adjoint entry differs. */
function weights(shape) {
  const n = shape.reduce((a, b) => a * b, 1);
  const w = Float64Array.from({ length: n }, (_, i) => 0.3 + 0.17 * i - 0.011 * i * i);
  return tensor(w, shape);
}

/** Reduce any Var to a scalar through a weighted sum. */
function reduce(v) {
  return v.shape.length === 0 ? mul(v, 1.3) : sum(mul(v, weights(v.shape)));
}

const kind = (x) =>
  typeof x === 'number' ? 'number'
    : x instanceof Float64Array ? 'Float64Array'
      : Array.isArray(x) ? 'Array'
        : x === null ? 'null' : typeof x;

/** Deep equality where every number is compared with Object.is, and containers by kind. */
function sameBits(actual, expected, path = 'result') {
  assert.equal(kind(actual), kind(expected), `${path}: ${kind(actual)} where ${kind(expected)} was expected`);
  if (typeof expected === 'number') {
    if (!Object.is(actual, expected)) assert.fail(`${path}: ${actual} !== ${expected} (bit for bit)`);
    return;
  }
  if (expected instanceof Float64Array || Array.isArray(expected)) {
    assert.equal(actual.length, expected.length, `${path}: length`);
    for (let i = 0; i < expected.length; i++) sameBits(actual[i], expected[i], `${path}[${i}]`);
    return;
  }
  if (expected !== null && typeof expected === 'object') {
    assert.deepEqual(Object.keys(actual), Object.keys(expected), `${path}: keys (in order)`);
    for (const k of Object.keys(expected)) sameBits(actual[k], expected[k], `${path}.${k}`);
    return;
  }
  assert.equal(actual, expected, path);
}

/** A deep copy of parameters/inputs, typed arrays kept typed. */
function snapshot(x) {
  if (x instanceof Float64Array) return x.slice();
  if (Array.isArray(x)) return x.map(snapshot);
  if (x !== null && typeof x === 'object') {
    const o = {};
    for (const k of Object.keys(x)) o[k] = snapshot(x[k]);
    return o;
  }
  return x;
}

/** Count calls of f. */
function counted(f) {
  const g = (...a) => {
    g.calls++;
    return f(...a);
  };
  g.calls = 0;
  return g;
}

/**
 * Compile f, then for each argument set compare compiled and eager results
 * (value and gradient, and the forward-only .value) bit for bit; the plan
 * must be traced once and reused for every set.
 */
function checkCompiled(name, f, argSets) {
  const vg = valueAndGrad(f);
  const cf = counted(f);
  const c = compile(cf);
  argSets.forEach(([x, inputs], k) => {
    const before = snapshot([x, inputs]);
    const expected = inputs === undefined ? vg(x) : vg(x, inputs);
    const got = inputs === undefined ? c(x) : c(x, inputs);
    sameBits(got, expected, `${name} #${k}`);
    sameBits(c.value(x, inputs), vg.value(x, inputs), `${name} #${k} .value`);
    sameBits(snapshot([x, inputs]), before, `${name} #${k}: arguments left untouched`);
  });
  assert.equal(cf.calls, 1, `${name}: objective traced ${cf.calls} times for one shape signature`);
}

/** n parameter sets of map {name: shape}, positive entries where asked. */
function paramSets(shapes, n = 3, ranges = {}) {
  return Array.from({ length: n }, (_, k) => {
    const p = {};
    Object.entries(shapes).forEach(([name, s], j) => {
      const [lo, hi] = ranges[name] ?? [-1.5, 1.5];
      p[name] = data(s, 1000 * k + 37 * j + 5, lo, hi);
    });
    return [p];
  });
}

/** Every number of a value, in row-major order. */
function flatten(x) {
  if (typeof x === 'number') return [x];
  if (x instanceof Float64Array) return Array.from(x);
  if (Array.isArray(x)) return x.flatMap(flatten);
  return Array.from(x.data);
}

/** The numbers of two gradient maps, key by key, bit for bit, whatever their forms. */
function sameNumbers(actual, expected, path = 'gradient') {
  assert.deepEqual(Object.keys(actual).sort(), Object.keys(expected).sort(), `${path}: keys`);
  for (const k of Object.keys(expected)) sameBits(flatten(actual[k]), flatten(expected[k]), `${path}.${k}`);
}

const fmt = (s) => (s.length === 0 ? 's' : s.join('x'));

// ---------------------------------------------------------------- bit-for-bit on every op

describe('compile equals valueAndGrad bit for bit', () => {
  const pairs = [
    [[], []], [[3], [3]], [[2, 3], [2, 3]],
    [[], [3]], [[3], []], [[], [2, 3]], [[2, 3], []],
    [[3], [2, 3]], [[2, 3], [3]],
  ];
  const binaries = { add, sub, mul, div, maximum, minimum };

  test('binary elementwise ops, every broadcasting case', () => {
    for (const [name, op] of Object.entries(binaries)) {
      for (const [sa, sb] of pairs) {
        const sets = paramSets({ a: sa, b: sb }, 3, name === 'div' ? { b: [0.5, 2] } : {});
        checkCompiled(`${name}(${fmt(sa)}, ${fmt(sb)})`, (p) => reduce(op(p.a, p.b)), sets);
        // The same against constants on either side, and nonlinear on top.
        checkCompiled(
          `${name}(${fmt(sa)}, const ${fmt(sb)})`,
          (p) => reduce(square(op(p.a, add(data(sb, 77, 0.5, 2), 0)))),
          paramSets({ a: sa }),
        );
        checkCompiled(
          `${name}(const ${fmt(sa)}, ${fmt(sb)})`,
          (p) => reduce(op(data(sa, 78, 0.5, 2), p.b)),
          paramSets({ b: sb }, 3, { b: [0.5, 2] }),
        );
      }
    }
  });

  test('variadic add/mul with numbers mixed in, and a parameter used twice', () => {
    const sets = paramSets({ a: [3], b: [], c: [2, 3] });
    checkCompiled('add(a, 2, b, c, a)', (p) => reduce(add(p.a, 2, p.b, p.c, p.a)), sets);
    checkCompiled('mul(a, 2, b, c, a)', (p) => reduce(mul(p.a, 2, p.b, p.c, p.a)), sets);
    checkCompiled('mul(2, a) - 3', (p) => reduce(sub(mul(2, p.a), 3)), sets);
    checkCompiled('div(1, b) / a', (p) => reduce(div(div(1, add(square(p.b), 1)), add(square(p.a), 1))), sets);
  });

  test('maximum/minimum ties and NaN', () => {
    const a = [1, 2, 3, -1, 0.5];
    const tie = [1, 0, 3, -2, 0.5]; // ties at 0, 2, 4
    const sets = [[{ a, b: tie }], [{ a: tie, b: a }], [{ a, b: a }], [{ a: [NaN, 2, 3, -1, 0.5], b: tie }], [{ a, b: [1, NaN, 3, NaN, 0.5] }]];
    checkCompiled('maximum ties', (p) => reduce(maximum(p.a, p.b)), sets);
    checkCompiled('minimum ties', (p) => reduce(minimum(p.a, p.b)), sets);
    checkCompiled('maximum scalar tie', (p) => reduce(maximum(p.a, p.s)), [[{ a, s: 1 }], [{ a, s: 0.5 }], [{ a, s: NaN }]]);
    checkCompiled('minimum number tie', (p) => reduce(minimum(p.a, 0.5)), [[{ a }], [{ a: tie }]]);
    checkCompiled('relu at zero and NaN', (p) => reduce(relu(p.a)), [[{ a: [0, -0, 1, -1, NaN] }], [{ a }]]);
  });

  test('unary ops', () => {
    const unaries = { neg, exp, log, sqrt, square, tanh, sigmoid, relu, lgamma };
    const positive = new Set(['log', 'sqrt']);
    for (const [name, op] of Object.entries(unaries)) {
      for (const s of [[], [4], [2, 3]]) {
        const range = positive.has(name) || name === 'lgamma' ? [0.1, 4] : [-2, 2];
        checkCompiled(`${name}(${fmt(s)})`, (p) => reduce(op(p.a)), paramSets({ a: s }, 3, { a: range }));
      }
    }
    // lgamma off the easy path: negative non-integers, poles, large arguments.
    checkCompiled('lgamma special points', (p) => reduce(lgamma(p.a)), [
      [{ a: [-0.5, -1.5, -2.25, 0.001, 30.5, 171.2] }],
      [{ a: [0, -1, -2, 1, 2, 1e-8] }],
    ]);
    // Non-finite values from log/sqrt propagate identically.
    checkCompiled('log/sqrt out of domain', (p) => reduce(add(log(p.a), sqrt(p.a))), [[{ a: [-1, 0, 1, 2] }], [{ a: [1, 2, 3, 4] }]]);
  });

  test('pow with several exponents', () => {
    for (const k of [2, 3, 0.5, -1.5, 0, 1, -2]) {
      checkCompiled(`pow(·, ${k})`, (p) => reduce(pow(p.a, k)), paramSets({ a: [2, 3] }, 3, { a: [0.2, 3] }));
    }
    checkCompiled('pow of a scalar', (p) => reduce(pow(p.a, 2.5)), paramSets({ a: [] }, 3, { a: [0.2, 3] }));
  });

  test('reductions', () => {
    for (const s of [[], [5], [3, 4]]) {
      checkCompiled(`sum(${fmt(s)})`, (p) => mul(sum(square(p.a)), sum(p.a)), paramSets({ a: s }));
      checkCompiled(`mean(${fmt(s)})`, (p) => mul(mean(square(p.a)), mean(p.a)), paramSets({ a: s }));
    }
  });

  test('shape and matrix ops', () => {
    checkCompiled('matmul m×k · k×n', (p) => reduce(matmul(p.A, p.B)), paramSets({ A: [2, 3], B: [3, 4] }));
    checkCompiled('matmul m×k · k', (p) => reduce(matmul(p.A, p.b)), paramSets({ A: [4, 3], b: [3] }));
    checkCompiled('matmul const · param', (p) => reduce(matmul(data([5, 3], 9), p.B)), paramSets({ B: [3, 2] }));
    checkCompiled('dot', (p) => mul(dot(p.u, p.v), dot(p.u, p.u)), paramSets({ u: [4], v: [4] }));
    checkCompiled('transpose', (p) => reduce(matmul(transpose(p.A), p.A)), paramSets({ A: [3, 2] }));
    checkCompiled('diagPart', (p) => reduce(diagPart(p.A)), paramSets({ A: [3, 3] }));
    checkCompiled('trace', (p) => mul(trace(matmul(p.A, p.A)), 1), paramSets({ A: [3, 3] }));
    checkCompiled('addDiag scalar', (p) => reduce(addDiag(p.A, p.s)), paramSets({ A: [3, 3], s: [] }));
    checkCompiled('addDiag vector', (p) => reduce(square(addDiag(p.A, p.d))), paramSets({ A: [3, 3], d: [3] }));
    checkCompiled('addDiag number', (p) => reduce(addDiag(p.A, 0.25)), paramSets({ A: [3, 3] }));
    checkCompiled('reshape 2×3→6→3×2', (p) => reduce(reshape(reshape(p.A, [6]), [3, 2])), paramSets({ A: [2, 3] }));
    checkCompiled('reshape 1×1→scalar, scalar→[1]', (p) => reduce(reshape(mul(reshape(p.A, []), 2), [1])), paramSets({ A: [1, 1] }));
    checkCompiled('slice vector', (p) => reduce(slice(p.a, [1], [3])), paramSets({ a: [6] }));
    checkCompiled('slice matrix', (p) => reduce(square(slice(p.A, [1, 2], [2, 2]))), paramSets({ A: [4, 5] }));
    checkCompiled('slice twice, overlapping', (p) => reduce(mul(slice(p.a, [0], [3]), slice(p.a, [2], [3]))), paramSets({ a: [5] }));
    checkCompiled('concat scalars and vectors with numbers', (p) => reduce(concat([p.s, 2, p.v, p.s, [7, 8]])), paramSets({ s: [], v: [3] }));
    checkCompiled('concat matrices axis 0', (p) => reduce(concat([p.A, p.B, [[1, 2, 3]]])), paramSets({ A: [2, 3], B: [1, 3] }));
    checkCompiled('concat matrices axis 1', (p) => reduce(concat([p.A, p.B], { axis: 1 })), paramSets({ A: [2, 3], B: [2, 2] }));
  });

  // An SPD matrix for any parameter A: A Aᵀ + 3 I.
  const spd = (A) => addDiag(matmul(A, transpose(A)), 3);

  test('linear algebra', () => {
    const sets = paramSets({ A: [3, 3], b: [3], B: [3, 2] });
    checkCompiled('cholesky', (p) => reduce(cholesky(spd(p.A))), sets);
    checkCompiled('triangularSolve lower, vector', (p) => reduce(triangularSolve(cholesky(spd(p.A)), p.b)), sets);
    checkCompiled('triangularSolve upper, matrix', (p) => reduce(triangularSolve(transpose(cholesky(spd(p.A))), p.B, { lower: false })), sets);
    // A raw parameter as T: only its own triangle is read, the other gets zero gradient.
    const tri = paramSets({ T: [3, 3], B: [3, 2] }, 3).map(([p]) => {
      p.T.forEach((row, i) => (row[i] = 2 + Math.abs(row[i])));
      return [p];
    });
    checkCompiled('triangularSolve raw T lower', (p) => reduce(triangularSolve(p.T, p.B)), tri);
    checkCompiled('triangularSolve raw T upper', (p) => reduce(triangularSolve(p.T, p.B, { lower: false })), tri);
    checkCompiled('logdetPSD', (p) => logdetPSD(spd(p.A)), sets);
    checkCompiled('solvePSD vector', (p) => reduce(solvePSD(spd(p.A), p.b)), sets);
    checkCompiled('solvePSD matrix', (p) => reduce(solvePSD(spd(p.A), p.B)), sets);
    checkCompiled('solvePSD and logdetPSD of one K', (p) => {
      const K = spd(p.A);
      return sub(dot(p.b, solvePSD(K, p.b)), logdetPSD(K));
    }, sets);
    const general = paramSets({ A: [3, 3], b: [3], B: [3, 2] }, 3).map(([p]) => {
      p.A.forEach((row, i) => (row[i] += 5));
      return [p];
    });
    checkCompiled('solveGeneral vector', (p) => reduce(solveGeneral(p.A, p.b)), general);
    checkCompiled('solveGeneral matrix', (p) => reduce(solveGeneral(p.A, p.B)), general);
    checkCompiled('inv', (p) => reduce(inv(p.A)), general);
  });

  test('single (non-map) parameters of every form', () => {
    checkCompiled('number', (x) => reduce(exp(mul(x, x))), [[0.3], [-0.7], [1.1]]);
    checkCompiled('number[]', (x) => reduce(tanh(x)), [[[1, 2, 3]], [[-1, 0, 1]]]);
    checkCompiled('Float64Array', (x) => reduce(tanh(x)), [[Float64Array.of(1, 2, 3)], [Float64Array.of(-1, 0, 1)]]);
    checkCompiled('number[][]', (x) => reduce(sigmoid(x)), [[[[1, 2], [3, 4]]], [[[0, 1], [2, 3]]]]);
    checkCompiled('rows as Float64Arrays', (x) => reduce(sigmoid(x)), [[[Float64Array.of(1, 2), Float64Array.of(3, 4)]], [[[0, 1], [2, 3]]]]);
    checkCompiled('tensor', (x) => reduce(square(x)), [[tensor([1, 2, 3, 4], [2, 2])], [tensor([0, 1, 2, 3], [2, 2])]]);
    checkCompiled('scalar tensor', (x) => reduce(square(x)), [[tensor([1.5], [])], [2.5]]);
  });

  test('objectives with inputs', () => {
    const f = (p, d) => reduce(square(sub(add(matmul(d.X, p.w), p.b), d.y)));
    const sets = [0, 1, 2].map((k) => [{ w: data([3], k), b: data([], k + 10) }, { X: data([5, 3], k + 20), y: data([5], k + 30) }]);
    checkCompiled('inputs', f, sets);
    checkCompiled('inputs as tensors', f, sets.map(([p, d]) => [p, { X: tensor(d.X.flat(), [5, 3]), y: Float64Array.from(d.y) }]));
  });
});

describe('compile on the benchmark workloads, bit for bit', () => {
  test('regression (map params), several parameter values', () => {
    const d = regressionData();
    const sets = [0, 1, 2, 3].map((k) => {
      const q = regressionParams();
      q.intercept += 0.1 * k;
      q.beta = q.beta.map((b, j) => b + 0.01 * k * (j - 6));
      q.logSigma -= 0.05 * k;
      return [q];
    });
    checkCompiled('regression', regression(G, d), sets);
  });

  test('gp, n = 30, several parameter values', () => {
    const d = gpData(30);
    // The last set lists the keys in another order: same plan, the caller's order back.
    const sets = [[{ l: 1.2, v: 0.8 }], [{ l: 0.7, v: 1.5 }], [{ l: 0.3, v: 0.2 }], [{ v: 1, l: 2.5 }]];
    checkCompiled('gp30', gp(G, d), sets);
  });

  test('mlp with tensor params and the batch as inputs', () => {
    const { params, batch } = mlpSetup(G);
    const scaled = (s) => Object.fromEntries(Object.entries(params).map(([k, t]) => [k, tensor(t.data.map((v, i) => v * s + 0.01 * (i % 3)), t.shape)]));
    const shifted = (s) => ({ X: batch.X.map((r) => r.map((v) => v + s)), y: batch.y });
    const sets = [[params, batch], [scaled(1.3), batch], [scaled(0.7), shifted(0.2)], [params, shifted(-0.4)]];
    checkCompiled('mlp', mlp(G), sets);
  });
});

// ---------------------------------------------------------------- signatures and the plan cache

describe('one plan per shape signature', () => {
  test('f runs once per new signature; number and scalar tensor share one; nested and tensor forms share one', () => {
    const f = counted((x) => sum(square(x)));
    const c = compile(f);
    c(1);
    c(2);
    c(tensor([3], []));
    c(tensor(Float64Array.of(4), []));
    assert.equal(f.calls, 1, 'number and scalar tensor');
    c([1, 2]);
    c(Float64Array.of(3, 4));
    c(tensor([5, 6], [2]));
    assert.equal(f.calls, 2, 'number[], Float64Array and vector tensor');
    c([[1, 2], [3, 4]]);
    c([Float64Array.of(1, 2), Float64Array.of(3, 4)]);
    c(tensor([1, 2, 3, 4], [2, 2]));
    assert.equal(f.calls, 3, 'nested rows and matrix tensor');
    c([1, 2, 3]);
    c(tensor([1, 2, 3, 4], [4, 1]));
    c(tensor([1, 2, 3, 4], [1, 4]));
    assert.equal(f.calls, 6, 'each new shape traces');
    // Every form still gives the right numbers.
    sameBits(c(tensor([3], [])), valueAndGrad((x) => sum(square(x)))(tensor([3], [])));
    sameBits(c.value([Float64Array.of(1, 2), Float64Array.of(3, 5)]), 39);
    assert.equal(f.calls, 6);
  });

  test('map signatures: keys sorted, inputs part of the signature', () => {
    const f = counted((p, d) => (d ? sum(mul(add(p.a, p.b), d.x)) : sum(mul(p.a, p.b))));
    const c = compile(f);
    const r1 = c({ a: [1, 2], b: 3 });
    const r2 = c({ b: 4, a: tensor([5, 6], [2]) });
    assert.equal(f.calls, 1, 'same map in another key order, another form');
    assert.deepEqual(Object.keys(r2.gradient), ['b', 'a'], "gradient in the caller's key order");
    sameBits(r1, { value: 9, gradient: { a: [3, 3], b: 3 } });
    sameBits(r2, { value: 44, gradient: { b: 11, a: { data: Float64Array.of(4, 4), shape: [2] } } });
    c({ a: [1, 2], b: 3 }, { x: [1, 1] });
    assert.equal(f.calls, 2, 'with inputs is a new signature');
    c({ a: [1, 2], b: 3 }, { x: Float64Array.of(2, 2) });
    assert.equal(f.calls, 2);
    c({ a: [1, 2], b: 3 }, { x: 2 });
    assert.equal(f.calls, 3, 'input shape is part of the signature');
    c({ a: [1, 2], b: [3, 3] });
    assert.equal(f.calls, 4, 'parameter shape is part of the signature');
    c({ a: [1, 2], b: 3, z: 0 });
    assert.equal(f.calls, 5, 'an extra key is a new signature');
  });

  test('calls that differ from the previous one only slightly still get their own plan', () => {
    // Each call is checked against valueAndGrad, and the trace count says
    // whether a plan was (correctly) reused or built.
    const check = (c, vg, f, want, x, inputs) => {
      const got = inputs === undefined ? c(x) : c(x, inputs);
      sameBits(got, inputs === undefined ? vg(x) : vg(x, inputs), JSON.stringify([x, inputs]));
      assert.equal(f.calls, want, `traces after ${JSON.stringify([x, inputs])}`);
    };
    // Scalar, [1], [1×1] and tensor shapes.
    const f = counted((x) => sum(square(x)));
    const vf = valueAndGrad((x) => sum(square(x)));
    const c = compile(f);
    check(c, vf, f, 1, 2);
    check(c, vf, f, 2, [2]);
    check(c, vf, f, 3, [[2]]);
    check(c, vf, f, 3, tensor([3], [1, 1]));
    check(c, vf, f, 3, 5);
    check(c, vf, f, 3, Float64Array.of(2));
    check(c, vf, f, 3, tensor([7], []));
    check(c, vf, f, 4, tensor([1, 2], [2]));
    check(c, vf, f, 5, tensor([1, 2], [1, 2]));
    check(c, vf, f, 6, tensor([1, 2], [2, 1]));
    check(c, vf, f, 6, [[1], [2]]);
    check(c, vf, f, 7, [[1, 2], [3, 4]]);
    check(c, vf, f, 8, [[1, 2, 3], [3, 4, 5]]);
    check(c, vf, f, 8, [Float64Array.of(1, 2, 3), Float64Array.of(3, 4, 5)]);
    // Maps with as many keys but other names, an extra key, another order.
    const body = (p) => {
      const ks = Object.keys(p);
      return add(sum(square(p[ks[0]])), sum(p[ks[1]]));
    };
    const g = counted(body);
    const vg = valueAndGrad(body);
    const cg = compile(g);
    check(cg, vg, g, 1, { a: 1, b: [2, 3] });
    check(cg, vg, g, 2, { a: 1, c: [2, 3] });
    check(cg, vg, g, 2, { a: 4, c: [5, 6] });
    check(cg, vg, g, 3, { a: 1, b: [2, 3], c: 4 });
    check(cg, vg, g, 4, { a: 1, b: 2 });
    check(cg, vg, g, 4, { a: 0.5, b: [2, 3] });
    // Inputs: absent, empty, present, other shapes, other names, extra names.
    const hb = (p, d) => (d && d.x ? mul(p, sum(d.x)) : mul(p, 2));
    const h = counted(hb);
    const vh = valueAndGrad(hb);
    const ch = compile(h);
    check(ch, vh, h, 1, 1);
    check(ch, vh, h, 2, 1, {});
    check(ch, vh, h, 2, 3);
    check(ch, vh, h, 2, 3, {});
    check(ch, vh, h, 3, 1, { x: [1, 2] });
    check(ch, vh, h, 3, 2, { x: Float64Array.of(5, 6) });
    check(ch, vh, h, 4, 1, { x: [1, 2, 3] });
    check(ch, vh, h, 5, 1, { y: [1, 2] });
    check(ch, vh, h, 6, 1, { x: [1, 2], y: 3 });
    check(ch, vh, h, 6, 2, { x: [1, 2] });
    check(ch, vh, h, 6, 2);
  });

  test('at most 8 plans; the 9th evicts the oldest inserted', () => {
    const f = counted((x) => sum(x));
    const c = compile(f);
    const v = (n) => Array.from({ length: n }, (_, i) => i + 1);
    for (let n = 1; n <= 8; n++) c(v(n));
    assert.equal(f.calls, 8);
    c(v(1)); // a hit; it does not move v1 to the back
    assert.equal(f.calls, 8, 'all 8 kept');
    c(v(9));
    assert.equal(f.calls, 9);
    c(v(2));
    assert.equal(f.calls, 9, 'v2 kept: eviction is by insertion, not by use');
    c(v(1));
    assert.equal(f.calls, 10, 'v1, the oldest inserted, was evicted');
    for (const n of [3, 4, 5, 6, 7, 8, 9, 1]) c(v(n));
    assert.equal(f.calls, 10, 'v3..v9 and the re-traced v1 are kept');
    c(v(2));
    assert.equal(f.calls, 11, 're-tracing v1 evicted v2');
    sameBits(c(v(5)), { value: 15, gradient: [1, 1, 1, 1, 1] });
  });
});

// ---------------------------------------------------------------- constants and inputs

describe('captured data and inputs', () => {
  test('captured arrays are frozen at trace time', () => {
    const arr = [1, 2, 3];
    const f64 = Float64Array.of(0.5, 0.25, 2);
    const nested = [[1, 0], [0, 1], [1, 1]];
    const ten = tensor([1, 1, 1], [3]);
    const f = (x) => add(sum(mul(mul(x, arr), f64)), sum(matmul(transpose(nested), mul(x, ten.data))), dot(x, ten));
    const c = compile(f);
    const x = [0.3, -0.2, 0.9];
    const first = c(x);
    const vg = valueAndGrad(f);
    sameBits(first, vg(x));
    arr[0] = 100;
    f64[1] = -7;
    nested[2][0] = 5;
    ten.data[2] = 9;
    sameBits(c(x), first, 'mutating captured data changes nothing');
    sameBits(c.value(x), first.value);
    assert.notEqual(vg(x).value, first.value, 'while the eager path sees the new data');
  });

  test('inputs are fed on every call, read in place', () => {
    const f = (p, d) => sum(square(sub(mul(d.X, p), d.y)));
    const c = compile(f);
    const vg = valueAndGrad(f);
    const X = Float64Array.of(1, 2, 3);
    const d = { X, y: [1, 1, 1] };
    const r1 = c(2, d);
    sameBits(r1, vg(2, d));
    X[1] = -4;
    const r2 = c(2, d);
    assert.notEqual(r2.value, r1.value);
    sameBits(r2, vg(2, d));
    const r3 = c(2, { X: [0, 0, 1], y: [5, 5, 5] });
    sameBits(r3, vg(2, { X: [0, 0, 1], y: [5, 5, 5] }));
  });
});

// ---------------------------------------------------------------- value and the root shape

describe('.value and the root shape', () => {
  test('number / number[] / number[][] for scalar / vector / matrix roots', () => {
    const cs = compile((x) => sum(x));
    const cv = compile((x) => mul(x, 2));
    const cm = compile((x) => matmul(reshape(x, [2, 1]), reshape(x, [1, 2])));
    const x = [1.5, -2];
    sameBits(cs.value(x), -0.5);
    sameBits(cv.value(x), [3, -4]);
    sameBits(cm.value(x), [[2.25, -3], [-3, 4]]);
    sameBits(cm.value(Float64Array.of(1, 2)), [[1, 2], [2, 4]]);
    sameBits(cv.value(x), valueAndGrad((y) => mul(y, 2)).value(x));
  });

  test('a non-scalar root: .value works, the call throws the SPEC message', () => {
    const f = counted((x) => mul(x, 3));
    const c = compile(f);
    assert.throws(() => c([1, 2]), {
      message: 'compile: the objective must return a scalar, got [2]. Reduce it with sum() or mean() first.',
    });
    sameBits(c.value([1, 2]), [3, 6]);
    assert.throws(() => c([1, 2]), {
      message: 'compile: the objective must return a scalar, got [2]. Reduce it with sum() or mean() first.',
    });
    assert.throws(() => compile((x) => reshape(x, [2, 2]))([1, 2, 3, 4]), {
      message: 'compile: the objective must return a scalar, got [2×2]. Reduce it with sum() or mean() first.',
    });
    assert.equal(f.calls, 1);
  });
});

// ---------------------------------------------------------------- hand-built nodes

describe('hand-built nodes', () => {
  // y = 3·x² elementwise, with the adjoint written by hand.
  const tripled = (x) => {
    const s = square(x);
    const out = Float64Array.from(s.data, (v) => 3 * v);
    return new Var({ data: out, shape: [...s.shape] }, [s], (g) => [Float64Array.from(g, (v) => 3 * v)]);
  };

  test('fall back to valueAndGrad for good, with correct gradients; toJSON refuses', () => {
    const f = counted((x) => sum(mul(tripled(x), x)));
    const c = compile(f);
    const vg = valueAndGrad((x) => sum(mul(tripled(x), x)));
    const r1 = c([1, 2]);
    sameBits(r1, vg([1, 2]));
    // d/dx Σ 3x³ = 9x²
    assert.deepEqual(r1.gradient, [9, 36]);
    const afterFirst = f.calls;
    assert.ok(afterFirst >= 1 && afterFirst <= 2, `f ran ${afterFirst} times on the first call`);
    sameBits(c([2, -1]), vg([2, -1]));
    assert.equal(f.calls, afterFirst + 1, 'falls back: f runs on every call');
    sameBits(c([0.5, 1, 1.5]), vg([0.5, 1, 1.5]));
    assert.equal(f.calls, afterFirst + 2, 'for good, even on a new signature');
    sameBits(c.value([2, -1]), vg.value([2, -1]));
    const msg = "toJSON: this objective holds a node built outside this package's ops, which cannot be replayed or serialized.";
    assert.throws(() => c.toJSON(), { message: msg });
  });

  test('a hand-built node with a map parameter and a scalar node', () => {
    const f = (p) => {
      const s = mul(p.a, p.b);
      const h = new Var({ data: Float64Array.of(Math.sin(s.data[0])), shape: [] }, [s], (g) => [g[0] * Math.cos(s.data[0])]);
      return add(h, p.a);
    };
    const c = compile(f);
    const vg = valueAndGrad(f);
    for (const p of [{ a: 0.5, b: 2 }, { a: -1, b: 0.25 }]) sameBits(c(p), vg(p));
    const r = c({ a: 0.5, b: 2 });
    assert.ok(Math.abs(r.gradient.a - (2 * Math.cos(1) + 1)) < 1e-15);
  });

  test('a hand-made leaf is fine and acts as a constant', () => {
    const f = counted((x) => {
      const k = new Var({ data: Float64Array.of(2, 3), shape: [2] });
      return sum(mul(square(x), k));
    });
    const c = compile(f);
    const vg = valueAndGrad(f);
    const r = c([1, 1]);
    sameBits(r, { value: 5, gradient: [4, 6] });
    sameBits(c([2, -1]), vg([2, -1]));
    sameBits(c([0.5, 3]), vg([0.5, 3]));
    assert.equal(f.calls, 3, 'compiled: traced once (eager ran it twice)');
    const json = c.toJSON();
    assert.ok(json.nodes.some((n) => n.kind === 'const' && n.data.length === 2 && n.data[0] === 2 && n.data[1] === 3));
  });

  test('a captured hand-made leaf is frozen too', () => {
    const k = new Var({ data: Float64Array.of(1, 2), shape: [2] });
    const c = compile((x) => dot(x, k));
    sameBits(c([3, 4]), { value: 11, gradient: [1, 2] });
  });
});

// ---------------------------------------------------------------- failures and non-finite values

describe('failing replays and non-finite values', () => {
  test('a non-SPD matrix throws the SPEC message; the next call works, bit for bit', () => {
    const f = (p) => sum(log(diagPart(cholesky(p))));
    const c = compile(f);
    const vg = valueAndGrad(f);
    const good1 = [[4, 1], [1, 3]];
    const bad = [[1, 2], [2, 1]];
    const good2 = [[2, 0.5], [0.5, 5]];
    sameBits(c(good1), vg(good1));
    assert.throws(() => vg(bad), { message: 'cholesky: matrix is not positive definite (pivot 1 is -3)' });
    assert.throws(() => c(bad), { message: 'cholesky: matrix is not positive definite (pivot 1 is -3)' });
    assert.throws(() => c.value(bad), { message: 'cholesky: matrix is not positive definite (pivot 1 is -3)' });
    sameBits(c(good2), vg(good2));
    sameBits(c(good1), vg(good1));
    sameBits(c.value(good2), vg.value(good2));
  });

  test('a failing first call (at trace time) does not poison the closure', () => {
    const f = counted((p) => logdetPSD(p));
    const c = compile(f);
    assert.throws(() => c([[1, 2], [2, 1]]), /cholesky: matrix is not positive definite/);
    sameBits(c([[2, 1], [1, 2]]), valueAndGrad((p) => logdetPSD(p))([[2, 1], [1, 2]]));
  });

  test('gp: non-SPD kernel through a parameter, then valid values', () => {
    const d = gpData(30);
    const f = gp(G, d);
    const c = compile(f);
    const vg = valueAndGrad(f);
    sameBits(c({ l: 1, v: 1 }), vg({ l: 1, v: 1 }));
    // A negative variance makes K = v·R + 0.05 I indefinite.
    let eagerMsg;
    assert.throws(() => vg({ l: 1, v: -1 }), (e) => ((eagerMsg = e.message), true));
    assert.match(eagerMsg, /^cholesky: matrix is not positive definite \(pivot \d+ is -?[0-9.e+-]+\)$/);
    assert.throws(() => c({ l: 1, v: -1 }), { message: eagerMsg });
    sameBits(c({ l: 0.8, v: 1.3 }), vg({ l: 0.8, v: 1.3 }));
  });

  test('NaN parameters and log(0) propagate without throwing or poisoning later calls', () => {
    const f = (p) => add(sum(log(p.a)), mul(p.s, sum(square(p.a))));
    const c = compile(f);
    const vg = valueAndGrad(f);
    const sets = [
      { a: [1, 2, 3], s: 0.5 },
      { a: [1, 0, 3], s: 0.5 }, // log(0) = -Infinity, 1/0 gradient
      { a: [1, 2, 3], s: NaN },
      { a: [NaN, 2, 3], s: 0.5 },
      { a: [-1, 2, 3], s: 0.5 }, // log(-1) = NaN
      { a: [1, 2, 3], s: 0.5 },
      { a: [4, 5, 6], s: -1 },
    ];
    for (const p of sets) sameBits(c(p), vg(p), JSON.stringify(p));
    const r = c({ a: [1, 0, 3], s: 0.5 });
    assert.equal(r.value, -Infinity);
    assert.equal(r.gradient.a[1], Infinity);
    assert.ok(Number.isNaN(c({ a: [1, 2, 3], s: NaN }).value));
    sameBits(c(sets[0]), vg(sets[0]));
  });

  test('gp with a NaN length scale: NaN through cholesky, no throw, later calls clean', () => {
    const d = gpData(30);
    const f = gp(G, d);
    const c = compile(f);
    const vg = valueAndGrad(f);
    sameBits(c({ l: 1, v: 1 }), vg({ l: 1, v: 1 }));
    const r = c({ l: NaN, v: 1 });
    assert.ok(Number.isNaN(r.value));
    sameBits(r, vg({ l: NaN, v: 1 }));
    sameBits(c({ l: 1.1, v: 0.9 }), vg({ l: 1.1, v: 0.9 }));
  });
});

// ---------------------------------------------------------------- errors

describe('errors', () => {
  test('compile(42) and toJSON before any call', () => {
    assert.throws(() => compile(42), { message: 'compile: expected a function' });
    assert.throws(() => compile(), { message: 'compile: expected a function' });
    assert.throws(() => compile({}), { message: 'compile: expected a function' });
    const c = compile((x) => sum(x));
    assert.throws(() => c.toJSON(), { message: 'toJSON: call the compiled function once first, so the graph is built.' });
    c([1, 2]);
    assert.equal(c.toJSON().version, 2);
  });

  test('the objective must return a Var', () => {
    const c = compile(() => 3);
    assert.throws(() => c(1), /must return a Var built from this package's ops; got number/);
  });
});

// ---------------------------------------------------------------- no copy, and caller arrays untouched

describe('tensors cross with no copy', () => {
  test('a tensor gradient is a fresh Float64Array on every call', () => {
    const W = tensor(Float64Array.of(1, 2, 3, 4, 5, 6), [2, 3]);
    const b = tensor(Float64Array.of(0.5, -0.5), [2]);
    const x = Float64Array.of(1, -1, 2);
    const f = (p, d) => sum(square(add(matmul(p.W, d.x), p.b)));
    const c = compile(f);
    const p = { W, b };
    const before = snapshot([p, x]);
    const r1 = c(p, { x });
    const r2 = c(p, { x });
    for (const k of ['W', 'b']) {
      assert.ok(isTensor(r1.gradient[k]));
      assert.ok(r1.gradient[k].data instanceof Float64Array);
      assert.notEqual(r1.gradient[k].data, r2.gradient[k].data, `${k}: not the same array twice`);
      assert.notEqual(r1.gradient[k].data, p[k].data, `${k}: not the parameter's array`);
      assert.notEqual(r1.gradient[k].data.buffer, p[k].data.buffer, `${k}: not a view of the parameter`);
      assert.notEqual(r1.gradient[k].data.buffer, r2.gradient[k].data.buffer, `${k}: not a shared buffer`);
      assert.notEqual(r1.gradient[k].shape, p[k].shape, `${k}: a shape array of its own`);
      assert.deepEqual(r1.gradient[k].shape, p[k].shape);
    }
    sameBits(r1, r2);
    const kept = snapshot(r1);
    // A call with other values does not touch the gradient the caller kept.
    const r3 = c({ W: tensor(W.data.map((v) => -v), [2, 3]), b }, { x });
    sameBits(r1, kept, 'an earlier result is not overwritten');
    assert.notEqual(r3.gradient.W.data, r1.gradient.W.data);
    sameBits(snapshot([p, x]), before, "the caller's arrays are never written");
    sameBits(r1, valueAndGrad(f)(p, { x }));
  });

  test("the caller's parameter and input arrays are never written, in any form", () => {
    const p = {
      n: 0.5,
      flat: [1, 2],
      f64: Float64Array.of(3, 4),
      nested: [[1, 2], [3, 4]],
      rows: [Float64Array.of(5, 6), Float64Array.of(7, 8)],
      t: tensor(Float64Array.of(0.1, 0.2), [2]),
      s: tensor(Float64Array.of(0.3), []),
    };
    const ins = { x: Float64Array.of(1, 1), M: tensor(Float64Array.of(1, 0, 0, 1), [2, 2]), y: [[1, 2], [3, 4]] };
    const f = (q, d) =>
      add(
        sum(mul(q.n, q.flat, q.f64, q.t, d.x)),
        sum(mul(matmul(q.nested, q.rows), d.M, d.y)),
        mul(q.s, 2),
      );
    const before = snapshot([p, ins]);
    const c = compile(f);
    const vg = valueAndGrad(f);
    const results = [];
    for (let k = 0; k < 3; k++) results.push([c(p, ins), vg(p, ins)]);
    c.value(p, ins);
    const plain = { ...p };
    delete plain.s;
    const g = (q) => add(sum(mul(q.n, q.flat, q.f64, q.t)), sum(matmul(q.nested, q.rows)));
    const c2 = compile(g);
    for (let k = 0; k < 3; k++) results.push([c2(plain), valueAndGrad(g)(plain)]);
    sameBits(snapshot([p, ins]), before, "the caller's arrays, after every call");
    results.forEach(([got, expected], k) => sameBits(got, expected, `call ${k}`));
  });
});

// ---------------------------------------------------------------- gradient forms

describe('gradient forms (SPEC §6)', () => {
  const forms = {
    number: [0.7, (g) => assert.equal(typeof g, 'number')],
    'number[]': [[1, 2, 3], (g) => assert.ok(Array.isArray(g) && g.every((v) => typeof v === 'number'))],
    Float64Array: [Float64Array.of(1, 2, 3), (g) => assert.ok(Array.isArray(g) && g.every((v) => typeof v === 'number'), `plain number[] expected, got ${kind(g)}`)],
    'number[][]': [[[1, 2], [3, 4], [5, 6]], (g) => assert.ok(Array.isArray(g) && g.every((r) => Array.isArray(r)))],
    'Float64Array rows': [[Float64Array.of(1, 2), Float64Array.of(3, 4)], (g) => assert.ok(Array.isArray(g) && g.every((r) => Array.isArray(r)), 'number[][] expected')],
    'tensor [2×2]': [tensor([1, 2, 3, 4], [2, 2]), (g) => assert.ok(isTensor(g) && g.data.length === 4 && g.shape.length === 2)],
    'tensor [3]': [tensor([1, 2, 3], [3]), (g) => assert.ok(isTensor(g) && g.data.length === 3)],
    'tensor []': [tensor([1.5], []), (g) => assert.ok(isTensor(g) && g.data.length === 1 && g.shape.length === 0)],
  };

  for (const [name, [x, check]] of Object.entries(forms)) {
    test(`single parameter: ${name}`, () => {
      const f = (y) => mul(sum(square(y)), 0.5);
      const e = valueAndGrad(f)(x);
      const r = compile(f)(x);
      check(e.gradient);
      check(r.gradient);
      sameBits(r, e);
      // The gradient of ½Σy² is y itself.
      assert.deepEqual(flatten(r.gradient), flatten(x));
      if (isTensor(x)) assert.notEqual(r.gradient.data, x.data);
    });
  }

  test("maps: the caller's key order, each in its own form, unused params get zeros", () => {
    const p = {
      z: tensor([1, 2], [2]),
      unusedM: [[1, 2], [3, 4]],
      a: 2,
      unusedF: Float64Array.of(9, 9, 9),
      m: [[1, 2], [3, 4]],
      unusedN: 5,
      unusedT: tensor([1, 2, 3, 4, 5, 6], [3, 2]),
      v: [1, 2, 3],
      unusedS: tensor([4], []),
      unusedV: [7, 8],
    };
    const f = (q) => add(mul(q.a, sum(q.z)), sum(square(q.m)), dot(q.v, q.v));
    const expected = {
      z: { data: Float64Array.of(2, 2), shape: [2] },
      unusedM: [[0, 0], [0, 0]],
      a: 3,
      unusedF: [0, 0, 0],
      m: [[2, 4], [6, 8]],
      unusedN: 0,
      unusedT: { data: new Float64Array(6), shape: [3, 2] },
      v: [2, 4, 6],
      unusedS: { data: new Float64Array(1), shape: [] },
      unusedV: [0, 0],
    };
    const e = valueAndGrad(f)(p);
    const c = compile(f);
    sameBits(e.gradient, expected, 'valueAndGrad');
    sameBits(c(p).gradient, expected, 'compile');
    sameBits(c(p).value, 6 + 30 + 14);
    // Another key order: the same plan, gradients in that order.
    const rev = Object.fromEntries(Object.entries(p).reverse());
    const r = c(rev);
    assert.deepEqual(Object.keys(r.gradient), Object.keys(rev));
    sameBits(r, valueAndGrad(f)(rev));
  });
});

// ---------------------------------------------------------------- valueAndGradFns and splitValueAndGrad

describe('valueAndGradFns and splitValueAndGrad', () => {
  const objective = (q) => add(sum(square(q.flat)), sum(mul(q.f64, q.f64)), sum(mul(q.t, 3)), sum(square(q.rows)), mul(q.n, q.n));
  const params = () => ({
    n: 1.5,
    flat: [1, 2],
    f64: Float64Array.of(3, 4),
    t: tensor(Float64Array.of(0.5, 0.25), [2]),
    rows: [[1, 2], [3, 4]],
  });
  const expectedValue = (q) => {
    let v = 0;
    for (const x of q.flat) v += x * x;
    for (const x of q.f64) v += x * x;
    for (const x of q.t.data) v += 3 * x;
    for (const r of q.rows) for (const x of r) v += x * x;
    return v + q.n * q.n;
  };
  const mutations = [
    ['flat array', (q) => (q.flat[0] = 10)],
    ['Float64Array', (q) => (q.f64[1] = -1)],
    ['tensor data', (q) => (q.t.data[0] = 7)],
    ['nested row', (q) => (q.rows[1][0] = -3)],
    ['number', (q) => (q.n = 0.25)],
  ];

  /** Runs the shared-cache protocol against a pair and an evaluation counter. */
  function protocol(pair, count) {
    const p = params();
    const n0 = count();
    assert.equal(pair.value(p), expectedValue(p));
    const g = pair.gradient(p);
    assert.equal(count(), n0 + 1, 'value(p) then gradient(p) evaluates once');
    assert.equal(pair.gradient(p), g, 'the same gradient object from the cache');
    assert.equal(pair.value(p), expectedValue(p));
    assert.equal(count(), n0 + 1);
    sameBits(g.flat, [2, 4]);
    // Equal parameters in a fresh object are still equal parameters.
    pair.gradient(params());
    assert.equal(count(), n0 + 1, 'equal parameters, another object');
    let n = n0 + 1;
    for (const [what, mutate] of mutations) {
      mutate(p);
      assert.equal(pair.value(p), expectedValue(p), `${what}: value after an in-place change`);
      assert.equal(count(), ++n, `${what}: an in-place change is noticed`);
      pair.gradient(p);
      assert.equal(count(), n, `${what}: then cached again`);
    }
    const gp = pair.gradient(p);
    assert.deepEqual(gp.flat, [20, 4]);
    assert.deepEqual(gp.rows, [[2, 4], [-6, 8]]);
    assert.equal(gp.n, 0.5);
    // Calls with inputs skip the cache.
    const ins = { k: 1 };
    pair.value(p, ins);
    pair.gradient(p, ins);
    assert.equal(count(), n + 2, 'calls with inputs skip the cache');
    return n + 2;
  }

  test('valueAndGradFns(f): the eager pair counts calls of f', () => {
    const f = counted((q, d) => objective(q));
    const pair = valueAndGradFns(f);
    assert.deepEqual(Object.keys(pair).sort(), ['gradient', 'value']);
    protocol(pair, () => f.calls);
  });

  test('valueAndGradFns(f, {compile: true}) exposes .compiled and shares one cache', () => {
    const f = counted((q, d) => objective(q));
    const pair = valueAndGradFns(f, { compile: true });
    assert.equal(typeof pair.compiled, 'function');
    assert.equal(typeof pair.compiled.value, 'function');
    assert.equal(typeof pair.compiled.toJSON, 'function');
    const p = params();
    const v = pair.value(p);
    assert.equal(v, expectedValue(p));
    const g1 = pair.gradient(p);
    assert.equal(pair.value(p), v);
    assert.equal(pair.gradient(p), g1, 'value/gradient at equal parameters share one evaluation');
    // (Gradient forms are checked above; here the numbers and the caching.)
    sameNumbers(g1, valueAndGrad(objective)(p).gradient);
    // Each in-place change gives a new evaluation, with the right numbers.
    for (const [what, mutate] of mutations) {
      mutate(p);
      const g = pair.gradient(p);
      assert.notEqual(g, g1, `${what}: noticed`);
      sameNumbers(g, valueAndGrad(objective)(p).gradient, `${what}: fresh gradient`);
      assert.equal(pair.value(p), expectedValue(p));
      assert.equal(pair.gradient(p), g, `${what}: then cached`);
    }
    // Inputs skip the cache: two calls, two evaluations, two objects.
    const a = pair.gradient(p, { k: 1 });
    const b = pair.gradient(p, { k: 1 });
    assert.notEqual(a, b);
    assert.notEqual(a.t.data, b.t.data);
    sameBits(a, b);
    // The objective was traced once per signature (params, then params|inputs).
    assert.equal(f.calls, 2);
    // The compiled pair's evaluations, counted through splitValueAndGrad.
    const runs = counted(pair.compiled);
    protocol(splitValueAndGrad(runs), () => runs.calls);
    assert.equal(f.calls, 2, 'compiled: no re-tracing');
  });

  test('splitValueAndGrad over an arbitrary counting vg', () => {
    const vg = counted((x, inputs) => {
      const q = x;
      const grad = {
        n: 2 * q.n,
        flat: q.flat.map((v) => 2 * v),
        f64: Array.from(q.f64, (v) => 2 * v),
        t: tensor(q.t.data.map(() => 3), [2]),
        rows: q.rows.map((r) => Array.from(r, (v) => 2 * v)),
      };
      return { value: expectedValue(q) + (inputs ? inputs.k * 0 : 0), gradient: grad };
    });
    const pair = splitValueAndGrad(vg);
    protocol(pair, () => vg.calls);

    // Single parameters of each form.
    for (const [x, mutate] of [
      [[1, 2, 3], (x) => (x[2] = 0)],
      [Float64Array.of(1, 2), (x) => (x[0] = 5)],
      [[[1, 2], [3, 4]], (x) => (x[0][1] = 9)],
      [[Float64Array.of(1, 2), Float64Array.of(3, 4)], (x) => (x[1][1] = 9)],
      [tensor([1, 2], [2]), (x) => (x.data[1] = 9)],
    ]) {
      const h = counted((y) => ({ value: Math.random(), gradient: y }));
      const s = splitValueAndGrad(h);
      const v = s.value(x);
      s.gradient(x);
      assert.equal(s.value(x), v);
      assert.equal(h.calls, 1);
      mutate(x);
      assert.notEqual(s.value(x), v, 'in-place change noticed');
      assert.equal(h.calls, 2);
      s.gradient(x);
      assert.equal(h.calls, 2);
    }
    const h = counted((y) => ({ value: y * 2, gradient: 2 }));
    const s = splitValueAndGrad(h);
    assert.equal(s.value(3), 6);
    assert.equal(s.gradient(3), 2);
    assert.equal(h.calls, 1);
    assert.equal(s.value(4), 8);
    assert.equal(h.calls, 2);
    s.value(4, {});
    assert.equal(h.calls, 3);
  });
});

// Typed arrays of up to 1 024 values are copied into the plan's buffer,
// longer ones read in place (src/js/replay.js): the same numbers either way,
// each gradient fresh, and an array changed between calls read anew.
test('typed parameters and inputs on both sides of the copy threshold', () => {
  const f = (p, d) => G.sum(G.mul(G.square(G.sub(p.w, d.y)), p.s));
  for (const n of [3, 1024, 1025, 3000]) {
    const w = Float64Array.from({ length: n }, (_, i) => Math.sin(i));
    const y = Float64Array.from({ length: n }, (_, i) => Math.cos(3 * i));
    const want = G.valueAndGrad(f)({ w: Array.from(w), s: 0.5 }, { y: Array.from(y) });
    const c = G.compile(f);
    for (const form of ['typed', 'tensor']) {
      const p = { w: form === 'typed' ? w : G.tensor(w, [n]), s: 0.5 };
      const first = c(p, { y: G.tensor(y, [n]) });
      const second = c(p, { y: G.tensor(y, [n]) });
      for (const r of [first, second]) {
        assert.ok(Object.is(r.value, want.value), `n = ${n}, ${form}`);
        const g = form === 'typed' ? r.gradient.w : r.gradient.w.data;
        assert.equal(g.length, n);
        want.gradient.w.forEach((v, i) => assert.ok(Object.is(g[i], v), `n = ${n}, ${form}, [${i}]`));
      }
      assert.ok(form === 'typed' ? Array.isArray(first.gradient.w) : first.gradient.w.data instanceof Float64Array);
      assert.notEqual(form === 'typed' ? first.gradient.w : first.gradient.w.data, form === 'typed' ? second.gradient.w : second.gradient.w.data);
    }
    // Changed in place between calls: the next call reads the new values.
    y[0] += 1;
    const moved = G.valueAndGrad(f)({ w: Array.from(w), s: 0.5 }, { y: Array.from(y) });
    assert.ok(Object.is(c({ w, s: 0.5 }, { y }).value, moved.value), `n = ${n}, changed`);
  }
});
