//! The napi layer: JavaScript values in, core calls, JavaScript values out.
//! Functions take and return only numbers and typed arrays (DESIGN.md: the
//! cheapest things to pass), the tape and plans as externals owned by the JS
//! garbage collector. Every function catches panics, so none reaches Node.

use crate::core::error::Error as CoreError;
use crate::core::json;
use crate::core::op::{slice_op, Exponent, Op};
use crate::core::plan::Plan;
use crate::core::shape::Shape;
use crate::core::tape::Tape;
use napi::bindgen_prelude::*;
use std::cell::RefCell;
use napi_derive::napi;

fn js_err(e: CoreError) -> Error {
    Error::new(Status::GenericFailure, e.0)
}

fn shape(rank: u32, d0: f64, d1: f64) -> Result<Shape> {
    let dim = |d: f64| -> Result<usize> {
        if d >= 0.0 && d.fract() == 0.0 && d <= usize::MAX as f64 {
            Ok(d as usize)
        } else {
            Err(Error::new(Status::InvalidArg, format!("shape entries must be non-negative integers, got {d}")))
        }
    };
    let dims = match rank {
        0 => vec![],
        1 => vec![dim(d0)?],
        2 => vec![dim(d0)?, dim(d1)?],
        _ => return Err(Error::new(Status::InvalidArg, "rank is capped at 2")),
    };
    Shape::from_dims(&dims).ok_or_else(|| Error::new(Status::InvalidArg, format!("shape [{}] is too large", dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "))))
}

/// Ops without static arguments, numbered by their position here; JavaScript
/// reads this list once to learn the codes.
const CODED_OPS: [&str; 24] = [
    "add", "sub", "mul", "div", "maximum", "minimum", "neg", "exp", "log", "sqrt", "square", "tanh", "sigmoid",
    "relu", "lgamma", "sum", "mean", "matmul", "dot", "transpose", "diagPart", "addDiag", "cholesky", "solveGeneral",
];

fn coded(code: u32) -> Result<Op> {
    CODED_OPS
        .get(code as usize)
        .and_then(|name| Op::simple(name))
        .ok_or_else(|| Error::new(Status::InvalidArg, format!("unknown op code {code}")))
}

#[napi]
pub fn op_codes() -> Vec<&'static str> {
    CODED_OPS.to_vec()
}

/// Leaf kinds as JavaScript numbers them.
fn leaf_op(kind: u32) -> Op {
    match kind {
        0 => Op::Const,
        1 => Op::Leaf,
        _ => Op::Input,
    }
}

thread_local! {
    /// The tapes of this thread (each Node environment runs on its own
    /// thread), by id. Ops name their tape by a number: unwrapping an
    /// external on every call cost more than the op itself.
    static TAPES: RefCell<Vec<Option<Tape>>> = const { RefCell::new(Vec::new()) };
}

fn with_tape<R>(id: u32, f: impl FnOnce(&mut Tape) -> std::result::Result<R, CoreError>) -> Result<R> {
    TAPES.with(|tapes| match tapes.borrow_mut().get_mut(id as usize).and_then(Option::as_mut) {
        Some(tape) => f(tape).map_err(js_err),
        None => Err(Error::new(Status::InvalidArg, format!("tape {id} does not exist"))),
    })
}

#[napi(catch_unwind)]
pub fn tape_new() -> u32 {
    TAPES.with(|tapes| {
        let mut tapes = tapes.borrow_mut();
        match tapes.iter().position(Option::is_none) {
            Some(free) => {
                tapes[free] = Some(Tape::default());
                free as u32
            }
            None => {
                tapes.push(Some(Tape::default()));
                (tapes.len() - 1) as u32
            }
        }
    })
}

#[napi(catch_unwind)]
pub fn tape_free(id: u32) {
    TAPES.with(|tapes| {
        if let Some(slot) = tapes.borrow_mut().get_mut(id as usize) {
            *slot = None;
        }
    })
}

#[napi(catch_unwind)]
pub fn tape_leaf(t: u32, kind: u32, data: &[f64], rank: u32, d0: f64, d1: f64) -> Result<u32> {
    let s = shape(rank, d0, d1)?;
    if data.len() != s.size() {
        return Err(Error::new(Status::InvalidArg, format!("data length {} does not match shape {s}", data.len())));
    }
    with_tape(t, |t| t.graph.leaf(leaf_op(kind), s, data))
}

#[napi(catch_unwind)]
pub fn tape_number(t: u32, kind: u32, x: f64) -> Result<u32> {
    with_tape(t, |t| t.graph.leaf(leaf_op(kind), Shape::Scalar, &[x]))
}

#[napi(catch_unwind)]
pub fn tape_op1(t: u32, code: u32, a: u32) -> Result<u32> {
    let op = coded(code)?;
    with_tape(t, |t| t.graph.op(op, &[a], true))
}

#[napi(catch_unwind)]
pub fn tape_op2(t: u32, code: u32, a: u32, b: u32) -> Result<u32> {
    let op = coded(code)?;
    with_tape(t, |t| t.graph.op(op, &[a, b], true))
}

/// A binary op with a number on one side, recorded in one call: the number
/// becomes a constant leaf just before the op node, so its id is the
/// returned id minus one.
#[napi(catch_unwind)]
pub fn tape_op2_number(t: u32, code: u32, a: u32, x: f64, number_left: bool) -> Result<u32> {
    let op = coded(code)?;
    with_tape(t, |t| {
        let c = t.graph.leaf(Op::Const, Shape::Scalar, &[x])?;
        t.graph.op(op, &if number_left { [c, a] } else { [a, c] }, true)
    })
}

/// Empty the tape for reuse, keeping its memory: a fresh arena would cost
/// a page fault per 4 KiB on every evaluation.
#[napi(catch_unwind)]
pub fn tape_reset(t: u32) -> Result<()> {
    with_tape(t, |t| {
        t.reset();
        Ok(())
    })
}

#[napi(catch_unwind)]
pub fn tape_pow(t: u32, a: u32, k: f64) -> Result<u32> {
    with_tape(t, |t| t.graph.op(Op::Pow(Exponent::new(k)), &[a], true))
}

#[napi(catch_unwind)]
pub fn tape_reshape(t: u32, a: u32, rank: u32, d0: f64, d1: f64) -> Result<u32> {
    // Not capped here: a target too large for its operand is a count mismatch.
    let s = match rank {
        0 => Shape::Scalar,
        1 => Shape::Vector(d0 as usize),
        _ => Shape::Matrix(d0 as usize, d1 as usize),
    };
    with_tape(t, |t| t.graph.op(Op::Reshape(s), &[a], true))
}

/// `start` and `size` come as their lengths and first two entries (NaN for
/// an entry that is not a number, a length of -1 for something not an array).
#[napi(catch_unwind)]
#[allow(clippy::too_many_arguments)]
pub fn tape_slice(t: u32, a: u32, start_len: i32, s0: f64, s1: f64, size_len: i32, z0: f64, z1: f64) -> Result<u32> {
    let entries = |len: i32, first: [f64; 2]| -> Vec<f64> {
        (0..len.max(0) as usize).map(|i| first.get(i).copied().unwrap_or(f64::NAN)).collect()
    };
    let (start, size) = (entries(start_len, [s0, s1]), entries(size_len, [z0, z1]));
    with_tape(t, |t| {
        let op = slice_op(t.graph.node(a)?.shape, &start, &size)?;
        t.graph.op(op, &[a], true)
    })
}

#[napi(catch_unwind)]
pub fn tape_concat(t: u32, parts: &[u32], axis: u32) -> Result<u32> {
    with_tape(t, |t| t.graph.op(Op::Concat { axis: axis.min(2) as u8 }, parts, true))
}

#[napi(catch_unwind)]
pub fn tape_triangular_solve(t: u32, a: u32, b: u32, lower: bool) -> Result<u32> {
    with_tape(t, |t| t.graph.op(Op::TriangularSolve { lower }, &[a, b], true))
}

#[napi(catch_unwind)]
pub fn tape_external(t: u32, data: &[f64], rank: u32, d0: f64, d1: f64, parents: &[u32]) -> Result<u32> {
    let s = shape(rank, d0, d1)?;
    with_tape(t, |t| t.graph.external(s, data, parents))
}

/// How many values the tape's arena holds.
#[napi(catch_unwind)]
pub fn tape_size(t: u32) -> Result<f64> {
    with_tape(t, |t| Ok(t.graph.values.len() as f64))
}

#[napi(catch_unwind)]
pub fn tape_shape(t: u32, id: u32) -> Result<Vec<u32>> {
    with_tape(t, |t| Ok(t.graph.node(id)?.shape.dims().into_iter().map(|d| d as u32).collect()))
}

/// Copy a node's value into `out`, a buffer of the node's size allocated by
/// JavaScript: a buffer made here would be freed only when the event loop
/// turns, so a loop that never yields would pile them up.
#[napi(catch_unwind)]
pub fn tape_value(t: u32, id: u32, mut out: Float64ArraySlice) -> Result<()> {
    // SAFETY: a fresh buffer of the caller's, not aliased by any other argument.
    let out = unsafe { out.as_mut() };
    with_tape(t, |t| {
        let value = t.graph.value(id)?;
        if value.len() != out.len() {
            return crate::fail!("value buffer has {} entries for a node of {}", out.len(), value.len());
        }
        out.copy_from_slice(value);
        Ok(())
    })
}

/// Start a reverse sweep; returns the id of a hand-built node whose closure
/// must run before `tapeResume`, or -1 when the sweep is complete.
#[napi(catch_unwind)]
pub fn tape_backward(t: u32, root: u32, seed: Option<&[f64]>) -> Result<i64> {
    with_tape(t, |t| Ok(t.backward(root, seed)?.map_or(-1, i64::from)))
}

#[napi(catch_unwind)]
pub fn tape_resume(t: u32) -> Result<i64> {
    with_tape(t, |t| Ok(t.resume().map_or(-1, i64::from)))
}

/// Copy a node's adjoint into `out` (allocated by JavaScript, as for
/// `tapeValue`); false, leaving `out` alone, when the last sweep gave the
/// node no adjoint.
#[napi(catch_unwind)]
pub fn tape_adjoint(t: u32, id: u32, mut out: Float64ArraySlice) -> Result<bool> {
    // SAFETY: a fresh buffer of the caller's, not aliased by any other argument.
    let out = unsafe { out.as_mut() };
    with_tape(t, |t| match t.adjoint(id) {
        Some(adjoint) if adjoint.len() == out.len() => {
            out.copy_from_slice(adjoint);
            Ok(true)
        }
        Some(adjoint) => crate::fail!("adjoint buffer has {} entries for a node of {}", out.len(), adjoint.len()),
        None => Ok(false),
    })
}

#[napi(catch_unwind)]
pub fn tape_accumulate(t: u32, id: u32, contribution: &[f64]) -> Result<()> {
    with_tape(t, |t| t.accumulate(id, contribution))
}

/// The whole gradient step of an eager evaluation in one call: check the
/// root is a scalar (the message names `where`), sweep back from it unless
/// `swept` says the caller already did (hand-built nodes), write the
/// adjoints of `leaves` one after another into `out` (zeros for a leaf the
/// sweep did not reach), and return the root's value.
#[napi(catch_unwind)]
pub fn tape_gradients(t: u32, root: u32, swept: bool, where_: String, leaves: &[u32], mut out: Float64ArraySlice) -> Result<f64> {
    // SAFETY: a fresh buffer of the caller's, not aliased by any other argument.
    let out = unsafe { out.as_mut() };
    with_tape(t, |t| {
        let shape = t.graph.node(root)?.shape;
        if shape != Shape::Scalar {
            return crate::fail!("{where_}: the objective must return a scalar, got {shape}. Reduce it with sum() or mean() first.");
        }
        if !swept {
            t.backward(root, None)?;
        }
        let mut at = 0;
        for &id in leaves {
            let size = t.graph.node(id)?.shape.size();
            let Some(dst) = out.get_mut(at..at + size) else {
                return crate::fail!("gradient buffer too small");
            };
            match t.adjoint(id) {
                Some(a) => dst.copy_from_slice(a),
                None => dst.fill(0.0),
            }
            at += size;
        }
        Ok(t.graph.value(root)?[0])
    })
}

#[napi(catch_unwind)]
pub fn plan_build(t: u32, root: u32, params: &[u32], inputs: &[u32]) -> Result<External<Plan>> {
    with_tape(t, |t| Plan::build(&t.graph, root, params, inputs)).map(External::new)
}

#[napi(catch_unwind)]
pub fn plan_from_json(text: String) -> Result<External<Plan>> {
    Ok(External::new(json::plan_from_json(&text).map_err(js_err)?))
}

/// The `j`th typed array of a JavaScript array, borrowed for the call.
fn view<'a>(views: &Array<'a>, j: usize) -> Result<Float64ArraySlice<'a>> {
    views.get::<Float64ArraySlice>(j as u32)?.ok_or_else(|| Error::new(Status::InvalidArg, "missing argument buffer"))
}

/// Feed every parameter and input: slot `i` reads `flat` from offset
/// `layout[i]` when that is >= 0, else the whole of `views[-layout[i] - 1]`,
/// in place. Views are fetched one by one, so nothing is allocated.
fn feed(p: &mut Plan, flat: &[f64], views: &Array, layout: &[i32]) -> Result<()> {
    if layout.len() != p.slot_count() {
        return Err(Error::new(Status::InvalidArg, "layout does not match the plan"));
    }
    for (i, &at) in layout.iter().enumerate() {
        let size = p.slot_size(i);
        if at >= 0 {
            let data = flat.get(at as usize..at as usize + size);
            let data = data.ok_or_else(|| Error::new(Status::InvalidArg, "argument buffer too small"))?;
            p.set(i, data).map_err(js_err)?;
        } else {
            p.set(i, &view(views, (-(at + 1)) as usize)?).map_err(js_err)?;
        }
    }
    Ok(())
}

/// One replay: feed, forward and backward. Parameter `i`'s gradient goes to
/// `gradFlat` from offset `gradLayout[i]` when that is >= 0, else into the
/// whole of `gradViews[-gradLayout[i] - 1]`. Returns the root's value.
#[napi(catch_unwind)]
pub fn plan_run(
    p: &mut External<Plan>,
    flat: &[f64],
    views: Array,
    layout: &[i32],
    mut grad_flat: Float64ArraySlice,
    grad_views: Array,
    grad_layout: &[i32],
) -> Result<f64> {
    feed(p, flat, &views, layout)?;
    let value = p.forward().map_err(js_err)?[0];
    p.backward();
    if grad_layout.len() != p.params().len() {
        return Err(Error::new(Status::InvalidArg, "gradient layout does not match the plan"));
    }
    for (i, &at) in grad_layout.iter().enumerate() {
        let size = p.slot_size(i);
        if at >= 0 {
            // SAFETY: a fresh buffer of the caller's, distinct from every input.
            let out = unsafe { grad_flat.as_mut() }.get_mut(at as usize..at as usize + size);
            let out = out.ok_or_else(|| Error::new(Status::InvalidArg, "gradient buffer too small"))?;
            p.gradient(i, out).map_err(js_err)?;
        } else {
            let mut out = view(&grad_views, (-(at + 1)) as usize)?;
            // SAFETY: as above, a fresh array of the caller's for this gradient alone.
            p.gradient(i, unsafe { out.as_mut() }).map_err(js_err)?;
        }
    }
    Ok(value)
}

/// A forward replay alone; the root's value is copied into `out`.
#[napi(catch_unwind)]
pub fn plan_forward(p: &mut External<Plan>, flat: &[f64], views: Array, layout: &[i32], mut out: Float64ArraySlice) -> Result<()> {
    feed(p, flat, &views, layout)?;
    let value = p.forward().map_err(js_err)?;
    // SAFETY: a fresh buffer of the caller's, not aliased by any input.
    let out = unsafe { out.as_mut() };
    if out.len() != value.len() {
        return Err(Error::new(Status::InvalidArg, "output buffer does not match the root"));
    }
    out.copy_from_slice(value);
    Ok(())
}

#[napi(catch_unwind)]
pub fn plan_root_shape(p: &External<Plan>) -> Vec<u32> {
    p.root_shape().dims().into_iter().map(|d| d as u32).collect()
}

