// Values in the caller's forms: shapes, tensors, and the conversions between
// the forms arguments come in (numbers, arrays, rows, Float64Arrays, tensors,
// {name: value} maps) and the flat Float64Arrays the core takes.

// ---------------------------------------------------------------- shapes

export function fmtShape(shape) {
  if (shape.length === 0) return 'scalar';
  if (shape.length === 1) return `[${shape[0]}]`;
  return `[${shape[0]}×${shape[1]}]`;
}

export function sizeOf(shape) {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

// ---------------------------------------------------------------- tensors

export function isTensor(x) {
  return x !== null && typeof x === 'object' && isF64(x.data) && Array.isArray(x.shape);
}

/** A Float64Array's own length, which a subclass's `length` getter cannot misstate: what `set` copies and what the core reads. */
const TYPED_LENGTH = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Float64Array.prototype), 'length').get;
export const typedLength = (a) => TYPED_LENGTH.call(a);

const TYPED_TAG = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Float64Array.prototype), Symbol.toStringTag).get;
/**
 * Whether v is a Float64Array (or a subclass's instance): never a Proxy
 * around one, which `instanceof` takes for one and whose `length` trap
 * could then size a copy into the core's memory. A Proxy is read as the
 * array-like it claims to be, by copying.
 */
export const isF64 = (v) => TYPED_TAG.call(v) === 'Float64Array';

/** A Float64Array's own length, else `length`: what a value's shape is read from. */
export const lengthOf = (v) => (isF64(v) ? typedLength(v) : v.length);

/** The most values one tensor holds: the core's cap. */
export const MAX_VALUES = 2 ** 28;

/** A bad option or argument as a message shows it: `"2"`, `2n`, `null`, `1.5`, `a symbol`, `a function`, `object`. */
export function shownArgument(v) {
  switch (typeof v) {
    case 'string':
      return JSON.stringify(v);
    case 'bigint':
      return `${v}n`;
    case 'symbol':
      return 'a symbol';
    case 'function':
      return 'a function';
    case 'object':
      return v === null ? 'null' : 'object';
    default:
      return String(v);
  }
}

/** Rank 0, 1 or 2 with non-negative integer entries (checked before anything is copied). */
function validShape(shape) {
  return Array.isArray(shape) && shape.length <= 2 && shape.every((d) => Number.isInteger(d) && d >= 0);
}

/** Refuse a shape no value can hold, before anything is read or allocated for it. */
function checkCap(shape, where) {
  if (sizeOf(shape) > MAX_VALUES) throw new Error(`${where}: shape ${fmtShape(shape)} holds more than ${MAX_VALUES} values`);
}

export function tensor(data, shape) {
  // Checked before copying either: a sparse array of length 2^28 took 20 s,
  // an array-like {length: 2^29} 33 s and 12 GB.
  if (!validShape(shape)) throw new Error('tensor: shape must be up to two non-negative integers');
  const n = sizeOf(shape);
  if (!isF64(data) && data?.length === undefined && typeof data?.[Symbol.iterator] === 'function') {
    checkCap(shape, 'tensor');
    return { data: fromIterable(data, n, shape), shape: Array.from(shape) };
  }
  // SPEC's message first where the lengths differ, as the JavaScript version words it.
  const length = isF64(data) ? typedLength(data) : data?.length;
  if (length !== n) throw new Error(`data length ${length} does not match shape ${fmtShape(shape)}`);
  checkCap(shape, 'tensor');
  const d = isF64(data) ? data : Float64Array.from(data);
  // Read again: an array-like's length getter may answer otherwise the second time.
  if (lengthOf(d) !== n) throw new Error(`data length ${lengthOf(d)} does not match shape ${fmtShape(shape)}`);
  return { data: d, shape: Array.from(shape) };
}

/**
 * A Set, a generator or any iterable with no length, as `Float64Array.from`
 * reads it, into the `n` values of `shape`: read no further than one past
 * them (an endless one is refused at once), and kept in a plain array
 * until it proves as long as the shape (a short Set with a huge shape
 * allocates nothing).
 */
function fromIterable(items, n, shape) {
  const read = [];
  for (const v of items) {
    if (read.length === n) throw new Error(`data length over ${n} does not match shape ${fmtShape(shape)}`);
    read.push(v);
  }
  if (read.length !== n) throw new Error(`data length ${read.length} does not match shape ${fmtShape(shape)}`);
  return Float64Array.from(read);
}

function checkedShape(shape, where) {
  // Checked before the copy: copying a sparse array of length 2^28 first
  // exhausted the heap and aborted Node.
  if (!validShape(shape)) throw new Error(`${where}: shape must be up to two non-negative integers`);
  return [...shape];
}

export function zeros(shape) {
  const s = checkedShape(shape, 'zeros');
  checkCap(s, 'zeros');
  return { data: new Float64Array(sizeOf(s)), shape: s };
}

export function eye(n) {
  if (!Number.isInteger(n) || n < 0) throw new Error(`eye: n must be a non-negative integer, got ${shownArgument(n)}`);
  checkCap([n, n], 'eye');
  const data = new Float64Array(n * n);
  for (let i = 0; i < n; i++) data[i * n + i] = 1;
  return { data, shape: [n, n] };
}

export const isRow = (r) => Array.isArray(r) || isF64(r);

/**
 * The shape of a value in one of asTensor's forms, checking its structure
 * (element types are checked while copying, by `copyInto`).
 */
export function shapeOf(x, name) {
  if (typeof x === 'number') return [];
  // Typed arrays by their own length: a subclass's `length` getter may lie.
  if (isF64(x)) return [typedLength(x)];
  if (Array.isArray(x)) {
    if (x.length === 0) throw new Error(`${name} must be a number, a non-empty array, or a tensor`);
    const first = x[0];
    if (!isRow(first)) return [x.length];
    const n = lengthOf(first);
    if (n < 0) throw badElements(name);
    if (n === 0) throw new Error(`${name} must have at least one column`);
    for (let i = 1; i < x.length; i++) {
      const row = x[i];
      if (!isRow(row)) throw badElements(name);
      if (lengthOf(row) !== n) throw new Error(`${name} is not rectangular (row ${i} has length ${lengthOf(row)}, expected ${n})`);
    }
    return [x.length, n];
  }
  if (isTensor(x)) {
    const s = x.shape;
    if (!validShape(s)) throw new Error(`${name} has shape ${fmtShape(s)}; a shape is up to two non-negative integers`);
    if (lengthOf(x.data) !== sizeOf(s)) throw new Error(`data length ${lengthOf(x.data)} does not match shape ${fmtShape(s)}`);
    return s;
  }
  throw new Error(`${name} must be a number, a non-empty array, or a tensor`);
}

function badElements(name) {
  return new Error(`${name} must be a number, an array of numbers, or an array of rows`);
}

/** Write a value in any of asTensor's forms (already shaped by `shapeOf`) into dst at off. */
export function copyInto(x, dst, off, name) {
  if (typeof x === 'number') dst[off] = x;
  else if (isF64(x)) dst.set(x, off);
  else if (isTensor(x)) dst.set(x.data, off);
  else if (isRow(x[0])) copyRows(x, dst, off, name);
  else copyNumbers(x, dst, off, name);
}

function copyNumbers(x, dst, off, name) {
  for (let i = 0; i < x.length; i++) {
    const v = x[i];
    if (typeof v !== 'number') throw badElements(name);
    dst[off + i] = v;
  }
}

function copyRows(x, dst, off, name) {
  const n = lengthOf(x[0]); // as shapeOf read it: a row's own `length` property may lie
  for (let i = 0; i < x.length; i++) {
    const row = x[i];
    if (isF64(row)) {
      dst.set(row, off + i * n);
      continue;
    }
    let k = off + i * n;
    for (let j = 0; j < n; j++) {
      const v = row[j];
      if (typeof v !== 'number') throw badElements(name);
      dst[k++] = v;
    }
  }
}

/** The most rows a matrix is returned with as nested arrays (the core's cap on values). */
const MAX_ROWS = 2 ** 28;
/** The most rows of a matrix with no columns returned as nested (empty) arrays. */
export const MAX_EMPTY_ROWS = 2 ** 20;

export function toNested(t) {
  const { data, shape } = t;
  if (shape.length === 0) return data[0];
  if (shape.length === 1) return plainArray(data, 0, data.length);
  const [m, n] = shape;
  // A [m×0] matrix holds no values, so only its row count can be huge; its
  // rows cost as much as values would (2^24 empty rows took 5 s).
  if (m > MAX_ROWS || (n === 0 && m > MAX_EMPTY_ROWS)) {
    throw new Error(`value of shape ${fmtShape(shape)} has too many rows to return as nested arrays`);
  }
  const rows = new Array(m);
  for (let i = 0; i < m; i++) rows[i] = plainArray(data, i * n, (i + 1) * n);
  return rows;
}

// ---------------------------------------------------------------- parameter forms

/** How a parameter was given, so its gradient goes back in the same form. */
export function formOf(v) {
  if (typeof v === 'number') return 'number';
  if (isF64(v)) return 'flat';
  if (Array.isArray(v)) return isRow(v[0]) ? 'nested' : 'flat';
  return 'tensor';
}

/**
 * `obj[k] = v` as an own, enumerable property for any key: assigning to
 * `__proto__` would set the prototype instead, and lose the entry.
 */
export function setOwn(obj, k, v) {
  if (k === '__proto__') Object.defineProperty(obj, k, { value: v, enumerable: true, writable: true, configurable: true });
  else obj[k] = v;
}

/** A tensor-like object's two fields, each read once; anything else as it is. */
function readValueOnce(v) {
  if (v === null || typeof v !== 'object' || Array.isArray(v) || isF64(v)) return v;
  const data = v.data;
  const shape = v.shape;
  // The shape's entries too, once (a long one is refused before it is read).
  return isF64(data) && Array.isArray(shape) ? { data, shape: shape.length <= 2 ? shape.slice() : shape } : v;
}

/**
 * The arguments of one call with every parameter or input read exactly
 * once: a {name: value} map becomes a plain object of its own keys, a
 * tensor a plain { data, shape }. What a getter returned is what is
 * computed, and a call made from inside a getter is over before this one
 * touches any shared buffer.
 */
export function readOnce(x) {
  const r = readOnceLazily(x);
  return r instanceof ReadMap ? r.object() : r;
}

/** A {name: value} map as `readOnce` reads it, before its object is made: its own keys, and their values. */
export class ReadMap {
  constructor(keys, vals) {
    this.keys = keys;
    this.vals = vals;
  }

  /** The plain object `readOnce` returns. */
  object() {
    const out = {};
    for (let i = 0; i < this.keys.length; i++) setOwn(out, this.keys[i], this.vals[i]);
    return out;
  }
}

/** `readOnce`, but a map comes back as a `ReadMap`: a caller with a faster use for it skips making the object. */
export function readOnceLazily(x) {
  if (x === null || typeof x !== 'object' || Array.isArray(x) || isF64(x)) return x;
  const v = readValueOnce(x);
  if (v !== x) return v;
  const keys = Object.keys(x);
  const vals = new Array(keys.length);
  for (let i = 0; i < keys.length; i++) vals[i] = readValueOnce(x[keys[i]]);
  return new ReadMap(keys, vals);
}

export const isMapForm = (x) =>
  x !== null && typeof x === 'object' && !Array.isArray(x) && !isF64(x) && !isTensor(x);

/**
 * Entries [from, to) of a typed array as a plain array. Up to eight as an
 * array literal, which V8 makes once with double elements: `new Array(n)`
 * filled with doubles is made again when its elements change kind (a
 * Jacobian's 300 rows of 6: 4.5 → 2.6 µs).
 */
export function plainArray(src, from, to) {
  const a = from;
  switch (to - from) {
    case 1: return [src[a]];
    case 2: return [src[a], src[a + 1]];
    case 3: return [src[a], src[a + 1], src[a + 2]];
    case 4: return [src[a], src[a + 1], src[a + 2], src[a + 3]];
    case 5: return [src[a], src[a + 1], src[a + 2], src[a + 3], src[a + 4]];
    case 6: return [src[a], src[a + 1], src[a + 2], src[a + 3], src[a + 4], src[a + 5]];
    case 7: return [src[a], src[a + 1], src[a + 2], src[a + 3], src[a + 4], src[a + 5], src[a + 6]];
    case 8: return [src[a], src[a + 1], src[a + 2], src[a + 3], src[a + 4], src[a + 5], src[a + 6], src[a + 7]];
  }
  const out = new Array(to - from);
  for (let i = from; i < to; i++) out[i - from] = src[i];
  return out;
}

/** A gradient in the form its parameter came in, from `src` at `off`. */
export function shapeGradient(form, shape, src, off) {
  switch (form) {
    case 'number':
      return src[off];
    case 'flat':
      return plainArray(src, off, off + shape[0]);
    case 'nested': {
      const [m, n] = shape;
      const rows = new Array(m);
      for (let i = 0; i < m; i++) rows[i] = plainArray(src, off + i * n, off + (i + 1) * n);
      return rows;
    }
    default:
      return { data: src.slice(off, off + sizeOf(shape)), shape: [...shape] };
  }
}

// ---------------------------------------------------------------- results

/** Values in `flat` from `off`, laid out as the parameters `slots` (keys, values, shapes), back in their forms. */
export function inForms(slots, shapes, flat, off) {
  const { keys, values } = slots;
  if (keys === null) return shapeGradient(formOf(values[0]), shapes[0], flat, off);
  const out = {};
  for (let i = 0, at = off; i < keys.length; i++) {
    setOwn(out, keys[i], shapeGradient(formOf(values[i]), shapes[i], flat, at));
    at += sizeOf(shapes[i]);
  }
  return out;
}

/** (x + y) / 2; where only the sum overflows (entries past ~9e307), x/2 + y/2. */
function mean(x, y) {
  const m = 0.5 * (x + y);
  return m - m === 0 || x - x !== 0 || y - y !== 0 ? m : 0.5 * x + 0.5 * y;
}

/**
 * A q×q Hessian from rows H·eⱼ (at `off` in `flat`), symmetrized: rounding
 * leaves them a hair apart. `order[i]` is the flat index of the caller's
 * i-th entry (a map given in another key order than it was traced in).
 */
export function symmetric(flat, off, q, order = null) {
  const rows = new Array(q);
  // Each entry the mean of the pair, row after row: x + y is y + x, bit
  // for bit, and writing each row in order beats writing each pair's mean
  // to both sides (q = 60: 8.3 against 13.2 µs; q = 15: 0.4 against 1.3).
  // The traced order has its own loop: through an identity `order` it
  // took 40% longer.
  if (order === null) {
    for (let i = 0; i < q; i++) {
      const row = new Array(q);
      const a = off + i * q;
      for (let k = 0; k < q; k++) row[k] = mean(flat[a + k], flat[off + k * q + i]);
      rows[i] = row;
    }
    return rows;
  }
  for (let i = 0; i < q; i++) {
    const row = new Array(q);
    const a = off + order[i] * q;
    for (let k = 0; k < q; k++) row[k] = mean(flat[a + order[k]], flat[off + order[k] * q + order[i]]);
    rows[i] = row;
  }
  return rows;
}
