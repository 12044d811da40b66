// The op wrappers: each coerces its operands onto one tape, records the op
// there (in the queue where its shapes are known to fit, src/js/queue.js;
// any other with one native call), and returns the Var of the result.

import { CODE, N } from './binding.js';
import { eye, fmtShape } from './forms.js';
import { queueOp, queuePow } from './queue.js';
import { lift, opVar, numberConst, numberVar, tapeFor, tapeForAll } from './tape.js';

// The op codes are the core's, known only once a binding is installed, which
// is after this module is evaluated: each wrapper looks its code up on its
// first call and keeps it (a binding is installed once).

/** The most parts one concat takes (each may hold no values, so the cap on values does not bound them). */
const MAX_PARTS = 2 ** 24;
const specs = {};
const specOf = (name) => (specs[name] ??= Object.freeze({ op: name }));

/** The ops the queue takes (graph::batched in the core): elementwise, the sums to a scalar; and `dot` and `matmul` (`product`). */
const QUEUED = new Set(['add', 'sub', 'mul', 'div', 'maximum', 'minimum', 'neg', 'exp', 'log', 'sqrt', 'square', 'tanh', 'sigmoid', 'relu', 'lgamma', 'sum', 'mean']);
const REDUCES = new Set(['sum', 'mean']);

/**
 * The shape of an elementwise op on x and y when known here to be valid:
 * operands of one shape, or a scalar with anything; null otherwise (a
 * shape not yet known here, a row broadcast, a mismatch), left to the core.
 */
function sharedShape(x, y) {
  const a = x._shape;
  const b = y._shape;
  if (a === null || b === null) return null;
  if (b.length === 0) return a;
  if (a.length === 0) return b;
  return a.length === b.length && a[0] === b[0] && a[1] === b[1] ? a : null;
}

/** The Var of a queued op, whose shape is known here. */
function queuedVar(t, id, parents, spec, shape) {
  const v = opVar(t, id, parents, spec);
  v._shape = shape.length === 0 ? [] : shape.length === 1 ? [shape[0]] : [shape[0], shape[1]];
  return v;
}

function unary(name) {
  let code = -1;
  const spec = specOf(name);
  const queued = QUEUED.has(name);
  const reduces = REDUCES.has(name);
  return function (a) {
    if (arguments.length !== 1) throw new Error(`${name}: takes exactly one operand, got ${arguments.length}`);
    if (code < 0) code = CODE[name];
    const t = tapeFor(a);
    const x = lift(t, a);
    if (queued && x._shape !== null) {
      return queuedVar(t, queueOp(t, code, x._id, -1), [x], spec, reduces ? [] : x._shape);
    }
    return opVar(t, N.tapeOp1(t.h, code, x._id), [x], spec);
  };
}

function apply2(t, code, spec, queued, a, b) {
  // A number on one side goes in with the op: queued with it on a scalar,
  // else in one native call, either way as a constant just before the op.
  if (typeof b === 'number' && typeof a !== 'number') {
    const x = lift(t, a);
    if (queued && x._shape !== null) {
      const c = numberConst(t, b);
      return queuedVar(t, queueOp(t, code, x._id, c._id), [x, c], spec, x._shape);
    }
    const id = N.tapeOp2Number(t.h, code, x._id, b, false);
    return opVar(t, id, [x, numberVar(t, id - 1)], spec);
  }
  if (typeof a === 'number' && typeof b !== 'number') {
    const y = lift(t, b);
    if (queued && y._shape !== null) {
      const c = numberConst(t, a);
      return queuedVar(t, queueOp(t, code, c._id, y._id), [c, y], spec, y._shape);
    }
    const id = N.tapeOp2Number(t.h, code, y._id, a, true);
    return opVar(t, id, [numberVar(t, id - 1), y], spec);
  }
  const x = lift(t, a);
  const y = lift(t, b);
  const shape = queued ? sharedShape(x, y) : null;
  if (shape !== null) return queuedVar(t, queueOp(t, code, x._id, y._id), [x, y], spec, shape);
  return opVar(t, N.tapeOp2(t.h, code, x._id, y._id), [x, y], spec);
}

function binary(name) {
  let code = -1;
  const spec = specOf(name);
  const queued = QUEUED.has(name);
  return function (a, b) {
    if (arguments.length !== 2) {
      throw new Error(`${name}: takes exactly two operands, got ${arguments.length}. add and mul are the variadic ones.`);
    }
    if (code < 0) code = CODE[name];
    return apply2(tapeFor(a, b), code, spec, queued, a, b);
  };
}

/** A binary op of fixed arity whose misuse is reported by the shape rule. */
function pair(name) {
  let code = -1;
  const spec = specOf(name);
  return (a, b) => {
    if (code < 0) code = CODE[name];
    return apply2(tapeFor(a, b), code, spec, false, a, b);
  };
}

/**
 * A product (`dot`, `matmul`) queued when `resultShape` gives its result's
 * shape from its operands' known shapes, else recorded by the core, which
 * throws on a mismatch.
 */
function product(name, resultShape) {
  let code = -1;
  const spec = specOf(name);
  return (a, b) => {
    if (code < 0) code = CODE[name];
    const t = tapeFor(a, b);
    if (typeof a === 'number' || typeof b === 'number') return apply2(t, code, spec, false, a, b);
    const x = lift(t, a);
    const y = lift(t, b);
    const shape = x._shape !== null && y._shape !== null ? resultShape(x._shape, y._shape) : null;
    if (shape !== null) return queuedVar(t, queueOp(t, code, x._id, y._id), [x, y], spec, shape);
    return opVar(t, N.tapeOp2(t.h, code, x._id, y._id), [x, y], spec);
  };
}

/** The most values a queued product may make: far below the core's cap on a value, which it must never reach. */
const QUEUED_PRODUCT = 2 ** 20;

function variadic(name) {
  let code = -1;
  const spec = specOf(name);
  const queued = QUEUED.has(name);
  return function (...xs) {
    if (xs.length < 2) throw new Error(`${name}: needs at least two operands, got ${xs.length}`);
    if (code < 0) code = CODE[name];
    const t = tapeForAll(xs);
    let acc = apply2(t, code, spec, queued, xs[0], xs[1]);
    for (let i = 2; i < xs.length; i++) acc = apply2(t, code, spec, queued, acc, xs[i]);
    return acc;
  };
}

export const add = variadic('add');
export const mul = variadic('mul');
export const sub = binary('sub');
export const div = binary('div');
export const maximum = binary('maximum');
export const minimum = binary('minimum');
export const neg = unary('neg');
export const exp = unary('exp');
export const log = unary('log');
export const sqrt = unary('sqrt');
export const square = unary('square');
export const tanh = unary('tanh');
export const sigmoid = unary('sigmoid');
export const relu = unary('relu');
export const lgamma = unary('lgamma');
export const sum = unary('sum');
export const mean = unary('mean');
export const transpose = unary('transpose');
export const diagPart = unary('diagPart');
export const cholesky = unary('cholesky');
/** Two vectors of one length: a scalar. */
export const dot = product('dot', (s, r) => (s.length === 1 && r.length === 1 && s[0] === r[0] ? [] : null));
/** A matrix times a vector or a matrix whose rows it has columns: [m] or [m, n], when not too large. */
export const matmul = product('matmul', (s, r) => {
  if (s.length !== 2 || r.length === 0 || s[1] !== r[0]) return null;
  const shape = r.length === 1 ? [s[0]] : [s[0], r[1]];
  return shape[0] * (shape[1] ?? 1) <= QUEUED_PRODUCT ? shape : null;
});
export const addDiag = pair('addDiag');
export const solveGeneral = pair('solveGeneral');

/** A bad argument as a message shows it: as JavaScript prints it, unless that is long or fails. */
function shown(k) {
  if (k === null || (typeof k !== 'object' && typeof k !== 'function')) return String(k);
  if (Array.isArray(k) && k.length <= 16) {
    try {
      return String(k);
    } catch {
      // an element that cannot print
    }
  }
  return Array.isArray(k) ? `an array of length ${k.length}` : typeof k === 'function' ? 'a function' : 'an object';
}

export function pow(a, k) {
  if (typeof k !== 'number' || !Number.isFinite(k)) throw new Error(`pow: exponent must be a finite number; got ${shown(k)}`);
  const t = tapeFor(a);
  const x = lift(t, a);
  const spec = { op: 'pow', args: [k] };
  if (x._shape !== null) return queuedVar(t, queuePow(t, CODE.pow, x._id, k), [x], spec, x._shape);
  return opVar(t, N.tapePow(t.h, x._id, k), [x], spec);
}

export function trace(a) {
  return sum(diagPart(a));
}

const dim = (v) => (typeof v === 'number' ? v : NaN);

export function reshape(a, shape) {
  const ok = Array.isArray(shape) && shape.length <= 2 && shape.every((d) => Number.isInteger(d) && d > 0);
  if (!ok) throw new Error('reshape: shape must be up to two positive integers');
  const t = tapeFor(a);
  const x = lift(t, a);
  const id = N.tapeReshape(t.h, x._id, shape.length, shape[0] ?? 0, shape[1] ?? 0);
  return opVar(t, id, [x], { op: 'reshape', args: [[...shape]] });
}

/** An array's length and first two entries for the core (-1 and NaN where absent or not numbers). */
function entries(list) {
  if (!Array.isArray(list)) return [-1, NaN, NaN];
  return [list.length, dim(list[0]), dim(list[1])];
}

export function slice(a, start, size) {
  const t = tapeFor(a);
  const x = lift(t, a);
  const id = N.tapeSlice(t.h, x._id, ...entries(start), ...entries(size));
  return opVar(t, id, [x], { op: 'slice', args: [[...start], [...size]] });
}

export function concat(parts, options = {}) {
  if (!Array.isArray(parts) || parts.length === 0) throw new Error('concat: needs a non-empty array of parts');
  // Bounded before the parts are walked: a sparse list of length 2^31 - 1
  // took minutes. A hole is a missing part.
  if (parts.length > MAX_PARTS) throw new Error(`concat: at most ${MAX_PARTS} parts, got ${parts.length}`);
  for (let i = 0; i < parts.length; i++) if (!(i in parts)) throw new Error(`concat: part ${i} is missing`);
  const t = tapeForAll(parts);
  const xs = parts.map((p) => lift(t, p));
  const axis = options?.axis ?? 0;
  const matrices = xs[0].shape.length === 2;
  const id = N.tapeConcat(t.h, Uint32Array.from(xs, (x) => x._id), axis === 0 || axis === 1 ? axis : 2);
  const spec = matrices ? { op: 'concat', args: [{ axis }], list: true } : { op: 'concat', list: true };
  return opVar(t, id, xs, spec);
}

export function triangularSolve(T, B, { lower = true } = {}) {
  const t = tapeFor(T, B);
  const x = lift(t, T);
  const y = lift(t, B);
  const id = N.tapeTriangularSolve(t.h, x._id, y._id, !!lower);
  return opVar(t, id, [x, y], { op: 'triangularSolve', args: [{ lower: !!lower }] });
}

export function logdetPSD(A) {
  return mul(2, sum(log(diagPart(cholesky(A)))));
}

export function solvePSD(A, B) {
  const L = cholesky(A);
  return triangularSolve(transpose(L), triangularSolve(L, B, { lower: true }), { lower: false });
}

export function inv(A) {
  const t = tapeFor(A);
  const x = lift(t, A);
  const s = x.shape;
  if (s.length !== 2 || s[0] !== s[1]) throw new Error(`inv: needs a square matrix, got ${fmtShape(s)}`);
  return solveGeneral(x, eye(s[0]));
}
