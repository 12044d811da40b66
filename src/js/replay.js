// Running a native plan: the Replay that feeds a plan its arguments and
// turns its results back into the caller's forms. Shared by compile and
// compileFromJSON.

import { N, onCoreReplaced } from './binding.js';
import { onClaim, own } from './queue.js';
import { MAX_BATCH_VALUES, pointError } from './batching.js';
import { mapPoint, packMap } from './mapcall.js';
import { hold, onReplicas, revive } from './budget.js';
import { scalarRootError } from './drivers.js';
import { sameShape } from './signature.js';
import {
  copyInto,
  fmtShape,
  formOf,
  isF64,
  isMapForm,
  isTensor,
  lengthOf,
  readOnce,
  setOwn,
  shapeGradient,
  shapeOf,
  sizeOf,
  toNested,
  typedLength,
} from './forms.js';

const NO_VALUES = new Float64Array(0);
/**
 * Typed arrays up to this many values are copied into the bound flat
 * buffer; longer ones cross by reference. Handing a typed array to the core
 * costs about half a microsecond a call, copying 1 024 values about as much.
 */
const COPIED_UP_TO = 1024;
/**
 * The same, for the core installed: every length where it copies the arguments anyway
 * (WebAssembly, whose memory no typed array of JavaScript's is in). There a
 * typed array by reference was copied three times, the bound buffer with
 * it: a 20 000-value input made a compiled call 5× an eager one.
 */
const copiedUpTo = () => (N.copiesArguments ? Infinity : COPIED_UP_TO);

/** Results of up to this many values go through a buffer kept from call to call (`Replay.reused`). */
const REUSED_UP_TO = 1 << 14;
/**
 * The native plan the core runs on a call with no argument
 * (N.planRunSelected): napi spends about 70 ns on a call's arguments, a
 * compiled call's floor twice over, so a plan called again and again is
 * selected once.
 */
let selected = null;
const forget = () => {
  selected = null;
};
onCoreReplaced(forget);
onClaim(forget);

/**
 * A native plan with what it takes to feed it: the slots' names, shapes
 * and fixed offsets in one flat buffer reused across calls.
 */
export class Replay {
  /** `rebuild(into)` makes the same native plan again after the budget released it (src/js/budget.js, build). */
  constructor(plan, rebuild, map, keys, shapes, inputKeys, inputShapes, rootShape) {
    /** Its native plan, in the Held that the budget queues (src/js/budget.js): never this Replay. */
    this.held = hold(plan, this);
    this.rebuild = rebuild;
    this.map = map;
    this.keys = keys;
    this.shapes = shapes;
    this.inputKeys = inputKeys;
    this.inputShapes = inputShapes;
    this.rootShape = rootShape;
    const all = shapes.concat(inputShapes);
    this.offsets = [];
    let total = 0;
    for (const s of all) {
      this.offsets.push(total);
      total += sizeOf(s);
    }
    this.layout = new Int32Array(all.length);
    this.gradLayout = new Int32Array(shapes.length);
    // Parameters come first in the flat layout, so their gradients fit in its head.
    // One buffer holds both, so one length tells whether it was detached (`select`).
    const gradLength = this.offsets[shapes.length] ?? total;
    const buffer = new ArrayBuffer(8 * (total + gradLength));
    this.flat = new Float64Array(buffer, 0, total);
    this.gradFlat = new Float64Array(buffer, 8 * total, gradLength);
    this.flatLength = total;
    // Bound once: a call with everything in these two passes neither.
    N.planBind(plan, this.flat, this.gradFlat);
    /** Whether it was built for calls with an inputs map (possibly empty). */
    this.hasInputs = inputShapes.length > 0;
    /** One parameter not in a map, and no inputs. */
    this.single = !map && shapes.length === 1 && inputShapes.length === 0;
    this.slot = new Map((keys ?? []).map((k, i) => [k, i]));
    /** The sampler's path's state (src/js/mapcall.js), made at its first call; null where it does not apply. */
    this.mapcall = undefined;
    /** How many slots calls have written into `flat`: a call that sees it move by more than its own was re-entered. */
    this.writes = 0;
    this.slots = all.length;
    this.paramNames = map ? keys.map((k) => `parameter "${k}"`) : ['parameter'];
    this.inputNames = inputKeys.map((k) => `input "${k}"`);
  }

  /** The native plan run on the bound buffers (selected first if it is not); its value. */
  runBound() {
    this.select();
    return N.planRunSelected();
  }

  /** `runBound` forward only, for a scalar root: its value, no gradient. */
  valueBound() {
    this.select();
    return N.planValueSelected();
  }

  select() {
    // The core reads and writes flat and gradFlat through pointers bound
    // once. Only a patched built-in can hand them out, but one that detached
    // their buffer must meet an Error here, not have the core touch the
    // memory it left.
    if (typedLength(this.flat) !== this.flatLength) {
      throw new Error("the package's own buffers were detached (by a patched built-in)");
    }
    const h = this.native();
    own(); // another copy of the package may have selected its own plan since
    if (h !== selected) {
      N.planSelect(h);
      selected = h;
    }
  }

  /** The native plan, rebuilt if the budget released it (src/js/budget.js). */
  native() {
    const h = this.held;
    if (revive(h, this.rebuild)) N.planBind(h.plan, this.flat, this.gradFlat);
    return h.plan;
  }

  /** Whether this call's arguments have the shape signature the plan was built for. */
  fits(x, inputs) {
    if (this.map) {
      if (!isMapForm(x) || !this.fitsMap(x, this.keys, this.shapes)) return false;
    } else if (!sameShape(x, this.shapes[0])) {
      return false;
    }
    if (inputs === undefined || !this.hasInputs) return inputs === undefined && !this.hasInputs;
    return isMapForm(inputs) && this.fitsMap(inputs, this.inputKeys, this.inputShapes);
  }

  fitsMap(x, keys, shapes) {
    for (let i = 0; i < keys.length; i++) {
      if (!sameShape(x[keys[i]], shapes[i])) return false;
    }
    return Object.keys(x).length === keys.length;
  }

  /** Put slot i's value in place: in the flat buffer, or as a view read in place. */
  feed(i, v, name, views) {
    this.writes++; // see mapcall.js, runMap
    const shape = i < this.shapes.length ? this.shapes[i] : this.inputShapes[i - this.shapes.length];
    const data = isF64(v) ? v : isTensor(v) ? v.data : null;
    if (data !== null) {
      const n = typedLength(data);
      if (n !== sizeOf(shape)) throw new Error(`data length ${n} does not match shape ${fmtShape(shape)}`);
      if (n <= copiedUpTo()) {
        this.flat.set(data, this.offsets[i]);
        this.layout[i] = this.offsets[i];
        return;
      }
      views.push(data);
      this.layout[i] = -views.length;
      return;
    }
    shapeOf(v, name);
    copyInto(v, this.flat, this.offsets[i], name);
    this.layout[i] = this.offsets[i];
  }

  /**
   * Feed every slot; the views to pass beside the flat buffer, or null
   * when another call wrote the buffer meanwhile (then run `aside()`).
   */
  feedAll(x, inputs) {
    const start = this.writes;
    const views = [];
    const np = this.shapes.length;
    if (this.map) {
      for (let i = 0; i < np; i++) this.feed(i, x[this.keys[i]], this.paramNames[i], views);
    } else {
      this.feed(0, x, 'parameter', views);
    }
    for (let j = 0; j < this.inputKeys.length; j++) this.feed(np + j, inputs[this.inputKeys[j]], this.inputNames[j], views);
    return this.writes === start + this.slots ? views : null;
  }

  run(x, inputs, where) {
    if (this.rootShape.length !== 0) {
      this.feedAll(x, inputs); // its errors first, as before
      throw scalarRootError(where, this.rootShape);
    }
    // The sampler's case: one parameter, a number, plain arrays or a short
    // Float64Array, no inputs; no view lists, no per-slot bookkeeping.
    if (this.single && inputs === undefined && typeof x === 'number') {
      this.flat[0] = x;
      const value = this.runBound();
      return { value, gradient: this.gradFlat[0] };
    }
    if (this.single && inputs === undefined && (Array.isArray(x) || (isF64(x) && typedLength(x) <= copiedUpTo()))) {
      const start = this.writes;
      this.feed(0, x, 'parameter', null);
      if (this.writes !== start + 1) return this.aside().run(x, inputs, where);
      const value = this.runBound();
      return { value, gradient: shapeGradient(formOf(x), this.shapes[0], this.gradFlat, 0) };
    }
    const views = this.feedAll(x, inputs);
    if (views === null) return this.aside().run(x, inputs, where);
    const np = this.shapes.length;
    const values = this.map ? this.keys.map((k) => x[k]) : [x];
    // Tensor-form parameters of more than COPIED_UP_TO values get their
    // gradient written by Rust straight into a fresh Float64Array; every
    // other goes through gradFlat, copied out in its form.
    const gradViews = [];
    const gradLayout = this.gradLayout;
    let flatGradients = false;
    for (let i = 0; i < np; i++) {
      if (isTensor(values[i]) && sizeOf(this.shapes[i]) > COPIED_UP_TO) {
        gradViews.push(new Float64Array(sizeOf(this.shapes[i])));
        gradLayout[i] = -gradViews.length;
      } else {
        gradLayout[i] = this.offsets[i];
        flatGradients = true;
      }
    }
    // Reused across calls: these gradients are copied out into plain numbers and arrays.
    const gradFlat = flatGradients ? this.gradFlat : NO_VALUES;
    const value =
      views.length === 0 && gradViews.length === 0
        ? this.runBound()
        : N.planRun(this.native(), [this.flat, this.layout, ...views], [gradFlat, gradLayout, ...gradViews]);
    const grads = new Array(np);
    for (let i = 0; i < np; i++) {
      const at = gradLayout[i];
      grads[i] =
        at < 0 ? { data: gradViews[-at - 1], shape: [...this.shapes[i]] } : shapeGradient(formOf(values[i]), this.shapes[i], gradFlat, at);
    }
    if (!this.map) return { value, gradient: grads[0] };
    return { value, gradient: this.inCallerOrder(x, (j) => grads[j]) };
  }

  /**
   * This replay on buffers of its own, for a call that was called again
   * while it read its arguments (a Proxy's trap, a getter): that inner
   * call wrote the bound buffers, so this one feeds anew beside them and
   * runs through the argument lists, never the bound buffers. Same plan,
   * same bits.
   */
  aside() {
    const aside = Object.create(this);
    aside.flat = new Float64Array(this.flat.length);
    aside.layout = Int32Array.from(this.offsets.slice(0, this.layout.length));
    aside.gradFlat = new Float64Array(this.gradFlat.length);
    aside.gradLayout = Int32Array.from(this.offsets.slice(0, this.gradLayout.length));
    aside.native = () => this.native();
    aside.runBound = () => N.planRun(this.native(), [aside.flat, aside.layout], [aside.gradFlat, aside.gradLayout]);
    aside.valueBound = () => {
      const out = new Float64Array(1);
      N.planForward(this.native(), [aside.flat, aside.layout], [out]);
      return out[0];
    };
    return aside;
  }

  /**
   * A map of results keyed as the caller's map `x` orders its keys, which
   * may differ from the traced order: `at(j, key)` gives slot j's.
   */
  inCallerOrder(x, at) {
    const out = {};
    const order = Object.keys(x);
    for (let n = 0; n < order.length; n++) {
      const k = order[n];
      setOwn(out, k, at(this.keys[n] === k ? n : this.slot.get(k), k));
    }
    return out;
  }

  value(x, inputs) {
    const views = this.feedAll(x, inputs);
    if (views === null) return this.aside().value(x, inputs);
    if (views.length === 0 && this.rootShape.length === 0) return this.valueBound();
    const out = this.reused('value', sizeOf(this.rootShape));
    N.planForward(this.native(), [this.flat, this.layout, ...views], [out]);
    return toNested({ data: out, shape: this.rootShape });
  }

  // ------------------------------------------------ many points per call (docs/API.md "Many points per call")

  /** `call(pool)` on the plan's replicas for batch and async calls (src/batch.rs), made at the first. */
  replicas(call) {
    return onReplicas(this.held, this.native(), call);
  }

  /**
   * A buffer of n values for results the core writes and a call copies out
   * before any code of the caller's runs: kept for the next call if small.
   */
  reused(what, n) {
    if (n > REUSED_UP_TO) return new Float64Array(n);
    const kept = (this._reused ??= {});
    if (kept[what]?.length !== n) kept[what] = new Float64Array(n);
    return kept[what];
  }

  /** Values one point's parameters take. */
  width() {
    return this.offsets[this.shapes.length] ?? this.flat.length;
  }

  /** Whether a point's parameters have the plan's shapes. */
  fitsParams(x) {
    return this.map ? isMapForm(x) && this.fitsMap(x, this.keys, this.shapes) : sameShape(x, this.shapes[0]);
  }

  /** Throw the error a single call would give for this point's forms, if any. */
  checkForms(x) {
    if (!this.map) {
      shapeOf(x, 'parameter');
      return;
    }
    if (!isMapForm(x)) throw new Error('parameter must be a {name: value} map, like the plan it was built for');
    for (const k of Object.keys(x)) shapeOf(x[k], `parameter "${k}"`);
  }

  /** Write slot i's value (shape already checked) into dst at off. */
  packSlot(i, v, name, dst, off) {
    if (typeof v === 'number') {
      dst[off] = v;
      return;
    }
    const data = isF64(v) ? v : isTensor(v) ? v.data : null;
    if (data !== null) {
      const shape = i < this.shapes.length ? this.shapes[i] : this.inputShapes[i - this.shapes.length];
      if (lengthOf(data) !== sizeOf(shape)) throw new Error(`data length ${lengthOf(data)} does not match shape ${fmtShape(shape)}`);
      dst.set(data, off);
      return;
    }
    shapeOf(v, name);
    copyInto(v, dst, off, name);
  }

  packPoint(x, dst, base) {
    if (!this.map) {
      this.packSlot(0, x, 'parameter', dst, base);
      return;
    }
    for (let j = 0; j < this.keys.length; j++) this.packSlot(j, x[this.keys[j]], this.paramNames[j], dst, base + this.offsets[j]);
  }

  /** The inputs into `out` from `at` on (a new array of them unless given). */
  packInputs(inputs, out = new Float64Array(this.flat.length - this.width()), at = 0) {
    const np = this.shapes.length;
    const from = this.width() - at;
    for (let j = 0; j < this.inputKeys.length; j++) {
      this.packSlot(np + j, inputs[this.inputKeys[j]], this.inputNames[j], out, this.offsets[np + j] - from);
    }
    return out;
  }

  /** Point i's value and gradient, in the forms of x (the point, or its snapshot). */
  unpackPoint(x, values, grads, i) {
    const base = i * this.width();
    if (!this.map) return { value: values[i], gradient: this.gradientIn(0, x, grads, base) };
    return { value: values[i], gradient: this.inCallerOrder(x, (j, k) => this.gradientIn(j, x[k], grads, base + this.offsets[j])) };
  }

  gradientIn(j, v, src, off) {
    if (typeof v === 'number') return src[off];
    const form = formOf(v);
    const shape = this.shapes[j];
    if (form === 'tensor') return { data: src.slice(off, off + sizeOf(shape)), shape: [...shape] };
    return shapeGradient(form, shape, src, off);
  }

  /** A [k, n] tensor of points needs a plan with a single [n] parameter. */
  checkPacked(b, label) {
    const s = this.shapes;
    if (!this.map && s.length === 1 && s[0].length === 1 && s[0][0] === b.n) return;
    const takes = this.map ? `{${this.keys.map((key, j) => `${key}: ${fmtShape(s[j])}`).join(', ')}}` : fmtShape(s[0]);
    throw new Error(`${label}: a [${b.k}×${b.n}] tensor of points needs a plan with one [${b.n}] parameter; this one takes ${takes}`);
  }

  /**
   * Pack a batch: { params, inputs }. `label` prefixes errors naming a
   * point ('' for a single async call: its messages are the call's own);
   * `misfit(i, x)` is the error for point i at another shape signature.
   */
  packBatch(points, b, inputs, label, where, misfit, scratch = null) {
    if (this.rootShape.length !== 0) throw scalarRootError(where, this.rootShape);
    const width = this.width();
    const k = b.k;
    if (k * width > MAX_BATCH_VALUES) {
      throw new Error(`${label || 'async'}: ${k} points of ${width} values are more than the ${MAX_BATCH_VALUES} values a batch takes`);
    }
    // The WebAssembly build's smaller room, before the points are read.
    N.batchRoom?.(k, width, label);
    const at = (i, e) => (label ? pointError(label, i, e) : e);
    let params;
    let mapped = null; // points packMap wrote
    let read = null; // the others, as read once: checked, packed and unpacked
    if (b.packed) {
      this.checkPacked(b, label);
      params = b.data; // read in place by a synchronous batch, copied at the call by an async one
    } else {
      params = scratch ? scratch.params : new Float64Array(k * width);
      mapped = scratch ? scratch.mapped : new Uint8Array(k);
      read = new Array(k).fill(null);
      for (let i = 0; i < k; i++) {
        mapped[i] = packMap(this, points[i], params, i * width) ? 1 : 0;
        if (mapped[i]) continue;
        const x = (read[i] = readOnce(points[i]));
        if (!this.fitsParams(x)) throw misfit(i, x);
        try {
          this.packPoint(x, params, i * width);
        } catch (e) {
          throw at(i, e);
        }
      }
    }
    return { params, inputs: this.packInputs(inputs), mapped, read };
  }

  /** `batch`: every point on up to b.threads threads; results in the points' forms. */
  batch(points, b, inputs, label, where, misfit) {
    const k = b.k;
    // Results in the points' forms are copied out of these, so a batch of
    // arrays can reuse them; not a nested batch (a point's getter calling
    // batch), which gets its own.
    const scratch = b.packed || this._batching ? null : this.scratch(k, k * this.width());
    if (scratch) this._batching = true;
    try {
      const { params, inputs: ins, mapped, read } = this.packBatch(points, b, inputs, label, where, misfit, scratch);
      const values = scratch ? scratch.values : new Float64Array(k);
      const grads = scratch ? scratch.grads : new Float64Array(typedLength(params));
      this.replicas((pool) => N.planBatch(pool, params, ins, k, b.threads, label, values, grads));
      if (b.packed) return { values, gradients: { data: grads, shape: [k, b.n] } };
      const out = new Array(k);
      for (let i = 0; i < k; i++) out[i] = mapped[i] ? mapPoint(this, values, grads, i) : this.unpackPoint(read[i], values, grads, i);
      return out;
    } finally {
      if (scratch) this._batching = false;
    }
  }

  /** Buffers for a batch of k points of n values in all, kept for the next batch of that size if small. */
  scratch(k, n) {
    let s = this._scratch;
    if (s === undefined || s.values.length !== k || s.params.length !== n) {
      s = { params: new Float64Array(n), grads: new Float64Array(n), values: new Float64Array(k), mapped: new Uint8Array(k) };
      if (n <= 1 << 16) this._scratch = s; // at most ~1 MiB kept per plan
    }
    return s;
  }

  /** `batchAsync` (and `async`, one point with label ''): arguments copied at the call. */
  batchAsync(points, b, inputs, label, where, misfit) {
    const { params, inputs: ins, mapped, read } = this.packBatch(points, b, inputs, label, where, misfit);
    const k = b.k;
    const forms = b.packed ? null : Array.from({ length: k }, (_, i) => (mapped[i] ? null : snapshot(read[i], this.map)));
    return this.replicas((pool) => N.planBatchAsync(pool, params, ins, k, b.threads, label)).then((out) => {
      if (b.packed) return { values: out.slice(0, k), gradients: { data: out.slice(k), shape: [k, b.n] } };
      const values = out.subarray(0, k);
      const grads = out.subarray(k);
      const results = new Array(k);
      for (let i = 0; i < k; i++) results[i] = mapped[i] ? mapPoint(this, values, grads, i) : this.unpackPoint(forms[i], values, grads, i);
      return results;
    });
  }
}

/** A value's form only, for unpacking results after the caller may have changed its arguments. */
function formPlaceholder(v) {
  const form = formOf(v);
  return form === 'number' ? 0 : form === 'flat' ? [] : form === 'nested' ? [[]] : {};
}

function snapshot(x, map) {
  if (!map) return formPlaceholder(x);
  const s = {};
  for (const k of Object.keys(x)) setOwn(s, k, formPlaceholder(x[k]));
  return s;
}

