//! Growing a graph's arenas, and building a graph over memory that is
//! zeroed but not yet touched.
//!
//! Why: a derived plan (a Hessian's, a Jacobian's) is built from a copy of
//! its plan's graph, then compacted into a second graph, and each append
//! wrote its node's zeros. For a GP at n = 200 that was ~50 n×n values
//! written before anything was computed, and on a VM where a page's first
//! write costs 1–2 ms per MB, most of a first Hessian's building. A node's
//! range taken from a `ZeroTail` is left as the system handed it over: zero,
//! and resident only once a replay writes it. The scratch arena (`aux`)
//! likewise: the Cholesky tangent's 3n² there were written twice over
//! (skeleton, compaction) before a replay used them.

use super::Graph;
use crate::core::error::Result;
use crate::core::linalg::parallel;
use crate::core::shape::MAX_ELEMENTS;
use crate::fail;

/// Grow an arena by `len` zeros, refusing what cannot be allocated rather
/// than aborting the process. Many zeros are written on every core
/// (`parallel::zero_uninit` decides, and says why): an eager trace's
/// arena at n = 1000 grows by ten n×n matrices.
pub fn grow(arena: &mut Vec<f64>, len: usize) -> Result<usize> {
    let at = arena.len();
    // (The common case on a reused arena: room already there.)
    if len > arena.capacity() - at && (len > MAX_ELEMENTS || arena.try_reserve(len).is_err()) {
        return fail!("out of memory: cannot hold {len} more values");
    }
    parallel::zero_uninit(&mut arena.spare_capacity_mut()[..len]);
    // SAFETY: the capacity holds `at + len` values, and the `len` past the
    // length were just written.
    unsafe { arena.set_len(at + len) };
    Ok(at)
}

/// `len` zeros, allocated zeroed (untouched until written), refusing what
/// cannot be allocated rather than aborting the process, or panicking
/// where `len` values pass what one allocation may hold (2 GiB on wasm32).
pub fn zeros(len: usize) -> Result<Vec<f64>> {
    let (mut arena, _) = zeroed(len)?;
    // SAFETY: allocated zeroed with room for `len` values, and zero bits are 0.0.
    unsafe { arena.set_len(len) };
    Ok(arena)
}

/// An empty arena with room for `len` values, allocated zeroed, and the
/// `ZeroTail` that knows it.
pub fn zeroed(len: usize) -> Result<(Vec<f64>, ZeroTail)> {
    let arena = if len == 0 {
        Vec::new()
    } else {
        let Ok(layout) = std::alloc::Layout::array::<f64>(len) else {
            return fail!("out of memory: cannot hold {len} more values");
        };
        // SAFETY: the layout's size is not zero.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<f64>();
        if ptr.is_null() {
            return fail!("out of memory: cannot hold {len} more values");
        }
        // SAFETY: allocated by the global allocator with the layout of `len`
        // f64s, which is what a Vec of that capacity deallocates with.
        unsafe { Vec::from_raw_parts(ptr, 0, len) }
    };
    let tail = ZeroTail { ptr: arena.as_ptr() as usize, cap: arena.capacity(), from: 0 };
    Ok((arena, tail))
}

/// The part of an arena's spare capacity known to hold zeros: from `from`
/// (the longest the arena has been since it was allocated zeroed) to its
/// end, as long as it is the same allocation. Only `take` and `extended`
/// may see the arena grow while a tail is kept: a graph keeps one only
/// while it is being built (`compact`, a derived plan's skeleton).
#[derive(Clone, Copy, Debug)]
pub struct ZeroTail {
    ptr: usize,
    cap: usize,
    from: usize,
}

impl ZeroTail {
    /// Lengthen `arena` by `len` values taken from the zeroed tail, without
    /// writing them; None where the tail cannot give them (another
    /// allocation, a shorter arena than the tail's start, too little room).
    pub fn take(&mut self, arena: &mut Vec<f64>, len: usize) -> Option<usize> {
        let at = arena.len();
        if self.ptr != arena.as_ptr() as usize || self.cap != arena.capacity() || at != self.from || len > self.cap - at {
            return None;
        }
        // SAFETY: `arena[at..at + len]` lies in memory allocated zeroed
        // (`zeroed`) that no length of the arena has covered since (`from` is
        // the longest it has been), so nothing wrote it: initialized zeros.
        unsafe { arena.set_len(at + len) };
        self.from = at + len;
        Some(at)
    }

    /// Record that `arena` was lengthened some other way (written).
    pub fn extended(&mut self, arena: &[f64]) {
        self.from = self.from.max(arena.len());
    }
}

/// Room a derived plan's skeleton keeps for the nodes recorded on it, per
/// value (and per scratch value) of the plan's: a GP's Hessian recorded
/// 3.2 more values, and 3 more of scratch (the Cholesky tangent's). WebAssembly
/// has no lazily zeroed pages, and its memory never shrinks: none there.
const SKELETON_ROOM: usize = if cfg!(target_arch = "wasm32") { 0 } else { 4 };

/// `grow` of `arena`, from its zeroed `tail` while it has one.
fn grow_over(arena: &mut Vec<f64>, tail: &mut Option<ZeroTail>, len: usize) -> Result<usize> {
    if let Some(at) = tail.as_mut().and_then(|t| t.take(arena, len)) {
        return Ok(at);
    }
    let at = grow(arena, len)?;
    if let Some(t) = tail {
        t.extended(arena);
    }
    Ok(at)
}

/// An arena of `len` zeroed, untouched values and its tail; where that
/// much cannot be had at once, an empty arena that grows as any.
fn arena_over_zeroed(len: usize) -> (Vec<f64>, Option<ZeroTail>) {
    match zeroed(len) {
        Ok((arena, tail)) => (arena, Some(tail)),
        Err(_) => (Vec::new(), None),
    }
}

impl Graph {
    /// `grow` of the values arena, from the zeroed tail while it has one.
    pub(super) fn grow_values(&mut self, len: usize) -> Result<usize> {
        grow_over(&mut self.values, &mut self.zero_tail, len)
    }

    /// `grow` of the scratch arena, likewise.
    pub(super) fn grow_aux(&mut self, len: usize) -> Result<usize> {
        grow_over(&mut self.aux, &mut self.aux_tail, len)
    }

    /// An empty graph to build on (merging identical nodes or not) whose
    /// values and scratch arenas have room for `values` and `aux` values
    /// of zeroed, untouched memory.
    pub fn over_zeroed(values: usize, aux: usize, merging: bool) -> Graph {
        let mut g = Graph { no_merging: !merging, ..Graph::default() };
        (g.values, g.zero_tail) = arena_over_zeroed(values);
        (g.aux, g.aux_tail) = arena_over_zeroed(aux);
        g
    }

    /// A copy of this graph to record a derived plan on: its nodes, merge
    /// table and leaves' values (parameters, inputs, constants), every
    /// other value and all scratch zero and untouched, and `SKELETON_ROOM`
    /// times as much room the same way. What the derived plan reads of it
    /// is its leaves.
    pub fn skeleton(&self) -> Result<Graph> {
        let (len, aux) = (self.values.len(), self.aux.len());
        let merging = !self.no_merging;
        let mut g = Graph::over_zeroed(len.saturating_mul(1 + SKELETON_ROOM), aux.saturating_mul(1 + SKELETON_ROOM), merging);
        if g.zero_tail.is_none() || g.aux_tail.is_none() {
            g = Graph::over_zeroed(len, aux, merging);
        }
        // Refused, not aborted, where it cannot be had: a plan from
        // untrusted JSON may declare arenas near the cap on values.
        if g.nodes.try_reserve_exact(self.nodes.len()).is_err() {
            return fail!("out of memory: cannot hold {} more nodes", self.nodes.len());
        }
        g.nodes.extend_from_slice(&self.nodes);
        g.grow_values(len)?;
        g.grow_aux(aux)?;
        self.copy_leaf_values(&mut g.values);
        g.merged = self.merged.clone();
        Ok(g)
    }

    /// The graph is built: from here its arena grows as any does.
    pub fn end_zeroed(&mut self) {
        (self.zero_tail, self.aux_tail) = (None, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_gives_zeros_and_never_memory_that_was_written() {
        let (mut a, mut tail) = zeroed(16).unwrap();
        assert_eq!(tail.take(&mut a, 4), Some(0));
        a[..4].fill(7.0);
        // Written, then cut back: that range is no longer known zero.
        a.truncate(2);
        assert_eq!(tail.take(&mut a, 2), None);
        grow(&mut a, 3).unwrap();
        tail.extended(&a);
        a[2..5].fill(9.0);
        assert_eq!(tail.take(&mut a, 6), Some(5));
        assert!(a[5..11].iter().all(|&x| x == 0.0));
        assert_eq!(tail.take(&mut a, 6), None, "past the allocation");
        // Another allocation: the tail does not follow it.
        grow(&mut a, 100).unwrap();
        a.truncate(11);
        assert_eq!(tail.take(&mut a, 1), None);
    }

    #[test]
    fn a_long_growth_writes_zeros_past_what_was_there() {
        // Long enough to be zeroed on several threads (where there are several).
        let n = 1 << 20;
        let mut a = vec![1.0, 2.0];
        assert_eq!(grow(&mut a, n).unwrap(), 2);
        assert_eq!(a.len(), n + 2);
        assert_eq!(&a[..2], &[1.0, 2.0]);
        // Capacity that held other values is written over, not assumed zero.
        a[2..].fill(-5.0);
        a.truncate(2);
        assert_eq!(grow(&mut a, n).unwrap(), 2);
        assert!(a[2..].iter().all(|x| x.to_bits() == 0));
        assert_eq!(&a[..2], &[1.0, 2.0]);
    }

    #[test]
    fn scratch_comes_from_its_own_zeroed_tail_until_the_graph_is_built() {
        use crate::core::op::Op;
        use crate::core::shape::Shape;
        let mut g = Graph::over_zeroed(64, 16, true);
        // Marked behind the tail's back, to see that a range it gives is
        // not written (growing would write zeros over the marks).
        g.aux.spare_capacity_mut().iter_mut().for_each(|x| _ = x.write(7.0));
        let a = g.leaf(Op::Leaf, Shape::Matrix(2, 2), &[]).unwrap();
        let l = g.op(Op::Cholesky, &[a], false).unwrap();
        let node = &g.nodes[l as usize];
        assert_eq!((node.aux, node.aux_len, g.aux.len()), (0, 4, 4));
        assert!(g.aux.iter().all(|&x| x == 7.0), "taken from the tail, not written");
        assert!(g.aux_tail.is_some_and(|t| t.from == 4 && t.cap == g.aux.capacity() && t.ptr == g.aux.as_ptr() as usize));
        // Past the tail's room: grown as any arena, the tail told.
        let b = g.leaf(Op::Leaf, Shape::Matrix(4, 4), &[]).unwrap();
        let m = g.op(Op::Cholesky, &[b], false).unwrap();
        assert_eq!(g.nodes[m as usize].aux, 4);
        assert!(g.aux[4..].iter().all(|&x| x == 0.0) && g.aux.len() == 20);
        g.end_zeroed();
        assert!(g.aux_tail.is_none() && g.zero_tail.is_none());
    }

    #[test]
    fn a_failed_op_over_the_tail_leaves_no_value_behind() {
        use crate::core::op::Op;
        use crate::core::shape::Shape;
        let mut g = Graph::over_zeroed(64, 64, true);
        // Not positive definite: the factorization writes part of its
        // value, fails, and the graph gives the range back.
        let a = g.leaf(Op::Const, Shape::Matrix(2, 2), &[4.0, 2.0, 2.0, -9.0]).unwrap();
        assert!(g.op(Op::Cholesky, &[a], true).is_err());
        let b = g.leaf(Op::Leaf, Shape::Matrix(2, 2), &[]).unwrap();
        assert!(g.value(b).unwrap().iter().all(|&x| x == 0.0));
        let c = g.op(Op::Exp, &[b], false).unwrap();
        assert!(g.value(c).unwrap().iter().all(|&x| x == 0.0));
        assert!(g.zero_tail.is_some_and(|t| t.from == g.values.len()));
    }
}
