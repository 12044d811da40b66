// Scalar nodes recorded in JavaScript. An elementwise op on scalars, a
// number constant and a number parameter are written into two typed arrays
// here instead of crossing into the core one by one; the core records the
// whole batch in one call (`N.tapeApply`) when anything else needs the
// tape: a value read, another op, the sweep. The nodes are numbered here,
// in order from the tape's length, which the core checks; it never merges
// such nodes (src/core/graph.rs), so the numbers hold.
//
// None of these ops can fail on values, and their shapes are known (all
// scalars), so a queued op still throws where it is called if it throws at
// all: in argument checks, before anything is queued.

import { N } from './binding.js';

/** Nodes per batch; a full queue is recorded and started again. */
const CAP = 1024;
const ops = new Int32Array(3 * CAP);
const nums = new Float64Array(CAP);
/** The binding's handle on the two arrays, made at the first batch. */
let bound = null;

/** The tape whose nodes wait here, or null; how many; and the first one's id. */
let owner = null;
let count = 0;
let numbers = 0;
let base = 0;

/** Record what waits, if anything, on its tape. */
export function flush() {
  const t = owner;
  if (t === null) return;
  owner = null;
  const n = count;
  const m = numbers;
  count = 0;
  numbers = 0;
  t.length = -1; // unknown, should the batch fail
  bound ??= N.queueBind(ops, nums);
  t.length = N.tapeApply(t.id, bound, n, m);
}

/**
 * End an evaluation on tape t in one call: what waits is recorded, the
 * sweep runs from `root` (unless `swept`), and the gradients of the leaves
 * `ids` (`total` values) are left in `finished`, to be copied out before
 * anything else is queued; the tape is emptied. Returns the root's value,
 * or undefined when the leaves do not fit the queue's arrays.
 */
export function finish(t, root, swept, ids, total) {
  if (owner !== t) flush();
  const n = owner === t ? count : 0;
  const m = owner === t ? numbers : 0;
  if (3 * n + ids.length > ops.length || total > nums.length) return undefined;
  for (let i = 0; i < ids.length; i++) ops[3 * n + i] = ids[i];
  owner = null;
  count = 0;
  numbers = 0;
  t.length = -1;
  bound ??= N.queueBind(ops, nums);
  return N.tapeFinishQueued(t.id, bound, n, m, root, swept, ids.length, total);
}

/** Where `finish` leaves the gradients. */
export const finished = nums;

/** Forget what waits for tape t (it is being emptied). */
export function discard(t) {
  if (owner === t) {
    owner = null;
    count = 0;
    numbers = 0;
  }
}

/** Whether nodes wait for tape t. */
export const pendingOn = (t) => owner === t;

/** Make room for one node on tape t (and a number when `number`). */
function reserve(t, number) {
  if (owner !== t || count === CAP || (number && numbers === CAP)) {
    flush();
    owner = t;
    base = t.length >= 0 ? t.length : N.tapeLength(t.id);
  }
}

/** Queue a number leaf of `kind` (CONST, LEAF, INPUT) on tape t; returns its id. */
export function queueNumber(t, kind, x) {
  reserve(t, true);
  const k = 3 * count;
  ops[k] = -1 - kind;
  ops[k + 1] = numbers;
  nums[numbers++] = x;
  return base + count++;
}

/** Queue op `code` on scalar nodes a and b (b < 0 for one operand); returns its id. */
export function queueOp(t, code, a, b) {
  reserve(t, false);
  const k = 3 * count;
  ops[k] = code;
  ops[k + 1] = a;
  ops[k + 2] = b;
  return base + count++;
}
