//! The factorization and the solves: cholesky, triangularSolve and
//! solveGeneral. Their kernels are in `core/linalg`; here, which kernel
//! each rule calls, and the tangents, found by differentiating the
//! equation the result satisfies:
//! - cholesky: L̇ = L Φ(L⁻¹ sym(Ȧ) L⁻ᵀ), Φ the lower triangle with half its
//!   diagonal; sym(Ȧ) = (Ȧ + Ȧᵀ)/2, the direction the symmetrized adjoint
//!   (SPEC §5) is the gradient along. One op, choleskyTangent, whose
//!   adjoints `kernels/factor_tangent.rs` derives; it has no tangent (a
//!   third derivative);
//! - triangularSolve: Ẋ = T⁻¹(Ḃ − tri(Ṫ) X), tri the triangle T's solve reads;
//! - solveGeneral: Ẋ = A⁻¹(Ḃ − Ȧ X).

use crate::core::error::Result;
use crate::core::kernels::{factor_tangent, matrix};
use crate::core::kernels::{zero_if, Inputs, Operand};
use crate::core::linalg;
use crate::core::op::Op;
use crate::core::shape::Shape;
use crate::fail;
use super::Record;

/// Right-hand-side columns: a vector is one.
fn rhs_cols(s: Shape) -> usize {
    match s {
        Shape::Matrix(_, k) => k,
        _ => 1,
    }
}

/// The value; a solveGeneral keeps its LU factors and pivots in `aux`.
pub(super) fn forward<N: Operand>(op: Op, p: &Inputs<N>, out: &mut [f64], aux: &mut [f64]) -> Result<()> {
    let v = |k: usize| p.val(k);
    let n = p.shape(0).rows_cols().0;
    match op {
        Op::Cholesky => linalg::cholesky(v(0), n, out)?,
        Op::CholeskyTangent => factor_tangent::cholesky_tangent(v(0), v(1), n, out, aux),
        Op::TriangularSolve { lower } => linalg::triangular_solve(v(0), n, lower, v(1), rhs_cols(p.shape(1)), out),
        Op::SolveGeneral => {
            let (lu, rest) = aux.split_at_mut(n * n);
            linalg::lu_factor(v(0), n, lu, &mut rest[..n])?;
            solve_factored(p, out, aux)
        }
        _ => unreachable!("{} is not a factorization or solve", op.name()),
    }
    Ok(())
}

/// A solveGeneral's value from the LU factors in `aux`: `forward`'s own
/// second half, and all of it where the matrix has not changed since the
/// last (a tangent plan's solve by the primal matrix, replayed per
/// direction: `Plan::forward_tangent`).
pub(super) fn solve_factored<N: Operand>(p: &Inputs<N>, out: &mut [f64], aux: &[f64]) {
    let n = p.shape(0).rows_cols().0;
    let (lu, rest) = aux.split_at(n * n);
    linalg::lu_solve(lu, &rest[..n], n, p.val(1), rhs_cols(p.shape(1)), out)
}

/// What a solve's adjoint shares between its operands, done once per
/// sweep before `adjoint` is called for each: B̄ = A⁻ᵀ X̄, into `aux`.
pub(super) fn prepare_adjoint<N: Operand>(op: Op, p: &Inputs<N>, g: &[f64], aux: &mut [f64]) {
    let n = p.shape(0).rows_cols().0;
    match op {
        Op::TriangularSolve { lower } => linalg::triangular_solve_bbar(p.val(0), n, lower, g, rhs_cols(p.shape(1)), aux),
        Op::SolveGeneral => {
            let (lu, rest) = aux.split_at_mut(n * n);
            let (perm, bbar) = rest.split_at_mut(n);
            linalg::lu_solve_transpose(lu, perm, n, g, rhs_cols(p.shape(1)), bbar)
        }
        _ => {}
    }
}

/// Operand `k`'s share of the adjoint `g` of a node whose value is `out`,
/// added to `d`: written over it where it is `fresh` (the factor's and a
/// triangular solve's matrix), or zeroed first.
#[allow(clippy::too_many_arguments)]
pub(super) fn adjoint<N: Operand>(op: Op, k: usize, p: &Inputs<N>, out: &[f64], g: &[f64], aux: &mut [f64], d: &mut [f64], fresh: bool) {
    let n = p.shape(0).rows_cols().0;
    match op {
        Op::Cholesky => return linalg::cholesky_adjoint(out, g, n, aux, d, fresh),
        Op::CholeskyTangent if k == 0 => return factor_tangent::cholesky_tangent_lbar(p.val(0), g, n, aux, d, fresh),
        Op::CholeskyTangent => return factor_tangent::cholesky_tangent_adotbar(p.val(0), g, n, aux, d, fresh),
        Op::TriangularSolve { lower } if k == 0 => return linalg::triangular_solve_tbar(n, lower, aux, out, rhs_cols(p.shape(1)), d, fresh),
        _ => zero_if(fresh, d),
    }
    match op {
        Op::TriangularSolve { .. } => matrix::axpy(1.0, aux, d),
        Op::SolveGeneral if k == 0 => linalg::sub_outer(n, &aux[n * n + n..], out, rhs_cols(p.shape(1)), d),
        Op::SolveGeneral => matrix::axpy(1.0, &aux[n * n + n..], d),
        _ => unreachable!("{} is not a factorization or solve", op.name()),
    }
}

pub(super) fn tangent(r: &mut dyn Record, op: Op, y: u32, p: &[u32], ts: &[Option<u32>]) -> Result<Option<u32>> {
    match op {
        // The factor reads one triangle, so its tangent is that of the
        // symmetric part, (Ȧ + Ȧᵀ)/2: exactly Ȧ when Ȧ is symmetric.
        // Taken always, never on the values of Ȧ's constants: eager sees
        // an input as a constant, a plan as an input, yet both must round alike.
        Op::Cholesky => r.op(Op::CholeskyTangent, &[y, ts[0].expect("one operand")]).map(Some),
        Op::CholeskyTangent => fail!("choleskyTangent has no forward rule (a third derivative of cholesky)"),
        Op::TriangularSolve { lower } => {
            let n = r.shape(p[0]).rows_cols().0;
            // The solve reads one triangle of its matrix: so does the tangent.
            let moved = match ts[0] {
                Some(tt) => {
                    let tri = if r.triangular(tt) == Some(lower) {
                        tt
                    } else {
                        let mask = r.triangle(n, lower)?;
                        r.op(Op::Mul, &[tt, mask])?
                    };
                    Some(r.op(Op::Matmul, &[tri, y])?)
                }
                None => None,
            };
            solve_tangent(r, op, p[0], ts[1], moved)
        }
        Op::SolveGeneral => {
            let moved = match ts[0] {
                Some(ta) => Some(r.op(Op::Matmul, &[ta, y])?),
                None => None,
            };
            solve_tangent(r, op, p[0], ts[1], moved)
        }
        _ => unreachable!("{} is not a factorization or solve", op.name()),
    }
}

/// `solve(a, ḃ − moved)`, the tangent of a solve's result, where `moved`
/// is what the matrix's own tangent takes off the right-hand side.
fn solve_tangent(r: &mut dyn Record, solve: Op, a: u32, tb: Option<u32>, moved: Option<u32>) -> Result<Option<u32>> {
    let rhs = match (tb, moved) {
        (Some(tb), Some(m)) => r.op(Op::Sub, &[tb, m])?,
        (Some(tb), None) => tb,
        (None, Some(m)) => {
            let x = r.op(solve, &[a, m])?;
            return r.op(Op::Neg, &[x]).map(Some);
        }
        (None, None) => return Ok(None),
    };
    r.op(solve, &[a, rhs]).map(Some)
}
