// Small nodes recorded in JavaScript. Elementwise ops (pow too, its
// exponent among the numbers), sums, `dot` and `matmul` whose shapes are
// known here, and scalar, short-vector and small matrix leaves, are written
// into two typed arrays instead of crossing into the core one by one; the
// core records the whole batch in one call (`N.tapeApply`) when anything
// else needs the tape: a value read, another op, the sweep. The nodes are
// numbered here, in order from the tape's length, which the core checks;
// it never merges such nodes (graph::batched in src/core/graph.rs), so the
// numbers hold.
//
// None of these ops can fail on values, and an op is queued only when its
// operands' shapes are known to fit (ops.js), so a queued op still throws
// where it is called if it throws at all.

import { N, onCoreReplaced } from './binding.js';
import { copyInto } from './forms.js';

/** Nodes, and values of leaves, per batch; a full queue is recorded and started again. */
const CAP = 1024;
/** The most values a queued vector or matrix leaf holds. */
export const QUEUED_VALUES = 256;
/** A leaf entry's length for a matrix (api/queue.rs). */
const MATRIX = -2;
/** The core sets args[REVOKED] when another copy of this package's JavaScript binds its queue in this thread (src/binding/queue.rs). */
const REVOKED = 7;
/**
 * The queue's entries, its numbers, and the arguments of the core's calls
 * on it, which take none (napi spends about 70 ns on a call's arguments,
 * whatever they are). One buffer holds all three, so that if it is
 * detached (only a patched built-in can reach it), args reads undefined.
 */
let ops;
let nums;
let args;
function makeArrays() {
  const buffer = new ArrayBuffer(8 * CAP + 4 * (3 * CAP) + 4 * (REVOKED + 1));
  nums = new Float64Array(buffer, 0, CAP);
  ops = new Int32Array(buffer, 8 * CAP, 3 * CAP);
  args = new Int32Array(buffer, 8 * CAP + 4 * (3 * CAP), REVOKED + 1);
}
makeArrays();
/** Whether the arrays are bound to the core (at the first batch). */
let bound = false;

/**
 * Make this copy of the package the one whose queue (and selected plan,
 * src/js/replay.js) the core's thread holds, binding its arrays if they
 * are not bound or another copy bound its own since.
 */
export function own() {
  if (bound && args[REVOKED] === 0) return;
  if (args[REVOKED] === undefined) {
    // The core must not keep its pointers into memory the buffer left; what waited is lost.
    makeArrays();
    empty();
    bound = false;
    throw new Error("the package's own buffers were detached (by a patched built-in)");
  }
  args[REVOKED] = 0;
  N.queueBind(ops, nums, args);
  bound = true;
  for (const f of claimed) f();
}

/** What forgets the core's thread state this copy remembers (a selected plan) when it binds again. */
const claimed = [];
export const onClaim = (f) => claimed.push(f);

/** The tape whose nodes wait here, or null; how many; and the first one's id. */
let owner = null;
let count = 0;
let numbers = 0;
let base = 0;

/** Forget what waits (it was recorded, or its tape is being emptied or was lost with its core). */
function empty() {
  owner = null;
  count = 0;
  numbers = 0;
}
onCoreReplaced(empty);

/** Record what waits, if anything, on its tape. */
export function flush() {
  const t = owner;
  if (t === null) return;
  const n = count;
  const m = numbers;
  empty();
  t.length = -1; // unknown, should the batch fail
  own();
  args[0] = t.id;
  args[1] = n;
  args[2] = m;
  t.length = N.tapeApply();
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
  empty();
  t.length = -1;
  own();
  args[0] = t.id;
  args[1] = n;
  args[2] = m;
  args[3] = root;
  args[4] = swept ? 1 : 0;
  args[5] = ids.length;
  args[6] = total;
  return N.tapeFinishQueued();
}

/** Where `finish` leaves the gradients. */
export { nums as finished };

/** Forget what waits for tape t (it is being emptied). */
export function discard(t) {
  if (owner === t) empty();
}

/** Whether nodes wait for tape t. */
export const pendingOn = (t) => owner === t;

/** Make room for one node on tape t, holding `values` values. */
function reserve(t, values) {
  if (owner !== t || count === CAP || numbers + values > CAP) {
    flush();
    owner = t;
    base = t.length >= 0 ? t.length : N.tapeLength(t.id);
  }
}

/** Write the next node's entry, `[code, a, b]`, after a `reserve`; returns its id. */
function entry(code, a, b) {
  const k = 3 * count;
  ops[k] = code;
  ops[k + 1] = a;
  ops[k + 2] = b;
  return base + count++;
}

/** Queue a number leaf of `kind` (CONST, LEAF, INPUT) on tape t; returns its id. */
export function queueNumber(t, kind, x) {
  reserve(t, 1);
  const at = numbers;
  nums[numbers++] = x;
  return entry(-1 - kind, at, -1);
}

/**
 * Queue a vector leaf of `kind` holding `data` (at most QUEUED_VALUES
 * values, copied now: a Float64Array, or an array, each of whose entries
 * must then be a number); returns its id, or -1, with nothing queued, at
 * an entry that is not a number.
 */
export function queueVector(t, kind, data) {
  const n = data.length;
  reserve(t, n);
  const at = numbers;
  for (let i = 0; i < n; i++) {
    const x = data[i];
    if (typeof x !== 'number') return -1;
    nums[at + i] = x;
  }
  numbers += n;
  return entry(-1 - kind, at, n);
}

/**
 * Queue a matrix leaf of `kind` and `shape` [m, n], m·n at most
 * QUEUED_VALUES, holding `x` (a Float64Array, or rows of numbers, checked
 * and copied now by `copyInto`, which throws its errors); returns its id.
 * Its dimensions go first among the numbers.
 */
export function queueMatrix(t, kind, x, shape, name) {
  const n = shape[0] * shape[1];
  reserve(t, n + 2);
  const at = numbers;
  nums[at] = shape[0];
  nums[at + 1] = shape[1];
  copyInto(x, nums, at + 2, name);
  numbers += n + 2;
  return entry(-1 - kind, at, MATRIX);
}

/** Queue pow (its `code`) of node a with the exponent k, which goes among the numbers; returns its id. */
export function queuePow(t, code, a, k) {
  reserve(t, 1);
  const at = numbers;
  nums[numbers++] = k;
  return entry(code, a, at);
}

/** Queue op `code` on scalar nodes a and b (b < 0 for one operand); returns its id. */
export function queueOp(t, code, a, b) {
  reserve(t, 0);
  return entry(code, a, b);
}
