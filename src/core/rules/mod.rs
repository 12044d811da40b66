//! Every op's rules, kept together by family, as JAX registers a primitive
//! with its implementation, its jvp and its transpose: the value
//! (`forward`), the adjoint (reverse mode: `adjoint`), the tangent
//! (forward mode: `tangent`, written as ops on the graph, which
//! `core::tangent` records) and which operand values each value reads
//! (`reads`, a Jacobian's sparsity: `core::pattern`). One file per family,
//! named by how its tangent is made:
//! - `elementwise.rs`: add … gt and the unary ops, on the per-element
//!   formulas of `kernels/scalar.rs` (a tangent: each operand's tangent
//!   times its partial);
//! - `linear.rs`: sum, mean, transpose, diagPart, addDiag, reshape, slice,
//!   concat (a tangent: the op on the tangents);
//! - `products.rs`: matmul, dot (the product rule);
//! - `linalg.rs`: cholesky (and its tangent, choleskyTangent),
//!   triangularSolve, solveGeneral (tangents by differentiating the
//!   equation the result solves).
//!
//! Adding an op: ARCHITECTURE.md, "Where to add an op". The loops the
//! rules call are in `kernels/` and `linalg/`; they never allocate.

mod elementwise;
mod linalg;
mod linear;
mod products;

use super::error::Result;
use super::kernels::{zero_if, Adjoints, Inputs, Operand};
use super::op::Op;
use super::shape::Shape;
use crate::fail;

/// The families above, and the leaves, which have no rule.
enum Family {
    Leaf,
    Elementwise,
    Linear,
    Product,
    Linalg,
}

/// Each op's family: the one list of which rules an op has.
fn family(op: Op) -> Family {
    match op {
        Op::Leaf | Op::Input | Op::Const | Op::External => Family::Leaf,
        Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Maximum | Op::Minimum | Op::Ge | Op::Gt => Family::Elementwise,
        Op::Neg | Op::Exp | Op::Log | Op::Sqrt | Op::Square | Op::Tanh | Op::Sigmoid | Op::Relu | Op::Lgamma | Op::Digamma | Op::Pow(_) => {
            Family::Elementwise
        }
        Op::Sum | Op::Mean | Op::Transpose | Op::DiagPart | Op::AddDiag | Op::Reshape(_) | Op::Slice { .. } | Op::Concat { .. } => Family::Linear,
        Op::Matmul | Op::Dot => Family::Product,
        Op::Cholesky | Op::CholeskyTangent | Op::TriangularSolve { .. } | Op::SolveGeneral => Family::Linalg,
    }
}

/// Compute a node's value from its parents', into `out`; `aux` is the
/// op's scratch (an LU's factors, kept for its adjoint).
pub fn forward<N: Operand>(op: Op, p: &Inputs<N>, out: &mut [f64], aux: &mut [f64]) -> Result<()> {
    match family(op) {
        Family::Leaf => Ok(()),
        Family::Elementwise => elementwise::forward(op, p, out),
        Family::Linear => {
            linear::forward(op, p, out);
            Ok(())
        }
        Family::Product => {
            products::forward(op, p, out);
            Ok(())
        }
        Family::Linalg => linalg::forward(op, p, out, aux),
    }
}

/// `forward` of a solveGeneral whose matrix is as it was at its last
/// `forward`: solved with the factors that left in `aux`.
pub fn solve_factored<N: Operand>(p: &Inputs<N>, out: &mut [f64], aux: &[f64]) {
    linalg::solve_factored(p, out, aux)
}

/// Accumulate the adjoint `g` of a node whose value is `out` into the
/// adjoint of each parent that `needs` one, in `adj`, parent 0 first. A
/// parent's adjoint may come fresh (`Adjoints::fresh`): the elementwise,
/// linear and linalg rules assign into it where they write every entry.
pub fn adjoint<N: Operand, A: Adjoints + ?Sized>(op: Op, p: &Inputs<N>, out: &[f64], g: &[f64], aux: &mut [f64], needs: impl Fn(u32) -> bool, adj: &mut A) {
    match family(op) {
        Family::Leaf => {}
        Family::Elementwise => each_parent(p, needs, adj, |k, d, fresh| elementwise::adjoint(op, k, p, out, g, d, fresh)),
        Family::Linear => linear::adjoint(op, p, g, needs, adj),
        Family::Product => each_parent(p, needs, adj, |k, d, fresh| {
            zero_if(fresh, d);
            products::adjoint(op, k, p, g, d)
        }),
        Family::Linalg => {
            linalg::prepare_adjoint(op, p, g, aux);
            each_parent(p, needs, adj, |k, d, fresh| linalg::adjoint(op, k, p, out, g, aux, d, fresh))
        }
    }
}

/// `share(k, adjoint of parent k, whether it is fresh)` for each parent
/// that `needs` one, in order.
#[inline(always)]
pub(super) fn each_parent<N: Operand, A: Adjoints + ?Sized>(p: &Inputs<N>, needs: impl Fn(u32) -> bool, adj: &mut A, mut share: impl FnMut(usize, &mut [f64], bool)) {
    for (k, &parent) in p.parents.iter().enumerate() {
        if needs(parent) {
            let (d, fresh) = adj.fresh(parent, p.range(k));
            share(k, d, fresh);
        }
    }
}

/// The tangent of node `y = op(p)`, recorded on `r`'s graph, given its
/// parents' tangents `ts` (at least one present); `None` for a zero tangent.
pub(crate) fn tangent(r: &mut dyn Record, op: Op, y: u32, p: &[u32], ts: &[Option<u32>]) -> Result<Option<u32>> {
    match family(op) {
        Family::Leaf if op == Op::External => fail!("this objective holds a node built outside this package's ops, which has no forward rule."),
        Family::Leaf => Ok(None),
        Family::Elementwise => elementwise::tangent(r, op, y, p, ts),
        Family::Linear => linear::tangent(r, op, y, p, ts),
        Family::Product => products::tangent(r, op, y, p, ts),
        Family::Linalg => linalg::tangent(r, op, y, p, ts),
    }
}

/// Which operand values each value of a node reads (`core::pattern`).
#[derive(Clone, Copy)]
pub(crate) enum Reads {
    /// Value e reads value e of each operand, or the one a broadcast
    /// operand spreads there (a scalar's only value; a row's e mod its length).
    Elementwise,
    /// The pairs `pairs` lists: a linear op that moves values.
    Pairs,
    /// Value (r, c) reads (r, t) of operand 0 and (t, c) of operand 1 for
    /// every t (`product_dims`): a term with an exact zero constant factor
    /// adds nothing.
    Product,
    /// Every value reads every value of every operand.
    All,
}

pub(crate) fn reads(op: Op) -> Reads {
    match (family(op), op) {
        (Family::Elementwise, _) => Reads::Elementwise,
        (Family::Linear, Op::Sum | Op::Mean) => Reads::All,
        (Family::Linear, _) => Reads::Pairs,
        (Family::Product, Op::Matmul | Op::Dot) => Reads::Product,
        _ => Reads::All,
    }
}

/// For an op that `reads` `Pairs`: `f(e, k, i)` for each value e of the
/// result (of shape `out`) and each value i of operand k that it reads.
pub(crate) fn pairs(op: Op, operands: &[Shape], out: Shape, f: impl FnMut(usize, usize, usize)) {
    linear::pairs(op, operands, out, f)
}

/// For an op that `reads` `Product`: (m, t, n) with the result m×n, operand
/// 0 m×t and operand 1 t×n, row-major.
pub(crate) fn product_dims(op: Op, operands: &[Shape]) -> (usize, usize, usize) {
    products::dims(op, operands)
}

/// What a tangent rule records its ops on (`core::tangent`'s recorder,
/// over the graph): nodes by id, each constant recorded once.
pub(crate) trait Record {
    /// The node `op(parents)`.
    fn op(&mut self, op: Op, parents: &[u32]) -> Result<u32>;
    fn shape(&self, id: u32) -> Shape;
    /// A scalar constant.
    fn number(&mut self, x: f64) -> Result<u32>;
    fn zeros(&mut self, shape: Shape) -> Result<u32>;
    /// n×n: 1 on and below the diagonal (`lower`) or on and above it.
    fn triangle(&mut self, n: usize, lower: bool) -> Result<u32>;
    /// `Some(lower)` when node `id` holds exact zeros outside a triangle
    /// (on and below the diagonal, or on and above) whatever the leaves
    /// hold, and its adjoint reads only that triangle of its own.
    fn triangular(&self, id: u32) -> Option<bool>;

    /// `t` spread to `shape` by the broadcasting rules (a scalar or a row
    /// under a matrix), as the op whose tangent it is spread its operand.
    fn spread(&mut self, t: u32, shape: Shape) -> Result<u32> {
        if self.shape(t) == shape {
            return Ok(t);
        }
        let zeros = self.zeros(shape)?;
        self.op(Op::Add, &[zeros, t])
    }

    /// `a + b` of two optional tangents, spread to `shape` when one is missing.
    fn sum(&mut self, a: Option<u32>, b: Option<u32>, shape: Shape) -> Result<Option<u32>> {
        Ok(Some(match (a, b) {
            (Some(a), Some(b)) => self.op(Op::Add, &[a, b])?,
            (Some(t), None) | (None, Some(t)) => self.spread(t, shape)?,
            (None, None) => return Ok(None),
        }))
    }
}
