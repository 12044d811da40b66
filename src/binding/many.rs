//! Many points per call (`batch`, `async`, `batchAsync`): a plan's
//! replicas, and the work that runs them on Rust threads.

use super::{with_plan, PlanCell};
use crate::batch::{self, Failure, Pool, Replicas};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// A plan's replicas as JavaScript holds them: freed when the budget
/// releases the plan (`pool_release`), not when the collector finalizes the
/// external, which a loop that never yields would put off while each pool
/// it dropped held copies of its plan. A call in flight holds its own `Arc`.
pub struct PoolCell(RefCell<Option<Arc<Pool>>>);

/// The pool, if it was not released.
fn pool_of(p: &PoolCell) -> Result<Arc<Pool>> {
    p.0.borrow().clone().ok_or_else(|| Error::new(Status::GenericFailure, "this plan was released"))
}

fn batch_err(f: Failure, label: &str) -> Error {
    Error::new(Status::GenericFailure, f.message(label))
}

/// The plan's replicas for `batch`, `async` and `batchAsync`: one copy of
/// the plan, made here, shared by every call (and kept alive by any call in
/// flight, whatever happens to the JavaScript object). Put into `into`, a
/// released pool's external, where given (None then), as plans are
/// (`plan_external`): a loop that never yields and calls `batch` or
/// `hessian` on each compiled function it makes grew by napi's keeping of
/// one dead external a pool (+42 MB over 180 000 of them).
#[napi(catch_unwind)]
pub fn plan_pool(p: &External<PlanCell>, into: Option<&External<PoolCell>>) -> Result<Option<External<PoolCell>>> {
    let pool = with_plan(p, |p| Ok(Arc::new(Pool::new(p))))?;
    let Some(cell) = into else {
        return Ok(Some(External::new(PoolCell(RefCell::new(Some(pool))))));
    };
    let Ok(mut slot) = cell.0.try_borrow_mut() else {
        return Err(Error::new(Status::GenericFailure, "a pool cannot be remade during its own call"));
    };
    if slot.is_some() {
        return Err(Error::new(Status::GenericFailure, "a pool is remade only into a released one"));
    }
    *slot = Some(pool);
    Ok(None)
}

/// Bytes the pool holds between calls (`Pool::bytes`; 0 once released).
#[napi(catch_unwind)]
pub fn pool_bytes(p: &External<PoolCell>) -> f64 {
    p.0.borrow().as_ref().map_or(0.0, |pool| pool.bytes() as f64)
}

/// Free the pool's replicas now, or when the calls in flight on them end.
#[napi(catch_unwind)]
pub fn pool_release(p: &External<PoolCell>) {
    p.0.replace(None);
}

/// A batch on the calling thread and up to `threads - 1` more (0: the
/// package's thread cap), in `batch.rs`'s layout; values and
/// gradients go into the caller's fresh buffers. Errors say `label: point i: …`.
#[napi(catch_unwind)]
#[allow(clippy::too_many_arguments)]
pub fn plan_batch(
    pool: &External<PoolCell>,
    params: &[f64],
    inputs: &[f64],
    k: u32,
    threads: u32,
    label: String,
    mut values: Float64ArraySlice,
    mut grads: Float64ArraySlice,
) -> Result<()> {
    // SAFETY: two fresh buffers of the caller's, distinct from each other and from every input.
    let (values, grads) = unsafe { (values.as_mut(), grads.as_mut()) };
    let pool = pool_of(pool)?;
    batch::run(Replicas::Pool(&pool), params, inputs, k as usize, threads as usize, values, grads, 0).map_err(|f| batch_err(f, &label))
}

/// A derived plan's gradients along every unit direction past `x` (a
/// Hessian's or a Jacobian's rows, `batch::units`) on its replicas, into
/// the caller's fresh buffers; with `primal`, a Hessian's value and
/// gradient at x too: whether they were written. Errors say `label: point i: …`.
#[napi(catch_unwind)]
pub fn plan_units(
    pool: &External<PoolCell>,
    x: &[f64],
    inputs: &[f64],
    label: String,
    mut rows: Float64ArraySlice,
    primal: Option<Float64ArraySlice>,
) -> Result<bool> {
    // SAFETY: the caller's fresh buffers, distinct from each other and from every input.
    let rows = unsafe { rows.as_mut() };
    let mut primal = primal;
    let primal = primal.as_mut().map(|p| unsafe { p.as_mut() });
    let pool = pool_of(pool)?;
    batch::units(Replicas::Pool(&pool), x, inputs, rows, primal).map_err(|f| batch_err(f, &label))
}

/// A tangent plan's forward Jacobian (`batch::columns`): parameters then
/// inputs flat in `flat`, the Jacobian into the caller's fresh `out`;
/// whether every entry is finite (else JavaScript takes those that are not
/// from the reverse rows).
#[napi(catch_unwind)]
pub fn plan_columns(pool: &External<PoolCell>, flat: &[f64], mut out: Float64ArraySlice) -> Result<bool> {
    // SAFETY: a fresh buffer of the caller's, distinct from `flat`.
    let pool = pool_of(pool)?;
    batch::columns(&pool, flat, unsafe { out.as_mut() }).map_err(super::js_err)
}

/// `plan_batch` as a job (workers.rs says where it runs, and why): a
/// Promise of one Float64Array holding the k values, then the k gradients.
/// The arguments are copied at the call, so the caller may change its
/// arrays at once. The job holds the plan's replicas, so the plan object
/// may be collected meanwhile; if its environment (a worker) ends first,
/// the Promise is dropped unsettled.
#[napi(catch_unwind)]
pub fn plan_batch_async<'e>(
    env: &'e Env,
    pool: &External<PoolCell>,
    params: &[f64],
    inputs: &[f64],
    k: u32,
    threads: u32,
    label: String,
) -> Result<Object<'e>> {
    let (k, threads) = (k as usize, threads as usize);
    let pool = pool_of(pool)?;
    // Refused here, before anything is copied.
    batch::check(pool.plan(), params.len(), inputs.len(), k).map_err(|f| batch_err(f, &label))?;
    let (params, inputs) = (params.to_vec(), inputs.to_vec());
    let (deferred, promise) = env.create_deferred::<Float64Array, _>()?;
    crate::workers::spawn(Box::new(move || {
        // No unwinding may leave a job: a panic becomes a rejection.
        let out = catch_unwind(AssertUnwindSafe(|| {
            let mut out = Vec::new();
            let total = k + params.len();
            out.try_reserve_exact(total)
                .map_err(|_| Error::new(Status::GenericFailure, format!("out of memory: cannot hold {total} results")))?;
            out.resize(total, 0.0);
            let (values, grads) = out.split_at_mut(k);
            batch::run(Replicas::Pool(&pool), &params, &inputs, k, threads, values, grads, 0).map_err(|f| batch_err(f, &label))?;
            Ok(out)
        }))
        .unwrap_or_else(|_| Err(Error::new(Status::GenericFailure, "internal error: an async evaluation panicked")));
        match out {
            Ok(out) => deferred.resolve(move |_| Ok(Float64Array::new(out))),
            Err(e) => deferred.reject(e),
        }
    }));
    Ok(promise)
}
