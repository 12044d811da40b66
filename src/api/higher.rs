//! Forward mode and second order (`core::tangent`): the eager tape's
//! tangents, a tangent plan's outputs, and its forward-mode Jacobian in one
//! call. (Hessians and reverse Jacobians are batches: `batch::units`.)

use super::{feed_slots, with_tape};
use crate::core::error::Result;
use crate::core::op::Op;
use crate::core::pattern;
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

/// The colors of an eager forward Jacobian's columns (`core::pattern`),
/// of `root` over `leaf`, as `Colors::flat` lists them; `None` where they
/// save no lanes, as a compiled Jacobian's would not.
pub fn tape_colors(t: u32, root: u32, leaf: u32) -> Result<Option<Vec<u32>>> {
    with_tape(t, |t| {
        let q = t.graph.node(leaf)?.shape.size();
        t.graph.node(root)?;
        Ok(pattern::colors(&t.graph, root, &[(leaf, 0)], q, LANES).map(|c| c.flat()))
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
/// need not multiply that term), so the caller takes such entries from the
/// reverse rows.
pub fn plan_columns(p: &mut Plan, flat: &[f64], out: &mut [f64], lanes: Option<&mut Option<Lanes>>) -> Result<bool> {
    forward_jacobian(p, flat, out, lanes)?;
    Ok(out.iter().fold(true, |finite, x| finite & x.is_finite()))
}

fn forward_jacobian(p: &mut Plan, flat: &[f64], out: &mut [f64], lanes: Option<&mut Option<Lanes>>) -> Result<()> {
    let n = p.params().len() / 2;
    let q = width(p, n);
    let at = feed_slots(p, 0..n, flat, 0)?;
    let mut unit = Vec::new();
    if unit.try_reserve_exact(q).is_err() {
        return fail!("out of memory: cannot hold {q} more values");
    }
    unit.resize(q, 0.0);
    feed_slots(p, n..2 * n, &unit, 0)?;
    feed_slots(p, 2 * n..p.slot_count(), flat, at)?;
    let m = p.root_shape().size();
    check_result("jacobian", m, q)?;
    if out.len() != m * q {
        return fail!("jacobian buffer does not match the plan");
    }
    // One direction per color of the columns (`core::pattern`) where that
    // takes fewer groups of lanes, read back by color.
    let colors = p.column_colors();
    let directions = colors.as_ref().map_or(q, |c| c.count);
    let mut by_color = Vec::new();
    let tangents: &mut [f64] = match &colors {
        Some(_) => {
            by_color.resize(m * directions, 0.0);
            &mut by_color
        }
        None => out,
    };
    let direction = |k: usize, to: &mut [f64]| match &colors {
        Some(c) => c.direction(k, to),
        None => to.iter_mut().enumerate().for_each(|(j, x)| *x = if j == k { 1.0 } else { 0.0 }),
    };
    // Making the lanes computes what does not depend on the tangents; where
    // that fails, the replay below gives the error.
    let mut in_lanes = false;
    if let Some(cache) = lanes.filter(|_| m > 0 && q > 0) {
        if let Some(mut l) = p.lanes(cache.take(), n, false) {
            let mut points = vec![0.0; LANES * q];
            for from in (0..directions).step_by(LANES) {
                let c = LANES.min(directions - from);
                for (k, point) in points.chunks_exact_mut(q).take(c).enumerate() {
                    direction(from + k, point);
                }
                p.replay_lanes_forward(&mut l, &points[..c * q], q, &mut tangents[from..], directions);
            }
            *cache = Some(l);
            in_lanes = true;
        }
    }
    if !in_lanes {
        p.forward()?;
        for k in 0..directions {
            direction(k, &mut unit);
            feed_slots(p, n..2 * n, &unit, 0)?;
            let column = p.forward_tangent()?;
            for (i, &x) in column.iter().enumerate() {
                tangents[i * directions + k] = x;
            }
        }
    }
    if let Some(c) = &colors {
        c.scatter(&by_color, out);
    }
    Ok(())
}
