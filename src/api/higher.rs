//! Forward mode and second order (`core::tangent`): the eager tape's
//! tangents, a tangent plan's outputs, and its forward-mode Jacobian in one
//! call. (Hessians and reverse Jacobians are batches: `batch::units`.)

use super::{flat_range, with_tape};
use crate::core::error::Result;
use crate::core::op::Op;
use crate::core::plan::{Lanes, Plan, LANES};
use crate::core::shape::MAX_ELEMENTS;
use crate::core::tangent;
use crate::fail;

/// Record on the tape the tangent of `root` when each of `leaves` moves
/// along the node of `tangents` beside it; its id (a constant zero when the
/// root does not depend on them).
pub fn tape_jvp(t: u32, root: u32, leaves: &[u32], tangents: &[u32]) -> Result<u32> {
    if leaves.len() != tangents.len() {
        return fail!("{} leaves for {} tangents", leaves.len(), tangents.len());
    }
    with_tape(t, |t| {
        let seeds: Vec<(u32, u32)> = leaves.iter().copied().zip(tangents.iter().copied()).collect();
        match tangent::jvp(&mut t.graph, root, &seeds, true)? {
            Some(id) => Ok(id),
            None => {
                let shape = t.graph.node(root)?.shape;
                t.graph.leaf(Op::Const, shape, &[])
            }
        }
    })
}

/// Output `i`'s value after a replay, copied into `out` (its size).
pub fn plan_output_into(p: &Plan, i: usize, out: &mut [f64]) -> Result<()> {
    let value = p.output(i)?;
    if value.len() != out.len() {
        return fail!("output buffer does not match output {i}");
    }
    out.copy_from_slice(value);
    Ok(())
}

/// Values the parameters of `p` take in all, the first `count` of them.
fn width(p: &Plan, count: usize) -> usize {
    (0..count).map(|i| p.slot_size(i)).sum()
}

/// Feed slots `which` of `p` from `flat`, one after another from `at`; the end.
fn feed(p: &mut Plan, which: std::ops::Range<usize>, flat: &[f64], mut at: usize) -> Result<usize> {
    for i in which {
        let r = flat_range(flat.len(), at, p.slot_size(i), "argument")?;
        at = r.end;
        p.set(i, &flat[r])?;
    }
    Ok(at)
}

/// Set the tangents of a tangent plan (slots `n..2n`) to the `j`th unit
/// direction of the parameters flattened; `unit` is scratch of their size,
/// the (j − 1)th direction before.
fn direct(p: &mut Plan, n: usize, unit: &mut [f64], j: usize) -> Result<()> {
    if j > 0 {
        unit[j - 1] = 0.0;
    }
    unit[j] = 1.0;
    feed(p, n..2 * n, unit, 0).map(|_| ())
}

/// Refuse a result of `rows`×`cols` past the cap on values, before
/// anything is allocated for it.
pub fn check_result(what: &str, rows: usize, cols: usize) -> Result<()> {
    match rows.checked_mul(cols) {
        Some(n) if n <= MAX_ELEMENTS => Ok(()),
        _ => fail!(
            "{what}: a {rows}×{cols} result holds {} entries, more than the {MAX_ELEMENTS} a value may hold",
            rows as u128 * cols as u128
        ),
    }
}

/// The Jacobian of a tangent plan's output (the plan's root, flattened)
/// over its parameters flattened, row-major into `out` (root size ×
/// parameter values), by forward mode: the primal replayed once, then per
/// column only what depends on the tangents. `flat` holds the parameters,
/// then the inputs. (By reverse mode JavaScript runs a batch over rows.)
///
/// With `lanes` (a replica's, `batch::columns`), the columns go eight at a
/// time where every step that depends on the tangents has a lane kernel,
/// the parameters and inputs held fixed in the lanes: the same bits.
///
/// Returns whether every entry is finite. Where one is not, forward mode
/// may disagree with the reverse sweeps SPEC §6 defines the Jacobian by
/// (a tangent of 0 times an infinite partial is NaN, where a reverse sweep
/// never multiplies that term), so the caller takes the rows by reverse.
pub fn plan_jacobian(p: &mut Plan, flat: &[f64], out: &mut [f64], lanes: Option<&mut Option<Lanes>>) -> Result<bool> {
    forward_jacobian(p, flat, out, lanes)?;
    Ok(out.iter().fold(true, |finite, x| finite & x.is_finite()))
}

fn forward_jacobian(p: &mut Plan, flat: &[f64], out: &mut [f64], lanes: Option<&mut Option<Lanes>>) -> Result<()> {
    let n = p.params().len() / 2;
    let q = width(p, n);
    let at = feed(p, 0..n, flat, 0)?;
    let mut unit = Vec::new();
    if unit.try_reserve_exact(q).is_err() {
        return fail!("out of memory: cannot hold {q} more values");
    }
    unit.resize(q, 0.0);
    feed(p, n..2 * n, &unit, 0)?;
    feed(p, 2 * n..p.slot_count(), flat, at)?;
    let m = p.root_shape().size();
    check_result("jacobian", m, q)?;
    if out.len() != m * q {
        return fail!("jacobian buffer does not match the plan");
    }
    // Making the lanes computes what does not depend on the tangents; where
    // that fails, the replay below gives the error.
    if let Some(cache) = lanes.filter(|_| m > 0 && q > 0) {
        if let Some(mut l) = p.lanes(cache.take(), n, false) {
            let mut points = vec![0.0; LANES * q];
            for from in (0..q).step_by(LANES) {
                let c = LANES.min(q - from);
                points.fill(0.0);
                (0..c).for_each(|k| points[k * q + from + k] = 1.0);
                p.replay_lanes_forward(&mut l, &points[..c * q], q, &mut out[from..], q);
            }
            *cache = Some(l);
            return Ok(());
        }
    }
    p.forward()?;
    for j in 0..q {
        direct(p, n, &mut unit, j)?;
        let column = p.forward_tangent()?;
        for (i, &x) in column.iter().enumerate() {
            out[i * q + j] = x;
        }
    }
    Ok(())
}
