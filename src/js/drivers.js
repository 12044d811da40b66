// Evaluating an objective: its parameters and inputs as named slots, the
// recording on a fresh tape, and the gradients in the forms they came in
// (valueAndGrad, grad).

import { N } from './binding.js';
import { ReadMap, fmtShape, formOf, isF64, isMapForm, readOnce, readOnceLazily, setOwn, shapeGradient, sizeOf, toNested } from './forms.js';
import { finish, finished } from './queue.js';
import {
  CONST,
  LEAF,
  Var,
  asTensor,
  current,
  evaluationTape,
  leafVar,
  numberLeafVar,
  retire,
  setCurrent,
  sweep,
} from './tape.js';

// ---------------------------------------------------------------- parameters

/**
 * The parameters (or inputs) of a call as named slots:
 * { map, keys, values, label } with `keys` null for a single parameter.
 */
function slotsOf(x, label) {
  if (x instanceof ReadMap) return { map: true, keys: x.keys, values: x.vals, label };
  if (isMapForm(x)) {
    const keys = Object.keys(x);
    return { map: true, keys, values: keys.map((k) => x[k]), label };
  }
  return { map: false, keys: null, values: [x], label };
}

/** Slot i's name in messages: `parameter "mu"`, or `parameter` alone. */
const slotName = (s, i) => (s.map ? `${s.label} "${s.keys[i]}"` : s.label);

export function checkInputs(inputs, where) {
  if (inputs === null || typeof inputs !== 'object' || Array.isArray(inputs) || isF64(inputs)) {
    throw new Error(`${where}: inputs must be a {name: value} map, got ${typeof inputs}`);
  }
}

/** Leaves for each slot on tape t; returns the argument the objective receives. */
function bindSlots(t, s, kind) {
  const n = s.values.length;
  const vars = new Array(n);
  for (let i = 0; i < n; i++) {
    const v = s.values[i];
    vars[i] = typeof v === 'number' ? numberLeafVar(t, kind, v) : leafVar(t, kind, asTensor(v, slotName(s, i)));
  }
  if (!s.map) return { vars, arg: vars[0] };
  const arg = {};
  for (let i = 0; i < n; i++) setOwn(arg, s.keys[i], vars[i]);
  return { vars, arg };
}

function checkRoot(root, where) {
  if (!(root instanceof Var)) {
    throw new Error(
      `${where}: the objective must return a Var built from this package's ops; got ${typeof root}. ` +
        'A plain number means the ops were bypassed somewhere, which breaks the chain.',
    );
  }
}

export function scalarRootError(where, shape) {
  return new Error(`${where}: the objective must return a scalar, got ${fmtShape(shape)}. Reduce it with sum() or mean() first.`);
}

/** Run the objective on a fresh tape: { t, params, inputs, root }. */
export function record(f, x, inputs, where, inputKind, kept = false) {
  // A map's keys and values as read, without making the object readOnce would.
  const params = slotsOf(readOnceLazily(x), 'parameter');
  inputs = readOnce(inputs);
  let ins = null;
  if (inputs !== undefined) {
    checkInputs(inputs, where);
    ins = slotsOf(inputs, 'input');
  }
  const t = evaluationTape(kept);
  const prev = current;
  setCurrent(t);
  try {
    const P = bindSlots(t, params, LEAF);
    const I = ins && bindSlots(t, ins, inputKind);
    let root = I ? f(P.arg, I.arg) : f(P.arg);
    checkRoot(root, where);
    if (root._tape !== t) root = leafVar(t, CONST, root.value);
    return { t, params, P, ins, I, root };
  } catch (e) {
    // A failed trace keeps nothing, kept or not.
    retire(t);
    throw e;
  } finally {
    setCurrent(prev);
  }
}

/**
 * Buffers for the gradient step, one per length, reused by every
 * evaluation: allocating typed arrays cost as much as the call on small
 * models. Safe to share, since gradients are copied out of them at once.
 */
const scratch = {
  idsBy: [],
  valuesBy: [],
  ids(n) {
    if (n > 64) return new Uint32Array(n);
    return (this.idsBy[n] ??= new Uint32Array(n));
  },
  values(n) {
    if (n > 1024) return new Float64Array(n);
    return (this.valuesBy[n] ??= new Float64Array(n));
  },
};

/** One eager evaluation: the value alone, or value and gradient. */
export function evaluate(f, x, inputs, wantGradient, where) {
  const { t, params, P, root } = record(f, x, inputs, where, CONST);
  try {
    if (!wantGradient) return toNested(root.value);
    const swept = t.externals !== null;
    if (swept) {
      if (!root.isScalar) throw scalarRootError(where, root.shape);
      sweep(t, root._id, null);
    }
    const vars = P.vars;
    const n = vars.length;
    // Forms first: nothing of the caller's runs between the core filling
    // the shared buffers and the gradients being copied out of them.
    const forms = params.map ? params.values.map(formOf) : formOf(params.values[0]);
    const ids = scratch.ids(n);
    let total = 0;
    for (let i = 0; i < n; i++) {
      ids[i] = vars[i]._id;
      total += sizeOf(vars[i].shape);
    }
    let flat = finished;
    let value;
    try {
      value = finish(t, root._id, swept, ids, total);
      if (value === undefined) {
        flat = scratch.values(total);
        value = N.tapeFinish(t.h, root._id, swept, ids, flat);
      }
      t.emptied = true;
    } catch (e) {
      throw new Error(`${where}: ${e.message}`);
    }
    if (!params.map) return { value, gradient: shapeGradient(forms, vars[0].shape, flat, 0) };
    const gradient = {};
    for (let i = 0, at = 0; i < n; i++) {
      const shape = vars[i].shape;
      setOwn(gradient, params.keys[i], shapeGradient(forms[i], shape, flat, at));
      at += sizeOf(shape);
    }
    return { value, gradient };
  } finally {
    retire(t);
  }
}

export function valueAndGrad(f) {
  if (typeof f !== 'function') throw new Error('valueAndGrad: expected a function');
  const vg = (x, inputs) => evaluate(f, x, inputs, true, 'valueAndGrad');
  vg.value = (x, inputs) => evaluate(f, x, inputs, false, 'valueAndGrad');
  return vg;
}

export function grad(f) {
  if (typeof f !== 'function') throw new Error('grad: expected a function');
  const g = (x, inputs) => evaluate(f, x, inputs, true, 'valueAndGrad').gradient;
  g.value = (x, inputs) => evaluate(f, x, inputs, false, 'valueAndGrad');
  return g;
}
