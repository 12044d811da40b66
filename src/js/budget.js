// Native plans live outside the JavaScript heap, and Node runs their
// finalizers only when the event loop turns: a loop that makes and drops
// compiled functions without yielding kept every plan it made (10^4 of them
// held 2.3 GB). So the plans alive on this thread share a byte budget. Past
// it, the least recently called are released, their memory freed at once,
// and each rebuilds from its plan's text on its next call, bit-identical
// (a plan from JSON replays exactly as the traced one).

import { N } from './binding.js';

/**
 * Past BUDGET bytes, plans not called in the last RECENT calls are released,
 * least recently called first, down to half the budget; past HARD_CAP, any
 * but the one being called. So a loop that drops its plans stays within
 * the budget, while a working set of plans in use is never rebuilt over
 * and over unless it alone passes the hard cap.
 */
export const BUDGET = 64 * 2 ** 20;
const HARD_CAP = 4 * BUDGET;
const RECENT = 64;

let tick = 0;
let held = 0;
/** How many plans the budget has released, for tests. */
export const stats = { released: 0 };
/** Replays whose native plan is alive, with its bytes. */
const holders = new Set();

/** Count `replay`'s new native plan against the budget, releasing others past it. */
export function hold(replay) {
  replay.bytes = N.planBytes(replay.plan);
  held += replay.bytes;
  holders.add(replay);
  touch(replay);
  if (held > BUDGET) releaseOldest(replay);
}

/**
 * Mark `holder` as just called, first remaking its native plan with
 * `make()` if the budget released it; whether it was remade.
 */
export function revive(holder, make) {
  if (holder.plan !== null) {
    touch(holder);
    return false;
  }
  holder.plan = make();
  hold(holder);
  return true;
}

/** Mark `replay` as just called. */
export function touch(replay) {
  replay.used = ++tick;
}

function releaseOldest(keep) {
  const oldest = [...holders].sort((a, b) => a.used - b.used);
  for (const r of oldest) {
    if (held <= BUDGET / 2) break;
    const stale = r.used < tick - RECENT;
    if (r === keep || (!stale && held <= HARD_CAP)) continue;
    N.planRelease(r.plan);
    r.plan = null;
    r.released();
    held -= r.bytes;
    holders.delete(r);
    stats.released++;
  }
}
