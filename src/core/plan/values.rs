//! A plan's value arena laid out by liveness: a large value that no step of
//! the backward sweep reads is needed only from the forward step that
//! writes it to its last reader's, so values never live at the same time
//! take turns in one block (a GP's elementwise chain D²/(2l²), its
//! negation, v·E and K need two blocks, not four).

use super::adjoints::turning_live;
use super::{Plan, Step};
use crate::core::error::Result;
use crate::core::graph::{zeros, Node};
use crate::core::kernels::{self, scalar, scalar::Formula, Inputs};
use crate::core::rules;
use crate::core::linalg::parallel;
use crate::core::op::Op;
use crate::core::shape::Shape;

/// Mark in `read` the values that node `id`'s step of the sweep reads: its
/// operands' or its own, as its adjoint kernel (`rules::adjoint`) does.
/// What is not listed reads its operands and its value.
fn reads_in_sweep(nodes: &[Node], id: u32, needs: &[bool], read: &mut [bool]) {
    let node = &nodes[id as usize];
    let (first, last) = (node.parents[0] as usize, node.parents[node.parents.len() - 1] as usize);
    if let Some((f, _)) = Formula::of(node.op) {
        let operands = if f.binary() { [first, last] } else { [first, first] };
        for (k, &p) in operands.iter().enumerate().take(if f.binary() { 2 } else { 1 }) {
            if needs[p] {
                let [x, y, out] = f.reads(k);
                read[operands[0]] |= x;
                read[operands[1]] |= y;
                read[id as usize] |= out;
            }
        }
        return;
    }
    match node.op {
        Op::Sum | Op::Mean | Op::Transpose | Op::DiagPart | Op::AddDiag | Op::Reshape(_) | Op::Slice { .. } | Op::Concat { .. } => {}
        Op::Cholesky => read[id as usize] = true,
        Op::CholeskyTangent => read[first] = true,
        Op::TriangularSolve { .. } => {
            read[first] = true;
            read[id as usize] = true;
        }
        _ => {
            node.parents.iter().for_each(|&p| read[p as usize] = true);
            read[id as usize] = true;
        }
    }
}

/// Lay out the values of the op nodes of at least `from` values that no
/// step of any of the `sweeps` (each its steps' nodes and which need an
/// adjoint) reads and that are not `kept` (the root, the outputs) in
/// shared blocks, given the forward steps' nodes `forward`: every other
/// value keeps its contents, moved down in the order of its offset, and the
/// blocks follow them. In a tangent plan, whose steps that depend on the
/// tangents (`varying`) also replay alone, a value that does not depend on
/// them shares only if none of those steps reads it (each such replay
/// writes the blocks again). Returns where the blocks begin and end, if any
/// value was laid out in one (the arena past them is left to the caller,
/// which lays the adjoints' blocks over them). Only the leaves' values move
/// unless the ops' are `current` (a replay's, kept): else the first replay
/// writes them, and a derived plan's, never computed, are zeros whose pages
/// a move would make resident (a GP Hessian's at n = 200: 7 MB).
#[allow(clippy::too_many_arguments)]
pub(super) fn share_values(nodes: &mut [Node], values: &mut [f64], forward: &[u32], sweeps: &[(&[u32], &[bool])], kept: &[u32], from: usize, varying: &[bool], current: bool) -> Option<(usize, usize)> {
    let mut read = vec![false; nodes.len()];
    for &(swept, needs) in sweeps {
        for &id in swept {
            reads_in_sweep(nodes, id, needs, &mut read);
        }
    }
    kept.iter().for_each(|&k| read[k as usize] = true);
    for &id in forward.iter().filter(|&&id| varying[id as usize]) {
        nodes[id as usize].parents.iter().filter(|&&p| !varying[p as usize]).for_each(|&p| read[p as usize] = true);
    }
    let shares = |i: usize| {
        let n = &nodes[i];
        !read[i] && n.op.is_pure() && n.shape != Shape::Scalar && n.shape.size() >= from
    };
    // The forward step each value is last read at (its own if none reads it).
    let mut step_of = vec![usize::MAX; nodes.len()];
    let mut last = vec![0usize; nodes.len()];
    for (step, &id) in forward.iter().enumerate() {
        step_of[id as usize] = step;
        last[id as usize] = step;
        for &p in &nodes[id as usize].parents {
            last[p as usize] = step;
        }
    }
    let shared: Vec<u32> = forward.iter().copied().filter(|&i| shares(i as usize)).collect();
    if shared.is_empty() {
        return None;
    }
    let mut in_block = vec![false; nodes.len()];
    shared.iter().for_each(|&i| in_block[i as usize] = true);
    // Every other value, moved down in the order of its offset (never up,
    // so a move never overwrites a value still to move).
    let mut others: Vec<u32> = (0..nodes.len() as u32).filter(|&i| !in_block[i as usize]).collect();
    others.sort_unstable_by_key(|&i| nodes[i as usize].val);
    let mut len = 0;
    for &i in &others {
        let node = &mut nodes[i as usize];
        let size = node.shape.size();
        if node.val != len {
            if current || node.op.is_leaf() {
                values.copy_within(node.val..node.val + size, len);
            }
            node.val = len;
        }
        len += size;
    }
    let region = len;
    // Blocks as (size, start), free from the step after their last reader's.
    let mut free: Vec<(usize, usize)> = Vec::new();
    let mut freed_after: Vec<(usize, usize, usize)> = Vec::new();
    for &id in &shared {
        let step = step_of[id as usize];
        freed_after.retain(|&(after, size, start)| {
            let done = after < step;
            if done {
                free.push((size, start));
            }
            !done
        });
        let size = nodes[id as usize].shape.size();
        let best = free.iter().enumerate().filter(|(_, b)| b.0 >= size).min_by_key(|(_, b)| b.0).map(|(k, _)| k);
        let block = match best {
            Some(k) => free.swap_remove(k),
            None => {
                len += size;
                (size, len - size)
            }
        };
        nodes[id as usize].val = block.1;
        freed_after.push((last[id as usize], block.0, block.1));
    }
    Some((region, len))
}

/// Where a plan's values share blocks and its adjoints do too, the blocks
/// of both lie in one region of the value arena, from `kept`: values while
/// the forward replay runs, adjoints while the sweep runs (no sweep step
/// reads a value laid out there, and every forward step writes its value
/// there before a step reads it). In the sweep, `zeros` (never written, so
/// never resident) stands for such a value, which the kernels are handed
/// and do not read. Below `kept`, the adjoint arena holds the adjoints
/// outside blocks, laid out like the values.
pub(super) struct Region {
    pub(super) kept: usize,
    zeros: Vec<f64>,
}

impl Region {
    pub(super) fn new(kept: usize, len: usize) -> Result<Region> {
        Ok(Region { kept, zeros: zeros(len)? })
    }
}

impl Clone for Region {
    fn clone(&self) -> Self {
        Region { kept: self.kept, zeros: vec![0.0; self.zeros.len()] }
    }
}

/// An arena with at most one range carved out of it (the adjoint being
/// propagated), seen as what lies before that range and what lies after.
struct Carved<'a> {
    left: &'a mut [f64],
    right: &'a mut [f64],
    right_start: usize,
}

impl<'a> Carved<'a> {
    fn whole(arena: &'a mut [f64]) -> Carved<'a> {
        Carved { left: arena, right: &mut [], right_start: usize::MAX }
    }

    /// Carve `len` values at `start` out of `arena`.
    fn around(arena: &'a mut [f64], start: usize, len: usize) -> (&'a [f64], Carved<'a>) {
        let (left, rest) = arena.split_at_mut(start);
        let (g, right) = rest.split_at_mut(len);
        (g, Carved { left, right, right_start: start + len })
    }

    fn get(&mut self, start: usize, len: usize) -> &mut [f64] {
        if start < self.left.len() {
            &mut self.left[start..start + len]
        } else {
            let from = start - self.right_start;
            &mut self.right[from..from + len]
        }
    }
}

/// The adjoints a sweep step writes: below `kept` in the adjoint arena,
/// from it in the value arena's region.
struct Split<'a> {
    below: Carved<'a>,
    region: Carved<'a>,
    kept: usize,
    at: &'a [usize],
}

impl kernels::Adjoints for Split<'_> {
    fn of(&mut self, id: u32, val: std::ops::Range<usize>) -> &mut [f64] {
        let start = self.at[id as usize];
        if start < self.kept {
            self.below.get(start, val.len())
        } else {
            self.region.get(start - self.kept, val.len())
        }
    }
}

impl Plan {
    /// `backward` of a plan whose blocks lie in its value arena's region.
    pub(super) fn backward_in_region(&mut self) {
        let (Some(shared), Some(region)) = (&self.shared, &self.region) else { return };
        let kept = region.kept;
        let adj = &mut self.adj.0;
        for &(a, b) in &self.clear {
            parallel::zero(&mut adj[a..b]);
        }
        let g = &mut self.graph;
        adj[g.nodes[self.root as usize].val] = 1.0;
        let (values, blocks) = g.values.split_at_mut(kept);
        let mut clears = shared.clears.iter().peekable();
        for (i, step) in self.backward.iter().enumerate() {
            let fresh = turning_live(&mut clears, i, step, &g.nodes, |a, b| parallel::zero(&mut blocks[a - kept..b - kept]));
            match *step {
                Step::Scalar(s) => scalar::accumulate(s.formula, s.k, s.at(), s.needs, values, adj),
                Step::Node(id) => {
                    let node = &g.nodes[id as usize];
                    let (size, start) = (node.shape.size(), shared.at[id as usize]);
                    let (grad, mut split) = if start < kept {
                        let (grad, below) = Carved::around(adj, start, size);
                        (grad, Split { below, region: Carved::whole(blocks), kept, at: &shared.at })
                    } else {
                        let (grad, in_region) = Carved::around(blocks, start - kept, size);
                        (grad, Split { below: Carved::whole(adj), region: in_region, kept, at: &shared.at })
                    };
                    let p = Inputs { operands: &g.nodes, parents: &node.parents, values, above: &region.zeros, above_from: kept };
                    let out = if node.val < kept { &values[node.range()] } else { &region.zeros[node.val - kept..][..size] };
                    let aux = &mut g.aux[node.aux..node.aux + node.aux_len];
                    let mut writes = kernels::FirstWrites::new(&mut split, fresh);
                    rules::adjoint(node.op, &p, out, grad, aux, |q| self.needs[q as usize], &mut writes);
                    writes.finish();
                }
            }
        }
    }
}
