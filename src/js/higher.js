// Forward mode and second order: jvp, hvp and hessian, eager and on a
// compiled plan, and the compiled jacobian. The core records the tangent of
// an objective as ops (src/core/tangent.rs, each op's rule in src/core/rules);
// a Hessian-vector product is the gradient of the scalar tangent ∇f·v, swept
// back like any objective. Eager, compiled and rebuilt results agree bit for
// bit: the three record the same ops in the same order.

import { N } from './binding.js';
import { build, hold, revive, touch } from './budget.js';
import { record, scalarRootError } from './drivers.js';
import { MAX_VALUES, fmtShape, inForms, isMapForm, plainArray, readOnce, setOwn, sizeOf, symmetric, toNested } from './forms.js';
import { CONST, LEAF, Var, asTensor, current, evaluationTape, leafVar, nodeAdjoint, retire, setCurrent, sweep, variable } from './tape.js';

const ids = (vars) => Uint32Array.from(vars, (v) => v._id);

/** A failure of the core, prefixed with the function the user called. */
function prefixed(where, e) {
  return e.message.startsWith(`${where}:`) ? e : new Error(`${where}: ${e.message}`);
}

/**
 * The tangent `v`, one tensor per parameter in slot order, each shaped like
 * its parameter. `keys` is null for a single parameter.
 */
function readTangent(v, keys, shapes, where) {
  v = readOnce(v);
  const check = (t, i, name, of) => {
    const s = shapes[i];
    if (t.shape.length !== s.length || t.shape[0] !== s[0] || t.shape[1] !== s[1]) {
      throw new Error(`${where}: ${name} is shaped ${fmtShape(t.shape)}, unlike ${of} (${fmtShape(s)})`);
    }
    return t;
  };
  if (keys === null) return [check(asTensor(v, 'tangent'), 0, 'the tangent', 'the parameter')];
  if (!isMapForm(v)) throw new Error(`${where}: the tangent must be a {name: value} map with the parameters' keys`);
  for (const k of Object.keys(v)) {
    if (!keys.includes(k)) throw new Error(`${where}: the tangent has key "${k}", which is not a parameter`);
  }
  return keys.map((k, i) => {
    if (!Object.prototype.hasOwnProperty.call(v, k)) throw new Error(`${where}: the tangent has no key "${k}"; it needs one per parameter`);
    return check(asTensor(v[k], `tangent "${k}"`), i, `tangent "${k}"`, `parameter "${k}"`);
  });
}

/** Refuse an m×q Jacobian past the cap on values before anything is allocated for it. */
function checkJacobianSize(m, q) {
  if (m * q > MAX_VALUES) {
    throw new Error(`jacobian: a ${m}×${q} Jacobian holds ${m * q} entries, more than the ${MAX_VALUES} a value may hold`);
  }
}

/** Refuse a Hessian past the cap on values before anything is allocated for it. */
function checkHessianSize(q, where) {
  if (q * q > MAX_VALUES) {
    throw new Error(`${where}: ${q} parameters make a ${q}×${q} Hessian of ${q * q} entries, more than the ${MAX_VALUES} a value may hold`);
  }
}

/** Where each entry of x flattened in the caller's key order sits in the plan's flat order; null when they agree. */
function callerOrder(base, x) {
  if (!base.map || inTracedOrder(base, x)) return null;
  const order = [];
  for (const k of Object.keys(x)) {
    const j = base.slot.get(k);
    for (let e = 0, n = sizeOf(base.shapes[j]); e < n; e++) order.push(base.offsets[j] + e);
  }
  return order;
}

/** Whether the caller's map gives its keys in the order they were traced in. */
function inTracedOrder(base, x) {
  const keys = Object.keys(x);
  return keys.length === base.keys.length && keys.every((k, i) => base.keys[i] === k);
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
 * SPEC §6's jacobian: by forward mode when the input has fewer entries than
 * the output (one tangent per input entry), else by reverse (one sweep per
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
      if (n <= m && t.externals === null) {
        let columns;
        try {
          columns = forwardColumns(t, y, leaf, m);
        } catch (e) {
          throw prefixed('jacobian', e);
        }
        // An entry that is not finite may be forward mode's alone (0 times an
        // infinite partial), so the rows are taken by reverse sweeps then.
        if (columns.every((row) => row.every(Number.isFinite))) return columns;
      }
      const rows = [];
      for (let i = 0; i < m; i++) {
        const seed = new Float64Array(m);
        seed[i] = 1;
        sweep(t, y._id, seed);
        const row = nodeAdjoint(t, leaf._id, leaf.shape);
        rows.push(row ? plainArray(row, 0, n) : new Array(n).fill(0));
      }
      return rows;
    } finally {
      setCurrent(prev);
      retire(t);
    }
  };
}

/** The columns of an eager Jacobian by forward mode: one tangent per input entry. */
function forwardColumns(t, y, leaf, m) {
  const n = leaf.data.length;
  const rows = Array.from({ length: m }, () => new Array(n));
  for (let j = 0; j < n; j++) {
    const [u] = unitTangents([leaf.shape], j);
    // The leaf first: reading t.h records what is queued, the new leaf included.
    const v = leafVar(t, CONST, u);
    const id = N.tapeJvp(t.h, y._id, ids([leaf]), ids([v]));
    const column = tapeValue(t, id, y.shape).data;
    for (let i = 0; i < m; i++) rows[i][j] = column[i];
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
        let at = 0;
        for (const p of P) {
          const a = nodeAdjoint(r.t, p._id, p.shape);
          if (a !== null) row.set(a, at);
          at += sizeOf(p.shape);
        }
        rows.push(plainArray(row, 0, q));
      }
      return rows;
    } finally {
      retire(r.t);
    }
  };
}

// ---------------------------------------------------------------- compiled

/**
 * A plan made from a compiled plan (`make`: N.planTangent or N.planRows),
 * under the budget like the plan itself and remade from it after a release.
 */
class DerivedPlan {
  constructor(base, make) {
    this.base = base;
    this.make = make;
    this.held = hold(build((into) => make(base.native(), into)));
  }

  native() {
    revive(this.held, (into) => this.make(this.base.native(), into));
    return this.held.plan;
  }

  /** The plan's replicas for batches (src/batch.rs), made at the first and freed with the plan. */
  pool() {
    const h = this.held;
    if (h.pool === undefined) h.pool = N.planPool(this.native());
    else touch(h);
    return h.pool;
  }

  /**
   * The gradients at the points (x, eⱼ), one per unit direction eⱼ of the
   * parameter values past x (src/batch.rs, `units`): on every core,
   * in lanes of eight points where the plan's ops have lane kernels
   * (src/core/plan/lanes.rs). Each point's first `rows.length / count`
   * gradient values go to `rows`.
   */
  units(x, ins, label, rows) {
    N.planUnits(this.pool(), x, ins, label, rows);
  }
}

/**
 * A plan's tangent plan (Plan::tangent_plan): parameters, their tangents,
 * inputs.
 */
class TangentPlan extends DerivedPlan {
  constructor(base) {
    super(base, N.planTangent);
    const n = base.shapes.length;
    const width = base.width();
    this.width = width;
    this.size = 2 * width + (base.flat.length - width);
    this.layout = new Int32Array(2 * n + base.inputShapes.length);
    for (let i = 0; i < n; i++) {
      this.layout[i] = base.offsets[i];
      this.layout[n + i] = width + base.offsets[i];
    }
    for (let j = 0; j < base.inputShapes.length; j++) this.layout[2 * n + j] = width + base.offsets[n + j];
    this.gradLayout = this.layout.slice(0, 2 * n);
  }

  /**
   * `pack(buffer)` into n values kept as `this[key]` from call to call (a call reading them is
   * over before the next writes them); new ones while a getter of the arguments calls again.
   */
  packed(key, n, pack) {
    const filling = this.filling;
    const flat = filling ? new Float64Array(n) : (this[key] ??= new Float64Array(n));
    this.filling = true;
    try {
      pack(flat);
    } finally {
      this.filling = filling;
    }
    return flat;
  }

  /** [x, v, inputs], in the slots' order. */
  feed(x, v, inputs, where) {
    const { base, width: w } = this;
    return this.packed('flat', this.size, (flat) => {
      base.packInputs(inputs, flat, 2 * w);
      base.packPoint(x, flat, 0);
      const tangents = readTangent(v, base.map ? base.keys : null, base.shapes, where);
      for (let i = 0; i < tangents.length; i++) flat.set(tangents[i].data, w + base.offsets[i]);
    });
  }

  /** [x, inputs], in the slots' order: a forward Jacobian's point. */
  point(x, inputs) {
    return this.packed('args', this.size - this.width, (flat) => {
      this.base.packInputs(inputs, flat, this.width);
      this.base.packPoint(x, flat, 0);
    });
  }

  /** Room for the gradient of [x, v], reused like `feed`'s buffer (results are copied out of it). */
  gradients() {
    return this.packed('grads', 2 * this.width, () => {});
  }
}

function tangentOf(replay) {
  if (replay.tangent === undefined) replay.tangent = new TangentPlan(replay);
  return replay.tangent;
}

/** The plan of wᵀ·f (Plan::row_plan), whose gradients at w = eᵢ are a Jacobian's rows. */
function rowsOf(replay) {
  if (replay.rows === undefined) replay.rows = new DerivedPlan(replay, N.planRows);
  return replay.rows;
}

/** `inForms` of a plan's parameters, in the caller's key order, which may differ from the traced one. */
function outForms(base, x, flat, off) {
  const slots = base.map ? { keys: base.keys, values: base.keys.map((k) => x[k]) } : { keys: null, values: [x] };
  const traced = inForms(slots, base.shapes, flat, off);
  if (!base.map || inTracedOrder(base, x)) return traced;
  const out = {};
  for (const k of Object.keys(x)) setOwn(out, k, traced[k]);
  return out;
}

/**
 * Give the compiled (or rebuilt) function `c` its `.jvp`, `.hvp`,
 * `.hessian` and `.jacobian`. `resolve(x, inputs, where)` checks the
 * arguments against a plan and returns its Replay, or null to evaluate
 * eagerly with `eager` (an objective no plan holds).
 */
export function attachDerivatives(c, resolve, eager) {
  c.jvp = (x, v, inputs) => {
    x = readOnce(x);
    inputs = readOnce(inputs);
    const base = resolve(x, inputs, 'jvp');
    if (base === null) return eager.jvp(x, v, inputs);
    const tp = tangentOf(base);
    const flat = tp.feed(x, v, inputs, 'jvp');
    const shape = base.rootShape;
    const tangent = new Float64Array(sizeOf(shape));
    const value = new Float64Array(sizeOf(shape));
    const h = tp.native();
    N.planForward(h, [flat, tp.layout], [tangent]);
    N.planOutput(h, 0, value);
    return { value: toNested({ data: value, shape }), tangent: toNested({ data: tangent, shape }) };
  };
  c.hvp = (x, v, inputs) => {
    x = readOnce(x);
    inputs = readOnce(inputs);
    const base = resolve(x, inputs, 'hvp');
    if (base === null) return eager.hvp(x, v, inputs);
    const tp = tangentOf(base);
    // The tangent read first, as the eager hvp reads it: the same error first.
    const flat = tp.feed(x, v, inputs, 'hvp');
    if (base.rootShape.length !== 0) throw scalarRootError('hvp', base.rootShape);
    // The value and gradient a compiled call gives, bit for bit (`gradientOf` says why).
    const { value, gradient } = base.run(x, inputs, 'hvp');
    const grads = tp.gradients();
    N.planRun(tp.native(), [flat, tp.layout], [grads, tp.gradLayout]);
    return { value, gradient, hvp: outForms(base, x, grads, 0) };
  };
  c.hessian = (x, inputs) => {
    x = readOnce(x);
    inputs = readOnce(inputs);
    const base = resolve(x, inputs, 'hessian');
    if (base === null) return eager.hessian(x, inputs);
    if (base.rootShape.length !== 0) throw scalarRootError('hessian', base.rootShape);
    const q = base.width();
    checkHessianSize(q, 'hessian');
    // The value and gradient a compiled call gives, bit for bit; a failure
    // on values (a matrix not positive definite) with its message.
    const { value, gradient } = base.run(x, inputs, 'hessian');
    if (q === 0) return { value, gradient, hessian: [] };
    const point = new Float64Array(q);
    base.packPoint(x, point, 0);
    const rows = base.reused('hessian', q * q);
    tangentOf(base).units(point, base.packInputs(inputs), 'hessian', rows);
    return { value, gradient, hessian: symmetric(rows, 0, q, callerOrder(base, x)) };
  };
  c.jacobian = (x, inputs) => {
    x = readOnce(x);
    inputs = readOnce(inputs);
    const base = resolve(x, inputs, 'jacobian');
    if (base === null) return eager.jacobian(x, inputs);
    const m = sizeOf(base.rootShape);
    const q = base.width();
    checkJacobianSize(m, q);
    const out = base.reused('jacobian', m * q);
    try {
      // Forward mode where it takes no more passes (one per parameter value against one per
      // output), since each runs forward only; reverse rows where an entry is not finite
      // (`api::plan_jacobian` says why), as the eager jacobian does.
      const forward = q <= m && N.planColumns(tangentOf(base).pool(), tangentOf(base).point(x, inputs), out);
      if (!forward) {
        const point = new Float64Array(q);
        base.packPoint(x, point, 0);
        rowsOf(base).units(point, base.packInputs(inputs), 'jacobian', out);
      }
    } catch (e) {
      // A failure on values, with the message a single call gives.
      base.value(x, inputs);
      throw prefixed('jacobian', e);
    }
    const order = callerOrder(base, x);
    const rows = new Array(m);
    for (let i = 0; i < m; i++) {
      rows[i] = order === null ? plainArray(out, i * q, (i + 1) * q) : order.map((j) => out[i * q + j]);
    }
    return rows;
  };
}
