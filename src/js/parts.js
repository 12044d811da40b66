// A plan object encoded for the core without JSON text (compileFromJSON):
// its numbers in one Float64Array, its strings (names, op names) as one
// JSON array of strings, in the format src/core/json/parts.rs reads. Only
// an object each of whose fields has the schema's type is encoded, and
// the core then checks it exactly as it checks the text; for anything
// else `planParts` returns null and the object goes as JSON text, whose
// reading words every error (an object JSON.stringify would see
// differently, through a prototype or toJSON, goes that way too).

const OP = 3;
const CONST = 2;
/** A node kind's code, -1 for anything else. */
const kindOf = (k) => (k === 'param' ? 0 : k === 'input' ? 1 : k === 'const' ? CONST : k === 'op' ? OP : -1);

/** Thrown inside `planParts` at a field it leaves to the text path. */
const ASIDE = Symbol('as text');

/** A plain object, as JSON.parse makes them. */
const plain = (v) => v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype && v.toJSON === undefined;

/**
 * Whether `o` has exactly `n` enumerable keys: those read here. Keys the
 * schema does not have are left to the text path, which reads them as
 * JSON all the same (a cycle or a BigInt there is refused).
 */
function keysAre(o, n) {
  let k = 0;
  for (const _ in o) k++;
  return k === n;
}

/** Whether `s` has no lone surrogate. */
const wellFormed = (s) =>
  typeof s.isWellFormed === 'function' ? s.isWellFormed() : !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);

/** 1 when `x` is not undefined: a key JSON text would hold. */
const given = (x) => (x === undefined ? 0 : 1);

/** Encode `json`, a plan object; null when it should go as text. */
export function planParts(json) {
  if (!plain(json)) return null;
  // Each field is read once: a getter answering differently a second time
  // cannot make what is checked differ from what is sent.
  const nodes = json.nodes;
  if (!Array.isArray(nodes)) return null;
  // Grown as needed: a sparse `nodes` may claim a length its holes do not hold.
  let buf = new Float64Array(8 * Math.min(nodes.length, 1 << 16) + 16);
  let at = 0;
  const room = (k) => {
    if (at + k <= buf.length) return;
    const next = new Float64Array(Math.max(2 * buf.length, at + k));
    next.set(buf);
    buf = next;
  };
  const strings = [];
  const index = new Map();
  const string = (s) => {
    if (typeof s !== 'string') throw ASIDE;
    let i = index.get(s);
    if (i === undefined) {
      // A lone surrogate: the text path says what JSON makes of it.
      if (!wellFormed(s)) throw ASIDE;
      i = strings.length;
      strings.push(s);
      index.set(s, i);
    }
    return i;
  };
  // A number JSON text holds as it is: finite, and -0 read as 0 (the text
  // path spells -0 out only in data and op arguments).
  const integral = (x) => {
    if (typeof x !== 'number' || !Number.isFinite(x)) throw ASIDE;
    return x + 0;
  };
  const list = (xs, signed) => {
    if (!Array.isArray(xs)) throw ASIDE;
    const n = xs.length;
    room(1);
    buf[at++] = n;
    for (let i = 0; i < n; i++) {
      // Room by chunks: a sparse list's length is no promise of values
      // (one of length 2^32 - 1 asked for 34 GB here before its first hole).
      if ((i & 0xffff) === 0) room(Math.min(n - i, 0x10000));
      const x = xs[i];
      if (typeof x !== 'number') throw ASIDE;
      buf[at++] = signed ? x : integral(x);
    }
  };
  const tag = (b) => {
    if (b === undefined) return -1;
    if (typeof b !== 'boolean') throw ASIDE;
    return b ? 1 : 0;
  };
  const arg = (a) => {
    if (typeof a === 'number') {
      if (!Number.isFinite(a)) throw ASIDE;
      room(2);
      buf[at++] = 0;
      buf[at++] = a;
    } else if (Array.isArray(a)) {
      for (let i = 0; i < a.length; i++) if (!Number.isFinite(a[i])) throw ASIDE;
      room(1);
      buf[at++] = 1;
      list(a, true);
    } else if (plain(a)) {
      const { lower: lowerGiven, axis } = a;
      if (!keysAre(a, given(lowerGiven) + given(axis))) throw ASIDE;
      const lower = tag(lowerGiven);
      if (axis !== undefined && !Number.isFinite(axis)) throw ASIDE;
      room(4);
      buf[at++] = 2;
      buf[at++] = lower;
      buf[at++] = axis === undefined ? 0 : 1;
      if (axis !== undefined) buf[at++] = axis;
    } else {
      throw ASIDE;
    }
  };
  try {
    const { input, version, root } = json;
    if (!keysAre(json, 3 + given(input))) throw ASIDE;
    const inputAt = input === undefined ? -1 : string(input);
    room(4);
    buf[at++] = integral(version);
    buf[at++] = integral(root);
    buf[at++] = inputAt;
    buf[at++] = nodes.length;
    for (let i = 0; i < nodes.length; i++) {
      const n = nodes[i];
      if (!plain(n)) throw ASIDE;
      const kind = kindOf(n.kind);
      if (kind < 0) throw ASIDE;
      room(3);
      buf[at++] = kind;
      const { name, args, list: listed } = n;
      const keys = kind === OP ? 3 + given(args) + given(listed) : kind === CONST ? 3 : 2 + given(name);
      if (!keysAre(n, keys)) throw ASIDE;
      if (kind === OP) {
        buf[at++] = string(n.op);
        list(n.parents, false);
        room(2);
        buf[at++] = tag(listed);
        if (args === undefined) {
          buf[at++] = -1;
        } else {
          if (!Array.isArray(args)) throw ASIDE;
          buf[at++] = args.length;
          for (let k = 0; k < args.length; k++) arg(args[k]);
        }
      } else if (kind === CONST) {
        list(n.shape, false);
        list(n.data, true);
      } else {
        buf[at++] = name === undefined ? -1 : string(name);
        list(n.shape, false);
      }
    }
  } catch (e) {
    if (e === ASIDE) return null;
    throw e;
  }
  return { stream: buf.subarray(0, at), strings: JSON.stringify(strings) };
}
