//! A plan's adjoint arena: large adjoints laid out by when they are live,
//! so that adjoints never live at the same time share a block.

use super::Step;
use crate::core::graph::{propagate, propagate_at, Graph, Node};
use crate::core::kernels::{scalar, FreshAdjoints};
use crate::core::linalg::parallel;
use crate::core::shape::Shape;

/// A plan's adjoints. A copy (a batch's replica) starts zeroed, not copied:
/// a sweep clears what it writes before writing it, and the system's zero
/// pages cost nothing until then.
pub(super) struct AdjointArena(pub(super) Vec<f64>);

impl Clone for AdjointArena {
    fn clone(&self) -> Self {
        AdjointArena(vec![0.0; self.0.len()])
    }
}

/// Large adjoints laid out by when they are live: each node's adjoint is
/// live from the first step of the sweep that writes it to its own step,
/// and adjoints never live at once take turns in one block past the values'
/// layout (an elementwise chain of n×n steps needs two blocks, not one per
/// step). The same terms are added in the same order into a block cleared
/// when its adjoint turns live, so the bits are those of a private arena.
#[derive(Clone)]
pub(super) struct SharedAdjoints {
    /// Each node's adjoint offset: its value's offset, or its block's.
    pub(super) at: Vec<usize>,
    /// (sweep step, node, start, end): the blocks whose adjoints turn live
    /// at that step, which its rule writes first (`kernels::FirstWrites`),
    /// or cleared before it where the step is the node's own.
    pub(super) clears: Vec<(usize, u32, usize, usize)>,
    /// The arena's length: the values' layout, then the blocks.
    pub(super) len: usize,
    /// Values a sweep writes: the adjoints outside blocks, and the blocks.
    pub(super) used: usize,
}

/// Lay out the adjoints of at least `from` values (not scalars, not the
/// root) in shared blocks, given the sweep's order of nodes `swept`; `None`
/// when no adjoint is that large.
pub(super) fn share_adjoints(nodes: &[Node], swept: &[u32], needs: &[bool], root: u32, values: usize, from: usize) -> Option<SharedAdjoints> {
    let large = |i: u32| {
        let n = &nodes[i as usize];
        needs[i as usize] && i != root && n.shape != Shape::Scalar && n.shape.size() >= from && n.op.is_pure()
    };
    if !swept.iter().any(|&i| large(i)) {
        return None;
    }
    // The step each large adjoint turns live at: its first writer's, or its own.
    let mut starts = vec![usize::MAX; nodes.len()];
    for (step, &id) in swept.iter().enumerate() {
        for &p in nodes[id as usize].parents.iter().chain(std::iter::once(&id)) {
            if large(p) && starts[p as usize] == usize::MAX {
                starts[p as usize] = step;
            }
        }
    }
    let mut turning: Vec<(usize, u32)> = (0..nodes.len() as u32).filter(|&i| starts[i as usize] != usize::MAX).map(|i| (starts[i as usize], i)).collect();
    turning.sort_unstable();
    let mut at: Vec<usize> = nodes.iter().map(|n| n.val).collect();
    let (mut len, mut clears) = (values, Vec::new());
    // Free blocks as (size, start); a block keeps its size when reused by a smaller adjoint.
    let mut free: Vec<(usize, usize)> = Vec::new();
    let mut size_of_block = std::collections::HashMap::new();
    let mut next = turning.iter().peekable();
    for (step, &id) in swept.iter().enumerate() {
        while let Some(&(_, p)) = next.next_if(|t| t.0 == step) {
            let size = nodes[p as usize].shape.size();
            let best = free.iter().enumerate().filter(|(_, b)| b.0 >= size).min_by_key(|(_, b)| b.0).map(|(k, _)| k);
            let start = match best {
                Some(k) => free.swap_remove(k).1,
                None => {
                    len += size;
                    size_of_block.insert(len - size, size);
                    len - size
                }
            };
            at[p as usize] = start;
            clears.push((step, p, start, start + size));
        }
        if large(id) {
            let start = at[id as usize];
            free.push((size_of_block[&start], start));
        }
    }
    let blocks: usize = size_of_block.values().sum();
    // A block begins past the values' layout (where a value of the same node may lie too: plan::values).
    let outside: usize = (0..nodes.len()).filter(|&i| needs[i] && at[i] < values).map(|i| nodes[i].shape.size()).sum();
    Some(SharedAdjoints { at, clears, len, used: blocks + outside })
}

/// The arena ranges of the nodes `which` picks, neighbours merged: what a
/// sweep clears of the adjoints.
pub(super) fn arena_ranges(nodes: &[Node], which: impl Fn(usize) -> bool) -> Vec<(usize, usize)> {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for (_, node) in nodes.iter().enumerate().filter(|&(i, _)| which(i)) {
        let r = node.range();
        match ranges.last_mut() {
            Some(last) if last.1 == r.start => last.1 = r.end,
            _ => ranges.push((r.start, r.end)),
        }
    }
    ranges
}

/// A reverse sweep from `root` (a scalar) by `steps` into `adj`: `clear`
/// zeroed first, and with `shared` each block when its adjoint turns live.
pub(super) fn sweep(steps: &[Step], clear: &[(usize, usize)], shared: Option<&SharedAdjoints>, root: u32, g: &mut Graph, adj: &mut [f64], needs: &[bool]) {
    for &(a, b) in clear {
        parallel::zero(&mut adj[a..b]);
    }
    adj[g.nodes[root as usize].val] = 1.0;
    let Some(shared) = shared else {
        for step in steps {
            match *step {
                Step::Scalar(s) => scalar::accumulate(s.formula, s.k, s.at(), s.needs, &g.values, adj),
                Step::Node(id) => propagate(&g.nodes, id as usize, &g.values, adj, &mut g.aux, needs, Default::default()),
            }
        }
        return;
    };
    let mut clears = shared.clears.iter().peekable();
    for (i, step) in steps.iter().enumerate() {
        let fresh = turning_live(&mut clears, i, step, &g.nodes, |a, b| parallel::zero(&mut adj[a..b]));
        match *step {
            Step::Scalar(s) => scalar::accumulate(s.formula, s.k, s.at(), s.needs, &g.values, adj),
            Step::Node(id) => propagate_at(&g.nodes, id as usize, &g.values, adj, &shared.at, &mut g.aux, needs, fresh),
        }
    }
}

/// The adjoints that turn live at sweep step `i` (`SharedAdjoints::clears`):
/// those its node's rule writes first, returned fresh for it
/// (`kernels::FirstWrites`); the others, never written before their own
/// step, zeroed by `zero(start, end)` in the arena.
pub(super) fn turning_live(
    clears: &mut std::iter::Peekable<std::slice::Iter<'_, (usize, u32, usize, usize)>>,
    i: usize,
    step: &Step,
    nodes: &[Node],
    mut zero: impl FnMut(usize, usize),
) -> FreshAdjoints {
    let mut fresh = FreshAdjoints::new();
    while let Some(&(_, p, a, b)) = clears.next_if(|c| c.0 == i) {
        match *step {
            Step::Node(id) if id != p => fresh.push((p, nodes[p as usize].range())),
            _ => zero(a, b),
        }
    }
    fresh
}
