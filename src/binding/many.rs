//! Many points per call (`batch`, `async`, `batchAsync`): a plan's
//! replicas, and the work that runs them on Rust threads or the libuv pool.

use super::{with_plan, PlanCell};
use crate::batch::{self, Failure, Pool, Replicas};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

fn batch_err(f: Failure, label: &str) -> Error {
    Error::new(Status::GenericFailure, f.message(label))
}

/// The plan's replicas for `batch`, `async` and `batchAsync`: one copy of
/// the plan, made here, shared by every call (and kept alive by any call in
/// flight, whatever happens to the JavaScript object).
#[napi(catch_unwind)]
pub fn plan_pool(p: &External<PlanCell>) -> Result<External<Arc<Pool>>> {
    with_plan(p, |p| Ok(External::new(Arc::new(Pool::new(p)))))
}

/// A batch on the calling thread and up to `threads - 1` more (0: the
/// machine's available parallelism), in `batch.rs`'s layout; values and
/// gradients go into the caller's fresh buffers. Errors say `label: point i: …`.
#[napi(catch_unwind)]
#[allow(clippy::too_many_arguments)]
pub fn plan_batch(
    pool: &External<Arc<Pool>>,
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
    batch::run(Replicas::Pool(pool), params, inputs, k as usize, threads as usize, values, grads).map_err(|f| batch_err(f, &label))
}

/// A batch computed on the libuv thread pool, its arguments copied here.
pub struct BatchTask {
    pool: Arc<Pool>,
    params: Vec<f64>,
    inputs: Vec<f64>,
    k: usize,
    threads: usize,
    label: String,
}

impl Task for BatchTask {
    /// The k values, then the k gradients.
    type Output = Vec<f64>;
    type JsValue = Float64Array;

    fn compute(&mut self) -> Result<Vec<f64>> {
        // No unwinding may reach libuv: a panic becomes a rejection.
        catch_unwind(AssertUnwindSafe(|| {
            let p = self.pool.plan();
            batch::check(p, self.params.len(), self.inputs.len(), self.k).map_err(|f| batch_err(f, &self.label))?;
            let mut out = Vec::new();
            let total = self.k + self.params.len();
            out.try_reserve_exact(total)
                .map_err(|_| Error::new(Status::GenericFailure, format!("out of memory: cannot hold {total} results")))?;
            out.resize(total, 0.0);
            let (values, grads) = out.split_at_mut(self.k);
            batch::run(Replicas::Pool(&self.pool), &self.params, &self.inputs, self.k, self.threads, values, grads)
                .map_err(|f| batch_err(f, &self.label))?;
            Ok(out)
        }))
        .unwrap_or_else(|_| Err(Error::new(Status::GenericFailure, "internal error: an async evaluation panicked")))
    }

    fn resolve(&mut self, _env: Env, out: Vec<f64>) -> Result<Float64Array> {
        Ok(Float64Array::new(out))
    }
}

/// `plan_batch` on the libuv pool: a Promise of one Float64Array holding the
/// k values, then the k gradients. The arguments are copied at the call, so
/// the caller may change its arrays at once.
#[napi(catch_unwind)]
pub fn plan_batch_async(
    pool: &External<Arc<Pool>>,
    params: &[f64],
    inputs: &[f64],
    k: u32,
    threads: u32,
    label: String,
) -> Result<AsyncTask<BatchTask>> {
    let (k, threads) = (k as usize, threads as usize);
    // Refused here, before anything is copied.
    batch::check(pool.plan(), params.len(), inputs.len(), k).map_err(|f| batch_err(f, &label))?;
    let pool = Arc::clone(pool);
    Ok(AsyncTask::new(BatchTask { pool, params: params.to_vec(), inputs: inputs.to_vec(), k, threads, label }))
}
