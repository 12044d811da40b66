// A seeded random driver of the public API (issue 11, item 5): random
// argument forms and shapes (zero-size and huge dimensions among them),
// sparse arrays, odd property names, wrong types, random op chains through
// every op, and every driver, forward mode and second order included (jvp,
// hvp, hessian, and compiled and rebuilt .jvp/.hvp/.hessian/.jacobian: the
// "higher" kind, ~14% of the cases; its oracle is described at runHigher).
//
// The oracle, for every call:
//   - it returns, or it throws an Error (instanceof Error, non-empty
//     message): never another value thrown, never a crash or a hang;
//   - it finishes within FUZZ_API_BUDGET_MS (default 200 ms; a huge
//     dimension must never be iterated), by the wall clock and by the
//     process's CPU time both (so a starved process is not "slow"). A call
//     over the budget is re-timed at once, alone, after a full collection
//     (`retime`): late in a long run a call that allocates a large buffer
//     (asTensor of sparseOf(2^28) sets aside 2 GB before it finds a hole)
//     makes V8 collect a heap of a gigabyte first, 0.5-1 s, and passes when
//     replayed alone. A call slow again, a genuine hang, stays slow: its
//     case is judged again after the last case, twice (after a collection
//     each, its slow calls re-timed again): it counts only if every run
//     was slow, six in all. A call past 25 times the budget (HANG_MS) is a
//     hang at once: no collection takes seconds, and it is not run again;
//   - a result has the shape the SPEC's rules give (a small shape model
//     below predicts every op's result shape, or that it must throw), and
//     an op the model calls valid does not throw, except for the
//     value-dependent errors the SPEC lists (not symmetric, not positive
//     definite, singular);
//   - for an objective: valueAndGrad, compile and compileFromJSON(toJSON())
//     agree bit for bit (Object.is per entry) on value, gradient and
//     forward value, at the trace point and at a second point of the same
//     signature, and they fail together with the same message (up to the
//     driver's prefix); `batch` agrees with single calls; gradients come
//     back in each parameter's form, shape and key order, `__proto__`
//     included; `jacobian` of a one-parameter objective is its gradient;
//   - the gradient matches central differences where that comparison means
//     something (see `fdEligible` and `checkFD`): every intermediate value
//     finite and below 1e6 in magnitude, every kink and pole at a margin
//     (maximum/minimum operands differ by > 1e-3 relative, relu/div/log/
//     sqrt/pow/lgamma operands away from 0 and from lgamma's poles), and
//     the difference quotients at steps 1e-5 and 1e-6 agreeing to 1e-3
//     (otherwise the point is too curved for a difference to judge it). A
//     step that crosses a boundary the point is inside (the objective
//     throws a value-dependent error a step away: not positive definite,
//     singular) skips the comparison (fdSkipped, and notes.fdSteppedOff);
//   - a failure's reproduction is never larger than the failure: values
//     past 64 entries print as sparseOf(n), new Float64Array(n).fill(x) or a
//     short head, and a reproduction is cut at 16000 characters (safeRender).
//
// Tolerated, and counted under `notes` in the summary line:
//   - deadValueErrors: compile drops ops whose result the objective does
//     not use; a value-dependent failure in such an op (cholesky, a solve,
//     inv) throws eagerly but not compiled, and a compiled call may then
//     return, or fail later with another op's message. Where eager and
//     compiled (or rebuilt) part so, the compiled outcome is judged against
//     the eager call of the objective without its dead steps (sameOrDead);
//   - a rebuilt plan has no input nodes for an empty inputs map, so it is
//     called without one (it refuses `{}`);
//   - errorOrder: eager evaluation meets a failing op (not positive
//     definite, singular) before it sees a non-scalar root or reads a
//     tangent, and a replay checks the root and reads the tangent first:
//     either message is accepted;
//   - retimedCalls: calls over the budget that were re-timed (see above);
//   - modesPartNearSingularity: a one-parameter Jacobian (forward mode)
//     and the gradient (reverse) that part where central differences
//     cannot judge either (fdEligible), their roundings amplified there;
//   - the known bugs below (KNOWN), while they are guarded.
// A class of failure (a tag, else the message without its numbers) is
// reported in full twice, then in one line up to 20 times, then only
// counted (failureClasses in the summary), so one bug does not end a run.
//
// Environment:
//   FUZZ_API_CASES      number of cases (default 15000: ~12-20 s per build on an idle 2-core VM)
//   FUZZ_API_SEED       seed (default 20251130); case i is seeded from (seed, i)
//   FUZZ_API_START      index of the first case (to split a long run)
//   FUZZ_API_BUDGET_MS  time budget per call (default 200)
//   FUZZ_API_KNOWN      1 (or a comma list of KNOWN's names): also run the cases
//                       guarded for known bugs
//   FUZZ_API_TRACE=path write each case's index to `path` before it runs
//                       (to find a case that crashes the process)
//   FUZZ_API_DEBUG=1    print each direct call before it is made
//   FUZZ_API_PROFILE=1  print the milliseconds spent per call label after the summary
// A failure prints the seed, the case index, a command that replays it
// alone and a shrunk, self-contained reproduction.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeSync, openSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import * as G from '../index.js';

const env = process.env;
const WASM = env.TANGENT_GRAD_WASM === '1';
const intEnv = (v, d) => (v === undefined || v === '' ? d : Number.parseInt(v, 10));
const CASES = intEnv(env.FUZZ_API_CASES, 15000);
const SEED = intEnv(env.FUZZ_API_SEED, 20251130) >>> 0;
const START = intEnv(env.FUZZ_API_START, 0);
const BUDGET_MS = Number(env.FUZZ_API_BUDGET_MS ?? 200);
const UNGUARD = new Set((env.FUZZ_API_KNOWN ?? '').split(',').filter(Boolean));
const TRACE = env.FUZZ_API_TRACE ? openSync(env.FUZZ_API_TRACE, 'w') : null;
const MAX_FAILURES = 12;
/** Milliseconds per call label (FUZZ_API_PROFILE=1), to see where a run's time goes. */
const PROFILE = env.FUZZ_API_PROFILE ? {} : null;

/**
 * A full collection on demand, to re-time a slow call away from the
 * collector: `globalThis.gc` under --expose-gc, else exposed at run time
 * (a fresh context sees the flag), else nothing.
 */
const collect = (() => {
  if (typeof globalThis.gc === 'function') return globalThis.gc;
  try {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc');
    if (typeof gc === 'function') return gc;
  } catch {
    // no collector to call: a slow call is re-timed without one
  }
  return () => {};
})();

// Cases kept out of the default run (FUZZ_API_KNOWN=1, or =name,name, puts
// them back). The bugs this fuzzer found (compile's unquoted signature keys,
// sparse shapes and parts lists walked before they were checked, a huge
// sparse operand allocated first, tensor shape entries taken on trust, the
// "undefined" operand name, the seconds of empty rows) are fixed and their
// cases run by default; each also has a test in hostile.test.mjs.
const KNOWN = {
  // A [2^24 x 0] operand can make a legitimate product of 2^24 x 3 values
  // (matmul with a [0 x 3]): seconds of declared work, past the per-call
  // budget without being a bug.
  emptyRows: true,
};

/** Whether the cases of a known bug stay out of this run (FUZZ_API_KNOWN=1 or =name,name puts them back). */
const guarded = (name) => KNOWN[name] === true && !UNGUARD.has('1') && !UNGUARD.has(name);

// ------------------------------------------------------------------ random numbers

/** A 32-bit LCG (Numerical Recipes constants), seeded per case from (seed, index). */
function rngFor(seed, index) {
  let s = (seed ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0;
  const next = () => {
    s = (Math.imul(1664525, s) + 1013904223) >>> 0;
    return s / 4294967296;
  };
  next();
  next();
  const int = (lo, hi) => lo + Math.floor(next() * (hi - lo + 1));
  const pick = (a) => a[Math.floor(next() * a.length)];
  const chance = (p) => next() < p;
  const uniform = (lo, hi) => lo + (hi - lo) * next();
  return { next, int, pick, chance, uniform };
}

// ------------------------------------------------------------------ shapes and values

const HUGE = [2 ** 31, 2 ** 32, 2 ** 32 + 5, 2 ** 40, 2 ** 53, 2 ** 62];
const CAP = 2 ** 28; // the core's most elements in one value
const WASM_DIM = 2 ** 32 - 1; // the largest dimension a 32-bit usize holds

const sizeOf = (s) => s.reduce((a, d) => a * d, 1);
const sameShape = (a, b) => a.length === b.length && a.every((d, i) => d === b[i]);
const fmt = (s) => (s.length === 0 ? 'scalar' : s.length === 1 ? `[${s[0]}]` : `[${s[0]}×${s[1]}]`);
const isTensor = (x) => x !== null && typeof x === 'object' && x.data instanceof Float64Array && Array.isArray(x.shape);

function smallShape(r) {
  const k = r.next();
  if (k < 0.3) return [];
  if (k < 0.65) return [r.int(1, 4)];
  return [r.int(1, 4), r.int(1, 4)];
}

/** A zero-size shape, small or huge. */
function emptyShape(r) {
  if (!guarded('emptyRows') && r.chance(0.1)) return r.pick([[2 ** 24, 0], [0, 2 ** 24]]);
  return r.pick([[0], [0, 3], [5, 0], [0, 0], [0, 1], [r.pick(HUGE), 0], [0, r.pick(HUGE)], [2 ** 32 + 5, 0], [0, 2 ** 62]]);
}

const SPECIAL = [NaN, Infinity, -Infinity, -0, 0, 1e308, -1e308, 5e-324, 1e-300, 2 ** 53];

function entry(r, special) {
  if (special && r.chance(0.15)) return r.pick(SPECIAL);
  return r.uniform(-2, 2);
}

function randData(r, shape, special = false) {
  const d = new Float64Array(sizeOf(shape));
  for (let i = 0; i < d.length; i++) d[i] = entry(r, special);
  return d;
}

/** A Float64Array view at a random offset into a larger buffer (tensors read in place). */
function offsetCopy(r, data) {
  if (!r.chance(0.2)) return Float64Array.from(data);
  const pad = r.int(1, 3);
  const buf = new Float64Array(data.length + pad + 1).fill(-7);
  buf.set(data, pad);
  return buf.subarray(pad, pad + data.length);
}

/** The value `data` of `shape` in a random form asTensor accepts. */
function inForm(r, data, shape) {
  const n = data.length;
  if (n === 0 || r.chance(0.2)) return { data: offsetCopy(r, data), shape: [...shape] };
  if (shape.length === 0) return data[0];
  if (shape.length === 1) return r.chance(0.3) ? offsetCopy(r, data) : Array.from(data);
  const [m, c] = shape;
  const how = r.int(0, 2);
  return Array.from({ length: m }, (_, i) => {
    const row = data.subarray(i * c, (i + 1) * c);
    return how === 1 || (how === 2 && r.chance(0.5)) ? Float64Array.from(row) : Array.from(row);
  });
}

/** An array of length n with no elements (Object.assign([], { length }) costs ~160 ms at 2^25,
 * as does any length up to 2^25: V8 allocates the holes). */
function sparseOf(n) {
  const a = [];
  a.length = n;
  return a;
}

/** Values no op accepts as an operand. */
function garbage(r) {
  const sparse = [];
  sparse.length = r.pick([3, 1000, 2 ** 28, 2 ** 31 - 1, guarded('hugeSparse') ? 2 ** 31 - 1 : 2 ** 32 - 1]);
  const holes = [1, , 3]; // eslint-disable-line no-sparse-arrays
  const ragged = [[1, 2], [3]];
  const items = [
    'x',
    '',
    '3',
    null,
    undefined,
    true,
    {},
    [],
    [[]],
    [new Float64Array(0)],
    Symbol('s'),
    10n,
    sparse,
    holes,
    ragged,
    [[1, 2], [3, , ]], // eslint-disable-line no-sparse-arrays
    [1, '2'],
    [1, null],
    [[1], 2],
    [1, [2]],
    new Float32Array(3),
    new Int32Array(2),
    new ArrayBuffer(8),
    { data: [1, 2], shape: [2] },
    { data: new Float64Array(2), shape: [3] },
    { data: new Float64Array(2), shape: 2 },
    { data: new Float64Array(0), shape: [-1, 0] },
    { data: new Float64Array(0), shape: [1.5, 0] },
    { data: new Float64Array(0), shape: [NaN, 0] },
    { data: new Float64Array(0), shape: [Infinity, 0] },
    { data: new Float64Array(0), shape: [0, 0, 0] },
    { data: new Float64Array(1), shape: [1, 1, 1] },
    { data: new Float64Array(0), shape: [2 ** 64, 0] },
    { data: new Float64Array(0), shape: [1e300, 0] },
    () => 1,
    new Map(),
    new Date(0),
    Object.create(null),
  ];
  if (!guarded('shapeEntries')) {
    items.push({ data: new Float64Array(0), shape: [null] }, { data: new Float64Array(1), shape: [true] }, { data: new Float64Array(2), shape: ['2'] }, { data: new Float64Array(0), shape: ['0'] });
  }
  return r.pick(items);
}

// ------------------------------------------------------------------ rendering (reproductions)

function num(x) {
  if (Object.is(x, -0)) return '-0';
  if (Number.isNaN(x)) return 'NaN';
  if (x === Infinity) return 'Infinity';
  if (x === -Infinity) return '-Infinity';
  return String(x);
}

/** Entries an array or Float64Array literal spells out; past this a reproduction names its length (and its fill). */
const LIT_ENTRIES = 64;
/** The most characters of a reproduction: it must never be larger than the failure it reports. */
const REPRO_CHARS = 16000;

/** Whether an array has any element (for..in stops at the first; a sparse 2^32 − 1 array has none). */
function hasElements(a) {
  for (const _ in a) return true; // eslint-disable-line no-unreachable-loop
  return false;
}

/** `v` as a literal, or as an expression that makes it (sparseOf(n), new Float64Array(n).fill(x)) past LIT_ENTRIES. */
function lit(v, depth = 0) {
  if (depth > 8) return '…';
  if (typeof v === 'number') return num(v);
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'bigint') return `${v}n`;
  if (typeof v === 'symbol') return `Symbol(${JSON.stringify(v.description)})`;
  if (typeof v === 'function') return v.src ?? '() => 1';
  if (v === null || v === undefined || typeof v === 'boolean') return String(v);
  if (v instanceof Float64Array) {
    if (v.length > LIT_ENTRIES) {
      const same = v.every((x) => Object.is(x, v[0]));
      if (same) return Object.is(v[0], 0) ? `new Float64Array(${v.length})` : `new Float64Array(${v.length}).fill(${num(v[0])})`;
      return `Float64Array.of(${Array.from(v.subarray(0, 8), num).join(', ')}, /* … ${v.length - 8} more entries, not shown */)`;
    }
    return v.length === 0 ? 'new Float64Array(0)' : `Float64Array.of(${Array.from(v, num).join(', ')})`;
  }
  if (ArrayBuffer.isView(v)) return `new ${v.constructor.name}(${v.length})`;
  if (v instanceof ArrayBuffer) return `new ArrayBuffer(${v.byteLength})`;
  if (v instanceof Map) return 'new Map()';
  if (v instanceof Date) return 'new Date(0)';
  if (v instanceof G.Var) return `G.variable(${lit(v.value, depth + 1)})`;
  if (Array.isArray(v)) {
    if (v.length > LIT_ENTRIES) {
      if (!hasElements(v)) return `sparseOf(${v.length})`;
      const first = v[0];
      let same = v.length <= 2 ** 24 && (first === null || typeof first !== 'object');
      for (let i = 0; same && i < v.length; i++) same = i in v && Object.is(v[i], first);
      if (same) return `new Array(${v.length}).fill(${lit(first, depth + 1)})`;
      return `/* an array of length ${v.length}, not shown */ sparseOf(${v.length})`;
    }
    const parts = [];
    for (let i = 0; i < v.length; i++) parts.push(i in v ? lit(v[i], depth + 1) : '');
    return `[${parts.join(', ')}${v.length > 0 && !(v.length - 1 in v) ? ',' : ''}]`;
  }
  if (Object.getPrototypeOf(v) === null) return 'Object.create(null)';
  const keys = Object.keys(v);
  // Object literal syntax would make "__proto__" the prototype: mapOf keeps it a key.
  if (keys.includes('__proto__')) {
    return `mapOf([${keys.map((k) => `[${JSON.stringify(k)}, ${lit(Object.getOwnPropertyDescriptor(v, k).value, depth + 1)}]`).join(', ')}])`;
  }
  const parts = keys.map((k) => `${JSON.stringify(k)}: ${lit(v[k], depth + 1)}`);
  return `{ ${parts.join(', ')} }`;
}

/** A map literal for the reproduction, correct for a "__proto__" key too. */
const mapLit = (v) => lit(v);

/**
 * A reproduction's text from `render`, at most REPRO_CHARS long, and never
 * a throw: a renderer that fails (a string past V8's limit, a getter that
 * throws) gives a one-line description instead.
 */
function safeRender(render) {
  let text;
  try {
    text = String(render());
  } catch (e) {
    return `/* the reproduction could not be rendered: ${String(e?.message ?? e).slice(0, 200)} */`;
  }
  return text.length <= REPRO_CHARS ? text : `${text.slice(0, REPRO_CHARS)}\n/* … ${text.length - REPRO_CHARS} more characters, not shown */`;
}

const MAP_OF =
  "const sparseOf = (n) => { const a = []; a.length = n; return a; };\nconst mapOf = (es) => { const o = {}; for (const [k, v] of es) Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true }); return o; };";

// ------------------------------------------------------------------ the shape model

const ELEM2 = ['add', 'mul', 'sub', 'div', 'maximum', 'minimum'];
const UNARY = ['neg', 'exp', 'log', 'sqrt', 'square', 'tanh', 'sigmoid', 'relu', 'lgamma'];
const OTHER = [
  'sum', 'mean', 'matmul', 'dot', 'transpose', 'diagPart', 'trace', 'addDiag', 'reshape', 'slice', 'concat',
  'triangularSolve', 'cholesky', 'logdetPSD', 'solvePSD', 'solveGeneral', 'inv', 'pow',
];
const ALL_OPS = [...ELEM2, ...UNARY, ...OTHER];
const VALUE_ERRORS = /not symmetric|not positive definite|singular/;

class Invalid {
  constructor(why) {
    this.why = why;
  }
}
const bad = (why) => new Invalid(why);
const isShape = (s) => Array.isArray(s);

function bcast(a, b) {
  if (sameShape(a, b)) return a;
  if (a.length === 0) return b;
  if (b.length === 0) return a;
  if (a.length === 1 && b.length === 2 && b[1] === a[0]) return b;
  if (b.length === 1 && a.length === 2 && a[1] === b[0]) return a;
  return bad('shapes do not match');
}

const square = (s) => s.length === 2 && s[0] === s[1];
const posInt = (d) => Number.isInteger(d) && d > 0;
const natInt = (d) => Number.isInteger(d) && d >= 0;

/**
 * The result shape of `op` on operands of shapes `ss` with static arguments
 * `extra`, per SPEC §3-5, or an Invalid when the op must throw.
 */
/** Ops that are plain functions of fixed arity: extra operands are ignored, missing ones are undefined. */
const FIXED = { matmul: 2, dot: 2, addDiag: 2, solveGeneral: 2, solvePSD: 2, triangularSolve: 2, pow: 1, reshape: 1, slice: 1, trace: 1, logdetPSD: 1, inv: 1 };
/** Ops that check their operand count (SPEC §3): unary ones, and the strictly binary ones. */
const ARITY = { transpose: 1, diagPart: 1, cholesky: 1, sum: 1, mean: 1 };

function model(op, ss, extra = {}) {
  if (op in FIXED) {
    if (ss.length < FIXED[op]) return bad('missing operand');
    ss = ss.slice(0, FIXED[op]);
  }
  if (op in ARITY && ss.length !== ARITY[op]) return bad('arity');
  if ((op === 'add' || op === 'mul') && ss.length < 2) return bad('arity');
  if (ss.length === 0 && op !== 'concat') return bad('arity');
  if (ss.some((s) => s instanceof Invalid || s === null || s === undefined)) return bad('operand');
  const [a, b] = ss;
  const r = (() => {
    if (op === 'add' || op === 'mul') {
      if (ss.length < 2) return bad('arity');
      let acc = a;
      for (let i = 1; i < ss.length; i++) {
        acc = bcast(acc, ss[i]);
        if (acc instanceof Invalid) return acc;
      }
      return acc;
    }
    if (ELEM2.includes(op)) return ss.length !== 2 ? bad('arity') : bcast(a, b);
    if (UNARY.includes(op)) return ss.length !== 1 ? bad('arity') : a;
    switch (op) {
      case 'pow':
        return typeof extra.k === 'number' && Number.isFinite(extra.k) ? a : bad('exponent');
      case 'sum':
      case 'mean':
        return ss.length !== 1 ? bad('arity') : [];
      case 'matmul':
        if (a.length !== 2 || b.length === 0 || b[0] !== a[1]) return bad('matmul');
        return b.length === 1 ? [a[0]] : [a[0], b[1]];
      case 'dot':
        return a.length === 1 && b.length === 1 && a[0] === b[0] ? [] : bad('dot');
      case 'transpose':
        return a.length === 2 ? [a[1], a[0]] : bad('transpose');
      case 'diagPart':
        return square(a) ? [a[0]] : bad('diagPart');
      case 'trace':
        return square(a) ? [] : bad('trace');
      case 'addDiag':
        if (!square(a)) return bad('addDiag');
        return b.length === 0 || (b.length === 1 && b[0] === a[0]) ? a : bad('addDiag alpha');
      case 'reshape': {
        const t = extra.shape;
        if (!Array.isArray(t) || t.length > 2 || !t.every(posInt)) return bad('reshape shape');
        return sizeOf(t) === sizeOf(a) ? [...t] : bad('reshape count');
      }
      case 'slice': {
        const { start, size } = extra;
        if (a.length === 0) return bad('slice scalar');
        if (!Array.isArray(start) || !Array.isArray(size) || start.length !== a.length || size.length !== a.length) return bad('slice entries');
        for (let i = 0; i < a.length; i++) {
          if (!natInt(start[i]) || !posInt(size[i])) return bad('slice ints');
          if (start[i] + size[i] > a[i]) return bad('slice exceeds');
        }
        return a.length === 1 ? [size[0]] : [size[0], size[1]];
      }
      case 'concat': {
        if (ss.length === 0) return bad('concat empty');
        if (a.length < 2) {
          if (!ss.every((s) => s.length < 2)) return bad('concat ranks');
          return [exactSum(ss.map(sizeOf))];
        }
        if (!ss.every((s) => s.length === 2)) return bad('concat ranks');
        const axis = extra.axis ?? 0;
        if (axis !== 0 && axis !== 1) return bad('concat axis');
        const other = 1 - axis;
        if (!ss.every((s) => s[other] === a[other])) return bad('concat agree');
        const total = exactSum(ss.map((s) => s[axis]));
        return axis === 0 ? [total, a[1]] : [a[0], total];
      }
      case 'triangularSolve':
      case 'solvePSD':
      case 'solveGeneral':
        if (!square(a)) return bad('solve square');
        if (b.length === 0 || b[0] !== a[0]) return bad('solve rhs');
        return b;
      case 'cholesky':
      case 'inv':
        return square(a) ? a : bad('square');
      case 'logdetPSD':
        return square(a) ? [] : bad('square');
      default:
        throw new Error(`model: no rule for ${op}`);
    }
  })();
  if (r instanceof Invalid) return r;
  // Natively a dimension is a usize, a size at most 2^28 elements; under
  // WebAssembly a dimension also fits 32 bits.
  if (sizeOf(r) > CAP || r.some((d) => d >= 2 ** 64)) return bad('too large');
  return r;
}

/**
 * The sum of whole dimensions as the core adds them: exactly (in 64 bits), rounded once when
 * it becomes a JavaScript number. Summed as numbers, 1 + 2^53 + 1 gave 2^53 where the core
 * says 2^53 + 2 (seed 1211, case 58301: a concat of empty [0×1], [0×2^53] and [0×1]).
 */
const exactSum = (dims) =>
  dims.every(Number.isInteger) ? Number(dims.reduce((t, d) => t + BigInt(d), 0n)) : dims.reduce((t, d) => t + d, 0);

/** Whether a shape (of a leaf or a result) may be refused as too large by the build. */
const tooWide = (s) => (WASM && s.some((d) => d > WASM_DIM)) || s.some((d) => d > 2 ** 53);
// Past 2^53 a JavaScript number no longer names one dimension: 3·2^62 + 3
// (a concat natively) and 3·2^62 (a tensor's shape) print alike here and
// differ in the core, so the model gives no verdict on such shapes' errors.

// ------------------------------------------------------------------ programs

const KEYS = [
  'a', 'b', 'w', 'x', '__proto__', 'constructor', 'toString', 'valueOf', 'hasOwnProperty', 'prototype', '',
  ' ', 'ünï', '名前', '😀', '0', '1', '7', '01', '-1', '1e3', 'NaN', 'length', 'data', 'shape', 'then',
  'a:s,b', 'a,b', 'x:v2',
];

function pickKeys(r, n, guardSig) {
  const out = [];
  while (out.length < n) {
    const k = r.pick(KEYS);
    if (out.includes(k)) continue;
    // A map with both `data` (a Float64Array) and `shape` (an array) is a tensor by definition.
    if ((k === 'data' && out.includes('shape')) || (k === 'shape' && out.includes('data'))) continue;
    if (guardSig && /[:,]/.test(k)) continue;
    out.push(k);
  }
  return out;
}

/**
 * A random program: leaves (parameters, inputs), then steps, each an op on
 * earlier values or on constants; the root is the last step, reduced by sum
 * or mean unless `reduce` is null. Everything is data, so a program can be
 * replayed, rendered as code and shrunk.
 */
function genProgram(r) {
  const map = r.chance(0.6);
  const nParams = map ? r.int(0, 3) + (r.chance(0.8) ? 1 : 0) : 1;
  const keys = map ? pickKeys(r, nParams, guarded('signatureKeys')) : [null];
  const withInputs = r.chance(0.25);
  const inKeys = withInputs ? pickKeys(r, r.int(0, 2), false) : null;
  const leafShape = () => (r.chance(0.06) ? emptyShape(r) : smallShape(r));
  const special = r.chance(0.15);
  const leaves = [];
  for (const k of keys) leaves.push({ kind: 'param', key: k, shape: leafShape() });
  for (const k of inKeys ?? []) leaves.push({ kind: 'input', key: k, shape: leafShape() });
  const shapes = leaves.map((l) => l.shape);
  const steps = [];
  const constant = (want) => {
    // A shape too big to hold (a partner of a huge dimension) falls back to a small one.
    const shape = sizeOf(want) > 4096 ? smallShape(r) : want;
    return { c: inForm(r, randData(r, shape, special), shape), shape };
  };
  const have = (pred) => shapes.map((s, i) => [s, i]).filter(([s]) => isShape(s) && pred(s));
  /** An operand satisfying pred: an existing value (usually) or a constant of `fallback` shape. */
  const operand = (pred, fallback) => {
    const c = have(pred);
    if (c.length > 0 && r.chance(0.8)) return r.pick(c)[1];
    if (fallback === undefined) return null;
    return constant(fallback);
  };
  const shapeOfRef = (ref) => (typeof ref === 'number' ? shapes[ref] : ref.shape);
  const emit = (op, refs, extra = {}) => {
    const s = model(op, refs.map(shapeOfRef), extra);
    steps.push({ op, refs, extra, expect: s });
    shapes.push(s);
    return shapes.length - 1;
  };
  const anyRef = () => operand(() => true, smallShape(r));
  const sq = (n) => operand((s) => square(s) && s[0] === n && n > 0, [n, n]);
  /** A well-conditioned square matrix of order n: a square value plus (n + 2) on its diagonal. */
  const wellConditioned = (n) => emit('addDiag', [sq(n), { c: n + 2, shape: [] }]);
  /** A symmetric positive definite matrix: X Xᵀ + (k + 1) I, exactly symmetric by construction. */
  const gram = (n) => {
    const k = r.int(1, 3);
    const X = operand((s) => s.length === 2 && s[0] === n && s[1] > 0, [n, k]);
    const cols = shapeOfRef(X)[1];
    const alpha = r.chance(0.7) ? { c: cols + 1, shape: [] } : { c: inForm(r, Float64Array.from({ length: n }, () => r.uniform(cols + 1, cols + 2)), [n]), shape: [n] };
    return emit('addDiag', [emit('matmul', [X, emit('transpose', [X])]), alpha]);
  };
  const order = () => {
    const c = have((s) => s.length > 0 && s[0] > 0 && s[0] <= 4);
    return c.length > 0 && r.chance(0.7) ? shapes[r.pick(c)[1]][0] : r.int(1, 4);
  };
  const rhs = (n) => operand((s) => s.length >= 1 && s[0] === n, r.chance(0.5) ? [n] : [n, r.int(1, 3)]);

  const nSteps = r.int(1, 7);
  for (let t = 0; t < nSteps; t++) {
    const op = r.pick(ALL_OPS);
    // Rarely, operands at random: the model says whether the op must throw.
    if (r.chance(0.04)) {
      const arity = ELEM2.includes(op) || ['matmul', 'dot', 'addDiag', 'triangularSolve', 'solvePSD', 'solveGeneral'].includes(op) ? 2 : 1;
      const refs = Array.from({ length: arity }, anyRef);
      if (r.chance(0.25)) refs[r.int(0, arity - 1)] = { c: garbage(r), shape: bad('garbage') };
      const extra = op === 'pow' ? { k: r.pick([2, 0.5, NaN, Infinity, '2', null, 2n]) } : op === 'reshape' ? { shape: r.pick([[2], [0], [-1], [1.5], [2, 2], [1, 1, 1], 'x', [2 ** 62, 0]]) } : op === 'slice' ? { start: r.pick([[0], [0, 0], [], [-1], [0.5], [2 ** 53]]), size: r.pick([[1], [1, 1], [0], [2 ** 31]]) } : op === 'concat' ? { axis: r.pick([0, 1, 2, -1, '0', null]) } : {};
      if (op === 'concat') emit(op, Array.from({ length: r.int(1, 3) }, anyRef), extra);
      else emit(op, refs, extra);
      break;
    }
    if (ELEM2.includes(op)) {
      const a = anyRef();
      const sa = shapeOfRef(a);
      const choice = r.next();
      let sb = sa;
      if (choice < 0.25) sb = [];
      else if (choice < 0.35 && sa.length === 2) sb = [sa[1]];
      else if (choice < 0.45 && sa.length === 1) sb = [r.int(1, 3), sa[0]];
      let b = operand((s) => sameShape(s, sb), sb);
      if (sb.length === 0 && r.chance(0.5)) b = { c: r.uniform(-2, 2), shape: [] };
      const refs = r.chance(0.5) ? [a, b] : [b, a];
      if ((op === 'add' || op === 'mul') && r.chance(0.3)) refs.push(operand((s) => s.length === 0, []));
      emit(op, refs);
    } else if (UNARY.includes(op) || op === 'sum' || op === 'mean') {
      emit(op, [anyRef()]);
    } else if (op === 'pow') {
      emit(op, [anyRef()], { k: r.pick([2, 3, 0.5, -1, 1.5, -0.5, 0, 1, -2, 2.5]) });
    } else if (op === 'matmul') {
      const A = operand((s) => s.length === 2, [r.int(1, 3), r.int(1, 3)]);
      const k = shapeOfRef(A)[1];
      const B = operand((s) => s.length >= 1 && s[0] === k, r.chance(0.4) ? [k] : [k, r.int(1, 3)]);
      emit(op, [A, B]);
    } else if (op === 'dot') {
      const u = operand((s) => s.length === 1, [r.int(1, 4)]);
      const n = shapeOfRef(u)[0];
      emit(op, [u, operand((s) => sameShape(s, [n]), [n])]);
    } else if (op === 'transpose') {
      emit(op, [operand((s) => s.length === 2, [r.int(1, 3), r.int(1, 3)])]);
    } else if (op === 'diagPart' || op === 'trace') {
      emit(op, [operand(square, [r.int(1, 3), 0].map((_, i, a) => a[0]))]);
    } else if (op === 'addDiag') {
      const A = operand(square, [2, 2]);
      const n = shapeOfRef(A)[0];
      emit(op, [A, r.chance(0.5) ? operand((s) => s.length === 0, []) : operand((s) => sameShape(s, [n]), [n])]);
    } else if (op === 'reshape') {
      const a = operand((s) => sizeOf(s) > 0, smallShape(r));
      const n = sizeOf(shapeOfRef(a));
      const divisors = Array.from({ length: n }, (_, i) => i + 1).filter((d) => n % d === 0);
      const d = r.pick(divisors);
      const target = n === 1 && r.chance(0.5) ? [] : r.chance(0.3) ? [n] : [d, n / d];
      emit(op, [a], { shape: target });
    } else if (op === 'slice') {
      const a = operand((s) => s.length > 0 && sizeOf(s) > 0, [r.int(1, 4), r.int(1, 4)]);
      const s = shapeOfRef(a);
      const start = s.map((d) => r.int(0, d - 1));
      const size = s.map((d, i) => r.int(1, d - start[i]));
      emit(op, [a], { start, size });
    } else if (op === 'concat') {
      const first = anyRef();
      const s0 = shapeOfRef(first);
      const parts = [first];
      const axis = r.int(0, 1);
      const n = r.int(0, 3);
      for (let i = 0; i < n; i++) {
        if (s0.length < 2) {
          parts.push(r.chance(0.3) ? { c: r.uniform(-2, 2), shape: [] } : operand((s) => s.length < 2, r.chance(0.5) ? [] : [r.int(1, 3)]));
        } else {
          const want = axis === 0 ? [r.int(1, 3), s0[1]] : [s0[0], r.int(1, 3)];
          parts.push(operand((s) => s.length === 2 && s[1 - axis] === s0[1 - axis], want));
        }
      }
      emit(op, parts, s0.length === 2 || r.chance(0.3) ? { axis } : {});
    } else if (op === 'triangularSolve') {
      const n = order();
      const T = wellConditioned(n);
      const opts = r.pick([undefined, { lower: true }, { lower: false }, {}]);
      emit(op, [T, rhs(n)], { options: opts });
    } else if (op === 'cholesky' || op === 'logdetPSD') {
      emit(op, [gram(order())]);
    } else if (op === 'solvePSD') {
      const n = order();
      emit(op, [gram(n), rhs(n)]);
    } else if (op === 'solveGeneral') {
      const n = order();
      emit(op, [wellConditioned(n), rhs(n)]);
    } else if (op === 'inv') {
      emit(op, [wellConditioned(order())]);
    }
  }
  const reduce = r.chance(0.92) ? r.pick(['sum', 'sum', 'mean']) : null;
  const point = (rr) => {
    const vals = leaves.map((l) => inForm(rr, randData(rr, l.shape, special), l.shape));
    const pack = (kind, ks) => {
      const idx = leaves.map((l, i) => [l, i]).filter(([l]) => l.kind === kind);
      if (kind === 'param' && !map) return vals[idx[0][1]];
      const o = {};
      for (const [l, i] of idx) Object.defineProperty(o, l.key, { value: vals[i], enumerable: true, writable: true, configurable: true });
      return o;
    };
    return { params: pack('param'), inputs: withInputs ? pack('input') : undefined };
  };
  const p1 = point(r);
  const p2 = point(r);
  return { map, keys, inKeys, leaves, steps, reduce, p1, p2 };
}

/**
 * Run a program's steps as an objective; `hook(step, operands, out)` sees
 * every step (eager only). With `live` (a set of step indices), only those
 * steps run: the objective compile replays, which drops dead ops.
 */
function execute(prog, P, I, hook, live) {
  const vals = [];
  for (const l of prog.leaves) vals.push(l.kind === 'param' ? (prog.map ? P[l.key] : P) : I[l.key]);
  const res = (ref) => (typeof ref === 'number' ? vals[ref] : ref.c);
  for (let i = 0; i < prog.steps.length; i++) {
    const st = prog.steps[i];
    if (live !== undefined && !live.has(i)) {
      vals.push(undefined);
      continue;
    }
    const xs = st.refs.map(res);
    const out = callOp(st.op, xs, st.extra);
    if (hook) hook(st, xs, out);
    vals.push(out);
  }
  const last = vals[vals.length - 1];
  if (prog.steps.length === 0) return G.sum(last);
  return prog.reduce ? G[prog.reduce](last) : last;
}

function callOp(op, xs, extra) {
  switch (op) {
    case 'pow':
      return G.pow(xs[0], extra.k);
    case 'reshape':
      return G.reshape(xs[0], extra.shape);
    case 'slice':
      return G.slice(xs[0], extra.start, extra.size);
    case 'concat':
      return 'axis' in extra ? G.concat(xs, { axis: extra.axis }) : G.concat(xs);
    case 'triangularSolve':
      return extra.options === undefined ? G.triangularSolve(xs[0], xs[1]) : G.triangularSolve(xs[0], xs[1], extra.options);
    default:
      return G[op](...xs);
  }
}

/** The program as JavaScript source: an objective and its two points. */
function renderProgram(prog) {
  const lines = [];
  const names = [];
  const lf = prog.leaves.map((l) => (l.kind === 'param' ? (prog.map ? `p[${JSON.stringify(l.key)}]` : 'p') : `d[${JSON.stringify(l.key)}]`));
  names.push(...lf);
  const ref = (x) => (typeof x === 'number' ? names[x] : lit(x.c));
  prog.steps.forEach((st, i) => {
    const xs = st.refs.map(ref);
    let call;
    if (st.op === 'pow') call = `G.pow(${xs[0]}, ${lit(st.extra.k)})`;
    else if (st.op === 'reshape') call = `G.reshape(${xs[0]}, ${lit(st.extra.shape)})`;
    else if (st.op === 'slice') call = `G.slice(${xs[0]}, ${lit(st.extra.start)}, ${lit(st.extra.size)})`;
    else if (st.op === 'concat') call = `G.concat([${xs.join(', ')}]${'axis' in st.extra ? `, { axis: ${lit(st.extra.axis)} }` : ''})`;
    else if (st.op === 'triangularSolve') call = `G.triangularSolve(${xs.join(', ')}${st.extra.options === undefined ? '' : `, ${lit(st.extra.options)}`})`;
    else call = `G.${st.op}(${xs.join(', ')})`;
    lines.push(`  const v${i} = ${call};`);
    names.push(`v${i}`);
  });
  const last = names[names.length - 1];
  const root = prog.steps.length === 0 ? `G.sum(${last})` : prog.reduce ? `G.${prog.reduce}(${last})` : last;
  lines.push(`  return ${root};`);
  const P = (pt) => (prog.map ? mapLit(pt.params) : lit(pt.params));
  const src = [
    "import * as G from '@tangent.to/grad';",
    MAP_OF,
    `const f = (p${prog.inKeys ? ', d' : ''}) => {`,
    ...lines,
    '};',
    `const p1 = ${P(prog.p1)};`,
    `const p2 = ${P(prog.p2)};`,
  ];
  if (prog.inKeys) src.push(`const d1 = ${mapLit(prog.p1.inputs)};`, `const d2 = ${mapLit(prog.p2.inputs)};`);
  return src.join('\n');
}

// ------------------------------------------------------------------ checks

class Failure extends Error {}
/** Fail the case. `tag` names its class of failure (else its message does: see `record`). */
const fail = (msg, tag) => {
  const e = new Failure(msg);
  e.tag = tag;
  throw e;
};

let clock = { worst: 0, where: '' };

/**
 * Milliseconds since (t0, c0) by the wall clock and by the process's CPU
 * time, whichever is less: a process starved by the scheduler (nice 19
 * beside a benchmark) is slow by the wall clock only, and a call that
 * iterates a huge dimension is slow by both.
 */
function since(t0, c0) {
  const cpu = process.cpuUsage(c0);
  return Math.min(performance.now() - t0, (cpu.user + cpu.system) / 1000);
}

/**
 * Past this, a call is not re-timed, nor its case judged again: no
 * collection takes seconds of CPU time, and a hang (a loop over 2^31
 * holes) would take minutes more each time.
 */
const HANG_MS = 25 * BUDGET_MS;

/** Whether a slow call is being re-timed now (its inner calls then neither re-time nor count). */
let retiming = false;
/** Milliseconds spent re-timing inner calls, which their callers are not charged for. */
let retimeSpent = 0;

/**
 * A call that took longer than the budget, run once more after a full
 * collection: the time it is judged by is the lesser of the two. A call
 * slowed by the collector, by the plan budget releasing every stale plan
 * at once, or by the scheduler, passes; a call that iterates a huge
 * dimension is slow twice and still counts. The first run's outcome is the
 * one the oracle judges; the second's is dropped.
 */
function retime(fn) {
  const w0 = performance.now();
  retiming = true;
  try {
    collect();
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    try {
      fn();
    } catch {
      // judged on the first run
    }
    return since(t0, c0);
  } finally {
    retiming = false;
    retimeSpent += performance.now() - w0;
    stats.notes.retimedCalls = (stats.notes.retimedCalls ?? 0) + 1;
  }
}

/** Call fn, timing it; a throw must be an Error with a message. Returns { ok, value } or { ok: false, error }. */
function attempt(label, fn) {
  const spent0 = retimeSpent;
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  let out;
  try {
    out = { ok: true, value: fn() };
  } catch (e) {
    if (e instanceof Failure) throw e;
    if (!(e instanceof Error)) fail(`${label}: threw a non-Error: ${typeof e} ${String(e?.toString?.() ?? e)}`);
    if (typeof e.message !== 'string' || e.message.length === 0) fail(`${label}: threw an Error with an empty message (${e.name})`);
    if (e.constructor !== Error && !retiming) {
      stats.errorTypes[e.constructor.name] = (stats.errorTypes[e.constructor.name] ?? 0) + 1;
      const seen = (stats.errorSamples[e.constructor.name] ??= new Set());
      if (seen.size < 8) seen.add(`${label}: ${e.message.replace(/\d+(\.\d+)?/g, 'N')}`);
    }
    out = { ok: false, error: e };
    if (e instanceof RangeError && /allocation failed|Invalid typed array length/.test(e.message)) {
      // Known: a value is allocated at an operand's length before its elements are checked.
      if (!guarded('hugeSparse')) fail(`${label}: allocated before validating: ${e.constructor.name} ${e.message}`);
      stats.notes.hugeSparse = (stats.notes.hugeSparse ?? 0) + 1;
    }
    if (/^undefined (must|is not)/.test(e.message)) {
      // Known: an op's coercion names the operand "undefined" where asTensor says "value".
      if (!guarded('undefinedName')) fail(`${label}: the message names the operand "undefined": ${e.message}`);
      stats.notes.undefinedName = (stats.notes.undefinedName ?? 0) + 1;
    }
  }
  if (retiming) return out;
  // (time spent re-timing slow inner calls is theirs, not this call's)
  let took = since(t0, c0) - (retimeSpent - spent0);
  if (PROFILE !== null) {
    const key = label.replace(/ p[12]\b.*/, '');
    PROFILE[key] = (PROFILE[key] ?? 0) + (performance.now() - t0);
  }
  if (took > BUDGET_MS && took < HANG_MS) took = Math.min(took, retime(fn));
  if (took > clock.worst) clock = { worst: took, where: label };
  return out;
}

function bitsEqual(a, b, path = '') {
  if (typeof a === 'number' || typeof b === 'number') {
    if (!Object.is(a, b)) fail(`${path || 'value'}: ${num(a)} vs ${num(b)}`);
    return;
  }
  if (a instanceof Float64Array || b instanceof Float64Array) {
    if (!(a instanceof Float64Array && b instanceof Float64Array)) fail(`${path}: Float64Array vs ${typeof b}`);
    if (a.length !== b.length) fail(`${path}: length ${a.length} vs ${b.length}`);
    for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) fail(`${path}[${i}]: ${num(a[i])} vs ${num(b[i])}`);
    return;
  }
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b)) fail(`${path}: array vs not`);
    if (a.length !== b.length) fail(`${path}: length ${a.length} vs ${b.length}`);
    for (let i = 0; i < a.length; i++) bitsEqual(a[i], b[i], `${path}[${i}]`);
    return;
  }
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') {
    if (a !== b) fail(`${path}: ${String(a)} vs ${String(b)}`);
    return;
  }
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.join('\u0000') !== kb.join('\u0000')) fail(`${path}: keys ${JSON.stringify(ka)} vs ${JSON.stringify(kb)}`);
  for (const k of ka) bitsEqual(Object.getOwnPropertyDescriptor(a, k).value, Object.getOwnPropertyDescriptor(b, k).value, `${path}.${k}`);
}

/**
 * A message up to the driver's prefix. Integers past 2^53 are compared as
 * doubles: the eager path prints a dimension of 2^62 as Rust formats it
 * (4611686018427387904), compile as JavaScript does (4611686018427388000).
 */
const stripPrefix = (m) =>
  m.replace(/^(valueAndGrad|compile|compileFromJSON|grad): /, '').replace(/\d{17,}/g, (d) => String(Number(d)));
const SCALAR_ROOT = /the objective must return a scalar/;
/**
 * A tangent refused for its shape, keys or form (readTangent in
 * src/js/higher.js), by asTensor's messages too ("jvp: the tangent must be …",
 * "hvp: tangent "k" is not rectangular …").
 */
const TANGENT_ERR = /^(jvp|hvp): (the tangent |tangent ")/;

/** Two outcomes agree: both values bit for bit, or both Errors with the same message (up to the driver's prefix). */
function sameOutcome(a, b, what) {
  if (a.ok !== b.ok) {
    fail(`${what}: ${a.ok ? 'returned' : `threw "${a.error.message}"`} vs ${b.ok ? 'returned' : `threw "${b.error.message}"`}`);
  }
  if (!a.ok) {
    const ma = a.error.message;
    const mb = b.error.message;
    // Eager evaluation meets a failing op before it sees the root; a replay
    // checks the root's shape before it runs. Either error is fair.
    // Likewise a replay reads the tangent (jvp, hvp) before it evaluates, and
    // eager evaluation reads it after recording the objective.
    const late = (m) => SCALAR_ROOT.test(m) || TANGENT_ERR.test(m);
    if ((VALUE_ERRORS.test(ma) && late(mb)) || (late(ma) && VALUE_ERRORS.test(mb))) {
      stats.notes.errorOrder = (stats.notes.errorOrder ?? 0) + 1;
      return;
    }
    if (stripPrefix(a.error.message) !== stripPrefix(b.error.message)) fail(`${what}: messages differ: "${a.error.message}" vs "${b.error.message}"`);
    return;
  }
  try {
    bitsEqual(a.value, b.value);
  } catch (e) {
    if (e instanceof Failure) fail(`${what}: not bit-identical: ${e.message}`);
    throw e;
  }
}

/** The form a parameter's gradient comes back in, checked against the parameter. */
function checkGradForm(param, g, shape, where) {
  if (typeof param === 'number') {
    if (typeof g !== 'number') fail(`${where}: a number parameter got a ${typeof g} gradient`);
  } else if (isTensor(param)) {
    if (!isTensor(g)) fail(`${where}: a tensor parameter got a non-tensor gradient`);
    if (!sameShape(g.shape, shape)) fail(`${where}: gradient shape ${fmt(g.shape)} for ${fmt(shape)}`);
    if (g.data.length !== sizeOf(shape)) fail(`${where}: gradient data length ${g.data.length} for ${fmt(shape)}`);
    if (g.data.buffer === param.data.buffer) fail(`${where}: the gradient shares the parameter's buffer`);
    if (g.shape === param.shape) fail(`${where}: the gradient shares the parameter's shape array`);
  } else if (param instanceof Float64Array || !Array.isArray(param[0]) && !(param[0] instanceof Float64Array)) {
    if (!Array.isArray(g) || g.length !== shape[0] || g.some((x) => typeof x !== 'number')) fail(`${where}: a flat parameter got ${lit(g)}`);
  } else {
    if (!Array.isArray(g) || g.length !== shape[0]) fail(`${where}: a nested parameter got ${lit(g)}`);
    for (const row of g) if (!Array.isArray(row) || row.length !== shape[1] || row.some((x) => typeof x !== 'number')) fail(`${where}: a nested parameter got row ${lit(row)}`);
  }
}

function checkGradient(prog, params, gradient, where) {
  if (!prog.map) {
    checkGradForm(params, gradient, prog.leaves[0].shape, where);
    return;
  }
  if (gradient === null || typeof gradient !== 'object') fail(`${where}: gradient is ${typeof gradient}`);
  if (Object.getPrototypeOf(gradient) !== Object.prototype) fail(`${where}: the gradient map's prototype changed`);
  const kp = Object.keys(params);
  const kg = Object.keys(gradient);
  if (kp.join('\u0000') !== kg.join('\u0000')) fail(`${where}: gradient keys ${JSON.stringify(kg)} for parameters ${JSON.stringify(kp)}`);
  for (const l of prog.leaves) {
    if (l.kind !== 'param') continue;
    const d = Object.getOwnPropertyDescriptor(gradient, l.key);
    if (d === undefined) fail(`${where}: gradient lost key ${JSON.stringify(l.key)}`);
    checkGradForm(Object.getOwnPropertyDescriptor(params, l.key).value, d.value, l.shape, `${where} "${l.key}"`);
  }
}

const flatOf = (v) => {
  if (typeof v === 'number') return [v];
  if (isTensor(v)) return Array.from(v.data);
  if (ArrayBuffer.isView(v)) return Array.from(v);
  return v.flatMap((e) => flatOf(e));
};

function flatParams(prog, params) {
  if (!prog.map) return flatOf(params);
  return prog.leaves.filter((l) => l.kind === 'param').flatMap((l) => flatOf(Object.getOwnPropertyDescriptor(params, l.key).value));
}

/** Parameters rebuilt as tensors from a flat vector (the same signature as any other form). */
function unflat(prog, x) {
  let off = 0;
  const one = (shape) => {
    const n = sizeOf(shape);
    const t = { data: Float64Array.from(x.slice(off, off + n)), shape: [...shape] };
    off += n;
    return t;
  };
  if (!prog.map) return one(prog.leaves[0].shape);
  const o = {};
  for (const l of prog.leaves) if (l.kind === 'param') Object.defineProperty(o, l.key, { value: one(l.shape), enumerable: true, writable: true, configurable: true });
  return o;
}

/**
 * Whether central differences can judge the gradient at this point: an
 * eager pass over the program's steps, looking at every operand and result.
 */
function fdEligible(prog, pt, forwardOnly = false) {
  let ok = true;
  const data = (v) => (v instanceof G.Var ? v.data : G.asTensor(v).data);
  const shp = (v) => (v instanceof G.Var ? v.shape : G.asTensor(v).shape);
  const far = (x, m) => Math.abs(x) > m;
  const margin = (a, b) => Math.abs(a - b) > 1e-3 * (1 + Math.abs(a) + Math.abs(b));
  /** Pairs of broadcast entries of two operands. */
  const pairs = (x, y, f) => {
    const dx = data(x);
    const dy = data(y);
    const sx = shp(x);
    const sy = shp(y);
    const n = Math.max(dx.length, dy.length);
    const at = (d, s, i, other) => (s.length === 0 ? d[0] : d.length === n ? d[i] : d[i % s[0]]);
    for (let i = 0; i < n; i++) if (!f(at(dx, sx, i, sy), at(dy, sy, i, sx))) return false;
    return true;
  };
  const hook = (st, xs, out) => {
    if (!ok) return;
    for (const v of data(out)) if (!Number.isFinite(v) || Math.abs(v) > 1e6) ok = false;
    // Operands too: 1e308 / 1e308 is a fine 1, but its adjoint overflows on
    // the way; and 5e-324 / 5e-324 is 1 with adjoints of ±Infinity.
    for (const x of [...xs, out]) for (const v of data(x)) if (!Number.isFinite(v) || Math.abs(v) > 1e6 || (v !== 0 && Math.abs(v) < 1e-100)) ok = false;
    const x0 = xs[0];
    switch (st.op) {
      case 'maximum':
      case 'minimum':
        if (!pairs(xs[0], xs[1], margin)) ok = false;
        break;
      case 'div':
        if (!data(xs[1]).every((v) => far(v, 1e-2))) ok = false;
        break;
      case 'relu':
      case 'log':
      case 'sqrt':
        if (!data(x0).every((v) => far(v, 1e-2))) ok = false;
        break;
      case 'pow':
        if (!data(x0).every((v) => far(v, 1e-2))) ok = false;
        break;
      case 'solveGeneral':
      case 'triangularSolve':
      case 'inv': {
        // A square operand whose diagonal is small against its entries is ill-conditioned here.
        const d = data(x0);
        const n = Math.round(Math.sqrt(d.length));
        const big = d.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
        for (let i = 0; i < n; i++) if (Math.abs(d[i * n + i]) < 1e-3 * Math.max(1, big)) ok = false;
        break;
      }
      case 'lgamma':
        if (!data(x0).every((v) => v > 1e-2 || Math.abs(v - Math.round(v)) > 1e-2)) ok = false;
        break;
      default:
    }
  };
  // (forwardOnly: the root may be of any rank, for a tangent's differences)
  const vg = G.valueAndGrad((p, d) => execute(prog, p, d, hook));
  const r = attempt('fd probe', () => (forwardOnly ? vg.value(pt.params, pt.inputs) : vg(pt.params, pt.inputs).value));
  return r.ok && ok && flatOf(r.value).every((v) => Number.isFinite(v) && Math.abs(v) < 1e6);
}

/**
 * `fn()` at a point a difference step away, or null where a value-dependent
 * error stops it there: a step can cross a boundary the point itself is
 * inside (positive definite, nonsingular), and then the differences cannot
 * judge (counted in fdSkipped and in notes.fdSteppedOff). Any other error a
 * step away, where the point itself returns, is a failure.
 */
function offPoint(fn) {
  try {
    return fn();
  } catch (e) {
    if (e instanceof Failure) throw e;
    if (e instanceof Error && VALUE_ERRORS.test(e.message)) {
      stats.notes.fdSteppedOff = (stats.notes.fdSteppedOff ?? 0) + 1;
      return null;
    }
    fail(`a difference step away from a point where it returns, the objective threw ${e instanceof Error ? `"${e.message}"` : String(e)}`);
  }
}

/**
 * Difference quotients at steps 1e-5 (coarse) and 1e-6 (fine) judge `got`
 * entry by entry: 'skip' when a step crossed a boundary (null), when a
 * quotient is not finite, or when the two steps disagree by more than 1e-3
 * (the point is too curved for a difference to judge it); else every entry
 * within 1e-5 relative of the fine quotient, plus the steps' disagreement,
 * plus the rounding of values of magnitude `scale`.
 */
function judgeDifferences(got, coarse, fine, scale, what) {
  if (coarse === null || fine === null) return 'skip';
  for (let i = 0; i < fine.length; i++) {
    if (!Number.isFinite(coarse[i]) || !Number.isFinite(fine[i])) return 'skip';
    if (Math.abs(coarse[i] - fine[i]) > 1e-3 * Math.max(1, Math.abs(fine[i]))) return 'skip';
  }
  for (let i = 0; i < fine.length; i++) {
    const allowed = 1e-5 * Math.max(1, Math.abs(fine[i])) + 4 * Math.abs(coarse[i] - fine[i]) + 1e-8 * Math.max(1, Math.abs(scale));
    if (!(Math.abs(got[i] - fine[i]) <= allowed)) {
      fail(`${what} entry ${i} is ${num(got[i])}, central differences give ${num(fine[i])} (step 1e-5: ${num(coarse[i])})`);
    }
  }
  return 'checked';
}

function checkFD(prog, pt, gradient, value, forward) {
  const x = flatParams(prog, pt.params);
  if (x.length === 0 || x.length > 8) return 'skip';
  const g = flatParams(prog, gradient === undefined ? pt.params : gradient);
  const quotient = (h) => {
    const q = [];
    for (let i = 0; i < x.length; i++) {
      const xi = x[i];
      const hi = h * Math.max(1, Math.abs(xi));
      const xp = [...x];
      const xm = [...x];
      xp[i] = xi + hi;
      xm[i] = xi - hi;
      const fp = offPoint(() => forward(unflat(prog, xp)));
      const fm = fp === null ? null : offPoint(() => forward(unflat(prog, xm)));
      if (fm === null) return null;
      q.push((fp - fm) / (xp[i] - xm[i]));
    }
    return q;
  };
  const coarse = quotient(1e-5);
  const fine = coarse === null ? null : quotient(1e-6);
  return judgeDifferences(g, coarse, fine, value, 'gradient');
}

/**
 * Central differences along a direction: (fn(x + t v) − fn(x − t v)) / 2t
 * with t = h·max(1, |x|∞)/|v|∞, fn taking parameters (rebuilt as tensors
 * from a flat vector) to a flat vector; null where a step crossed a boundary.
 */
function along(prog, x, v, fn, h) {
  const vmax = v.reduce((m, e) => Math.max(m, Math.abs(e)), 0);
  const t = (h * x.reduce((m, e) => Math.max(m, Math.abs(e)), 1)) / vmax;
  const a = offPoint(() => fn(unflat(prog, x.map((xi, i) => xi + t * v[i]))));
  const b = a === null ? null : offPoint(() => fn(unflat(prog, x.map((xi, i) => xi - t * v[i]))));
  if (b === null) return null;
  return a.map((ai, i) => (ai - b[i]) / (2 * t));
}

/** A directional derivative `got` (flat) against central differences of fn along v at the point. */
function checkAlong(prog, pt, v, got, fn, scale, what) {
  const x = flatParams(prog, pt.params);
  const vs = flatParams(prog, v);
  // One step for every coordinate: every entry moderate (an unused parameter of 1e308 would set it).
  const moderate = (e) => Number.isFinite(e) && Math.abs(e) < 1e6 && (e === 0 || Math.abs(e) > 1e-100);
  if (x.length === 0 || !x.every(moderate) || !vs.every(moderate) || vs.every((e) => e === 0)) return 'skip';
  const coarse = along(prog, x, vs, fn, 1e-5);
  const fine = coarse === null ? null : along(prog, x, vs, fn, 1e-6);
  return judgeDifferences(got, coarse, fine, scale, what);
}

// ------------------------------------------------------------------ case kinds

const stats = {
  cases: 0,
  kinds: {},
  returned: 0,
  threw: 0,
  fdChecked: 0,
  fdSkipped: 0,
  /** What the higher kind judged: differences checked per method, identities, key orders, faults. */
  higher: {},
  errorTypes: {},
  errorSamples: {},
  notes: {},
  ms: {},
  ops: {},
};

function objectiveOf(prog) {
  const f = prog.inKeys ? (p, d) => execute(prog, p, d) : (p) => execute(prog, p);
  return f;
}

/** Apply program steps eagerly (ambient tape, outside any evaluation) and compare with the shape model. */
function checkModelEager(prog, pt) {
  const P = pt.params;
  const I = pt.inputs;
  let failedAt = -1;
  const vals = [];
  for (const l of prog.leaves) vals.push(l.kind === 'param' ? (prog.map ? Object.getOwnPropertyDescriptor(P, l.key).value : P) : Object.getOwnPropertyDescriptor(I, l.key).value);
  const res = (ref) => (typeof ref === 'number' ? vals[ref] : ref.c);
  for (let i = 0; i < prog.steps.length; i++) {
    const st = prog.steps[i];
    const wide = st.refs.some((ref) => {
      const s = typeof ref === 'number' ? (ref < prog.leaves.length ? prog.leaves[ref].shape : prog.steps[ref - prog.leaves.length].expect) : ref.shape;
      return isShape(s) && tooWide(s);
    }) || (isShape(st.expect) && tooWide(st.expect));
    const out = attempt(`step ${i} (${st.op})`, () => callOp(st.op, st.refs.map(res), st.extra));
    if (!out.ok) {
      const m = out.error.message;
      if (isShape(st.expect) && !VALUE_ERRORS.test(m) && !(wide && /too large|do not match|disagree|must agree|cannot be applied|exceeds/.test(m))) {
        fail(`step ${i}: ${st.op} on ${st.refs.map((r2) => fmt(typeof r2 === 'number' ? (r2 < prog.leaves.length ? prog.leaves[r2].shape : prog.steps[r2 - prog.leaves.length].expect) : r2.shape ?? [])).join(', ')} threw "${m}"; the SPEC's rules give ${fmt(st.expect)}`);
      }
      failedAt = i;
      break;
    }
    const v = out.value;
    if (!(v instanceof G.Var)) fail(`step ${i}: ${st.op} returned ${typeof v}, not a Var`);
    if (!isShape(st.expect)) fail(`step ${i}: ${st.op} returned ${fmt(v.shape)} where it must throw (${st.expect.why})`);
    if (!sameShape(v.shape, st.expect)) fail(`step ${i}: ${st.op} returned ${fmt(v.shape)}, the SPEC's rules give ${fmt(st.expect)}`);
    if (v.data.length !== sizeOf(st.expect)) fail(`step ${i}: ${st.op} data length ${v.data.length} for ${fmt(st.expect)}`);
    stats.ops[st.op] = (stats.ops[st.op] ?? 0) + 1;
    vals.push(v);
  }
  return failedAt;
}

/** The indices of the steps the root depends on (compile keeps these, and drops the rest). */
function liveSteps(prog) {
  const nl = prog.leaves.length;
  const live = new Set([nl + prog.steps.length - 1]);
  for (let i = prog.steps.length - 1; i >= 0; i--) {
    if (!live.has(nl + i)) continue;
    for (const ref of prog.steps[i].refs) if (typeof ref === 'number') live.add(ref);
  }
  const steps = new Set();
  for (let i = 0; i < prog.steps.length; i++) if (live.has(nl + i)) steps.add(i);
  return steps;
}

/** Whether a step that can fail on values (cholesky, solves, inv) is dead: not on the root's path. */
function deadValueStep(prog) {
  const live = liveSteps(prog);
  return prog.steps.some((st, i) => !live.has(i) && /cholesky|logdetPSD|solve|inv/.test(st.op));
}

/** The program's objective without its dead steps: what a compiled replay evaluates. */
function prunedObjective(prog) {
  const live = liveSteps(prog);
  return prog.inKeys ? (p, d) => execute(prog, p, d, undefined, live) : (p) => execute(prog, p, undefined, undefined, live);
}

/**
 * compile drops ops whose result the objective does not use (SPEC §7's
 * rule): a value-dependent failure in such an op throws eagerly but not
 * compiled, and a compiled call may then return, or fail later with another
 * op's message. So where an eager call fails on values, the program has a
 * dead op that can, and the compiled outcome differs, the compiled one is
 * judged against the same eager call of the objective without its dead
 * steps (`pruned`, a thunk giving that outcome), bit for bit or message for
 * message. Counted in notes.deadValueErrors.
 */
function sameOrDead(prog, eager, other, what, pruned) {
  const differ = eager.ok !== other.ok || (!eager.ok && stripPrefix(eager.error.message) !== stripPrefix(other.error.message));
  if (differ && !eager.ok && VALUE_ERRORS.test(eager.error.message) && deadValueStep(prog)) {
    stats.notes.deadValueErrors = (stats.notes.deadValueErrors ?? 0) + 1;
    if (pruned === undefined) {
      // No pruned call to judge by: a return, or another value-dependent failure.
      if (!other.ok && !VALUE_ERRORS.test(other.error.message)) fail(`${what}: eager threw "${eager.error.message}" in a dead op, the other "${other.error.message}"`);
      return;
    }
    sameOutcome(pruned(), other, `${what} (eager without its dead ops)`);
    return;
  }
  sameOutcome(eager, other, what);
}

function runProgram(prog) {
  const f = objectiveOf(prog);
  checkModelEager(prog, prog.p1);
  const vg = G.valueAndGrad(f);
  const c = G.compile(f);
  const { p1, p2 } = prog;
  const E1 = attempt('valueAndGrad p1', () => vg(p1.params, p1.inputs));
  const C1 = attempt('compile p1', () => c(p1.params, p1.inputs));
  sameOutcome(E1, C1, 'valueAndGrad vs compile at p1');
  const Ev1 = attempt('valueAndGrad.value p1', () => vg.value(p1.params, p1.inputs));
  const Cv1 = attempt('compile.value p1', () => c.value(p1.params, p1.inputs));
  sameOutcome(Ev1, Cv1, '.value: valueAndGrad vs compile at p1');
  if (E1.ok) {
    stats.returned++;
    checkGradient(prog, p1.params, E1.value.gradient, 'valueAndGrad p1');
    if (typeof E1.value.value !== 'number') fail('value is not a number');
  } else {
    stats.threw++;
  }
  // The graph is traced once its first call succeeded: rebuild it from its plan.
  const traced = C1.ok || Cv1.ok;
  let J = null;
  // (jin: a rebuilt plan refuses `{}` for no inputs: "built for arguments shaped a:s, got a:s|")
  if (traced) {
    const plan = attempt('toJSON', () => c.toJSON());
    if (!plan.ok) fail(`toJSON threw "${plan.error.message}" after a successful call`);
    const rebuilt = attempt('compileFromJSON', () => G.compileFromJSON(structuredClone(plan.value)));
    if (!rebuilt.ok) fail(`compileFromJSON of toJSON threw "${rebuilt.error.message}"`);
    J = rebuilt.value;
    // The plan survives JSON text too when all its constants are finite.
    const text = JSON.stringify(plan.value);
    // (JSON text turns NaN and ±Infinity into null and -0 into 0: only plans free of them.)
    const negZero = plan.value.nodes.some((n) => n.kind === 'const' && n.data.some((v) => Object.is(v, -0)));
    if (prog.steps.length % 3 === 0 && !/null/.test(text) && !negZero) {
      const again = attempt('compileFromJSON(text)', () => G.compileFromJSON(JSON.parse(text)));
      if (!again.ok) fail(`compileFromJSON of the JSON text threw "${again.error.message}"`);
      sameOutcome(attempt('rebuilt(text) p1', () => again.value.value(p1.params, jin(p1))), Cv1, '.value: compileFromJSON(text) vs compile at p1');
    }
    sameOutcome(attempt('compileFromJSON p1', () => J(p1.params, jin(p1))), C1, 'compileFromJSON vs compile at p1');
    sameOutcome(attempt('compileFromJSON.value p1', () => J.value(p1.params, jin(p1))), Cv1, '.value: compileFromJSON vs compile at p1');
  }
  // A second point at the same signature: a replay, not a trace.
  const E2 = attempt('valueAndGrad p2', () => vg(p2.params, p2.inputs));
  const C2 = attempt('compile p2', () => c(p2.params, p2.inputs));
  let pf = null;
  const pruned = (call) => () => attempt(`${call} p2, dead ops dropped`, () => G.valueAndGrad((pf ??= prunedObjective(prog)))[call](p2.params, p2.inputs));
  const prunedVG = () => attempt('valueAndGrad p2, dead ops dropped', () => G.valueAndGrad((pf ??= prunedObjective(prog)))(p2.params, p2.inputs));
  sameOrDead(prog, E2, C2, 'valueAndGrad vs compile at p2', prunedVG);
  const Ev2 = attempt('valueAndGrad.value p2', () => vg.value(p2.params, p2.inputs));
  sameOrDead(prog, Ev2, attempt('compile.value p2', () => c.value(p2.params, p2.inputs)), '.value: valueAndGrad vs compile at p2', pruned('value'));
  if (J !== null) {
    sameOrDead(prog, E2, attempt('compileFromJSON p2', () => J(p2.params, jin(p2))), 'valueAndGrad vs compileFromJSON at p2', prunedVG);
    sameOrDead(prog, Ev2, attempt('compileFromJSON.value p2', () => J.value(p2.params, jin(p2))), '.value: valueAndGrad vs compileFromJSON at p2', pruned('value'));
  }
  if (E2.ok) checkGradient(prog, p2.params, E2.value.gradient, 'valueAndGrad p2');
  if (E2.ok) {
    const g2 = attempt('grad p2', () => G.grad(f)(p2.params, p2.inputs));
    sameOutcome(g2, { ok: true, value: E2.value.gradient }, 'grad vs valueAndGrad at p2');
  }
  // batch: each point as its single call.
  if (traced && C1.ok === E1.ok) {
    // One inputs map for every point of a batch: p1's.
    const S2 = prog.inKeys ? attempt('compile p2 at p1 inputs', () => c(p2.params, p1.inputs)) : C2;
    const B = attempt('batch', () => c.batch([p1.params, p2.params], p1.inputs, { threads: 1 + (prog.steps.length % 2) }));
    if (C1.ok && S2.ok) {
      if (!B.ok) fail(`batch threw "${B.error.message}" where both single calls return`);
      sameOutcome(B, { ok: true, value: [C1.value, S2.value] }, 'batch vs single calls');
    } else {
      if (B.ok) fail('batch returned where a single call throws');
      const i = C1.ok ? 1 : 0;
      const e = (C1.ok ? S2 : C1).error.message;
      if (B.error.message !== `batch: point ${i}: ${e}` && B.error.message !== e) fail(`batch threw "${B.error.message}", point ${i} alone "${e}"`);
    }
  }
  // jacobian of a one-parameter objective without inputs: one row, the gradient.
  if (!prog.map && !prog.inKeys && E2.ok) {
    const Jac = attempt('jacobian', () => G.jacobian(f)(p2.params));
    if (!Jac.ok) fail(`jacobian threw "${Jac.error.message}" where valueAndGrad returns`);
    const row = Jac.value[0];
    const g = flatOf(E2.value.gradient);
    if (Jac.value.length !== 1 || row.length !== g.length) fail(`jacobian is ${Jac.value.length}×${row?.length}, gradient has ${g.length}`);
    // One input: forward mode, whose entries that are not finite give way to the reverse
    // row's (the gradient's) unless that is NaN. So a finite entry, or an infinite one
    // against a NaN, may stand against a gradient that overflowed in its own partials (p/p
    // taken twice at p = 1e308: the divisor's -g·x/y² with g = 2 is -∞/∞).
    // Near a singularity the two modes' roundings, amplified, part (lgamma of lgamma(1 − ulp),
    // a derivative that is 0 times 1e16, seed 3001 case 93589): there, where central
    // differences cannot judge either, a disagreement is noted, not failed.
    const forward = g.length <= 1;
    for (let i = 0; i < g.length; i++) {
      const stands = forward && (Number.isFinite(row[i]) || Number.isNaN(g[i]));
      if (stands && !Number.isFinite(g[i])) continue;
      if (Object.is(row[i], g[i]) || Math.abs(row[i] - g[i]) <= 1e-12 * Math.max(1, Math.abs(g[i]))) continue;
      if (stands && !fdEligible(prog, p2)) {
        stats.notes.modesPartNearSingularity = (stats.notes.modesPartNearSingularity ?? 0) + 1;
        break;
      }
      fail(`jacobian entry ${i}: ${num(row[i])} vs gradient ${num(g[i])}`);
    }
  }
  // Central differences, where they can judge.
  if (E2.ok && C2.ok && fdEligible(prog, p2)) {
    const forward = (x) => c.value(x, p2.inputs);
    const how = checkFD(prog, p2, E2.value.gradient, E2.value.value, forward);
    if (how === 'checked') stats.fdChecked++;
    else stats.fdSkipped++;
  } else if (E2.ok) {
    stats.fdSkipped++;
  }
}

// ---- forward mode and second order: jvp, hvp, hessian, and the compiled jacobian
//
// A random program (genProgram) through jvp(f)(x, v, inputs?), hvp(f)(x, v,
// inputs?), hessian(f)(x, inputs?), and the same methods (plus .jacobian) of
// compile(f) and of compileFromJSON(c.toJSON()). The oracle:
//   - eager, compiled and rebuilt agree bit for bit when they return, and
//     throw the same message when they throw (up to the dead-op rule of
//     sameOrDead and the order rules of sameOutcome), at the trace point
//     and at a second point; the compiled jacobian returns where .value
//     does and fails with its message;
//   - results have their forms: jvp's value and tangent the root's nested
//     form; hvp's gradient and hvp, and hessian's gradient, x's form;
//     hessian q×q number[][], symmetric exactly; jacobian m×q number[][];
//   - jvp's tangent matches central differences of the value along v, and
//     hvp central differences of the gradient along v, where fdEligible
//     says a difference can judge; hvp's and hessian's gradient equal
//     valueAndGrad's to 1e-10, hessian·v equals hvp to 1e-9, the jacobian's
//     row is the gradient (1e-12) and jacobian·v the tangent (1e-9), where
//     every value is finite and moderate (the same eligibility);
//   - a map's results follow the caller's key order: the compiled methods
//     called with the keys reversed give the same numbers, permuted;
//   - a tangent with one fault (a shape, a missing or extra key, not a map)
//     throws the SPEC's message; a Hessian past 2^28 entries throws its
//     message at once (runHessianCap).

/** The most parameter entries a random program's Hessian is asked for: q directions, q² entries. */
const HESSIAN_Q = 30;
const METHODS = ['jvp', 'hvp', 'hessian', 'jacobian'];

const paramLeaves = (prog) => prog.leaves.filter((l) => l.kind === 'param');
/** q: the parameters' entries, x flattened. */
const widthOf = (prog) => paramLeaves(prog).reduce((n, l) => n + sizeOf(l.shape), 0);
const own = (o, k) => Object.getOwnPropertyDescriptor(o, k)?.value;

/** A plain object with these entries as own properties, "__proto__" included. */
function mapFrom(entries) {
  const o = {};
  for (const [k, v] of entries) Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
  return o;
}

function shuffled(r, a) {
  const b = [...a];
  for (let i = b.length - 1; i > 0; i--) {
    const j = r.int(0, i);
    [b[i], b[j]] = [b[j], b[i]];
  }
  return b;
}

/** The root's shape by the model, or an Invalid when a step must throw (every step runs eagerly, dead or not). */
function rootShape(prog) {
  const invalid = prog.steps.find((st) => !isShape(st.expect));
  if (invalid !== undefined) return invalid.expect;
  if (prog.steps.length === 0 || prog.reduce) return [];
  return prog.steps[prog.steps.length - 1].expect;
}

/** A direction for a program's parameters: their shapes, in random forms; a map's keys in random order. */
function tangentFor(r, prog) {
  const special = r.chance(0.05);
  const one = (shape) => inForm(r, randData(r, shape, special), shape);
  if (!prog.map) return one(prog.leaves[0].shape);
  const ls = paramLeaves(prog);
  return mapFrom((r.chance(0.5) ? ls : shuffled(r, ls)).map((l) => [l.key, one(l.shape)]));
}

/** A small shape unlike `s`. */
function otherShape(r, s) {
  for (;;) {
    const t = r.chance(0.2) ? [r.int(5, 6)] : smallShape(r);
    if (!sameShape(t, s)) return t;
  }
}

/**
 * A direction with one fault, and `msg(where)`, the message it must give
 * where the objective itself evaluates (null where only agreement is judged).
 */
function badTangent(r, prog) {
  const ls = paramLeaves(prog);
  const good = (l) => [l.key, inForm(r, randData(r, l.shape), l.shape)];
  if (!prog.map) {
    if (r.chance(0.2)) return { v: garbage(r), msg: null, fault: 'garbage' };
    const ps = ls[0].shape;
    const ts = otherShape(r, ps);
    return { v: inForm(r, randData(r, ts), ts), msg: (w) => `${w}: the tangent is shaped ${fmt(ts)}, unlike the parameter (${fmt(ps)})`, fault: 'shape' };
  }
  const fault = ls.length === 0 ? r.pick(['not a map', 'extra key']) : r.pick(['not a map', 'extra key', 'missing key', 'shape', 'shape']);
  if (fault === 'not a map') {
    const v = r.pick([1, [1, 2], new Float64Array(2), { data: new Float64Array(1), shape: [1] }, [[1], [2]]]);
    return { v, msg: (w) => `${w}: the tangent must be a {name: value} map with the parameters' keys`, fault };
  }
  if (fault === 'extra key') {
    const z = r.pick([...KEYS.filter((k) => !prog.keys.includes(k) && k !== 'data' && k !== 'shape'), 'zz']);
    const es = ls.map(good);
    es.splice(r.int(0, es.length), 0, [z, r.uniform(-1, 1)]);
    return { v: mapFrom(es), msg: (w) => `${w}: the tangent has key ${JSON.stringify(z)}, which is not a parameter`, fault };
  }
  const i = r.int(0, ls.length - 1);
  const k = ls[i].key;
  if (fault === 'missing key') {
    return { v: mapFrom(ls.filter((_, j) => j !== i).map(good)), msg: (w) => `${w}: the tangent has no key ${JSON.stringify(k)}; it needs one per parameter`, fault };
  }
  const ps = ls[i].shape;
  const ts = otherShape(r, ps);
  const es = ls.map((l, j) => (j === i ? [l.key, inForm(r, randData(r, ts), ts)] : good(l)));
  return { v: mapFrom(es), msg: (w) => `${w}: tangent ${JSON.stringify(k)} is shaped ${fmt(ts)}, unlike parameter ${JSON.stringify(k)} (${fmt(ps)})`, fault };
}

/** What a case of the higher kind does, drawn before it runs (so every re-run and the shrinker see the same). */
function higherPlan(r, prog) {
  const bad = r.chance(0.12) ? badTangent(r, prog) : null;
  return {
    bad,
    v1: bad ? bad.v : tangentFor(r, prog),
    v2: tangentFor(r, prog),
    // The compiled closure is traced by its first call: any method may make it.
    order: shuffled(r, METHODS),
    callFirst: r.chance(0.3),
    // The second form whose key order is judged (the compiled one always is).
    keysToo: r.pick(['eager', 'rebuilt']),
  };
}

/** A rebuilt plan has no input nodes for an empty inputs map, so it is called without one (it refuses `{}`). */
const jin = (pt) => (pt.inputs !== undefined && Object.keys(pt.inputs).length === 0 ? undefined : pt.inputs);

/** The driver methods of one form at a point, in `order`: outcomes by method (null: not called). */
function callAll(form, h, pt, name, v, ins, order, q) {
  const out = { jvp: null, hvp: null, hessian: null, jacobian: null };
  for (const m of order) {
    if (m === 'hessian' && q > HESSIAN_Q) continue;
    if (m === 'jacobian' && h.jacobian === undefined) continue;
    out[m] = attempt(`${form} ${m} ${name}`, () => (m === 'jvp' || m === 'hvp' ? h[m](pt.params, v, ins) : h[m](pt.params, ins)));
  }
  return out;
}

const eagerForm = (f) => ({ jvp: G.jvp(f), hvp: G.hvp(f), hessian: G.hessian(f) });

/** Two forms' outcomes method by method: bit for bit, or the same message. */
function compareForms(prog, a, b, what, prunedOf) {
  for (const m of METHODS) {
    if (a[m] === null || b[m] === null) continue;
    const x = a[m];
    const y = b[m];
    if (!x.ok && !y.ok) {
      const [ma, mb] = [x.error.message, y.error.message];
      // Both faults at once: every path reads the tangent first, so all report it.
      if ((SCALAR_ROOT.test(ma) && TANGENT_ERR.test(mb)) || (TANGENT_ERR.test(ma) && SCALAR_ROOT.test(mb))) {
        fail(`${m}: ${what}: a tangent at fault and a non-scalar objective: "${ma}" vs "${mb}"`, 'argumentOrder');
      }
    }
    if (prunedOf) sameOrDead(prog, x, y, `${m}: ${what}`, () => prunedOf(m));
    else sameOutcome(x, y, `${m}: ${what}`);
  }
}

/** The compiled jacobian returns where the compiled .value does, and fails with its message (prefixed or not). */
function jacobianAgrees(jac, val, what) {
  if (jac === null) return;
  // ([2^30 × 0] has no entries, so no Jacobian rows, but too many empty rows to return as a value)
  if (!val.ok && /too many rows to return as nested arrays/.test(val.error.message)) return;
  if (jac.ok !== val.ok) fail(`${what}: jacobian ${jac.ok ? 'returned' : `threw "${jac.error.message}"`} where .value ${val.ok ? 'returns' : `throws "${val.error.message}"`}`);
  if (!jac.ok && stripPrefix(jac.error.message.replace(/^jacobian: /, '')) !== stripPrefix(val.error.message)) {
    fail(`${what}: jacobian threw "${jac.error.message}", .value "${val.error.message}"`);
  }
}

/** A nested value (number, number[], number[][]) shaped `shape`. */
function checkNested(v, shape, where) {
  const isNum = (x) => typeof x === 'number';
  if (shape.length === 0) {
    if (!isNum(v)) fail(`${where}: ${lit(v)} for a scalar`);
  } else if (shape.length === 1) {
    if (!Array.isArray(v) || v.length !== shape[0] || !v.every(isNum)) fail(`${where}: ${lit(v)} for ${fmt(shape)}`);
  } else if (!Array.isArray(v) || v.length !== shape[0] || !v.every((row) => Array.isArray(row) && row.length === shape[1] && row.every(isNum))) {
    fail(`${where}: ${lit(v)} for ${fmt(shape)}`);
  }
}

/** A rows×cols number[][]. */
function checkMatrix(M, rows, cols, where) {
  if (!Array.isArray(M) || M.length !== rows) fail(`${where}: ${Array.isArray(M) ? `${M.length} rows` : typeof M}, expected ${rows}`);
  for (let i = 0; i < rows; i++) {
    const row = M[i];
    if (!Array.isArray(row) || row.length !== cols || !row.every((e) => typeof e === 'number')) fail(`${where}: row ${i} is ${lit(row)}, expected ${cols} numbers`);
  }
}

/** |a − b| ≤ tol·max(1, scale) entry by entry, a NaN only against a NaN; `scale[i]` or one scale for all. */
function closeTo(a, b, tol, scale, what, tag) {
  if (a.length !== b.length) fail(`${what}: ${a.length} entries vs ${b.length}`, tag);
  for (let i = 0; i < a.length; i++) {
    if (Object.is(a[i], b[i])) continue;
    const s = Math.max(1, Array.isArray(scale) ? scale[i] : scale);
    if (!(Math.abs(a[i] - b[i]) <= tol * s)) fail(`${what}: entry ${i} is ${num(a[i])} vs ${num(b[i])} (tolerance ${tol} × ${num(s)})`, tag);
  }
}

const maxAbs = (xs) => xs.reduce((m, e) => Math.max(m, Math.abs(e)), 0);
const matVec = (M, v) => M.map((row) => row.reduce((s, e, j) => s + e * v[j], 0));
const matVecScale = (M, v) => M.map((row) => row.reduce((s, e, j) => s + Math.abs(e * v[j]), 0));

/**
 * The permutation of x flattened between two key orders of one map: for
 * each entry of x in `to`'s order, its index in `from`'s order.
 */
function keyPermutation(prog, from, to) {
  const size = new Map(paramLeaves(prog).map((l) => [l.key, sizeOf(l.shape)]));
  const offset = new Map();
  let at = 0;
  for (const k of from) {
    offset.set(k, at);
    at += size.get(k);
  }
  const perm = [];
  for (const k of to) for (let i = 0; i < size.get(k); i++) perm.push(offset.get(k) + i);
  return perm;
}

/**
 * Calls of one form with x's keys reversed: the same numbers, permuted, results in the caller's key order.
 * `ins`: the inputs exactly as `res` was called with (an empty map and none are two signatures, and a
 * new trace at `pt` would evaluate a dead op there, as eager does).
 */
function checkKeyOrder(prog, h, form, pt, v, res, q, ins) {
  const keys = Object.keys(pt.params);
  if (!prog.map || keys.length < 2) return;
  counted(`keyOrder ${form}`);
  // (integer-like keys come first in any object: the order the map really has)
  const xr = mapFrom([...keys].reverse().map((k) => [k, own(pt.params, k)]));
  const rev = Object.keys(xr);
  if (rev.join('\u0000') === keys.join('\u0000')) return;
  const perm = keyPermutation(prog, keys, rev);
  const where = `${form}, x's keys ${JSON.stringify(rev)} after ${JSON.stringify(keys)}`;
  const byKey = (a, b, what) => {
    if (Object.keys(b).join('\u0000') !== rev.join('\u0000')) fail(`${where}: ${what} has keys ${JSON.stringify(Object.keys(b))}`, 'keyOrder');
    for (const k of keys) {
      try {
        bitsEqual(own(a, k), own(b, k), `${what}.${k}`);
      } catch (e) {
        if (e instanceof Failure) fail(`${where}: ${e.message}`, 'keyOrder');
        throw e;
      }
    }
  };
  if (res.hvp?.ok) {
    const o = attempt(`${form} hvp, keys reversed`, () => h.hvp(xr, v, ins));
    if (!o.ok) fail(`${where}: hvp threw "${o.error.message}" where it returns in the keys' first order`, 'keyOrder');
    byKey(res.hvp.value.gradient, o.value.gradient, 'hvp gradient');
    byKey(res.hvp.value.hvp, o.value.hvp, 'hvp');
  }
  if (res.hessian?.ok && q <= HESSIAN_Q) {
    const o = attempt(`${form} hessian, keys reversed`, () => h.hessian(xr, ins));
    if (!o.ok) fail(`${where}: hessian threw "${o.error.message}" where it returns in the keys' first order`, 'keyOrder');
    byKey(res.hessian.value.gradient, o.value.gradient, 'hessian gradient');
    const H = res.hessian.value.hessian;
    const want = perm.map((i) => perm.map((j) => H[i][j]));
    try {
      bitsEqual(want, o.value.hessian, 'hessian');
    } catch (e) {
      if (e instanceof Failure) fail(`${where}: the Hessian is not over x in the caller's key order: ${e.message}; in the first order ${lit(H)}, reversed ${lit(o.value.hessian)}`, 'keyOrder');
      throw e;
    }
  }
  if (res.jacobian?.ok) {
    const o = attempt(`${form} jacobian, keys reversed`, () => h.jacobian(xr, ins));
    if (!o.ok) fail(`${where}: jacobian threw "${o.error.message}" where it returns in the keys' first order`, 'keyOrder');
    const want = res.jacobian.value.map((row) => perm.map((j) => row[j]));
    try {
      bitsEqual(want, o.value, 'jacobian');
    } catch (e) {
      if (e instanceof Failure) fail(`${where}: the Jacobian's columns are not x in the caller's key order: ${e.message}; in the first order ${lit(res.jacobian.value)}, reversed ${lit(o.value)}`, 'keyOrder');
      throw e;
    }
  }
}

/**
 * A map of the parameters' keys (or a single value) flattened in the order
 * of `pt`'s keys: x flattened as the Hessian and the Jacobian see it (the
 * caller's key order, integer-like keys first as in any object).
 */
function flatInOrder(prog, pt, m) {
  if (!prog.map) return flatOf(m);
  return Object.keys(pt.params).flatMap((k) => flatOf(own(m, k)));
}

const counted = (what) => {
  stats.higher[what] = (stats.higher[what] ?? 0) + 1;
};

/** At a point where the eager calls return: forms, differences and the identities between the methods. */
function crossCheck(prog, f, c, pt, name, v, E, C, q) {
  const root = rootShape(prog);
  const vs = flatInOrder(prog, pt, v);
  let eligible = null;
  const conditioned = () => (eligible ??= fdEligible(prog, pt, true));
  const vg = G.valueAndGrad(f);
  const V = attempt(`valueAndGrad.value ${name}`, () => vg.value(pt.params, pt.inputs));
  if (E.jvp?.ok) {
    const { value, tangent } = E.jvp.value;
    if (isShape(root)) {
      checkNested(value, root, `jvp ${name}: value`);
      checkNested(tangent, root, `jvp ${name}: tangent`);
    }
    if (!V.ok) fail(`jvp ${name}: returned where valueAndGrad.value throws "${V.error.message}"`);
    sameOutcome({ ok: true, value }, V, `jvp ${name}: value vs valueAndGrad.value`);
    if (conditioned()) {
      const how = checkAlong(prog, pt, v, flatOf(tangent), (p) => flatOf(c.value(p, pt.inputs)), maxAbs(flatOf(value)), `jvp ${name}: tangent`);
      stats[how === 'checked' ? 'fdChecked' : 'fdSkipped']++;
      if (how === 'checked') counted('jvpByDifferences');
    }
  }
  const scalar = isShape(root) && root.length === 0;
  // A root of rank 1 or 2: hvp and hessian refuse it with the SPEC's message.
  if (isShape(root) && !scalar && V.ok) {
    for (const m of ['hvp', 'hessian']) {
      const o = E[m];
      if (o === null) continue;
      const want = `${m}: the objective must return a scalar, got ${fmt(root)}. Reduce it with sum() or mean() first.`;
      if (o.ok || o.error.message !== want) fail(`${m} ${name} of a ${fmt(root)} objective: ${o.ok ? 'returned' : `threw "${o.error.message}"`}, the SPEC's message is "${want}"`);
      counted(`${m} of a non-scalar objective`);
    }
  }
  const G1 = scalar && (E.hvp?.ok || E.hessian?.ok) ? attempt(`valueAndGrad ${name}`, () => vg(pt.params, pt.inputs)) : null;
  if (G1 !== null && !G1.ok) fail(`hvp/hessian ${name}: returned where valueAndGrad throws "${G1.error.message}"`);
  const g = G1 === null ? null : flatInOrder(prog, pt, G1.value.gradient);
  const moderate = (xs) => xs.every((e) => Number.isFinite(e) && Math.abs(e) < 1e6);
  if (E.hvp?.ok) {
    const { value, gradient, hvp } = E.hvp.value;
    if (typeof value !== 'number') fail(`hvp ${name}: value is ${typeof value}`);
    checkGradient(prog, pt.params, gradient, `hvp ${name}: gradient`);
    checkGradient(prog, pt.params, hvp, `hvp ${name}: hvp`);
    if (g !== null) {
      sameOutcome({ ok: true, value }, { ok: true, value: G1.value.value }, `hvp ${name}: value vs valueAndGrad`);
      if (conditioned() && moderate(g)) closeTo(flatInOrder(prog, pt, gradient), g, 1e-10, maxAbs(g), `hvp ${name}: gradient vs valueAndGrad's`);
    }
    if (conditioned() && scalar) {
      const grad = (p) => flatParams(prog, c(p, pt.inputs).gradient);
      const how = checkAlong(prog, pt, v, flatParams(prog, hvp), grad, maxAbs(g ?? [0]), `hvp ${name}`);
      stats[how === 'checked' ? 'fdChecked' : 'fdSkipped']++;
      if (how === 'checked') counted('hvpByDifferences');
    }
  }
  if (E.hessian?.ok) {
    const { value, gradient, hessian: H } = E.hessian.value;
    if (typeof value !== 'number') fail(`hessian ${name}: value is ${typeof value}`);
    checkGradient(prog, pt.params, gradient, `hessian ${name}: gradient`);
    checkMatrix(H, q, q, `hessian ${name}`);
    for (let i = 0; i < q; i++) for (let j = 0; j < i; j++) if (!Object.is(H[i][j], H[j][i])) fail(`hessian ${name}: H[${i}][${j}] = ${num(H[i][j])} but H[${j}][${i}] = ${num(H[j][i])}`);
    if (g !== null) {
      sameOutcome({ ok: true, value }, { ok: true, value: G1.value.value }, `hessian ${name}: value vs valueAndGrad`);
      if (conditioned() && moderate(g)) closeTo(flatInOrder(prog, pt, gradient), g, 1e-10, maxAbs(g), `hessian ${name}: gradient vs valueAndGrad's`);
    }
    if (E.hvp?.ok && conditioned() && moderate(H.flat()) && moderate(vs)) {
      const hv = flatInOrder(prog, pt, E.hvp.value.hvp);
      if (moderate(hv)) {
        closeTo(matVec(H, vs), hv, 1e-9, matVecScale(H, vs), `hessian ${name}: H·v vs hvp`);
        counted('hessianTimesV');
      }
    }
  }
  if (C.jacobian?.ok) {
    const m = V.ok ? flatOf(V.value).length : isShape(root) ? sizeOf(root) : NaN;
    const Jm = C.jacobian.value;
    if (Number.isNaN(m)) return; // (the model says the objective throws: the program cases judge that)
    checkMatrix(Jm, m, q, `compiled jacobian ${name}`);
    if (g !== null && moderate(g) && conditioned()) closeTo(Jm[0], g, 1e-12, maxAbs(g), `compiled jacobian ${name}: the row vs valueAndGrad's gradient`);
    if (E.jvp?.ok && conditioned() && moderate(Jm.flat()) && moderate(vs)) {
      const t = flatOf(E.jvp.value.tangent);
      if (moderate(t)) {
        closeTo(matVec(Jm, vs), t, 1e-9, matVecScale(Jm, vs), `compiled jacobian ${name}: J·v vs the jvp tangent`);
        counted('jacobianTimesV');
      }
    }
    // The SPEC jacobian, of one parameter without inputs and a root of rank 0 or 1.
    if (!prog.map && !prog.inKeys && isShape(root) && root.length < 2 && conditioned()) {
      const Je = attempt(`jacobian ${name}`, () => G.jacobian(f)(pt.params));
      if (!Je.ok) fail(`jacobian ${name}: threw "${Je.error.message}" where the compiled jacobian returns`);
      checkMatrix(Je.value, m, q, `jacobian ${name}`);
      for (let i = 0; i < m; i++) closeTo(Je.value[i], Jm[i], 1e-12, maxAbs(Jm[i]), `jacobian ${name} vs compiled, row ${i}`);
    }
  }
}

function runHigher(prog, plan) {
  const f = objectiveOf(prog);
  const q = widthOf(prog);
  const { p1, p2 } = prog;
  const order = plan.order;
  let pf = null;
  const prunedOf = (pt, v) => (m) => {
    const h = eagerForm((pf ??= prunedObjective(prog)));
    return m === 'jacobian' ? null : attempt(`eager ${m}, dead ops dropped`, () => (m === 'hessian' ? h.hessian(pt.params, pt.inputs) : h[m](pt.params, v, pt.inputs)));
  };
  const eager = eagerForm(f);
  const E1 = callAll('eager', eager, p1, 'p1', plan.v1, p1.inputs, order, q);
  const c = G.compile(f);
  const first = plan.callFirst ? attempt('compile p1', () => c(p1.params, p1.inputs)) : null;
  const C1 = callAll('compiled', c, p1, 'p1', plan.v1, p1.inputs, order, q);
  compareForms(prog, E1, C1, 'eager vs compiled at p1', prunedOf(p1, plan.v1));
  const Cv1 = attempt('compile.value p1', () => c.value(p1.params, p1.inputs));
  jacobianAgrees(C1.jacobian, Cv1, 'compiled at p1');
  if (first !== null && first.ok && C1.jvp.ok) sameOutcome({ ok: true, value: first.value.value }, { ok: true, value: C1.jvp.value.value }, 'compiled call vs compiled jvp value at p1');
  // A fault in the tangent: the SPEC's message, where the objective itself evaluates.
  if (plan.bad?.msg) {
    const V = attempt('valueAndGrad.value p1', () => G.valueAndGrad(f).value(p1.params, p1.inputs));
    if (V.ok) {
      counted(`tangent fault: ${plan.bad.fault}`);
      for (const m of ['jvp', 'hvp']) {
        const want = plan.bad.msg(m);
        if (E1[m].ok || E1[m].error.message !== want) fail(`eager ${m} with a tangent at fault (${plan.bad.fault}): ${E1[m].ok ? 'returned' : `threw "${E1[m].error.message}"`}, the SPEC's message is "${want}"`);
      }
    }
  }
  // The plan, rebuilt, once a call has traced it.
  let J = null;
  const plan1 = c.toJSON === undefined ? null : attempt('toJSON', () => c.toJSON());
  if (plan1 !== null && plan1.ok) {
    const rebuilt = attempt('compileFromJSON', () => G.compileFromJSON(structuredClone(plan1.value)));
    if (!rebuilt.ok) {
      fail(`compileFromJSON of toJSON threw "${rebuilt.error.message}"`);
    } else {
      J = rebuilt.value;
    }
  } else if (plan1 !== null && [first, ...Object.values(C1)].some((o) => o?.ok)) {
    fail(`toJSON threw "${plan1.error.message}" after a successful call`);
  }
  if (J !== null && plan.bad !== null) {
    // (the tangent at fault; at p2 the rebuilt plan's first calls are judged in full)
    const R1 = callAll('rebuilt', J, p1, 'p1', plan.v1, jin(p1), ['jvp', 'hvp'], q);
    compareForms(prog, C1, R1, 'compiled vs rebuilt at p1');
  }
  // A second point at the same signature: replays.
  const E2 = callAll('eager', eager, p2, 'p2', plan.v2, p2.inputs, order, q);
  const C2 = callAll('compiled', c, p2, 'p2', plan.v2, p2.inputs, order, q);
  compareForms(prog, E2, C2, 'eager vs compiled at p2', prunedOf(p2, plan.v2));
  jacobianAgrees(C2.jacobian, attempt('compile.value p2', () => c.value(p2.params, p2.inputs)), 'compiled at p2');
  if (J !== null) {
    const R2 = callAll('rebuilt', J, p2, 'p2', plan.v2, jin(p2), order, q);
    compareForms(prog, C2, R2, 'compiled vs rebuilt at p2');
    if (plan.keysToo === 'rebuilt') checkKeyOrder(prog, J, 'rebuilt', p2, plan.v2, R2, q, jin(p2));
  }
  crossCheck(prog, f, c, p2, 'p2', plan.v2, E2, C2, q);
  checkKeyOrder(prog, c, 'compiled', p2, plan.v2, C2, q, p2.inputs);
  if (plan.keysToo === 'eager') checkKeyOrder(prog, eager, 'eager', p2, plan.v2, E2, q, p2.inputs);
  for (const o of [...Object.values(E2), ...Object.values(C2)]) if (o !== null) stats[o.ok ? 'returned' : 'threw']++;
}

/** The calls of a higher case, for its reproduction. */
function higherCalls(prog, plan) {
  const d = prog.inKeys ? ', d' : '';
  return [
    `const v1 = ${lit(plan.v1)};`,
    `const v2 = ${lit(plan.v2)};`,
    `const c = G.compile(f);`,
    `for (const [p, v${d}] of [[p1, v1${prog.inKeys ? ', d1' : ''}], [p2, v2${prog.inKeys ? ', d2' : ''}]]) {`,
    `  for (const [how, h] of [['eager', { jvp: G.jvp(f), hvp: G.hvp(f), hessian: G.hessian(f) }], ['compiled', c]]) {`,
    `    for (const [m, call] of [['jvp', () => h.jvp(p, v${d})], ['hvp', () => h.hvp(p, v${d})], ['hessian', () => h.hessian(p${d})], ['jacobian', () => h.jacobian?.(p${d})]]) {`,
    `      try { console.log(how, m, JSON.stringify(call())); } catch (e) { console.log(how, m, 'threw', e.message); }`,
    '    }',
    '  }',
    '}',
  ].join('\n');
}

/**
 * A Hessian past the cap on values: Q parameter entries, Q² > 2^28, refused
 * with the SPEC's message before anything is allocated for it (within the
 * budget), eager, compiled (traced by the call itself or before) and rebuilt;
 * the compiled jacobian past the cap likewise.
 */
function runHessianCap(r) {
  // (just past 2^14, where Q² passes 2^28; the calls that must work at Q stay well inside the budget)
  const Q = r.pick([16385, 16400, 20000, 30000]);
  const split = r.chance(0.4);
  const fill = r.uniform(-1, 1);
  const x = split ? mapFrom([['a', new Float64Array(Q - 7).fill(fill)], ['b', [fill, 1, 2, 3, 4, 5, 6]]]) : r.chance(0.5) ? new Float64Array(Q).fill(fill) : { data: new Float64Array(Q).fill(fill), shape: [Q] };
  const f = split ? (p) => G.add(G.sum(G.square(p.a)), G.sum(G.exp(p.b))) : (p) => G.sum(G.square(p));
  const want = `hessian: ${Q} parameters make a ${Q}×${Q} Hessian of ${Q * Q} entries, more than the ${CAP} a value may hold`;
  const pre = r.chance(0.5);
  currentRepro = () => `const f = ${split ? '(p) => G.add(G.sum(G.square(p.a)), G.sum(G.exp(p.b)))' : '(p) => G.sum(G.square(p))'};\nconst x = ${lit(x)};\nG.hessian(f)(x); const c = G.compile(f);${pre ? ' c(x);' : ''} c.hessian(x);`;
  const expect = (o, where) => {
    if (o.ok) fail(`${where}: a Hessian of ${Q}² entries returned`);
    if (o.error.message !== want) fail(`${where}: threw "${o.error.message}", the SPEC's message is "${want}"`);
  };
  counted('hessian past the cap');
  expect(attempt('eager hessian (too large)', () => G.hessian(f)(x)), 'eager hessian');
  const c = G.compile(f);
  if (pre) {
    const o = attempt('compile (too large)', () => c(x));
    if (!o.ok) fail(`compile threw "${o.error.message}" at ${Q} parameters`);
  }
  expect(attempt('compiled hessian (too large)', () => c.hessian(x)), 'compiled hessian');
  expect(attempt('compiled hessian again (too large)', () => c.hessian(x)), 'compiled hessian, again');
  const J = G.compileFromJSON(c.toJSON());
  expect(attempt('rebuilt hessian (too large)', () => J.hessian(x)), 'rebuilt hessian');
  if (!split) {
    // A vector objective of Q outputs: a Q×Q Jacobian, past the cap too.
    const cv = G.compile((p) => G.square(p));
    const jac = `jacobian: a ${Q}×${Q} Jacobian holds ${Q * Q} entries, more than the ${CAP} a value may hold`;
    for (const [how, call] of [['compiled', () => cv.jacobian(x)], ['eager', () => G.jacobian((p) => G.square(p))(x)]]) {
      const o = attempt(`${how} jacobian (too large)`, call);
      if (o.ok || o.error.message !== jac) fail(`${how} jacobian of ${Q} outputs over ${Q} parameters: ${o.ok ? 'returned' : `threw "${o.error.message}"`}, expected "${jac}"`);
    }
  }
  // The same plan still answers hvp at that size (at the smallest Q: a tangent plan of 2·Q values).
  if (Q > 16400) return;
  const v = split ? mapFrom([['a', new Float64Array(Q - 7).fill(1)], ['b', [1, 0, 0, 0, 0, 0, 0]]]) : new Float64Array(Q).fill(1);
  const o = attempt('compiled hvp (large)', () => c.hvp(x, v));
  if (!o.ok) fail(`compiled hvp at ${Q} parameters threw "${o.error.message}"`);
  const hv = flatOf(split ? [...o.value.hvp.a, ...o.value.hvp.b] : o.value.hvp);
  if (hv.length !== Q) fail(`compiled hvp at ${Q} parameters has ${hv.length} entries`);
  if (!split && !hv.every((e) => e === 2)) fail(`compiled hvp of sum(x²) along ones is not 2 everywhere`);
  stats.returned++;
}

// ---- direct calls: one op outside any evaluation, arguments anything

/** An operand for a direct call: { v, shape }, shape an Invalid for garbage. */
function directArg(r) {
  const k = r.next();
  if (k < 0.12) return { v: garbage(r), shape: bad('garbage') };
  let shape;
  if (k < 0.45) shape = emptyShape(r);
  else shape = smallShape(r);
  const data = randData(r, shape, true);
  const v = inForm(r, data, shape);
  return r.chance(0.2) && !(WASM && tooWide(shape)) ? { v: G.variable(v), shape } : { v, shape };
}

/** Garbage for a shape argument: long sparse arrays only when sparseShape is not guarded. */
function shapeGarbage(r) {
  const g = garbage(r);
  return Array.isArray(g) && g.length > 1000 && guarded('sparseShape') ? sparseOf(r.pick([3, 1000])) : g;
}

function runDirect(r) {
  const op = r.pick([...ALL_OPS, 'toNested', 'variable', 'tensor', 'zeros', 'eye', 'asTensor', 'backward']);
  const args = [];
  const shapes = [];
  const arity = ELEM2.includes(op) || ['matmul', 'dot', 'addDiag', 'triangularSolve', 'solvePSD', 'solveGeneral'].includes(op) ? 2 : op === 'add' || op === 'mul' ? r.int(2, 3) : 1;
  const n = r.chance(0.05) ? r.int(0, 3) : arity;
  for (let i = 0; i < n; i++) {
    const a = directArg(r);
    args.push(a.v);
    shapes.push(a.shape);
  }
  // Same-shape partners make the valid calls common.
  if (n === 2 && r.chance(0.5) && isShape(shapes[0])) {
    const s = shapes[0];
    const partner = (ss) => (sizeOf(ss) > 4096 ? { data: new Float64Array(0), shape: [...ss] } : sizeOf(ss) === 0 || r.chance(0.5) ? { data: new Float64Array(sizeOf(ss)), shape: [...ss] } : inForm(r, randData(r, ss), ss));
    if (ELEM2.includes(op) || op === 'add' || op === 'mul') {
      shapes[1] = r.chance(0.3) && s.length === 2 ? [s[1]] : s;
    } else if (op === 'matmul' && s.length === 2) {
      shapes[1] = r.chance(0.5) ? [s[1]] : [s[1], r.pick([0, 1, 2, r.pick(HUGE)])];
    } else if (op === 'dot' && s.length === 1) {
      shapes[1] = s;
    } else if (s.length === 2 && s[0] === s[1]) {
      shapes[1] = op === 'addDiag' ? (r.chance(0.5) ? [] : [s[0]]) : r.chance(0.5) ? [s[0]] : [s[0], r.pick([0, 1, 2, r.pick(HUGE)])];
    }
    if (isShape(shapes[1]) && sizeOf(shapes[1]) > 4096) {
      args[1] = { data: new Float64Array(0), shape: [...shapes[1]] }; // data length 0 for a shape that holds values
      shapes[1] = bad('data length');
    } else if (isShape(shapes[1])) args[1] = partner(shapes[1]);
  }
  let extra = {};
  let call;
  const ex = () => (r.chance(0.15) ? garbage(r) : undefined);
  switch (op) {
    case 'pow': {
      const k = r.chance(0.8) ? r.pick([2, 0.5, -1, 3]) : garbage(r);
      extra = { k };
      call = () => G.pow(args[0], k);
      break;
    }
    case 'reshape': {
      const s = r.chance(0.2) ? garbage(r) : r.pick([[], [1], [2], [2, 3], [0], [0, 5], [2 ** 40, 0], [4], [1, 4], [-1], [2.5], [2 ** 62]]);
      extra = { shape: s };
      call = () => G.reshape(args[0], s);
      break;
    }
    case 'slice': {
      const gen = () => (r.chance(0.2) ? garbage(r) : Array.from({ length: r.int(0, 3) }, () => r.pick([0, 1, 2, 3, -1, 0.5, 2 ** 53, 2 ** 62, NaN])));
      const start = gen();
      const size = gen();
      extra = { start, size };
      call = () => G.slice(args[0], start, size);
      break;
    }
    case 'concat': {
      const m = r.int(0, 4);
      const parts = [];
      const ps = [];
      for (let i = 0; i < m; i++) {
        const s0 = ps[0];
        // Usually a part shaped like the first (fresh values), else anything.
        const a = i > 0 && r.chance(0.7) && isShape(s0) && sizeOf(s0) <= 4096 ? { v: { data: randData(r, s0), shape: [...s0] }, shape: s0 } : directArg(r);
        parts.push(a.v);
        ps.push(a.shape);
      }
      const opts = r.pick([undefined, { axis: 0 }, { axis: 1 }, { axis: 2 }, null, {}, { axis: '1' }]);
      let list = r.chance(0.95) ? parts : garbage(r);
      if (guarded('sparseConcat') && Array.isArray(list) && list.length > 2 ** 16) list = sparseOf(1000);
      extra = { axis: opts?.axis ?? 0 };
      shapes.length = 0;
      if (list === parts) shapes.push(...ps);
      else shapes.push(null); // garbage as the list: the model has no say ([1, [2]] is a fine list)
      args.length = 0;
      args.push(list, opts);
      call = () => (opts === undefined ? G.concat(list) : G.concat(list, opts));
      break;
    }
    case 'triangularSolve': {
      const o = r.pick([undefined, { lower: false }, { lower: 0 }, {}, ex()]);
      extra = { options: o };
      call = () => (o === undefined ? G.triangularSolve(args[0], args[1]) : G.triangularSolve(args[0], args[1], o));
      // Destructuring null or a Symbol is the caller's TypeError; anything else reads `lower`.
      break;
    }
    case 'toNested': {
      const s = shapes[0];
      if (guarded('emptyRows') && isShape(s) && s.length === 2 && s[0] > 2 ** 16 && s[0] <= 2 ** 28) return;
      call = () => G.toNested(args[0] instanceof G.Var ? args[0].value : G.asTensor(args[0]));
      break;
    }
    case 'variable':
    case 'asTensor':
      call = () => G[op](args[0]);
      break;
    case 'tensor': {
      const s = r.chance(0.7) ? r.pick([[0], [2 ** 40, 0], [0, 2 ** 62], [2], [1, 2], [-1], [1.5], [NaN], [2 ** 64, 0]]) : shapeGarbage(r);
      const d = r.chance(0.7) ? new Float64Array(r.pick([0, 1, 2])) : shapeGarbage(r); // Float64Array.from(sparseOf(2^28)): 2^28 NaNs, ~16 s
      call = () => G.tensor(d, s);
      args.length = 0;
      args.push(d, s);
      break;
    }
    case 'zeros': {
      const s = r.chance(0.7) ? r.pick([[0], [2 ** 40, 0], [0, 2 ** 62], [2], [1, 2], [-1], [1.5], [NaN], [2 ** 64, 0], [2 ** 53, 0], [3, 0, 1]]) : shapeGarbage(r);
      call = () => G.zeros(s);
      args.length = 0;
      args.push(s);
      break;
    }
    case 'eye': {
      const k = r.pick([0, 1, 3, -1, 1.5, NaN, 2 ** 40, '2', null, undefined, 2n]);
      if (typeof k === 'number' && k > 4096) return; // eye(2^40) would be 2^80 values: the caller's RangeError
      call = () => G.eye(k);
      args.length = 0;
      args.push(k);
      break;
    }
    case 'backward': {
      const a0 = args[0];
      const seed = r.chance(0.5) ? undefined : r.chance(0.5) ? { data: new Float64Array(sizeOf(isShape(shapes[0]) ? shapes[0] : [])), shape: isShape(shapes[0]) ? [...shapes[0]] : [] } : garbage(r);
      call = () => {
        const x = a0 instanceof G.Var ? a0 : G.variable(a0);
        const y = G.neg(x);
        seed === undefined ? y.backward() : y.backward(seed);
        return x.grad;
      };
      args.push(seed);
      break;
    }
    default:
      call = () => G[op](...args);
  }
  const expect = ['toNested', 'variable', 'asTensor', 'tensor', 'zeros', 'eye', 'backward'].includes(op) || shapes.includes(null) ? null : model(op, shapes, extra);
  const wide = shapes.some((s) => isShape(s) && tooWide(s)) || (isShape(expect) && tooWide(expect));
  const repro = () => `G.${op}(${args.map((a) => lit(a)).join(', ')})`;
  if (env.FUZZ_API_DEBUG) console.log(repro());
  currentRepro = repro;
  const out = attempt(`${op}`, call);
  if (out.ok) {
    stats.returned++;
    if (expect === null) return;
    const v = out.value;
    if (!(v instanceof G.Var)) fail(`${repro()} returned ${typeof v}, not a Var`);
    if (!isShape(expect)) {
      if (op === 'concat' && expect.why === 'concat axis' && (shapes[0]?.length ?? 0) < 2) return; // vectors ignore the axis
      if (op === 'triangularSolve' && expect.why === 'garbage') return;
      fail(`${repro()} returned ${fmt(v.shape)} where the SPEC's rules say it throws (${expect.why})`);
    }
    if (!sameShape(v.shape, expect)) fail(`${repro()} returned ${fmt(v.shape)}, the SPEC's rules give ${fmt(expect)}`);
    const d = attempt(`${op} .data`, () => v.data);
    if (!d.ok) fail(`${repro()}: reading .data threw "${d.error.message}"`);
    if (d.value.length !== sizeOf(expect)) fail(`${repro()}: data length ${d.value.length} for ${fmt(expect)}`);
    if (v.isScalar) {
      const b = attempt(`${op} backward`, () => v.backward());
      if (!b.ok) fail(`${repro()}.backward() threw "${b.error.message}"`);
    } else if (r.chance(0.5)) {
      const b = attempt(`${op} backward(seed)`, () => v.backward({ data: new Float64Array(sizeOf(expect)), shape: [...expect] }));
      if (!b.ok) fail(`${repro()}.backward(zeros) threw "${b.error.message}"`);
    }
    for (const a of args) if (a instanceof G.Var) attempt('grad', () => a.grad);
  } else {
    stats.threw++;
    if (expect !== null && isShape(expect) && !VALUE_ERRORS.test(out.error.message) && !(wide && /too large|do not match|disagree|must agree|cannot be applied|exceeds/.test(out.error.message))) {
      // An op the SPEC's rules accept threw.
      fail(`${repro()} threw "${out.error.message}"; the SPEC's rules give ${fmt(expect)}`);
    }
  }
  return repro;
}

// ---- drivers with careless and hostile arguments

function runDriver(r) {
  const which = r.int(0, 9);
  const f = (p) => (isTensor(p) || Array.isArray(p) || typeof p === 'number' || p instanceof Float64Array ? G.sum(p) : G.add(0, ...Object.keys(p).map((k) => G.sum(p[k]))));
  f.src = '(p) => G.add(0, ...Object.keys(p).map((k) => G.sum(p[k])))';
  const notFn = r.pick([5, 'f', null, undefined, {}, Symbol('f'), 1n, [], G.sum(1)]);
  const paramLike = () => {
    if (r.chance(0.5)) return garbage(r);
    const keys = pickKeys(r, r.int(0, 3), false);
    const o = {};
    for (const k of keys) Object.defineProperty(o, k, { value: r.chance(0.3) ? garbage(r) : inForm(r, randData(r, smallShape(r)), smallShape(r).length ? [1] : []), enumerable: true, writable: true, configurable: true });
    return o;
  };
  let call;
  let repro;
  switch (which) {
    case 0: {
      const d = r.pick(['valueAndGrad', 'grad', 'compile', 'jacobian', 'compileFromJSON']);
      call = () => G[d](notFn);
      repro = () => `G.${d}(${lit(notFn)})`;
      break;
    }
    case 1:
    case 2: {
      const p = paramLike();
      const ins = r.chance(0.5) ? undefined : r.pick([5, 'x', null, [], new Float64Array(1), {}, { x: garbage(r) }, { x: 1 }]);
      const d = r.pick(['valueAndGrad', 'grad', 'compile']);
      const val = r.chance(0.3);
      call = () => {
        const h = G[d](f);
        return val ? h.value(p, ins) : h(p, ins);
      };
      repro = () => `G.${d}(${f.src})${val ? '.value' : ''}(${lit(p)}, ${lit(ins)})`;
      break;
    }
    case 3: {
      const c = G.compile(f);
      call = () => c.toJSON();
      repro = () => `G.compile(f).toJSON()`;
      break;
    }
    case 4: {
      const x = paramLike();
      call = () => G.jacobian((v) => G.mul(v, 2))(x);
      repro = () => `G.jacobian((v) => G.mul(v, 2))(${lit(x)})`;
      break;
    }
    case 5:
    case 6: {
      // A valid plan, then mutated.
      const n = r.int(1, 3);
      const c = G.compile((p) => G.sum(G.concat([p.a, p.a, G.square(p.b)])));
      c({ a: [1, 2], b: Array.from({ length: n }, (_, i) => i) });
      const plan = c.toJSON();
      const mut = r.int(0, 12);
      const node = plan.nodes[r.int(0, plan.nodes.length - 1)];
      const g = () => r.pick([garbage(r), -1, 1e9, 2 ** 53, 1.5, NaN, 'x', null, [2 ** 62, 0], [2 ** 40, 0], [0, 2 ** 62], [-1], [1, 2, 3]]);
      if (mut === 0) node.shape = g();
      else if (mut === 1) node.parents = [g(), 0];
      else if (mut === 2) node.op = r.pick(['nope', '__proto__', 'constructor', '', 'toString', 'sum ']);
      else if (mut === 3) plan.root = g();
      else if (mut === 4) plan.version = g();
      else if (mut === 5) node.kind = r.pick(['op', 'param', 'input', 'const', 'x', null]);
      else if (mut === 6) node.args = g();
      else if (mut === 7) {
        const sparse = [];
        sparse.length = r.pick([10, 2 ** 16]);
        plan.nodes = sparse;
      } else if (mut === 8) node.data = g();
      else if (mut === 9) plan.nodes[0].shape = r.pick([[2 ** 40, 0], [0, 2 ** 62], [2 ** 53, 0], [2 ** 31, 0]]);
      else if (mut === 10) plan.nodes.push({ kind: 'op', op: 'concat', list: true, parents: Array.from({ length: 64 }, () => 0), args: [{ axis: 1 }] }), (plan.root = plan.nodes.length - 1), (plan.nodes[0].shape = [2 ** 28, 0]);
      else if (mut === 11) node.parents = Array.from({ length: 3 }, () => r.int(0, plan.nodes.length + 1));
      else plan.input = r.pick(['single', 'x', null, 3]);
      // (A mutated shape may be a sparse array of 2^28 holes, which a copy
      // would spell out: 2 GB of harness heap, where the package reads none.)
      const shape0 = plan.nodes[0]?.shape;
      const px = { a: { data: new Float64Array(0), shape: Array.isArray(shape0) && shape0.length <= 8 ? [...shape0] : [2] }, b: Array.from({ length: n }, (_, i) => i) };
      call = () => {
        const J = G.compileFromJSON(plan);
        const out = attempt('rebuilt plan call', () => J(px));
        attempt('rebuilt plan value', () => J.value(px));
        return out;
      };
      // (lit, not JSON.stringify: a mutated entry may be a sparse array of 2^32 − 1 holes)
      repro = () => `${MAP_OF}\nG.compileFromJSON(${lit(plan)})`;
      break;
    }
    case 7: {
      const c = G.compile(f);
      const pts = r.pick([
        garbage(r),
        [1, 2],
        [[1, 2], [3]],
        [1, [1, 2]],
        sparseOf(5),
        sparseOf(2 ** 26), // past 2^25, V8 keeps a sparse array in dictionary mode: no allocation
        { data: new Float64Array(6), shape: [3, 2] },
        { data: new Float64Array(0), shape: [0, 3] },
        { data: new Float64Array(0), shape: [2 ** 40, 0] },
        { data: new Float64Array(5), shape: [2, 3] },
        [{ a: 1 }, { b: 1 }],
      ]);
      const opts = r.pick([undefined, null, 5, { threads: 0 }, { threads: 1.5 }, { threads: '2' }, { threads: 1000 }, { threads: 2n }, { threads: Symbol('t') }, { threads: 2 }]);
      const ins = r.pick([undefined, undefined, null, 3, {}]);
      const async = r.chance(0.2);
      call = () => {
        if (async) {
          const pr = c.batchAsync(pts, ins, opts);
          if (!(pr instanceof Promise)) fail('batchAsync did not return a Promise');
          pr.catch((e) => {
            if (!(e instanceof Error) || !e.message) stats.asyncBad = (stats.asyncBad ?? 0) + 1;
          });
          return pr;
        }
        return c.batch(pts, ins, opts);
      };
      repro = () => `G.compile(${f.src}).${async ? 'batchAsync' : 'batch'}(${lit(pts)}, ${lit(ins)}, ${lit(opts)})`;
      break;
    }
    case 8: {
      // The same compiled closure at several maps, odd keys included: every call as eager.
      const c = G.compile(f);
      const J = [];
      for (let t = 0; t < 3; t++) {
        // Keys whose `key:sig` pairs can spell another map's signature ({a, b} and {'a:s,b'}).
        const keys = !guarded('signatureKeys') && r.chance(0.5) ? [r.pick(['a', 'a:s,b', 'a:s', 'a,b'])] : pickKeys(r, r.int(1, 3), guarded('signatureKeys'));
        if (keys[0] === 'a' && keys.length === 1) keys.push('b');
        const o = {};
        for (const k of keys) {
          const s = r.chance(0.75) ? [] : [r.int(1, 3)];
          Object.defineProperty(o, k, { value: inForm(r, randData(r, s), s), enumerable: true, writable: true, configurable: true });
        }
        J.push(o);
      }
      call = () => {
        for (const o of J) sameOutcome(attempt('compile', () => c(o)), attempt('valueAndGrad', () => G.valueAndGrad(f)(o)), `compile vs valueAndGrad at ${mapLit(o)}`);
      };
      repro = () => `${MAP_OF}\nconst f = ${f.src};\nconst c = G.compile(f);\nfor (const o of [${J.map(mapLit).join(', ')}]) console.log(G.valueAndGrad(f)(o), c(o));`;
      break;
    }
    default: {
      const s = r.pick([[2 ** 40, 0], [0, 2 ** 62], [2 ** 53, 0], [2 ** 32 + 5, 0], [0, 0], [0]]);
      const x = { data: new Float64Array(0), shape: s };
      const body = r.pick(['sum', 'transpose', 'concat1', 'concat0', 'mean', 'exp']);
      const g = (p) => (body === 'sum' || body === 'mean' ? G[body](p) : body === 'exp' ? G.sum(G.exp(p)) : body === 'transpose' ? G.sum(G.transpose(p)) : G.sum(G.concat([p, p, p], { axis: body === 'concat1' ? 1 : 0 })));
      const drv = r.pick(['valueAndGrad', 'compile', 'json', 'value']);
      call = () => {
        if (drv === 'valueAndGrad') return G.valueAndGrad(g)(x);
        const c = G.compile(g);
        const out = c(x);
        if (drv === 'json') {
          const J = G.compileFromJSON(c.toJSON());
          sameOutcome(attempt('rebuilt', () => J(x)), { ok: true, value: out }, 'compileFromJSON vs compile (huge)');
        }
        if (drv === 'value') return c.value(x);
        if (!sameShape(out.gradient.shape, s) || out.gradient.data.length !== 0) fail(`gradient of a ${fmt(s)} parameter is ${fmt(out.gradient.shape)}`);
        return out;
      };
      repro = () => `G.compile(${body})(${lit(x)})  /* via ${drv} */`;
    }
  }
  const td = performance.now();
  currentRepro = repro;
  const out = attempt(`driver ${which}`, call);
  stats.ms[`driver${which}`] = (stats.ms[`driver${which}`] ?? 0) + performance.now() - td;
  if (out.ok) stats.returned++;
  else stats.threw++;
  return repro;
}

// ------------------------------------------------------------------ the loop

/** One case by index: throws a Failure with what went wrong. */
function runCase(seed, index) {
  const r = rngFor(seed, index);
  const k = r.next();
  if (k < 0.55) {
    const prog = genProgram(r);
    stats.kinds.program = (stats.kinds.program ?? 0) + 1;
    return { kind: 'program', prog, run: () => runProgram(prog), runOn: (p) => runProgram(p) };
  }
  // (a case's kind is fixed by its index: programs, the direct calls below
  // 0.71 and the drivers are the cases they were before the higher kind
  // took 0.71-0.85 from the direct calls, so old replays still replay)
  if (k < 0.71) {
    stats.kinds.direct = (stats.kinds.direct ?? 0) + 1;
    return { kind: 'direct', run: () => runDirect(rngFor(seed ^ 0xa5a5a5a5, index)) };
  }
  if (k < 0.85) {
    stats.kinds.higher = (stats.kinds.higher ?? 0) + 1;
    const hr = rngFor(seed ^ 0x3c3c3c3c, index);
    if (hr.chance(0.03)) return { kind: 'higher', run: () => runHessianCap(rngFor(seed ^ 0xc3c3c3c3, index)) };
    const prog = genProgram(r);
    const plan = higherPlan(hr, prog);
    return { kind: 'higher', prog, plan, run: () => runHigher(prog, plan), runOn: (p) => runHigher(p, plan) };
  }
  stats.kinds.driver = (stats.kinds.driver ?? 0) + 1;
  return { kind: 'driver', run: () => runDriver(rngFor(seed ^ 0x5a5a5a5a, index)) };
}

/** A direct or driver case's reproduction, set before its call. */
let currentRepro = null;

/** The failure of a case, or null. */
function judge(c) {
  // (no second try here: a slow call has had its own, `retime`)
  clock = { worst: 0, where: '' };
  currentRepro = null;
  let repro = null;
  try {
    c.run();
    repro = currentRepro;
  } catch (e) {
    repro = currentRepro;
    if (e instanceof Failure) return { message: e.message, repro, tag: e.tag };
    return { message: `the harness itself threw ${e?.stack ?? e}`, repro };
  }
  if (clock.worst <= BUDGET_MS) return null;
  const again = clock.worst < HANG_MS ? ', and again when re-timed' : '';
  return { message: `a call took ${clock.worst.toFixed(0)} ms (> ${BUDGET_MS} ms budget${again}): ${clock.where}`, repro, slow: clock.worst < HANG_MS };
}

/** The shortest prefix of a program's steps that still fails, for the report. */
function shrink(c) {
  const prog = c.prog;
  for (let n = 1; n < prog.steps.length; n++) {
    const cand = { ...prog, steps: prog.steps.slice(0, n) };
    const got = judge({ run: () => c.runOn(cand) });
    if (got !== null) return { prog: cand, message: got.message };
  }
  return null;
}

function report(index, c, failure) {
  const lines = [
    `FUZZ-API FAILURE seed=${SEED} case=${index} (${c.kind})${WASM ? ' [wasm]' : ''}`,
    `  ${failure.message}`,
    `  replay: ${WASM ? 'TANGENT_GRAD_WASM=1 ' : ''}FUZZ_API_SEED=${SEED} FUZZ_API_START=${index} FUZZ_API_CASES=1 node --test __test__/fuzz-api.test.mjs`,
  ];
  if (c.prog !== undefined) {
    const small = shrink(c);
    const prog = small ? small.prog : c.prog;
    if (small) lines.push(`  shrunk to ${prog.steps.length} step(s): ${small.message}`);
    const text = safeRender(() => `${renderProgram(prog)}\n${c.kind === 'higher' ? higherCalls(prog, c.plan) : 'console.log(G.valueAndGrad(f)(p1' + (prog.inKeys ? ', d1' : '') + '), G.compile(f)(p1' + (prog.inKeys ? ', d1' : '') + '));'}`);
    lines.push('  reproduction:', ...text.split('\n').map((l) => `    ${l}`));
  } else if (typeof failure.repro === 'function') {
    lines.push('  reproduction:', ...safeRender(failure.repro).split('\n').map((l) => `    ${l}`));
  }
  return lines.join('\n');
}

test(`fuzz the public API: ${CASES} cases from seed ${SEED}${START ? ` at ${START}` : ''}${WASM ? ' (WebAssembly)' : ''}`, { timeout: 120_000 + CASES * 20 }, async () => {
  const failures = [];
  const slow = [];
  /**
   * Failures by class: a failure's tag, else its message with the numbers
   * taken out. Past two of a class, a failure is one line, and does not
   * count toward MAX_FAILURES; past twenty, it is only counted (failureClasses
   * in the summary). So one bug found over and over does not end the run.
   */
  const classes = {};
  let full = 0;
  const record = (i, c, failure) => {
    const cls = failure.tag ?? failure.message.replace(/\bp[12]\b/g, 'pN').replace(/-?\d+(\.\d+)?(e[+-]?\d+)?/g, 'N').slice(0, 160);
    const n = (classes[cls] = (classes[cls] ?? 0) + 1);
    if (n > 20) {
      failures.push(null); // counted, not printed
      return;
    }
    if (n > 2) {
      failures.push(`FUZZ-API FAILURE seed=${SEED} case=${i} (${c.kind}) [again]: ${failure.message.slice(0, 300)}`);
    } else {
      failures.push(report(i, c, failure));
      full++;
    }
    console.log(failures[failures.length - 1]);
  };
  const t0 = performance.now();
  for (let i = START; i < START + CASES; i++) {
    // Let the event loop turn now and then: replaced shared tapes are freed
    // by finalizers, which only run then (README, "Known differences").
    if ((i - START) % 256 === 255) await new Promise((resolve) => setImmediate(resolve));
    if (TRACE !== null) writeSync(TRACE, `${i}\n`);
    const c = runCase(SEED, i);
    stats.cases++;
    const tc = performance.now();
    let failure = judge(c);
    stats.ms[c.kind] = (stats.ms[c.kind] ?? 0) + performance.now() - tc;
    if (failure !== null && failure.slow) {
      // Judged again at the end, away from whatever slowed it: a collection
      // or the scheduler. (The plan budget, src/js/budget.js, frees a few
      // plans per new plan, so it no longer stalls one call.)
      // Every slow case is also reported in the summary (slowRejudged).
      slow.push(i);
      failure = null;
    }
    if (failure !== null) {
      record(i, c, failure);
      if (full >= MAX_FAILURES) break;
    }
  }
  for (const i of slow) {
    // As alone as this process can make it: finalizers run, then a full collection.
    await new Promise((resolve) => setImmediate(resolve));
    collect();
    const c = runCase(SEED, i);
    let failure = judge(c);
    if (failure !== null && failure.slow) {
      await new Promise((resolve) => setImmediate(resolve));
      collect();
      failure = judge(c);
    }
    if (failure !== null) record(i, c, failure);
  }
  const secs = (performance.now() - t0) / 1000;
  const mem = process.memoryUsage();
  const summary = {
    seed: SEED,
    start: START,
    cases: stats.cases,
    failures: failures.length,
    failureClasses: classes,
    seconds: Number(secs.toFixed(1)),
    kinds: stats.kinds,
    returned: stats.returned,
    threw: stats.threw,
    fdChecked: stats.fdChecked,
    fdSkipped: stats.fdSkipped,
    higherChecks: stats.higher,
    nonPlainErrors: stats.errorTypes,
    notes: stats.notes,
    opsInPrograms: stats.ops,
    msByKind: Object.fromEntries(Object.entries(stats.ms).map(([k, v]) => [k, Math.round(v)])),
    slowRejudged: slow.length,
    rssMB: Math.round(mem.rss / 2 ** 20),
    heapMB: Math.round(mem.heapUsed / 2 ** 20),
    wasm: WASM,
  };
  console.log(`FUZZ-API SUMMARY ${JSON.stringify(summary)}`);
  if (PROFILE !== null) console.log(Object.entries(PROFILE).sort((a, b) => b[1] - a[1]).slice(0, 30).map(([k, v]) => `${k}: ${v.toFixed(0)}`).join('\n'));
  for (const [k, v] of Object.entries(stats.errorSamples)) for (const m of v) console.log(`FUZZ-API SAMPLE ${k}: ${m}`);
  assert.equal(failures.length, 0, `${failures.length} failing case(s):\n${failures.filter((x) => x !== null).join('\n\n')}`);
});
