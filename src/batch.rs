//! Many points per call: one plan evaluated at `k` parameter points, spread
//! over OS threads (`workers.rs`), each thread replaying its own
//! replica of the plan (its own arena). Binding-neutral: the napi binding
//! runs a batch on the calling thread (`batch`) or as a job on a thread of
//! workers.rs (`async`, `batchAsync`); the WebAssembly one on its single thread.
//!
//! The layout both bindings pass: `params` holds point `i`'s parameters,
//! slot after slot, at `i * width` (`width` = the values of one point);
//! `inputs` holds every input once, slot after slot, shared by all points;
//! `values[i]` gets point `i`'s value and `grads[i * width..]` its gradient,
//! laid out like its parameters.
//!
//! Results do not depend on the number of threads: every point is the same
//! replay of the same plan, on an arena that holds nothing from earlier
//! points, so each is bit-identical to a single call.

use crate::core::error::Error;
use crate::core::plan::{Lanes, Plan, LANES};
use crate::core::shape::Shape;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread::ThreadId;

mod directions;
use directions::primal;
pub use directions::{columns, units};

/// The most points one batch takes.
pub const MAX_POINTS: usize = 1 << 24;
/// The most values a batch's parameters may hold (its gradients hold as many).
pub const MAX_VALUES: usize = 1 << 28;
/// The most threads a batch may ask for.
pub const MAX_THREADS: usize = 256;
/// Memory the replicas of one batch may take together: past it, a batch
/// runs on fewer threads (the results are the same).
const REPLICA_BYTES: usize = 1 << 30;
/// Idle replicas a plan keeps between calls, so a sampler calling `batch`
/// every step does not copy its plan every step.
const MAX_IDLE: usize = 16;
/// Work (in nanoseconds, as the last batch measured it) that pays for one
/// more thread. A kept thread still spinning from the last call takes its
/// share within microseconds and is waited for by spinning (workers.rs);
/// one asleep costs tens of microseconds, and up to a scheduler time slice
/// on a busy machine. A batch is worth this many threads rounded to the
/// nearest, not down: each thread's own set-up (a Hessian's lanes at x)
/// counts as work, so a batch measures more on two threads than on one,
/// and with the floor a batch worth two threads settled on one after any
/// call that ran on one. (The regression's 15×15 Hessian: 20 µs of work
/// on one thread, 24 on two; 18–24 µs per call under the floor, as the
/// first calls fell, and ~16 µs on two.)
const WORK_PER_THREAD_NS: u64 = 12_000;

/// A failed batch: the error, and the index of the first point that failed
/// (`None` when the batch as a whole was refused).
#[derive(Debug)]
pub struct Failure {
    pub index: Option<usize>,
    pub error: Error,
}

impl Failure {
    pub fn whole(message: impl Into<String>) -> Failure {
        Failure { index: None, error: Error(message.into()) }
    }

    /// The message users see: `label: point i: error`, or the error alone
    /// when `label` is empty (a single `async` call says what the call would).
    pub fn message(&self, label: &str) -> String {
        match self.index {
            _ if label.is_empty() => self.error.0.clone(),
            Some(i) => format!("{label}: point {i}: {}", self.error.0),
            None => format!("{label}: {}", self.error.0),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means a thread panicked elsewhere; the data it
    // guards (a queue, idle replicas, failures) stays consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A plan's replicas for batches and async calls: a template copied once
/// from the plan, and the idle replicas earlier calls left behind. Shared
/// (`Arc`) by the JavaScript object and every call in flight, so a plan
/// collected while an async call runs frees nothing that call uses.
pub struct Pool {
    template: Plan,
    /// Idle replicas, each with the thread that used it last.
    idle: Mutex<Vec<(ThreadId, Replica)>>,
    /// Nanoseconds one point took in the last batch, 0 before the first:
    /// how many threads the next one is worth.
    point_ns: AtomicU64,
    /// How many points a block holds a multiple of: LANES where the plan
    /// replays in lanes (a group cut short runs its lanes half empty), else 1.
    group: usize,
}

impl Pool {
    pub fn new(plan: &Plan) -> Pool {
        let group = if plan.replays_in_lanes() { LANES } else { 1 };
        Pool { template: plan.clone(), idle: Mutex::new(Vec::new()), point_ns: AtomicU64::new(0), group }
    }

    /// A replica no other thread uses: the one this thread used last if it
    /// is idle, whose arenas (and lane arenas) this thread last wrote.
    /// A new replica is copied outside the lock, so that threads starting
    /// a batch together copy (and fault in) theirs at the same time.
    fn take(&self) -> Replica {
        let me = std::thread::current().id();
        let reused = {
            let mut idle = lock(&self.idle);
            let mine = idle.iter().rposition(|(t, _)| *t == me).or(idle.len().checked_sub(1));
            mine.map(|i| idle.remove(i).1)
        };
        reused.unwrap_or_else(|| Replica { plan: self.template.clone(), lanes: None })
    }

    fn give(&self, p: Replica) {
        let mut idle = lock(&self.idle);
        if idle.len() < MAX_IDLE {
            idle.push((std::thread::current().id(), p));
        }
    }

    pub fn plan(&self) -> &Plan {
        &self.template
    }

    /// Bytes the pool holds between calls: its template and the idle
    /// replicas (each thread that ran a call left one), with their lanes.
    pub fn bytes(&self) -> usize {
        let idle = lock(&self.idle).iter().map(|(_, r)| r.plan.bytes() + r.lanes.as_ref().map_or(0, Lanes::bytes)).sum::<usize>();
        self.template.bytes() + idle
    }
}

/// A copy of the plan for one thread at a time, and the arenas it last
/// replayed lanes in (remade only when the plan cannot use them).
struct Replica {
    plan: Plan,
    lanes: Option<Lanes>,
}

/// Values one point's parameters take.
pub fn width(p: &Plan) -> usize {
    p.params().iter().map(|s| s.shape.size()).sum()
}

/// Values the inputs take.
pub fn inputs_len(p: &Plan) -> usize {
    p.inputs().iter().map(|s| s.shape.size()).sum()
}

/// Check a batch's sizes against the plan before anything is allocated or run.
pub fn check(p: &Plan, params: usize, inputs: usize, k: usize) -> Result<(), Failure> {
    if p.root_shape() != Shape::Scalar {
        return Err(Failure::whole(format!(
            "the objective must return a scalar, got {}. Reduce it with sum() or mean() first.",
            p.root_shape()
        )));
    }
    if k > MAX_POINTS {
        return Err(Failure::whole(format!("{k} points are more than the {MAX_POINTS} a batch takes")));
    }
    let w = width(p);
    match w.checked_mul(k) {
        Some(n) if n <= MAX_VALUES => {}
        _ => {
            return Err(Failure::whole(format!(
                "{k} points of {w} values are more than the {MAX_VALUES} values a batch takes"
            )))
        }
    }
    if params != w * k {
        return Err(Failure::whole(format!("{params} parameter values for {k} points of {w}")));
    }
    if inputs != inputs_len(p) {
        return Err(Failure::whole(format!("{inputs} input values, the plan takes {}", inputs_len(p))));
    }
    Ok(())
}

/// How many threads a batch of `k` points runs on: `asked` (0 for the
/// package's thread cap, `linalg::threads`: the machine's available
/// parallelism unless `TANGENT_GRAD_THREADS` or `set_threads` lowered it,
/// shared with the evaluations already running on the package's threads;
/// `workers::run_on` then takes only those free), at most one per
/// point, and fewer when the replicas would take more than `REPLICA_BYTES`
/// together.
pub fn threads_for(p: &Plan, asked: usize, k: usize) -> usize {
    if cfg!(target_arch = "wasm32") {
        return 1;
    }
    let asked = if asked == 0 { crate::core::linalg::threads::for_kernel() } else { asked };
    // A replica holds values, adjoints and scratch.
    let bytes = p.held().saturating_mul(16).max(1);
    asked.clamp(1, MAX_THREADS).min(k.max(1)).min((REPLICA_BYTES / bytes).max(1))
}

/// How many points a block holds: about eight blocks per thread, so that
/// a thread slowed by other work on the machine takes fewer of them, each
/// a multiple of `group`: whole groups of lanes, since a group cut short
/// runs its lanes half empty (64 regression points on two threads in
/// blocks of four took 1.3× as long as on one thread).
fn block_size(k: usize, threads: usize, group: usize) -> usize {
    k.div_ceil(threads * 8).next_multiple_of(group).max(1)
}

/// A run of consecutive points one thread takes at a time.
struct Block<'a> {
    first: usize,
    values: &'a mut [f64],
    grads: &'a mut [f64],
}

/// What the threads of one batch share.
struct Shared<'a> {
    params: &'a [f64],
    inputs: &'a [f64],
    width: usize,
    queue: Mutex<std::vec::IntoIter<Block<'a>>>,
    /// The lowest index that failed so far (`usize::MAX` while none has):
    /// points above it need not run.
    stop: AtomicUsize,
    failures: Mutex<Vec<Failure>>,
    /// Leading parameter slots every point holds the same values in: after
    /// its first point, a replica of a tangent plan replays only the steps
    /// that depend on the others (`Plan::forward_tangent`). Then only the
    /// gradients over these slots are wanted, which lanes sweep to alone
    /// (`Plan::replay_lanes`).
    same_slots: usize,
    /// Points evaluated, and the nanoseconds the threads spent on them.
    done: AtomicUsize,
    busy_ns: AtomicU64,
    /// Where the first replica to end its blocks at the points' shared
    /// slots writes the value and gradient there (`units`), and whether it did.
    primal: Mutex<Option<&'a mut [f64]>>,
    primal_written: AtomicBool,
}

/// `work`, timed into `s.busy_ns` (not under WebAssembly, which has no clock here).
fn timed_work(r: &mut Replica, s: &Shared) {
    #[cfg(not(target_arch = "wasm32"))]
    let t0 = std::time::Instant::now();
    work(&mut r.plan, &mut r.lanes, s);
    #[cfg(not(target_arch = "wasm32"))]
    s.busy_ns.fetch_add(t0.elapsed().as_nanos().min(u64::MAX as u128) as u64, Ordering::Relaxed);
}

/// Feed the inputs once (and the slots every point holds alike), then
/// evaluate blocks from the queue until it is empty or a lower point has
/// failed. `cached`: lane arenas to reuse, and where to leave them.
fn work(p: &mut Plan, cached: &mut Option<Lanes>, s: &Shared) {
    // A thread too late for a block has nothing to feed or make lanes for.
    let Some(first) = lock(&s.queue).next() else { return };
    let (np, count) = (p.params().len(), p.slot_count());
    let mut feed = |slots: std::ops::Range<usize>, from: &[f64]| {
        let mut at = 0;
        for slot in slots {
            let n = p.slot_size(slot);
            if let Err(error) = p.set(slot, &from[at..at + n]) {
                lock(&s.failures).push(Failure { index: None, error });
                s.stop.store(0, Ordering::Relaxed);
                return false;
            }
            at += n;
        }
        true
    };
    // The alike slots from the first point (the non-lane path feeds them again with each).
    if !feed(0..s.same_slots.min(np), s.params) || !feed(np..count, s.inputs) {
        return;
    }
    // A plan whose every step that depends on a parameter has a lane
    // kernel cannot fail at a point: its points go through in groups of
    // LANES, what depends on the slots held alike computed once.
    let mut lanes = if s.width > 0 { p.lanes(cached.take(), s.same_slots, true) } else { None };
    let replayed = blocks(p, &mut lanes, np, s, first);
    *cached = lanes;
    if replayed && s.stop.load(Ordering::Relaxed) == usize::MAX {
        // Taken out of the lock first: the other threads need not wait out the sweep.
        let out = lock(&s.primal).take();
        if let Some(out) = out {
            s.primal_written.store(primal(p, out), Ordering::Relaxed);
        }
    }
}

/// Evaluate `first`, then blocks from the queue until it is empty or a
/// lower point has failed. Whether the plan's values are then those of the
/// slots every point holds alike (its lanes were made, or it replayed a point).
fn blocks(p: &mut Plan, lanes: &mut Option<Lanes>, np: usize, s: &Shared, first: Block) -> bool {
    let (mut primed, mut replayed) = (false, lanes.is_some());
    let mut next = Some(first);
    loop {
        let Some(block) = next.take().or_else(|| lock(&s.queue).next()) else { return replayed };
        if block.first > s.stop.load(Ordering::Relaxed) {
            return replayed; // blocks come in order: every later one is above it too
        }
        if let Some(lanes) = lanes {
            let w = s.width;
            let params = &s.params[block.first * w..(block.first + block.values.len()) * w];
            let groups = block.values.chunks_mut(LANES).zip(block.grads.chunks_mut(LANES * w));
            for ((values, grads), points) in groups.zip(params.chunks(LANES * w)) {
                p.replay_lanes(lanes, points, w, values, grads);
            }
            s.done.fetch_add(block.values.len(), Ordering::Relaxed);
            continue;
        }
        for (j, value) in block.values.iter_mut().enumerate() {
            let i = block.first + j;
            if i > s.stop.load(Ordering::Relaxed) {
                return replayed;
            }
            let point = &s.params[i * s.width..(i + 1) * s.width];
            let grad = &mut block.grads[j * s.width..(j + 1) * s.width];
            let from = if primed { s.same_slots } else { 0 };
            if let Err(error) = one(p, from, np, point, value, grad) {
                s.stop.fetch_min(i, Ordering::Relaxed);
                lock(&s.failures).push(Failure { index: Some(i), error });
                return false;
            }
            (primed, replayed) = (p.replays_tangents_alone(), true);
        }
        s.done.fetch_add(block.values.len(), Ordering::Relaxed);
    }
}

/// One point: feed its parameters, replay forward and backward, write out.
/// With `from` > 0, the plan holds this point's values of the slots before
/// `from` and their steps from the point before (a tangent plan whose
/// tangents alone move): only the others are fed and what depends on them
/// replayed. The values are the same: the sweep writes no value and no
/// scratch a forward step left (an LU's factors stay).
fn one(p: &mut Plan, from: usize, np: usize, point: &[f64], value: &mut f64, grad: &mut [f64]) -> crate::core::error::Result<()> {
    let mut at = 0;
    for slot in 0..np {
        let n = p.slot_size(slot);
        if slot >= from {
            p.set(slot, &point[at..at + n])?;
        }
        at += n;
    }
    *value = if from == 0 {
        crate::api::plan_evaluate(p)?
    } else {
        let value = p.forward_tangent()?[0];
        p.backward();
        value
    };
    let mut at = 0;
    for slot in 0..np {
        let n = p.slot_size(slot);
        p.gradient(slot, &mut grad[at..at + n])?;
        at += n;
    }
    Ok(())
}

/// Where a batch gets its replicas: the caller's own plan (one thread), or
/// a pool (any number).
pub enum Replicas<'a> {
    Own(&'a mut Plan),
    Pool(&'a Pool),
}

impl Replicas<'_> {
    /// The plan the replicas copy.
    fn plan(&self) -> &Plan {
        match self {
            Replicas::Own(p) => p,
            Replicas::Pool(pool) => pool.plan(),
        }
    }
}

/// Evaluate a batch (the layout is in the module's comment) on up to
/// `threads` threads (0: the package's thread cap, `threads_for`; always one
/// with `Replicas::Own`). Every point holds the same values in the first
/// `same_slots` parameter slots (`units`; 0 otherwise), and then only the
/// gradients over those slots are wanted: the values and the others'
/// gradients may be left unwritten. On failure, the error of the lowest
/// failing point.
#[allow(clippy::too_many_arguments)]
pub fn run(
    replicas: Replicas,
    params: &[f64],
    inputs: &[f64],
    k: usize,
    threads: usize,
    values: &mut [f64],
    grads: &mut [f64],
    same_slots: usize,
) -> Result<(), Failure> {
    run_into(replicas, params, inputs, k, threads, values, grads, same_slots, None).map(|_| ())
}

/// `run`, and with `primal` (a tangent plan's points, `units`) the value
/// and gradient at the slots every point holds alike (`primal`): whether
/// they were written.
#[allow(clippy::too_many_arguments)]
fn run_into(
    replicas: Replicas,
    params: &[f64],
    inputs: &[f64],
    k: usize,
    threads: usize,
    values: &mut [f64],
    grads: &mut [f64],
    same_slots: usize,
    primal: Option<&mut [f64]>,
) -> Result<bool, Failure> {
    let plan = replicas.plan();
    check(plan, params.len(), inputs.len(), k)?;
    let width = width(plan);
    if values.len() != k || grads.len() != k * width {
        return Err(Failure::whole("result buffers do not match the batch"));
    }
    let capped = threads == 0; // the default: the cap's threads, only those free
    let (threads, group) = match replicas {
        Replicas::Own(_) => (1, LANES),
        Replicas::Pool(pool) => {
            // No more threads than the work pays for, judged by the last batch.
            let point_ns = pool.point_ns.load(Ordering::Relaxed);
            let worth = if point_ns == 0 { usize::MAX } else { (point_ns.saturating_mul(k as u64).saturating_add(WORK_PER_THREAD_NS / 2) / WORK_PER_THREAD_NS) as usize };
            (threads_for(plan, threads, k).min(worth.max(1)), pool.group)
        }
    };
    let size = block_size(k, threads, group);
    let mut blocks = Vec::with_capacity(k.div_ceil(size));
    let (mut v, mut g) = (values, grads);
    let mut first = 0;
    while first < k {
        let n = size.min(k - first);
        let (vh, vt) = std::mem::take(&mut v).split_at_mut(n);
        let (gh, gt) = std::mem::take(&mut g).split_at_mut(n * width);
        blocks.push(Block { first, values: vh, grads: gh });
        (v, g) = (vt, gt);
        first += n;
    }
    // A thread with no block would still copy a replica (and fault in its pages) for nothing.
    let threads = threads.min(blocks.len()).max(1);
    let shared = Shared {
        params,
        inputs,
        width,
        queue: Mutex::new(blocks.into_iter()),
        stop: AtomicUsize::new(usize::MAX),
        failures: Mutex::new(Vec::new()),
        same_slots,
        done: AtomicUsize::new(0),
        busy_ns: AtomicU64::new(0),
        primal: Mutex::new(primal),
        primal_written: AtomicBool::new(false),
    };
    // A panic (a bug) ends its thread's work and becomes an error; the
    // replica it was using is dropped, not returned to the pool.
    let guarded = |f: &mut dyn FnMut()| {
        if catch_unwind(AssertUnwindSafe(f)).is_err() {
            lock(&shared.failures).push(Failure::whole("internal error: a batch thread panicked"));
            shared.stop.store(0, Ordering::Relaxed);
        }
    };
    match replicas {
        Replicas::Own(p) => guarded(&mut || work(p, &mut None, &shared)),
        Replicas::Pool(pool) => {
            let on_a_replica = || {
                guarded(&mut || {
                    let mut p = pool.take();
                    timed_work(&mut p, &shared);
                    pool.give(p);
                })
            };
            crate::workers::run_on(threads - 1, crate::core::linalg::threads::available().saturating_sub(1), capped, &on_a_replica);
            let done = shared.done.load(Ordering::Relaxed) as u64;
            if let Some(per_point) = shared.busy_ns.load(Ordering::Relaxed).checked_div(done) {
                pool.point_ns.store(per_point.max(1), Ordering::Relaxed);
            }
        }
    }
    let failures = shared.failures.into_inner().unwrap_or_else(|e| e.into_inner());
    match failures.into_iter().min_by_key(|f| f.index.unwrap_or(0)) {
        Some(f) => Err(f),
        None => Ok(shared.primal_written.into_inner()),
    }
}

#[cfg(test)]
mod tests;
