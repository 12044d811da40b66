//! Forward mode and second order (`core::tangent`): the eager tape's
//! tangents, a plan's tangent plan, and the loops over directions that make
//! Jacobians and Hessians in one call.

use super::{flat_range, with_tape};
use crate::core::error::Result;
use crate::core::op::Op;
use crate::core::plan::Plan;
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
/// direction of the parameters flattened; `unit` is scratch of their size.
fn direct(p: &mut Plan, n: usize, unit: &mut [f64], j: usize) -> Result<()> {
    unit.fill(0.0);
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

/// The Jacobian of the root over the parameters flattened, row-major into
/// `out` (root size × parameter values). `flat` holds the parameters, then
/// the inputs. Forward (`p` a tangent plan): one replay of what depends on
/// the tangents per column. Reverse (`p` the plan itself): one sweep per row.
pub fn plan_jacobian(p: &mut Plan, forward: bool, flat: &[f64], out: &mut [f64]) -> Result<()> {
    if forward {
        let n = p.params().len() / 2;
        let q = width(p, n);
        let at = feed(p, 0..n, flat, 0)?;
        let mut unit = vec![0.0; q];
        feed(p, n..2 * n, &unit, 0)?;
        feed(p, 2 * n..p.slot_count(), flat, at)?;
        let m = p.forward()?.len();
        check_result("jacobian", m, q)?;
        if out.len() != m * q {
            return fail!("jacobian buffer does not match the plan");
        }
        for j in 0..q {
            direct(p, n, &mut unit, j)?;
            let column = p.forward_tangent()?;
            for (i, &x) in column.iter().enumerate() {
                out[i * q + j] = x;
            }
        }
        return Ok(());
    }
    let n = p.params().len();
    let q = width(p, n);
    let end = feed(p, 0..p.slot_count(), flat, 0)?;
    if end != flat.len() {
        return fail!("argument buffer does not match the plan");
    }
    let m = p.forward()?.len();
    check_result("jacobian", m, q)?;
    if out.len() != m * q {
        return fail!("jacobian buffer does not match the plan");
    }
    let mut seed = vec![0.0; m];
    for i in 0..m {
        seed.fill(0.0);
        seed[i] = 1.0;
        p.backward_seeded(&seed)?;
        let mut at = i * q;
        for k in 0..n {
            let size = p.slot_size(k);
            p.gradient(k, &mut out[at..at + size])?;
            at += size;
        }
    }
    Ok(())
}

/// Value, gradient and Hessian of a tangent plan's scalar output, into
/// `out`: `[value, gradient (q), H (q×q)]`, row j of H the product H·eⱼ
/// (rounding leaves it a hair from symmetric; JavaScript symmetrizes).
/// `flat` holds the parameters, then the inputs.
pub fn plan_hessian(p: &mut Plan, flat: &[f64], out: &mut [f64]) -> Result<()> {
    let n = p.params().len() / 2;
    let q = width(p, n);
    check_result("hessian", q, q)?;
    if out.len() != 1 + q + q * q {
        return fail!("hessian buffer does not match the plan");
    }
    let at = feed(p, 0..n, flat, 0)?;
    let mut unit = vec![0.0; q];
    feed(p, 2 * n..p.slot_count(), flat, at)?;
    for j in 0..q {
        direct(p, n, &mut unit, j)?;
        if j == 0 {
            p.forward()?;
        } else {
            p.forward_tangent()?;
        }
        p.backward();
        if j == 0 {
            out[0] = p.output(0)?[0];
            let mut at = 1;
            for k in n..2 * n {
                let size = p.slot_size(k);
                p.gradient(k, &mut out[at..at + size])?;
                at += size;
            }
        }
        let mut at = 1 + q + j * q;
        for k in 0..n {
            let size = p.slot_size(k);
            p.gradient(k, &mut out[at..at + size])?;
            at += size;
        }
    }
    Ok(())
}
