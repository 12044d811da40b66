// Careless and hostile input through the public API (issue 11): each case
// here failed before it was fixed, by a wrong answer, a hang or an abort.
// Under TANGENT_GRAD_WASM=1 the same cases run against the WebAssembly core,
// whose usize is 32 bits: a dimension past 2^32 - 1 is an Error there.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as G from '../index.js';
import { N } from '../src/js/binding.js';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

const wasm = process.env.TANGENT_GRAD_WASM === '1';

/** `fn` finishes within `ms` (generous: the point is that it does not hang). */
function quick(fn, ms = 2000) {
  const t0 = performance.now();
  const out = fn();
  const took = performance.now() - t0;
  assert.ok(took < ms, `took ${took.toFixed(0)} ms`);
  return out;
}

test('a parameter named __proto__ keeps its gradient, eager, compiled and rebuilt', () => {
  const p = JSON.parse('{"__proto__": 3, "b": 2}');
  const f = (q) => G.add(G.square(q['__proto__']), G.mul(q.b, 3));
  const compiled = G.compile(f);
  const rebuilt = G.compileFromJSON((compiled(p), compiled.toJSON()));
  for (const r of [G.valueAndGrad(f)(p), compiled(p), rebuilt(p)]) {
    assert.equal(r.value, 15);
    assert.deepEqual(Object.keys(r.gradient), ['__proto__', 'b']);
    assert.equal(Object.getOwnPropertyDescriptor(r.gradient, '__proto__').value, 6);
    assert.equal(r.gradient.b, 3);
    assert.equal(Object.getPrototypeOf(r.gradient), Object.prototype);
  }
});

test('the captured-array cache sees an edit from 0 to -0', () => {
  const w = new Array(100).fill(0);
  const vg = G.valueAndGrad((x) => G.mul(x, G.sum(G.div(1, w))));
  assert.equal(vg(1).value, Infinity);
  w.fill(-0);
  assert.equal(vg(1).value, -Infinity);
});

test('a slice list of length 2^31 - 1 is an Error before anything is allocated', () => {
  const s = [];
  s.length = 2 ** 31 - 1;
  quick(() => assert.throws(() => G.slice([1, 2, 3], s, [1]), { message: 'slice: start and size need 1 entry for a [3] operand' }));
});

test('the binding revalidates what the JS layer checks: reshape dimensions', () => {
  const t = N.tapeNew();
  try {
    const a = N.tapeLeaf(t, 0, new Float64Array(6), 1, 6, 0);
    for (const [d0, d1] of [[2.9, 2], [-5, 1], [NaN, 1], [2, Infinity]]) {
      assert.throws(() => N.tapeReshape(t, a, 2, d0, d1), { message: 'reshape: shape must be up to two positive integers' });
    }
    assert.throws(() => N.tapeReshape(t, a, 3, 1, 1), { message: 'reshape: shape must be up to two positive integers' });
    assert.deepEqual(N.tapeShape(t, N.tapeReshape(t, a, 2, 2, 3)), [2, 3]);
  } finally {
    N.tapeFree(t);
  }
});

test('dimensions are never cut to 32 bits', () => {
  const z = G.zeros([2 ** 40, 0]);
  if (wasm) {
    assert.throws(() => G.transpose(z), { message: 'shape [1099511627776, 0] is too large' });
  } else {
    assert.deepEqual(G.transpose(z).shape, [0, 2 ** 40]);
    const total = G.compile((x) => G.sum(x));
    const r = total(G.zeros([2 ** 32 + 5, 0]));
    assert.equal(r.value, 0);
    assert.deepEqual(r.gradient.shape, [2 ** 32 + 5, 0]);
    // Its plan rebuilds: compileFromJSON takes the dimensions compile took.
    assert.deepEqual(G.compileFromJSON(JSON.stringify(total.toJSON()))(G.zeros([2 ** 32 + 5, 0])), r);
    assert.deepEqual(G.compileFromJSON(total.toJSON())(G.zeros([2 ** 32 + 5, 0])), r);
  }
});

test('a value with more rows than nested arrays can hold is an Error, not a heap exhausted', () => {
  const f = G.compile((x) => x);
  quick(() => assert.throws(() => f.value(G.zeros([2 ** 31, 0])), { message: 'value of shape [2147483648×0] has too many rows to return as nested arrays' }));
});

test('concat: dimension sums are checked, and empty rows are not walked', () => {
  // Columns that sum past a usize (2^64 natively, 2^32 under WebAssembly).
  const q = wasm ? G.zeros([0, 2 ** 31]) : G.zeros([0, 2 ** 62]);
  const parts = wasm ? [q, q] : [q, q, q, q];
  assert.throws(() => G.concat(parts, { axis: 1 }), { message: 'concat: result is too large' });
  const rows = wasm ? 2 ** 31 : 2 ** 62;
  const z = G.zeros([rows, 0]);
  assert.deepEqual(quick(() => G.concat([z, z], { axis: 1 }).shape), [rows, 0]);
});

test('concat of many parts sweeps back in linear time', () => {
  const n = 40000;
  const xs = Array.from({ length: n }, (_, i) => i / n);
  const vg = G.compile((p) => G.sum(G.mul(G.concat(Array.from({ length: n }, (_, i) => G.slice(p, [i], [1]))), 2)));
  const r = quick(() => vg(xs), 5000);
  assert.equal(r.gradient.length, n);
  assert.ok(r.gradient.every((g) => g === 2));
});

test('arguments are read once per call: a getter that changes another parameter', () => {
  const f = (p) => G.add(G.sum(p.a), G.mul(2, G.sum(p.b)));
  const compiled = G.compile(f);
  compiled({ a: [1, 1], b: [1, 1] });
  const tricky = () => {
    const state = { b: [1, 1] };
    return {
      get a() {
        state.b = [2, 2, 2];
        return [1, 1];
      },
      get b() {
        return state.b;
      },
    };
  };
  const eager = G.valueAndGrad(f)(tricky());
  assert.deepEqual(eager, { value: 14, gradient: { a: [1, 1], b: [2, 2, 2] } });
  assert.deepEqual(compiled(tricky()), eager);
  assert.equal(compiled.value(tricky()), 14);
});

test('a compiled call made from inside a getter of its own arguments', () => {
  const f = G.compile((p) => G.sum(G.mul(p.x, p.y)));
  f({ x: [1, 2], y: [3, 4] });
  let inner = null;
  const outer = f({
    get x() {
      inner = f({ x: [5, 6], y: [7, 8] });
      return [1, 2];
    },
    y: [3, 4],
  });
  assert.deepEqual(inner, { value: 83, gradient: { x: [7, 8], y: [5, 6] } });
  assert.deepEqual(outer, { value: 11, gradient: { x: [3, 4], y: [1, 2] } });
});

test("backward() from inside a hand-built node's backward is a clear Error", () => {
  const x = G.variable([1, 2]);
  const z = G.sum(G.square(x));
  const h = new G.Var([3], [x], (g) => {
    z.backward();
    return [[g[0], g[0]]];
  });
  assert.throws(() => G.sum(h).backward(), { message: "backward() cannot run inside a hand-built node's backward on the same graph" });
  // The graph is usable afterwards.
  z.backward();
  assert.deepEqual([...x.grad], [2, 4]);
});

test('plans released by the memory budget rebuild bit-identically', async () => {
  const { stats } = await import('../src/js/budget.js');
  const X = Array.from({ length: 200 }, (_, i) => Array.from({ length: 50 }, (_, j) => Math.sin(i * 50 + j)));
  const p = Array.from({ length: 50 }, (_, j) => Math.cos(j));
  const f0 = G.compile((q) => G.sum(G.tanh(G.matmul(X, q))));
  const first = f0(p);
  const plan = JSON.stringify(f0.toJSON());
  const released = stats.released;
  for (let i = 0; i < 1000; i++) G.compile((q) => G.sum(G.matmul(X, q)))(p);
  assert.ok(stats.released > released, 'the budget released no plan');
  assert.deepEqual(f0(p), first);
  assert.equal(JSON.stringify(f0.toJSON()), plan);
});

test("a dropped compiled function's large plans are freed once V8 collects it; those still held are not", async () => {
  const { stats } = await import('../src/js/budget.js');
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc');
  const n = 300;
  const A = G.tensor(Float64Array.from({ length: n * n }, (_, k) => Math.cos((k % n) - Math.floor(k / n))), [n, n]);
  // Several n×n values: its plan holds well over the 1 MB from which a collected owner's plan is freed at once.
  const make = () => {
    const c = G.compile((p) => G.logdetPSD(G.addDiag(G.mul(p, G.matmul(A, G.transpose(A))), 1)));
    const first = c(0.5);
    c.hessian(0.5);
    return { c, first };
  };
  const kept = make();
  const before = stats.releasedCollected;
  for (let i = 0; i < 3; i++) make();
  for (let turn = 0; turn < 20 && stats.releasedCollected < before + 6; turn++) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  // Each dropped function's plan and its Hessian's tangent plan.
  assert.ok(stats.releasedCollected >= before + 6, `released ${stats.releasedCollected - before} of the 6 dropped plans`);
  assert.deepEqual(kept.c(0.5), kept.first);
  assert.deepEqual(kept.c.hessian(0.5), make().c.hessian(0.5));
});

// Without gc(): the plans' bytes are told to V8 (napi_adjust_external_memory),
// which collects for them. Untold, V8's heap stayed small, nothing was
// collected, and 128 dropped GP plans at n = 400 held +292 MB.
test('a loop that drops large plans and yields has them collected and freed', async () => {
  const { stats } = await import('../src/js/budget.js');
  const n = 300;
  const A = G.tensor(Float64Array.from({ length: n * n }, (_, k) => Math.exp(-(((k % n) - Math.floor(k / n)) ** 2) / 50)), [n, n]);
  const before = stats.releasedCollected;
  for (let i = 0; i < 96; i++) {
    G.compile((p) => G.logdetPSD(G.addDiag(G.mul(p, A), 1)))(0.5);
    await new Promise((resolve) => setImmediate(resolve));
  }
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.ok(stats.releasedCollected - before >= 48, `only ${stats.releasedCollected - before} of 96 dropped plans were freed as collected`);
});

// A batch in flight holds its own replicas: the budget freeing the plan and
// its pool meanwhile (src/js/budget.js, release) changes nothing it returns.
test('a plan the budget releases while its batchAsync runs: the call settles with the same results', async () => {
  const { stats } = await import('../src/js/budget.js');
  const X = Array.from({ length: 200 }, (_, i) => Array.from({ length: 50 }, (_, j) => Math.sin(i * 50 + j)));
  const f = G.compile((q) => G.sum(G.tanh(G.matmul(X, q))));
  // Long enough (~200 ms here) to be running while the loop below releases f's plan.
  const points = Array.from({ length: 16000 }, (_, k) => Array.from({ length: 50 }, (_, j) => Math.cos(k + j)));
  const expected = f.batch(points);
  const pending = f.batchAsync(points);
  const released = stats.released;
  for (let i = 0; i < 1000; i++) G.compile((q) => G.sum(G.matmul(X, q)))(points[0]);
  assert.ok(stats.released > released, 'the budget released no plan');
  assert.deepEqual(await pending, expected);
  assert.deepEqual(await f.batchAsync(points), expected);
});

test('a sparse nodes array of length 2^27 is an Error at once, not a stringify of 2^27 nulls', () => {
  const nodes = [{ kind: 'param', shape: [] }];
  nodes.length = 2 ** 27;
  quick(() => assert.throws(() => G.compileFromJSON({ version: 2, nodes, root: 0 }), { message: 'compileFromJSON: node 1: expected an object, got null' }));
});

test('a long sparse array anywhere in a plan object is an Error at once (JSON.stringify of one crashed Node 20)', () => {
  // Up to 2^32 - 1, the longest an array gets: room for one of those was
  // once asked before its first hole was seen, a RangeError.
  for (const length of [2 ** 27, 4e9, 2 ** 32 - 1]) {
    const sparse = () => new Array(length);
    const plan = () => ({ version: 2, input: 'single', nodes: [{ kind: 'param', shape: [] }, { kind: 'op', op: 'square', parents: [0] }], root: 1 });
    const edits = [(p) => (p.extra = sparse()), (p) => (p.nodes[1].parents = sparse()), (p) => (p.nodes[0].shape = sparse()), (p) => p.nodes.push({ kind: 'const', shape: [2], data: sparse() })];
    for (const edit of edits) {
      const p = plan();
      edit(p);
      quick(() => assert.throws(() => G.compileFromJSON(p), { message: `compileFromJSON: not a serialized plan (an array of length ${length} with holes)` }));
    }
  }
});

test('shapes are checked before anything is copied: sparse shape arrays, string entries', () => {
  const s = [];
  s.length = 2 ** 28;
  quick(() => assert.throws(() => G.zeros(s), { message: 'zeros: shape must be up to two non-negative integers' }));
  quick(() => assert.throws(() => G.tensor(new Float64Array(1), s), { message: 'tensor: shape must be up to two non-negative integers' }));
  const odd = { data: new Float64Array(2), shape: ['2'] };
  assert.throws(() => G.exp(odd), { message: 'value has shape [2]; a shape is up to two non-negative integers' });
  assert.throws(() => G.exp({ data: new Float64Array(3), shape: [2] }), { message: 'data length 3 does not match shape [2]' });
});

test('an operand that is a huge sparse array is refused before it is allocated', () => {
  const x = [];
  x.length = 2 ** 32 - 1;
  quick(() => assert.throws(() => G.exp(x), { message: 'value of shape [4294967295] is too large' }));
  assert.throws(() => G.exp([1, 'x']), { message: 'value must be a number, an array of numbers, or an array of rows' });
});

test('concat: a sparse list of parts is refused at once', () => {
  const parts = [1];
  parts.length = 2 ** 31 - 1;
  quick(() => assert.throws(() => G.concat(parts), { message: 'concat: at most 16777216 parts, got 2147483647' }));
  assert.throws(() => G.concat([1, , 2]), { message: 'concat: part 1 is missing' });
});

test('compile tells keys apart that print alike: {a, b} and {"a:s,b"}', () => {
  const f = G.compile((p) => Object.keys(p).reduce((s, k) => G.add(s, p[k]), 0));
  assert.deepEqual(f({ a: 1, b: 2 }), { value: 3, gradient: { a: 1, b: 1 } });
  assert.deepEqual(f({ 'a:s,b': 1 }), { value: 1, gradient: { 'a:s,b': 1 } });
  const rebuilt = G.compileFromJSON((f({ a: 1, b: 2 }), f.toJSON()));
  assert.throws(() => rebuilt({ 'a:s,b': 1 }), /this plan was built for arguments shaped/);
});

test('a [m×0] value with a million rows or more is an Error, not seconds of empty arrays', () => {
  const f = G.compile((x) => x);
  assert.deepEqual(f.value(G.zeros([3, 0])), [[], [], []]);
  quick(() => assert.throws(() => f.value(G.zeros([2 ** 24, 0])), { message: 'value of shape [16777216×0] has too many rows to return as nested arrays' }));
});

test('the internal binding holds no buffer while an accessor on its lists runs', () => {
  const f = G.compile((p) => G.sum(G.mul(p.a, p.b)));
  f({ a: [1, 2], b: G.tensor(new Float64Array([3, 4]), [2]) });
  const plan = N.planFromJson(JSON.stringify(f.toJSON()));
  const flat = new Float64Array([1, 2]);
  const view = new Float64Array([3, 4]);
  const data = [flat, new Int32Array([0, -1])];
  // Fetching the view detaches the flat buffer, which must have been read and let go by then.
  Object.defineProperty(data, 2, {
    enumerable: true,
    get() {
      structuredClone(flat.buffer, { transfer: [flat.buffer] });
      return view;
    },
  });
  const grads = [new Float64Array(2), new Int32Array([0, -1]), new Float64Array(2)];
  assert.equal(N.planRun(plan, data, grads), 11);
  assert.equal(flat.byteLength, 0);
  assert.deepEqual([...grads[0], ...grads[2]], [3, 4, 1, 2]);
});

test("pow's message stays short and never fails to print its exponent", () => {
  const k = [];
  k.length = 2 ** 28;
  quick(() => assert.throws(() => G.pow(2, k), { message: 'pow: exponent must be a finite number; got an array of length 268435456' }));
  assert.throws(() => G.pow(2, Object.create(null)), { message: 'pow: exponent must be a finite number; got an object' });
  assert.throws(() => G.pow(2, Symbol('s')), { message: 'pow: exponent must be a finite number; got Symbol(s)' });
  assert.throws(() => G.pow(2, [3]), { message: 'pow: exponent must be a finite number; got 3' });
});

// A short typed array is copied into the plan's buffer (src/js/replay.js):
// its real length is what counts, whatever a subclass's getter says.
test('a Float64Array whose length getter lies is read by its own length, in every entry point', () => {
  class Lying extends Float64Array {
    get length() {
      return 3;
    }
  }
  const f = (p) => G.add(G.sum(G.square(G.solveGeneral([[3, 1, 0.5], [0.2, 2.5, 1], [0.1, 0.3, 4]], p.b))), G.mul(100, p.t));
  const c = G.compile(f);
  const rebuilt = G.compileFromJSON((c({ t: 1, b: [1, 2, 3] }), c.toJSON()));
  // Its first two entries, not a third one left from an earlier call or zero.
  c.jvp({ t: 1, b: [1, 2, 99] }, { t: 1, b: [0, 0, 0] });
  c.batch([{ t: 1, b: [1, 2, 99] }]);
  const x = () => ({ t: 1, b: new Lying([1, 2]) });
  const shaped = /solveGeneral: \[3×3\] cannot be applied to \[2\]/;
  for (const call of [() => c(x()), () => c.value(x()), () => c.jvp(x(), { t: 1, b: [0, 0] }), () => c.hvp(x(), { t: 1, b: [0, 0] })]) {
    assert.throws(call, shaped);
  }
  for (const call of [() => c.hessian(x()), () => c.jacobian(x()), () => G.valueAndGrad(f)(x()), () => G.hessian(f)(x())]) assert.throws(call, shaped);
  assert.throws(() => c.batch([x()]), /^Error: batch: point 0: solveGeneral/);
  assert.throws(() => rebuilt(x()), /built for arguments shaped b:v3,t:s, got b:v2,t:s/);
  const g = G.compile((a) => G.sum(G.square(a)));
  assert.deepEqual(g(new Lying([1, 2, 3, 50])), g(Float64Array.of(1, 2, 3, 50)));
  assert.deepEqual(g.batch([new Lying([1, 2, 3, 50])]), [g(Float64Array.of(1, 2, 3, 50))]);
});

test('a tensor whose shape entries change as they are read: its shape as read once', () => {
  let reads = 0;
  const shape = [3];
  Object.defineProperty(shape, 0, { enumerable: true, get: () => (reads++ < 1 ? 3 : 0) });
  const f = (p) => G.add(G.sum(G.square(p.w)), G.square(p.s));
  const expected = G.valueAndGrad(f)({ w: [1, 2, 3], s: 1.5 });
  reads = 0;
  const got = G.valueAndGrad(f)({ w: { data: Float64Array.of(1, 2, 3), shape }, s: 1.5 });
  assert.equal(got.value, expected.value);
  assert.equal(got.gradient.s, expected.gradient.s);
  assert.deepEqual(Array.from(got.gradient.w.data), expected.gradient.w);
});

test('batch, batchAsync and async read each point once: a getter that answers differently later changes nothing', async () => {
  const f = (p) => G.add(G.sum(G.square(p.a)), G.mul(3, p.s));
  const good = { a: [0.5, 1.5], s: 0.25 };
  const alternating = () => {
    let k = 0;
    const x = { a: [0.5, 1.5], s: 0 };
    // A vector first (the fast path for maps declines it), then the number, then the vector…
    Object.defineProperty(x, 's', { enumerable: true, get: () => (k++ % 2 === 0 ? [7, 8] : 0.25) });
    return x;
  };
  const compiled = G.compile(f);
  compiled(good);
  for (const c of [compiled, G.compileFromJSON(compiled.toJSON())]) {
    const expected = c(good);
    const late = { a: [0.5, 1.5] };
    let reads = 0;
    Object.defineProperty(late, 's', { enumerable: true, get: () => (reads++ === 0 ? 0.25 : [7, 8]) });
    assert.deepEqual(await c.async(late), expected);
    assert.deepEqual(c.batch([good, alternating()]), [expected, expected]);
    assert.deepEqual(await c.batchAsync([good, alternating()]), [expected, expected]);
  }
});

test(".grad read from a hand-built node's backward: what the sweep has so far, and the final adjoint after it", () => {
  const x = G.variable([1, 2, 3]);
  let inside = null;
  const h = new G.Var({ data: Float64Array.from(x.data), shape: [3] }, [x], (g) => {
    inside = Array.from(x.grad);
    return [g];
  });
  G.add(G.sum(G.square(x)), G.sum(h), G.sum(G.mul(3, x))).backward();
  assert.deepEqual(Array.from(x.grad), [6, 8, 10]);
  assert.equal(inside.length, 3);
  // A large adjoint (first written by its writer, not zeroed at the sweep's
  // start) read before anything wrote it this sweep: zeros, not the last sweep's.
  const n = 100;
  const y = G.variable(Array.from({ length: n }, (_, i) => i / n));
  const w = G.exp(y);
  G.sum(G.mul(1e6, w)).backward();
  assert.equal(w.grad[0], 1e6);
  let early = null;
  const k = new G.Var({ data: Float64Array.from(y.data), shape: [n] }, [y], (g) => {
    early = w.grad[0];
    return [g];
  });
  G.add(G.sum(k), G.sum(w)).backward();
  assert.equal(early, 0);
  assert.equal(w.grad[0], 1);
  assert.equal(y.grad[0], 2);
});

test('tensor: an iterable is read no further than its shape, and a huge shape allocates nothing first', () => {
  const ones = function* () {
    for (;;) yield 1;
  };
  quick(() => assert.throws(() => G.tensor(ones(), [2]), { message: 'data length over 2 does not match shape [2]' }));
  quick(() => assert.throws(() => G.tensor(new Set([1, 2, 3]), [16384, 16384]), { message: 'data length 3 does not match shape [16384×16384]' }));
  quick(() => assert.throws(() => G.tensor(ones(), [2 ** 29]), { message: 'tensor: shape [536870912] holds more than 268435456 values' }));
  // Any data, not only an iterable: an array-like of length 2^29 was read whole (33 s, 12 GB).
  quick(() => assert.throws(() => G.tensor({ length: 2 ** 29 }, [32768, 16384]), { message: 'tensor: shape [32768×16384] holds more than 268435456 values' }));
  quick(() => assert.throws(() => G.tensor(new Array(2 ** 29), [2 ** 29]), { message: 'tensor: shape [536870912] holds more than 268435456 values' }));
  // A length that answers otherwise once copied: never a tensor whose data disagrees with its shape.
  let asked = 0;
  const shifty = { get length() { return asked++ === 0 ? 4 : 2; }, 0: 1, 1: 2, 2: 3, 3: 4 };
  assert.throws(() => G.tensor(shifty, [4]), { message: 'data length 2 does not match shape [4]' });
});

test('zeros and eye refuse what no value can hold before allocating it', () => {
  // zeros([32768, 16384]) made 4 GB that every op then refused.
  quick(() => assert.throws(() => G.zeros([32768, 16384]), { message: 'zeros: shape [32768×16384] holds more than 268435456 values' }));
  quick(() => assert.throws(() => G.eye(16385), { message: 'eye: shape [16385×16385] holds more than 268435456 values' }));
  assert.deepEqual(G.zeros([2, 0]), { data: new Float64Array(0), shape: [2, 0] });
});

test('two copies of the package sharing one loaded addon in a thread each get their own results', async () => {
  // A second copy of the JavaScript whose addon is the same file (hard-linked
  // installs, a test runner's second module registry): both copies bind the
  // thread's queue and select plans in the one addon. Under WebAssembly each
  // copy has a core of its own.
  const { cpSync, mkdtempSync, readdirSync, rmSync, symlinkSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const root = new URL('..', import.meta.url).pathname;
  const dir = mkdtempSync(join(tmpdir(), 'grad-copy-'));
  try {
    for (const f of ['index.js', 'package.json', 'binding.cjs']) cpSync(join(root, f), join(dir, f));
    cpSync(join(root, 'src/js'), join(dir, 'src/js'), { recursive: true });
    for (const f of readdirSync(root).filter((f) => /^grad\..+\.node$/.test(f))) symlinkSync(join(root, f), join(dir, f));
    const H = await import(join(dir, 'index.js'));
    assert.notEqual(H.compile, G.compile);
    const fa = G.compile((x) => G.mul(x, x));
    const fb = H.compile((x) => H.exp(x));
    const ga = G.valueAndGrad((x) => G.sum(G.mul(x, x)));
    const gb = H.valueAndGrad((x) => H.sum(H.exp(x)));
    for (let round = 0; round < 3; round++) {
      assert.deepEqual(fa(3), { value: 9, gradient: 6 });
      assert.deepEqual(fb(0), { value: 1, gradient: 1 });
      assert.equal(fa.value(4), 16);
      assert.deepEqual(ga([3, 4]), { value: 25, gradient: [6, 8] });
      assert.deepEqual(gb([0, 0]), { value: 2, gradient: [1, 1] });
      assert.equal(fb.value(0), 1);
      assert.deepEqual(fa.hessian(5).hessian, [[2]]);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a Proxy around a Float64Array is not taken for one, whose length trap could size a copy', () => {
  const W = G.tensor(Float64Array.from({ length: 400 }, (_, i) => i % 7), [20, 20]);
  const other = G.compile((p) => G.sum(G.matmul(W, p)));
  const x = { data: new Float64Array(20).fill(1), shape: [20, 1] };
  const before = other(x).value;
  const f = G.compile((p) => G.sum(G.square(p)));
  f({ data: new Float64Array(8).fill(1), shape: [8] });
  // Its length trap claims 1 000 values where the array holds 8: nothing may be copied by that claim.
  const claims = (n) => new Proxy(new Float64Array(8), { get: (t, k) => (k === 'length' ? n : /^\d+$/.test(k) ? 0.5 : Reflect.get(t, k)) });
  assert.throws(() => f({ data: claims(1000), shape: [8] }), /must be a number, a non-empty array, or a tensor/);
  assert.throws(() => f.batch({ data: claims(1000), shape: [1, 8] }), /points must be an array of parameter values, or a \[k, n\] tensor/);
  assert.equal(other(x).value, before);
  assert.equal(other.batch([x])[0].value, before);
  // As a parameter itself, or inside a map, it is refused, as any object that is not an array.
  const g = G.compile((p) => G.sum(G.square(p)));
  assert.throws(() => g(claims(8)), /must be a number, a non-empty array, or a tensor/);
  assert.throws(() => G.valueAndGrad((p) => G.sum(G.square(p.a)))({ a: claims(8) }), /must be a number, a non-empty array, or a tensor/);
});

test('a packed batch is sized by the Float64Array itself, whatever its length property says later', async () => {
  const f = G.compile((p) => G.sum(G.square(p)));
  const k = 1000;
  const n = 4;
  for (const call of [(b) => f.batch(b), (b) => f.batchAsync(b)]) {
    const data = new Float64Array(k * n).fill(1);
    let reads = 0;
    Object.defineProperty(data, 'length', { get: () => (reads++ === 0 ? k * n : 0) });
    const r = await call({ data, shape: [k, n] });
    assert.equal(r.values.length, k);
    assert.ok(r.values.every((v) => v === 4));
    assert.equal(r.gradients.data.length, k * n);
    assert.ok(r.gradients.data.every((v) => v === 2));
  }
});

test('a compiled function whose own buffers a patched built-in detached is an Error, not a read of freed memory', () => {
  const n = 300000;
  const f = G.compile((p) => G.add(G.mul(p.a, p.a), G.sum(G.square(p.b))));
  f({ a: 1, b: new Array(n).fill(1) });
  const set = Float64Array.prototype.set;
  let bound = null;
  Float64Array.prototype.set = function (...a) {
    if (this.length === n + 1) bound ??= this;
    return set.apply(this, a);
  };
  try {
    f({ a: 2, b: new Float64Array(n).fill(2) });
  } finally {
    Float64Array.prototype.set = set;
  }
  assert.ok(bound !== null, 'the patch saw the bound buffer');
  structuredClone(bound.buffer, { transfer: [bound.buffer] });
  assert.throws(() => f({ a: 3, b: new Array(n).fill(3) }), /own buffers were detached/);
});

test('a compiled .jacobian re-entered from a getter of its inputs keeps its own answer, whichever read fires it', () => {
  // x₀ = 0 makes log(x₀)'s forward entry infinite, so the reverse rows run after the forward pass.
  const c = G.compile((p, d) => G.concat([G.mul(p, G.sum(d.s)), G.log(p)]));
  const outer = JSON.stringify(c.jacobian([0, 2], { s: [1] }));
  const inner = JSON.stringify(c.jacobian([5, 7], { s: [1] }));
  assert.equal(outer, JSON.stringify([[1, 0], [0, 1], [null, 0], [0, 0.5]]));
  let fired = 0;
  for (let at = 0; at < 30; at++) {
    let reads = 0;
    let got = null;
    const s = new Proxy([1], {
      get(t, k, r) {
        if (k === '0' && got === null && reads++ === at) got = JSON.stringify(c.jacobian([5, 7], { s: [1] }));
        return Reflect.get(t, k, r);
      },
    });
    assert.equal(JSON.stringify(c.jacobian([0, 2], { s })), outer, `fired at read ${at}`);
    if (got === null) break;
    assert.equal(got, inner);
    fired++;
  }
  assert.ok(fired >= 2, `the getter fired ${fired} times`);
});

test("the eager queue's buffer detached by a patched built-in is an Error, and the next evaluation is right", () => {
  const vg = G.valueAndGrad((m) => G.sum(G.mul(m, m)));
  const m = [Float64Array.from([1, 2]), Float64Array.from([3, 4])];
  vg(m);
  const set = Float64Array.prototype.set;
  let grabbed = null;
  Float64Array.prototype.set = function (...a) {
    if (this.length === 1024) grabbed ??= this; // the queue's numbers
    return set.apply(this, a);
  };
  try {
    vg(m);
  } finally {
    Float64Array.prototype.set = set;
  }
  assert.ok(grabbed !== null, 'the patch saw the queue');
  structuredClone(grabbed.buffer, { transfer: [grabbed.buffer] });
  const s = G.valueAndGrad((x) => G.add(G.mul(x, 7), G.square(G.tanh(x))));
  assert.throws(() => s(5), /own buffers were detached/);
  for (let x = 5; x < 9; x++) {
    const junk = Array.from({ length: 50 }, () => new Float64Array(1024).fill(1e300)); // reuse of freed memory
    assert.equal(s(x).value, 7 * x + Math.tanh(x) ** 2);
    assert.equal(junk.length, 50);
  }
});

test("a row whose own length property lies is laid out by the length it was sized by", () => {
  const row = (a, lie) => {
    const r = Float64Array.from(a);
    if (lie !== undefined) Object.defineProperty(r, 'length', { value: lie });
    return r;
  };
  const f = (m) => G.sum(G.mul(m, [[1, 10], [100, 1000]]));
  const lying = () => [row([1, 2], 1), row([3, 4])];
  assert.equal(G.valueAndGrad(f)(lying()).value, 4321);
  const c = G.compile(f);
  c([row([1, 2]), row([3, 4])]);
  assert.equal(c(lying()).value, 4321);
});

test("a Float64Array of another realm is a Float64Array", () => {
  const other = runInNewContext('new Float64Array([1, 2, 3])');
  assert.ok(!(other instanceof Float64Array));
  const f = (x) => G.sum(G.square(x));
  assert.deepEqual(G.valueAndGrad(f)(other), { value: 14, gradient: [2, 4, 6] });
  assert.deepEqual(G.compile(f)(other), G.valueAndGrad(f)([1, 2, 3]));
});
