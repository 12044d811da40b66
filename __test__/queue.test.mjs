// Scalar ops recorded in JavaScript and sent to the core in batches
// (src/js/queue.js): what a user sees must not change. Values are read
// mid-objective, queued and direct ops mix, a batch overflows, tapes
// interleave, errors throw at the op, and eager, compiled and rebuilt
// results agree bit for bit and with finite differences or closed forms.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as G from '../index.js';
import { checkGrad, throwsMsg } from './helpers.mjs';

const { add, sub, mul, div, exp, log, tanh, square, sqrt, sigmoid, sum, mean, reshape, concat, cholesky } = G;

/** value and gradient of f at x: eager, compiled, and rebuilt from its plan, all bit-identical. */
function threeWays(f, x) {
  const eager = G.valueAndGrad(f)(x);
  const compiled = G.compile(f);
  const c = compiled(x);
  const rebuilt = G.compileFromJSON(compiled.toJSON())(x);
  assert.deepEqual(c, eager, 'compiled vs eager');
  assert.deepEqual(rebuilt, eager, 'rebuilt vs eager');
  return eager;
}

test('a chain longer than one batch: eager, compiled and rebuilt agree, and match the closed form', () => {
  // y_{k+1} = y_k * 0.999 + 0.001, 3000 times: y = a^n x + (1 - a^n) * b / (1 - a)
  const n = 3000;
  const f = (x) => {
    let y = x;
    for (let i = 0; i < n; i++) y = add(mul(y, 0.999), 0.001);
    return y;
  };
  const r = threeWays(f, 0.7);
  const an = 0.999 ** n;
  assert.ok(Math.abs(r.value - (an * 0.7 + ((1 - an) * 0.001) / (1 - 0.999))) < 1e-12);
  assert.ok(Math.abs(r.gradient - an) < 1e-14, `gradient ${r.gradient} vs ${an}`);
});

test('values read inside the objective are current, and recording goes on after', () => {
  const seen = [];
  const f = (p) => {
    const a = mul(p.x, p.y);
    seen.push(a.value.data[0]); // crosses: everything queued so far is recorded
    const b = add(exp(a), square(p.x));
    seen.push(b.data[0]);
    const c = div(b, sub(p.y, 3)); // queued again, numbered from the tape's length
    seen.push(c.value.data[0]);
    return tanh(mul(c, 0.1));
  };
  const x = { x: 0.4, y: -1.3 };
  threeWays(f, x);
  const a = 0.4 * -1.3;
  const b = Math.exp(a) + 0.16;
  assert.equal(seen[0], a);
  assert.ok(Math.abs(seen[1] - b) < 1e-15);
  assert.ok(Math.abs(seen[2] - b / (-1.3 - 3)) < 1e-15);
  checkGrad(f, x, { label: 'read mid-objective' });
});

test('queued scalars feed direct ops and direct results feed queued ones', () => {
  const f = (p) => {
    const s = sum(mul(p.v, p.v)); // direct: vectors
    const k = add(square(p.a), 1); // queued
    const scaled = mul(p.v, k); // direct, with a queued operand
    const t = sum(scaled); // direct, a scalar whose shape only the core knows yet
    const m = reshape(concat([k, p.a, p.a, k]), [2, 2]); // direct
    const l = cholesky(add(mul(m, m), 3)); // direct, from queued scalars
    return add(log(add(s, 1)), sqrt(add(square(t), 1)), sigmoid(sum(l)));
  };
  const x = { a: 0.6, v: [0.5, -1.5, 2] };
  threeWays(f, x);
  checkGrad(f, x, { label: 'mixed' });
});

test('errors still throw at the op that caused them', () => {
  const calls = [];
  const f = (x) => {
    const a = square(x); // queued
    calls.push('before');
    // A non-SPD matrix from queued scalars: the core sees it at cholesky.
    const m = reshape(concat([a, 2, 2, a]), [2, 2]);
    const l = cholesky(m);
    calls.push('after');
    return sum(l);
  };
  throwsMsg(() => G.valueAndGrad(f)(0.5), /not positive definite/);
  assert.deepEqual(calls, ['before']);
  throwsMsg(() => add(square(G.variable(1)), 1, [1, 2, 3], [[1, 2]]), 'add: shapes [3] and [1×2] do not match');
  // An evaluation that failed leaves nothing queued for the next.
  assert.deepEqual(G.valueAndGrad((x) => mul(square(x), 3))(2), { value: 12, gradient: 12 });
});

test('intermediates on scalars are no longer merged: each keeps its own .grad', () => {
  const x = G.variable(3);
  const s1 = square(x);
  const s2 = square(x);
  const y = add(s1, mul(s2, 2));
  y.backward();
  assert.equal(s1.grad.data?.[0] ?? s1.grad[0], 1);
  assert.equal(s2.grad.data?.[0] ?? s2.grad[0], 2);
  assert.equal(x.grad.data?.[0] ?? x.grad[0], 18);
});

test('graphs built outside evaluations on two tapes, interleaved', () => {
  const a = G.variable(0.3);
  const b = G.variable(-0.8);
  let ya = a;
  let yb = b;
  for (let i = 0; i < 50; i++) {
    ya = tanh(add(mul(ya, 1.1), 0.2));
    yb = sigmoid(sub(mul(yb, 0.9), ya)); // reads a's graph: the same tape or a constant from it
  }
  const expected = (() => {
    let u = 0.3;
    let v = -0.8;
    for (let i = 0; i < 50; i++) {
      u = Math.tanh(u * 1.1 + 0.2);
      v = 1 / (1 + Math.exp(-(v * 0.9 - u)));
    }
    return v;
  })();
  assert.ok(Math.abs(yb.data[0] - expected) < 1e-14);
  yb.backward();
  const g = b.grad.data?.[0] ?? b.grad[0];
  // d yb / d b by central differences of the same recursion
  const run = (v0) => {
    let u = 0.3;
    let v = v0;
    for (let i = 0; i < 50; i++) {
      u = Math.tanh(u * 1.1 + 0.2);
      v = 1 / (1 + Math.exp(-(v * 0.9 - u)));
    }
    return v;
  };
  const fd = (run(-0.8 + 1e-6) - run(-0.8 - 1e-6)) / 2e-6;
  assert.ok(Math.abs(g - fd) < 1e-8, `${g} vs ${fd}`);
});

test('a hand-built node on queued scalars', () => {
  const f = (x) => {
    const a = mul(x, 3); // queued
    const cube = new G.Var(a.data[0] ** 3, [a], (g) => [g.map((gi) => 3 * a.data[0] ** 2 * gi)]);
    return add(cube, square(x));
  };
  const r = G.valueAndGrad(f)(0.5);
  assert.ok(Math.abs(r.value - (1.5 ** 3 + 0.25)) < 1e-14);
  assert.ok(Math.abs(r.gradient - (9 * 1.5 ** 2 + 1)) < 1e-12);
});

test('a Var of a finished evaluation still cannot be read', () => {
  let kept = null;
  G.valueAndGrad((x) => {
    kept = square(x);
    return kept;
  })(2);
  throwsMsg(() => kept.value, /belongs to an evaluation that has finished/);
});

test('short vectors: queued elementwise ops, broadcasts and sums, against finite differences', () => {
  const Y = [28, 8, -3, 7, -1, 1, 18, 12];
  const f = (p) => {
    const theta = add(p.mu, mul(exp(p.logTau), p.eta)); // scalar with vector: queued
    const r = div(sub(Y, theta), Y.map((y) => 10 + Math.abs(y))); // vector constants, one shape: queued
    const rows = mul(G.tensor(Float64Array.from({ length: 16 }, (_, i) => i / 16 - 0.5), [2, 8]), p.eta); // a row broadcast: direct
    return sub(mean(square(p.eta)), add(mul(0.5, sum(square(r))), mean(rows)));
  };
  const x = { mu: 1.5, logTau: 0.7, eta: Y.map((_, j) => 0.1 * (j - 3.5)) };
  threeWays(f, x);
  checkGrad(f, x, { label: 'short vectors' });
});

test('a vector longer than a queued leaf, and matrices elementwise', () => {
  const n = 300; // past QUEUED_VALUES: recorded directly
  const f = (v) => sum(mul(tanh(v), sigmoid(v)));
  const x = Array.from({ length: n }, (_, i) => Math.sin(i));
  threeWays(f, x);
  checkGrad(f, x, { label: 'long vector' });
  const g = (m) => mean(mul(exp(m), m)); // a [2×3] parameter: elementwise on known shapes, queued
  const m = [
    [0.1, -0.2, 0.3],
    [0.4, 0.5, -0.6],
  ];
  threeWays(g, m);
  checkGrad(g, m, { label: 'matrix' });
});

test('a shape mismatch among queued vectors throws at the op, with SPEC\'s message', () => {
  const calls = [];
  const f = (v) => {
    const a = square(v);
    calls.push('before');
    const b = add(a, [1, 2]);
    calls.push('after');
    return sum(b);
  };
  throwsMsg(() => G.valueAndGrad(f)([1, 2, 3]), 'add: shapes [3] and [2] do not match');
  assert.deepEqual(calls, ['before']);
});

test('sums of one vector are separate nodes, each with its own .grad', () => {
  const v = G.variable([1, 2, 3]);
  const s1 = sum(v);
  const s2 = sum(v);
  mul(s1, add(s2, 1)).backward();
  assert.equal(s1.grad.data?.[0] ?? s1.grad[0], 7);
  assert.equal(s2.grad.data?.[0] ?? s2.grad[0], 6);
  assert.deepEqual(Array.from(v.grad.data ?? v.grad), [13, 13, 13]);
});

test('repeated elementwise subexpressions: eager, compiled and rebuilt sum adjoints alike', () => {
  // The same op on the same parents, four times: none is merged anywhere,
  // so all three paths accumulate in one order and agree bit for bit.
  const f = (x) => {
    const t = () => tanh(square(sigmoid(x)));
    return mul(add(t(), mul(t(), 0.7), exp(t())), add(t(), 0.1));
  };
  const c = G.compile(f);
  c(0.1);
  const rebuilt = G.compileFromJSON(c.toJSON());
  const fromText = G.compileFromJSON(JSON.stringify(c.toJSON()));
  for (let i = 0; i < 200; i++) {
    const x = Math.sin(i) * 2;
    const e = G.valueAndGrad(f)(x);
    assert.deepEqual(c(x), e, `compiled at ${x}`);
    assert.deepEqual(rebuilt(x), e, `rebuilt at ${x}`);
    assert.deepEqual(fromText(x), e, `rebuilt from text at ${x}`);
  }
});

test('pow is queued with its exponent: eager, compiled and rebuilt agree, and match the closed form', () => {
  // f = a^2.5 + b^-1.5 · a^3 + (a·b)^0.5, the products used more than once.
  const f = (p) => {
    const ab = mul(p.a, p.b);
    return add(G.pow(p.a, 2.5), mul(G.pow(p.b, -1.5), G.pow(p.a, 3)), G.pow(ab, 0.5), mul(G.pow(ab, 2), 0.1));
  };
  for (const [a, b] of [[1.3, 0.7], [0.4, 2.2], [2, 1]]) {
    const r = threeWays(f, { a, b });
    const value = a ** 2.5 + b ** -1.5 * a ** 3 + (a * b) ** 0.5 + 0.1 * (a * b) ** 2;
    const da = 2.5 * a ** 1.5 + 3 * b ** -1.5 * a ** 2 + 0.5 * b * (a * b) ** -0.5 + 0.2 * a * b * b;
    const db = -1.5 * b ** -2.5 * a ** 3 + 0.5 * a * (a * b) ** -0.5 + 0.2 * a * a * b;
    assert.ok(Math.abs(r.value - value) < 1e-13 * Math.abs(value), `value ${r.value} vs ${value}`);
    assert.ok(Math.abs(r.gradient.a - da) < 1e-12 * Math.abs(da), `d/da ${r.gradient.a} vs ${da}`);
    assert.ok(Math.abs(r.gradient.b - db) < 1e-12 * Math.abs(db), `d/db ${r.gradient.b} vs ${db}`);
    checkGrad(f, { a, b }, { label: `pow at ${a}, ${b}` });
  }
  // On a vector and a matrix, queued the same way; an exponent of 0 and a negative base.
  const g = (p) => add(sum(G.pow(p.v, 3)), sum(G.pow(p.m, 2)), G.pow(p.x, 0), G.pow(p.y, 2));
  const x = { v: [0.5, -1.2, 2], m: [[1, 2], [3, -4]], x: 1.7, y: -0.6 };
  const r = threeWays(g, x);
  assert.deepEqual(r.gradient, { v: [0.75, 3 * 1.44, 12], m: [[2, 4], [6, -8]], x: 0, y: -1.2 });
  checkGrad(g, x, { label: 'pow on a vector and a matrix' });
});

test('dot of two vectors is queued: eager, compiled and rebuilt agree, match the closed form, and repeat', () => {
  // f = (w·x)² + w·w + exp(w·c), the dot products used more than once.
  const c = [0.5, -1, 2];
  const f = (p) => {
    const wx = G.dot(p.w, p.x);
    return add(square(wx), G.dot(p.w, p.w), exp(G.dot(p.w, c)), mul(wx, 0.5));
  };
  const dotJS = (a, b) => a.reduce((s, ai, i) => s + ai * b[i], 0);
  for (const [w, x] of [[[0.3, -0.2, 0.1], [1, 2, 3]], [[-1.5, 0.25, 0.4], [0.5, 0.5, -2]]]) {
    // Three calls each: the second builds the evaluation's plan, the third replays it.
    for (let k = 0; k < 3; k++) {
      const r = threeWays(f, { w, x });
      const wx = dotJS(w, x);
      const value = wx * wx + dotJS(w, w) + Math.exp(dotJS(w, c)) + 0.5 * wx;
      const e = Math.exp(dotJS(w, c));
      const dw = w.map((wi, i) => 2 * wx * x[i] + 2 * wi + e * c[i] + 0.5 * x[i]);
      const dx = x.map((_, i) => 2 * wx * w[i] + 0.5 * w[i]);
      assert.ok(Math.abs(r.value - value) < 1e-13 * Math.abs(value), `value ${r.value} vs ${value}`);
      r.gradient.w.forEach((g, i) => assert.ok(Math.abs(g - dw[i]) < 1e-12 * (1 + Math.abs(dw[i])), `d/dw ${g} vs ${dw[i]}`));
      r.gradient.x.forEach((g, i) => assert.ok(Math.abs(g - dx[i]) < 1e-12 * (1 + Math.abs(dx[i])), `d/dx ${g} vs ${dx[i]}`));
    }
    checkGrad(f, { w, x }, { label: `dot at ${w}, ${x}` });
  }
  // Each dot keeps its own .grad, as elementwise ops do; a length mismatch still throws at the op.
  const v = G.variable([1, 2]);
  const d1 = G.dot(v, v);
  const d2 = G.dot(v, v);
  mul(d1, add(d2, 1)).backward();
  assert.equal(d1.grad.data?.[0] ?? d1.grad[0], 6);
  assert.equal(d2.grad.data?.[0] ?? d2.grad[0], 5);
  assert.throws(() => G.valueAndGrad((p) => G.dot(p, [1, 2]))([1, 2, 3]), Error);
});

test('small matrices and matmul are queued: eager, compiled and rebuilt agree, match the closed form, and repeat', () => {
  // f = ½‖Xβ - y‖² + ½ βᵀ(AᵀA)β, X a captured 4×2 design, A a 2×2 parameter.
  const X = [[1, 0.5], [1, -1], [1, 2], [1, 0]];
  const y = [1, -0.5, 3, 0.25];
  const f = (p) => {
    const r = sub(G.matmul(X, p.beta), y);
    const Ab = G.matmul(p.A, p.beta);
    return add(mul(0.5, G.dot(r, r)), mul(0.5, sum(square(G.matmul(G.tensor(new Float64Array([1, 0, 0, 1]), [2, 2]), Ab)))));
  };
  const beta = [0.3, -0.7];
  const A = [[2, 0.5], [-1, 1.5]];
  for (let k = 0; k < 3; k++) {
    const r = threeWays(f, { beta, A });
    const res = X.map((row, i) => row[0] * beta[0] + row[1] * beta[1] - y[i]);
    const Ab = A.map((row) => row[0] * beta[0] + row[1] * beta[1]);
    const value = 0.5 * res.reduce((a, v) => a + v * v, 0) + 0.5 * Ab.reduce((a, v) => a + v * v, 0);
    const dBeta = [0, 1].map((j) => X.reduce((a, row, i) => a + row[j] * res[i], 0) + A.reduce((a, row, i) => a + row[j] * Ab[i], 0));
    const dA = A.map((row, i) => row.map((_, j) => Ab[i] * beta[j]));
    assert.ok(Math.abs(r.value - value) < 1e-13 * Math.abs(value), `value ${r.value} vs ${value}`);
    r.gradient.beta.forEach((g, j) => assert.ok(Math.abs(g - dBeta[j]) < 1e-12, `d/dbeta ${g} vs ${dBeta[j]}`));
    r.gradient.A.forEach((row, i) => row.forEach((g, j) => assert.ok(Math.abs(g - dA[i][j]) < 1e-12, `d/dA ${g} vs ${dA[i][j]}`)));
  }
  checkGrad(f, { beta, A }, { label: 'matmul of small matrices' });
  // Another design of the same size but another shape is not the same evaluation.
  const g = (p) => sum(G.matmul(p.M, [1, 2, 3]));
  assert.deepEqual(G.valueAndGrad(g)({ M: [[1, 2, 3]] }).gradient, { M: [[1, 2, 3]] });
  assert.deepEqual(G.valueAndGrad(g)({ M: [[1, 2, 3]] }).gradient, { M: [[1, 2, 3]] });
  assert.deepEqual(G.valueAndGrad((p) => sum(G.matmul(p.M, [1, 2])))({ M: [[1, 2], [3, 4], [5, 6]] }).gradient, { M: [[1, 2], [1, 2], [1, 2]] });
  // Two identical products keep a .grad each, as in the JavaScript version.
  const M = G.variable([[1, 2], [3, 4]]);
  const v = G.variable([1, 1]);
  const p1 = G.matmul(M, v);
  const p2 = G.matmul(M, v);
  mul(sum(p1), add(sum(p2), 1)).backward();
  assert.deepEqual(Array.from(p1.grad.data ?? p1.grad), [11, 11]);
  assert.deepEqual(Array.from(p2.grad.data ?? p2.grad), [10, 10]);
  // Mismatched shapes still throw at the op; a matrix element that is not a number too.
  throwsMsg(() => G.valueAndGrad((p) => G.matmul(p, [1, 2, 3]))([[1, 2], [3, 4]]), 'matmul: inner dimensions disagree — [2×2] against [3]');
  assert.throws(() => G.valueAndGrad((p) => G.matmul([[1, 'x'], [2, 3]], p))([1, 2]), Error);
});

test('workers that record on the queue exit, or are terminated mid-evaluation, cleanly', async () => {
  const { Worker } = await import('node:worker_threads');
  const url = new URL('../index.js', import.meta.url).href;
  const source = `
    const { parentPort } = require('node:worker_threads');
    import(${JSON.stringify(url)}).then((G) => {
      const vg = G.valueAndGrad((x) => G.add(G.square(x), G.tanh(G.mul(x, 3))));
      let s = 0;
      for (let i = 0; i < 2000; i++) s += vg(0.3).gradient;
      parentPort.postMessage(s);
      for (;;) vg(0.3); // until terminated
    });`;
  const expected = 2000 * (2 * 0.3 + 3 * (1 - Math.tanh(0.9) ** 2));
  const runs = Array.from({ length: 6 }, async () => {
    const w = new Worker(source, { eval: true });
    const s = await new Promise((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
    });
    assert.ok(Math.abs(s - expected) < 1e-9 * expected, `${s} vs ${expected}`);
    assert.equal(await w.terminate(), 1);
  });
  await Promise.all(runs);
});

test('number constants are recorded once per value per evaluation, 0, -0 and NaN each time', () => {
  const seen = {};
  const f = (x) => {
    const a = G.mul(x, -0);
    const b = G.mul(x, 0);
    const c = G.mul(x, 0.5);
    const d = G.mul(0.5, x);
    seen.a = a.data[0];
    seen.b = b.data[0];
    seen.shared = c.parents[1] === d.parents[0];
    seen.half = c.parents[1].data[0];
    seen.nan = G.add(x, NaN).data[0];
    return G.add(G.add(c, d), G.add(a, b));
  };
  const r = G.valueAndGrad(f)(3);
  assert.ok(Object.is(seen.a, -0) && Object.is(seen.b, 0), `${seen.a} ${seen.b}`);
  assert.equal(seen.shared, true);
  assert.equal(seen.half, 0.5);
  assert.ok(Number.isNaN(seen.nan));
  assert.deepEqual(r, { value: 3, gradient: 1 });
  const compiled = G.compile(f);
  compiled(3);
  assert.deepEqual(compiled(3), r);
  assert.deepEqual(G.compileFromJSON(compiled.toJSON())(3), r);
});
