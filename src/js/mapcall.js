// A compiled call (or its `.value`) with a {name: value} map of numbers and
// flat arrays of numbers (plain or Float64Array), and inputs, if any, in
// the forms below: a sampler's or an optimizer's call. Its values go
// straight into the plan's bound buffer, and its gradient object is made in
// one step, without the per-slot bookkeeping of the general path
// (`Replay.run`), which any other call takes. Same plan, same results.

import { N } from './binding.js';
import { isF64, plainArray, sizeOf, typedLength } from './forms.js';

/** The most parameters for which the gradient's maker is compiled (see `maker`). */
const COMPILED_UP_TO = 256;

/**
 * A function (grads, base) → the gradient object, its keys in the traced
 * order, each value read from grads at base + its offset: a number, or a
 * plain array for a vector. Compiled once per plan from an object literal,
 * which V8 builds from one boilerplate, a fifth of a small model's call
 * (1.21 → 1.01 µs); where code cannot be compiled (a page's Content
 * Security Policy) or for many keys, a copy of a template filled key by key.
 * Keys are written as JSON string literals, and `__proto__` never comes
 * here (see `stateOf`), so the literal's keys are exactly the plan's.
 */
function maker(keys, shapes, offsets) {
  const field = (j) => (shapes[j].length === 0 ? `g[b + ${offsets[j]}]` : `plainArray(g, b + ${offsets[j]}, b + ${offsets[j] + shapes[j][0]})`);
  if (keys.length <= COMPILED_UP_TO) {
    const body = `return (g, b) => ({ ${keys.map((k, j) => `${JSON.stringify(k)}: ${field(j)}`).join(', ')} });`;
    try {
      return new Function('plainArray', body)(plainArray);
    } catch {
      // No code generation here: the template below.
    }
  }
  const template = {};
  for (const k of keys) template[k] = 0;
  return (g, b) => {
    const out = { ...template };
    for (let j = 0; j < keys.length; j++) {
      const at = b + offsets[j];
      out[keys[j]] = shapes[j].length === 0 ? g[at] : plainArray(g, at, at + shapes[j][0]);
    }
    return out;
  };
}

/**
 * A function (x, dst, b) → whether each of x's fields fits (a number, or n
 * numbers for a [n] parameter), writing each at b + its offset. Compiled
 * once per plan, like `maker`: fields read by name load through inline
 * caches, which cut eight schools' 1 024-point batch from 240 to 168 µs
 * against reads by the for-in key. null where code cannot be compiled.
 */
function reader(keys, shapes, offsets) {
  if (keys.length > COMPILED_UP_TO) return null;
  const field = (k, j) =>
    shapes[j].length === 0
      ? `const v${j} = x[${JSON.stringify(k)}]; if (typeof v${j} !== 'number') return false; dst[b + ${offsets[j]}] = v${j};`
      : `if (!put(x[${JSON.stringify(k)}], shapes[${j}], dst, b + ${offsets[j]})) return false;`;
  try {
    return new Function('put', 'shapes', `return (x, dst, b) => { ${keys.map(field).join(' ')} return true; };`)(put, shapes);
  } catch {
    return null;
  }
}

/**
 * This path's state for a plan, made at its first call and kept on the
 * Replay: null when the plan does not fit (a non-scalar root, a matrix
 * parameter, a key `__proto__`), else the gradient's maker and a buffer for
 * the slots of a call whose keys come in another order.
 */
function stateOf(replay) {
  if (replay.mapcall === undefined) {
    const fits =
      replay.map &&
      replay.rootShape.length === 0 &&
      !replay.keys.includes('__proto__') && // as a key of a literal or an assignment, it would set the prototype
      replay.shapes.every((s) => s.length <= 1);
    replay.mapcall = fits
      ? {
          make: maker(replay.keys, replay.shapes, replay.offsets),
          read: reader(replay.keys, replay.shapes, replay.offsets),
          slots: new Int32Array(replay.keys.length),
          inputSlot: new Map(replay.inputKeys.map((k, j) => [k, j])),
        }
      : null;
  }
  return replay.mapcall;
}

/** Write v at dst[at...]: a number for shape [], n numbers (an array or a Float64Array) for [n]; false if it is not. */
function put(v, shape, dst, at) {
  if (shape.length === 0) {
    if (typeof v !== 'number') return false;
    dst[at] = v;
    return true;
  }
  if (isF64(v)) {
    if (typedLength(v) !== shape[0]) return false;
    dst.set(v, at);
    return true;
  }
  // [] is refused by the general path (SPEC: a non-empty array).
  if (!Array.isArray(v) || v.length !== shape[0] || v.length === 0) return false;
  for (let e = 0; e < v.length; e++) {
    const x = v[e];
    if (typeof x !== 'number') return false;
    dst[at + e] = x;
  }
  return true;
}

/**
 * Write input v, as `readOnce` read it, at dst[at...]: `put`'s forms, a
 * tensor of exactly this shape, or rows (arrays of numbers or
 * Float64Arrays) for [m, n]; false if it is none of these.
 */
function putInput(v, shape, dst, at) {
  if (v !== null && typeof v === 'object' && !Array.isArray(v) && !isF64(v)) {
    // A tensor, read once into a plain { data, shape } (forms.js, readValueOnce).
    const { data, shape: s } = v;
    if (!isF64(data) || !Array.isArray(s) || s.length !== shape.length) return false;
    for (let d = 0; d < s.length; d++) if (s[d] !== shape[d]) return false;
    if (typedLength(data) !== sizeOf(shape)) return false;
    dst.set(data, at);
    return true;
  }
  if (shape.length < 2) return put(v, shape, dst, at);
  const [m, n] = shape;
  if (!Array.isArray(v) || v.length !== m) return false;
  for (let i = 0; i < m; i++) {
    if (!put(v[i], [n], dst, at + i * n)) return false;
  }
  return true;
}

/** Write every input of the ReadMap `ins` into the bound buffer; false if one does not fit. */
function putInputs(replay, state, ins) {
  const { keys, vals } = ins;
  const own = replay.inputKeys;
  if (keys.length !== own.length) return false;
  const np = replay.shapes.length;
  for (let i = 0; i < keys.length; i++) {
    const j = keys[i] === own[i] ? i : state.inputSlot.get(keys[i]);
    if (j === undefined) return false;
    // Own keys are distinct and as many as the plan's: each slot is written once.
    if (!putInput(vals[i], replay.inputShapes[j], replay.flat, replay.offsets[np + j])) return false;
  }
  return true;
}

/**
 * Write a `ReadMap` of parameters and one of inputs (or undefined) into
 * the plan's bound buffer: whether the keys came in the traced order, or
 * undefined when they do not fit this path (then nothing may be run).
 */
function writeMap(replay, state, r, ins) {
  const { keys, vals } = r;
  const n = keys.length;
  const own = replay.keys;
  if (n !== own.length || (ins !== undefined) !== replay.hasInputs) return undefined;
  // A Proxy's trap that `put` runs (on its length or entries) may call this
  // function again, which writes the same buffer: then the general path,
  // which checks every form before it writes.
  const writes = ++replay.writes;
  const { shapes, offsets, flat } = replay;
  const slots = state.slots;
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
  if (ins !== undefined && !putInputs(replay, state, ins)) return undefined;
  return replay.writes === writes ? inOrder : undefined;
}

/**
 * `replay.run` for a `ReadMap` of parameters and one of inputs (or
 * undefined), or undefined when they do not fit this path.
 */
export function runMap(replay, r, ins) {
  const state = stateOf(replay);
  const inOrder = state === null ? undefined : writeMap(replay, state, r, ins);
  if (inOrder === undefined) return undefined;
  const value = replay.runBound();
  const grads = replay.gradFlat;
  if (inOrder) return { value, gradient: state.make(grads, 0) };
  // The caller's key order.
  const { keys } = r;
  const { shapes, offsets } = replay;
  const gradient = {};
  for (let i = 0; i < keys.length; i++) {
    const j = state.slots[i];
    gradient[keys[i]] = shapes[j].length === 0 ? grads[offsets[j]] : plainArray(grads, offsets[j], offsets[j] + shapes[j][0]);
  }
  return { value, gradient };
}

/** `replay.value` the same way: the value alone, or undefined when they do not fit. */
export function valueMap(replay, r, ins) {
  const state = stateOf(replay);
  if (state === null || writeMap(replay, state, r, ins) === undefined) return undefined;
  return replay.valueBound();
}

// ---------------------------------------------------------------- batches

/**
 * Write batch point x at dst[base...] if it is such a map with its keys in
 * the traced order; false (having written nothing that matters) otherwise.
 */
export function packMap(replay, x, dst, base) {
  const state = stateOf(replay);
  if (state === null || x === null || typeof x !== 'object' || Array.isArray(x)) return false;
  const own = replay.keys;
  if (state.read !== null) {
    // The keys first, then the values by name (see `reader`).
    let j = 0;
    for (const key in x) if (j === own.length || key !== own[j++]) return false;
    return j === own.length && state.read(x, dst, base);
  }
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
  return { value: values[i], gradient: replay.mapcall.make(grads, i * replay.width()) };
}
