// Running a native plan: the shape signature plans are cached by, and the
// Replay that feeds a plan its arguments and turns its results back into the
// caller's forms. Shared by compile and compileFromJSON.

import { N } from './binding.js';
import { scalarRootError } from './drivers.js';
import {
  copyInto,
  fmtShape,
  formOf,
  isMapForm,
  isRow,
  isTensor,
  setOwn,
  shapeGradient,
  shapeOf,
  sizeOf,
  toNested,
} from './forms.js';

const NO_VALUES = new Float64Array(0);

/** A shape's part of a signature: `s`, `v<n>` or `<m>x<n>`. */
export function sigOfShape(s) {
  return s.length === 0 ? 's' : s.length === 1 ? `v${s[0]}` : `${s[0]}x${s[1]}`;
}

function sigOf(v) {
  if (typeof v === 'number') return 's';
  if (v instanceof Float64Array) return `v${v.length}`;
  if (Array.isArray(v)) return isRow(v[0]) ? `${v.length}x${v[0].length}` : `v${v.length}`;
  if (isTensor(v)) return sigOfShape(v.shape);
  return '?';
}

/** Whether v, in any parameter form, has this shape (what a signature compares). */
function sameShape(v, shape) {
  if (typeof v === 'number') return shape.length === 0;
  if (v instanceof Float64Array) return shape.length === 1 && v.length === shape[0];
  if (Array.isArray(v)) {
    if (isRow(v[0])) return shape.length === 2 && v.length === shape[0] && v[0].length === shape[1];
    return shape.length === 1 && v.length === shape[0];
  }
  if (isTensor(v)) {
    const s = v.shape;
    return s.length === shape.length && s[0] === shape[0] && s[1] === shape[1];
  }
  return false;
}

function sigOfSlots(x) {
  if (!isMapForm(x)) return sigOf(x);
  return Object.keys(x)
    .sort()
    .map((k) => `${k}:${sigOf(x[k])}`)
    .join(',');
}

/** The shape signature plans are cached by (SPEC §7). */
export function signature(x, inputs) {
  return inputs === undefined ? sigOfSlots(x) : `${sigOfSlots(x)}|${sigOfSlots(inputs)}`;
}

/**
 * A native plan with what it takes to feed it: the slots' names, shapes
 * and fixed offsets in one flat buffer reused across calls.
 */
export class Replay {
  constructor(plan, map, keys, shapes, inputKeys, inputShapes, rootShape) {
    this.plan = plan;
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
    this.flat = new Float64Array(total);
    this.layout = new Int32Array(all.length);
    this.gradLayout = new Int32Array(shapes.length);
    // Parameters come first in the flat layout, so their gradients fit in its head.
    this.gradFlat = new Float64Array(this.offsets[shapes.length] ?? total);
    /** Whether it was built for calls with an inputs map (possibly empty). */
    this.hasInputs = inputShapes.length > 0;
    this.slot = new Map((keys ?? []).map((k, i) => [k, i]));
    this.paramNames = map ? keys.map((k) => `parameter "${k}"`) : ['parameter'];
    this.inputNames = inputKeys.map((k) => `input "${k}"`);
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
    const shape = i < this.shapes.length ? this.shapes[i] : this.inputShapes[i - this.shapes.length];
    const data = v instanceof Float64Array ? v : isTensor(v) ? v.data : null;
    if (data !== null) {
      if (data.length !== sizeOf(shape)) throw new Error(`data length ${data.length} does not match shape ${fmtShape(shape)}`);
      views.push(data);
      this.layout[i] = -views.length;
      return;
    }
    shapeOf(v, name);
    copyInto(v, this.flat, this.offsets[i], name);
    this.layout[i] = this.offsets[i];
  }

  feedAll(x, inputs) {
    const views = [];
    const np = this.shapes.length;
    if (this.map) {
      for (let i = 0; i < np; i++) this.feed(i, x[this.keys[i]], this.paramNames[i], views);
    } else {
      this.feed(0, x, 'parameter', views);
    }
    for (let j = 0; j < this.inputKeys.length; j++) this.feed(np + j, inputs[this.inputKeys[j]], this.inputNames[j], views);
    return views;
  }

  run(x, inputs, where) {
    const views = this.feedAll(x, inputs);
    if (this.rootShape.length !== 0) throw scalarRootError(where, this.rootShape);
    const np = this.shapes.length;
    const values = this.map ? this.keys.map((k) => x[k]) : [x];
    // Tensor-form parameters get their gradient written by Rust straight
    // into a fresh Float64Array; every other form goes through gradFlat.
    const gradViews = [];
    const gradLayout = this.gradLayout;
    let flatGradients = false;
    for (let i = 0; i < np; i++) {
      if (isTensor(values[i])) {
        gradViews.push(new Float64Array(sizeOf(this.shapes[i])));
        gradLayout[i] = -gradViews.length;
      } else {
        gradLayout[i] = this.offsets[i];
        flatGradients = true;
      }
    }
    // Reused across calls: these gradients are copied out into plain numbers and arrays.
    const gradFlat = flatGradients ? this.gradFlat : NO_VALUES;
    const value = N.planRun(this.plan, this.flat, views, this.layout, gradFlat, gradViews, gradLayout);
    const grads = new Array(np);
    for (let i = 0; i < np; i++) {
      const at = gradLayout[i];
      grads[i] =
        at < 0 ? { data: gradViews[-at - 1], shape: [...this.shapes[i]] } : shapeGradient(formOf(values[i]), this.shapes[i], gradFlat, at);
    }
    if (!this.map) return { value, gradient: grads[0] };
    // The caller's key order, which may differ from the one traced.
    const gradient = {};
    for (const k of Object.keys(x)) setOwn(gradient, k, grads[this.slot.get(k)]);
    return { value, gradient };
  }

  value(x, inputs) {
    const views = this.feedAll(x, inputs);
    const out = new Float64Array(sizeOf(this.rootShape));
    N.planForward(this.plan, this.flat, views, this.layout, out);
    return toNested({ data: out, shape: this.rootShape });
  }
}
