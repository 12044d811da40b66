//! Many points per call under WebAssembly, on this (the only) thread: a
//! batch, and a derived plan's gradients along every unit direction.

use super::{buffer, status, text_arg, with_plan};
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
/// scratch 1, the label (UTF-8) in scratch 3; the rows go to scratch 2.
#[no_mangle]
pub extern "C" fn plan_units(p: u32, x: u32, inputs: u32, label: u32, rows: u32) -> i32 {
    status(with_plan(p, |plan| {
        let label = text_arg(3, label)?;
        let rows = buffer::<f64>(2, rows);
        batch::units(Replicas::Own(plan), buffer(0, x), buffer(1, inputs), rows).map_err(|f| Error(f.message(label)))
    }))
}
