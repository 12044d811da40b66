//! A derived plan's points along the unit directions past a point x that
//! every point holds (a Hessian's columns, a Jacobian's), and a tangent
//! plan's forward Jacobian: batches whose points differ in one value.

use super::{run_into, Failure, Pool, Replicas};
use crate::core::plan::Plan;

/// A tangent plan's forward Jacobian (`api::plan_columns`: `flat` holds
/// the parameters, then the inputs) on one of the pool's replicas, in the
/// lanes the replica keeps; whether every entry is finite.
pub fn columns(pool: &Pool, flat: &[f64], out: &mut [f64]) -> crate::core::error::Result<bool> {
    let mut r = pool.take();
    let result = crate::api::plan_columns(&mut r.plan, flat, out, Some(&mut r.lanes));
    pool.give(r);
    result
}

/// The gradients of a derived plan (`Plan::tangent_plan`: a Hessian's rows;
/// `Plan::row_plan`: a Jacobian's) at the points (x, eⱼ), one per unit
/// direction eⱼ of the parameter values past x, as batches (on every core,
/// in lanes where the ops allow). Each point's first `rows.len() / count`
/// gradient values go to `rows`. With `primal` (1 + x.len() values), a
/// Hessian's: the value and gradient at x too, from a tangent plan's sweep
/// from its primal root (`Plan::primal_gradient`, a compiled call's bits),
/// where a replica keeps one; whether they were written.
pub fn units(mut replicas: Replicas, x: &[f64], inputs: &[f64], rows: &mut [f64], mut primal: Option<&mut [f64]>) -> std::result::Result<bool, Failure> {
    let width = super::width(replicas.plan());
    let count = width.saturating_sub(x.len());
    let keep = rows.len().checked_div(count).unwrap_or(0);
    if x.len() > width || rows.len() != count * keep || keep > width || primal.as_ref().is_some_and(|p| p.len() != 1 + x.len()) {
        return Err(Failure::whole("unit directions: buffers do not match the plan"));
    }
    if count == 0 {
        return Ok(false);
    }
    // The slots x fills, which every point holds, and the empty slots
    // after them, alike at every point too. (Counted as varying, an empty
    // parameter after x made what reads it, the value at x among them, a
    // lane step's, and the value read from the plan stale.)
    let plan = replicas.plan();
    let (mut same, mut filled) = (0, 0);
    while filled < x.len() || (same < plan.params().len() && plan.slot_size(same) == 0) {
        filled += plan.slot_size(same);
        same += 1;
    }
    // Points per batch: all of them unless that would hold more than 2^24
    // values, but never fewer than eight (a lane replay's width).
    let per = count.min((1usize << 24) / width).max(8).min(count);
    let (mut params, mut grads, mut values) = (vec![0.0; per * width], vec![0.0; per * width], vec![0.0; per]);
    let mut written = false;
    for from in (0..count).step_by(per) {
        let k = per.min(count - from);
        for (i, point) in params.chunks_exact_mut(width).take(k).enumerate() {
            point[..x.len()].copy_from_slice(x);
            point[x.len()..].fill(0.0);
            point[x.len() + from + i] = 1.0;
        }
        let chunk = match &mut replicas {
            Replicas::Own(p) => Replicas::Own(p),
            Replicas::Pool(pool) => Replicas::Pool(pool),
        };
        written |= run_into(chunk, &params[..k * width], inputs, k, 0, &mut values[..k], &mut grads[..k * width], same, primal.take())?;
        for (i, g) in grads.chunks_exact(width).take(k).enumerate() {
            rows[(from + i) * keep..(from + i + 1) * keep].copy_from_slice(&g[..keep]);
        }
    }
    Ok(written)
}

/// A tangent plan's value and primal gradient (`Plan::primal_gradient`)
/// into `out`, value first, where its values are the primal point's and
/// it keeps that sweep; whether it did.
pub(super) fn primal(p: &mut Plan, out: &mut [f64]) -> bool {
    let Some((value, gradient)) = out.split_first_mut() else { return false };
    if !matches!(p.primal_gradient(gradient), Ok(true)) {
        return false;
    }
    match p.output(0) {
        Ok(&[v]) => {
            *value = v;
            true
        }
        _ => false,
    }
}
