// The sampler's call, a {name: value} map of numbers and flat arrays, with
// inputs of any form or none, takes a shorter path through a compiled plan
// (src/js/mapcall.js).
// Every call here is checked against valueAndGrad (Object.is on each number)
// and against the general path the same plan takes for other forms.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as G from '../index.js';

const { add, mul, sub, exp, square, sum, tanh } = G;

/** A model with scalars and a vector: ~20 ops. */
const model = (p) =>
  sub(add(mul(-0.5, square(p.mu)), tanh(p.logTau)), mul(0.5, sum(square(sub(p.eta, mul(exp(p.logTau), p.mu))))));

/** Object.is on every number of two { value, gradient } results, and the same key order. */
function same(a, b) {
  assert.ok(Object.is(a.value, b.value), `${a.value} vs ${b.value}`);
  assert.deepEqual(Object.keys(a.gradient), Object.keys(b.gradient));
  for (const k of Object.keys(b.gradient)) {
    const [x, y] = [a.gradient[k], b.gradient[k]];
    if (typeof y === 'number') assert.ok(Object.is(x, y), `${k}: ${x} vs ${y}`);
    else {
      assert.ok(Array.isArray(x) && x.length === y.length, k);
      y.forEach((v, i) => assert.ok(Object.is(x[i], v), `${k}[${i}]`));
    }
  }
}

/** A gradient entry's numbers: a number, an array or a Float64Array. */
const nums = (v) => (typeof v === 'number' ? [v] : Array.from(v));

const point = (s) => ({ mu: 0.3 * s, logTau: -0.2 + 0.1 * s, eta: [0.5 * s, -1, 2 - s] });

test('maps of numbers and arrays: bit-identical to valueAndGrad, over many points', () => {
  const eager = G.valueAndGrad(model);
  const compiled = G.compile(model);
  const rebuilt = G.compileFromJSON((compiled(point(0)), compiled.toJSON()));
  for (let s = 0; s < 50; s++) {
    const want = eager(point(s));
    same(compiled(point(s)), want);
    same(rebuilt(point(s)), want);
  }
});

test("the gradient's keys come in the caller's order, whatever the traced one", () => {
  const compiled = G.compile(model);
  compiled(point(1));
  const p = point(2);
  const reordered = { eta: p.eta, logTau: p.logTau, mu: p.mu };
  const r = compiled(reordered);
  assert.deepEqual(Object.keys(r.gradient), ['eta', 'logTau', 'mu']);
  same(r, G.valueAndGrad(model)(reordered));
  // And back in the traced order, from a fresh object each time.
  assert.deepEqual(Object.keys(compiled(point(3)).gradient), ['mu', 'logTau', 'eta']);
  assert.notEqual(compiled(point(3)).gradient, compiled(point(3)).gradient);
});

test('gradients are fresh objects and arrays the caller may keep and change', () => {
  const compiled = G.compile(model);
  const a = compiled(point(1));
  const kept = structuredClone(a);
  a.gradient.eta[0] = 99;
  a.gradient.mu = 99;
  same(compiled(point(1)), kept);
});

test('each parameter is read once, and other forms of the same shapes agree', () => {
  const compiled = G.compile(model);
  compiled(point(1));
  const reads = { mu: 0, logTau: 0, eta: 0 };
  const p = point(4);
  const counted = {
    get mu() { reads.mu++; return p.mu; },
    get logTau() { reads.logTau++; return p.logTau; },
    get eta() { reads.eta++; return p.eta; },
  };
  const want = G.valueAndGrad(model)(p);
  same(compiled(counted), want);
  assert.deepEqual(reads, { mu: 1, logTau: 1, eta: 1 });
  // eta as a Float64Array takes this path too, as a tensor the general
  // one: the same numbers, and each gradient in its parameter's form.
  const typed = compiled({ ...p, eta: Float64Array.from(p.eta) });
  same(typed, want);
  const tensor = compiled({ ...p, eta: G.tensor(Float64Array.from(p.eta), [3]) });
  assert.ok(Object.is(tensor.value, want.value));
  assert.deepEqual([...tensor.gradient.eta.data], want.gradient.eta);
});

test('a Float64Array of another length takes the general path: a second trace', () => {
  const compiled = G.compile(model);
  compiled(point(1));
  const rebuilt = G.compileFromJSON(compiled.toJSON());
  const longer = { mu: 1, logTau: 0, eta: Float64Array.of(1, 2, 3, 4) };
  same(compiled(longer), G.valueAndGrad(model)({ ...longer, eta: [1, 2, 3, 4] }));
  assert.throws(() => rebuilt(longer), /compileFromJSON: this plan was built for arguments shaped/);
});

test('maps that do not fit take the general path and its errors', () => {
  const compiled = G.compile(model);
  compiled(point(1));
  // Another shape: a second trace, then both signatures work.
  const longer = { mu: 1, logTau: 0, eta: [1, 2, 3, 4] };
  same(compiled(longer), G.valueAndGrad(model)(longer));
  same(compiled(point(2)), G.valueAndGrad(model)(point(2)));
  // A value that is not a number, a missing key, an extra key.
  // The same error as a first call (a trace) gives.
  const bad = { mu: 1, logTau: 0, eta: [1, 'x', 3] };
  let first;
  assert.throws(() => G.compile(model)(bad), (e) => (first = e.message) !== undefined);
  assert.throws(() => compiled(bad), { message: first });
  const rebuilt = G.compileFromJSON(compiled.toJSON());
  assert.throws(() => rebuilt({ mu: 1, logTau: 0 }), /compileFromJSON: this plan was built for arguments shaped/);
  assert.throws(() => rebuilt({ mu: 1, logTau: 0, eta: [1, 2, 3], extra: 1 }), /compileFromJSON: this plan was built for arguments shaped/);
});

/** A regression's log likelihood with its data as inputs: X [n, 3], y [n], a scalar scale s. */
const withData = (p, d) => mul(d.s, sum(square(sub(d.y, add(G.matmul(d.X, p.beta), p.b)))));
const dataOf = (n, shift = 0) => {
  const X = Array.from({ length: n }, (_, i) => [Math.sin(i + shift), Math.cos(2 * i), (i % 5) - 2]);
  const y = X.map((r, i) => r[0] - 0.5 * r[2] + 0.1 * i);
  return { X, y, s: -0.5 };
};
/** The same data in every form an input takes. */
const formsOf = (d) => {
  const n = d.y.length;
  const flat = Float64Array.from(d.X.flat());
  return {
    nested: d,
    rowsOfTyped: { ...d, X: d.X.map((r) => Float64Array.from(r)) },
    typed: { X: G.tensor(flat, [n, 3]), y: Float64Array.from(d.y), s: d.s },
    tensors: { X: G.tensor(flat, [n, 3]), y: G.tensor(Float64Array.from(d.y), [n]), s: G.tensor(Float64Array.of(d.s), []) },
    reordered: { s: d.s, y: d.y, X: d.X },
  };
};
const at = { b: 0.2, beta: [0.5, -0.1, 0.3] };

test('inputs in every form: bit-identical to valueAndGrad, compiled and rebuilt', () => {
  // 400 rows: X's 1 200 values pass the 1 024 the general path copies.
  for (const n of [7, 400]) {
    const eager = G.valueAndGrad(withData);
    const compiled = G.compile(withData);
    compiled(at, dataOf(n));
    const rebuilt = G.compileFromJSON(compiled.toJSON());
    for (let shift = 0; shift < 3; shift++) {
      const d = dataOf(n, shift);
      const want = eager(at, d);
      for (const [form, ins] of Object.entries(formsOf(d))) {
        for (const f of [compiled, rebuilt]) {
          const r = f(at, ins);
          assert.ok(Object.is(r.value, want.value), `${form}: ${r.value} vs ${want.value}`);
          same(r, want);
        }
      }
    }
  }
});

test('inputs are read anew at each call: a changed array, in place, changes the result', () => {
  const compiled = G.compile(withData);
  const d = dataOf(400);
  const typed = formsOf(d).typed;
  const before = compiled(at, typed);
  typed.X.data[5] += 1;
  typed.y[3] -= 2;
  d.X[1][2] += 1;
  d.y[3] -= 2;
  const after = compiled(at, typed);
  assert.ok(!Object.is(after.value, before.value));
  same(after, G.valueAndGrad(withData)(at, d));
  // Each input read once, through getters.
  const reads = { X: 0, y: 0, s: 0 };
  const counted = {
    get X() { reads.X++; return typed.X; },
    get y() { reads.y++; return typed.y; },
    get s() { reads.s++; return d.s; },
  };
  same(compiled(at, counted), after);
  assert.deepEqual(reads, { X: 1, y: 1, s: 1 });
});

test('inputs that do not fit take the general path: a new trace, or its error', () => {
  const compiled = G.compile(withData);
  compiled(at, dataOf(7));
  const rebuilt = G.compileFromJSON(compiled.toJSON());
  // Another number of rows: a second trace; the rebuilt plan refuses it.
  same(compiled(at, dataOf(9)), G.valueAndGrad(withData)(at, dataOf(9)));
  assert.throws(() => rebuilt(at, dataOf(9)), /compileFromJSON: this plan was built for arguments shaped/);
  // An extra input: another signature, so a trace of its own.
  const d = dataOf(7);
  same(compiled(at, { ...d, extra: 1 }), G.valueAndGrad(withData)(at, d));
  // A tensor whose shape is another with as many values, a ragged row, a
  // string, a missing input: the errors a first call gives.
  const cases = [
    { ...d, X: G.tensor(Float64Array.from(d.X.flat()), [3, 7]) },
    { ...d, X: [...d.X.slice(0, 6), [1, 2]] },
    { ...d, y: [...d.y.slice(0, 6), 'x'] },
    { X: d.X, y: d.y },
  ];
  for (const ins of cases) {
    let first;
    assert.throws(() => G.compile(withData)(at, ins), (e) => (first = e.message) !== undefined);
    assert.throws(() => compiled(at, ins), { message: first });
  }
  // And the plan still answers as before.
  same(compiled(at, dataOf(7)), G.valueAndGrad(withData)(at, dataOf(7)));
});

test('a call re-entered from a Proxy trap on an input or a parameter gives its own result', () => {
  const f = G.compile(({ a }, { y }) => mul(a, sum(y)));
  f({ a: 2 }, { y: [1, 2] });
  // A Proxy's trap on the array's length calls f again at other
  // arguments: the outer call must not read the inner's.
  const reentrant = (target) => {
    let armed = true;
    const inner = [];
    const proxy = new Proxy(target, {
      get(t, k, r) {
        if (armed && k === 'length') {
          armed = false;
          inner.push(f({ a: 100 }, { y: [1, 1] }));
        }
        return Reflect.get(t, k, r);
      },
    });
    return { proxy, inner };
  };
  const y = reentrant([1, 1]);
  same(f({ a: 2 }, { y: y.proxy }), { value: 4, gradient: { a: 2 } });
  same(y.inner[0], { value: 200, gradient: { a: 2 } });
  const g = G.compile((p) => mul(p.a, sum(p.b)));
  g({ a: 2, b: [1, 2] });
  const b = reentrant([1, 1]);
  let inner;
  const outer = g({ a: 2, get b() { inner = g({ a: 100, b: [5, 5] }); return b.proxy; } });
  same(outer, { value: 4, gradient: { a: 2, b: [2, 2] } });
  same(inner, { value: 1000, gradient: { a: 10, b: [100, 100] } });
});

test('re-entered on the general path too (a trap on a vector\'s length or entries): each call its own result', () => {
  const f = (p) => sum(mul(p.a, p.b));
  const compiled = G.compile(f);
  compiled({ a: 1, b: [1, 2] });
  for (const c of [compiled, G.compileFromJSON(compiled.toJSON())]) {
    // A trap that calls c again while the outer call writes its arguments.
    const inner = [];
    const b = () => new Proxy([3, 4], { get(t, k, r) { if (k === 'length') inner.push(c.value({ a: 100, b: [100, 100] })); return Reflect.get(t, k, r); } });
    assert.ok(Object.is(c.value({ a: 2, b: b() }), 14));
    same(c({ a: 2, b: b() }), { value: 14, gradient: { a: 7, b: [2, 2] } });
    assert.ok(inner.length > 0 && inner.every((v) => v === 20000));
  }
  const single = G.compile((b) => sum(mul(b, b)));
  single([1, 2]);
  const entries = new Proxy([3, 4], { get(t, k, r) { if (k === '0') single([9, 9]); return Reflect.get(t, k, r); } });
  same({ value: single(entries).value, gradient: { b: single(entries).gradient } }, { value: 25, gradient: { b: [6, 8] } });
  assert.ok(Object.is(single.value(entries), 25));
});

test('[] for an empty vector is refused on this path as on the general one', () => {
  const f = G.compile(({ a }, { y }) => add(square(a), sum(y)));
  same(f({ a: 2 }, { y: new Float64Array(0) }), { value: 4, gradient: { a: 4 } });
  assert.throws(() => f({ a: 2 }, { y: [] }), { message: 'input "y" must be a number, a non-empty array, or a tensor' });
  const m = G.compile(({ a }, { m }) => add(square(a), sum(m)));
  m({ a: 2 }, { m: G.zeros([2, 0]) });
  assert.throws(() => m({ a: 2 }, { m: [[], []] }), { message: 'input "m" must have at least one column' });
  // A parameter too, as valueAndGrad refuses it.
  const p = G.compile((q) => add(square(q.a), sum(q.e)));
  p({ a: 1, e: new Float64Array(0) });
  let eager;
  assert.throws(() => G.valueAndGrad((q) => add(square(q.a), sum(q.e)))({ a: 1, e: [] }), (e) => (eager = e.message) !== undefined);
  assert.throws(() => p({ a: 1, e: [] }), { message: eager });
});

test('.value takes the bound buffers too: the value of the call, bit for bit, on every path', () => {
  // Maps in and out of order, inputs in every form (400 rows: views), compiled and rebuilt.
  for (const n of [7, 400]) {
    const compiled = G.compile(withData);
    compiled(at, dataOf(n));
    const rebuilt = G.compileFromJSON(compiled.toJSON());
    for (let shift = 0; shift < 3; shift++) {
      const d = dataOf(n, shift);
      const want = G.valueAndGrad(withData)(at, d).value;
      for (const [form, ins] of Object.entries(formsOf(d))) {
        for (const f of [compiled, rebuilt]) {
          assert.ok(Object.is(f.value(at, ins), want), `${form}: ${f.value(at, ins)} vs ${want}`);
          assert.ok(Object.is(f.value({ beta: at.beta, b: at.b }, ins), want), form);
        }
      }
    }
  }
  // One parameter: a number, an array, a short and a long Float64Array.
  const single = G.compile((x) => sum(exp(mul(x, x))));
  for (const x of [0.3, [0.1, -0.2, 0.3], Float64Array.of(0.1, 0.2), new Float64Array(3000).fill(0.01)]) {
    assert.ok(Object.is(single.value(x), G.valueAndGrad((y) => sum(exp(mul(y, y))))(x).value));
    assert.ok(Object.is(single.value(x), single(x).value));
  }
  // A vector root keeps its form.
  const wide = G.compile((p) => mul(p.a, p.v));
  assert.deepEqual(wide.value({ a: 2, v: [1, 3] }), [2, 6]);
});

test('.value between calls of other plans: each runs its own, and leaves gradients alone', () => {
  const f = G.compile(model);
  const g = G.compile((p) => mul(p.a, sum(p.b)));
  const fx = f(point(1));
  const gx = g({ a: 2, b: [1, 2] });
  for (let s = 0; s < 5; s++) {
    assert.ok(Object.is(f.value(point(s)), G.valueAndGrad(model)(point(s)).value));
    assert.equal(g.value({ a: s, b: [1, 2] }), 3 * s);
  }
  same(f(point(1)), fx);
  same(g({ a: 2, b: [1, 2] }), gx);
});

test(".value's failures and misfits are the call's", () => {
  const logdet = (p) => G.logdetPSD(G.addDiag(G.matmul(G.reshape(p.l, [2, 1]), G.reshape(p.l, [1, 2])), p.d));
  const f = G.compile(logdet);
  f({ l: [1, 2], d: [1, 1] });
  let call;
  assert.throws(() => f({ l: [1, 2], d: [-5, 1] }), (e) => (call = e.message) !== undefined);
  assert.match(call, /cholesky: matrix is not positive definite/);
  assert.throws(() => f.value({ l: [1, 2], d: [-5, 1] }), { message: call });
  assert.ok(Object.is(f.value({ l: [1, 2], d: [1, 1] }), f({ l: [1, 2], d: [1, 1] }).value));
  // A key too many: the general path, whose trace refuses it as a call does.
  assert.throws(() => f({ l: [1, 2], d: [1, 1], e: [] }), (e) => (call = e.message) !== undefined);
  assert.throws(() => f.value({ l: [1, 2], d: [1, 1], e: [] }), { message: call });
  // Re-entered from a getter: each call its own value.
  let inner;
  const outer = f.value({ l: [1, 2], get d() { inner = f.value({ l: [0, 0], d: [2, 2] }); return [1, 1]; } });
  assert.ok(Object.is(outer, f({ l: [1, 2], d: [1, 1] }).value));
  assert.ok(Object.is(inner, G.valueAndGrad(logdet)({ l: [0, 0], d: [2, 2] }).value));
  assert.ok(Math.abs(inner - Math.log(4)) < 1e-15);
});

test('a batch with inputs: each point bit-identical to its single call', () => {
  const compiled = G.compile(withData);
  const d = dataOf(50);
  const points = Array.from({ length: 20 }, (_, i) => ({ b: 0.1 * i, beta: [0.5, -0.1 * i, 0.3] }));
  const results = compiled.batch(points, d);
  points.forEach((p, i) => same(results[i], G.valueAndGrad(withData)(p, d)));
});

test('a parameter named __proto__ stays an own key of the gradient', () => {
  const f = (p) => add(square(p['__proto__']), p.b);
  const p = JSON.parse('{"__proto__": 3, "b": 1}');
  const compiled = G.compile(f);
  compiled(p);
  const r = compiled(p);
  assert.deepEqual(Object.keys(r.gradient), ['__proto__', 'b']);
  assert.equal(Object.getOwnPropertyDescriptor(r.gradient, '__proto__').value, 6);
  assert.equal(Object.getPrototypeOf(r.gradient), Object.prototype);
});

test('batches of such maps: each result bit-identical to its single call, in its own key order', async () => {
  const compiled = G.compile(model);
  compiled(point(0));
  const points = Array.from({ length: 40 }, (_, s) => {
    const p = point(s);
    // Every third point in another key order (the general path), every fifth with eta typed.
    if (s % 3 === 1) return { eta: p.eta, mu: p.mu, logTau: p.logTau };
    if (s % 5 === 2) return { ...p, eta: Float64Array.from(p.eta) };
    return p;
  });
  const singles = points.map((p) => compiled(p));
  const check = (results) => {
    results.forEach((r, i) => {
      assert.ok(Object.is(r.value, singles[i].value), `point ${i}`);
      assert.deepEqual(Object.keys(r.gradient), Object.keys(points[i]));
      for (const k of Object.keys(points[i])) {
        const [got, want] = [nums(r.gradient[k]), nums(singles[i].gradient[k])];
        assert.equal(got.length, want.length, `point ${i} ${k}`);
        want.forEach((v, e) => assert.ok(Object.is(got[e], v), `point ${i} ${k}[${e}]`));
      }
    });
  };
  check(compiled.batch(points));
  check(compiled.batch(points, undefined, { threads: 1 }));
  check(await compiled.batchAsync(points));
  const rebuilt = G.compileFromJSON(compiled.toJSON());
  check(rebuilt.batch(points));
});

test('a batch point with an inherited enumerable key takes the general path', () => {
  const compiled = G.compile(model);
  compiled(point(0));
  const proto = { extra: 1 };
  const p = Object.assign(Object.create(proto), point(2));
  // Its own keys are the plan's: the general path reads them as a single call does.
  const [r] = compiled.batch([p]);
  same(r, compiled(point(2)));
});

/** A sum of squares over whatever keys the point has: one scalar parameter per key. */
const sumOfSquares = (p) => Object.keys(p).reduce((acc, k, i) => add(acc, mul(i + 1, square(p[k]))), 0);

test('keys of any spelling come back as the same own keys, with the same numbers', () => {
  const odd = ['a"b', 'back\\slash', 'new\nline', '\u2028', '0', '17', 'constructor', 'toString', '', 'é🙂', 'x y'];
  const p = Object.fromEntries(odd.map((k, i) => [k, 0.25 * i - 1]));
  const compiled = G.compile(sumOfSquares);
  compiled(p);
  const r = compiled(p);
  same(r, G.valueAndGrad(sumOfSquares)(p));
  assert.deepEqual(Object.keys(r.gradient), Object.keys(p));
  assert.equal(Object.getPrototypeOf(r.gradient), Object.prototype);
  same(compiled.batch([p, p])[1], r);
});

test('past 256 parameters, and where code cannot be generated, the same results', () => {
  const many = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`p${i}`, Math.sin(i)]));
  const compiled = G.compile(sumOfSquares);
  compiled(many);
  same(compiled(many), G.valueAndGrad(sumOfSquares)(many));
  same(compiled.batch([many])[0], G.valueAndGrad(sumOfSquares)(many));
  // A process that refuses new Function (as a page's Content Security Policy may).
  const script = `
    import * as G from ${JSON.stringify(new URL('../index.js', import.meta.url).href)};
    assert: {
      let refused = false;
      try { new Function('return 1'); } catch { refused = true; }
      if (!refused) throw new Error('code generation was allowed');
    }
    const f = (p) => G.add(G.mul(2, G.square(p.a)), G.mul(p.a, p.b), G.sum(G.square(p.v)));
    const p = { a: 0.5, b: -1.5, v: [1, 2, 3] };
    const c = G.compile(f);
    c(p);
    console.log(JSON.stringify([c(p), G.valueAndGrad(f)(p), c.batch([p])[0]]));
  `;
  const out = spawnSync(process.execPath, ['--disallow-code-generation-from-strings', '--input-type=module', '-e', script], {
    encoding: 'utf8',
    env: process.env,
  });
  assert.equal(out.status, 0, out.stderr);
  const [compiledResult, eagerResult, batchResult] = JSON.parse(out.stdout);
  assert.deepEqual(compiledResult, eagerResult);
  assert.deepEqual(batchResult, eagerResult);
  assert.deepEqual(Object.keys(compiledResult.gradient), ['a', 'b', 'v']);
});
