//! How many threads one large factorization, solve or product may take.
//!
//! - The cap: the machine's available parallelism, or fewer when the
//!   environment variable `TANGENT_GRAD_THREADS` says so (read once, at the
//!   first question; `1` means one thread), or what `set_threads` set last.
//! - One level gets the cores, never both: while the package's own worker
//!   threads (`src/workers.rs`: a batch's threads, `async` calls) evaluate,
//!   each counts as one evaluation running, and a kernel takes the cap
//!   shared by the evaluations running (at least one thread). A batch on
//!   every core thus runs its kernels on one thread each; a single call,
//!   sync or async, takes every thread of the cap. A batch's default
//!   thread count is the same share (`batch::threads_for`), of which it
//!   takes only the threads free (`workers.rs`, `AT_WORK`).
//! - The threads are rayon's global pool, which faer's `Par::Rayon` runs on
//!   (sized to the machine, started at the first parallel kernel); the
//!   caller waits while the pool works, so the threads busy stay at the cap.
//! - faer's blocked kernels split the output among threads, never a sum, so
//!   the thread count changes no bit of a result (`tests/threads.rs`).
//!   The exception, matrix-vector products whose reduction faer splits, is
//!   kept sequential by `library.rs`.
//!
//! Under WebAssembly there is one thread: the cap is 1 and cannot be set.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The cap; 0 until first read.
static CAP: AtomicUsize = AtomicUsize::new(0);
/// Evaluations running on the package's worker threads.
static RUNNING: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Whether this thread is running an evaluation for `workers.rs`.
    static WORKER: Cell<bool> = const { Cell::new(false) };
}

/// The machine's available parallelism (1 under WebAssembly), asked once.
pub fn available() -> usize {
    if cfg!(target_arch = "wasm32") {
        return 1;
    }
    static AVAILABLE: OnceLock<usize> = OnceLock::new();
    *AVAILABLE.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// `TANGENT_GRAD_THREADS` as a cap: a whole number from 1 up, at most the
/// machine's parallelism; anything else (unset, 0, not a number) leaves the
/// machine's parallelism.
fn from_env(value: Option<&str>) -> usize {
    let most = available();
    match value.map(|v| v.trim().parse::<usize>()) {
        Some(Ok(n)) if n >= 1 => n.min(most),
        _ => most,
    }
}

/// The cap on one kernel's threads.
pub fn threads() -> usize {
    match CAP.load(Ordering::Relaxed) {
        0 => {
            let cap = from_env(std::env::var("TANGENT_GRAD_THREADS").ok().as_deref());
            // A `set_threads` racing this read wins.
            match CAP.compare_exchange(0, cap, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => cap,
                Err(set) => set,
            }
        }
        cap => cap,
    }
}

/// Set the cap (0: the machine's available parallelism; more than that is
/// cut to it) and return the cap now in effect. Always 1 under WebAssembly.
pub fn set_threads(n: usize) -> usize {
    let most = available();
    let cap = if n == 0 { most } else { n.min(most) };
    CAP.store(cap, Ordering::Relaxed);
    cap
}

/// Run `f` as one evaluation of the package's worker threads (`workers.rs`
/// wraps each batch run and each async job): kernels inside it share the
/// cap with the other evaluations running. Nested calls count once.
pub fn as_worker<R>(f: impl FnOnce() -> R) -> R {
    if WORKER.with(|w| w.replace(true)) {
        return f();
    }
    RUNNING.fetch_add(1, Ordering::SeqCst);
    struct Done;
    impl Drop for Done {
        fn drop(&mut self) {
            RUNNING.fetch_sub(1, Ordering::SeqCst);
            WORKER.with(|w| w.set(false));
        }
    }
    let _done = Done;
    f()
}

/// Whether this thread runs an evaluation of the package's worker threads (`as_worker`).
pub fn on_worker() -> bool {
    WORKER.with(|w| w.get())
}

/// The threads a kernel called now, on this thread, may take: the cap
/// shared by the evaluations running (this one included), at least 1.
pub fn for_kernel() -> usize {
    let cap = threads();
    if cap <= 1 {
        return 1;
    }
    let running = RUNNING.load(Ordering::Relaxed);
    let sharing = if WORKER.with(|w| w.get()) { running.max(1) } else { running + 1 };
    (cap / sharing).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_caps_the_machine() {
        let most = available();
        assert_eq!(from_env(None), most);
        assert_eq!(from_env(Some("1")), 1);
        assert_eq!(from_env(Some(" 1 ")), 1);
        assert_eq!(from_env(Some("0")), most);
        assert_eq!(from_env(Some("many")), most);
        assert_eq!(from_env(Some("-2")), most);
        assert_eq!(from_env(Some("100000")), most);
    }

    #[test]
    fn workers_share_the_cap() {
        let cap = threads();
        // Outside any worker, with no evaluation running on a worker: all of it.
        assert!(!WORKER.with(|w| w.get()));
        let (outside, inside, nested) = as_worker(|| {
            let inside = for_kernel();
            (RUNNING.load(Ordering::SeqCst), inside, as_worker(for_kernel))
        });
        assert!(outside >= 1);
        assert!(inside >= 1 && inside <= cap);
        assert_eq!(nested, inside, "a nested evaluation counts once");
        assert!(!WORKER.with(|w| w.get()), "the flag is cleared after");
    }

    #[test]
    fn two_evaluations_at_once_split_the_cap() {
        let cap = threads();
        let both_in = std::sync::Barrier::new(2);
        let got: Vec<usize> = std::thread::scope(|s| {
            let runs: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        as_worker(|| {
                            both_in.wait();
                            let t = for_kernel();
                            both_in.wait();
                            t
                        })
                    })
                })
                .collect();
            runs.into_iter().map(|r| r.join().unwrap()).collect()
        });
        for t in got {
            assert!(t <= (cap / 2).max(1), "{t} threads each for two evaluations under a cap of {cap}");
        }
    }
}
