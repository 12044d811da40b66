// Many points per call (issue 9): `batch`, `async` and `batchAsync` on plans
// from compile and compileFromJSON. Every result bit-identical to the single
// call, whatever the number of threads; the packed [k, n] form; errors that
// name the point; arguments copied at the call; the event loop running while
// async work does; no crash when a plan is collected mid-call or a worker is
// terminated mid-batch. Runs under the WebAssembly core too
// (TANGENT_GRAD_WASM=1), where async work is done at the call.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as G from '../index.js';
import { sameBits } from './fixtures/bits.mjs';
import { throwsMsg, makeRng } from './helpers.mjs';
import { regressionData, regression, regressionParams, gpData, gp, mlpSetup, mlp } from '../bench/models.mjs';

const { compile, compileFromJSON, tensor, add, mul, sub, sum, square, dot, logdetPSD, solvePSD, matmul, exp } = G;
const WASM = process.env.TANGENT_GRAD_WASM === '1';
const root = fileURLToPath(new URL('..', import.meta.url));
const indexUrl = new URL('../index.js', import.meta.url).href;

/** The rebuilt twin of a compiled function, through JSON text. */
const rebuilt = (c) => compileFromJSON(JSON.parse(JSON.stringify(c.toJSON())));

/** Rejects with exactly this message. */
async function rejectsMsg(promise, message) {
  assert.ok(promise instanceof Promise, 'expected a Promise');
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof Error, `expected an Error, got ${e}`);
    if (message instanceof RegExp) assert.match(e.message, message);
    else assert.equal(e.message, message);
    return true;
  });
}

/** Every way to batch these points must give the single calls' results, bit for bit. */
async function checkAllWays(c, points, inputs) {
  const expected = points.map((x) => c(x, inputs));
  const r = rebuilt(c);
  for (const [name, f] of [['compile', c], ['compileFromJSON', r]]) {
    sameBits(f.batch(points, inputs), expected, `${name} batch`);
    sameBits(f.batch(points, inputs, { threads: 1 }), expected, `${name} batch threads 1`);
    sameBits(f.batch(points, inputs, { threads: 3 }), expected, `${name} batch threads 3`);
    sameBits(await f.batchAsync(points, inputs), expected, `${name} batchAsync`);
    sameBits(await f.batchAsync(points, inputs, { threads: 1 }), expected, `${name} batchAsync threads 1`);
    for (let i = 0; i < Math.min(points.length, 3); i++) sameBits(await f.async(points[i], inputs), expected[i], `${name} async ${i}`);
  }
  return expected;
}

const rng = makeRng(909);
const jitter = (v, s = 0.1) => v + s * rng.normal();

describe('batch, async and batchAsync give the single calls results, bit for bit', () => {
  test('a number', async () => {
    const c = compile((x) => add(exp(mul(x, x)), mul(3, x)));
    await checkAllWays(c, [0.5, -1, 2, NaN, Infinity, 0]);
  });

  test('number[], Float64Array and tensor vectors, mixed in one batch', async () => {
    const c = compile((b) => sum(mul(square(b), [1, 2, 3])));
    const points = [[1, 2, 3], Float64Array.of(4, 5, 6), tensor([7, 8, 9], [3]), Float64Array.of(1, 2, 3, 4).subarray(1)];
    const expected = await checkAllWays(c, points);
    assert.ok(Array.isArray(expected[0].gradient) && Array.isArray(expected[1].gradient));
    assert.ok(expected[2].gradient.data instanceof Float64Array);
  });

  test('rows, Float64Array rows and matrix tensors; a scalar tensor', async () => {
    const c = compile((A) => add(logdetPSD(A), sum(A)));
    await checkAllWays(c, [
      [[4, 1], [1, 3]],
      [Float64Array.of(5, 1), Float64Array.of(1, 2)],
      tensor([3, 0.5, 0.5, 2], [2, 2]),
    ]);
    const s = compile((x) => square(x));
    await checkAllWays(s, [tensor([2], []), 3, tensor([-1], [])]);
  });

  test('a map in any key order, with inputs (SPEC §8 example)', async () => {
    const c = compile((p, d) => sum(square(sub(mul(p.w, d.x), add(d.y, p.b)))));
    const ins = { x: [1, 2], y: [2, 5] };
    const expected = await checkAllWays(
      c,
      [{ w: 2, b: [0.5, 0.5] }, { b: Float64Array.of(1, -1), w: -0.5 }, { w: tensor([3], []), b: tensor([0, 2], [2]) }],
      ins,
    );
    sameBits(expected[0], { value: 2.5, gradient: { w: -7, b: [1, 3] } });
    assert.deepEqual(Object.keys(expected[1].gradient), ['b', 'w']);
  });

  test('the benchmark regression, gp and mlp (tensor parameters and inputs)', async () => {
    const reg = compile(regression(G, regressionData()));
    const q = regressionParams();
    await checkAllWays(
      reg,
      Array.from({ length: 37 }, () => ({ intercept: jitter(q.intercept), beta: q.beta.map((b) => jitter(b)), logSigma: jitter(q.logSigma) })),
    );
    const g = compile(gp(G, gpData(20)));
    await checkAllWays(g, Array.from({ length: 9 }, (_, i) => ({ l: 0.8 + 0.1 * i, v: 1.1 - 0.05 * i })));
    const { params, batch } = mlpSetup(G);
    const m = compile(mlp(G));
    const shifted = (s) => Object.fromEntries(Object.entries(params).map(([k, t]) => [k, tensor(t.data.map((v) => v + s), t.shape)]));
    await checkAllWays(m, [params, shifted(0.01), shifted(-0.02)], batch);
  });

  test('batches one after another, and one inside another (from a getter), each get their own results', () => {
    const c = compile((p) => add(mul(p.a, p.a), sum(square(p.b))));
    const pts = (s) => Array.from({ length: 5 }, (_, i) => ({ a: s + i, b: [s, -i] }));
    sameBits(c.batch(pts(1)), pts(1).map((x) => c(x)));
    // The same size again, a point in another key order and form: nothing of the first batch shows.
    const second = [{ b: tensor([2, 0], [2]), a: 3 }, ...pts(2).slice(1)];
    const got = c.batch(second);
    assert.deepEqual(Object.keys(got[0].gradient), ['b', 'a']);
    assert.deepEqual(got[0].gradient.b.shape, [2]);
    sameBits(got, second.map((x) => c(x)));
    // A point whose getter runs a batch of the same size on the same plan, mid-way through reading.
    let inner;
    const sneaky = pts(3);
    Object.defineProperty(sneaky[2], 'a', {
      enumerable: true,
      get() {
        inner = c.batch(pts(4));
        return 5;
      },
    });
    const outer = c.batch(sneaky);
    sameBits(inner, pts(4).map((x) => c(x)));
    sameBits(outer, [...pts(3).slice(0, 2), { a: 5, b: [3, -2] }, ...pts(3).slice(3)].map((x) => c(x)));
  });

  test('many points on every thread count: results do not depend on threads', () => {
    const c = compile((p) => add(dot(p.a, solvePSD([[2, 0.5], [0.5, 1]], p.a)), exp(p.s)));
    const points = Array.from({ length: 203 }, () => ({ a: [jitter(1), jitter(-1)], s: jitter(0) }));
    const expected = points.map((x) => c(x));
    for (const threads of [undefined, 1, 2, 3, 7, 64, 256]) sameBits(c.batch(points, undefined, { threads }), expected, `threads ${threads}`);
  });

  test('compile traces at point 0 when no plan has its signature, and f runs once', () => {
    let traces = 0;
    const c = compile((b) => {
      traces++;
      return sum(square(b));
    });
    const r = c.batch([[1, 2], [3, 4]]);
    assert.equal(traces, 1);
    sameBits(r, [c([1, 2]), c([3, 4])]);
    c.batch([[1, 2, 3]]);
    assert.equal(traces, 2);
    assert.equal(c.toJSON().nodes[0].shape[0], 3);
  });

  test('no points: [] (and an empty packed result); nothing is traced', async () => {
    let traces = 0;
    const c = compile((b) => (traces++, sum(b)));
    assert.deepEqual(c.batch([]), []);
    assert.deepEqual(await c.batchAsync([]), []);
    const e = c.batch(tensor(new Float64Array(0), [0, 4]));
    sameBits(e, { values: new Float64Array(0), gradients: { data: new Float64Array(0), shape: [0, 4] } });
    assert.equal(traces, 0);
  });

  test('hand-built nodes: compile falls back to one evaluation per point, same results', async () => {
    const f = (x) => {
      const y = new G.Var({ data: Float64Array.of(x.data[0] * 3), shape: [] }, [x], (g) => [mul(g[0], 3)]);
      return add(square(y), x);
    };
    const c = compile(f);
    const points = [1, 2, -0.5];
    const expected = points.map((x) => G.valueAndGrad(f)(x));
    sameBits(c.batch(points), expected);
    sameBits(await c.batchAsync(points), expected);
    sameBits(await c.async(2), expected[1]);
  });
});

describe('the packed form: a [k, n] tensor for a plan with one [n] parameter', () => {
  const d = regressionData();
  const q = regressionParams();
  const full = regression(G, d);
  const objective = (beta) => full({ intercept: q.intercept, beta, logSigma: q.logSigma });

  test('values and gradients as flat Float64Arrays, bit-identical to the rows', async () => {
    const c = compile(objective);
    const k = 50;
    const n = q.beta.length;
    const data = Float64Array.from({ length: k * n }, (_, i) => q.beta[i % n] + 0.1 * rng.normal());
    const points = tensor(data, [k, n]);
    const rows = Array.from({ length: k }, (_, i) => tensor(data.slice(i * n, (i + 1) * n), [n]));
    const single = rows.map((x) => c(x));
    const expected = {
      values: Float64Array.from(single, (r) => r.value),
      gradients: { data: Float64Array.from(single.flatMap((r) => Array.from(r.gradient.data))), shape: [k, n] },
    };
    for (const f of [c, rebuilt(c)]) {
      sameBits(f.batch(points), expected);
      sameBits(f.batch(points, undefined, { threads: 1 }), expected);
      sameBits(await f.batchAsync(points), expected);
      sameBits(
        f.batch(rows).map((r) => r.value),
        Array.from(expected.values),
      );
    }
    const r = c.batch(points);
    assert.ok(r.values instanceof Float64Array && r.gradients.data instanceof Float64Array);
    assert.notEqual(r.gradients.data, data);
    assert.deepEqual(data, points.data, 'the points are not written');
  });

  test('a vector taken apart with slice, reshape and concat (eight schools on one [10] parameter)', async () => {
    const { slice, reshape, concat, div } = G;
    const y = [28, 8, -3, 7, -1, 1, 18, 12];
    const sigma = [15, 10, 16, 11, 9, 11, 10, 18];
    const c = compile((t) => {
      const mu = reshape(slice(t, [0], [1]), []);
      const tau = exp(reshape(slice(t, [1], [1]), []));
      const eta = slice(t, [2], [8]);
      const z = div(sub(y, add(mu, mul(tau, eta))), sigma);
      return add(mul(-0.5, sum(square(concat([eta, z])))), mul(-0.04, square(mu)), sum(slice(t, [1], [1])));
    });
    const k = 37;
    const data = Float64Array.from({ length: k * 10 }, () => rng.normal());
    const rows = Array.from({ length: k }, (_, i) => Array.from(data.subarray(i * 10, (i + 1) * 10)));
    const single = rows.map((x) => c(x));
    const expected = { values: Float64Array.from(single, (r) => r.value), gradients: { data: Float64Array.from(single.flatMap((r) => r.gradient)), shape: [k, 10] } };
    for (const f of [c, rebuilt(c)]) {
      sameBits(f.batch(tensor(data, [k, 10])), expected);
      sameBits(f.batch(tensor(data, [k, 10]), undefined, { threads: 1 }), expected);
      sameBits(f.batch(rows), single);
    }
    // Against central differences, at one point.
    const x = rows[3];
    const h = 1e-6;
    for (let j = 0; j < 10; j++) {
      const up = x.slice();
      const down = x.slice();
      up[j] += h;
      down[j] -= h;
      const fd = (c(up).value - c(down).value) / (2 * h);
      assert.ok(Math.abs(fd - single[3].gradient[j]) < 1e-5 * (1 + Math.abs(fd)), `component ${j}: ${fd} vs ${single[3].gradient[j]}`);
    }
  });

  test('a plan that is not one vector parameter refuses it', () => {
    const m = compile((p) => add(sum(p.a), p.s));
    m({ a: [1, 2], s: 1 });
    const pts = tensor(new Float64Array(6), [3, 2]);
    throwsMsg(() => rebuilt(m).batch(pts), 'batch: a [3×2] tensor of points needs a plan with one [2] parameter; this one takes {a: [2], s: scalar}');
    const v = compile((b) => sum(b));
    v([1, 2, 3]);
    throwsMsg(() => rebuilt(v).batch(pts), 'batch: a [3×2] tensor of points needs a plan with one [2] parameter; this one takes [3]');
    throwsMsg(() => v.batch(tensor(new Float64Array(3), [3])), 'batch: a tensor of points must be shaped [k, n] (k points of a [n] vector), got [3]');
    throwsMsg(() => v.batch({ data: new Float64Array(5), shape: [2, 3] }), 'batch: data length 5 does not match shape [2×3]');
    throwsMsg(() => v.batch({ data: new Float64Array(0), shape: [2 ** 25, 0] }), 'batch: 33554432 points are more than the 16777216 a batch takes');
  });

  test('points of an empty vector, and no points: checked against the plan as any others', async () => {
    const f = (x) => add(sum(square(x)), 1);
    const c = compile(f);
    const want = { values: Float64Array.of(1, 1), gradients: { data: new Float64Array(0), shape: [2, 0] } };
    assert.deepEqual(c.batch(tensor(new Float64Array(0), [2, 0])), want);
    assert.deepEqual(rebuilt(c).batch(tensor(new Float64Array(0), [2, 0])), want);
    assert.deepEqual(await c.batchAsync(tensor(new Float64Array(0), [2, 0])), want);
    assert.deepEqual(c.batch([new Float64Array(0), new Float64Array(0)]), [{ value: 1, gradient: [] }, { value: 1, gradient: [] }]);
    // No points: still inputs that are not a map, and a tensor for another
    // plan where there is a plan to ask.
    throwsMsg(() => compile(f).batch([], 5), 'compile: inputs must be a {name: value} map, got number');
    throwsMsg(() => rebuilt(c).batch([], 5), 'compileFromJSON: inputs must be a {name: value} map, got number');
    const v = compile(f);
    v([1, 2, 3]);
    throwsMsg(() => rebuilt(v).batch(tensor(new Float64Array(0), [0, 2])), 'batch: a [0×2] tensor of points needs a plan with one [2] parameter; this one takes [3]');
    assert.deepEqual(rebuilt(v).batch(tensor(new Float64Array(0), [0, 3])), { values: new Float64Array(0), gradients: { data: new Float64Array(0), shape: [0, 3] } });
    const m = compile((p) => add(square(p.a), sum(p.b)));
    m({ a: 1, b: new Float64Array(0) });
    throwsMsg(() => rebuilt(m).batch(tensor(new Float64Array(0), [2, 0])), 'batch: a [2×0] tensor of points needs a plan with one [0] parameter; this one takes {a: scalar, b: [0]}');
  });
});

describe('errors', () => {
  const spd = compile((A) => logdetPSD(A));
  const good = [[2, 0], [0, 2]];
  const bad = [[1, 2], [2, 1]];
  const notPD = 'cholesky: matrix is not positive definite (pivot 1 is -3)';

  test('a value-dependent failure names the first failing point; the plan keeps working', async () => {
    const points = [good, good, bad, good, [[-1, 0], [0, 1]], good];
    spd(good);
    for (const f of [spd, rebuilt(spd)]) {
      for (const threads of [undefined, 1, 2, 5]) throwsMsg(() => f.batch(points, undefined, { threads }), `batch: point 2: ${notPD}`);
      await rejectsMsg(f.batchAsync(points), `batchAsync: point 2: ${notPD}`);
      await rejectsMsg(f.async(bad), notPD);
      sameBits(f.batch([good, good]), [spd(good), spd(good)]);
    }
    // Point 0 fails while compile traces it.
    throwsMsg(() => compile((A) => logdetPSD(A)).batch([bad, good]), `batch: point 0: ${notPD}`);
    // The first failing index among many, wherever the threads are.
    const many = Array.from({ length: 500 }, (_, i) => (i === 321 || i === 480 ? bad : good));
    throwsMsg(() => spd.batch(many), `batch: point 321: ${notPD}`);
  });

  test('a point of another shape names its index', async () => {
    const c = compile((p) => add(sum(p.b), p.w));
    const x = { w: 1, b: [1, 2] };
    throwsMsg(
      () => c.batch([x, x, { w: 1, b: [1, 2, 3] }]),
      'batch: point 2 is shaped b:v3,w:s, unlike point 0 (b:v2,w:s); a batch evaluates one shape signature',
    );
    throwsMsg(() => c.batch([x, { w: 1 }]), 'batch: point 1 is shaped w:s, unlike point 0 (b:v2,w:s); a batch evaluates one shape signature');
    throwsMsg(() => c.batch([x, { w: 1, b: ['a', 2] }]), 'batch: point 1: parameter "b" must be a number, an array of numbers, or an array of rows');
    throwsMsg(() => c.batch([x, { w: 1, b: [] }]), 'batch: point 1: parameter "b" must be a number, a non-empty array, or a tensor');
    throwsMsg(() => c.batch([x, 5]), 'batch: point 1: parameter must be a {name: value} map, like the plan it was built for');
    // eslint-disable-next-line no-sparse-arrays
    throwsMsg(() => c.batch([x, , x]), 'batch: point 1: parameter must be a {name: value} map, like the plan it was built for');
    throwsMsg(
      () => c.batch([x, { w: 1, b: { data: new Float64Array(3), shape: [2] } }]),
      'batch: point 1: data length 3 does not match shape [2]',
    );
    const r = rebuilt(c);
    // A malformed point: the call's own message, at point 0 or after it.
    const malformed = { w: 1, b: 'x' };
    const call = 'compileFromJSON: this plan was built for arguments shaped b:v2,w:s, got b:?,w:s. A rebuilt plan has no objective to re-trace, so it cannot adapt.';
    throwsMsg(() => r(malformed), call);
    throwsMsg(() => r.batch([malformed, x]), `batch: point 0: ${call}`);
    throwsMsg(() => r.batch([x, malformed]), `batch: point 1: ${call}`);
    throwsMsg(() => c.batch([x, malformed]), 'batch: point 1: parameter "b" must be a number, a non-empty array, or a tensor');
    throwsMsg(
      () => r.batch([x, { w: 1, b: [1, 2, 3] }]),
      'batch: point 1: compileFromJSON: this plan was built for arguments shaped b:v2,w:s, got b:v3,w:s. A rebuilt plan has no objective to re-trace, so it cannot adapt.',
    );
    throwsMsg(
      () => r.batch([{ w: [1], b: [1, 2] }]),
      'batch: point 0: compileFromJSON: this plan was built for arguments shaped b:v2,w:s, got b:v2,w:v1. A rebuilt plan has no objective to re-trace, so it cannot adapt.',
    );
    await rejectsMsg(c.batchAsync([x, { w: 1, b: [1, 2, 3] }]), /^batchAsync: point 1 is shaped b:v3,w:s/);
    await rejectsMsg(
      r.async({ w: 1, b: [1] }),
      'compileFromJSON: this plan was built for arguments shaped b:v2,w:s, got b:v1,w:s. A rebuilt plan has no objective to re-trace, so it cannot adapt.',
    );
    await rejectsMsg(c.async({ w: 1, b: ['x'] }), 'parameter "b" must be a number, an array of numbers, or an array of rows');
  });

  test('hostile arguments get a clear Error', async () => {
    const c = compile((b) => sum(square(b)));
    for (const [threads, shown] of [[0, '0'], [-1, '-1'], [1.5, '1.5'], [NaN, 'NaN'], [Infinity, 'Infinity'], ['2', '"2"'], [null, 'null'], [true, 'true'], [2n, '2n'], [{}, 'object']]) {
      throwsMsg(() => c.batch([[1]], undefined, { threads }), `batch: options.threads must be a positive integer, got ${shown}`);
    }
    throwsMsg(() => c.batch([[1]], undefined, { threads: 1e6 }), 'batch: options.threads is 1000000, more than the 256 a batch may use');
    throwsMsg(() => c.batch([[1]], undefined, 4), 'batch: options must be an object, got number');
    throwsMsg(() => c.batch(new Array(2 ** 25)), 'batch: 33554432 points are more than the 16777216 a batch takes');
    throwsMsg(() => c.batch(5), 'batch: points must be an array of parameter values, or a [k, n] tensor for a plan with one vector parameter; got number');
    throwsMsg(() => c.batch(null), 'batch: points must be an array of parameter values, or a [k, n] tensor for a plan with one vector parameter; got null');
    throwsMsg(() => c.batch([[1]], 7), 'compile: inputs must be a {name: value} map, got number');
    await rejectsMsg(c.batchAsync([[1]], undefined, { threads: -2 }), 'batchAsync: options.threads must be a positive integer, got -2');
    await rejectsMsg(c.batchAsync('points'), /^batchAsync: points must be an array/);
    // A vector objective: the call's own message.
    const v = compile((b) => square(b));
    throwsMsg(() => v.batch([[1, 2]]), 'compile: the objective must return a scalar, got [2]. Reduce it with sum() or mean() first.');
    await rejectsMsg(v.async([1, 2]), 'compile: the objective must return a scalar, got [2]. Reduce it with sum() or mean() first.');
  });
});

describe('async calls', () => {
  test('arguments are copied at the call: changing them before the Promise settles changes nothing', async () => {
    const c = compile((b) => sum(mul(square(b), [1, 2, 3])));
    const a = Float64Array.of(1, 2, 3);
    const t = tensor(Float64Array.of(4, 5, 6), [3]);
    const expected = [c(Float64Array.of(1, 2, 3)), c(tensor(Float64Array.of(4, 5, 6), [3]))];
    const pBatch = c.batchAsync([a, t]);
    const pOne = c.async(a);
    const packed = tensor(Float64Array.of(1, 2, 3, 4, 5, 6), [2, 3]);
    const pPacked = c.batchAsync(packed);
    a.fill(100);
    t.data.fill(-100);
    packed.data.fill(7);
    sameBits(await pBatch, expected);
    sameBits(await pOne, expected[0]);
    sameBits((await pPacked).values, Float64Array.of(expected[0].value, expected[1].value));
  });

  test(
    WASM ? "WebAssembly: a batch past its 2^26 values is refused before point 1 is read" : 'a batch of 2^25 values reads its points',
    async () => {
      // 9 points of 2^22 values: 2·9·2^22 + 9 values of parameters and
      // results, past the WebAssembly build's room, within the native one's.
      const width = 2 ** 22;
      const c = compile((x) => sum(square(x)));
      const points = [new Float64Array(width), ...new Array(8).fill('x')];
      const message = WASM
        ? `batch: 9 points of ${width} values are more than a batch holds in the WebAssembly build (67108864 values); split it`
        : 'batch: point 1: parameter must be a number, a non-empty array, or a tensor';
      throwsMsg(() => c.batch(points), message);
      await assert.rejects(c.batchAsync(points), { message: message.replace(/^batch:/, 'batchAsync:') });
    },
  );

  test(WASM ? 'WebAssembly: a Promise settled at the call' : 'the event loop runs while async work does', async () => {
    const c = compile(gp(G, gpData(100)));
    const points = Array.from({ length: 40 }, (_, i) => ({ l: 1 + 0.01 * i, v: 0.9 }));
    c(points[0]);
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    let immediate = false;
    setImmediate(() => (immediate = true));
    const pending = c.batchAsync(points, undefined, { threads: 1 });
    const one = c.async(points[1]);
    assert.equal(immediate, false);
    const r = await pending;
    const ticksAtEnd = ticks;
    clearInterval(timer);
    sameBits(r[1], await one);
    if (WASM) return; // computed at the call, synchronously (README)
    assert.ok(immediate, 'a setImmediate callback ran before the batch resolved');
    assert.ok(ticksAtEnd >= 1, `a 1 ms setInterval ticked ${ticksAtEnd} times during the batch`);
  });

  test('many in flight at once, on one plan and on several', async () => {
    const c = compile(gp(G, gpData(30)));
    const xs = Array.from({ length: 24 }, (_, i) => ({ l: 0.7 + 0.03 * i, v: 1 }));
    c(xs[0]);
    const r = rebuilt(c);
    const expected = xs.map((x) => c(x));
    const got = await Promise.all(xs.map((x, i) => (i % 2 ? c : r).async(x)));
    sameBits(got, expected);
    const batches = await Promise.all([c.batchAsync(xs), r.batchAsync(xs), c.batchAsync(xs.slice(3), undefined, { threads: 2 })]);
    sameBits(batches, [expected, expected, expected.slice(3)]);
  });
});

/** Run an ES module as a child process (same core as this suite); returns its stdout after exit 0. */
function child(code, flags = []) {
  const r = spawnSync(process.execPath, [...flags, '--input-type=module', '-e', code], { cwd: root, encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, `child exited with ${r.status ?? r.signal}\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

describe('lifetimes', () => {
  test('plans collected while their async work runs: no crash, right results', () => {
    const out = child(
      `
      import * as G from ${JSON.stringify(indexUrl)};
      import { gp, gpData } from ${JSON.stringify(new URL('../bench/models.mjs', import.meta.url).href)};
      const f = gp(G, gpData(60));
      const x = { l: 1.1, v: 0.8 };
      const expected = G.compile(f)(x).value;
      const json = G.compile(f); json(x);
      const plan = json.toJSON();
      const pending = [];
      for (let i = 0; i < 30; i++) {
        let c = i % 2 ? G.compile(f) : G.compileFromJSON(plan);
        if (i % 2) c(x);
        pending.push(c.async(x), c.batchAsync([x, x, x]));
        c = null;
        globalThis.gc();
      }
      for (let i = 0; i < 5; i++) { globalThis.gc(); await new Promise((r) => setImmediate(r)); }
      const results = await Promise.all(pending);
      globalThis.gc();
      let ok = 0;
      for (const r of results) for (const one of Array.isArray(r) ? r : [r]) if (Object.is(one.value, expected)) ok++;
      console.log('same', ok, 'of', 30 * 4);
      `,
      ['--expose-gc'],
    );
    assert.match(out, /same 120 of 120/);
  });

  test('a worker terminated in the middle of a batch leaves the process working', () => {
    const out = child(`
      import { Worker } from 'node:worker_threads';
      import * as G from ${JSON.stringify(indexUrl)};
      import { gp, gpData } from ${JSON.stringify(new URL('../bench/models.mjs', import.meta.url).href)};
      const c = G.compile(gp(G, gpData(120)));
      const x = { l: 1.1, v: 0.8 };
      const expected = c(x);
      const plan = c.toJSON();
      const code = \`
        const { parentPort, workerData } = require('node:worker_threads');
        import(workerData.index).then((G) => {
          const f = G.compileFromJSON(workerData.plan);
          const points = Array.from({ length: 400 }, (_, i) => ({ l: 1 + i * 0.001, v: 0.8 }));
          parentPort.postMessage('started');
          if (workerData.mode === 'async') {
            for (let i = 0; i < 8; i++) f.batchAsync(points);
            f.async(points[0]);
          } else {
            for (;;) f.batch(points);
          }
        });
      \`;
      for (const mode of ['sync', 'async', 'sync']) {
        const w = new Worker(code, { eval: true, execArgv: [], workerData: { plan, index: ${JSON.stringify(indexUrl)}, mode } });
        await new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject); });
        await new Promise((r) => setTimeout(r, 30));
        await w.terminate();
      }
      const again = c.batch([x, x]);
      console.log('after', Object.is(again[1].value, expected.value) && Object.is(c(x).value, expected.value));
    `);
    assert.match(out, /after true/);
  });

  test('a plan rebuilt from JSON in a worker batches there, bit-identical to the main thread', () => {
    const out = child(`
      import { Worker } from 'node:worker_threads';
      import * as G from ${JSON.stringify(indexUrl)};
      import { regression, regressionData, regressionParams } from ${JSON.stringify(new URL('../bench/models.mjs', import.meta.url).href)};
      const c = G.compile(regression(G, regressionData()));
      const q = regressionParams();
      const points = Array.from({ length: 40 }, (_, i) => ({ ...q, intercept: q.intercept + 0.01 * i }));
      const expected = points.map((x) => c(x));
      const code = \`
        const { parentPort, workerData } = require('node:worker_threads');
        import(workerData.index).then(async (G) => {
          const f = G.compileFromJSON(workerData.plan);
          parentPort.postMessage({ sync: f.batch(workerData.points), async: await f.batchAsync(workerData.points, undefined, { threads: 2 }) });
        });
      \`;
      const w = new Worker(code, { eval: true, execArgv: [], workerData: { plan: c.toJSON(), points, index: ${JSON.stringify(indexUrl)} } });
      const got = await new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject); });
      await w.terminate();
      const same = (a, b) => JSON.stringify(a, (k, v) => (typeof v === 'number' ? [v].map(String)[0] + '|' + Object.is(v, -0) : v)) === JSON.stringify(b, (k, v) => (typeof v === 'number' ? [v].map(String)[0] + '|' + Object.is(v, -0) : v));
      console.log('worker', same(got.sync, expected), same(got.async, expected));
    `);
    assert.match(out, /worker true true/);
  });
});

describe('examples/ensemble.mjs', () => {
  test('runs (--small): batch and one call per walker agree, and it mixes', () => {
    const r = spawnSync(process.execPath, ['examples/ensemble.mjs', '--small'], { cwd: root, encoding: 'utf8', timeout: 120_000 });
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /same draws both ways: yes/);
    const m = r.stdout.match(/acceptance rate:\s+([0-9.]+)/);
    assert.ok(m && Number(m[1]) > 0.1 && Number(m[1]) < 0.9, r.stdout);
  });
});
