//! The eager tape: a graph recorded as ops are called, with values computed
//! on the spot, and a reverse sweep that pauses at hand-built nodes so their
//! JavaScript closures can run.

use super::error::Result;
use super::graph::{post_order_with, propagate, Graph, Walk};
use super::kernels::matrix::axpy;
use super::kernels::scalar::{self, Formula};
use super::op::Op;
use crate::fail;

#[derive(Default)]
pub struct Tape {
    pub graph: Graph,
    adj: Vec<f64>,
    order: Vec<u32>,
    needs: Vec<bool>,
    walk: Walk,
    /// How many nodes of `order`, from the front, the sweep has still to visit.
    pending: usize,
    /// An evaluation of scalar nodes only, swept without a graph.
    pub scalars: Scalars,
}

impl Tape {
    /// Forget every node, keeping the arenas' capacity.
    pub fn reset(&mut self) {
        self.graph.clear();
        self.order.clear();
        self.needs.clear();
        self.pending = 0;
    }

    /// Start a reverse sweep from `root`, seeded with `seed` (1 for a scalar
    /// when `None`). Returns the first hand-built node met, whose closure the
    /// caller runs before calling `resume`; `None` when the sweep is done.
    pub fn backward(&mut self, root: u32, seed: Option<&[f64]>) -> Result<Option<u32>> {
        let shape = self.graph.node(root)?.shape;
        let seed_len = seed.map_or(1, <[f64]>::len);
        match seed {
            None if shape.size() != 1 || shape.rank() != 0 => {
                return fail!("backward() needs an explicit seed for a {shape} node; only a scalar objective can seed itself with 1.")
            }
            Some(_) if seed_len != shape.size() => {
                return fail!("seed has {seed_len} elements but this node holds {}", shape.size())
            }
            _ => {}
        }
        let nodes = &self.graph.nodes;
        // Forget the last sweep's marks, then visit only what reaches the root:
        // a sweep costs what it visits, however large the tape has grown.
        for &id in &self.order {
            self.needs[id as usize] = false;
        }
        if self.needs.len() < nodes.len() {
            self.needs.resize(nodes.len(), false);
        }
        if self.adj.len() < self.graph.values.len() {
            self.adj.resize(self.graph.values.len(), 0.0);
        }
        // One pass marks what carries an adjoint (a parameter, or anything
        // computed from one) and clears those adjoints, and only those: the
        // arena also holds the (often large) constants, which carry none.
        let (needs, adj) = (&mut self.needs, &mut self.adj);
        post_order_with(nodes, root, &mut self.walk, &mut self.order, |id| {
            let node = &nodes[id as usize];
            let need = node.op == Op::Leaf || node.parents.iter().any(|&p| needs[p as usize]);
            needs[id as usize] = need;
            if need {
                match node.range() {
                    r if r.len() == 1 => adj[r.start] = 0.0, // most nodes of a small model: no memset call
                    r => adj[r].fill(0.0),
                }
            }
        });
        // The root always does; its adjoint is the seed, written whole below.
        self.needs[root as usize] = true;
        let r = nodes[root as usize].range();
        match seed {
            Some(s) => self.adj[r].copy_from_slice(s),
            None => self.adj[r.start] = 1.0,
        }
        self.pending = self.order.len();
        Ok(self.resume())
    }

    /// Continue the sweep after a hand-built node's contributions are in.
    pub fn resume(&mut self) -> Option<u32> {
        let nodes = &self.graph.nodes;
        while self.pending > 0 {
            self.pending -= 1;
            let id = self.order[self.pending];
            if !self.needs[id as usize] {
                continue;
            }
            match nodes[id as usize].op {
                Op::External => return Some(id),
                op if op.is_leaf() => {}
                _ => propagate(nodes, id as usize, &self.graph.values, &mut self.adj, &mut self.graph.aux, &self.needs),
            }
        }
        None
    }

    /// The adjoint of `id` after the last sweep, if it carries one.
    pub fn adjoint(&self, id: u32) -> Option<&[f64]> {
        let node = self.graph.nodes.get(id as usize)?;
        (*self.needs.get(id as usize)?).then(|| &self.adj[node.range()])
    }

    /// Add a hand-built node's contribution to a parent's adjoint.
    pub fn accumulate(&mut self, id: u32, contribution: &[f64]) -> Result<()> {
        let node = self.graph.node(id)?;
        if contribution.len() != node.shape.size() {
            return fail!(
                "a hand-built node's backward returned {} values for a parent of shape {}",
                contribution.len(),
                node.shape
            );
        }
        if self.needs.get(id as usize).copied().unwrap_or(false) {
            axpy(1.0, contribution, &mut self.adj[node.range()]);
        }
        Ok(())
    }
}

/// A whole evaluation made of scalar nodes, as JavaScript queued them
/// (src/js/queue.js): its values, its sweep and its gradients, with no graph
/// recorded. The same formulas (`scalar::value`, and `scalar::partial` as
/// `scalar::accumulate` applies it) in the same order as `Graph::scalar_op`
/// and `Tape::backward`, whose walk from the root this one repeats, so the
/// results are the tape's bit for bit; what it saves is the graph's
/// bookkeeping (nodes, parents lists, an arena), most of an evaluation's
/// cost in the core on a small model.
#[derive(Default)]
pub struct Scalars {
    /// The queued nodes, by id.
    pub nodes: Vec<ScalarNode>,
    order: Vec<u32>,
    stack: Vec<(u32, usize)>,
}

#[derive(Clone, Copy)]
pub struct ScalarNode {
    /// `None` for a leaf.
    formula: Option<Formula>,
    /// pow's exponent (0 for any other formula).
    k: f64,
    /// The operands, `b == a` for a unary op (as `Graph::scalar_op` reads them).
    a: u32,
    b: u32,
    /// A parameter leaf: the sweep's sources.
    param: bool,
    value: f64,
    adj: f64,
    needs: bool,
    seen: bool,
}

impl ScalarNode {
    pub fn leaf(param: bool, value: f64) -> ScalarNode {
        ScalarNode { formula: None, k: 0.0, a: 0, b: 0, param, value, adj: 0.0, needs: false, seen: false }
    }

    /// An op on earlier nodes, its value computed from theirs.
    pub fn op(formula: Formula, k: f64, a: u32, b: u32, nodes: &[ScalarNode]) -> ScalarNode {
        let value = scalar::value(formula, k, nodes[a as usize].value, nodes[b as usize].value);
        ScalarNode { formula: Some(formula), k, a, b, param: false, value, adj: 0.0, needs: false, seen: false }
    }
}

impl Scalars {
    /// Sweep from `root` and write the gradients of `leaves` (ids as
    /// JavaScript wrote them) into `out`; the root's value. `None`, with
    /// `out` untouched, when a node named is not among them or `out` is
    /// short: the graph's path says why.
    pub fn finish(&mut self, root: u32, leaves: &[i32], out: &mut [f64]) -> Option<f64> {
        let n = self.nodes.len();
        let exists = |id: i32| id >= 0 && (id as usize) < n;
        if root as usize >= n || !leaves.iter().all(|&id| exists(id)) || out.len() < leaves.len() {
            return None;
        }
        self.walk(root);
        let nodes = &mut self.nodes;
        nodes[root as usize].adj = 1.0;
        for &id in self.order.iter().rev() {
            let node = nodes[id as usize];
            if let (Some(f), true) = (node.formula, node.needs) {
                let (a, b) = (node.a as usize, node.b as usize);
                // The kernels' order: operand 0 first, then 1 (binary ops only).
                if nodes[a].needs {
                    let (x, y) = (nodes[a].value, nodes[b].value);
                    nodes[a].adj += scalar::partial(f, node.k, 0, x, y, node.value, node.adj);
                }
                if f.binary() && nodes[b].needs {
                    let (x, y) = (nodes[a].value, nodes[b].value);
                    nodes[b].adj += scalar::partial(f, node.k, 1, x, y, node.value, node.adj);
                }
            }
        }
        for (o, &id) in out.iter_mut().zip(leaves) {
            let node = &nodes[id as usize];
            *o = if node.needs { node.adj } else { 0.0 };
        }
        Some(nodes[root as usize].value)
    }

    /// `post_order_with` from `root` on these nodes (parents from the last
    /// to the first, a leaf finished when found), marking what carries an
    /// adjoint and clearing its adjoint as `Tape::backward` does.
    fn walk(&mut self, root: u32) {
        let (nodes, order, stack) = (&mut self.nodes, &mut self.order, &mut self.stack);
        let finish = |nodes: &mut [ScalarNode], order: &mut Vec<u32>, id: u32| {
            let node = nodes[id as usize];
            let needs = match node.formula {
                None => node.param,
                Some(f) => nodes[node.a as usize].needs || (f.binary() && nodes[node.b as usize].needs),
            };
            nodes[id as usize].needs = needs;
            nodes[id as usize].adj = 0.0;
            order.push(id);
        };
        order.clear();
        stack.clear();
        stack.push((root, 0));
        nodes[root as usize].seen = true;
        while let Some(top) = stack.last_mut() {
            let (id, visited) = *top;
            let node = nodes[id as usize];
            let parents: &[u32] = match node.formula {
                None => &[],
                Some(f) if f.binary() => &[node.a, node.b],
                Some(_) => &[node.a],
            };
            if visited < parents.len() {
                top.1 += 1;
                let p = parents[parents.len() - 1 - visited];
                if !nodes[p as usize].seen {
                    nodes[p as usize].seen = true;
                    if nodes[p as usize].formula.is_none() {
                        finish(nodes, order, p);
                    } else {
                        stack.push((p, 0));
                    }
                }
            } else {
                finish(nodes, order, id);
                stack.pop();
            }
        }
        // The root carries the seed whatever it is computed from.
        nodes[root as usize].needs = true;
    }
}
