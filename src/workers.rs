//! Threads kept parked between batches. Waking a parked thread costs a
//! fraction of spawning one (spawn and join: 43 µs on the 2-core VM), which
//! a batch of 256 small points felt as 80 µs per call.
//!
//! `run_on(extra, f)` runs `f` on the calling thread and offers it to up to
//! `extra` others; it returns once every run that started has ended
//! (spinning for it a while first: the other thread's share is most often
//! nearly done, and a sleeping waiter takes tens of microseconds to wake), and
//! withdraws offers no thread took in time (their share of the work was done
//! by the others). At most `available parallelism - 1` threads are kept;
//! more are spawned for the call and joined. No thread exists until a batch
//! asks for one (never under WebAssembly, where batches run on one thread).
//!
//! `spawn(job)` runs a job (an `async` call) on one of the threads kept for
//! jobs, one per core, made at the first. Not on libuv's pool: its four
//! threads on two cores hand a sampler's consecutive calls to whichever
//! thread waited longest, often on the busy core (two gp200 calls in flight
//! measured 1.2–1.4× sequential calls, against 1.6–1.7× here), and a long
//! evaluation there would hold up the file system, DNS and crypto work
//! that share the pool. A job thread that has just finished spins for the
//! next job before it sleeps, as a batch thread does.
//!
//! The thread cap (`TANGENT_GRAD_THREADS`, `setThreads`) bounds the
//! package's threads at work, counted in `AT_WORK`: a running job takes one,
//! and a batch at the default thread count takes its threads (the
//! caller's too, unless it is a job's) from those free when it starts,
//! never waiting: at least the caller's. A job waits
//! on its job thread until one is free. So two `batchAsync` calls issued
//! together run on at most the cap's threads (most often one after the
//! other), not on three threads of a two-thread cap.

use crate::core::linalg::threads::as_worker;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

const OFFERED: u8 = 0;
const TAKEN: u8 = 1;
const WITHDRAWN: u8 = 2;

/// `f` as offered to one thread: a pointer whose lifetime `run_on` erases
/// and guarantees, by not returning while any thread may still call it.
struct Offer {
    f: *const (dyn Fn() + Sync),
    state: AtomicU8,
    /// Set when a taken offer's run has ended: what `run_on` spins on,
    /// then sleeps on `ended` for (set before `ended` is locked, so a
    /// waiter that found it unset under the lock is woken).
    over: AtomicBool,
    ended: Mutex<()>,
    ended_cv: Condvar,
}

// SAFETY: `f` is Sync and outlives every use (see `run_on`).
unsafe impl Send for Offer {}
unsafe impl Sync for Offer {}

struct Parked {
    offers: Mutex<VecDeque<Arc<Offer>>>,
    offered: Condvar,
    /// Kept threads waiting on `offered` (not spinning, not working).
    asleep: AtomicUsize,
    threads: Mutex<usize>,
}

/// How long a kept thread looks for the next offer before it sleeps: a
/// sampler calls `batch` again within this, and a sleeping thread takes
/// tens of microseconds to wake (and its waker as long to wake it).
const SPIN: Duration = Duration::from_micros(200);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing under these locks can panic half-way.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn parked() -> &'static Parked {
    static PARKED: OnceLock<Parked> = OnceLock::new();
    PARKED.get_or_init(|| Parked {
        offers: Mutex::new(VecDeque::new()),
        offered: Condvar::new(),
        asleep: AtomicUsize::new(0),
        threads: Mutex::new(0),
    })
}

/// A kept thread's life: take offers, run the ones not withdrawn.
fn serve(p: &'static Parked) {
    let spin = || {
        for _ in 0..64 {
            std::hint::spin_loop();
        }
    };
    loop {
        let offer = next(&p.offers, &p.offered, &p.asleep, spin);
        if offer.state.compare_exchange(OFFERED, TAKEN, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            // SAFETY: taken before withdrawn, so `run_on` waits for `over`.
            let _ = catch_unwind(AssertUnwindSafe(|| unsafe { (*offer.f)() }));
            offer.over.store(true, Ordering::Release);
            drop(lock(&offer.ended));
            offer.ended_cv.notify_all();
        }
    }
}

/// The next item of `queue`: looked for during `SPIN`, with `pause`
/// between looks, then waited for on `queued` (`asleep` counting the
/// threads that wait).
fn next<T>(queue: &Mutex<VecDeque<T>>, queued: &Condvar, asleep: &AtomicUsize, pause: impl Fn()) -> T {
    let start = Instant::now();
    while start.elapsed() < SPIN {
        if let Some(item) = queue.try_lock().ok().and_then(|mut q| q.pop_front()) {
            return item;
        }
        pause();
    }
    let mut q = lock(queue);
    asleep.fetch_add(1, Ordering::SeqCst);
    let item = loop {
        match q.pop_front() {
            Some(item) => break item,
            None => q = queued.wait(q).unwrap_or_else(|e| e.into_inner()),
        }
    };
    asleep.fetch_sub(1, Ordering::SeqCst);
    item
}

/// Keep up to `want` threads parked (at most the machine's parallelism - 1);
/// how many there are.
fn keep(want: usize, most: usize) -> usize {
    let p = parked();
    let mut n = lock(&p.threads);
    while *n < want.min(most) {
        let spawned = std::thread::Builder::new().name("tangent-grad batch".into()).spawn(move || serve(p));
        if spawned.is_err() {
            break;
        }
        *n += 1;
    }
    *n
}

/// The package's threads at work, against the thread cap (the module's comment).
#[cfg(not(target_arch = "wasm32"))]
static AT_WORK: Slots = Slots::new();

/// Run `f` here and on up to `extra` other threads (see the module's comment);
/// `most_kept` bounds the threads kept parked. With `capped`, only as many
/// others as the thread cap has free.
pub fn run_on(extra: usize, most_kept: usize, capped: bool, f: &(dyn Fn() + Sync)) {
    // The calling thread counts too, unless it is a job's, which holds its slot.
    #[cfg(not(target_arch = "wasm32"))]
    let (_taken, extra) = if capped && extra > 0 {
        let caller = usize::from(!crate::core::linalg::threads::on_worker());
        let taken = Taken(AT_WORK.take_free(extra + caller, crate::core::linalg::threads::threads()));
        let extra = taken.0.saturating_sub(caller);
        (taken, extra)
    } else {
        (Taken(0), extra)
    };
    #[cfg(target_arch = "wasm32")]
    let _ = capped;
    if extra == 0 {
        f();
        return;
    }
    // Each run is one evaluation sharing the cores (linalg/threads.rs).
    let f: &(dyn Fn() + Sync) = &|| as_worker(f);
    let kept = keep(extra, most_kept).min(extra);
    let p = parked();
    // SAFETY (lifetime erasure): every offer is withdrawn or has ended before this returns.
    let erased: *const (dyn Fn() + Sync) = unsafe { std::mem::transmute(f) };
    let offers: Vec<Arc<Offer>> = (0..kept)
        .map(|_| {
            Arc::new(Offer { f: erased, state: AtomicU8::new(OFFERED), over: AtomicBool::new(false), ended: Mutex::new(()), ended_cv: Condvar::new() })
        })
        .collect();
    {
        let mut q = lock(&p.offers);
        q.extend(offers.iter().cloned());
    }
    // A thread that is spinning takes an offer unwoken. One that goes to
    // sleep after this check looks at the queue first, under its lock, and
    // finds the offer; an offer no thread takes in time is withdrawn below.
    for _ in 0..kept.min(p.asleep.load(Ordering::SeqCst)) {
        p.offered.notify_one();
    }
    std::thread::scope(|scope| {
        for _ in kept..extra {
            // A thread that cannot be spawned leaves its share to the others.
            let _ = std::thread::Builder::new().spawn_scoped(scope, f);
        }
        f();
    });
    for o in &offers {
        if o.state.compare_exchange(OFFERED, WITHDRAWN, Ordering::AcqRel, Ordering::Acquire).is_err() {
            // Once it is over, `f` is no longer called: the offer, which
            // that thread still holds, may outlive this call.
            let start = Instant::now();
            while !o.over.load(Ordering::Acquire) && start.elapsed() < SPIN {
                (0..64).for_each(|_| std::hint::spin_loop());
            }
            if o.over.load(Ordering::Acquire) {
                continue;
            }
            let mut asleep = lock(&o.ended);
            while !o.over.load(Ordering::Acquire) {
                asleep = o.ended_cv.wait(asleep).unwrap_or_else(|e| e.into_inner());
            }
        }
    }
}

/// How many of something run at once, at most a number read at each turn
/// (the cap, which `setThreads` may change meanwhile).
#[cfg(not(target_arch = "wasm32"))]
struct Slots {
    running: Mutex<usize>,
    freed: Condvar,
}

#[cfg(not(target_arch = "wasm32"))]
impl Slots {
    const fn new() -> Self {
        Slots { running: Mutex::new(0), freed: Condvar::new() }
    }

    /// Up to `n` slots of those free under `most`, taken now without
    /// waiting; how many (`Taken` gives them back).
    fn take_free(&self, n: usize, most: usize) -> usize {
        let mut running = lock(&self.running);
        let k = n.min(most.saturating_sub(*running));
        *running += k;
        k
    }

    fn give(&self, k: usize) {
        *lock(&self.running) -= k;
        self.freed.notify_all();
    }

    /// `f` once fewer than `most()` others run. The wait is re-checked now
    /// and then, so a cap raised while one waits is seen without a release.
    fn run<R>(&self, most: impl Fn() -> usize, f: impl FnOnce() -> R) -> R {
        let mut running = lock(&self.running);
        while *running >= most().max(1) {
            running = self.freed.wait_timeout(running, Duration::from_millis(5)).unwrap_or_else(|e| e.into_inner()).0;
        }
        *running += 1;
        drop(running);
        struct Release<'a>(&'a Slots);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                *lock(&self.0.running) -= 1;
                self.0.freed.notify_one();
            }
        }
        let _release = Release(self);
        f()
    }
}

/// Slots of `AT_WORK` a batch took, given back when it ends (a panic included).
#[cfg(not(target_arch = "wasm32"))]
struct Taken(usize);

#[cfg(not(target_arch = "wasm32"))]
impl Drop for Taken {
    fn drop(&mut self) {
        if self.0 > 0 {
            AT_WORK.give(self.0);
        }
    }
}

/// Async jobs (the module's comment says why they have threads of their
/// own). Not under WebAssembly, where async calls run at the call.
#[cfg(not(target_arch = "wasm32"))]
mod jobs {
    use super::{as_worker, lock, next, AT_WORK};
    use crate::core::linalg::threads::threads;
    use std::collections::VecDeque;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Condvar, Mutex, OnceLock};

    type Job = Box<dyn FnOnce() + Send>;

    struct Jobs {
        queue: Mutex<VecDeque<Job>>,
        queued: Condvar,
        /// Job threads running (none, if none could be started).
        threads: AtomicUsize,
        /// Job threads waiting for a job (not spinning, not working).
        asleep: AtomicUsize,
    }

    /// Run `job` on a job thread, after the jobs queued before it (or here,
    /// now, if no job thread could be started).
    pub fn spawn(job: Job) {
        static JOBS: OnceLock<Jobs> = OnceLock::new();
        let mut first = false;
        let jobs = JOBS.get_or_init(|| {
            first = true;
            Jobs { queue: Mutex::new(VecDeque::new()), queued: Condvar::new(), threads: AtomicUsize::new(0), asleep: AtomicUsize::new(0) }
        });
        if first {
            for _ in 0..std::thread::available_parallelism().map_or(1, |n| n.get()) {
                if std::thread::Builder::new().name("tangent-grad async".into()).spawn(move || run_jobs(jobs)).is_ok() {
                    jobs.threads.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
        if jobs.threads.load(Ordering::SeqCst) == 0 {
            let _ = catch_unwind(AssertUnwindSafe(job));
            return;
        }
        lock(&jobs.queue).push_back(job);
        jobs.queued.notify_one();
    }

    /// A job thread's life. A job that panics (a bug) ends there, not the thread.
    fn run_jobs(jobs: &'static Jobs) {
        loop {
            // The caller, woken by the job just finished, likely waits for
            // this core: it settles that job's Promise and queues the next.
            let job = next(&jobs.queue, &jobs.queued, &jobs.asleep, std::thread::yield_now);
            let _ = catch_unwind(AssertUnwindSafe(|| AT_WORK.run(threads, || as_worker(job))));
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
pub use jobs::spawn;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_run_ends_before_run_on_returns() {
        for extra in [0, 1, 3, 8] {
            for _ in 0..200 {
                let runs = AtomicUsize::new(0);
                let busy = AtomicUsize::new(0);
                run_on(extra, 2, false, &|| {
                    busy.fetch_add(1, Ordering::SeqCst);
                    runs.fetch_add(1, Ordering::SeqCst);
                    busy.fetch_sub(1, Ordering::SeqCst);
                });
                // Nothing still running, and at least the caller's own run.
                assert_eq!(busy.load(Ordering::SeqCst), 0);
                let n = runs.load(Ordering::SeqCst);
                assert!((1..=extra + 1).contains(&n), "{n} runs for {extra} extra");
            }
        }
    }

    /// A share that outlasts the caller's spin is waited for asleep (the
    /// condvar), one that ends within it by the flag: neither returns early.
    #[test]
    fn a_share_longer_or_shorter_than_the_spin_is_waited_for() {
        let caller = std::thread::current().id();
        let mut taken = 0;
        for i in 0..60 {
            let (started, ended) = (AtomicUsize::new(0), AtomicUsize::new(0));
            let long = i % 2 == 0;
            run_on(1, 2, false, &|| {
                if std::thread::current().id() == caller {
                    // Long enough for the kept thread to take the offer.
                    std::thread::sleep(SPIN / 4);
                } else {
                    started.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(if long { SPIN * 3 } else { SPIN / 20 });
                    ended.fetch_add(1, Ordering::SeqCst);
                }
            });
            assert_eq!(started.load(Ordering::SeqCst), ended.load(Ordering::SeqCst), "returned before the share ended");
            taken += started.load(Ordering::SeqCst);
        }
        // A kept thread spinning from the call before takes most offers.
        assert!(taken > 0, "no offer was ever taken");
    }

    #[test]
    fn concurrent_callers_share_the_kept_threads() {
        let total = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..100 {
                        let work = AtomicUsize::new(1000);
                        run_on(2, 2, false, &|| {
                            while work.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| w.checked_sub(1)).is_ok() {
                                total.fetch_add(1, Ordering::SeqCst);
                            }
                        });
                        assert_eq!(work.load(Ordering::SeqCst), 0, "all work done before returning");
                    }
                });
            }
        });
        assert_eq!(total.load(Ordering::SeqCst), 4 * 100 * 1000);
    }

    #[test]
    fn slots_run_at_most_their_number_at_once_and_see_it_change() {
        let slots = Slots::new();
        let most = AtomicUsize::new(1);
        let (busy, peak, runs) = (AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0));
        let work = || {
            let now = busy.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_micros(300));
            busy.fetch_sub(1, Ordering::SeqCst);
            runs.fetch_add(1, Ordering::SeqCst);
        };
        let round = |threads: usize| {
            peak.store(0, Ordering::SeqCst);
            std::thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(|| (0..20).for_each(|_| slots.run(|| most.load(Ordering::SeqCst), work)));
                }
            });
            peak.load(Ordering::SeqCst)
        };
        assert_eq!(round(4), 1, "one at a time under a cap of 1");
        most.store(3, Ordering::SeqCst);
        let at_three = round(6);
        assert!((2..=3).contains(&at_three), "{at_three} at once under a cap of 3");
        // A panic in a run gives its slot back.
        most.store(1, Ordering::SeqCst);
        let failed = catch_unwind(AssertUnwindSafe(|| slots.run(|| 1, || panic!("a failing job"))));
        assert!(failed.is_err());
        assert_eq!(*lock(&slots.running), 0);
        assert_eq!(runs.load(Ordering::SeqCst), 4 * 20 + 6 * 20);
    }

    #[test]
    fn slots_taken_without_waiting_are_those_free_and_count_until_given_back() {
        let slots = Slots::new();
        assert_eq!(slots.take_free(3, 2), 2, "no more than the cap");
        assert_eq!(slots.take_free(1, 2), 0, "none free");
        let waited = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| slots.run(|| 2, || waited.store(true, Ordering::SeqCst)));
            std::thread::sleep(Duration::from_millis(20));
            assert!(!waited.load(Ordering::SeqCst), "a job waits while the slots are taken");
            slots.give(1);
        });
        assert!(waited.load(Ordering::SeqCst));
        assert_eq!(*lock(&slots.running), 1);
    }

    #[test]
    fn every_job_runs_once_and_a_panic_ends_only_its_job() {
        let (tx, rx) = std::sync::mpsc::channel();
        for i in 0..500 {
            let tx = tx.clone();
            spawn(Box::new(move || {
                if i % 100 == 7 {
                    panic!("job {i} fails");
                }
                tx.send(i).unwrap();
            }));
        }
        drop(tx);
        let mut got: Vec<i32> = rx.iter().collect();
        got.sort_unstable();
        assert_eq!(got, (0..500).filter(|i| i % 100 != 7).collect::<Vec<_>>());
    }
}
