// compile: trace the objective once per shape signature into a native plan,
// and replay that plan on later calls.

import { N } from './binding.js';
import { checkInputs, evaluate, record } from './drivers.js';
import { HAND_BUILT, serialize } from './plans.js';
import { Replay, signature } from './replay.js';
import { INPUT } from './tape.js';

const MAX_PLANS = 8;

/** Trace f once at these arguments and build its plan, or null for a hand-built node. */
function traceEntry(f, x, inputs) {
  const r = record(f, x, inputs, 'compile', INPUT, true);
  const ids = (vars) => Uint32Array.from(vars, (v) => v._id);
  let plan;
  try {
    plan = N.planBuild(r.t.h, r.root._id, ids(r.P.vars), ids(r.I ? r.I.vars : []));
  } catch (e) {
    if (r.t.externals !== null) return null;
    throw e;
  }
  const replay = new Replay(
    plan,
    r.params.map,
    r.params.keys,
    r.P.vars.map((v) => v.shape),
    r.ins ? r.ins.keys ?? [] : [],
    r.I ? r.I.vars.map((v) => v.shape) : [],
    r.root.shape,
  );
  replay.hasInputs = r.ins !== null;
  return { replay, record: r };
}

export function compile(f) {
  if (typeof f !== 'function') throw new Error('compile: expected a function');
  const plans = new Map();
  let last = null;
  let eager = false;

  const entryFor = (x, inputs) => {
    if (last !== null && last.replay.fits(x, inputs)) return last;
    if (inputs !== undefined) checkInputs(inputs, 'compile');
    const sig = signature(x, inputs);
    let entry = plans.get(sig);
    if (entry === undefined) {
      entry = traceEntry(f, x, inputs);
      if (entry === null) {
        eager = true;
        return null;
      }
      plans.set(sig, entry);
      if (plans.size > MAX_PLANS) plans.delete(plans.keys().next().value);
    }
    last = entry;
    return entry;
  };

  const c = (x, inputs) => {
    const entry = eager ? null : entryFor(x, inputs);
    if (entry === null) return evaluate(f, x, inputs, true, 'compile');
    return entry.replay.run(x, inputs, 'compile');
  };
  c.value = (x, inputs) => {
    const entry = eager ? null : entryFor(x, inputs);
    if (entry === null) return evaluate(f, x, inputs, false, 'compile');
    return entry.replay.value(x, inputs);
  };
  c.toJSON = () => {
    if (eager) throw new Error(HAND_BUILT);
    if (last === null) throw new Error('toJSON: call the compiled function once first, so the graph is built.');
    return serialize(last.record);
  };
  return c;
}
