// Forward mode and second order, eager: jvp, hvp, hessian and jacobian on a
// tape (on a compiled plan: derivatives.js). The core records the tangent
// of an objective as ops (src/core/tangent.rs, each op's rule in
// src/core/rules); a Hessian-vector product is the gradient of the scalar
// tangent ∇f·v, swept back like any objective. Eager, compiled and rebuilt
// results agree bit for bit: the three record the same ops in the same order.

import { N } from './binding.js';
import { record, scalarRootError } from './drivers.js';
import { MAX_EMPTY_ROWS, MAX_VALUES, fmtShape, inForms, isMapForm, plainArray, readOnce, sizeOf, symmetric, toNested } from './forms.js';
import { CONST, LEAF, Var, asTensor, current, evaluationTape, leafVar, nodeAdjoint, retire, setCurrent, sweep, variable } from './tape.js';

const ids = (vars) => Uint32Array.from(vars, (v) => v._id);

/** A failure of the core, prefixed with the function the user called. */
export function prefixed(where, e) {
  return e.message.startsWith(`${where}:`) ? e : new Error(`${where}: ${e.message}`);
}

/**
 * The tangent `v`, one tensor per parameter in slot order, each shaped like
 * its parameter. `keys` is null for a single parameter.
 */
export function readTangent(v, keys, shapes, where) {
  v = readOnce(v);
  const check = (t, i, name, of) => {
    const s = shapes[i];
    if (t.shape.length !== s.length || t.shape[0] !== s[0] || t.shape[1] !== s[1]) {
      throw new Error(`${where}: ${name} is shaped ${fmtShape(t.shape)}, unlike ${of} (${fmtShape(s)})`);
    }
    return t;
  };
  const read = (t, name) => {
    try {
      return asTensor(t, name);
    } catch (e) {
      throw prefixed(where, e);
    }
  };
  if (keys === null) return [check(read(v, 'the tangent'), 0, 'the tangent', 'the parameter')];
  if (!isMapForm(v)) throw new Error(`${where}: the tangent must be a {name: value} map with the parameters' keys`);
  for (const k of Object.keys(v)) {
    if (!keys.includes(k)) throw new Error(`${where}: the tangent has key "${k}", which is not a parameter`);
  }
  return keys.map((k, i) => {
    if (!Object.prototype.hasOwnProperty.call(v, k)) throw new Error(`${where}: the tangent has no key "${k}"; it needs one per parameter`);
    return check(read(v[k], `tangent "${k}"`), i, `tangent "${k}"`, `parameter "${k}"`);
  });
}

/** Refuse an m×q Jacobian past the cap on values before anything is allocated for it. */
export function checkJacobianSize(m, q) {
  if (m * q > MAX_VALUES) {
    throw new Error(`jacobian: a ${m}×${q} Jacobian holds ${m * q} entries, more than the ${MAX_VALUES} a value may hold`);
  }
  // Its rows are arrays, which cost as much as values would, though empty (toNested's rule).
  if (q === 0 && m > MAX_EMPTY_ROWS) {
    throw new Error(`jacobian: a ${m}×0 Jacobian has too many rows to return as nested arrays`);
  }
}

/** Refuse a Hessian past the cap on values before anything is allocated for it. */
export function checkHessianSize(q, where) {
  if (q * q > MAX_VALUES) {
    throw new Error(`${where}: ${q} parameters make a ${q}×${q} Hessian of ${q * q} entries, more than the ${MAX_VALUES} a value may hold`);
  }
}

// ---------------------------------------------------------------- eager

/** Record f and its tangent along v (or the unit direction `unit`) on a fresh tape: { r, tangentId, shapes, slots }. */
function recordTangent(f, x, v, inputs, where, kind, unit = null) {
  const r = record(f, x, inputs, where, CONST);
  try {
    const shapes = r.P.vars.map((p) => p.shape);
    const slots = { keys: r.params.map ? r.params.keys : null, values: r.params.values };
    const tangents = unit === null ? readTangent(v, slots.keys, shapes, where) : unitTangents(shapes, unit);
    const V = tangents.map((t) => leafVar(r.t, kind, t));
    let tangentId;
    try {
      tangentId = N.tapeJvp(r.t.h, r.root._id, ids(r.P.vars), ids(V));
    } catch (e) {
      throw prefixed(where, e);
    }
    return { r, tangentId, shapes, slots };
  } catch (e) {
    retire(r.t);
    throw e;
  }
}

/** The j-th unit direction over parameters of these shapes, one tensor each. */
function unitTangents(shapes, j) {
  let at = 0;
  return shapes.map((shape) => {
    const data = new Float64Array(sizeOf(shape));
    if (j >= at && j < at + data.length) data[j - at] = 1;
    at += data.length;
    return { data, shape };
  });
}

/**
 * The gradient of the recorded objective into `out` from `at`, by the sweep
 * valueAndGrad takes: the same bits. (The tangent's sweep also gives it, as
 * the adjoints of the directions, but through the tangent rules, which round
 * differently, and as 0·∞ = NaN where an infinite partial lies behind a
 * relu, maximum or minimum that blocks it.)
 */
function gradientOf(r, out, at) {
  sweep(r.t, r.root._id, null);
  adjointsInto(r.t, r.P.vars, out, at);
}

/** The adjoints of `vars` after the last sweep into `out` from `at`, one after another (none: zeros). */
function adjointsInto(t, vars, out, at) {
  for (const p of vars) {
    const a = nodeAdjoint(t, p._id, p.shape);
    if (a !== null) out.set(a, at);
    at += sizeOf(p.shape);
  }
}

function tapeValue(t, id, shape) {
  const data = new Float64Array(sizeOf(shape));
  N.tapeValue(t.h, id, data);
  return { data, shape };
}

export function jvp(f) {
  if (typeof f !== 'function') throw new Error('jvp: expected a function');
  return (x, v, inputs) => {
    const { r, tangentId } = recordTangent(f, x, v, inputs, 'jvp', CONST);
    try {
      const shape = r.root.shape;
      return { value: toNested(r.root.value), tangent: toNested(tapeValue(r.t, tangentId, shape)) };
    } finally {
      retire(r.t);
    }
  };
}

export function hvp(f) {
  if (typeof f !== 'function') throw new Error('hvp: expected a function');
  return (x, v, inputs) => {
    const { r, tangentId, shapes, slots } = recordTangent(f, x, v, inputs, 'hvp', LEAF);
    try {
      if (!r.root.isScalar) throw scalarRootError('hvp', r.root.shape);
      const value = r.root.data[0];
      const q = shapes.reduce((n, s) => n + sizeOf(s), 0);
      const flat = new Float64Array(2 * q);
      gradientOf(r, flat, q);
      N.tapeFinish(r.t.h, tangentId, false, ids(r.P.vars), flat.subarray(0, q));
      r.t.emptied = true;
      return { value, gradient: inForms(slots, shapes, flat, q), hvp: inForms(slots, shapes, flat, 0) };
    } finally {
      retire(r.t);
    }
  };
}

export function hessian(f) {
  if (typeof f !== 'function') throw new Error('hessian: expected a function');
  return (x, inputs) => {
    const first = recordTangent(f, x, null, inputs, 'hessian', LEAF, 0);
    const { r, shapes, slots } = first;
    const t = r.t;
    try {
      if (!r.root.isScalar) throw scalarRootError('hessian', r.root.shape);
      const q = shapes.reduce((n, s) => n + sizeOf(s), 0);
      checkHessianSize(q, 'hessian');
      const out = new Float64Array(1 + q + q * q);
      out[0] = r.root.data[0];
      const P = r.P.vars;
      gradientOf(r, out, 1);
      for (let j = 0; j < q; j++) {
        let id = first.tangentId;
        if (j > 0) {
          const V = unitTangents(shapes, j).map((u) => leafVar(t, LEAF, u));
          id = N.tapeJvp(t.h, r.root._id, ids(P), ids(V));
        }
        sweep(t, id, null);
        adjointsInto(t, P, out, 1 + q + j * q);
      }
      return { value: out[0], gradient: inForms(slots, shapes, out, 1), hessian: symmetric(out, 1 + q, q) };
    } finally {
      retire(t);
    }
  };
}

/**
 * SPEC §6's jacobian: by forward mode when the input has no more entries
 * than the output (one tangent per input entry), else by reverse (one sweep per
 * output entry), which hand-built nodes also take part in.
 */
export function jacobian(f) {
  if (typeof f !== 'function') throw new Error('jacobian: expected a function');
  return (x) => {
    const t = evaluationTape(false);
    const prev = current;
    setCurrent(t);
    try {
      const leaf = variable(x);
      const y = f(leaf);
      setCurrent(prev);
      if (!(y instanceof Var)) throw new Error("jacobian: the function must return a Var built from this package's ops");
      const shape = y.shape;
      if (shape.length > 1) throw new Error(`jacobian: the function must return a scalar or a vector, got ${fmtShape(shape)}`);
      const m = shape.length === 0 ? 1 : shape[0];
      const n = leaf.data.length;
      checkJacobianSize(m, n);
      if (y._tape !== t) return Array.from({ length: m }, () => new Array(n).fill(0));
      const reverseRow = (i) => {
        const seed = new Float64Array(m);
        seed[i] = 1;
        sweep(t, y._id, seed);
        const row = nodeAdjoint(t, leaf._id, leaf.shape);
        return row ? plainArray(row, 0, n) : new Array(n).fill(0);
      };
      if (n <= m && t.externals === null) {
        let columns;
        try {
          columns = forwardColumns(t, y, leaf, m);
        } catch (e) {
          throw prefixed('jacobian', e);
        }
        // An entry that is not finite may be forward mode's alone (0 times an
        // infinite partial): each is taken from its row's reverse sweep.
        for (let i = 0; i < m; i++) {
          if (!columns[i].every(Number.isFinite)) columns[i] = finiteFirst(columns[i], reverseRow(i));
        }
        return columns;
      }
      return Array.from({ length: m }, (_, i) => reverseRow(i));
    } finally {
      setCurrent(prev);
      retire(t);
    }
  };
}

/**
 * A Jacobian's entries by forward mode where they are finite, else by
 * reverse (`jacobian` says why) unless that is NaN, in `forward`, which is
 * returned.
 */
export function finiteFirst(forward, reverse) {
  for (let k = 0; k < forward.length; k++) {
    if (!Number.isFinite(forward[k]) && !Number.isNaN(reverse[k])) forward[k] = reverse[k];
  }
  return forward;
}

/**
 * The columns of an eager Jacobian by forward mode: one tangent per input
 * entry, or per color where columns no row shares go together
 * (src/core/pattern.rs), as a compiled Jacobian takes them.
 */
function forwardColumns(t, y, leaf, m) {
  const n = leaf.data.length;
  // [count, color of each column, the column of each color in each row], or null.
  const colors = N.tapeColors(t.h, y._id, leaf._id, n, m);
  const rows = Array.from({ length: m }, () => (colors === null ? new Array(n) : new Array(n).fill(0)));
  const count = colors === null ? n : colors[0];
  for (let k = 0; k < count; k++) {
    let u;
    if (colors === null) u = unitTangents([leaf.shape], k)[0];
    else {
      u = { data: new Float64Array(n), shape: leaf.shape };
      for (let j = 0; j < n; j++) if (colors[1 + j] === k) u.data[j] = 1;
    }
    // The leaf first: reading t.h records what is queued, the new leaf included.
    const v = leafVar(t, CONST, u);
    const id = N.tapeJvp(t.h, y._id, ids([leaf]), ids([v]));
    const column = tapeValue(t, id, y.shape).data;
    if (colors === null) {
      for (let i = 0; i < m; i++) rows[i][k] = column[i];
      continue;
    }
    const owners = 1 + n;
    for (let i = 0; i < m; i++) {
      const j = colors[owners + i * count + k];
      if (j !== 0xffffffff) rows[i][j] = column[i];
    }
  }
  return rows;
}

/**
 * The Jacobian of an objective no plan holds (a hand-built node), in
 * valueAndGrad's argument forms: one reverse sweep per output entry, which
 * hand-built closures take part in.
 */
export function eagerJacobian(f) {
  return (x, inputs) => {
    const r = record(f, x, inputs, 'jacobian', CONST);
    try {
      const y = r.root;
      const m = sizeOf(y.shape);
      const P = r.P.vars;
      const q = P.reduce((n, p) => n + sizeOf(p.shape), 0);
      checkJacobianSize(m, q);
      const rows = [];
      for (let i = 0; i < m; i++) {
        const seed = new Float64Array(m);
        seed[i] = 1;
        sweep(r.t, y._id, seed);
        const row = new Float64Array(q);
        adjointsInto(r.t, P, row, 0);
        rows.push(plainArray(row, 0, q));
      }
      return rows;
    } finally {
      retire(r.t);
    }
  };
}
