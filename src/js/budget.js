// Native plans live outside the JavaScript heap, and Node runs their
// finalizers only when the event loop turns: a loop that makes and drops
// compiled functions without yielding kept every plan it made (10^4 of them
// held 2.3 GB). So the plans alive on this thread share a byte budget. Past
// it, the least recently called are released, their memory freed at once,
// and each rebuilds from its plan's text on its next call, bit-identical (a
// plan from JSON replays exactly as the traced one). A working set of plans
// in use is never rebuilt over and over.
//
// Such a loop must neither stall nor grow (bench/churn.mjs measures both):
// - Releasing is spread over the plans that cross the budget: each new plan
//   releases about as much as it adds, a few plans at a time, from the
//   front of a queue in O(1) each. (Releasing every stale plan in one call,
//   after a sort of them all, took 80-300 ms once per ~15 000 plans, most
//   of it in 15 000 native frees.)
// - The budget holds a plan's Held (its native plan, bytes, last call),
//   never the Replay that owns it: a dropped compiled function, its traced
//   graph and the text it would rebuild from are garbage at once. (Holding
//   the Replays kept ~30 000 traced graphs, over 200 MB, until released.)
// - A plan of LARGE bytes or more is released when V8 collects its owner
//   (its Replay or derived plan; a FinalizationRegistry, so once the event
//   loop turns). Otherwise a dropped large plan stayed until 64 calls had
//   passed and a new plan was made: a loop that compiled a GP at n = 1000,
//   called it once and dropped it held 77 MB a plan up to the hard cap,
//   gc() or not. Small plans are not registered: a registration costs a
//   weak cell that V8 keeps until the loop turns (bench/churn.mjs: peak
//   RSS +94 -> +146 MB, 6 iterations over 20 ms), and thousands collected
//   at once would be one long pause of native frees.
// - A released plan's napi external is kept as a spare, and the next plan
//   built goes into it rather than into a new one (src/binding/mod.rs,
//   plan_external): V8 runs a dead external's weak callback in a full
//   collection's pause (~20 000 of them took 50-130 ms), and napi keeps what
//   it allocated for one until the event loop turns (~0.5 KB a plan). A
//   released pool's external likewise (plan_pool).

import { N, onCoreReplaced, replacements } from './binding.js';

/**
 * Past BUDGET bytes, each new plan releases plans not called in the last
 * RECENT calls, least recently called first, until the plans fit again or
 * it has released at least its own bytes and MOST_RELEASED plans; past
 * the hard cap (`hardCap`), any but the one being called. "Least recently called" is a
 * queue's order, in which a plan called since it was queued (beyond the
 * calls that follow its making) gets one more turn at the back. So a loop
 * that drops its plans stays near the budget, while a working set of plans
 * in use is never rebuilt over and over unless it alone passes the hard
 * cap. A plan counts its bytes (N.planBytes) and PER_PLAN more, what its
 * allocations, external and Held cost beside: 2.3-3.7 KB of malloc'd
 * memory beyond N.planBytes for a plan of sum(p) or of a 20×3 product
 * (2 000 such plans kept, glibc's heap measured), and the Held and
 * external on V8's. A small plan's bytes are a quarter of what it holds.
 *
 * The budget binds only when plans are made: a working set called again
 * and again is spared whatever its size, so it is small. In a loop that
 * makes and drops small plans the process grows by V8's heap (45-55 MB
 * used at the peak: V8 collects its old space only past a limit of its
 * own) and by glibc's heap, about three times the budget (the plans, and
 * dead compiled functions' buffers until V8 collects them): peak RSS
 * +91-94 MB (bench/churn.mjs; +101-102 when PER_PLAN was 2 KB).
 */
export const BUDGET = 8 * 2 ** 20;
/**
 * Past it, plans in use are released too: 256 MB, or what the entry sets
 * (`setHardCap`: a quarter of the machine's memory, or of a container's
 * limit below it, for the native addon).
 * A working set past it is rebuilt over and over: a GP at n = 1000 whose
 * gradient and Hessian were called in turn, with plans and replicas of
 * ~1 GB, rebuilt one on every call of the other (a gradient 38 → 400-720 ms).
 */
let hardCap = 256 * 2 ** 20;

/** Raise the hard cap to `bytes` (never below 256 MB). */
export function setHardCap(bytes) {
  hardCap = Math.max(256 * 2 ** 20, bytes);
}
const RECENT = 64;
const PER_PLAN = 4096;
/** A plan of this many bytes or more is released when its owner is collected. */
const LARGE = 2 ** 20;
/** Plans one new plan releases at most, once it has released its own bytes. */
export const MOST_RELEASED = 16;
/** Plans in use one new plan passes over at most before it stops releasing. */
const MOST_PASSED = 256;
/** Released externals kept for new plans (src/binding/mod.rs, plan_external). */
const MOST_SPARES = 64;

let tick = 0;
let held = 0;
/**
 * For tests: how many plans the budget has released, the most that one
 * new plan released, and how many large ones it released as their owners were collected.
 */
export const stats = { released: 0, mostAtOnce: 0, releasedCollected: 0 };

/** The live plans' Helds, queued at the back and taken from the front. */
let queue = [];
let front = 0;
/**
 * Released externals a new plan (or pool, N.planPool) can be made into;
 * none once the binding shows it makes new ones anyway (WebAssembly).
 */
const planSpares = { list: [], recycles: true };
const poolSpares = { list: [], recycles: true };

/** A native plan under the budget: what its owner holds and the budget queues. */
class Held {
  constructor(plan) {
    /** The native plan, null once released. */
    this.plan = plan;
    this.bytes = 0;
    /** Ticks of its last call and of its last queueing. */
    this.used = 0;
    this.queued = 0;
    /** The plan's replicas for batch and async calls (src/batch.rs), dropped with it, and their bytes. */
    this.pool = undefined;
    this.poolBytes = 0;
    this.poolCalls = 0;
    /** The bytes V8 was told of (`tell`). */
    this.told = 0;
  }
}

/** The owners of large plans, whose plans are released when they are collected. */
const owners = new FinalizationRegistry((h) => {
  try {
    if (h.plan !== null && release(h)) stats.releasedCollected++;
  } catch {
    // A trap in the release replaced the core, which forgot every plan; nothing is left to free.
  }
});

/**
 * A new native plan: `make(into)`, where `into` is a released external
 * (or null) that the napi binding puts the plan into, returning null.
 */
export function build(make) {
  return fromSpares(planSpares, make);
}

/** `make(into)` with a spare of `spares` as `into` where there is one: what it made, or `into` if it filled that. */
function fromSpares(spares, make) {
  const into = spares.list.length > 0 ? spares.list.pop() : null;
  let made;
  try {
    made = make(into);
  } catch (e) {
    if (into !== null) spares.list.push(into);
    throw e;
  }
  if (made === null || made === undefined) return into;
  if (into !== null) {
    // A binding that always makes a new one: keep no spares.
    spares.recycles = false;
    spares.list.length = 0;
  }
  return made;
}

/** Keep `released`, an external emptied by the budget, for `fromSpares`. */
function keepSpare(spares, released) {
  if (spares.recycles && spares.list.length < MOST_SPARES) spares.list.push(released);
}

/**
 * Put `plan`, just made for `owner`, under the budget; its Held, releasing
 * others past the budget. The Held must not reach `owner`, or it would never be collected.
 */
export function hold(plan, owner) {
  const h = new Held(plan);
  enqueue(h);
  if (h.bytes >= LARGE) owners.register(owner, h);
  return h;
}

/**
 * Mark `h` as just called, first remaking its native plan with
 * `build(make)` if the budget released it; whether it was remade.
 */
export function revive(h, make) {
  if (h.plan !== null) {
    h.used = ++tick;
    return false;
  }
  h.plan = build(make);
  enqueue(h);
  return true;
}

/** Mark `h` as just called. */
function touch(h) {
  h.used = ++tick;
}

/**
 * `call(pool)` on `h`'s replicas for many points per call (src/batch.rs),
 * made from `plan`, its native plan, at the first call. They count
 * against the budget with the plan and are freed with it (a pool dropped
 * but not yet finalized would hold them all): a copy of the plan, and one
 * more for each thread a call ran on, counted when the call returns (or,
 * for a Promise, settles).
 */
export function onReplicas(h, plan, call) {
  if (h.pool === undefined) {
    h.pool = fromSpares(poolSpares, (into) => N.planPool(plan, into));
    recount(h);
  } else {
    touch(h);
  }
  let out;
  try {
    out = call(h.pool);
  } finally {
    if (!(out instanceof Promise)) recount(h);
  }
  return out instanceof Promise ? out.finally(() => recount(h)) : out;
}

/**
 * Count `h`'s replicas again; past the budget, release others. A pool
 * gains replicas only when a call runs on more threads than those before
 * it, so after its first 16 calls it is counted every 256th: the count
 * costs a native call, 1% of a small Hessian's.
 */
function recount(h) {
  if (h.pool === undefined || (++h.poolCalls > 16 && (h.poolCalls & 255) !== 0)) return;
  const bytes = N.poolBytes(h.pool);
  if (bytes === h.poolBytes) return;
  held += bytes - h.poolBytes;
  h.bytes += bytes - h.poolBytes;
  tell(h);
  h.poolBytes = bytes;
  if (held > BUDGET) releaseSome(h);
}

function enqueue(h) {
  h.bytes = N.planBytes(h.plan) + PER_PLAN;
  held += h.bytes;
  tell(h);
  h.used = h.queued = ++tick;
  queue.push(h);
  if (held > BUDGET) releaseSome(h);
}

function takeFront() {
  const h = queue[front];
  queue[front++] = undefined;
  if (front === queue.length) {
    queue.length = 0;
    front = 0;
  } else if (front >= 1024 && front * 2 >= queue.length) {
    queue = queue.slice(front);
    front = 0;
  }
  return h;
}

/**
 * Release plans from the front of the queue until they fit the budget, or
 * until `keep` (just queued) has released MOST_RELEASED plans and at least
 * its own bytes; plans it passes over go to the back, up to MOST_PASSED.
 */
function releaseSome(keep) {
  let count = 0;
  let freed = 0;
  let passed = 0;
  const queued = queue.length - front;
  while (front < queue.length && held > BUDGET && (count < MOST_RELEASED || freed < keep.bytes)) {
    const h = takeFront();
    // Released when its owner was collected.
    if (h.plan === null) continue;
    // In use: called since it was queued, later than the calls that follow
    // a plan's making (which are not yet use).
    const inUse = h.used > h.queued + RECENT;
    if (h === keep || (held <= hardCap && (inUse || h.used >= tick - RECENT))) {
      if (inUse) h.queued = tick;
      queue.push(h);
      if (++passed === MOST_PASSED || passed === queued) break;
      continue;
    }
    if (release(h)) {
      freed += h.bytes;
      count++;
    } else {
      queue.push(h);
      if (++passed === MOST_PASSED || passed === queued) break;
    }
  }
  stats.released += count;
  if (count > stats.mostAtOnce) stats.mostAtOnce = count;
}

/**
 * Forget every plan without freeing it: the WebAssembly instance that held
 * them was replaced after a trap (src/js/wasm.js). Each is rebuilt in the
 * new one at its next call.
 */
onCoreReplaced(() => {
  for (let i = front; i < queue.length; i++) drop(queue[i]);
  queue = [];
  front = 0;
  held = 0;
  planSpares.list.length = 0;
  poolSpares.list.length = 0;
});

/** `h` without its native plan and replicas, to be remade at its next call. */
function drop(h) {
  h.plan = null;
  h.pool = undefined;
  h.poolBytes = 0;
  h.poolCalls = 0;
}

/**
 * Release `h`'s plan; false if it is in a call (a getter that call ran made
 * plans), left for later. A trap in the release replaced the core, and
 * ends the release with its Error.
 */
function release(h) {
  const core = replacements;
  try {
    N.planRelease(h.plan);
  } catch (e) {
    if (core === replacements) return false;
    drop(h);
    throw e;
  }
  keepSpare(planSpares, h.plan);
  if (h.pool !== undefined) {
    N.poolRelease(h.pool);
    keepSpare(poolSpares, h.pool);
  }
  drop(h);
  held -= h.bytes;
  tell(h);
  return true;
}

/**
 * Tell V8 of `h`'s native bytes, as external memory, while its plan holds
 * LARGE or more: V8 then collects for them, and so finds the dropped
 * functions whose plans the registry frees. Untold, a loop that dropped
 * n = 400 GP plans and yielded held +292 MB after 128 (V8's heap at 7 MB).
 * Small plans are not told: the budget frees them whether V8 collects or
 * not, and telling of each in bench/churn.mjs's loop made its slowest
 * iterations slower (11-50 ms against 12-23).
 */
function tell(h) {
  const bytes = h.plan !== null && h.bytes >= LARGE ? h.bytes : 0;
  if (bytes !== h.told) {
    N.reportExternal(bytes - h.told);
    h.told = bytes;
  }
}
