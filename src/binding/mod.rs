//! The napi layer: JavaScript values in, `api` calls, JavaScript values out.
//! Functions take numbers and typed arrays where they can (the cheapest
//! things to pass; the hottest calls take none, ARCHITECTURE.md), plans as
//! externals owned by the JS garbage collector. Every function catches
//! panics, so none reaches Node.

use crate::api;
use crate::core::error::Error as CoreError;
use crate::core::plan::Plan;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::cell::RefCell;
use std::rc::Rc;

mod many;
mod queue;

fn js_err(e: CoreError) -> Error {
    Error::new(Status::GenericFailure, e.0)
}

trait IntoJs<T> {
    fn js(self) -> Result<T>;
}

impl<T> IntoJs<T> for std::result::Result<T, CoreError> {
    fn js(self) -> Result<T> {
        self.map_err(js_err)
    }
}

#[napi]
pub fn op_codes() -> Vec<&'static str> {
    api::coded_ops()
}

/// Set the cap on one large kernel's threads (0: the machine's); the cap
/// now in effect (`core/linalg/threads.rs`).
#[napi(catch_unwind)]
pub fn set_threads(n: u32) -> u32 {
    crate::core::linalg::threads::set_threads(n as usize) as u32
}

/// The cap on one large kernel's threads now in effect.
#[napi(catch_unwind)]
pub fn threads() -> u32 {
    crate::core::linalg::threads::threads() as u32
}

#[napi(catch_unwind)]
pub fn tape_new() -> u32 {
    api::tape_new()
}

#[napi(catch_unwind)]
pub fn tape_free(id: u32) {
    api::tape_free(id)
}

#[napi(catch_unwind)]
pub fn tape_leaf(t: u32, kind: u32, data: &[f64], rank: u32, d0: f64, d1: f64) -> Result<u32> {
    api::tape_leaf(t, kind, data, rank, d0, d1).js()
}

#[napi(catch_unwind)]
pub fn tape_number(t: u32, kind: u32, x: f64) -> Result<u32> {
    api::tape_number(t, kind, x).js()
}

#[napi(catch_unwind)]
pub fn tape_op1(t: u32, code: u32, a: u32) -> Result<u32> {
    api::tape_op1(t, code, a).js()
}

#[napi(catch_unwind)]
pub fn tape_op2(t: u32, code: u32, a: u32, b: u32) -> Result<u32> {
    api::tape_op2(t, code, a, b).js()
}

#[napi(catch_unwind)]
pub fn tape_op2_number(t: u32, code: u32, a: u32, x: f64, number_left: bool) -> Result<u32> {
    api::tape_op2_number(t, code, a, x, number_left).js()
}

#[napi(catch_unwind)]
pub fn tape_reset(t: u32) -> Result<()> {
    api::tape_reset(t).js()
}

#[napi(catch_unwind)]
pub fn tape_pow(t: u32, a: u32, k: f64) -> Result<u32> {
    api::tape_pow(t, a, k).js()
}

#[napi(catch_unwind)]
pub fn tape_reshape(t: u32, a: u32, rank: u32, d0: f64, d1: f64) -> Result<u32> {
    api::tape_reshape(t, a, rank, d0, d1).js()
}

#[napi(catch_unwind)]
#[allow(clippy::too_many_arguments)]
pub fn tape_slice(t: u32, a: u32, start_len: i32, s0: f64, s1: f64, size_len: i32, z0: f64, z1: f64) -> Result<u32> {
    api::tape_slice(t, a, start_len, s0, s1, size_len, z0, z1).js()
}

#[napi(catch_unwind)]
pub fn tape_concat(t: u32, parts: &[u32], axis: u32) -> Result<u32> {
    api::tape_concat(t, parts, axis).js()
}

#[napi(catch_unwind)]
pub fn tape_triangular_solve(t: u32, a: u32, b: u32, lower: bool) -> Result<u32> {
    api::tape_triangular_solve(t, a, b, lower).js()
}

#[napi(catch_unwind)]
pub fn tape_external(t: u32, data: &[f64], rank: u32, d0: f64, d1: f64, parents: &[u32]) -> Result<u32> {
    api::tape_external(t, data, rank, d0, d1, parents).js()
}

#[napi(catch_unwind)]
pub fn tape_length(t: u32) -> Result<u32> {
    api::tape_length(t).js()
}

#[napi(catch_unwind)]
pub fn tape_size(t: u32) -> Result<f64> {
    api::tape_size(t).js()
}

/// Dimensions as numbers: a dimension is a `usize` and may not fit a u32.
#[napi(catch_unwind)]
pub fn tape_shape(t: u32, id: u32) -> Result<Vec<f64>> {
    Ok(api::tape_shape(t, id).js()?.dims().into_iter().map(|d| d as f64).collect())
}

/// Values and adjoints go into buffers JavaScript allocated: a buffer made
/// here would be freed only when the event loop turns, so a loop that never
/// yields would pile them up.
#[napi(catch_unwind)]
pub fn tape_value(t: u32, id: u32, mut out: Float64ArraySlice) -> Result<()> {
    // SAFETY: a fresh buffer of the caller's, not aliased by any other argument.
    api::tape_value(t, id, unsafe { out.as_mut() }).js()
}

#[napi(catch_unwind)]
pub fn tape_backward(t: u32, root: u32, seed: Option<&[f64]>) -> Result<i64> {
    api::tape_backward(t, root, seed).js()
}

#[napi(catch_unwind)]
pub fn tape_resume(t: u32) -> Result<i64> {
    api::tape_resume(t).js()
}

#[napi(catch_unwind)]
pub fn tape_adjoint(t: u32, id: u32, mut out: Float64ArraySlice) -> Result<bool> {
    // SAFETY: a fresh buffer of the caller's, not aliased by any other argument.
    api::tape_adjoint(t, id, unsafe { out.as_mut() }).js()
}

#[napi(catch_unwind)]
pub fn tape_accumulate(t: u32, id: u32, contribution: &[f64]) -> Result<()> {
    api::tape_accumulate(t, id, contribution).js()
}

#[napi(catch_unwind)]
pub fn tape_finish(t: u32, root: u32, swept: bool, leaves: &[u32], mut out: Float64ArraySlice) -> Result<f64> {
    // SAFETY: a fresh buffer of the caller's, not aliased by any other argument.
    api::tape_finish(t, root, swept, leaves, unsafe { out.as_mut() }).js()
}

/// A plan owned by JavaScript. `planRelease` can empty it before the
/// collector runs (Node defers napi finalizers to the event loop, so a loop
/// that makes and drops compiled functions would otherwise keep them all;
/// src/js/budget.js decides when), and the cell refuses a call made from
/// inside another on the same plan (from a getter the call ran).
pub struct PlanCell(Rc<PlanSlot>);

/// The plan and its bound buffers are boxed: a released plan's slot lives
/// on until its external's finalizer, which Node runs only when the event
/// loop turns, so a loop that makes and drops compiled functions keeps
/// every slot it released until then: a few words each, not a whole `Plan`.
pub struct PlanSlot {
    plan: RefCell<Option<Box<Plan>>>,
    bound: RefCell<Option<Box<Bound>>>,
}

impl std::ops::Deref for PlanCell {
    type Target = PlanSlot;
    fn deref(&self) -> &PlanSlot {
        &self.0
    }
}

/// A Replay's flat argument and gradient buffers (src/js/replay.js), bound
/// to its plan once so that a call converts no typed array: each held by a
/// reference, and read or written in place. They are the Replay's own,
/// two ranges of one ArrayBuffer never handed to the caller: only a patched
/// built-in can reach them, and JavaScript checks that they were not
/// detached before each call that runs on them (`Replay.select`).
struct Bound {
    flat: Float64Array,
    grad: Float64Array,
}

/// The plan of `p` for the length of `f`.
fn with_plan<R>(p: &PlanSlot, f: impl FnOnce(&mut Plan) -> Result<R>) -> Result<R> {
    let Ok(mut slot) = p.plan.try_borrow_mut() else {
        return Err(Error::new(Status::GenericFailure, "a compiled function cannot be called from inside its own call"));
    };
    match slot.as_mut() {
        Some(plan) => f(plan.as_mut()),
        None => Err(Error::new(Status::GenericFailure, "this plan was released")),
    }
}

/// A new external for `plan`, or `plan` put into `into`, a plan the budget
/// released (src/js/budget.js; `None` then). With released externals
/// reused, a loop that makes and drops compiled functions leaves the
/// collector no dead external per plan: V8 runs a dead external's weak
/// callback in its pause (the ~20 000 such a loop left between two full
/// collections took 50-130 ms), and Node frees what napi keeps for one only
/// when the event loop turns.
///
/// V8 is told of a new plan's bytes (napi's size hint adjusts external
/// memory, and reverses it when the external is collected), so that the
/// collector weighs a dropped plan by what it frees. A reused external
/// keeps its first plan's hint.
fn plan_external(plan: Plan, into: Option<&External<PlanCell>>) -> Result<Option<External<PlanCell>>> {
    if let Some(cell) = into {
        let Ok(mut slot) = cell.plan.try_borrow_mut() else {
            return Err(Error::new(Status::GenericFailure, "a plan cannot be remade during its own call"));
        };
        if slot.is_some() {
            return Err(Error::new(Status::GenericFailure, "a plan is remade only into a released one"));
        }
        *slot = Some(Box::new(plan));
        return Ok(None);
    }
    let bytes = plan.bytes();
    let slot = PlanSlot { plan: RefCell::new(Some(Box::new(plan))), bound: RefCell::new(None) };
    Ok(Some(External::new_with_size_hint(PlanCell(Rc::new(slot)), bytes)))
}

#[napi(catch_unwind)]
pub fn plan_build(t: u32, root: u32, params: &[u32], inputs: &[u32], into: Option<&External<PlanCell>>) -> Result<Option<External<PlanCell>>> {
    api::plan_build(t, root, params, inputs).js().and_then(|plan| plan_external(plan, into))
}

#[napi(catch_unwind)]
pub fn plan_from_json(text: String, into: Option<&External<PlanCell>>) -> Result<Option<External<PlanCell>>> {
    api::plan_from_json(&text).js().and_then(|plan| plan_external(plan, into))
}

/// A plan object as src/js/parts.js encodes it.
#[napi(catch_unwind)]
pub fn plan_from_parts(stream: &[f64], strings: String, into: Option<&External<PlanCell>>) -> Result<Option<External<PlanCell>>> {
    api::plan_from_parts(stream, &strings).js().and_then(|plan| plan_external(plan, into))
}

/// Bytes the plan holds (0 once released).
#[napi(catch_unwind)]
pub fn plan_bytes(p: &External<PlanCell>) -> f64 {
    p.plan.try_borrow().map_or(0.0, |slot| slot.as_ref().map_or(0.0, |plan| plan.bytes() as f64))
}

/// Tell V8 of native bytes it cannot see, held (positive) or freed
/// (negative): the plan budget's count (src/js/budget.js). V8 collects
/// sooner for them, and so finds the dropped compiled functions whose
/// plans it frees.
#[napi(catch_unwind)]
pub fn report_external(env: Env, delta: f64) -> Result<()> {
    env.adjust_external_memory(delta as i64).map(|_| ())
}

/// Free the plan now; later calls on it are an Error.
#[napi(catch_unwind)]
pub fn plan_release(p: &External<PlanCell>) -> Result<()> {
    let Ok(mut slot) = p.plan.try_borrow_mut() else {
        return Err(Error::new(Status::GenericFailure, "a plan cannot be released during its own call"));
    };
    *slot = None;
    p.bound.replace(None);
    Ok(())
}

/// Where a slot's data lives: at an offset of the flat buffer, or (napi
/// only) in a typed array of its own, numbered `-at - 1` in the layout.
enum Place {
    Flat(usize),
    View(usize),
}

fn place(at: i32) -> Place {
    if at >= 0 {
        Place::Flat(at as usize)
    } else {
        Place::View((-(at as i64) - 1) as usize)
    }
}

// The view path passes its buffers in lists, not as arguments: a list is
// `[flat, layout, view 0, view 1, ...]`. Fetching an element can run
// JavaScript (an accessor on the list), which could detach a buffer fetched
// before; so each buffer is fetched when it is needed and dropped before the
// next fetch, and no borrowed buffer lives across a call into JavaScript.

/// Element `j` of a buffer list, fetched now.
fn fetch<'a, T: FromNapiValue + ValidateNapiValue>(list: &Array<'a>, j: usize) -> Result<T> {
    let j = u32::try_from(j).map_err(|_| Error::new(Status::InvalidArg, "missing argument buffer"))?;
    list.get::<T>(j)?.ok_or_else(|| Error::new(Status::InvalidArg, "missing argument buffer"))
}

/// The layout (element 1), copied out before anything else is fetched.
fn layout_of(list: &Array) -> Result<Vec<i32>> {
    Ok(fetch::<Int32ArraySlice>(list, 1)?.to_vec())
}

/// Feed every parameter and input: slot `i` reads the flat buffer from
/// offset `layout[i]` when that is >= 0, else the whole of view
/// `-layout[i] - 1`, each fetched, read and dropped in turn.
fn feed(p: &mut Plan, data: &Array, layout: &[i32]) -> Result<()> {
    if layout.len() != p.slot_count() {
        return Err(Error::new(Status::InvalidArg, "layout does not match the plan"));
    }
    {
        let flat = fetch::<Float64ArraySlice>(data, 0)?;
        for (i, &at) in layout.iter().enumerate() {
            if let Place::Flat(at) = place(at) {
                let r = api::flat_range(flat.len(), at, p.slot_size(i), "argument").js()?;
                p.set(i, &flat[r]).js()?;
            }
        }
    }
    for (i, &at) in layout.iter().enumerate() {
        if let Place::View(j) = place(at) {
            p.set(i, &fetch::<Float64ArraySlice>(data, 2 + j)?).js()?;
        }
    }
    Ok(())
}

/// One replay: feed from `data`, forward and backward, and write parameter
/// `i`'s gradient into `grads` as its layout says. Both lists are
/// `[flat, layout, views...]`. Returns the root's value.
#[napi(catch_unwind)]
pub fn plan_run(p: &External<PlanCell>, data: Array, grads: Array) -> Result<f64> {
    with_plan(p, |p| {
        let layout = layout_of(&data)?;
        let grad_layout = layout_of(&grads)?;
        api::check_layout(p, &layout, &grad_layout).js()?;
        feed(p, &data, &layout)?;
        let value = api::plan_evaluate(p).js()?;
        {
            let mut flat = fetch::<Float64ArraySlice>(&grads, 0)?;
            // SAFETY: a fresh buffer of the caller's, distinct from every input.
            let out = unsafe { flat.as_mut() };
            for (i, &at) in grad_layout.iter().enumerate() {
                if let Place::Flat(at) = place(at) {
                    let r = api::flat_range(out.len(), at, p.slot_size(i), "gradient").js()?;
                    p.gradient(i, &mut out[r]).js()?;
                }
            }
        }
        for (i, &at) in grad_layout.iter().enumerate() {
            if let Place::View(j) = place(at) {
                let mut out = fetch::<Float64ArraySlice>(&grads, 2 + j)?;
                // SAFETY: as above, a fresh array of the caller's for this gradient alone.
                p.gradient(i, unsafe { out.as_mut() }).js()?;
            }
        }
        Ok(value)
    })
}

/// Bind the buffers `plan_run_selected` reads its arguments from and writes
/// its gradients to (two arrays that do not overlap).
#[napi(catch_unwind)]
pub fn plan_bind(p: &External<PlanCell>, flat: Float64Array, grad: Float64Array) -> Result<()> {
    let Ok(mut bound) = p.bound.try_borrow_mut() else {
        return Err(Error::new(Status::GenericFailure, "a plan cannot be bound during its own call"));
    };
    *bound = Some(Box::new(Bound { flat, grad }));
    Ok(())
}

thread_local! {
    /// The plan `plan_run_selected` runs, shared with its external so that
    /// it outlives a collected one; dropped by an environment cleanup hook
    /// while its bound buffers' references can still be deleted.
    static SELECTED: RefCell<Option<Rc<PlanSlot>>> = const { RefCell::new(None) };
}

/// Select the plan `plan_run_selected` runs: that call then takes no
/// argument, which saves napi's borrow bookkeeping (about 70 ns, a compiled
/// call's floor twice over) on every call of a plan called again and again.
#[napi(catch_unwind)]
pub fn plan_select(env: Env, p: &External<PlanCell>) -> Result<()> {
    let first = SELECTED.with(|s| s.borrow_mut().replace(p.0.clone()).is_none());
    if first {
        env.add_env_cleanup_hook((), |()| SELECTED.with(|s| drop(s.borrow_mut().take())))?;
    }
    Ok(())
}

/// `plan_run` of the selected plan when every argument and gradient is in
/// its bound flat buffers at the plan's own offsets.
#[napi(catch_unwind)]
pub fn plan_run_selected() -> Result<f64> {
    with_selected(|p, flat, grad| api::plan_run_flat(p, flat, grad).js())
}

/// `run` on the selected plan and its bound buffers, arguments and gradients.
fn with_selected(run: impl FnOnce(&mut Plan, &[f64], &mut [f64]) -> Result<f64>) -> Result<f64> {
    let Some(p) = SELECTED.with(|s| s.borrow().clone()) else {
        return Err(Error::new(Status::GenericFailure, "no plan is selected"));
    };
    let Ok(mut bound) = p.bound.try_borrow_mut() else {
        return Err(Error::new(Status::GenericFailure, "a compiled function cannot be called from inside its own call"));
    };
    let Some(Bound { flat, grad }) = bound.as_deref_mut() else {
        return Err(Error::new(Status::GenericFailure, "this plan has no bound buffers"));
    };
    let flat: &[f64] = flat;
    // SAFETY: two distinct arrays (JavaScript binds two), alive while bound.
    with_plan(&p, |p| run(p, flat, unsafe { grad.as_mut() }))
}

/// `plan_run_selected` forward only, for a plan whose root is a scalar
/// (a compiled function's `.value`): its value. The bound gradient buffer
/// is left as it was.
#[napi(catch_unwind)]
pub fn plan_value_selected() -> Result<f64> {
    with_selected(|p, flat, _| api::plan_value_flat(p, flat).js())
}

/// A forward replay alone, fed from `data` (`[flat, layout, views...]`);
/// the root's value is copied into `outs[0]`, fetched after the feeding.
#[napi(catch_unwind)]
pub fn plan_forward(p: &External<PlanCell>, data: Array, outs: Array) -> Result<()> {
    with_plan(p, |p| {
        let layout = layout_of(&data)?;
        feed(p, &data, &layout)?;
        let mut out = fetch::<Float64ArraySlice>(&outs, 0)?;
        // SAFETY: a fresh buffer of the caller's, not aliased by any input.
        api::plan_forward_into(p, unsafe { out.as_mut() }).js()
    })
}

#[napi(catch_unwind)]
pub fn plan_slots(p: &External<PlanCell>) -> Result<String> {
    with_plan(p, |p| api::plan_slots(p).js())
}

#[napi(catch_unwind)]
pub fn plan_root_shape(p: &External<PlanCell>) -> Result<Vec<f64>> {
    with_plan(p, |p| Ok(p.root_shape().dims().into_iter().map(|d| d as f64).collect()))
}

// ---------------------------------------------------------------- forward mode and second order

/// The tangent of `root` on the tape, each of `leaves` moving along the
/// node of `tangents` beside it.
#[napi(catch_unwind)]
pub fn tape_jvp(t: u32, root: u32, leaves: &[u32], tangents: &[u32]) -> Result<u32> {
    api::tape_jvp(t, root, leaves, tangents).js()
}

/// The colors of the forward Jacobian's columns of `root` over `leaf`
/// (`api::tape_colors`): count, colors, owners; null where none are worth it.
#[napi(catch_unwind)]
pub fn tape_colors(t: u32, root: u32, leaf: u32) -> Result<Option<Vec<u32>>> {
    api::tape_colors(t, root, leaf).js()
}

/// The plan of a plan's tangent (`Plan::tangent_plan`).
#[napi(catch_unwind)]
pub fn plan_tangent(p: &External<PlanCell>, into: Option<&External<PlanCell>>) -> Result<Option<External<PlanCell>>> {
    with_plan(p, |p| p.tangent_plan().js()).and_then(|plan| plan_external(plan, into))
}

/// The plan of wᵀ·(the root) (`Plan::row_plan`), whose gradients are a Jacobian's rows.
#[napi(catch_unwind)]
pub fn plan_rows(p: &External<PlanCell>, into: Option<&External<PlanCell>>) -> Result<Option<External<PlanCell>>> {
    with_plan(p, |p| p.row_plan().js()).and_then(|plan| plan_external(plan, into))
}

/// After `plan_run` of a tangent plan, the gradient of its primal root
/// into `out` (`Plan::primal_gradient`); false where the plan keeps no such
/// sweep.
#[napi(catch_unwind)]
pub fn plan_primal_gradient(p: &External<PlanCell>, mut out: Float64ArraySlice) -> Result<bool> {
    // SAFETY: a fresh buffer of the caller's.
    with_plan(p, |p| p.primal_gradient(unsafe { out.as_mut() }).js())
}

/// Output `i`'s value after the last replay, into `out`.
#[napi(catch_unwind)]
pub fn plan_output(p: &External<PlanCell>, i: u32, mut out: Float64ArraySlice) -> Result<()> {
    // SAFETY: a fresh buffer of the caller's.
    with_plan(p, |p| api::plan_output_into(p, i as usize, unsafe { out.as_mut() }).js())
}

