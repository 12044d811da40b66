//! A whole evaluation made of the nodes JavaScript queues (src/js/queue.js):
//! scalar and short-vector leaves, elementwise ops and sums, swept at its
//! end without recording a graph. Each node is computed as `Graph::scalar_op`
//! or `Graph::op` computes it, and the sweep is `Tape::backward`'s, through
//! the same walk and the same `propagate`, so the results are the tape's bit
//! for bit. What it saves is the graph's bookkeeping (parents lists, merge
//! checks, an aux arena, the node records' size), which on a small model is
//! most of an evaluation's cost in the core.

use super::graph::{eval, post_order_with, propagate, Recorded, Walk};
use super::kernels::scalar::{self, Formula};
use super::kernels::Operand;
use super::op::Op;
use super::shape::Shape;
use smallvec::SmallVec;

#[derive(Clone, Copy)]
struct FlatNode {
    op: Op,
    /// The operands, the first `arity` of them.
    parents: [u32; 2],
    arity: usize,
    shape: Shape,
    /// Offset of the value (and adjoint) in the arenas.
    val: usize,
}

impl FlatNode {
    fn range(&self) -> std::ops::Range<usize> {
        self.val..self.val + self.shape.size()
    }
}

impl Operand for FlatNode {
    fn shape(&self) -> Shape {
        self.shape
    }
    fn offset(&self) -> usize {
        self.val
    }
}

impl Recorded for FlatNode {
    fn op(&self) -> Op {
        self.op
    }
    fn parents(&self) -> &[u32] {
        &self.parents[..self.arity]
    }
    fn aux(&self) -> std::ops::Range<usize> {
        0..0
    }
}

#[derive(Default)]
pub struct Flat {
    nodes: Vec<FlatNode>,
    values: Vec<f64>,
    adj: Vec<f64>,
    needs: Vec<bool>,
    order: Vec<u32>,
    walk: Walk,
}

impl Flat {
    /// Forget every node, keeping the arenas' capacity.
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.values.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// A leaf (`Leaf`, `Input` or `Const`) holding `data`, which has the
    /// shape's size.
    pub fn leaf(&mut self, op: Op, shape: Shape, data: &[f64]) {
        debug_assert!(op.is_leaf() && data.len() == shape.size());
        let val = self.values.len();
        self.values.extend_from_slice(data);
        self.nodes.push(FlatNode { op, parents: [0, 0], arity: 0, shape, val });
    }

    /// `op` on one or two earlier nodes, evaluated now. False, with nothing
    /// recorded, for anything the graph would refuse (its path then says
    /// why) or that would need scratch.
    pub fn op(&mut self, op: Op, parents: &[u32]) -> bool {
        let n = self.nodes.len();
        if !(1..=2).contains(&parents.len()) || parents.iter().any(|&p| p as usize >= n) {
            return false;
        }
        let (a, b) = (parents[0] as usize, parents[parents.len() - 1] as usize);
        let node = FlatNode { op, parents: [a as u32, b as u32], arity: parents.len(), shape: Shape::Scalar, val: self.values.len() };
        let scalar = |p: &u32| self.nodes[*p as usize].shape == Shape::Scalar;
        if let Some((f, k)) = Formula::of(op).filter(|_| parents.iter().all(scalar)) {
            let value = scalar::value(f, k, self.values[self.nodes[a].val], self.values[self.nodes[b].val]);
            self.values.push(value);
            self.nodes.push(node);
            return true;
        }
        let shapes: SmallVec<[Shape; 2]> = parents.iter().map(|&p| self.nodes[p as usize].shape).collect();
        let Ok(shape) = op.infer(&shapes) else { return false };
        // The queue's leaves hold at most its buffer's numbers, and its ops
        // make nothing longer than their operands.
        if op.aux_len(&shapes) != 0 || shape.checked_size().is_none_or(|size| size > self.values.len()) {
            return false;
        }
        self.values.resize(node.val + shape.size(), 0.0);
        self.nodes.push(FlatNode { shape, ..node });
        if eval(&self.nodes, n, &mut self.values, &mut []).is_err() {
            self.nodes.pop();
            self.values.truncate(node.val);
            return false;
        }
        true
    }

    /// Sweep from the scalar `root` and write the gradients of `leaves` (ids
    /// as JavaScript wrote them), one after another, into `out`; the root's
    /// value. `None`, with `out` untouched, when a node named is not here,
    /// the root is not a scalar or `out` is short: the graph's path says why.
    pub fn finish(&mut self, root: u32, leaves: &[i32], out: &mut [f64]) -> Option<f64> {
        let Flat { nodes, values, adj, needs, order, walk } = self;
        let root_node = *nodes.get(root as usize)?;
        let mut total = 0;
        for &id in leaves {
            total += nodes.get(usize::try_from(id).ok()?)?.shape.size();
        }
        if root_node.shape != Shape::Scalar || total > out.len() {
            return None;
        }
        needs.clear();
        needs.resize(nodes.len(), false);
        if adj.len() < values.len() {
            adj.resize(values.len(), 0.0);
        }
        post_order_with(nodes, root, walk, order, |id| {
            let node = &nodes[id as usize];
            let need = node.op == Op::Leaf || node.parents().iter().any(|&p| needs[p as usize]);
            needs[id as usize] = need;
            if need {
                adj[node.range()].fill(0.0);
            }
        });
        needs[root as usize] = true;
        adj[root_node.val] = 1.0;
        for &id in order.iter().rev() {
            if needs[id as usize] && !nodes[id as usize].op.is_leaf() {
                propagate(nodes, id as usize, values, adj, &mut [], needs);
            }
        }
        let mut at = 0;
        for &id in leaves {
            let node = &nodes[id as usize];
            let dst = &mut out[at..at + node.shape.size()];
            if needs[id as usize] {
                dst.copy_from_slice(&adj[node.range()]);
            } else {
                dst.fill(0.0);
            }
            at += dst.len();
        }
        Some(values[root_node.val])
    }
}
