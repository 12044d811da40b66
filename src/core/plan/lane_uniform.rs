//! Adjoints that are the same in every lane (lanes.rs).
//!
//! In a Hessian's lanes (x fixed, a unit direction per lane) the tangent
//! t = ∇f·v is linear in v, so the adjoints of the tangent's own nodes,
//! ∂t/∂ẏ, do not depend on v: they are f's adjoints, the same in every
//! lane. Sweeping them in lanes computed each eight times per group of
//! directions. A node's adjoint is the same in every lane when each term
//! that reaches it comes from an adjoint that is, by a partial that reads
//! no value that varies. Those adjoints are swept once, when the lanes are
//! made, by the ordinary kernels in the plan's own arena (the same
//! expressions in the same order as the lane kernels, so the same bits),
//! and written into every lane where a lane step or a gradient reads them.

use super::lane_base::{Lane, LANES};
use super::{arena_ranges, Plan, Step};
use crate::core::graph::{propagate, Node};
use crate::core::kernels::scalar::{self, Formula};
use crate::core::op::Op;
use std::cell::Cell;

/// Which swept adjoints are the same in every lane, and how to make them.
pub(super) struct Uniform {
    /// Per node.
    pub same: Vec<bool>,
    /// Per arena offset, for the scalars scalar steps name by offset.
    pub same_at: Vec<bool>,
    /// The backward steps that give a term to one of them, in sweep order.
    steps: Vec<Step>,
    /// Their adjoint ranges, cleared before those steps.
    clear: Vec<(usize, usize)>,
    /// Those a lane step or a gradient's copy reads: written into every lane.
    shown: Vec<u32>,
    /// Those an elementwise lane step alone reads, from the plan's arena
    /// instead (`Layout::flat_adjoint`): the regression Hessian's three
    /// 340-vectors were 64 bytes an element of stores, each call.
    pub flat: Vec<bool>,
    /// Whether any lane step or copy reads what the sweep gives (some are
    /// shown or flat): else `sweep_uniform` skips it.
    read: bool,
}

/// Whether the term of `node`'s adjoint to operand `k` reads a value that
/// varies (a laned op's partial: `Formula::reads`, or the other operand).
fn term_varies(nodes: &[Node], id: usize, k: usize, varying: &[bool]) -> bool {
    let node = &nodes[id];
    let (a, b) = (node.parents[0] as usize, node.parents[node.parents.len() - 1] as usize);
    match Formula::of(node.op) {
        Some((f, _)) => {
            let [x, y, out] = f.reads(k);
            (x && varying[a]) || (y && varying[b]) || (out && varying[id])
        }
        None => match node.op {
            Op::Sum | Op::Mean | Op::Slice { .. } | Op::Reshape(_) | Op::Concat { .. } => false,
            Op::Dot | Op::Matmul | Op::TriangularSolve { .. } => varying[node.parents[1 - k] as usize],
            _ => true,
        },
    }
}

impl Plan {
    /// How many swept adjoints are the same in every lane of lanes made
    /// with `fixed` slots: what tests check that with.
    #[doc(hidden)]
    pub fn lanes_uniform(&self, fixed: usize) -> Option<usize> {
        let (varying, swept, _) = self.lane_varying(fixed, true)?;
        Some(self.uniform_adjoints(fixed, &varying, &swept).same.iter().filter(|&&s| s).count())
    }

    /// `Uniform` for lanes with `fixed` slots whose values vary where
    /// `varying` says and whose sweep runs over `swept`. None are where
    /// adjoints share blocks, nor in a batch's lanes (no fixed slot), whose
    /// points differ in every parameter: there only the root's first
    /// adjoints would be, and their lanes of their own cost more than the
    /// passes they save (a 256-point regression batch 3% slower).
    pub(super) fn uniform_adjoints(&self, fixed: usize, varying: &[bool], swept: &[bool]) -> Uniform {
        let (nodes, size) = (&self.graph.nodes, self.graph.values.len());
        let mut same = match self.shared {
            None if fixed > 0 => swept.to_vec(),
            _ => vec![false; nodes.len()],
        };
        let node_at = self.scalar_nodes();
        // A scalar step's node and its operands': whether each takes a
        // term, and whether that term reads a value that varies.
        let scalar_parents = |s: &super::ScalarStep| {
            let [a, b, out] = s.at().map(|at| node_at[at] as usize);
            let varies = |n: usize| varying.get(n).copied().unwrap_or(true);
            let reads = |k: usize| {
                let [x, y, o] = s.formula.reads(k);
                (x && varies(a)) || (y && varies(b)) || (o && varies(out))
            };
            let takes = [s.needs[0], s.needs[1] && s.formula.binary()];
            (out, [(a, takes[0], reads(0)), (b, takes[1], reads(1))])
        };
        // Sweep order: every term to a node comes before the node's own step.
        for step in &self.backward {
            match *step {
                Step::Scalar(s) => {
                    let (out, terms) = scalar_parents(&s);
                    for (p, _, varies) in terms.into_iter().filter(|t| t.1) {
                        same[p] &= same[out] && !varies;
                    }
                }
                Step::Node(id) if swept[id as usize] => {
                    for (k, &p) in nodes[id as usize].parents.iter().enumerate() {
                        let p = p as usize;
                        same[p] &= !swept[p] || (same[id as usize] && !term_varies(nodes, id as usize, k, varying));
                    }
                }
                Step::Node(_) => {}
            }
        }
        let mut same_at = vec![false; size];
        for (_, node) in nodes.iter().enumerate().filter(|&(id, _)| same[id]) {
            same_at[node.range()].fill(true);
        }
        // A step runs here if it gives a term to an adjoint that is the
        // same, and in lanes (reading its own, written there) if to one that is not.
        let (mut steps, mut shown, mut flat) = (Vec::new(), Vec::new(), vec![false; nodes.len()]);
        for step in &self.backward {
            let (out, to) = match *step {
                Step::Scalar(s) => {
                    let (out, terms) = scalar_parents(&s);
                    (out, terms.iter().filter(|t| t.1).map(|t| same[t.0]).collect::<Vec<bool>>())
                }
                Step::Node(id) if swept[id as usize] => {
                    let parents = nodes[id as usize].parents.iter().filter(|&&p| swept[p as usize]);
                    (id as usize, parents.map(|&p| same[p as usize]).collect())
                }
                Step::Node(_) => continue,
            };
            if to.iter().any(|&s| s) {
                steps.push(*step);
            }
            if same[out] && to.iter().any(|&s| !s) {
                let node = &nodes[out];
                match *step {
                    Step::Node(_) if Formula::of(node.op).is_some() && node.shape.size() > 1 => flat[out] = true,
                    _ => shown.push(out as u32),
                }
            }
        }
        shown.extend(self.params.iter().filter_map(|s| s.node).filter(|&p| same[p as usize]));
        let clear = arena_ranges(nodes, |id| same[id]);
        let read = !shown.is_empty() || flat.contains(&true);
        Uniform { same, same_at, steps, clear, shown, flat, read }
    }

    /// The adjoints that are the same in every lane, swept once in the
    /// plan's own arena from the values `lanes` computed (where `flat`
    /// ones are read), and written into every lane of `v` where `adjoint`
    /// places them.
    pub(super) fn sweep_uniform(&mut self, u: &Uniform, adjoint: &[usize], v: &[Cell<Lane>]) {
        if !u.read {
            return;
        }
        let adj = &mut self.adj.0;
        for &(a, b) in &u.clear {
            adj[a..b].fill(0.0);
        }
        let g = &mut self.graph;
        adj[g.nodes[self.root as usize].val] = 1.0;
        for step in &u.steps {
            match *step {
                Step::Scalar(s) => {
                    let needs = [s.needs[0] && u.same_at[s.a as usize], s.needs[1] && u.same_at[s.b as usize]];
                    scalar::accumulate(s.formula, s.k, s.at(), needs, &g.values, adj);
                }
                Step::Node(id) => propagate(&g.nodes, id as usize, &g.values, adj, &mut g.aux, &u.same, Default::default()),
            }
        }
        for &id in &u.shown {
            let node = &g.nodes[id as usize];
            for (lane, &a) in v[adjoint[id as usize]..].iter().zip(&adj[node.range()]) {
                lane.set([a; LANES]);
            }
        }
    }
}
