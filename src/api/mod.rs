//! What the two bindings (napi in `binding/`, WebAssembly in `wasm.rs`)
//! expose, in plain Rust types: tapes named by id, ops named by code, plans.
//! Each binding only converts its own argument and error types and calls
//! these, so both builds run the same code for every call.

use crate::core::error::{js_number, Error, Result};
use crate::core::json;
use crate::core::op::{slice_op, Exponent, Op};
use crate::core::plan::Plan;
use crate::core::shape::Shape;
use crate::fail;

mod higher;
mod queue;
mod tapes;
pub use higher::{plan_columns, plan_output_into, tape_colors, tape_jvp};
pub use queue::{tape_apply, tape_finish_queued};
#[cfg(target_arch = "wasm32")]
pub use tapes::set_epoch;
pub use tapes::{tape_free, tape_new};
use tapes::with_tape;

/// A shape from its rank and first two dimensions, as JavaScript passes it.
/// A dimension past a usize (past 2^32 - 1 under WebAssembly) is reported
/// like a shape past the cap on values.
pub fn shape(rank: u32, d0: f64, d1: f64) -> Result<Shape> {
    let given: &[f64] = match rank {
        0 => &[],
        1 => &[d0],
        2 => &[d0, d1],
        _ => return fail!("rank is capped at 2"),
    };
    let too_large = || {
        let list = given.iter().map(|&d| js_number(d)).collect::<Vec<_>>().join(", ");
        Error(format!("shape [{list}] is too large"))
    };
    let mut dims = [0usize; 2];
    for (dim, &d) in dims.iter_mut().zip(given) {
        if !(d >= 0.0 && d.fract() == 0.0) {
            return fail!("shape entries must be non-negative integers, got {}", js_number(d));
        }
        if d >= usize::MAX as f64 {
            return Err(too_large());
        }
        *dim = d as usize;
    }
    Shape::from_dims(&dims[..given.len()]).ok_or_else(too_large)
}

/// Ops without static arguments, numbered by their position here.
const CODED: [Op; 24] = [
    Op::Add,
    Op::Sub,
    Op::Mul,
    Op::Div,
    Op::Maximum,
    Op::Minimum,
    Op::Neg,
    Op::Exp,
    Op::Log,
    Op::Sqrt,
    Op::Square,
    Op::Tanh,
    Op::Sigmoid,
    Op::Relu,
    Op::Lgamma,
    Op::Sum,
    Op::Mean,
    Op::Matmul,
    Op::Dot,
    Op::Transpose,
    Op::DiagPart,
    Op::AddDiag,
    Op::Cholesky,
    Op::SolveGeneral,
];

/// The code of pow in the queue (src/js/queue.js), after the coded ops:
/// pow has an exponent, so it is queued only, never called by code.
const POW: u32 = CODED.len() as u32;

/// The coded ops' names, in code order, then pow's (`POW`); JavaScript
/// reads this list once to learn the codes.
pub fn coded_ops() -> Vec<&'static str> {
    CODED.iter().map(|op| op.name()).chain([Op::Pow(Exponent::new(0.0)).name()]).collect()
}

fn coded(code: u32) -> Result<Op> {
    match CODED.get(code as usize) {
        Some(&op) => Ok(op),
        None => fail!("unknown op code {code}"),
    }
}

/// Leaf kinds as JavaScript numbers them.
fn leaf_op(kind: u32) -> Op {
    match kind {
        0 => Op::Const,
        1 => Op::Leaf,
        _ => Op::Input,
    }
}

/// Nodes on the tape: the id the next node gets.
pub fn tape_length(t: u32) -> Result<u32> {
    with_tape(t, |t| Ok(t.graph.nodes.len() as u32))
}

pub fn tape_leaf(t: u32, kind: u32, data: &[f64], rank: u32, d0: f64, d1: f64) -> Result<u32> {
    let s = shape(rank, d0, d1)?;
    if data.len() != s.size() {
        return fail!("data length {} does not match shape {s}", data.len());
    }
    with_tape(t, |t| t.graph.leaf(leaf_op(kind), s, data))
}

pub fn tape_number(t: u32, kind: u32, x: f64) -> Result<u32> {
    with_tape(t, |t| t.graph.leaf(leaf_op(kind), Shape::Scalar, &[x]))
}

pub fn tape_op1(t: u32, code: u32, a: u32) -> Result<u32> {
    let op = coded(code)?;
    with_tape(t, |t| t.graph.op(op, &[a], true))
}

pub fn tape_op2(t: u32, code: u32, a: u32, b: u32) -> Result<u32> {
    let op = coded(code)?;
    with_tape(t, |t| t.graph.op(op, &[a, b], true))
}

/// A binary op with a number on one side, recorded in one call: the number
/// becomes a constant leaf just before the op node, so its id is the
/// returned id minus one.
pub fn tape_op2_number(t: u32, code: u32, a: u32, x: f64, number_left: bool) -> Result<u32> {
    let op = coded(code)?;
    with_tape(t, |t| {
        let c = t.graph.leaf(Op::Const, Shape::Scalar, &[x])?;
        t.graph.op(op, &if number_left { [c, a] } else { [a, c] }, true)
    })
}

/// Empty the tape for reuse, keeping its memory: a fresh arena would cost
/// a page fault per 4 KiB on every evaluation.
pub fn tape_reset(t: u32) -> Result<()> {
    with_tape(t, |t| {
        t.reset();
        Ok(())
    })
}

pub fn tape_pow(t: u32, a: u32, k: f64) -> Result<u32> {
    with_tape(t, |t| t.graph.op(Op::Pow(Exponent::new(k)), &[a], true))
}

pub fn tape_reshape(t: u32, a: u32, rank: u32, d0: f64, d1: f64) -> Result<u32> {
    // The JS layer checks the form too; checked again so a direct call is
    // safe. The count is compared in f64, so a target too large for a usize
    // (any beyond 2^32 under WebAssembly) is the same count mismatch.
    let whole = |d: f64| d >= 1.0 && d.fract() == 0.0 && d <= 9007199254740992.0;
    let (count, target) = match rank {
        0 => (1.0, "scalar".to_string()),
        1 if whole(d0) => (d0, format!("[{}]", js_number(d0))),
        2 if whole(d0) && whole(d1) => (d0 * d1, format!("[{}×{}]", js_number(d0), js_number(d1))),
        _ => return fail!("reshape: shape must be up to two positive integers"),
    };
    with_tape(t, |t| {
        let size = t.graph.node(a)?.shape.size();
        if count != size as f64 {
            return fail!("reshape: cannot view {size} elements as {target}");
        }
        // The count fits a usize, so each dimension does.
        let s = match rank {
            0 => Shape::Scalar,
            1 => Shape::Vector(d0 as usize),
            _ => Shape::Matrix(d0 as usize, d1 as usize),
        };
        t.graph.op(Op::Reshape(s), &[a], true)
    })
}

/// `start` and `size` come as their lengths and first two entries (NaN for
/// an entry that is not a number, a length of -1 for something not an
/// array). A length above the largest rank is only ever a mismatch, so the
/// entries are capped before anything is allocated.
#[allow(clippy::too_many_arguments)]
pub fn tape_slice(t: u32, a: u32, start_len: i32, s0: f64, s1: f64, size_len: i32, z0: f64, z1: f64) -> Result<u32> {
    let entries = |len: i32, first: [f64; 2]| -> Vec<f64> {
        (0..len.clamp(0, 3) as usize).map(|i| first.get(i).copied().unwrap_or(f64::NAN)).collect()
    };
    let (start, size) = (entries(start_len, [s0, s1]), entries(size_len, [z0, z1]));
    with_tape(t, |t| {
        let op = slice_op(t.graph.node(a)?.shape, &start, &size)?;
        t.graph.op(op, &[a], true)
    })
}

pub fn tape_concat(t: u32, parts: &[u32], axis: u32) -> Result<u32> {
    with_tape(t, |t| t.graph.op(Op::Concat { axis: axis.min(2) as u8 }, parts, true))
}

pub fn tape_triangular_solve(t: u32, a: u32, b: u32, lower: bool) -> Result<u32> {
    with_tape(t, |t| t.graph.op(Op::TriangularSolve { lower }, &[a, b], true))
}

pub fn tape_external(t: u32, data: &[f64], rank: u32, d0: f64, d1: f64, parents: &[u32]) -> Result<u32> {
    let s = shape(rank, d0, d1)?;
    with_tape(t, |t| t.graph.external(s, data, parents))
}

/// How many values the tape's arena holds.
pub fn tape_size(t: u32) -> Result<f64> {
    with_tape(t, |t| Ok(t.graph.values.len() as f64))
}

pub fn tape_shape(t: u32, id: u32) -> Result<Shape> {
    with_tape(t, |t| Ok(t.graph.node(id)?.shape))
}

/// Copy a node's value into `out`, which has the node's size.
pub fn tape_value(t: u32, id: u32, out: &mut [f64]) -> Result<()> {
    with_tape(t, |t| {
        let value = t.graph.value(id)?;
        if value.len() != out.len() {
            return fail!("value buffer has {} entries for a node of {}", out.len(), value.len());
        }
        out.copy_from_slice(value);
        Ok(())
    })
}

/// Start a reverse sweep; returns the id of a hand-built node whose closure
/// must run before `tape_resume`, or -1 when the sweep is complete.
pub fn tape_backward(t: u32, root: u32, seed: Option<&[f64]>) -> Result<i64> {
    with_tape(t, |t| Ok(t.backward(root, seed)?.map_or(-1, i64::from)))
}

pub fn tape_resume(t: u32) -> Result<i64> {
    with_tape(t, |t| Ok(t.resume().map_or(-1, i64::from)))
}

/// Copy a node's adjoint into `out`; false, leaving `out` alone, when the
/// last sweep gave the node no adjoint.
pub fn tape_adjoint(t: u32, id: u32, out: &mut [f64]) -> Result<bool> {
    with_tape(t, |t| match t.adjoint(id) {
        Some(adjoint) if adjoint.len() == out.len() => {
            out.copy_from_slice(adjoint);
            Ok(true)
        }
        Some(adjoint) => fail!("adjoint buffer has {} entries for a node of {}", out.len(), adjoint.len()),
        None => Ok(false),
    })
}

pub fn tape_accumulate(t: u32, id: u32, contribution: &[f64]) -> Result<()> {
    with_tape(t, |t| t.accumulate(id, contribution))
}

/// The end of an eager evaluation, in one call: the root's value, the
/// leaves' gradients into `out` (after a sweep unless `swept`), and the tape
/// emptied for the next evaluation.
pub fn tape_finish(t: u32, root: u32, swept: bool, leaves: &[u32], out: &mut [f64]) -> Result<f64> {
    with_tape(t, |t| {
        let shape = t.graph.node(root)?.shape;
        if shape != Shape::Scalar {
            return fail!("the objective must return a scalar, got {shape}. Reduce it with sum() or mean() first.");
        }
        if !swept {
            t.backward(root, None)?;
        }
        let mut at = 0;
        for &id in leaves {
            let size = t.graph.node(id)?.shape.size();
            let Some(dst) = out.get_mut(at..at + size) else {
                return fail!("gradient buffer too small");
            };
            match t.adjoint(id) {
                Some(a) => dst.copy_from_slice(a),
                None => dst.fill(0.0),
            }
            at += size;
        }
        let value = t.graph.value(root)?[0];
        t.reset();
        Ok(value)
    })
}

/// The plan of a trace. When the trace is already compact (`Plan::adopt`),
/// the plan takes the tape's graph, values and all, rather than copying it:
/// a large trace is not held twice, and the plan's first replay finds its
/// values computed (`Plan::current`). The tape is left empty.
pub fn plan_build(t: u32, root: u32, params: &[u32], inputs: &[u32]) -> Result<Plan> {
    with_tape(t, |t| {
        if Plan::trace_adoptable(&t.graph, root, params, inputs)? {
            let g = std::mem::take(&mut t.graph);
            t.reset();
            return Plan::adopt_current(g, root, params, inputs);
        }
        Plan::build(&t.graph, root, params, inputs)
    })
}

pub fn plan_from_json(text: &str) -> Result<Plan> {
    json::plan_from_json(text)
}

pub fn plan_from_parts(stream: &[f64], strings: &str) -> Result<Plan> {
    json::plan_from_parts(stream, strings)
}

/// How a plan read from JSON is called, as JSON text for JavaScript:
/// `{"map": bool, "params": [{"name", "shape"}...], "inputs": [...]}`,
/// names and shapes as the core read them from the plan's own text.
pub fn plan_slots(p: &Plan) -> Result<String> {
    use std::fmt::Write;
    let Some(names) = &p.names else {
        return fail!("this plan was not read from JSON");
    };
    // Written by hand: serde_json's serializer would add 40 KB to the wasm.
    let quoted = |s: &str| {
        let mut q = String::from('"');
        for c in s.chars() {
            match c {
                '"' => q.push_str("\\\""),
                '\\' => q.push_str("\\\\"),
                c if (c as u32) < 0x20 => {
                    let _ = write!(q, "\\u{:04x}", c as u32);
                }
                c => q.push(c),
            }
        }
        q + "\""
    };
    let slot = |name: Option<&String>, s: &crate::core::plan::Slot| {
        let dims: Vec<String> = s.shape.dims().iter().map(usize::to_string).collect();
        format!(r#"{{"name":{},"shape":[{}]}}"#, name.map_or("null".to_string(), |n| quoted(n)), dims.join(","))
    };
    let params: Vec<String> = names.params.iter().zip(p.params()).map(|(n, s)| slot(n.as_ref(), s)).collect();
    let inputs: Vec<String> = names.inputs.iter().zip(p.inputs()).map(|(n, s)| slot(Some(n), s)).collect();
    Ok(format!(r#"{{"map":{},"params":[{}],"inputs":[{}]}}"#, names.map, params.join(","), inputs.join(",")))
}

/// The part of `flat` a slot of `size` values at `at` reads or writes.
pub fn flat_range(flat_len: usize, at: usize, size: usize, what: &str) -> Result<std::ops::Range<usize>> {
    match at.checked_add(size) {
        Some(end) if end <= flat_len => Ok(at..end),
        _ => fail!("{what} buffer too small"),
    }
}

pub fn check_layout(p: &Plan, layout: &[i32], gradient_layout: &[i32]) -> Result<()> {
    if layout.len() != p.slot_count() {
        return fail!("layout does not match the plan");
    }
    if gradient_layout.len() != p.params().len() {
        return fail!("gradient layout does not match the plan");
    }
    Ok(())
}

/// Forward and backward on a fed plan; returns the root's value.
pub fn plan_evaluate(p: &mut Plan) -> Result<f64> {
    let value = p.forward()?[0];
    p.backward();
    Ok(value)
}

/// The common replay in one step: every argument in `flat` and every
/// gradient in `grad`, slot after slot in the plan's order, so no layout
/// crosses the boundary. Returns the root's value.
pub fn plan_run_flat(p: &mut Plan, flat: &[f64], grad: &mut [f64]) -> Result<f64> {
    feed_flat(p, flat)?;
    let value = plan_evaluate(p)?;
    let mut at = 0;
    for i in 0..p.params().len() {
        let r = flat_range(grad.len(), at, p.slot_size(i), "gradient")?;
        at = r.end;
        p.gradient(i, &mut grad[r])?;
    }
    Ok(value)
}

/// `plan_run_flat` forward only, for a scalar root: its value.
pub fn plan_value_flat(p: &mut Plan, flat: &[f64]) -> Result<f64> {
    feed_flat(p, flat)?;
    match *p.forward()? {
        [value] => Ok(value),
        _ => fail!("the root is not a scalar"),
    }
}

/// Every slot fed from `flat`, one after another in the plan's order.
fn feed_flat(p: &mut Plan, flat: &[f64]) -> Result<()> {
    if feed_slots(p, 0..p.slot_count(), flat, 0)? != flat.len() {
        return fail!("argument buffer does not match the plan");
    }
    Ok(())
}

/// Feed slots `which` of `p` from `flat`, one after another from `at`; the end.
pub(crate) fn feed_slots(p: &mut Plan, which: std::ops::Range<usize>, flat: &[f64], mut at: usize) -> Result<usize> {
    for i in which {
        let r = flat_range(flat.len(), at, p.slot_size(i), "argument")?;
        at = r.end;
        p.set(i, &flat[r])?;
    }
    Ok(at)
}

/// A forward replay on a fed plan alone; the root's value is copied into `out`.
pub fn plan_forward_into(p: &mut Plan, out: &mut [f64]) -> Result<()> {
    let value = p.forward()?;
    if out.len() != value.len() {
        return fail!("output buffer does not match the root");
    }
    out.copy_from_slice(value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(name: &str) -> i32 {
        coded_ops().iter().position(|&n| n == name).unwrap() as i32
    }

    #[test]
    fn a_queued_batch_records_the_nodes_javascript_numbered() {
        let t = tape_new();
        // x = 2 (parameter), c = 3 (constant), m = x * c, e = exp(m)
        let ops = [-2, 0, -1, -1, 1, -1, code("mul"), 0, 1, code("exp"), 2, -1];
        assert_eq!(tape_apply(t, &ops, &[2.0, 3.0]), Ok(4));
        let mut grad = [0.0];
        let value = tape_finish(t, 3, false, &[0], &mut grad).unwrap();
        assert_eq!(value, 6f64.exp());
        assert_eq!(grad[0], 3.0 * 6f64.exp());
        // A [3] vector parameter v: sum(v * v) + mean(v), on the emptied tape.
        let ops = [-2, 0, 3, code("mul"), 0, 0, code("sum"), 1, -1, code("mean"), 0, -1, code("add"), 2, 3];
        assert_eq!(tape_apply(t, &ops, &[1.0, -2.0, 4.0]), Ok(5));
        let mut grad = [0.0; 3];
        assert_eq!(tape_finish(t, 4, false, &[0], &mut grad), Ok(21.0 + 1.0));
        assert_eq!(grad, [2.0 + 1.0 / 3.0, -4.0 + 1.0 / 3.0, 8.0 + 1.0 / 3.0]);
        tape_free(t);
    }

    #[test]
    fn a_queued_batch_of_what_cannot_be_queued_is_refused() {
        let t = tape_new();
        let v = tape_leaf(t, 1, &[1.0, 2.0], 1, 2.0, 0.0).unwrap(); // a [2] vector, node 0
        assert_eq!(v, 0);
        let refused = |ops: &[i32], nums: &[f64]| tape_apply(t, ops, nums).unwrap_err().0;
        assert_eq!(refused(&[code("transpose"), 0, -1], &[]), "transpose cannot be queued");
        assert_eq!(refused(&[-1, 5, -1], &[1.0]), "queued values 5..5+-1 do not exist");
        assert_eq!(refused(&[-1, 0, 3], &[1.0, 2.0]), "queued values 0..0+3 do not exist");
        assert_eq!(refused(&[code("neg"), 9, -1], &[]), "node 9 does not exist");
        assert_eq!(refused(&[77, 0, -1], &[]), "unknown op code 77");
        tape_free(t);
    }
}
