// Plans as data: a traced graph serialized in the plan schema (toJSON), and
// a plan rebuilt from that JSON (compileFromJSON).

import { N } from './binding.js';
import { checkInputs } from './drivers.js';
import { attachDerivatives } from './derivatives.js';
import { ReadMap, readOnce, readOnceLazily } from './forms.js';
import { runMap, valueMap } from './mapcall.js';
import { batchPoints, emptyBatch, pointError, settle } from './batching.js';
import { planParts } from './parts.js';
import { Replay } from './replay.js';
import { sigOfShape, signature, signatureKey } from './signature.js';
import { build } from './budget.js';

export const HAND_BUILT =
  "toJSON: this objective holds a node built outside this package's ops, which cannot be replayed or serialized.";

/**
 * The traced graph in the JavaScript version's plan schema (SPEC §8), a
 * fresh document on every call. The walk over the graph is done once per
 * trace and kept on the record; each call only copies it out.
 */
export function serialize(r) {
  r.document ??= document(r);
  const d = r.document;
  const nodes = new Array(d.nodes.length);
  for (let i = 0; i < nodes.length; i++) {
    const n = d.nodes[i];
    let out;
    if (n.kind === 'op') {
      out = { kind: 'op', op: n.op, parents: n.parents.slice() };
      if (n.args !== undefined) out.args = copyArgs(n.args);
      if (n.list) out.list = true;
    } else if (n.kind === 'const') {
      out = { kind: 'const', shape: n.shape.slice(), data: n.unspeakable ? spelledOut(n.data.slice()) : n.data.slice() };
    } else {
      out = n.name === undefined ? { kind: n.kind, shape: n.shape.slice() } : { kind: n.kind, name: n.name, shape: n.shape.slice() };
    }
    nodes[i] = out;
  }
  return { version: 2, input: d.input, nodes, root: d.root };
}

/** Whether JSON text holds this number as it is (not NaN, ±Infinity or -0, which JSON.stringify writes as null and 0). */
const isPlainJSON = (v) => Number.isFinite(v) && !Object.is(v, -0);

/** A number JSON cannot hold as the string the core reads for it. */
const spelled = (v) => (isPlainJSON(v) ? v : Object.is(v, -0) ? '-0' : String(v));

/**
 * A constant's data that holds NaN, ±Infinity or -0, given a toJSON that
 * spells those out as strings: through JSON.stringify, a rebuilt plan gets
 * the same constants and so the same bits (null read back as NaN gave a
 * captured bound of Infinity a finite, wrong gradient). Not enumerable, so
 * structuredClone, postMessage and deep equality see the numbers as SPEC's
 * schema has them.
 */
function spelledOut(data) {
  Object.defineProperty(data, 'toJSON', { value: () => data.map(spelled) });
  return data;
}

/** An op's static arguments (numbers, lists of numbers, {axis} or {lower}) copied. */
function copyArgs(v) {
  if (Array.isArray(v)) return v.map(copyArgs);
  if (v !== null && typeof v === 'object') {
    const out = {};
    for (const k of Object.keys(v)) out[k] = copyArgs(v[k]);
    return out;
  }
  return v;
}

/** The plan document of a trace, built by walking its graph. */
function document({ params, P, ins, I, root }) {
  const nodes = [];
  const index = new Map();
  P.vars.forEach((v, i) => {
    index.set(v, nodes.length);
    nodes.push(params.map ? { kind: 'param', name: params.keys[i], shape: [...v.shape] } : { kind: 'param', shape: [...v.shape] });
  });
  if (I) {
    I.vars.forEach((v, i) => {
      index.set(v, nodes.length);
      nodes.push({ kind: 'input', name: ins.keys[i], shape: [...v.shape] });
    });
  }
  // Depth-first post-order, a node's parents visited from the last to the first.
  const stack = [[root, 0]];
  const seen = new Set([root]);
  while (stack.length > 0) {
    const top = stack[stack.length - 1];
    const [v, visited] = top;
    if (index.has(v)) {
      stack.pop();
      continue;
    }
    if (visited < v.parents.length) {
      top[1]++;
      const p = v.parents[v.parents.length - 1 - visited];
      if (!seen.has(p)) {
        seen.add(p);
        stack.push([p, 0]);
      }
      continue;
    }
    stack.pop();
    index.set(v, nodes.length);
    if (v.parents.length === 0) {
      const data = Array.from(v.data);
      nodes.push({ kind: 'const', shape: [...v.shape], data, unspeakable: !data.every(isPlainJSON) });
    } else if (v._closure !== null || v.spec === null) {
      throw new Error(HAND_BUILT);
    } else {
      const node = { kind: 'op', op: v.spec.op, parents: v.parents.map((p) => index.get(p)) };
      if (v.spec.args) node.args = copyArgs(v.spec.args);
      if (v.spec.list) node.list = true;
      nodes.push(node);
    }
  }
  return { input: params.map ? 'map' : 'single', nodes, root: index.get(root) };
}

// ---------------------------------------------------------------- plans as data

const notAPlan = () => new Error('compileFromJSON: not a serialized plan');

/** Arrays this long are checked for holes before JSON.stringify writes a null for each. */
const SPARSE_FROM = 1 << 16;

/**
 * A stringify replacer's check of each array it is about to write: a long
 * one with holes is refused at once. Written out, a sparse array of 2^26
 * took 37 s and 5 GB, and one of 2^27 crashed the process (V8's
 * JSON.stringify, Node 20), wherever in the plan it was.
 */
function refuseSparse(v) {
  if (Array.isArray(v) && v.length >= SPARSE_FROM && v.includes(undefined)) {
    throw new Error(`an array of length ${v.length} with holes`);
  }
  return v;
}

/** JSON text for the core, with the numbers JSON cannot hold (NaN, ±Infinity, -0) as strings. */
export function planText(json) {
  return JSON.stringify(json, (_, v) => (typeof v === 'number' ? spelled(v) : refuseSparse(v)));
}

/** A plan object as the JSON text the core reads. */
function textOf(json) {
  if (json === null || typeof json !== 'object' || !Array.isArray(json.nodes)) throw notAPlan();
  // A hole, found before JSON.stringify writes 'null' for each of a sparse
  // array's (2^27 of them took 52 s, then crashed), with the core's message
  // for the null it would have read.
  const nodes = json.nodes;
  for (let i = 0; i < nodes.length; i++) {
    if (!(i in nodes)) throw new Error(`compileFromJSON: node ${i}: expected an object, got null`);
  }
  try {
    // JSON.stringify writes NaN and ±Infinity as null, and -0 as 0. Without
    // them its text is planText's, at half the cost; a plan holding one is
    // written again, with them spelled out.
    const text = typeof json.toJSON === 'function' || signedZeroIn(nodes) ? null : JSON.stringify(json, (_, v) => refuseSparse(v));
    return typeof text === 'string' && !text.includes('null') ? text : planText(json);
  } catch (e) {
    throw new Error(`compileFromJSON: not a serialized plan (${e.message})`);
  }
}

/**
 * Whether a -0 may be where its sign counts: in a constant's data or an
 * op's arguments (anywhere else a plan holds integers). Anything unusual
 * there (data that is not an array, arguments nested deeper than any op's,
 * a toJSON method) counts as one.
 */
function signedZeroIn(nodes) {
  const negativeZero = (v, depth) => {
    if (typeof v === 'number') return v === 0 && 1 / v < 0;
    if (v === null || typeof v !== 'object') return false;
    if (depth === 0 || typeof v.toJSON === 'function') return true;
    if (Array.isArray(v)) {
      // A hole or undefined (found at once, where a walk over a sparse
      // array's holes took 7 s at 2^28) is written as null, which sends
      // the plan to planText anyway, and planText spells out any -0.
      if (v.includes(undefined)) return false;
      for (let i = 0; i < v.length; i++) if (negativeZero(v[i], depth - 1)) return true;
      return false;
    }
    for (const k of Object.keys(v)) if (negativeZero(v[k], depth - 1)) return true;
    return false;
  };
  if (typeof nodes.toJSON === 'function') return true;
  for (let i = 0; i < nodes.length; i++) {
    const n = nodes[i];
    if (n === null || typeof n !== 'object') continue;
    if (typeof n.toJSON === 'function') return true;
    const data = n.data;
    if (data !== undefined && (!Array.isArray(data) || negativeZero(data, 1))) return true;
    if (n.args !== undefined && negativeZero(n.args, 4)) return true;
  }
  return false;
}

/**
 * `json` is a plan object, or its JSON text (which skips JSON.parse and
 * JSON.stringify both); text that is not a JSON object is not a plan.
 */
export function compileFromJSON(json) {
  if (typeof json === 'string' && !/^\s*\{/.test(json)) throw notAPlan();
  // An object goes encoded when it can (src/js/parts.js), else as text.
  const parts = typeof json === 'string' ? null : planParts(json);
  const text = parts !== null ? null : typeof json === 'string' ? json : textOf(json);
  const rebuild = parts !== null ? (into) => N.planFromParts(parts.stream, parts.strings, into) : (into) => N.planFromJson(text, into);
  const plan = build(rebuild);
  // Names and shapes as the core read them from the text, not from getters
  // that might answer differently a second time.
  const slots = JSON.parse(N.planSlots(plan));
  const map = slots.map;
  const keys = map ? slots.params.map((p) => p.name) : null;
  const shapes = slots.params.map((p) => p.shape);
  const inputKeys = slots.inputs.map((n) => n.name);
  const inputs = slots.inputs;
  const replay = new Replay(plan, rebuild, map, keys, shapes, inputKeys, inputs.map((n) => n.shape), N.planRootShape(plan));
  const named = (ks, ss, quote) =>
    ks
      .map((k, i) => [k, ss[i]])
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, s]) => `${quote ? JSON.stringify(k) : k}:${sigOfShape(s)}`)
      .join(',');
  const expectedAs = (quote) =>
    (map ? named(keys, shapes, quote) : sigOfShape(shapes[0] ?? [])) +
    (inputs.length > 0 ? `|${named(inputKeys, replay.inputShapes, quote)}` : '');
  const expected = expectedAs(false);
  const expectedKey = expectedAs(true);

  const check = (x, ins) => {
    if (ins !== undefined) checkInputs(ins, 'compileFromJSON');
    const key = signatureKey(x, ins);
    // An empty inputs map where the plan takes none, as `compile` takes it.
    if (key !== expectedKey && !(inputs.length === 0 && key === `${expectedKey}|`)) {
      throw new Error(
        `compileFromJSON: this plan was built for arguments shaped ${expected}, got ${signature(x, ins)}. ` +
          'A rebuilt plan has no objective to re-trace, so it cannot adapt.',
      );
    }
  };
  // As `compile`'s calls: a map that fits straight into the bound buffers.
  const calling = (fast, slow) => (x, ins) => {
    const read = readOnceLazily(x);
    const readIn = readOnceLazily(ins);
    if (read instanceof ReadMap && (readIn === undefined || readIn instanceof ReadMap)) {
      const result = fast(replay, read, readIn);
      if (result !== undefined) return result;
    }
    x = read instanceof ReadMap ? read.object() : read;
    ins = readIn instanceof ReadMap ? readIn.object() : readIn;
    check(x, ins);
    return slow(x, ins);
  };
  const r = calling(runMap, (x, ins) => replay.run(x, ins, 'compileFromJSON'));
  r.value = calling(valueMap, (x, ins) => replay.value(x, ins));
  // Many points per call: every point at the plan's shapes; point i's
  // misfit says what a single call there would.
  const misfit = (label, ins) => (i, x) => {
    try {
      check(x, ins);
    } catch (e) {
      return pointError(label, i, e);
    }
    return new Error(`${label}: point ${i} does not match the plan's shapes`);
  };
  const batchWith = (method, label, points, ins, options) => {
    const b = batchPoints(points, options, label);
    ins = readOnce(ins);
    if (ins !== undefined) checkInputs(ins, 'compileFromJSON');
    if (b.packed) replay.checkPacked(b, label);
    if (b.k === 0) return emptyBatch(b);
    try {
      check(readOnce(b.sample), ins);
    } catch (e) {
      throw pointError(label, 0, e);
    }
    return replay[method](points, b, ins, label, 'compileFromJSON', misfit(label, ins));
  };
  r.batch = (points, ins, options) => batchWith('batch', 'batch', points, ins, options);
  r.batchAsync = (points, ins, options) => settle(() => batchWith('batchAsync', 'batchAsync', points, ins, options));
  r.async = (x, ins) =>
    settle(() => {
      x = readOnce(x);
      ins = readOnce(ins);
      check(x, ins);
      const b = { packed: false, k: 1, threads: 1, sample: x };
      return replay.batchAsync([x], b, ins, '', 'compileFromJSON', null).then((out) => out[0]);
    });
  attachDerivatives(
    r,
    (x, ins) => {
      check(x, ins);
      return replay;
    },
    null,
  );
  return r;
}
