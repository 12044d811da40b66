// The tape and the Var graph the user sees: native tapes by id, the tape an
// op records on (the evaluation in progress, else an operand's, else the
// shared ambient one), leaves and constants, and the reverse sweep.

import { N, onCoreReplaced, replacements } from './binding.js';
import { MAX_VALUES, copyInto, fmtShape, isF64, isRow, isTensor, shapeOf, sizeOf } from './forms.js';
import { QUEUED_VALUES, discard, flush, pendingOn, queueMatrix, queueNumber, queueVector } from './queue.js';

export const CONST = 0;
export const LEAF = 1;
export const INPUT = 2;
/**
 * Outside any evaluation, ops record on the tape of their Var operands, and
 * new leaves on a shared tape. Once that holds this many nodes or values,
 * the next leaf starts a fresh one (the old one is freed when no Var holds
 * it): a graph under construction never straddles two tapes.
 */
const AMBIENT_NODES = 1 << 15;
const AMBIENT_VALUES = 1 << 22;

// ---------------------------------------------------------------- the tape

/** Frees the native tape of a Tape the garbage collector has taken. */
const tapeFinalizer = new FinalizationRegistry((id) => N.tapeFree(id));

/**
 * One native tape (by id): the graph of an evaluation. A tape made for a
 * single evaluation is retired when it ends and its memory reused by the
 * next; any other is freed when no Var holds it.
 */
class Tape {
  /** `id` names an empty native tape. */
  constructor(id = N.tapeNew(), finalize = true) {
    this.id = id;
    /** Nodes on the native tape, queued ones included; -1 when unknown (src/js/queue.js). */
    this.length = 0;
    this.live = true;
    this.nodes = 0;
    /** Hand-built nodes by id, whose closures the reverse sweep calls. */
    this.externals = null;
    /** Counts sweeps, so a Var knows whether its cached grad is current. */
    this.sweeps = 0;
    this.sweeping = false;
    /** Set once the core emptied it (N.tapeFinish), so retiring it needs no reset. */
    this.emptied = false;
    /** Number constants recorded on it lately, their Vars, and where the next one goes (`numberConst`). */
    this.constantValues = [];
    this.constantVars = [];
    this.nextConstant = 0;
    /** The core it was made in (binding.js, `replacements`). */
    this.core = replacements;
    if (finalize) tapeFinalizer.register(this, id, this);
  }

  /**
   * The native tape's id, for a direct call into the core: the nodes
   * queued for it are recorded first, and its length is then unknown.
   */
  get h() {
    if (pendingOn(this)) flush();
    this.length = -1;
    return this.id;
  }
}

/** Native tapes of finished evaluations, emptied and ready for the next. */
const spareTapes = [];
onCoreReplaced(() => {
  spareTapes.length = 0;
  ambient = null;
});

/** A tape for one evaluation, which `retire` must end (`kept` ones are freed by the GC). */
export function evaluationTape(kept) {
  return new Tape(spareTapes.pop(), kept);
}

export function retire(t) {
  t.live = false;
  tapeFinalizer.unregister(t); // a kept tape retired early is not freed twice
  discard(t);
  if (t.core !== replacements) return; // its native tape went with its core
  if (!t.emptied) N.tapeReset(t.id);
  if (spareTapes.length < 4) spareTapes.push(t.id);
  else N.tapeFree(t.id);
}

/** A node's value, copied by Rust into a Float64Array allocated here. */
function nodeValue(t, id, shape) {
  const out = new Float64Array(sizeOf(shape));
  N.tapeValue(t.h, id, out);
  return out;
}

/** A node's adjoint in a fresh Float64Array, or null when the last sweep gave it none. */
export function nodeAdjoint(t, id, shape) {
  const out = new Float64Array(sizeOf(shape));
  return N.tapeAdjoint(t.h, id, out) ? out : null;
}

function tapeOf(v) {
  if (!v._tape.live) {
    throw new Error('this Var belongs to an evaluation that has finished; read its value inside the objective');
  }
  return v._tape;
}

export let current = null;
let ambient = null;

/** Enter (or leave, with the previous value) an evaluation: ops then record on its tape. */
export function setCurrent(t) {
  current = t;
}

/** The tape an op records on: the evaluation in progress, else its first live Var operand's. */
export function tapeFor(a, b) {
  if (current !== null) return current;
  if (a instanceof Var && a._tape.live) return a._tape;
  if (b instanceof Var && b._tape.live) return b._tape;
  return ambient ?? leafTape();
}

export function tapeForAll(xs) {
  if (current !== null) return current;
  const v = xs.find((x) => x instanceof Var && x._tape.live);
  return v ? v._tape : (ambient ?? leafTape());
}

/** The tape a new leaf records on: the evaluation in progress, else the shared one, renewed when full. */
function leafTape() {
  if (current !== null) return current;
  if (ambient === null || ambient.nodes >= AMBIENT_NODES || N.tapeSize(ambient.h) >= AMBIENT_VALUES) ambient = new Tape();
  return ambient;
}

const BUILD = Symbol('internal');
/** The parents of every leaf made here: one frozen list, not one each. */
const NO_PARENTS = Object.freeze([]);

export class Var {
  constructor(value, parents = [], backward = null, recompute = null, spec = null) {
    this.parents = parents;
    this.spec = spec;
    this._tape = null;
    this._id = 0;
    this._value = null;
    this._shape = null;
    this._closure = null;
    this._grad = null;
    this._gradSweep = -1;
    if (value === BUILD) return;
    // Built by hand: a leaf, or a node with a JavaScript backward closure.
    const t = parents.length === 0 ? leafTape() : tapeForAll(parents);
    const v = asTensor(value);
    this._tape = t;
    this._value = v;
    this._shape = v.shape;
    if (parents.length === 0) {
      this._id = pushLeaf(t, LEAF, v);
      return;
    }
    this.parents = parents.map((p) => lift(t, p));
    const ids = Uint32Array.from(this.parents, (p) => p._id);
    const s = v.shape;
    this._id = N.tapeExternal(t.h, v.data, s.length, s[0] ?? 0, s[1] ?? 0, ids);
    this._closure = typeof backward === 'function' ? backward : () => [];
    (t.externals ??= new Map()).set(this._id, this);
    t.nodes++;
  }

  get value() {
    if (this._value === null) this._value = { data: nodeValue(tapeOf(this), this._id, this.shape), shape: this.shape };
    return this._value;
  }

  get data() {
    return this.value.data;
  }

  get shape() {
    if (this._shape === null) this._shape = N.tapeShape(tapeOf(this).h, this._id);
    return this._shape;
  }

  get isScalar() {
    return this.shape.length === 0;
  }

  get grad() {
    const t = tapeOf(this);
    if (t.sweeps === 0) return null;
    // Read from a hand-built node's backward: what the sweep has so far, not kept.
    if (t.sweeping) return nodeAdjoint(t, this._id, this.shape);
    if (this._gradSweep !== t.sweeps) {
      this._grad = nodeAdjoint(t, this._id, this.shape);
      this._gradSweep = t.sweeps;
    }
    return this._grad;
  }

  backward(seed) {
    sweep(tapeOf(this), this._id, seed === undefined ? null : asTensor(seed, 'seed').data);
  }
}

function pushLeaf(t, kind, v) {
  const s = v.shape;
  t.nodes++;
  if (s.length === 0 && v.data.length === 1) return queueNumber(t, kind, v.data[0]);
  if (s.length === 1 && v.data.length === s[0] && s[0] <= QUEUED_VALUES) return queueVector(t, kind, v.data);
  if (s.length === 2 && v.data.length === s[0] * s[1] && v.data.length > 0 && v.data.length <= QUEUED_VALUES) {
    return queueMatrix(t, kind, v.data, s, 'value');
  }
  return N.tapeLeaf(t.h, kind, v.data, s.length, s[0] ?? 0, s[1] ?? 0);
}

export function leafVar(t, kind, v) {
  const x = new Var(BUILD, NO_PARENTS, null, null, null);
  x._tape = t;
  x._value = v;
  x._shape = v.shape;
  x._id = pushLeaf(t, kind, v);
  return x;
}

/** A leaf of kind `kind` for the number x, recorded without a tensor. */
export function numberLeafVar(t, kind, x) {
  return numberVar(t, queueNumber(t, kind, x));
}

/** How many number constants a tape remembers, the latest first out. */
const KEPT_CONSTANTS = 8;

/**
 * The number constant x on tape t. The last few distinct values are
 * remembered, and an op using one again shares its node and Var (as the
 * core would merge them): a loop's constants are recorded once. 0 and NaN
 * are recorded each time, as === would make -0 and 0 one (and no NaN one).
 */
export function numberConst(t, x) {
  const nums = t.constantValues;
  if (x !== 0) {
    for (let i = 0; i < nums.length; i++) if (nums[i] === x) return t.constantVars[i];
  }
  const v = numberVar(t, queueNumber(t, CONST, x));
  if (x !== 0 && x === x) {
    const at = nums.length < KEPT_CONSTANTS ? nums.length : t.nextConstant++ % KEPT_CONSTANTS;
    nums[at] = x;
    t.constantVars[at] = v;
  }
  return v;
}

/** The Var of a number constant already recorded as node `id`. */
export function numberVar(t, id) {
  return queuedLeafVar(t, id, []);
}

/** The Var of a leaf of shape `shape` already recorded as node `id`, its value left in the core. */
function queuedLeafVar(t, id, shape) {
  const v = new Var(BUILD, NO_PARENTS, null, null, null);
  v._tape = t;
  v._shape = shape;
  v._id = id;
  t.nodes++;
  return v;
}

/**
 * Arrays an objective captures (a design matrix, observations) are converted
 * once and kept here. Each later use reads the array again and compares,
 * which costs about a third less than converting it anew, so an array edited
 * in place is still noticed. Small arrays are simply converted.
 */
const converted = new WeakMap();
const CACHE_FROM = 64;

function sameContents(x, data) {
  if (!isRow(x[0])) {
    // Object.is: an edit from 0 to -0 is a change (and NaN equals NaN).
    for (let i = 0; i < x.length; i++) if (!Object.is(x[i], data[i])) return false;
    return true;
  }
  const n = x[0].length;
  for (let i = 0, k = 0; i < x.length; i++) {
    const row = x[i];
    if (row.length !== n) return false;
    for (let j = 0; j < n; j++, k++) if (!Object.is(row[j], data[k])) return false;
  }
  return true;
}

/** `x` as a Var on tape `t`: a Var of another tape, or a plain value, becomes a constant. */
export function lift(t, x, name = 'value') {
  if (x instanceof Var) return x._tape === t ? x : leafVar(t, CONST, x.value);
  if (typeof x === 'number') return numberConst(t, x);
  if (!Array.isArray(x)) return leafVar(t, CONST, asTensor(x, name));
  if (x.length > 0 && x.length <= QUEUED_VALUES && !isRow(x[0])) {
    // A short list of numbers (data an objective captures) goes straight
    // into the queue; its value is read back from the core if ever asked.
    const id = queueVector(t, CONST, x);
    if (id >= 0) return queuedLeafVar(t, id, [x.length]);
  }
  const shape = shapeOf(x, name);
  const n = sizeOf(shape);
  if (shape.length === 2 && n > 0 && n <= QUEUED_VALUES) return queuedLeafVar(t, queueMatrix(t, CONST, x, shape, name), shape);
  // A sparse array's length is not its data: refuse what no value can hold
  // before allocating for it.
  if (n > MAX_VALUES) throw new Error(`${name} of shape ${fmtShape(shape)} is too large`);
  let data = n >= CACHE_FROM ? converted.get(x) : undefined;
  if (data === undefined || data.length !== n || !sameContents(x, data)) {
    data = new Float64Array(n);
    copyInto(x, data, 0, name);
    if (n >= CACHE_FROM) converted.set(x, data);
  }
  return leafVar(t, CONST, { data, shape });
}

export function opVar(t, id, parents, spec) {
  const v = new Var(BUILD, parents, null, null, spec);
  v._tape = t;
  v._id = id;
  t.nodes++;
  return v;
}

/** A contribution returned by a hand-built node's closure, as a Float64Array. */
function contribution(c) {
  if (typeof c === 'number') return Float64Array.of(c);
  if (c instanceof Var) return c.data;
  return asTensor(c, 'contribution').data;
}

/** Run a reverse sweep on `t` from node `id`, calling hand-built closures on the way. */
export function sweep(t, id, seed) {
  // The core holds one sweep per tape: a second one started from a
  // hand-built node's closure would overwrite the first's adjoints.
  if (t.sweeping) throw new Error("backward() cannot run inside a hand-built node's backward on the same graph");
  t.sweeping = true;
  try {
    t.sweeps++;
    let ext = N.tapeBackward(t.h, id, seed);
    while (ext >= 0) {
      const node = t.externals.get(ext);
      const parts = node._closure(nodeAdjoint(t, ext, node.shape)) ?? [];
      for (let k = 0; k < node.parents.length; k++) {
        if (parts[k] != null) N.tapeAccumulate(t.h, node.parents[k]._id, contribution(parts[k]));
      }
      ext = N.tapeResume(t.h);
    }
  } finally {
    t.sweeping = false;
  }
}

/** Any of the value forms as a tensor. Here rather than in forms.js because it unwraps a Var. */
export function asTensor(x, name = 'value') {
  if (x instanceof Var) return x.value;
  if (isTensor(x)) {
    shapeOf(x, name); // its shape checked, so no entry crosses as a string
    return x;
  }
  if (isF64(x)) return { data: x, shape: shapeOf(x, name) };
  const shape = shapeOf(x, name);
  if (sizeOf(shape) > MAX_VALUES) throw new Error(`${name} of shape ${fmtShape(shape)} is too large`);
  const data = new Float64Array(sizeOf(shape));
  copyInto(x, data, 0, name);
  return { data, shape };
}

export function variable(x, name = 'value') {
  return leafVar(leafTape(), LEAF, asTensor(x, name));
}
