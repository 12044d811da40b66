//! Forward mode: the tangent of a root, recorded as ops on the graph (as
//! JAX writes its jvp rules in primitives). `jvp` walks the nodes that
//! reach the root and records, beside them, each one's tangent by its op's
//! rule (`core/rules`, where each family keeps its forward, adjoint and
//! tangent rules together). What it records is plain graph: evaluated on
//! the spot on an eager tape, compiled into a plan like any objective, and
//! swept back by the adjoint rules. So a Hessian-vector product is the
//! gradient of the scalar tangent ∇f·v (reverse over forward), with no
//! second set of rules.

use super::error::Result;
use super::graph::{post_order, Graph};
use super::op::Op;
use super::rules::{self, Record};
use super::shape::Shape;
use crate::fail;
use std::collections::HashMap;

/// The rules' constants, each recorded once per `jvp`.
#[derive(Hash, PartialEq, Eq, Clone, Copy)]
enum Constant {
    Number(u64),
    Zeros(Shape),
    /// n×n: 1 on and below the diagonal (`lower`) or on and above it.
    Triangle { n: usize, lower: bool },
}

/// What the tangent rules record on (`rules::Record`): the graph, and the
/// constants recorded so far.
struct Recorder<'a> {
    g: &'a mut Graph,
    evaluate: bool,
    constants: HashMap<Constant, u32>,
}

impl Recorder<'_> {
    fn constant(&mut self, c: Constant) -> Result<u32> {
        if let Some(&id) = self.constants.get(&c) {
            return Ok(id);
        }
        let id = match c {
            Constant::Number(bits) => self.g.leaf(Op::Const, Shape::Scalar, &[f64::from_bits(bits)])?,
            Constant::Zeros(s) => self.g.leaf(Op::Const, s, &[])?,
            Constant::Triangle { n, lower } => self.mask(n, |i, j| ((i >= j) == lower || i == j) as u8 as f64)?,
        };
        self.constants.insert(c, id);
        Ok(id)
    }

    /// An n×n constant of entries `entry(i, j)`, written in place in the
    /// arena (which refuses what it cannot hold, where a Vec would abort).
    fn mask(&mut self, n: usize, entry: impl Fn(usize, usize) -> f64) -> Result<u32> {
        let id = self.g.leaf(Op::Const, Shape::Matrix(n, n), &[])?;
        let r = self.g.nodes[id as usize].range();
        for (k, x) in self.g.values[r].iter_mut().enumerate() {
            *x = entry(k / n, k % n);
        }
        Ok(id)
    }
}

impl Record for Recorder<'_> {
    /// The node `op(parents)`; −(−x) is x itself (a negation is exact).
    /// Rules make such pairs: c/s's tangent is −((c/s)·ṡ/s), so −(c/s)'s
    /// would be its negation.
    fn op(&mut self, op: Op, parents: &[u32]) -> Result<u32> {
        if op == Op::Neg {
            let operand = self.g.node(parents[0])?;
            if operand.op == Op::Neg {
                return Ok(operand.parents[0]);
            }
        }
        self.g.op(op, parents, self.evaluate)
    }

    fn shape(&self, id: u32) -> Shape {
        self.g.nodes[id as usize].shape
    }

    fn number(&mut self, x: f64) -> Result<u32> {
        self.constant(Constant::Number(x.to_bits()))
    }

    fn zeros(&mut self, shape: Shape) -> Result<u32> {
        self.constant(Constant::Zeros(shape))
    }

    fn triangle(&mut self, n: usize, lower: bool) -> Result<u32> {
        self.constant(Constant::Triangle { n, lower })
    }

    /// The Cholesky tangent, or its transposes: it writes zeros above the
    /// diagonal, and its adjoints read the lower triangle of its own alone.
    fn triangular(&self, id: u32) -> Option<bool> {
        let (mut node, mut lower) = (&self.g.nodes[id as usize], true);
        while node.op == Op::Transpose {
            (node, lower) = (&self.g.nodes[node.parents[0] as usize], !lower);
        }
        (node.op == Op::CholeskyTangent).then_some(lower)
    }
}

/// Record on `g` the tangent of `root` when each leaf of `seeds` moves
/// along its tangent node: `(leaf, tangent)` pairs, the tangent shaped like
/// the leaf. `None` when the root does not depend on any seed (its tangent
/// is zero). With `evaluate` the new nodes are computed as they are made.
pub fn jvp(g: &mut Graph, root: u32, seeds: &[(u32, u32)], evaluate: bool) -> Result<Option<u32>> {
    g.node(root)?;
    let order = post_order(&g.nodes, root);
    let mut tangent: HashMap<u32, u32> = HashMap::with_capacity(order.len());
    for &(leaf, t) in seeds {
        if g.node(leaf)?.shape != g.node(t)?.shape {
            return fail!("a tangent of {} for a leaf of {}", g.nodes[t as usize].shape, g.nodes[leaf as usize].shape);
        }
        tangent.insert(leaf, t);
    }
    let mut r = Recorder { g, evaluate, constants: HashMap::new() };
    for id in order {
        let node = &r.g.nodes[id as usize];
        if node.parents.is_empty() {
            continue;
        }
        let (op, parents) = (node.op, node.parents.clone());
        let ts: Vec<Option<u32>> = parents.iter().map(|p| tangent.get(p).copied()).collect();
        if ts.iter().all(Option::is_none) {
            continue;
        }
        if let Some(t) = rules::tangent(&mut r, op, id, &parents, &ts)? {
            tangent.insert(id, t);
        }
    }
    Ok(tangent.get(&root).copied())
}
