//! The queue JavaScript records small nodes in (src/js/queue.js): its
//! buffers, bound once per thread, and the calls that record from them,
//! which take no argument.

use super::IntoJs;
use crate::api;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::cell::RefCell;

/// The buffers JavaScript queues nodes in (src/js/queue.js), on one
/// ArrayBuffer. Only a patched built-in can reach them; JavaScript checks
/// that they were not detached before each call that reads them.
struct QueueCell {
    ops: Int32Array,
    nums: Float64Array,
    /// The arguments of the calls on the queue (`tape_apply`,
    /// `tape_finish_queued`), which take none: a call with any argument
    /// costs about 70 ns more in napi's borrow bookkeeping.
    args: Int32Array,
}

thread_local! {
    /// This thread's queue, bound once so that no call converts a typed
    /// array or an external (a reference argument cost about 0.1 µs in
    /// napi's borrow bookkeeping): held by reference, read in place. An
    /// environment cleanup hook drops it while the references can still be
    /// deleted (each Node environment has a thread of its own).
    static QUEUE: RefCell<Option<QueueCell>> = const { RefCell::new(None) };
}

/// The slot of a queue's arguments that says another copy of the package's
/// JavaScript bound its own queue since (src/js/queue.js, `own`).
const REVOKED: usize = 7;

/// Bind this thread's queue. Two copies of the package's JavaScript can
/// share one loaded addon in a thread (installs hard-linked to one file, a
/// test runner's second module registry): the copy bound before is told,
/// in its own arguments, and binds again before it next uses the queue or
/// a selected plan, which the thread holds for one copy at a time.
#[napi(catch_unwind)]
pub fn queue_bind(env: Env, ops: Int32Array, nums: Float64Array, args: Int32Array) -> Result<()> {
    let before = QUEUE.with(|q| q.borrow_mut().replace(QueueCell { ops, nums, args }));
    match before {
        None => {
            env.add_env_cleanup_hook((), |()| QUEUE.with(|q| drop(q.borrow_mut().take())))?;
        }
        Some(mut before) => {
            // SAFETY: the other copy's own array, no longer bound, borrowed for this write only.
            if let Some(flag) = unsafe { before.args.as_mut() }.get_mut(REVOKED) {
                *flag = 1;
            }
        }
    }
    Ok(())
}

/// `f` on this thread's queue: its arguments, its entries and its numbers
/// (read, then written by `tape_finish_queued`).
fn with_queue<R>(f: impl FnOnce(&[i32], &[i32], &mut [f64]) -> Result<R>) -> Result<R> {
    QUEUE.with(|q| {
        let mut q = q.borrow_mut();
        let Some(QueueCell { ops, nums, args }) = q.as_mut() else {
            return Err(Error::new(Status::GenericFailure, "the queue is not bound"));
        };
        // SAFETY: the queue's own arrays, distinct, borrowed once for this call.
        f(args, ops, unsafe { nums.as_mut() })
    })
}

fn overflow<T>() -> Result<T> {
    Err(Error::new(Status::InvalidArg, "queue overflow"))
}

/// The queue's argument `i`, a tape, node or count.
fn queue_arg(args: &[i32], i: usize) -> Result<u32> {
    args.get(i).and_then(|&x| u32::try_from(x).ok()).map_or_else(overflow, Ok)
}

/// The first `m` of the queue's numbers.
fn queued(nums: &[f64], m: u32) -> Result<&[f64]> {
    nums.get(..m as usize).map_or_else(overflow, Ok)
}

/// Record the first `n` queued nodes (`3n` entries of `ops`) and their
/// first `m` numbers on tape `t`, the queue's arguments `[t, n, m]`;
/// returns the tape's new length.
#[napi(catch_unwind)]
pub fn tape_apply() -> Result<u32> {
    with_queue(|args, ops, nums| {
        let [t, n, m] = [queue_arg(args, 0)?, queue_arg(args, 1)?, queue_arg(args, 2)?];
        let Some(ops) = ops.get(..3 * n as usize) else { return overflow() };
        api::tape_apply(t, ops, queued(nums, m)?).js()
    })
}

/// `tape_apply` then `tape_finish` in one call, on the queue's buffers, its
/// arguments `[t, n, m, root, swept, leaves, total]`: the leaves' ids
/// follow the `3n` queued entries in `ops`, and their gradients (`total`
/// values) are written over `nums` from the start.
#[napi(catch_unwind)]
pub fn tape_finish_queued() -> Result<f64> {
    with_queue(|args, ops, nums| {
        let mut a = [0u32; 7];
        for (i, x) in a.iter_mut().enumerate() {
            *x = queue_arg(args, i)?;
        }
        let [t, n, m, root, swept, leaves, total] = a;
        let entries = 3 * n as usize;
        let Some(ops) = ops.get(..entries + leaves as usize) else { return overflow() };
        let (queued, ids) = ops.split_at(entries);
        api::tape_finish_queued(t, queued, nums, m as usize, root, swept != 0, ids, total as usize).js()
    })
}
