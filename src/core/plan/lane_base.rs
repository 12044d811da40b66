//! What a lane replay (lanes.rs) and its kernels (lane_kernels.rs) both
//! build on: the lane, `LANES` values of one element side by side; the two
//! macros their loops are written with, `lanewise!` for a loop across a
//! lane and `widest!` for a function compiled once per vector width; and
//! where the lanes of each node sit (`Layout`, `Term`). Both files import
//! this one, and neither the other's parts.

/// How many points a batch replays at once (`Plan::lanes`).
pub const LANES: usize = 8;

pub type Lane = [f64; LANES];

/// The lane whose element `l` is `$e`: a loop, not `std::array::from_fn`,
/// whose closure is not inlined into a function as large as the replay.
///
/// The empty `asm!` after it keeps the loop vectorizer off any loop around
/// it (it cannot vectorize inline assembly), leaving each lane to the SLP
/// vectorizer: one register. Otherwise, with AVX-512, a loop over a node's
/// elements was vectorized across elements, lane by lane, with gathers and
/// scatters: 20% slower than the lanes as registers.
macro_rules! lanewise {
    (|$l:ident| $e:expr) => {{
        let mut lane: $crate::core::plan::lane_base::Lane = [0.0; $crate::core::plan::lane_base::LANES];
        for $l in 0..$crate::core::plan::lane_base::LANES {
            lane[$l] = $e;
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: an empty instruction sequence, touching nothing.
        unsafe {
            std::arch::asm!("", options(nomem, nostack, preserves_flags))
        };
        lane
    }};
}
pub(crate) use lanewise;

/// The widest variant of those `widest!` compiles that a lane replay may
/// use: 2 for AVX-512, 1 for AVX2, 0 for the baseline (where the CPU has
/// them). Tests lower it, to check every variant on a machine that would
/// only run the widest.
#[doc(hidden)]
pub static WIDEST: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(2);

/// Which variant `widest!` runs on this CPU: 2 AVX-512, 1 AVX2, 0 the
/// baseline (at most `WIDEST`).
#[cfg(not(target_arch = "wasm32"))]
pub fn widest_here() -> u8 {
    #[cfg(target_arch = "x86_64")]
    {
        let cap = WIDEST.load(std::sync::atomic::Ordering::Relaxed);
        if cap >= 2 && std::arch::is_x86_feature_detected!("avx512f") {
            return 2;
        }
        if cap >= 1 && std::arch::is_x86_feature_detected!("avx2") {
            return 1;
        }
    }
    0
}

/// The function inside, compiled three times: for AVX-512 (a lane of
/// eight f64 is one register), for AVX2 (two) and for the baseline, the
/// one chosen at run time (`widest_here`). All three compute the same
/// bits: Rust never fuses a multiply and an add unless asked (`mul_add`).
macro_rules! widest {
    ($(#[$doc:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),*) $body:block) => {
        $(#[$doc])*
        $vis fn $name($($arg: $ty),*) {
            #[inline(always)]
            fn body($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                fn avx512($($arg: $ty),*) {
                    body($($arg),*)
                }
                #[target_feature(enable = "avx2")]
                fn avx2($($arg: $ty),*) {
                    body($($arg),*)
                }
                match $crate::core::plan::lane_base::widest_here() {
                    // SAFETY (both): the CPU has the feature.
                    2 => return unsafe { avx512($($arg),*) },
                    1 => return unsafe { avx2($($arg),*) },
                    _ => {}
                }
            }
            body($($arg),*)
        }
    };
}
pub(crate) use widest;

/// Where each node's value and adjoint sit in the arena, in lanes: the
/// value where the plan's arena has it and the adjoint as far again, or
/// in lanes whose value no later step reads (`Plan::layout`).
pub struct Layout {
    pub value: Vec<usize>,
    pub adjoint: Vec<usize>,
}

/// A term of a node's adjoint: the node it comes from, and which operand.
pub type Term = (u32, u32);
