//! A graph of nodes whose values live in one flat arena. The eager tape
//! records into a graph as ops are called; a plan owns a compacted one.

use super::error::{Error, Result};
use super::kernels::scalar::{self, Formula};
use super::kernels::{self, Inputs, Operand};
use super::rules;
use super::op::{Op, Parents};
use super::shape::{Shape, MAX_ELEMENTS};
use crate::fail;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

mod arena;
pub use arena::{grow, zeros};

/// A multiply-rotate hash for the merge table: its keys are a few small
/// integers, for which SipHash's flood resistance buys nothing and costs a
/// visible share of recording an op.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_u32(&mut self, x: u32) {
        self.write_u64(u64::from(x));
    }

    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type MergeTable = HashMap<(Op, Parents), u32, BuildHasherDefault<IdHasher>>;

#[derive(Debug, Clone)]
pub struct Node {
    pub op: Op,
    pub parents: Parents,
    pub shape: Shape,
    /// Offset of the value (and of the adjoint, in an adjoint arena laid
    /// out alike) in the arena.
    pub val: usize,
    /// Offset of the op's scratch in the aux arena.
    pub aux: usize,
    pub aux_len: usize,
}

impl Node {
    pub fn range(&self) -> std::ops::Range<usize> {
        self.val..self.val + self.shape.size()
    }
}

impl Operand for Node {
    fn shape(&self) -> Shape {
        self.shape
    }
    fn offset(&self) -> usize {
        self.val
    }
}

/// `Clone` gives each thread of a batch its own arena (src/batch.rs).
#[derive(Default, Clone)]
pub struct Graph {
    pub nodes: Vec<Node>,
    pub values: Vec<f64>,
    pub aux: Vec<f64>,
    /// Pure nodes by (op, parents), so an identical node is made once: both
    /// `solvePSD(K, y)` and `logdetPSD(K)` then factor `K` a single time.
    merged: MergeTable,
    /// Record every op as a node of its own (only to test what merging changes).
    no_merging: bool,
    /// The values' and the scratch's zeroed tails while being built (`arena.rs`).
    zero_tail: Option<arena::ZeroTail>,
    aux_tail: Option<arena::ZeroTail>,
}

/// `parents` as a node holds them. One or two (most nodes) are copied by
/// hand: `from_slice`'s copy of a length known only at run time was a call
/// to memmove per node.
fn parents_of(parents: &[u32]) -> Parents {
    match *parents {
        [a] => Parents::from_buf_and_len([a, 0], 1),
        [a, b] => Parents::from_buf([a, b]),
        _ => Parents::from_slice(parents),
    }
}

/// The parents of `node` as a kernel reads them, from an arena that holds
/// them all.
fn inputs<'a>(nodes: &'a [Node], node: &'a Node, values: &'a [f64]) -> Inputs<'a, Node> {
    Inputs { operands: nodes, parents: &node.parents, values, above: &[], above_from: usize::MAX }
}

/// Whether JavaScript may record `op` in batches (src/js/queue.js),
/// numbering the nodes itself: the elementwise ops, the reductions to a
/// scalar, `dot` and `matmul`, none of which can fail on values. Such ops
/// are never merged, so that every call makes a node; on the small
/// operands the queue holds they cost less to compute again than to look
/// up anyway.
pub fn batched(op: Op) -> bool {
    scalar::has_formula(op) || matches!(op, Op::Sum | Op::Mean | Op::Dot | Op::Matmul)
}

/// Node `node`'s operands as its forward rule reads them, from the arena
/// around its value, and that value to write.
fn operands_and_value<'a>(nodes: &'a [Node], node: &'a Node, values: &'a mut [f64]) -> (Inputs<'a, Node>, &'a mut [f64]) {
    let (lower, upper) = values.split_at_mut(node.val);
    let (out, above) = upper.split_at_mut(node.shape.size());
    (Inputs { operands: nodes, parents: &node.parents, values: lower, above, above_from: node.val + node.shape.size() }, out)
}

/// Evaluate node `id` from its parents' values.
pub fn eval(nodes: &[Node], id: usize, values: &mut [f64], aux: &mut [f64]) -> Result<()> {
    let node = &nodes[id];
    let (p, out) = operands_and_value(nodes, node, values);
    rules::forward(node.op, &p, out, &mut aux[node.aux..node.aux + node.aux_len])
}

/// `eval` of a solveGeneral node whose matrix has not changed since its
/// last `eval`: no factorization, the same bits.
pub fn eval_factored(nodes: &[Node], id: usize, values: &mut [f64], aux: &[f64]) {
    let node = &nodes[id];
    debug_assert_eq!(node.op, crate::core::op::Op::SolveGeneral);
    let (p, out) = operands_and_value(nodes, node, values);
    rules::solve_factored(&p, out, &aux[node.aux..node.aux + node.aux_len])
}

/// Propagate node `id`'s adjoint to each parent that `needs` one (`fresh`: those it writes first).
pub fn propagate(nodes: &[Node], id: usize, values: &[f64], adj: &mut [f64], aux: &mut [f64], needs: &[bool], fresh: kernels::FreshAdjoints) {
    let node = &nodes[id];
    if let Some((f, k)) = Formula::of(node.op).filter(|_| node.shape == Shape::Scalar) {
        // An elementwise op with a scalar result has scalar operands (never fresh: small).
        let (a, b) = (node.parents[0] as usize, node.parents[node.parents.len() - 1] as usize);
        let at = [nodes[a].val, nodes[b].val, node.val];
        return scalar::accumulate(f, k, at, [needs[a], needs[b]], values, adj);
    }
    let (lower, upper) = adj.split_at_mut(node.val);
    let g = &upper[..node.shape.size()];
    let p = inputs(nodes, node, values);
    let out = &values[node.range()];
    let aux = &mut aux[node.aux..node.aux + node.aux_len];
    let mut writes = kernels::FirstWrites::new(lower, fresh);
    rules::adjoint(node.op, &p, out, g, aux, |parent| needs[parent as usize], &mut writes);
    writes.finish();
}

/// `propagate` in a plan's adjoint arena, node `i`'s adjoint at `at[i]`: its value's offset,
/// or a block shared with adjoints never live at the same time (`Plan::share_adjoints`);
/// a node's adjoint and its parents' are live together, so never overlap.
#[allow(clippy::too_many_arguments)]
pub fn propagate_at(nodes: &[Node], id: usize, values: &[f64], adj: &mut [f64], at: &[usize], aux: &mut [f64], needs: &[bool], fresh: kernels::FreshAdjoints) {
    let node = &nodes[id];
    let size = node.shape.size();
    if at[id] == node.val && Formula::of(node.op).is_some() && node.shape == Shape::Scalar {
        // A scalar and its scalar operands are never shared: laid out like the values.
        debug_assert!(fresh.is_empty(), "a scalar's operands are not large");
        return propagate(nodes, id, values, adj, aux, needs, fresh);
    }
    let (left, rest) = adj.split_at_mut(at[id]);
    let (g, right) = rest.split_at_mut(size);
    let mut split = Split { left, right, right_start: at[id] + size, at };
    let mut writes = kernels::FirstWrites::new(&mut split, fresh);
    let p = inputs(nodes, node, values);
    let aux = &mut aux[node.aux..node.aux + node.aux_len];
    rules::adjoint(node.op, &p, &values[node.range()], g, aux, |parent| needs[parent as usize], &mut writes);
    writes.finish();
}

/// A plan's adjoint arena but the adjoint being propagated: what lies
/// before it and what lies after.
struct Split<'a> {
    left: &'a mut [f64],
    right: &'a mut [f64],
    right_start: usize,
    at: &'a [usize],
}

impl kernels::Adjoints for Split<'_> {
    fn of(&mut self, id: u32, val: std::ops::Range<usize>) -> &mut [f64] {
        let start = self.at[id as usize];
        let len = val.len();
        if start < self.left.len() {
            &mut self.left[start..start + len]
        } else {
            let from = start - self.right_start;
            &mut self.right[from..from + len]
        }
    }
}

impl Graph {
    /// A graph that does not merge identical nodes.
    pub fn without_merging() -> Graph {
        Graph { no_merging: true, ..Graph::default() }
    }

    /// A copy whose leaves (parameters, inputs, constants) hold their
    /// values and whose other values and scratch are zeroed: a plan's
    /// replica, which recomputes them (`Plan`'s `Clone`).
    pub fn replica(&self) -> Graph {
        let mut values = vec![0.0; self.values.len()];
        self.copy_leaf_values(&mut values);
        Graph { nodes: self.nodes.clone(), values, aux: vec![0.0; self.aux.len()], merged: self.merged.clone(), zero_tail: None, aux_tail: None, ..*self }
    }

    /// Write the leaves' values (parameters, inputs, constants) into
    /// `values`, an arena laid out like this one's.
    fn copy_leaf_values(&self, values: &mut [f64]) {
        for node in self.nodes.iter().filter(|n| n.op.is_leaf()) {
            values[node.range()].copy_from_slice(&self.values[node.range()]);
        }
    }

    /// Forget every node, keeping the arenas' capacity.
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.values.clear();
        self.aux.clear();
        self.merged.clear();
    }

    /// Free the (cleared) arenas' memory.
    pub fn release_arenas(&mut self) {
        self.values = Vec::new();
        self.aux = Vec::new();
    }

    pub fn node(&self, id: u32) -> Result<&Node> {
        self.nodes.get(id as usize).ok_or_else(|| Error(format!("node {id} does not exist")))
    }

    pub fn value(&self, id: u32) -> Result<&[f64]> {
        Ok(&self.values[self.node(id)?.range()])
    }

    /// The node is built in its place at the end of `nodes`: taking
    /// `Parents` by value copied it through the stack, and the copy stalled.
    fn append(&mut self, op: Op, parents: &[u32], shape: Shape, aux_len: usize) -> Result<u32> {
        if self.nodes.len() >= u32::MAX as usize {
            return fail!("graph is full");
        }
        let val = self.grow_values(shape.size())?;
        let aux = self.grow_aux(aux_len).inspect_err(|_| self.values.truncate(val))?;
        self.nodes.push(Node { op, parents: parents_of(parents), shape, val, aux, aux_len });
        Ok((self.nodes.len() - 1) as u32)
    }

    /// A leaf (`Leaf`, `Input` or `Const`) holding `data`, or zeros when
    /// `data` is empty and the shape is not.
    pub fn leaf(&mut self, op: Op, shape: Shape, data: &[f64]) -> Result<u32> {
        debug_assert!(op.is_leaf());
        if !data.is_empty() && data.len() != shape.size() {
            return fail!("data length {} does not match shape {}", data.len(), shape);
        }
        if shape == Shape::Scalar {
            return self.push_scalar(op, &[], data.first().copied().unwrap_or(0.0));
        }
        let id = self.append(op, &[], shape, 0)?;
        if !data.is_empty() {
            let r = self.nodes[id as usize].range();
            self.values[r].copy_from_slice(data);
        }
        Ok(id)
    }

    /// A node built by hand in JavaScript: its value is given, its adjoint is
    /// the caller's business.
    pub fn external(&mut self, shape: Shape, data: &[f64], parents: &[u32]) -> Result<u32> {
        for &p in parents {
            self.node(p)?;
        }
        if data.len() != shape.size() {
            return fail!("data length {} does not match shape {}", data.len(), shape);
        }
        let id = self.append(Op::External, parents, shape, 0)?;
        let r = self.nodes[id as usize].range();
        self.values[r].copy_from_slice(data);
        Ok(id)
    }

    /// Record `op` on `parents`, merging it with an identical earlier node.
    /// With `evaluate` the value is computed now; an op that fails (a matrix
    /// that is not positive definite) leaves the graph as it was.
    pub fn op(&mut self, op: Op, parents: &[u32], evaluate: bool) -> Result<u32> {
        let mut shapes = smallvec::SmallVec::<[Shape; 2]>::new();
        for &p in parents {
            shapes.push(self.node(p)?.shape);
        }
        let shape = op.infer(&shapes)?;
        if shape.checked_size().is_none_or(|n| n > MAX_ELEMENTS) {
            // Counted widened, so that a product past a usize prints exactly.
            let (m, n) = shape.rows_cols();
            return fail!("{}: result of {} elements is too large", op.name(), m as u128 * n as u128);
        }
        let mergeable = !self.no_merging && !batched(op);
        if mergeable {
            if let Some(&id) = self.merged.get(&(op, parents_of(parents))) {
                return Ok(id);
            }
        }
        let id = self.append(op, parents, shape, op.aux_len(&shapes))?;
        if evaluate {
            if let Err(e) = eval(&self.nodes, id as usize, &mut self.values, &mut self.aux) {
                let node = self.nodes.pop().expect("just pushed");
                self.values.truncate(node.val);
                self.aux.truncate(node.aux);
                return Err(e);
            }
        }
        if mergeable {
            self.merged.insert((op, parents_of(parents)), id);
        }
        Ok(id)
    }

    /// An elementwise op on scalar nodes `parents` (one or two, checked by
    /// the caller), evaluated and never merged, without the shape inference
    /// and kernel dispatch of `op`: what JavaScript's queue records.
    pub fn scalar_op(&mut self, op: Op, parents: &[u32]) -> Result<u32> {
        let (a, b) = (parents[0] as usize, parents[parents.len() - 1] as usize);
        let Some((f, k)) = Formula::of(op) else {
            return fail!("{} has no scalar formula", op.name());
        };
        let value = scalar::value(f, k, self.values[self.nodes[a].val], self.values[self.nodes[b].val]);
        self.push_scalar(op, parents, value)
    }

    /// `append` for a scalar node holding `value`. Most nodes of a small
    /// model: written in place, where `append`'s general path copied each
    /// node through the stack and stalled on it.
    fn push_scalar(&mut self, op: Op, parents: &[u32], value: f64) -> Result<u32> {
        let id = self.nodes.len();
        if id >= u32::MAX as usize || self.nodes.try_reserve(1).is_err() || self.values.try_reserve(1).is_err() {
            return fail!("graph is full");
        }
        let val = self.values.len();
        self.values.push(value);
        if let Some(t) = &mut self.zero_tail {
            t.extended(&self.values);
        }
        let aux = self.aux.len();
        self.nodes.push(Node { op, parents: parents_of(parents), shape: Shape::Scalar, val, aux, aux_len: 0 });
        Ok(id as u32)
    }

    /// Replace a node by a constant holding its current value (constant folding).
    pub fn freeze(&mut self, id: u32) {
        let node = &mut self.nodes[id as usize];
        node.op = Op::Const;
        node.parents.clear();
    }
}

/// The nodes that reach `root`, parents before children: a depth-first
/// post-order that visits a node's parents from the last to the first. This
/// is the order plans are written in (SPEC §8) and the order every adjoint
/// sweep runs backwards, so eager, compiled and rebuilt plans accumulate
/// adjoints in the same order and agree bit for bit.
pub fn post_order(nodes: &[Node], root: u32) -> Vec<u32> {
    let mut walk = Walk::default();
    let mut order = Vec::new();
    post_order_into(nodes, root, &mut walk, &mut order);
    order
}

/// The nodes that reach any of `roots`: each root's `post_order` in turn,
/// less what an earlier root's walk already listed (still parents first).
pub fn post_order_all(nodes: &[Node], roots: &[u32]) -> Vec<u32> {
    let mut listed = vec![false; nodes.len()];
    let mut order = Vec::new();
    for &root in roots {
        for id in post_order(nodes, root) {
            if !std::mem::replace(&mut listed[id as usize], true) {
                order.push(id);
            }
        }
    }
    order
}

/// Scratch for `post_order_into`, kept by a tape so that a sweep over a few
/// nodes allocates nothing (on small models the allocation showed).
#[derive(Default)]
pub struct Walk {
    /// The walk that last saw each node, grown to the graph's size as
    /// needed: a node is seen by this walk when it holds `walk`, so nothing
    /// has to be cleared between walks.
    seen: Vec<u32>,
    walk: u32,
    /// Empty between walks.
    stack: Vec<(u32, usize)>,
}

/// `post_order` into `order`, with `walk` as scratch, so that a sweep over
/// a few nodes of a large tape costs what it visits, not the tape's size.
pub fn post_order_into(nodes: &[Node], root: u32, walk: &mut Walk, order: &mut Vec<u32>) {
    post_order_with(nodes, root, walk, order, |_| {})
}

/// `post_order_into`, calling `finished` on each node as it joins `order`
/// (its parents have joined before it), so that a sweep can do its marking
/// in the same pass.
pub fn post_order_with(nodes: &[Node], root: u32, walk: &mut Walk, order: &mut Vec<u32>, mut finished: impl FnMut(u32)) {
    let Walk { seen, walk, stack } = walk;
    if seen.len() < nodes.len() {
        seen.resize(nodes.len(), 0);
    }
    *walk = walk.wrapping_add(1);
    if *walk == 0 {
        // After 2^32 walks the marks repeat: start them afresh.
        seen.fill(0);
        *walk = 1;
    }
    let now = *walk;
    order.clear();
    stack.push((root, 0));
    seen[root as usize] = now;
    while let Some(top) = stack.last_mut() {
        let (id, visited) = *top;
        let parents = &nodes[id as usize].parents;
        if visited < parents.len() {
            top.1 += 1;
            let p = parents[parents.len() - 1 - visited];
            if seen[p as usize] != now {
                seen[p as usize] = now;
                // A leaf is finished as soon as it is found (the order is
                // the same as pushing it): a third of a small model's nodes.
                if nodes[p as usize].parents.is_empty() {
                    order.push(p);
                    finished(p);
                } else {
                    stack.push((p, 0));
                }
            }
        } else {
            order.push(id);
            finished(id);
            stack.pop();
        }
    }
}

/// Mark which nodes of `order` carry an adjoint: the sources and everything
/// that depends on one. `needs` is indexed by node id, grown to the graph's
/// size; entries outside `order` are left as they are.
pub fn mark_needs(nodes: &[Node], order: &[u32], is_source: impl Fn(&Node) -> bool, needs: &mut Vec<bool>) {
    if needs.len() < nodes.len() {
        needs.resize(nodes.len(), false);
    }
    for &id in order {
        let node = &nodes[id as usize];
        needs[id as usize] = is_source(node) || node.parents.iter().any(|&p| needs[p as usize]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// x, c; a = x·c; b = a + x; r = a·b: shared parents, so a walk that
    /// forgot what it had seen would list a node twice.
    fn diamond() -> (Graph, u32) {
        let mut g = Graph::default();
        let x = g.leaf(Op::Leaf, Shape::Scalar, &[2.0]).unwrap();
        let c = g.leaf(Op::Const, Shape::Scalar, &[3.0]).unwrap();
        let a = g.op(Op::Mul, &[x, c], true).unwrap();
        let b = g.op(Op::Add, &[a, x], true).unwrap();
        let r = g.op(Op::Mul, &[a, b], true).unwrap();
        (g, r)
    }

    #[test]
    fn walks_agree_across_the_wrap_of_their_marks() {
        let (g, r) = diamond();
        let first = post_order(&g.nodes, r);
        // Parents from the last to the first: r visits b, b visits x (0)
        // and then a, a visits c (1) and finds x seen; then a, b, r.
        assert_eq!(first, vec![0, 1, 2, 3, 4]);
        let mut walk = Walk { walk: u32::MAX - 1, ..Walk::default() };
        let mut order = Vec::new();
        for _ in 0..4 {
            post_order_into(&g.nodes, r, &mut walk, &mut order);
            assert_eq!(order, first);
            // A walk from a sees only what reaches it: c, x, a.
            post_order_into(&g.nodes, 2, &mut walk, &mut order);
            assert_eq!(order, vec![1, 0, 2]);
        }
        assert!(walk.walk < 10, "the marks wrapped and restarted");
    }

    #[test]
    fn a_walk_numbered_zero_after_the_wrap_sees_nothing_stale() {
        let (g, _) = diamond();
        // Marks never written hold 0: the walk after u32::MAX must not be
        // numbered 0, or every node would look seen already.
        let mut walk = Walk { walk: u32::MAX, ..Walk::default() };
        let mut order = Vec::new();
        post_order_into(&g.nodes, 2, &mut walk, &mut order);
        assert_eq!(order, vec![1, 0, 2]);
    }
}
