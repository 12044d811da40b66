//! Many points per call under WebAssembly, on this (the only) thread: a
//! batch, and a derived plan's gradients along every unit direction.

use super::{buffer, flag, status, text_arg, with_plan};
use crate::batch::{self, Replicas};
use crate::core::error::Error;

/// A batch on this (the only) thread, in `batch.rs`'s layout: parameters in
/// scratch 0, inputs in scratch 1, the label for messages (UTF-8) in scratch
/// 3; the `k` values, then the `k` gradients, go to scratch 2.
#[no_mangle]
pub extern "C" fn plan_batch(p: u32, k: u32, params: u32, inputs: u32, label: u32) -> i32 {
    status(with_plan(p, |plan| {
        let label = text_arg(3, label)?;
        let (k, n) = (k as usize, params as usize);
        batch::check(plan, n, inputs as usize, k).map_err(|f| Error(f.message(label)))?;
        let out = buffer::<f64>(2, (k + n) as u32);
        let (values, grads) = out.split_at_mut(k);
        batch::run(Replicas::Own(plan), buffer(0, params), buffer(1, inputs), k, 1, values, grads, 0)
            .map_err(|f| Error(f.message(label)))
    }))
}

/// `batch::units` on this (the only) thread: x in scratch 0, inputs in
/// scratch 1, the label (UTF-8) in scratch 3; the rows go to scratch 2,
/// then, where `primal` > 0 (1 + x's length), the value and gradient at x.
/// 1 if those were written, 0 if not, −1 an error.
#[no_mangle]
pub extern "C" fn plan_units(p: u32, x: u32, inputs: u32, label: u32, rows: u32, primal: u32) -> i32 {
    flag(with_plan(p, |plan| {
        let label = text_arg(3, label)?;
        let (rows, primal) = buffer::<f64>(2, rows.saturating_add(primal)).split_at_mut(rows as usize);
        let primal = (!primal.is_empty()).then_some(primal);
        batch::units(Replicas::Own(plan), buffer(0, x), buffer(1, inputs), rows, primal).map_err(|f| Error(f.message(label)))
    }))
}
