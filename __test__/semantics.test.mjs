// SPEC §2 (values, tensors, leaves), §3 (ties, non-finite values) and §6
// (valueAndGrad, grad, .value, jacobian: argument and return forms).

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import * as G from '../index.js';
import { makeRng, assertClose, fdGrad, relErr, throwsMsg } from './helpers.mjs';

const snapshot = (v) => {
  if (v instanceof Float64Array) return { f64: Array.from(v) };
  if (Array.isArray(v)) return v.map(snapshot);
  if (v && typeof v === 'object') {
    const o = {};
    for (const k of Object.keys(v)) o[k] = snapshot(v[k]);
    return o;
  }
  return v;
};

// ---------------------------------------------------------------------------
// §1 exports
// ---------------------------------------------------------------------------

describe('exports', () => {
  test('every name in SPEC §1 is exported and there is no default export', () => {
    const names = [
      'Var', 'variable', 'tensor', 'isTensor', 'asTensor', 'toNested', 'zeros', 'eye',
      'add', 'sub', 'mul', 'div', 'neg', 'exp', 'log', 'sqrt', 'square', 'pow', 'tanh', 'sigmoid',
      'maximum', 'minimum', 'relu', 'lgamma', 'sum', 'mean',
      'matmul', 'dot', 'transpose', 'diagPart', 'trace', 'addDiag', 'reshape', 'slice', 'concat',
      'cholesky', 'triangularSolve', 'logdetPSD', 'solvePSD', 'solveGeneral', 'inv',
      'grad', 'valueAndGrad', 'valueAndGradFns', 'splitValueAndGrad', 'compile', 'compileFromJSON', 'jacobian',
    ];
    for (const n of names) assert.equal(typeof G[n], 'function', `${n} must be an exported function`);
    assert.equal(G.default, undefined);
  });

  test('the package loads and differentiates inside worker_threads', async () => {
    const url = new URL('../index.js', import.meta.url).href;
    const code = `
      const { parentPort } = require('node:worker_threads');
      import(${JSON.stringify(url)}).then((G) => {
        const r = G.valueAndGrad((p) => G.add(G.square(p.mu), G.square(p.sigma)))({ mu: 3, sigma: 4 });
        parentPort.postMessage(r);
      }, (e) => parentPort.postMessage({ error: String(e) }));`;
    const result = await new Promise((resolve, reject) => {
      const w = new Worker(code, { eval: true });
      w.once('message', (m) => { resolve(m); w.terminate(); });
      w.once('error', reject);
    });
    assert.deepEqual(result, { value: 25, gradient: { mu: 6, sigma: 8 } });
  });
});

// ---------------------------------------------------------------------------
// §2 tensors
// ---------------------------------------------------------------------------

describe('tensor, isTensor, asTensor, toNested, zeros, eye', () => {
  test('tensor wraps a Float64Array without copying and copies the shape', () => {
    const data = new Float64Array([1, 2, 3, 4, 5, 6]);
    const shape = [2, 3];
    const t = G.tensor(data, shape);
    assert.equal(t.data, data);
    assert.notEqual(t.shape, shape);
    assert.deepEqual(Array.from(t.shape), [2, 3]);
    shape[0] = 99;
    assert.deepEqual(Array.from(t.shape), [2, 3]);
    data[0] = 42;
    assert.equal(t.data[0], 42);
  });

  test('tensor reads an iterable with no length as Float64Array.from does, and stops one that never ends', () => {
    assert.deepEqual(G.tensor(new Set([1, 2, 3, 4]), [2, 2]), { data: new Float64Array([1, 2, 3, 4]), shape: [2, 2] });
    assert.deepEqual(Array.from(G.tensor([5, 6].values(), [2]).data), [5, 6]);
    const three = function* () {
      yield 1;
      yield '2';
      yield 3;
    };
    assert.deepEqual(Array.from(G.tensor(three(), [3]).data), [1, 2, 3]);
    assert.throws(() => G.tensor(three(), [2]), { message: 'data length over 2 does not match shape [2]' });
    assert.throws(() => G.tensor(three(), [4]), { message: 'data length 3 does not match shape [4]' });
  });

  test('tensor copies other data with Float64Array.from', () => {
    const arr = [1, 2, 3];
    const t = G.tensor(arr, [3]);
    assert.ok(t.data instanceof Float64Array);
    assert.deepEqual(Array.from(t.data), [1, 2, 3]);
    arr[0] = 100;
    assert.equal(t.data[0], 1);
    const s = G.tensor([7], []);
    assert.deepEqual(Array.from(s.shape), []);
    assert.equal(s.data[0], 7);
    const f32 = G.tensor(new Float32Array([0.5, 1.5]), [2]);
    assert.ok(f32.data instanceof Float64Array);
    assert.deepEqual(Array.from(f32.data), [0.5, 1.5]);
  });

  test('isTensor', () => {
    assert.equal(G.isTensor({ data: new Float64Array(2), shape: [2] }), true);
    assert.equal(G.isTensor({ data: new Float64Array(1), shape: [] }), true);
    assert.equal(G.isTensor({ data: new Float64Array(1), shape: [5, 5] }), true, 'no validation beyond the two fields');
    assert.equal(G.isTensor(G.variable([1, 2])), true, 'a Var passes');
    assert.equal(G.isTensor({ data: [1, 2], shape: [2] }), false);
    assert.equal(G.isTensor({ data: new Float32Array(2), shape: [2] }), false);
    assert.equal(G.isTensor({ data: new Float64Array(2) }), false);
    assert.equal(G.isTensor({ data: new Float64Array(2), shape: 2 }), false);
    assert.equal(G.isTensor(null), false);
    assert.equal(G.isTensor(undefined), false);
    assert.equal(G.isTensor(3), false);
    assert.equal(G.isTensor([1, 2]), false);
    assert.equal(G.isTensor(new Float64Array(2)), false);
    assert.equal(G.isTensor('tensor'), false);
  });

  test('asTensor: forms and aliasing', () => {
    const t = { data: new Float64Array([1, 2]), shape: [2] };
    assert.equal(G.asTensor(t), t, 'a tensor is returned as is');

    const s = G.asTensor(2.5);
    assert.deepEqual(Array.from(s.shape), []);
    assert.deepEqual(Array.from(s.data), [2.5]);
    assert.ok(Number.isNaN(G.asTensor(NaN).data[0]));
    assert.equal(G.asTensor(Infinity).data[0], Infinity);
    assert.equal(G.asTensor(-Infinity).data[0], -Infinity);

    const f = new Float64Array([3, 4, 5]);
    const tf = G.asTensor(f);
    assert.equal(tf.data, f, 'Float64Array aliased');
    assert.deepEqual(Array.from(tf.shape), [3]);

    const v = G.asTensor([1, 2, 3]);
    assert.ok(v.data instanceof Float64Array);
    assert.deepEqual(Array.from(v.shape), [3]);
    assert.deepEqual(Array.from(v.data), [1, 2, 3]);

    const m = G.asTensor([[1, 2, 3], [4, 5, 6]]);
    assert.deepEqual(Array.from(m.shape), [2, 3]);
    assert.deepEqual(Array.from(m.data), [1, 2, 3, 4, 5, 6]);

    const mf = G.asTensor([new Float64Array([1, 2]), new Float64Array([3, 4])]);
    assert.deepEqual(Array.from(mf.shape), [2, 2]);
    assert.deepEqual(Array.from(mf.data), [1, 2, 3, 4]);

    const mixed = G.asTensor([[1, 2], new Float64Array([3, 4])]);
    assert.deepEqual(Array.from(mixed.data), [1, 2, 3, 4]);

    const withNaN = G.asTensor([NaN, Infinity]);
    assert.ok(Number.isNaN(withNaN.data[0]));
    assert.equal(withNaN.data[1], Infinity);
  });

  test('toNested returns fresh numbers and arrays by rank', () => {
    assert.equal(G.toNested({ data: new Float64Array([4]), shape: [] }), 4);
    const vt = { data: new Float64Array([1, 2, 3]), shape: [3] };
    const v = G.toNested(vt);
    assert.ok(Array.isArray(v));
    assert.deepEqual(v, [1, 2, 3]);
    v[0] = 100;
    assert.equal(vt.data[0], 1);
    assert.notEqual(G.toNested(vt), G.toNested(vt));
    const mt = { data: new Float64Array([1, 2, 3, 4, 5, 6]), shape: [3, 2] };
    const m = G.toNested(mt);
    assert.deepEqual(m, [[1, 2], [3, 4], [5, 6]]);
    assert.ok(m.every((r) => Array.isArray(r)));
    m[1][1] = -1;
    assert.equal(mt.data[3], 4);
  });

  test('zeros and eye are new tensors', () => {
    const z = G.zeros([2, 3]);
    assert.ok(z.data instanceof Float64Array);
    assert.deepEqual(Array.from(z.shape), [2, 3]);
    assert.deepEqual(Array.from(z.data), [0, 0, 0, 0, 0, 0]);
    const z2 = G.zeros([2, 3]);
    assert.notEqual(z.data, z2.data);
    const zv = G.zeros([4]);
    assert.deepEqual(Array.from(zv.shape), [4]);
    assert.equal(zv.data.length, 4);
    const zs = G.zeros([]);
    assert.deepEqual(Array.from(zs.shape), []);
    assert.deepEqual(Array.from(zs.data), [0]);
    const I = G.eye(3);
    assert.deepEqual(Array.from(I.shape), [3, 3]);
    assert.deepEqual(Array.from(I.data), [1, 0, 0, 0, 1, 0, 0, 0, 1]);
    assert.notEqual(G.eye(3).data, I.data);
    assert.deepEqual(Array.from(G.eye(1).data), [1]);
  });
});

// ---------------------------------------------------------------------------
// §2 Var
// ---------------------------------------------------------------------------

describe('Var', () => {
  test('readable properties of a leaf', () => {
    const x = G.variable([[1, 2], [3, 4]]);
    assert.ok(x instanceof G.Var);
    assert.ok(G.isTensor(x.value));
    assert.ok(x.data instanceof Float64Array);
    assert.deepEqual(Array.from(x.data), [1, 2, 3, 4]);
    assert.deepEqual(Array.from(x.shape), [2, 2]);
    assert.deepEqual(Array.from(x.value.shape), [2, 2]);
    assert.equal(x.isScalar, false);
    assert.ok(Array.isArray(x.parents));
    assert.equal(x.parents.length, 0);
    assert.equal(x.grad, null);
    assert.equal(x.spec, null);
    const s = G.variable(3);
    assert.equal(s.isScalar, true);
    assert.deepEqual(Array.from(s.shape), []);
    assert.equal(G.variable([5]).isScalar, false, '[1] is not a scalar');
  });

  test('backward() seeds a scalar node with 1 and fills grad', () => {
    const x = G.variable([1, -2, 3]);
    const y = G.sum(G.mul(x, x));
    assert.equal(y.isScalar, true);
    y.backward();
    assert.ok(x.grad instanceof Float64Array);
    assert.deepEqual(Array.from(x.grad), [2, -4, 6]);
    assert.ok(y.grad instanceof Float64Array);
    assert.deepEqual(Array.from(y.grad), [1]);
  });

  test('backward(seed) on a vector node', () => {
    const x = G.variable([1, 2, 3]);
    const y = G.mul(x, [10, 20, 30]);
    y.backward(new Float64Array([1, 0.5, -1]));
    assert.deepEqual(Array.from(x.grad), [10, 10, -30]);
  });

  test('backward(seed) on a matrix node', () => {
    const A = G.variable([[1, 2], [3, 4]]);
    const y = G.square(A);
    y.backward(new Float64Array([1, 1, 1, 1]));
    assert.deepEqual(Array.from(A.grad), [2, 4, 6, 8]);
  });

  test('backward seed errors', () => {
    const y = G.mul(G.variable([1, 2, 3]), 2);
    throwsMsg(() => y.backward(), 'backward() needs an explicit seed for a [3] node; only a scalar objective can seed itself with 1.');
    throwsMsg(() => y.backward(new Float64Array(2)), 'seed has 2 elements but this node holds 3');
    const M = G.exp(G.variable([[1, 2, 3], [4, 5, 6]]));
    throwsMsg(() => M.backward(), 'backward() needs an explicit seed for a [2×3] node; only a scalar objective can seed itself with 1.');
    throwsMsg(() => M.backward(new Float64Array(5)), 'seed has 5 elements but this node holds 6');
  });

  test('every op returns a Var, with parents and spec', () => {
    const v = G.variable([0.5, 1.5, 2]);
    const M = G.variable([[2, 0.5], [0.5, 3]]);
    const results = {
      add: G.add(v, 1), sub: G.sub(1, v), mul: G.mul([[1, 2], [3, 4]], M), div: G.div(v, 2),
      neg: G.neg(v), exp: G.exp(v), log: G.log(v), sqrt: G.sqrt(v), square: G.square(v),
      pow: G.pow(v, 3), tanh: G.tanh(v), sigmoid: G.sigmoid(v), maximum: G.maximum(v, 1),
      minimum: G.minimum(v, 1), relu: G.relu(v), lgamma: G.lgamma(v), sum: G.sum(v), mean: G.mean(v),
      matmul: G.matmul(M, [1, 2]), dot: G.dot(v, v), transpose: G.transpose(M), diagPart: G.diagPart(M),
      trace: G.trace(M), addDiag: G.addDiag(M, 1), reshape: G.reshape(v, [3, 1]), slice: G.slice(v, [1], [2]),
      concat: G.concat([v, 1]), cholesky: G.cholesky(M), triangularSolve: G.triangularSolve(M, [1, 2]),
      logdetPSD: G.logdetPSD(M), solvePSD: G.solvePSD(M, [1, 2]), solveGeneral: G.solveGeneral(M, [1, 2]),
      inv: G.inv(M),
    };
    for (const [name, r] of Object.entries(results)) {
      assert.ok(r instanceof G.Var, `${name} must return a Var`);
      assert.ok(r.data instanceof Float64Array, `${name}: data`);
      assert.ok(r.parents.length >= 1, `${name}: parents`);
    }
    // the spec names the exported function that made the node
    for (const name of ['add', 'sub', 'mul', 'div', 'neg', 'exp', 'log', 'sqrt', 'square', 'tanh', 'sigmoid',
      'maximum', 'minimum', 'relu', 'lgamma', 'sum', 'mean', 'matmul', 'dot', 'transpose', 'diagPart',
      'addDiag', 'reshape', 'slice', 'concat', 'cholesky', 'triangularSolve', 'solveGeneral']) {
      assert.equal(results[name].spec.op, name, `${name}: spec.op`);
    }
    assert.deepEqual(results.pow.spec.op, 'pow');
    assert.deepEqual(results.pow.spec.args, [3]);
    assert.equal(results.trace.spec.op, 'sum', 'trace has no node of its own');
    assert.equal(results.concat.spec.list, true);
  });

  test('variadic add builds the nested graph', () => {
    const a = G.variable(1);
    const b = G.variable(2);
    const c = G.variable(3);
    const r = G.add(a, b, c);
    assert.equal(r.parents.length, 2);
    assert.equal(r.parents[1], c);
    assert.equal(r.parents[0].spec.op, 'add');
    assert.equal(r.parents[0].parents[0], a);
    assert.equal(r.parents[0].parents[1], b);
    assert.equal(r.data[0], 6);
    const m = G.mul(a, b, c, 4);
    assert.equal(m.data[0], 24);
    assert.equal(m.parents.length, 2);
    assert.equal(m.parents[0].parents[1], c);
  });

  test('hand-built nodes are differentiated inside valueAndGrad', () => {
    // cube(x) = x^3 with a JavaScript backward closure returning 3x^2 * g
    const cube = (x) => {
      const d = Float64Array.from(x.data);
      const out = d.map((v) => v * v * v);
      return new G.Var({ data: out, shape: Array.from(x.shape) }, [x], (g) => {
        const c = new Float64Array(d.length);
        for (let i = 0; i < d.length; i++) c[i] = 3 * d[i] * d[i] * g[i];
        return [c];
      });
    };
    const W = [[0.5, -1, 2], [1.5, 0.25, -0.75]];
    const x = [[0.3, -0.7, 1.1], [0.9, -1.2, 0.4]];
    const f = (p) => G.sum(G.mul(W, cube(G.mul(p.x, 2))));
    const { value, gradient } = G.valueAndGrad(f)({ x });
    const expectedValue = W.flat().reduce((s, w, i) => s + w * (2 * x.flat()[i]) ** 3, 0);
    assertClose(value, expectedValue, 1e-14);
    const expected = x.map((r, i) => r.map((v, j) => W[i][j] * 24 * v * v));
    assert.ok(relErr(gradient.x, expected) <= 1e-14, `${gradient.x} vs ${expected}`);

    // a hand-built scalar node on top of the graph, and backward() directly
    const halfSquare = (s) => {
      const v = s.data[0];
      return new G.Var({ data: new Float64Array([0.5 * v * v]), shape: [] }, [s], (g) => [new Float64Array([v * g[0]])]);
    };
    const g2 = G.grad((p) => halfSquare(G.sum(p)))([1, 2, 3]);
    assert.deepEqual(g2, [6, 6, 6]);
    const leaf = G.variable([1, 2]);
    const top = halfSquare(G.dot(leaf, [3, 4]));
    assert.ok(top instanceof G.Var);
    top.backward();
    assert.deepEqual(Array.from(leaf.grad), [33, 44]);
  });

  test('a hand-built leaf is a constant', () => {
    const c = new G.Var({ data: new Float64Array([2, 3]), shape: [2] });
    assert.ok(c instanceof G.Var);
    assert.equal(c.parents.length, 0);
    const { value, gradient } = G.valueAndGrad((p) => G.dot(c, p))([5, 7]);
    assert.equal(value, 31);
    assert.deepEqual(gradient, [2, 3]);
  });
});

// ---------------------------------------------------------------------------
// §3 ties and non-finite values
// ---------------------------------------------------------------------------

describe('ties and non-finite values', () => {
  const vg = (f, p) => G.valueAndGrad(f)(p);

  test('maximum: a tie gives the whole adjoint to the left operand', () => {
    const r = vg((p) => G.maximum(p.a, p.b), { a: 2, b: 2 });
    assert.equal(r.value, 2);
    assert.deepEqual(r.gradient, { a: 1, b: 0 });
    const v = vg((p) => G.sum(G.maximum(p.a, p.b)), { a: [1, 2, 3], b: [1, 3, 2] });
    assert.equal(v.value, 1 + 3 + 3);
    assert.deepEqual(v.gradient, { a: [1, 0, 1], b: [0, 1, 0] });
  });

  test('minimum: a tie gives the whole adjoint to the left operand', () => {
    const r = vg((p) => G.minimum(p.a, p.b), { a: -1, b: -1 });
    assert.equal(r.value, -1);
    assert.deepEqual(r.gradient, { a: 1, b: 0 });
    const v = vg((p) => G.sum(G.minimum(p.a, p.b)), { a: [1, 2, 3], b: [1, 3, 2] });
    assert.equal(v.value, 1 + 2 + 2);
    assert.deepEqual(v.gradient, { a: [1, 1, 0], b: [0, 0, 1] });
  });

  test('a tie against a broadcast scalar', () => {
    const r = vg((p) => G.sum(G.maximum(p.a, p.s)), { a: [0, 1, -1], s: 0 });
    assert.deepEqual(r.gradient, { a: [1, 1, 0], s: 1 });
    const q = vg((p) => G.sum(G.minimum(p.s, p.a)), { a: [0, 1, -1], s: 0 });
    assert.deepEqual(q.gradient, { a: [0, 0, 1], s: 2 });
  });

  for (const op of ['maximum', 'minimum']) {
    test(`${op} with a NaN operand: value NaN, adjoint to the right`, () => {
      const left = vg((p) => G[op](p.a, p.b), { a: NaN, b: 1 });
      assert.ok(Number.isNaN(left.value));
      assert.deepEqual(left.gradient, { a: 0, b: 1 });
      const right = vg((p) => G[op](p.a, p.b), { a: 1, b: NaN });
      assert.ok(Number.isNaN(right.value));
      assert.deepEqual(right.gradient, { a: 0, b: 1 });
      const fwd = G[op]([NaN, 1, 2], [0, NaN, 1]);
      assert.ok(Number.isNaN(fwd.data[0]));
      assert.ok(Number.isNaN(fwd.data[1]));
      assert.equal(fwd.data[2], op === 'maximum' ? 2 : 1);
    });
  }

  test("relu'(0) = 0, relu keeps NaN", () => {
    const r = vg((p) => G.sum(G.relu(p)), [-1, 0, 2, 1e-300]);
    assert.deepEqual(r.gradient, [0, 0, 1, 1]);
    assert.equal(r.value, 2 + 1e-300);
    const n = G.relu([NaN, -3, 3]);
    assert.ok(Number.isNaN(n.data[0]));
    assert.equal(n.data[1], 0);
    assert.equal(n.data[2], 3);
    const g = vg((p) => G.relu(p), NaN);
    assert.ok(Number.isNaN(g.value));
    assert.equal(g.gradient, 0);
  });

  test('log(-1) is NaN and log(0) is -Infinity, without throwing', () => {
    const a = G.log([-1, 0, 1]);
    assert.ok(Number.isNaN(a.data[0]));
    assert.equal(a.data[1], -Infinity);
    assert.equal(a.data[2], 0);
    const r = vg((p) => G.log(p), 0);
    assert.equal(r.value, -Infinity);
    assert.equal(r.gradient, Infinity);
    const q = vg((p) => G.log(p), -1);
    assert.ok(Number.isNaN(q.value));
    assert.equal(q.gradient, -1);
    assert.ok(Number.isNaN(G.sqrt(-4).data[0]));
  });

  test('NaN parameters propagate without throwing', () => {
    const r = vg((p) => G.add(G.square(p.a), G.mul(3, p.b)), { a: NaN, b: 2 });
    assert.ok(Number.isNaN(r.value));
    assert.ok(Number.isNaN(r.gradient.a));
    assert.equal(r.gradient.b, 3);
    const s = vg((p) => G.sum(G.exp(p)), [1, NaN, 0]);
    assert.ok(Number.isNaN(s.value));
    assert.equal(s.gradient[0], Math.exp(1));
    assert.ok(Number.isNaN(s.gradient[1]));
    assert.equal(s.gradient[2], 1);
    // through the linear algebra too (a NaN entry propagates through cholesky)
    const c = vg((p) => G.logdetPSD(p), [[2, NaN], [NaN, 2]]);
    assert.ok(Number.isNaN(c.value));
    const inf = vg((p) => G.mul(p, 2), Infinity);
    assert.equal(inf.value, Infinity);
    assert.equal(inf.gradient, 2);
  });

  test('lgamma at 0 and -2 is +Infinity with a NaN derivative', () => {
    const f = G.lgamma([0, -2, -1]);
    assert.deepEqual(Array.from(f.data), [Infinity, Infinity, Infinity]);
    for (const x of [0, -2]) {
      const r = vg((p) => G.lgamma(p), x);
      assert.equal(r.value, Infinity);
      assert.ok(Number.isNaN(r.gradient), `lgamma'(${x}) should be NaN, got ${r.gradient}`);
    }
  });

  test('pow exponent errors', () => {
    const x = G.variable([1, 2]);
    throwsMsg(() => G.pow(x, NaN), 'pow: exponent must be a finite number; got NaN');
    throwsMsg(() => G.pow(x, Infinity), 'pow: exponent must be a finite number; got Infinity');
    throwsMsg(() => G.pow(x, -Infinity), 'pow: exponent must be a finite number; got -Infinity');
    throwsMsg(() => G.pow(x), 'pow: exponent must be a finite number; got undefined');
    throwsMsg(() => G.pow(x, '2'), 'pow: exponent must be a finite number; got 2');
    throwsMsg(() => G.pow(x, null), 'pow: exponent must be a finite number; got null');
  });

  test('pow of a negative base with a fractional exponent is NaN, no throw', () => {
    const r = G.pow([-2, 4], 0.5);
    assert.ok(Number.isNaN(r.data[0]));
    assert.equal(r.data[1], 2);
  });
});

// ---------------------------------------------------------------------------
// §6 valueAndGrad / grad / .value / jacobian
// ---------------------------------------------------------------------------

describe('valueAndGrad: parameter and gradient forms', () => {
  test('number -> number', () => {
    const r = G.valueAndGrad((x) => G.square(x))(3);
    assert.deepEqual(r, { value: 9, gradient: 6 });
    assert.equal(typeof r.gradient, 'number');
  });

  test('number[] -> plain number[]', () => {
    const r = G.valueAndGrad((x) => G.sum(G.square(x)))([1, 2, 3]);
    assert.equal(r.value, 14);
    assert.ok(Array.isArray(r.gradient));
    assert.deepEqual(r.gradient, [2, 4, 6]);
  });

  test('Float64Array -> plain number[]', () => {
    const x = new Float64Array([1, 2, 3]);
    const r = G.valueAndGrad((v) => G.sum(G.square(v)))(x);
    assert.ok(Array.isArray(r.gradient), 'gradient must be a plain array');
    assert.deepEqual(r.gradient, [2, 4, 6]);
  });

  test('number[][] (rows may be Float64Arrays) -> number[][]', () => {
    const r = G.valueAndGrad((m) => G.sum(G.square(m)))([[1, 2], [3, 4]]);
    assert.equal(r.value, 30);
    assert.deepEqual(r.gradient, [[2, 4], [6, 8]]);
    const rows = [new Float64Array([1, 2]), new Float64Array([3, 4])];
    const q = G.valueAndGrad((m) => G.sum(G.square(m)))(rows);
    assert.ok(Array.isArray(q.gradient) && q.gradient.every((row) => Array.isArray(row)));
    assert.deepEqual(q.gradient, [[2, 4], [6, 8]]);
  });

  test('tensor -> a new tensor with its own Float64Array', () => {
    const t = { data: new Float64Array([1, 2, 3, 4, 5, 6]), shape: [2, 3] };
    const r = G.valueAndGrad((m) => G.sum(G.square(m)))(t);
    assert.ok(r.gradient.data instanceof Float64Array);
    assert.notEqual(r.gradient, t);
    assert.notEqual(r.gradient.data, t.data);
    assert.deepEqual(Array.from(r.gradient.shape), [2, 3]);
    assert.deepEqual(Array.from(r.gradient.data), [2, 4, 6, 8, 10, 12]);
    assert.deepEqual(Array.from(t.data), [1, 2, 3, 4, 5, 6]);
    const v = G.valueAndGrad((m) => G.sum(G.exp(m)))(G.tensor(new Float64Array([0, 1]), [2]));
    assert.deepEqual(Array.from(v.gradient.shape), [2]);
    assertClose(v.gradient.data, [1, Math.E], 1e-15);
  });

  test('tensor of shape [] -> tensor of shape []', () => {
    const t = { data: new Float64Array([1.5]), shape: [] };
    const r = G.valueAndGrad((s) => G.mul(s, s))(t);
    assert.equal(r.value, 2.25);
    assert.ok(r.gradient.data instanceof Float64Array);
    assert.notEqual(r.gradient.data, t.data);
    assert.deepEqual(Array.from(r.gradient.shape), []);
    assert.deepEqual(Array.from(r.gradient.data), [3]);
  });

  test('map -> same keys in the caller\'s order, each in its own form', () => {
    const params = {
      zeta: 2,
      alpha: [1, 2],
      mid: [[1, 0], [0, 1]],
      tens: { data: new Float64Array([3]), shape: [1] },
      f64: new Float64Array([0.5]),
    };
    const f = (p) => G.add(G.square(p.zeta), G.sum(p.alpha), G.trace(p.mid), G.sum(p.tens), G.sum(G.mul(4, p.f64)));
    const r = G.valueAndGrad(f)(params);
    assert.deepEqual(Object.keys(r.gradient), ['zeta', 'alpha', 'mid', 'tens', 'f64']);
    assert.equal(r.value, 4 + 3 + 2 + 3 + 2);
    assert.equal(r.gradient.zeta, 4);
    assert.deepEqual(r.gradient.alpha, [1, 1]);
    assert.deepEqual(r.gradient.mid, [[1, 0], [0, 1]]);
    assert.deepEqual(Array.from(r.gradient.tens.data), [1]);
    assert.deepEqual(Array.from(r.gradient.tens.shape), [1]);
    assert.notEqual(r.gradient.tens.data, params.tens.data);
    assert.ok(Array.isArray(r.gradient.f64));
    assert.deepEqual(r.gradient.f64, [4]);
  });

  test('an unused parameter gets zeros in its form', () => {
    const params = {
      used: 1.5,
      n: 2,
      v: [1, 2],
      m: [[1, 2], [3, 4]],
      t: { data: new Float64Array([1, 2, 3]), shape: [3] },
      s: { data: new Float64Array([7]), shape: [] },
      f: new Float64Array([9, 9]),
    };
    const r = G.valueAndGrad((p) => G.square(p.used))(params);
    assert.deepEqual(Object.keys(r.gradient), Object.keys(params));
    assert.equal(r.gradient.used, 3);
    assert.equal(r.gradient.n, 0);
    assert.deepEqual(r.gradient.v, [0, 0]);
    assert.deepEqual(r.gradient.m, [[0, 0], [0, 0]]);
    assert.ok(r.gradient.t.data instanceof Float64Array);
    assert.deepEqual(Array.from(r.gradient.t.data), [0, 0, 0]);
    assert.deepEqual(Array.from(r.gradient.t.shape), [3]);
    assert.deepEqual(Array.from(r.gradient.s.data), [0]);
    assert.deepEqual(Array.from(r.gradient.s.shape), []);
    assert.deepEqual(r.gradient.f, [0, 0]);
  });

  test("the caller's arrays are never written", () => {
    const params = {
      a: [1, 2, 3],
      m: [[1, 2], [3, 4]],
      r: [new Float64Array([1, 2]), new Float64Array([3, 4])],
      f: new Float64Array([0.1, 0.2]),
      t: { data: new Float64Array([5, 6, 7, 8]), shape: [2, 2] },
      s: 3,
    };
    const inputs = { x: [1, 2, 3], X: { data: new Float64Array([1, 1, 1, 1]), shape: [2, 2] } };
    const before = snapshot({ params, inputs });
    const f = (p, d) => G.add(
      G.sum(G.square(G.mul(p.a, d.x))), G.sum(G.exp(p.m)), G.sum(G.mul(p.r, p.t)),
      G.sum(G.mul(p.f, p.s)), G.sum(G.matmul(d.X, p.t)));
    const r1 = G.valueAndGrad(f)(params, inputs);
    const r2 = G.grad(f)(params, inputs);
    G.valueAndGrad(f).value(params, inputs);
    assert.deepEqual(snapshot({ params, inputs }), before);
    assert.deepEqual(r1.gradient.a, r2.a);
    // mutating the returned gradient does not touch the parameters either
    r1.gradient.t.data[0] = 1234;
    r1.gradient.m[0][0] = 1234;
    assert.deepEqual(snapshot({ params, inputs }), before);
  });

  test('a fresh gradient object on every call', () => {
    const vg = G.valueAndGrad((m) => G.sum(G.square(m)));
    const t = { data: new Float64Array([1, 2]), shape: [2] };
    const g1 = vg(t).gradient;
    const g2 = vg(t).gradient;
    assert.notEqual(g1.data, g2.data);
    assert.deepEqual(Array.from(g1.data), Array.from(g2.data));
  });

  test('parameters reach the objective as Vars', () => {
    let seen = null;
    G.valueAndGrad((p) => {
      seen = p;
      return G.add(p.a, G.sum(p.b));
    })({ a: 1, b: [1, 2] });
    assert.ok(seen.a instanceof G.Var);
    assert.ok(seen.b instanceof G.Var);
    let single = null;
    G.valueAndGrad((x) => { single = x; return G.sum(x); })([1, 2]);
    assert.ok(single instanceof G.Var);
  });
});

describe('valueAndGrad: inputs, grad, .value', () => {
  test('f(params) without inputs, f(params, inputs) with them; inputs get no gradient', () => {
    const calls = [];
    const f = function (p, d) {
      calls.push(arguments.length);
      if (d === undefined) return G.mul(p.w, 2);
      return G.sum(G.square(G.sub(G.mul(p.w, d.x), d.y)));
    };
    const vg = G.valueAndGrad(f);
    assert.deepEqual(vg({ w: 3 }), { value: 6, gradient: { w: 2 } });
    const r = vg({ w: 2 }, { x: [1, 2], y: [2, 5] });
    // (2*1-2)^2 + (2*2-5)^2 = 1, d/dw = 2*(0)*1 + 2*(-1)*2 = -4
    assert.equal(r.value, 1);
    assert.deepEqual(r.gradient, { w: -4 });
    assert.deepEqual(calls, [1, 2]);
  });

  test('inputs become leaves (Vars) and take every value form', () => {
    let seen = null;
    const f = (p, d) => { seen = d; return G.add(G.mul(p, d.k), G.sum(d.v), G.sum(d.m), G.sum(d.t)); };
    const r = G.valueAndGrad(f)(2, {
      k: 3, v: [1, 2], m: [[1], [2]], t: { data: new Float64Array([4]), shape: [] },
    });
    assert.equal(r.value, 6 + 3 + 3 + 4);
    assert.equal(r.gradient, 3);
    for (const k of ['k', 'v', 'm', 't']) assert.ok(seen[k] instanceof G.Var, `input ${k} should be a Var`);
  });

  test('the map example from the seed README', () => {
    const f = (p) => G.add(G.square(p.mu), G.square(p.sigma));
    assert.deepEqual(G.valueAndGrad(f)({ mu: 3, sigma: 4 }), { value: 25, gradient: { mu: 6, sigma: 8 } });
  });

  test('the compile example of SPEC §8 through valueAndGrad', () => {
    const f = (p, d) => G.sum(G.square(G.sub(G.mul(p.w, d.x), G.add(d.y, p.b))));
    const r = G.valueAndGrad(f)({ w: 2, b: [0.5, 0.5] }, { x: [1, 2], y: [2, 5] });
    assert.deepEqual(r, { value: 2.5, gradient: { w: -7, b: [1, 3] } });
  });

  test('grad returns the gradient alone, in the parameter form', () => {
    assert.equal(G.grad((x) => G.mul(x, x, x))(2), 12);
    assert.deepEqual(G.grad((x) => G.sum(G.mul(x, [1, 2])))([5, 5]), [1, 2]);
    assert.deepEqual(G.grad((p, d) => G.mul(p.a, d.c))({ a: 1 }, { c: 7 }), { a: 7 });
  });

  test('.value: number, number[], number[][] by root rank', () => {
    const s = G.valueAndGrad((x) => G.sum(x)).value([1, 2, 3]);
    assert.equal(s, 6);
    const v = G.valueAndGrad((x) => G.mul(x, 2)).value([1, 2, 3]);
    assert.ok(Array.isArray(v));
    assert.deepEqual(v, [2, 4, 6]);
    const m = G.valueAndGrad((x) => G.transpose(x)).value([[1, 2, 3], [4, 5, 6]]);
    assert.deepEqual(m, [[1, 4], [2, 5], [3, 6]]);
    assert.ok(m.every((r) => Array.isArray(r)));
    const withInputs = G.valueAndGrad((p, d) => G.add(p.a, d.b)).value({ a: [1, 2] }, { b: 10 });
    assert.deepEqual(withInputs, [11, 12]);
    const calls = [];
    G.valueAndGrad(function (p) { calls.push(arguments.length); return G.sum(p); }).value([1]);
    assert.deepEqual(calls, [1]);
  });

  test('the objective may branch on .data (re-traced on every call)', () => {
    const vg = G.valueAndGrad((x) => (x.data[0] > 0 ? G.square(x) : G.mul(x, -3)));
    assert.deepEqual(vg(2), { value: 4, gradient: 4 });
    assert.deepEqual(vg(-2), { value: 6, gradient: -3 });
    assert.deepEqual(vg(5), { value: 25, gradient: 10 });
  });

  test('a constant objective still returns zeros', () => {
    const r = G.valueAndGrad(() => G.sum([1, 2]))({ a: [1, 2], b: 3 });
    assert.equal(r.value, 3);
    assert.deepEqual(r.gradient, { a: [0, 0], b: 0 });
  });
});

describe('jacobian', () => {
  test('vector output of a vector input: J = A', () => {
    const A = [[1, 2, 3], [4, 5, 6]];
    const J = G.jacobian((x) => G.matmul(A, x))([0.5, -1, 2]);
    assert.ok(Array.isArray(J) && J.every((r) => Array.isArray(r)));
    assert.deepEqual(J, A);
  });

  test('scalar output: a 1×n row', () => {
    const J = G.jacobian((x) => G.sum(G.square(x)))([1, 2, 3]);
    assert.deepEqual(J, [[2, 4, 6]]);
    const Js = G.jacobian((x) => G.mul(x, x))(3);
    assert.deepEqual(Js, [[6]]);
  });

  test('scalar input, vector output: an m×1 column', () => {
    const J = G.jacobian((x) => G.mul(x, [1, 2, 3]))(2);
    assert.deepEqual(J, [[1], [2], [3]]);
  });

  test('matrix input is flattened row-major', () => {
    const v = [10, 20, 30];
    const J = G.jacobian((X) => G.matmul(X, v))([[1, 2, 3], [4, 5, 6]]);
    assert.deepEqual(J, [[10, 20, 30, 0, 0, 0], [0, 0, 0, 10, 20, 30]]);
    const T = G.jacobian((X) => G.reshape(X, [4]))({ data: new Float64Array([1, 2, 3, 4]), shape: [2, 2] });
    assert.deepEqual(T, [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]);
  });

  test('nonlinear: closed form and finite differences', () => {
    const rng = makeRng(99);
    const A = rng.matrix(4, 3);
    const x = rng.vector(3);
    const f = (z) => G.tanh(G.matmul(A, z));
    const J = G.jacobian(f)(x);
    assert.equal(J.length, 4);
    assert.ok(J.every((r) => r.length === 3));
    const Ax = A.map((r) => r.reduce((s, a, j) => s + a * x[j], 0));
    const expected = A.map((r, i) => r.map((a) => (1 - Math.tanh(Ax[i]) ** 2) * a));
    assert.ok(relErr(J, expected) <= 1e-14);
    for (let i = 0; i < 4; i++) {
      const fd = fdGrad((z) => f(Array.from(z)).data[i], x);
      assert.ok(relErr(J[i], fd) <= 1e-7);
    }
    // matrix input, FD
    const X = rng.matrix(2, 3);
    const g = (M) => G.concat([G.sum(G.exp(M)), G.dot(G.slice(G.reshape(M, [6]), [0], [3]), [1, 2, 3])]);
    const JX = G.jacobian(g)(X);
    assert.equal(JX.length, 2);
    for (let i = 0; i < 2; i++) {
      const fd = fdGrad((z) => g([Array.from(z.slice(0, 3)), Array.from(z.slice(3))]).data[i], X.flat());
      assert.ok(relErr(JX[i], fd) <= 1e-7, `row ${i}`);
    }
  });
});

describe('graphs built outside any evaluation', () => {
  test('a long graph stays on one tape, so gradients reach its leaves', () => {
    // Longer than the shared tape's limit: the graph must not be split
    // across two tapes, which would cut the gradient's path to x.
    const x = G.variable(2);
    let y = x;
    for (let i = 0; i < 40_000; i++) y = G.add(y, 0);
    const z = G.mul(y, G.variable(3));
    z.backward();
    assert.deepEqual(Array.from(x.grad), [3]);
  });

  test('leaves made after a full shared tape still differentiate', () => {
    for (let i = 0; i < 40_000; i++) G.variable(i);
    const a = G.variable([1, 2]);
    const b = G.sum(G.square(a));
    b.backward();
    assert.deepEqual(Array.from(a.grad), [2, 4]);
  });
});

describe('captured arrays in eager evaluations', () => {
  test('an array of rows edited in place between calls is read afresh', () => {
    const X = Array.from({ length: 20 }, (_, i) => Array.from({ length: 5 }, (_, j) => i + j));
    const y = Array.from({ length: 100 }, (_, i) => i);
    const vg = G.valueAndGrad((p) => G.add(G.sum(G.mul(X, p)), G.sum(G.mul(y, p))));
    const before = vg(1).value;
    assert.equal(before, X.flat().reduce((a, b) => a + b) + y.reduce((a, b) => a + b));
    X[7][3] += 1000;
    y[42] -= 10;
    assert.equal(vg(1).value, before + 990);
    X[7] = X[7].map((v) => v * 2);
    assert.equal(vg(1).value, before + 990 + X[7].reduce((a, b) => a + b) / 2);
  });
});
