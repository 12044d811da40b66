//! What a lane replay (lanes.rs) and its kernels (lane_kernels.rs) both
//! build on: the lane, `LANES` values of one element side by side;
//! `lanewise!` for a loop across a lane (and `widest!`, core/widest.rs, for
//! a function compiled once per vector width); and where the lanes of each
//! node sit (`Arena`, `Layout`, `Term`). Both files import this one, and
//! neither the other's parts.

use std::cell::Cell;

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
    /// Per node, whether lane steps read its value from the plan's own
    /// arena, one value per element splatted across the lanes, rather than
    /// from lanes written with it (`Plan::layout`): a vector that does not
    /// vary and that only elementwise forward steps read.
    pub flat: Vec<bool>,
    /// Per node, whether its own elementwise lane step reads its adjoint,
    /// the same in every lane, from the plan's adjoint arena, where the
    /// sweep of such adjoints leaves it (`Uniform::flat`).
    pub flat_adjoint: Vec<bool>,
}

/// The lanes of a replay: every value, then every adjoint, each where
/// `Layout` puts it. They start on a 64-byte boundary, a lane one cache
/// line (a lane across two costs two loads, or two stores), and are seen
/// as cells, so that a step can write the lanes it reads.
pub struct Arena(Vec<f64>);

impl Arena {
    pub fn bytes(&self) -> usize {
        8 * self.0.capacity()
    }

    /// `lanes` lanes, zeroed (pages no lane is written to stay untouched).
    pub fn new(lanes: usize) -> Arena {
        Arena(vec![0.0; (lanes + 1) * LANES])
    }

    pub fn len(&self) -> usize {
        self.0.len() / LANES - 1
    }

    pub fn cells(&mut self) -> &[Cell<Lane>] {
        let n = self.len();
        // At most LANES - 1 values to skip; LANES (a lane late, unaligned) if the offset were unknown.
        let skip = self.0.as_ptr().align_offset(64).min(LANES);
        let (lanes, _) = self.0[skip..skip + n * LANES].as_chunks_mut::<LANES>();
        Cell::from_mut(lanes).as_slice_of_cells()
    }
}

/// A term of a node's adjoint: the node it comes from, and which operand.
pub type Term = (u32, u32);
