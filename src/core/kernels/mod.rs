//! The loops the ops' rules (`core/rules`) call, and what they see of the
//! graph: elementwise loops over the per-element formulas, products, sums
//! and copies, and the Cholesky factor's tangent (`factor_tangent.rs`),
//! made of the linear algebra's kernels. Kernels read parents' values and
//! write into slices of the arenas; they never allocate.

pub mod elementwise;
pub mod factor_tangent;
pub mod matrix;
pub mod scalar;

use super::linalg::parallel;
use super::shape::Shape;
use smallvec::SmallVec;

/// What a kernel needs to know of an operand: its shape, and the offset of
/// its value in the arena (and of its adjoint, in an adjoint arena laid out
/// alike). The graph's nodes provide it; kernels know nothing else of them.
pub trait Operand {
    fn shape(&self) -> Shape;
    fn offset(&self) -> usize;
}

/// The parents of a node as a kernel sees them, looked up on demand so that
/// nothing is allocated however many parents a node has.
pub struct Inputs<'a, N> {
    /// Every operand that may be a parent, by id.
    pub operands: &'a [N],
    pub parents: &'a [u32],
    /// An arena, or the part of it below the value being computed...
    pub values: &'a [f64],
    /// ...and the part above it, from offset `above_from` (empty if none):
    /// a plan whose values share blocks (`plan::values`) may hold an
    /// operand above the value computed from it.
    pub above: &'a [f64],
    pub above_from: usize,
}

impl<'a, N: Operand> Inputs<'a, N> {
    /// Where parent `k`'s value (or adjoint) sits in an arena.
    pub(crate) fn range(&self, k: usize) -> std::ops::Range<usize> {
        let o = &self.operands[self.parents[k] as usize];
        o.offset()..o.offset() + o.shape().size()
    }

    pub fn val(&self, k: usize) -> &'a [f64] {
        let r = self.range(k);
        if r.start < self.above_from {
            &self.values[r]
        } else {
            &self.above[r.start - self.above_from..r.end - self.above_from]
        }
    }

    pub fn shape(&self, k: usize) -> Shape {
        self.operands[self.parents[k] as usize].shape()
    }

    /// The layout of parent `k` as (rows, cols), a scalar or vector being one row.
    pub(crate) fn dims(&self, k: usize) -> (usize, usize) {
        self.shape(k).rows_cols()
    }
}

/// Where the parents' adjoints are, for `rules::adjoint`: an arena laid out like
/// the values, each adjoint at its value's offset (`[f64]`, the tape's), or
/// a plan's, whose large adjoints take turns in shared blocks.
pub trait Adjoints {
    /// Node `id`'s adjoint, whose value lies at `val`.
    fn of(&mut self, id: u32, val: std::ops::Range<usize>) -> &mut [f64];

    /// `of`, and whether the adjoint is fresh: not yet written in this
    /// sweep and not zeroed either. A rule given a fresh adjoint writes
    /// every entry of it, each as `0.0 + term` (the bits of adding the
    /// term to a zero), or zeroes it first (`zero_if`).
    fn fresh(&mut self, id: u32, val: std::ops::Range<usize>) -> (&mut [f64], bool) {
        (self.of(id, val), false)
    }
}

/// Zero `d` if it is a fresh adjoint (`Adjoints::fresh`): what a rule that
/// only adds into its operand's adjoint does first.
pub fn zero_if(fresh: bool, d: &mut [f64]) {
    if fresh {
        parallel::zero(d)
    }
}

/// The adjoints a sweep step writes, where the large ones that turn live
/// at this step (`pending`: node and value range) are fresh: their first
/// writer assigns instead of adding to a cleared block, which saves a
/// pass over memory that zeroing took. One asked for by `of`, or never
/// asked for at all (`finish`), is zeroed as before.
pub struct FirstWrites<'a, A: Adjoints + ?Sized> {
    inner: &'a mut A,
    pending: FreshAdjoints,
}

/// Parents' adjoints a sweep step writes first, by node and value range.
pub type FreshAdjoints = SmallVec<[(u32, std::ops::Range<usize>); 2]>;

impl<'a, A: Adjoints + ?Sized> FirstWrites<'a, A> {
    pub fn new(inner: &'a mut A, pending: FreshAdjoints) -> Self {
        FirstWrites { inner, pending }
    }

    /// Whether `id` was pending, no longer.
    fn take(&mut self, id: u32) -> bool {
        match self.pending.iter().position(|p| p.0 == id) {
            Some(k) => {
                self.pending.swap_remove(k);
                true
            }
            None => false,
        }
    }

    /// Zero what the step did not write: a later step adds to it.
    pub fn finish(mut self) {
        for (id, val) in std::mem::take(&mut self.pending) {
            parallel::zero(self.inner.of(id, val));
        }
    }
}

impl<A: Adjoints + ?Sized> Adjoints for FirstWrites<'_, A> {
    fn of(&mut self, id: u32, val: std::ops::Range<usize>) -> &mut [f64] {
        let fresh = self.take(id);
        let d = self.inner.of(id, val);
        zero_if(fresh, d);
        d
    }

    fn fresh(&mut self, id: u32, val: std::ops::Range<usize>) -> (&mut [f64], bool) {
        let fresh = self.take(id);
        (self.inner.of(id, val), fresh)
    }
}

impl Adjoints for [f64] {
    fn of(&mut self, _: u32, val: std::ops::Range<usize>) -> &mut [f64] {
        &mut self[val]
    }
}
