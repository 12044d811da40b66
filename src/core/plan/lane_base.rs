//! What a lane replay (lanes.rs) and its kernels (lane_kernels.rs) both
//! build on: the lane, `LANES` values of one element side by side;
//! `lanewise!` for a loop across a lane (and `widest!`, core/widest.rs, for
//! a function compiled once per vector width); and where the lanes of each
//! node sit (`Layout`, `Term`). Both files import this one, and neither the
//! other's parts.

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

pub(crate) use crate::core::widest::widest;

/// Where each node's value and adjoint sit in the arena, in lanes: the
/// value where the plan's arena has it and the adjoint as far again, or
/// in lanes whose value no later step reads (`Plan::layout`).
pub struct Layout {
    pub value: Vec<usize>,
    pub adjoint: Vec<usize>,
}

/// A term of a node's adjoint: the node it comes from, and which operand.
pub type Term = (u32, u32);
