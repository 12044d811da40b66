// compile: trace the objective once per shape signature into a native plan,
// and replay that plan on later calls.

import { N } from './binding.js';
import { checkInputs, evaluate, record } from './drivers.js';
import { HAND_BUILT, planText, serialize } from './plans.js';
import { batchPoints, eagerBatch, emptyBatch, pointError, settle } from './batching.js';
import { Replay } from './replay.js';
import { signature, signatureKey } from './signature.js';
import { build } from './budget.js';
import { ReadMap, readOnce, readOnceLazily } from './forms.js';
import { runMap, valueMap } from './mapcall.js';
import { INPUT, retire } from './tape.js';
import { attachDerivatives } from './derivatives.js';
import { eagerJacobian, hessian, hvp, jvp } from './higher.js';

const MAX_PLANS = 8;

/** Read the value of every constant the traced graph holds, so it outlives the tape. */
function keepConstants(r) {
  const stack = [r.root];
  const seen = new Set(stack);
  while (stack.length > 0) {
    const v = stack.pop();
    if (v.parents.length === 0) void v.value;
    for (const p of v.parents) {
      if (!seen.has(p)) {
        seen.add(p);
        stack.push(p);
      }
    }
  }
}

/** Trace f once at these arguments and build its plan, or null for a hand-built node. */
function traceEntry(f, x, inputs) {
  const r = record(f, x, inputs, 'compile', INPUT, true);
  const ids = (vars) => Uint32Array.from(vars, (v) => v._id);
  let plan;
  let rootShape;
  try {
    // toJSON and a rebuild read the traced graph's constants and shapes:
    // read them now, so the trace's tape can go rather than wait for the
    // collector (and before the plan takes the tape's graph, N.planBuild).
    keepConstants(r);
    rootShape = r.root.shape;
    plan = build((into) => N.planBuild(r.t.h, r.root._id, ids(r.P.vars), ids(r.I ? r.I.vars : []), into));
  } catch (e) {
    if (r.t.externals !== null) return null; // a hand-built node: evaluate eagerly
    throw e;
  } finally {
    retire(r.t);
  }
  const rebuild = (into) => N.planFromJson(planText(serialize(r)), into);
  const replay = new Replay(
    plan,
    rebuild,
    r.params.map,
    r.params.keys,
    r.P.vars.map((v) => v.shape),
    r.ins ? r.ins.keys ?? [] : [],
    r.I ? r.I.vars.map((v) => v.shape) : [],
    rootShape,
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
    const sig = signatureKey(x, inputs);
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

  // A call whose map fits the last plan goes straight into its bound
  // buffers (`fast`, mapcall.js); any other, `slow`, on its arguments read once.
  const calling = (fast, slow) => (x, inputs) => {
    const read = readOnceLazily(x);
    const readIn = readOnceLazily(inputs);
    if (read instanceof ReadMap && (readIn === undefined || readIn instanceof ReadMap) && last !== null && !eager) {
      const result = fast(last.replay, read, readIn);
      if (result !== undefined) return result;
    }
    return slow(read instanceof ReadMap ? read.object() : read, readIn instanceof ReadMap ? readIn.object() : readIn);
  };
  const c = calling(runMap, (x, inputs) => {
    const entry = eager ? null : entryFor(x, inputs);
    if (entry === null) return evaluate(f, x, inputs, true, 'compile');
    return entry.replay.run(x, inputs, 'compile');
  });
  c.value = calling(valueMap, (x, inputs) => {
    const entry = eager ? null : entryFor(x, inputs);
    if (entry === null) return evaluate(f, x, inputs, false, 'compile');
    return entry.replay.value(x, inputs);
  });
  // Many points per call (docs/API.md "Many points per call"): traced at point 0
  // when no plan has its signature; every point must share that signature.
  const batchEntry = (b, inputs, label) => {
    try {
      return eager ? null : entryFor(b.sample, inputs);
    } catch (e) {
      throw pointError(label, 0, e);
    }
  };
  // Point i's error where it does not fit the plan: a malformed value's
  // own message, as a call there would throw it, else the signatures.
  const misfit = (replay, points, label) => (i, x) => {
    try {
      replay.checkForms(x);
    } catch (e) {
      return pointError(label, i, e);
    }
    return new Error(`${label}: point ${i} is shaped ${signature(x)}, unlike point 0 (${signature(points[0])}); a batch evaluates one shape signature`);
  };
  const batchWith = (method, label, points, inputs, options) => {
    const b = batchPoints(points, options, label);
    inputs = readOnce(inputs);
    // Inputs checked first, as a rebuilt plan checks them: even for no points.
    if (inputs !== undefined) checkInputs(inputs, 'compile');
    if (b.k === 0) return emptyBatch(b);
    const entry = batchEntry(b, inputs, label);
    if (entry === null) return eagerBatch(c, points, b, inputs, label);
    return entry.replay[method](points, b, inputs, label, 'compile', misfit(entry.replay, points, label));
  };
  c.batch = (points, inputs, options) => batchWith('batch', 'batch', points, inputs, options);
  c.batchAsync = (points, inputs, options) => settle(() => batchWith('batchAsync', 'batchAsync', points, inputs, options));
  c.async = (x, inputs) =>
    settle(() => {
      // Read once: the plan is chosen from what is packed.
      x = readOnce(x);
      inputs = readOnce(inputs);
      const entry = eager ? null : entryFor(x, inputs);
      if (entry === null) return c(x, inputs);
      const b = { packed: false, k: 1, threads: 1, sample: x };
      return entry.replay.batchAsync([x], b, inputs, '', 'compile', null).then((r) => r[0]);
    });
  c.toJSON = () => {
    if (eager) throw new Error(HAND_BUILT);
    if (last === null) throw new Error('toJSON: call the compiled function once first, so the graph is built.');
    return serialize(last.record);
  };
  // Forward mode and second order, on the plan of the arguments' signature.
  const eagerForms = { jvp: jvp(f), hvp: hvp(f), hessian: hessian(f), jacobian: eagerJacobian(f) };
  attachDerivatives(
    c,
    (x, inputs) => {
      const entry = eager ? null : entryFor(x, inputs);
      return entry === null ? null : entry.replay;
    },
    eagerForms,
  );
  return c;
}
