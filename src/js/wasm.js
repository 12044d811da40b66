// The WebAssembly binding: the functions the napi addon exports (binding.js),
// with the same arguments and results, over the C-ABI exports of src/wasm.rs.
// Arrays cross by being written straight into scratch buffers in wasm
// memory, so a call is one ordinary wasm call (no glue, no emulated napi).

import { coreReplaced } from './binding.js';
import { lengthOf } from './forms.js';
import wasmBase64 from './grad.wasm.js';
import { guardAll, unusable } from './traps.js';

/** The module's bytes, carried inline so bundlers and CDNs need no loader. */
function wasmBytes() {
  const text = atob(wasmBase64);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes;
}

const SLOTS = 4;
/** The most instances one binding makes (src/api/tapes.rs, EPOCHS): its first, and one after each trap. */
const MOST_INSTANCES = 128;
/** The most bytes a scratch buffer holds: wasm32's Vecs end short of 2^31. */
const MOST_SCRATCH_BYTES = 2 ** 31 - 8;
/** The elementary functions the core takes from its host (src/core/math.rs). */
const MATH = {
  js_log: Math.log,
  js_log1p: Math.log1p,
  js_sin: Math.sin,
  js_cos: Math.cos,
  js_pow: Math.pow,
};
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Instantiate the core and return its binding. Synchronously, so that no
 * entry needs top-level await (Chromium compiles this module synchronously
 * on the main thread too). `math` is for tests: host functions that trap.
 */
export function loadWasm(bytes = wasmBytes(), math = MATH) {
  const module = new WebAssembly.Module(bytes);
  let X; // the instance's exports
  let memory;
  let f64, i32, u32, u8; // views of memory, renewed when it grows
  const cap = new Float64Array(SLOTS); // bytes each scratch buffer holds
  const at = new Float64Array(SLOTS); // and where it is

  /** Which instance this is (0 for the first): plan handles and tape ids carry it. */
  let generation = -1;
  function start() {
    X = new WebAssembly.Instance(module, { math }).exports;
    memory = X.memory;
    f64 = i32 = u32 = u8 = undefined; // no view keeps an old instance's memory
    X.init(++generation);
    cap.fill(0);
    for (let s = 0; s < SLOTS; s++) reserve(s, 256);
  }

  /** Views of memory, renewed after it grew (growing detaches the old buffer). */
  function heap() {
    if (f64 === undefined || f64.byteLength === 0) {
      const b = memory.buffer;
      f64 = new Float64Array(b);
      i32 = new Int32Array(b);
      u32 = new Uint32Array(b);
      u8 = new Uint8Array(b);
    }
  }

  /**
   * Grow scratch buffer `s` to `bytes`; may grow memory, so views are taken
   * after. What memory cannot hold is an Error before anything is written:
   * no buffer reaches 2^31 bytes in wasm32.
   */
  function reserve(s, bytes) {
    if (bytes > cap[s]) {
      let want = Math.min(Math.max(bytes, 2 * cap[s]), MOST_SCRATCH_BYTES);
      let p = bytes <= want ? X.scratch(s, want) : 0;
      if (p === 0 && bytes < want) p = X.scratch(s, (want = bytes));
      if (p === 0) throw new Error(`out of memory: cannot hold ${Math.ceil(bytes / 8)} more values`);
      at[s] = p;
      cap[s] = want;
    }
    return at[s];
  }

  function text() {
    heap();
    const p = X.text_ptr();
    return decoder.decode(u8.subarray(p, p + X.text_len()));
  }

  function raise() {
    X.failed();
    throw new Error(text());
  }

  /**
   * A trap is a Rust panic (a bug): report it, and start a fresh instance,
   * since the trapped one may be left mid-update. Compiled functions then
   * rebuild their plans in it when next called; nothing keeps the old one.
   * After MOST_INSTANCES, or if no new instance can be made, every call
   * throws: past that, tape ids would repeat an earlier instance's.
   */
  function internal(e) {
    if (!(e instanceof WebAssembly.RuntimeError)) return e;
    const said = text();
    const why = said.startsWith('internal error') ? said : `internal error: ${e.message}`;
    selected = null;
    let after = 'reset';
    try {
      if (generation + 1 === MOST_INSTANCES) throw new Error(`it trapped ${MOST_INSTANCES} times`);
      start();
    } catch (failed) {
      X = unusable(`@tangent.to/grad (WebAssembly): the core cannot be used again (${failed.message}); reload to start anew`);
      after = 'lost';
    }
    coreReplaced();
    return new Error(`@tangent.to/grad (WebAssembly): ${why}; its tapes and plans were ${after}`);
  }

  const put64 = (s, data) => {
    const n = lengthOf(data);
    const p = reserve(s, n * 8);
    heap();
    copy(f64, p >>> 3, data, n);
    return n;
  };
  const putU32 = (s, ids) => {
    const n = ids.length;
    const p = reserve(s, n * 4) >>> 2;
    heap();
    if (n > 16) u32.set(ids, p);
    else for (let i = 0; i < n; i++) u32[p + i] = ids[i];
    return n;
  };
  const putText = (s, str) => {
    let p = reserve(s, str.length);
    heap();
    let r = encoder.encodeInto(str, u8.subarray(p, p + str.length));
    if (r.read < str.length) {
      p = reserve(s, 3 * str.length);
      heap();
      r = encoder.encodeInto(str, u8.subarray(p, p + 3 * str.length));
    }
    return r.written;
  };
  const get64 = (s, out, from = 0) => {
    heap();
    const p = (at[s] >>> 3) + from;
    const n = out.length;
    if (n > 16) out.set(f64.subarray(p, p + n));
    else for (let i = 0; i < n; i++) out[i] = f64[p + i];
  };
  const dims = (rank) => {
    if (rank < 0) raise();
    heap();
    const p = at[0] >>> 3;
    return rank === 0 ? [] : rank === 1 ? [f64[p]] : [f64[p], f64[p + 1]];
  };
  const id = (r) => (r < 0 ? raise() : r);

  // A plan's id is its instance's: one from before a reset is never freed
  // in, or run on, the instance after it. The registry holds the pair as
  // one number, not the instance.
  const plans = new FinalizationRegistry((held) => {
    if (Math.floor(held / 2 ** 32) === generation) X.plan_free(held % 2 ** 32);
  });
  const plan = (p) => {
    if (p < 0) raise();
    const handle = { p, generation };
    plans.register(handle, generation * 2 ** 32 + p, handle);
    return handle;
  };
  /** Whether a handle's plan is held by this instance: not released, not from before a reset. */
  const current = (h) => h.p >= 0 && h.generation === generation;
  /** The plan id of a handle; a released one is an Error, as in the napi binding. */
  const live = (h) => {
    if (!current(h)) throw new Error('this plan was released');
    return h.p;
  };

  /** Values of `flat` and its views together. */
  function total(flat, views) {
    let n = flat.length;
    for (let j = 0; j < views.length; j++) n += lengthOf(views[j]);
    return n;
  }
  /** Copy `n` values of `src` to `dst` from `at`: a loop for the few, `set` for the many. */
  function copy(dst, at, src, n) {
    if (n > 16) dst.set(n === lengthOf(src) ? src : src.subarray(0, n), at);
    else for (let i = 0; i < n; i++) dst[at + i] = src[i];
  }
  /** Where each view starts when the views follow `head` values, one after another. */
  function starts(head, views) {
    const out = new Array(views.length);
    for (let j = 0, off = head; j < views.length; off += lengthOf(views[j]), j++) out[j] = off;
    return out;
  }
  /** Arguments to scratch 0 and their offsets to scratch 1, as plan_run reads them. */
  function writeFeed(flat, views, layout) {
    const p0 = at[0] >>> 3;
    const p1 = at[1] >>> 2;
    const from = starts(flat.length, views);
    copy(f64, p0, flat, flat.length);
    for (let j = 0; j < views.length; j++) f64.set(views[j], p0 + from[j]);
    for (let i = 0; i < layout.length; i++) {
      const a = layout[i];
      i32[p1 + i] = a >= 0 ? a : from[-a - 1];
    }
  }

  /** A replay with every argument in `flat` and every gradient to `grad`, at the plan's offsets. */
  function runFlat(h, flat, grad) {
    reserve(2, grad.length * 8);
    const value = X.plan_run_flat(live(h), put64(0, flat), grad.length);
    if (value !== value && X.failed()) raise();
    get64(2, grad);
    return value;
  }

  start();

  /** The queue's arrays (src/js/queue.js), bound once. */
  let queue = null;
  /** The plan planRunSelected and planValueSelected run. */
  let selected = null;
  function selectedBound() {
    if (selected === null) throw new Error('no plan is selected');
    if (selected.flat === undefined) throw new Error('this plan has no bound buffers');
    return selected;
  }
  /** The queue's first `ints` entries to scratch 0 and first `m` numbers to scratch 1, as tape_apply reads them. */
  function putQueue(ints, m) {
    const p0 = reserve(0, 4 * ints) >>> 2;
    const p1 = reserve(1, 8 * m) >>> 3;
    heap();
    copy(i32, p0, queue.ops, ints);
    copy(f64, p1, queue.nums, m);
  }

  const binding = {
    /** Every array is copied into the module's memory: none is read in place (src/js/replay.js). */
    copiesArguments: true,
    opCodes() {
      X.op_codes();
      return text().split(',');
    },
    tapeNew: () => X.tape_new(),
    tapeFree: (t) => X.tape_free(t),
    tapeLeaf: (t, kind, data, rank, d0, d1) => id(X.tape_leaf(t, kind, put64(0, data), rank, d0, d1)),
    tapeNumber: (t, kind, x) => id(X.tape_number(t, kind, x)),
    tapeLength: (t) => id(X.tape_length(t)),
    queueBind(ops, nums, args) {
      queue = { ops, nums, args };
    },
    tapeFinishQueued() {
      const [t, n, m, root, swept, leaves, total] = queue.args;
      // The gradients come back over the numbers, as many as the larger count.
      putQueue(3 * n + leaves, Math.max(m, total));
      const value = X.tape_finish_queued(t, n, m, root, swept, leaves, total);
      if (value !== value && X.failed()) raise();
      heap();
      const p1 = at[1] >>> 3;
      for (let i = 0; i < total; i++) queue.nums[i] = f64[p1 + i];
      return value;
    },
    tapeApply() {
      const [t, n, m] = queue.args;
      putQueue(3 * n, m);
      return id(X.tape_apply(t, n, m));
    },
    tapeOp1: (t, code, a) => id(X.tape_op1(t, code, a)),
    tapeOp2: (t, code, a, b) => id(X.tape_op2(t, code, a, b)),
    tapeOp2Number: (t, code, a, x, left) => id(X.tape_op2_number(t, code, a, x, left)),
    tapeReset: (t) => id(X.tape_reset(t)),
    tapePow: (t, a, k) => id(X.tape_pow(t, a, k)),
    tapeReshape: (t, a, rank, d0, d1) => id(X.tape_reshape(t, a, rank, d0, d1)),
    tapeSlice: (t, a, n, s0, s1, m, z0, z1) => id(X.tape_slice(t, a, n, s0, s1, m, z0, z1)),
    tapeConcat: (t, parts, axis) => id(X.tape_concat(t, putU32(0, parts), axis)),
    tapeTriangularSolve: (t, a, b, lower) => id(X.tape_triangular_solve(t, a, b, lower)),
    tapeExternal(t, data, rank, d0, d1, parents) {
      const n = put64(0, data);
      return id(X.tape_external(t, n, rank, d0, d1, putU32(1, parents)));
    },
    tapeSize(t) {
      const n = X.tape_size(t);
      return n !== n ? raise() : n;
    },
    tapeShape: (t, node) => dims(X.tape_shape(t, node)),
    tapeValue(t, node, out) {
      reserve(0, out.length * 8);
      id(X.tape_value(t, node, out.length));
      get64(0, out);
    },
    tapeBackward(t, root, seed) {
      const seeded = seed != null;
      const r = X.tape_backward(t, root, seeded, seeded ? put64(0, seed) : 0);
      return r !== r ? raise() : r;
    },
    tapeResume(t) {
      const r = X.tape_resume(t);
      return r !== r ? raise() : r;
    },
    tapeAdjoint(t, node, out) {
      reserve(0, out.length * 8);
      const has = id(X.tape_adjoint(t, node, out.length));
      if (has) get64(0, out);
      return has === 1;
    },
    tapeAccumulate: (t, node, c) => id(X.tape_accumulate(t, node, put64(0, c))),
    tapeFinish(t, root, swept, leaves, out) {
      const n = putU32(1, leaves);
      reserve(2, out.length * 8);
      const value = X.tape_finish(t, root, swept, n, out.length);
      if (value !== value && X.failed()) raise();
      get64(2, out);
      return value;
    },
    planBuild(t, root, params, inputs) {
      const n = putU32(0, params);
      return plan(X.plan_build(t, root, n, putU32(1, inputs)));
    },
    planFromJson: (json) => plan(X.plan_from_json(putText(0, json))),
    planFromParts(stream, strings) {
      const n = put64(1, stream);
      return plan(X.plan_from_parts(n, putText(0, strings)));
    },
    // The view path's buffers come in lists, [flat, layout, views...], as
    // the napi binding takes them.
    planRun(h, data, grads) {
      // Copies, taken before the views are fetched (an accessor could detach them).
      const flat = data[0].slice();
      const layout = data[1].slice();
      const views = data.slice(2);
      const [gradFlat, gradLayout] = grads;
      const gradViews = grads.slice(2);
      const n = total(flat, views);
      const slots = layout.length;
      const gradTotal = total(gradFlat, gradViews);
      const params = gradLayout.length;
      reserve(0, n * 8);
      reserve(1, slots * 4);
      reserve(2, gradTotal * 8);
      reserve(3, params * 4);
      heap();
      writeFeed(flat, views, layout);
      const p3 = at[3] >>> 2;
      const to = starts(gradFlat.length, gradViews);
      for (let i = 0; i < params; i++) {
        const a = gradLayout[i];
        i32[p3 + i] = a >= 0 ? a : to[-a - 1];
      }
      const value = X.plan_run(live(h), n, slots, gradTotal, params);
      if (value !== value && X.failed()) raise();
      heap();
      const p2 = at[2] >>> 3;
      for (let i = 0, m = gradFlat.length; i < m; i++) gradFlat[i] = f64[p2 + i];
      for (let j = 0; j < gradViews.length; j++) {
        const g = gradViews[j];
        g.set(f64.subarray(p2 + to[j], p2 + to[j] + lengthOf(g)));
      }
      return value;
    },
    planBind(h, flat, grad) {
      live(h);
      h.flat = flat;
      h.grad = grad;
    },
    planSelect(h) {
      selected = h;
    },
    planRunSelected() {
      const h = selectedBound();
      return runFlat(h, h.flat, h.grad);
    },
    planValueSelected() {
      const h = selectedBound();
      const value = X.plan_value_flat(live(h), put64(0, h.flat));
      if (value !== value && X.failed()) raise();
      return value;
    },
    planForward(h, data, outs) {
      const flat = data[0].slice();
      const layout = data[1].slice();
      const views = data.slice(2);
      const out = outs[0];
      const n = total(flat, views);
      const slots = layout.length;
      reserve(0, n * 8);
      reserve(1, slots * 4);
      reserve(2, out.length * 8);
      heap();
      writeFeed(flat, views, layout);
      id(X.plan_forward(live(h), n, slots, out.length));
      get64(2, out);
    },
    planRootShape: (h) => dims(X.plan_root_shape(live(h))),
    planSlots(h) {
      id(X.plan_slots(live(h)));
      return text();
    },
    planBytes: (h) => (current(h) ? X.plan_bytes(h.p) : 0),
    planRelease(h) {
      if (h.p < 0) return;
      plans.unregister(h);
      if (current(h)) X.plan_free(h.p);
      h.p = -1;
    },

    // Forward mode and second order (src/js/higher.js).
    tapeJvp(t, root, leaves, tangents) {
      const n = putU32(0, leaves);
      putU32(1, tangents);
      return id(X.tape_jvp(t, root, n));
    },
    // The count, each column's color, each row's owner per color: the first
    // call reserves room for eight colors, a second (rarely) what they need.
    tapeColors(t, root, leaf, columns, rows) {
      let room = 1 + columns + 8 * rows;
      reserve(2, room * 4);
      let n = id(X.tape_colors(t, root, leaf, room));
      if (n > room) {
        room = n;
        reserve(2, room * 4);
        n = id(X.tape_colors(t, root, leaf, room));
      }
      if (n === 0) return null;
      heap();
      const p = at[2] >>> 2;
      return u32.slice(p, p + n);
    },
    planTangent: (h) => plan(X.plan_tangent(live(h))),
    planRows: (h) => plan(X.plan_rows(live(h))),
    planPrimalGradient(h, out) {
      reserve(2, out.length * 8);
      const kept = id(X.plan_primal_gradient(live(h), out.length)) === 1;
      if (kept) get64(2, out);
      return kept;
    },
    planOutput(h, i, out) {
      reserve(2, out.length * 8);
      id(X.plan_output(live(h), i, out.length));
      get64(2, out);
    },
    // The plan is its own pool here (`planPool`), and the forward Jacobian runs one column at a time.
    planColumns(h, flat, out) {
      const n = put64(0, flat);
      reserve(2, out.length * 8);
      const finite = id(X.plan_columns(live(h), n, out.length)) === 1;
      get64(2, out);
      return finite;
    },

    planUnits(h, x, inputs, label, rows, primal) {
      const n = put64(0, x);
      const m = put64(1, inputs);
      const l = putText(3, label);
      const extra = primal === undefined ? 0 : primal.length;
      reserve(2, (rows.length + extra) * 8);
      const atX = id(X.plan_units(live(h), n, m, l, rows.length, extra)) === 1;
      get64(2, rows);
      if (atX) get64(2, primal, rows.length);
      return atX;
    },
    // Many points per call, on this one thread: the plan is its own pool.
    planPool: (h) => h, // a new "pool" whatever `into` is: budget.js keeps no spares
    poolBytes: () => 0,
    // The module's memory is an ArrayBuffer V8 already counts.
    reportExternal() {},
    poolRelease() {},
    planBatch(h, params, inputs, k, threads, label, values, grads) {
      batchInto(h, params, inputs, k, label);
      heap();
      const p2 = at[2] >>> 3;
      values.set(f64.subarray(p2, p2 + k));
      grads.set(f64.subarray(p2 + k, p2 + k + lengthOf(params)));
    },
    /** Computed at the call, synchronously: the Promise is settled when returned. */
    planBatchAsync(h, params, inputs, k, threads, label) {
      try {
        batchInto(h, params, inputs, k, label);
        heap();
        const p2 = at[2] >>> 3;
        return Promise.resolve(f64.slice(p2, p2 + k + lengthOf(params)));
      } catch (e) {
        return Promise.reject(internal(e));
      }
    },
  };

  /** The most values (parameters and results) one batch may hold here: wasm32 memory ends at 4 GiB. */
  const WASM_BATCH_VALUES = 2 ** 26;

  /**
   * Refuse a batch of k points of `width` values past what one holds here:
   * asked before its points are read and packed (replay.js), and again here.
   */
  binding.batchRoom = (k, width, label) => {
    if (2 * k * width + k > WASM_BATCH_VALUES) {
      const where = label ? `${label}: ` : '';
      throw new Error(`${where}${k} points of ${width} values are more than a batch holds in the WebAssembly build (${WASM_BATCH_VALUES} values); split it`);
    }
  };

  /** Run a batch; its k values, then its gradients, are left in scratch 2. */
  function batchInto(h, params, inputs, k, label) {
    binding.batchRoom(k, lengthOf(params) / k, label);
    const total = k + lengthOf(params);
    const n = put64(0, params);
    const m = put64(1, inputs);
    const l = putText(3, label);
    reserve(2, total * 8);
    id(X.plan_batch(live(h), k, n, m, l));
  }

  // Every call turns a trap into an Error and recovers; a plain throw passes through.
  return guardAll(binding, internal);
}
