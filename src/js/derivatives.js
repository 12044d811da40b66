// Forward mode and second order on a compiled or rebuilt function: its
// .jvp, .hvp, .hessian and .jacobian, on plans derived from its plan (a
// TangentPlan, the row plan of a reverse Jacobian), with the same bits as
// the eager four of higher.js.

import { N } from './binding.js';
import { build, hold, onReplicas, revive } from './budget.js';
import { scalarRootError } from './drivers.js';
import { inForms, plainArray, readOnce, sizeOf, symmetric, toNested } from './forms.js';
import { checkHessianSize, checkJacobianSize, finiteFirst, prefixed, readTangent } from './higher.js';

/** A scalar output's value, read at once. */
const scalarOut = new Float64Array(1);

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

/**
 * A plan made from a compiled plan (`make`: N.planTangent or N.planRows),
 * under the budget like the plan itself and remade from it after a release.
 */
class DerivedPlan {
  constructor(base, make) {
    this.base = base;
    this.make = make;
    this.held = hold(build((into) => make(base.native(), into)), this);
  }

  native() {
    revive(this.held, (into) => this.make(this.base.native(), into));
    return this.held.plan;
  }

  /** `call(pool)` on the plan's replicas for batches (src/batch.rs), made at the first and freed with the plan. */
  replicas(call) {
    return onReplicas(this.held, this.native(), call);
  }

  /**
   * The gradients at the points (x, eⱼ), one per unit direction eⱼ of the
   * parameter values past x (src/batch.rs, `units`): on every core,
   * in lanes of eight points where the plan's ops have lane kernels
   * (src/core/plan/lanes.rs). Each point's first `rows.length / count`
   * gradient values go to `rows`. With `primal` (1 + x's length), a
   * Hessian's: the value and gradient at x too, where a replica's sweep
   * from its primal root gives them (Plan::primal_gradient); whether it did.
   */
  units(x, ins, label, rows, primal) {
    return this.replicas((pool) => N.planUnits(pool, x, ins, label, rows, primal));
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
  return !base.map || inTracedOrder(base, x) ? traced : base.inCallerOrder(x, (j, k) => traced[k]);
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
    const grads = tp.gradients();
    const h = tp.native();
    try {
      N.planRun(h, [flat, tp.layout], [grads, tp.gradLayout]);
    } catch (e) {
      // A failure on values (a matrix not positive definite), with the message a compiled call gives.
      base.run(x, inputs, 'hvp');
      throw prefixed('hvp', e);
    }
    const hvp = outForms(base, x, grads, 0);
    // The value and gradient a compiled call gives, bit for bit (`gradientOf` says why):
    // from the tangent plan's own sweep from its primal root where it keeps one.
    const w = tp.width;
    if (!N.planPrimalGradient(h, grads.subarray(w))) {
      const { value, gradient } = base.run(x, inputs, 'hvp');
      return { value, gradient, hvp };
    }
    N.planOutput(h, 0, scalarOut);
    return { value: scalarOut[0], gradient: outForms(base, x, grads, w), hvp };
  };
  c.hessian = (x, inputs) => {
    x = readOnce(x);
    inputs = readOnce(inputs);
    const base = resolve(x, inputs, 'hessian');
    if (base === null) return eager.hessian(x, inputs);
    if (base.rootShape.length !== 0) throw scalarRootError('hessian', base.rootShape);
    const q = base.width();
    checkHessianSize(q, 'hessian');
    if (q === 0) {
      const { value, gradient } = base.run(x, inputs, 'hessian');
      return { value, gradient, hessian: [] };
    }
    const point = new Float64Array(q);
    base.packPoint(x, point, 0);
    const rows = base.reused('hessian', q * q);
    const primal = base.reused('hessian at x', 1 + q);
    let atX;
    try {
      atX = tangentOf(base).units(point, base.packInputs(inputs), 'hessian', rows, primal);
    } catch (e) {
      // A failure on values (a matrix not positive definite), with the message a compiled call gives.
      base.run(x, inputs, 'hessian');
      throw e;
    }
    const hessian = symmetric(rows, 0, q, callerOrder(base, x));
    // The value and gradient a compiled call gives, bit for bit (`gradientOf` says why):
    // from a replica's sweep from its primal root where it keeps one.
    if (!atX) {
      const { value, gradient } = base.run(x, inputs, 'hessian');
      return { value, gradient, hessian };
    }
    return { value: primal[0], gradient: outForms(base, x, primal, 1), hessian };
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
      // output), since each runs forward only; an entry that is not finite is taken from the
      // reverse rows (`api::plan_columns` says why), as the eager jacobian does.
      // (The point is read first: a getter of its values may make plans, and the budget release this one's replicas.)
      const tp = q <= m ? tangentOf(base) : null;
      const at = tp === null ? null : tp.point(x, inputs);
      const finite = tp !== null && tp.replicas((pool) => N.planColumns(pool, at, out));
      if (!finite) {
        // The point as the forward pass read it: reading the arguments again could run a
        // getter that calls this function again, which writes `out`, the buffer it reuses.
        let point = at?.subarray(0, q);
        let ins = at?.subarray(q);
        if (at === null) {
          point = new Float64Array(q);
          base.packPoint(x, point, 0);
          ins = base.packInputs(inputs);
        }
        const rows = tp === null ? out : new Float64Array(m * q);
        rowsOf(base).units(point, ins, 'jacobian', rows);
        if (rows !== out) finiteFirst(out, rows);
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
