//! The products: matmul (matrix times matrix or vector) and dot.
//! Each is bilinear, so its adjoint to one operand is a product with the
//! other, and its tangent the product rule.

use crate::core::error::Result;
use crate::core::kernels::matrix;
use crate::core::kernels::{Inputs, Operand};
use crate::core::op::Op;
use crate::core::shape::Shape;
use super::Record;

pub(super) fn forward<N: Operand>(op: Op, p: &Inputs<N>, out: &mut [f64]) {
    let v = |k: usize| p.val(k);
    match op {
        Op::Matmul => {
            let (m, k) = p.shape(0).rows_cols();
            match p.shape(1) {
                Shape::Matrix(_, n) => matrix::gemm(m, k, n, v(0), false, v(1), false, 0.0, out),
                _ => matrix::matvec(k, v(0), v(1), out),
            }
        }
        Op::Dot => out[0] = matrix::dot(v(0), v(1)),
        _ => unreachable!("{} is not a product", op.name()),
    }
}

/// Operand `k`'s share of the adjoint `g`, added to `d`.
pub(super) fn adjoint<N: Operand>(op: Op, k: usize, p: &Inputs<N>, g: &[f64], d: &mut [f64]) {
    let v = |k: usize| p.val(k);
    match op {
        Op::Matmul => {
            let (m, kk) = p.shape(0).rows_cols();
            match (p.shape(1), k) {
                (Shape::Matrix(_, n), 0) => matrix::gemm(m, n, kk, g, false, v(1), true, 1.0, d),
                (Shape::Matrix(_, n), _) => matrix::gemm(kk, m, n, v(0), true, g, false, 1.0, d),
                (_, 0) => {
                    for (row, &gi) in d.chunks_exact_mut(kk.max(1)).zip(g) {
                        matrix::axpy(gi, v(1), row)
                    }
                }
                _ => matrix::matvec_t_acc(kk, v(0), g, d),
            }
        }
        Op::Dot => matrix::axpy(g[0], v(1 - k), d),
        _ => unreachable!("{} is not a product", op.name()),
    }
}

/// `rules::product_dims`: a vector operand 0 is one row, a vector operand 1
/// one column, and a dot one row times one column.
pub(super) fn dims(op: Op, operands: &[Shape]) -> (usize, usize, usize) {
    match (op, operands[1]) {
        (Op::Dot, _) => (1, operands[0].size(), 1),
        (_, Shape::Matrix(t, n)) => (operands[0].rows_cols().0, t, n),
        (_, b) => (operands[0].rows_cols().0, b.size(), 1),
    }
}

/// (a b)˙ = ȧ b + a ḃ.
pub(super) fn tangent(r: &mut dyn Record, op: Op, y: u32, p: &[u32], ts: &[Option<u32>]) -> Result<Option<u32>> {
    let a = match ts[0] {
        Some(ta) => Some(r.op(op, &[ta, p[1]])?),
        None => None,
    };
    let b = match ts[1] {
        Some(tb) => Some(r.op(op, &[p[0], tb])?),
        None => None,
    };
    r.sum(a, b, r.shape(y))
}
