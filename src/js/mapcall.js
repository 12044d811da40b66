// A compiled call with a {name: value} map of numbers and flat arrays of
// numbers (plain or Float64Array), and no inputs: a sampler's call. Its values go straight into
// the plan's bound buffer, and its gradient is a copy of a template object
// filled in place, without the per-slot bookkeeping of the general path
// (`Replay.run`), which any other call takes. Same plan, same results.

import { N } from './binding.js';
import { shapeGradient } from './forms.js';

/** The gradient template of a plan this path serves (its keys in traced order), or null. */
function template(replay) {
  const fits =
    replay.map &&
    !replay.hasInputs &&
    replay.rootShape.length === 0 &&
    !replay.keys.includes('__proto__') && // assigning it would set the prototype
    replay.shapes.every((s) => s.length <= 1);
  if (!fits) return null;
  const t = {};
  for (const k of replay.keys) t[k] = 0;
  return t;
}

/** Write v at dst[at...]: a number for shape [], n numbers (an array or a Float64Array) for [n]; false if it is not. */
function put(v, shape, dst, at) {
  if (shape.length === 0) {
    if (typeof v !== 'number') return false;
    dst[at] = v;
    return true;
  }
  if (v instanceof Float64Array) {
    if (v.length !== shape[0]) return false;
    dst.set(v, at);
    return true;
  }
  if (!Array.isArray(v) || v.length !== shape[0]) return false;
  for (let e = 0; e < v.length; e++) {
    const x = v[e];
    if (typeof x !== 'number') return false;
    dst[at + e] = x;
  }
  return true;
}

/** The plan's template, made at the first call. */
function templateOf(replay) {
  if (replay.mapTemplate === undefined) {
    replay.mapTemplate = template(replay);
    replay.mapSlots = new Int32Array(replay.keys?.length ?? 0);
  }
  return replay.mapTemplate;
}

/** `replay.run` for a `ReadMap`, or undefined when the map does not fit this path. */
export function runMap(replay, r) {
  const tpl = templateOf(replay);
  const { keys, vals } = r;
  const n = keys.length;
  const own = replay.keys;
  if (tpl === null || n !== own.length) return undefined;
  const { shapes, offsets, flat } = replay;
  const slots = replay.mapSlots;
  let inOrder = true;
  for (let i = 0; i < n; i++) {
    let j = i;
    if (keys[i] !== own[i]) {
      inOrder = false;
      j = replay.slot.get(keys[i]);
      if (j === undefined) return undefined;
    }
    // Own keys are distinct and as many as the plan's: each slot is written once.
    if (!put(vals[i], shapes[j], flat, offsets[j])) return undefined;
    slots[i] = j;
  }
  const value = N.planRunBound(replay.native());
  const grads = replay.gradFlat;
  const gradient = inOrder ? { ...tpl } : {};
  for (let i = 0; i < n; i++) {
    const j = slots[i];
    gradient[keys[i]] = shapes[j].length === 0 ? grads[offsets[j]] : shapeGradient('flat', shapes[j], grads, offsets[j]);
  }
  return { value, gradient };
}

// ---------------------------------------------------------------- batches

/**
 * Write batch point x at dst[base...] if it is such a map with its keys in
 * the traced order; false (having written nothing that matters) otherwise.
 */
export function packMap(replay, x, dst, base) {
  const tpl = templateOf(replay);
  if (tpl === null || x === null || typeof x !== 'object' || Array.isArray(x)) return false;
  const own = replay.keys;
  const { shapes, offsets } = replay;
  // for-in rather than Object.keys: V8 reads a point's fields by its enum
  // cache, and the points of a batch share one. Own keys come first, in
  // Object.keys order; an inherited enumerable one makes a key too many.
  let j = 0;
  for (const key in x) {
    if (j === own.length || key !== own[j]) return false;
    if (!put(x[key], shapes[j], dst, base + offsets[j])) return false;
    j++;
  }
  return j === own.length;
}

/** Point i's result, for a point `packMap` wrote. */
export function mapPoint(replay, values, grads, i) {
  const base = i * replay.width();
  const { keys, shapes, offsets } = replay;
  const gradient = { ...replay.mapTemplate };
  for (let j = 0; j < keys.length; j++) {
    const at = base + offsets[j];
    gradient[keys[j]] = shapes[j].length === 0 ? grads[at] : shapeGradient('flat', shapes[j], grads, at);
  }
  return { value: values[i], gradient };
}
