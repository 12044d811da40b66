// Many points per call, what compile and compileFromJSON share around a
// Replay's batches: the options and points read and checked, a point's
// error, the Promise forms, and the batch of an objective no plan can hold.

import { fmtShape, isTensor, shownArgument, typedLength } from './forms.js';

/** The most points one batch takes, and the most values its parameters may hold (as src/batch.rs). */
const MAX_POINTS = 2 ** 24;
export const MAX_BATCH_VALUES = 2 ** 28;
const MAX_THREADS = 256;

/** `options.threads` checked: 0 for the default (the machine's available parallelism). */
function threadsOption(options, label) {
  if (options === undefined || options === null) return 0;
  if (typeof options !== 'object') throw new Error(`${label}: options must be an object, got ${typeof options}`);
  const t = options.threads;
  if (t === undefined) return 0;
  if (typeof t !== 'number' || !Number.isInteger(t) || t < 1) {
    throw new Error(`${label}: options.threads must be a positive integer, got ${shownArgument(t)}`);
  }
  if (t > MAX_THREADS) throw new Error(`${label}: options.threads is ${t}, more than the ${MAX_THREADS} a batch may use`);
  return t;
}

/**
 * A batch's points, read once: an array of points (`packed` false), or a
 * `[k, n]` tensor (`packed` true, with `data` and `n`). `sample` is point 0
 * (for a tensor, its first row as a `[n]` tensor), null when k = 0.
 */
export function batchPoints(points, options, label) {
  const threads = threadsOption(options, label);
  if (Array.isArray(points)) {
    const k = points.length;
    if (k > MAX_POINTS) throw new Error(`${label}: ${k} points are more than the ${MAX_POINTS} a batch takes`);
    return { packed: false, k, threads, sample: k > 0 ? points[0] : null };
  }
  if (isTensor(points)) {
    const data = points.data;
    const shape = points.shape;
    const [k, n] = shape;
    if (shape.length !== 2 || !Number.isInteger(k) || k < 0 || !Number.isInteger(n) || n < 0) {
      throw new Error(`${label}: a tensor of points must be shaped [k, n] (k points of a [n] vector), got ${fmtShape(shape)}`);
    }
    if (k > MAX_POINTS) throw new Error(`${label}: ${k} points are more than the ${MAX_POINTS} a batch takes`);
    const length = typedLength(data);
    if (length !== k * n) throw new Error(`${label}: data length ${length} does not match shape [${k}×${n}]`);
    return { packed: true, k, n, data, threads, sample: k > 0 ? { data: data.subarray(0, n), shape: [n] } : null };
  }
  throw new Error(
    `${label}: points must be an array of parameter values, or a [k, n] tensor for a plan with one vector parameter; got ${
      points === null ? 'null' : typeof points
    }`,
  );
}

/** Point i's error: `label: point i: message`. */
export function pointError(label, i, e) {
  return new Error(`${label}: point ${i}: ${e?.message ?? String(e)}`);
}

/** A Promise of fn(): a synchronous throw becomes a rejection. */
export function settle(fn) {
  try {
    return Promise.resolve(fn());
  } catch (e) {
    return Promise.reject(e);
  }
}

/**
 * A batch through `c` one point at a time: compile's fallback for an
 * objective holding hand-built nodes, which no plan can replay.
 */
export function eagerBatch(c, points, b, inputs, label) {
  const one = (x, i) => {
    try {
      return c(x, inputs);
    } catch (e) {
      throw pointError(label, i, e);
    }
  };
  const k = b.k;
  if (!b.packed) {
    const out = new Array(k);
    for (let i = 0; i < k; i++) out[i] = one(points[i], i);
    return out;
  }
  const n = b.n;
  const values = new Float64Array(k);
  const grads = new Float64Array(k * n);
  for (let i = 0; i < k; i++) {
    const r = one({ data: b.data.slice(i * n, (i + 1) * n), shape: [n] }, i);
    values[i] = r.value;
    grads.set(r.gradient.data, i * n);
  }
  return { values, gradients: { data: grads, shape: [k, n] } };
}

/** The result of a batch of no points, in its form. */
export function emptyBatch(b) {
  return b.packed ? { values: new Float64Array(0), gradients: { data: new Float64Array(0), shape: [0, b.n] } } : [];
}
