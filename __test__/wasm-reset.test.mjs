// When the WebAssembly core traps (a Rust panic: a bug), the adapter reports
// it and starts a fresh instance (src/js/wasm.js). Compiled functions made
// before must then rebuild their plans in the new instance, not fail with
// "plan 0 does not exist" for the rest of the process; and what memory
// cannot hold is an Error that resets nothing. This file installs its own
// WebAssembly binding, with a host `log` that traps on demand, whichever
// build the other files run.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { install } from '../src/js/binding.js';
import { loadWasm } from '../src/js/wasm.js';
import * as G from '../src/js/api.js';

let trap = false;
const log = (x) => {
  if (trap) throw new WebAssembly.RuntimeError('a trap for the test');
  return Math.log(x);
};
install(loadWasm(undefined, { js_log: log, js_log1p: Math.log1p, js_sin: Math.sin, js_cos: Math.cos, js_pow: Math.pow }));

const objective = (p) => G.add(G.sum(G.square(G.mul(p.a, p.b))), G.sum(G.exp(p.b)));
const at = { a: [0.5, -1.25], b: [2, 0.75] };
const logOf = (x) => G.sum(G.log(x));

function trapOnce() {
  trap = true;
  try {
    assert.throws(() => G.valueAndGrad(logOf)([1, 2, 3]), (e) => e instanceof Error && /its tapes and plans were reset$/.test(e.message));
  } finally {
    trap = false;
  }
}

test('compiled functions made before a trap rebuild their plans after it, with the same bits', () => {
  const f = G.compile(objective);
  const g = G.compile(logOf);
  const before = { f: f(at), fh: f.hessian(at), fj: f.jacobian(at), g: g([1, 2, 3]) };
  const rebuilt = G.compileFromJSON(f.toJSON());
  const rebuiltBefore = rebuilt(at);

  trapOnce();

  assert.deepEqual(f(at), before.f);
  assert.deepEqual(f.hessian(at), before.fh);
  assert.deepEqual(f.jacobian(at), before.fj);
  assert.deepEqual(g([1, 2, 3]), before.g);
  assert.deepEqual(rebuilt(at), rebuiltBefore);
  assert.deepEqual(f.batch([at, at]), [before.f, before.f]);
  // And a plan made after the reset runs beside them.
  assert.deepEqual(G.compile(objective)(at), before.f);
  trapOnce();
  assert.deepEqual(f(at), before.f);
});

test('eager evaluations after a trap take fresh tapes; a Var kept from before names none', () => {
  const before = G.valueAndGrad(objective)(at);
  const kept = G.variable([1, 2]); // on a tape outside any evaluation
  trapOnce();
  assert.deepEqual(G.valueAndGrad(objective)(at), before);
  assert.deepEqual(G.hessian(logOf)([1, 2]).hessian, [[-1, 0], [0, -0.25]]);
  const fresh = G.variable([3, 4]);
  assert.throws(() => G.sum(G.mul(kept, 2)).value, { message: /^tape \d+ was made before the WebAssembly core was reset; make its Vars again$/ });
  assert.deepEqual(Array.from(G.sum(fresh).value.data), [7]);
});

test('a trap inside a compiled call, with nodes waiting for another tape: both are forgotten', () => {
  const g = G.compile(logOf);
  const before = { g: g([1, 2, 3]), h: g.hvp([1, 2, 3], [1, 0, 0]), e: G.valueAndGrad(objective)(at) };
  G.variable(1.5); // a node queued for the shared tape
  trap = true;
  try {
    assert.throws(() => g([1, 2, 4]), { message: /its tapes and plans were reset$/ });
  } finally {
    trap = false;
  }
  assert.deepEqual(G.valueAndGrad(objective)(at), before.e);
  assert.deepEqual(g([1, 2, 3]), before.g);
  assert.deepEqual(g.hvp([1, 2, 3], [1, 0, 0]), before.h);
});

test('a value memory cannot hold is an Error, before anything is written, and resets nothing', () => {
  const f = G.compile(objective);
  const before = f(at);
  // 2^28 values are 2^31 bytes, past what a wasm32 buffer holds.
  const big = new Float64Array(2 ** 28);
  assert.throws(() => G.valueAndGrad((x) => G.sum(x))(big), { message: 'out of memory: cannot hold 268435456 more values' });
  assert.throws(() => G.variable(big), { message: 'out of memory: cannot hold 268435456 more values' });
  assert.deepEqual(f(at), before);
  assert.deepEqual(G.valueAndGrad(objective)(at), before);
});

test('a small plan whose arenas no wasm32 allocation holds is an Error too, not a reset', () => {
  // 68 KB of JSON declaring a [65536×1024] product and its tanh: values
  // and adjoints past the 2 GiB one allocation may hold here.
  const op = (o, parents, args, extra) => ({ kind: 'op', op: o, parents, ...(args ? { args } : {}), ...extra });
  const plan = {
    version: 2, input: 'single', root: 11,
    nodes: [
      { kind: 'param', shape: [2] },
      op('concat', Array(32768).fill(0), undefined, { list: true }),
      op('reshape', [1], [[65536, 1]]),
      op('reshape', [0], [[1, 2]]),
      op('slice', [3], [[0, 0], [1, 1]]),
      op('reshape', [0], [[2, 1]]),
      op('sum', [0]),
      op('reshape', [6], [[1, 1]]),
      op('concat', Array(1024).fill(7), [{ axis: 1 }], { list: true }),
      op('matmul', [2, 8]),
      op('tanh', [9]),
      op('sum', [10]),
    ],
  };
  const v = G.variable([1, 2]);
  const y = G.sum(G.square(v));
  assert.throws(() => G.compileFromJSON(plan), /^Error: compileFromJSON: out of memory: cannot hold \d+ more values$|^Error: out of memory: cannot hold \d+ more values$/);
  y.backward();
  assert.deepEqual(Array.from(v.grad), [2, 4]);
  assert.deepEqual(G.valueAndGrad(objective)(at), G.compile(objective)(at));
});

// Last: it leaves this file's core unusable.
test('after 127 resets the core is not reset again: every call says so', () => {
  for (let i = 0; i < 200; i++) {
    trap = true;
    let message;
    try {
      G.valueAndGrad(logOf)([1, 2]);
    } catch (e) {
      message = e.message;
    } finally {
      trap = false;
    }
    if (/were lost$/.test(message)) break;
    assert.match(message, /were reset$/);
  }
  assert.throws(() => G.valueAndGrad(objective)(at), {
    message: '@tangent.to/grad (WebAssembly): the core cannot be used again (it trapped 128 times); reload to start anew',
  });
});
