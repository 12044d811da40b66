//! The linear ops: sum, mean, transpose, diagPart, addDiag, reshape,
//! slice and concat. Each one's adjoint is its transpose, and its tangent
//! the op itself on the operands' tangents (a missing one as zeros).

use crate::core::error::Result;
use crate::core::kernels::matrix;
use crate::core::kernels::{zero_if, Adjoints, Inputs, Operand};
use crate::core::linalg::parallel;
use crate::core::op::Op;
use crate::core::shape::Shape;
use super::{each_parent, Record};

pub(super) fn forward<N: Operand>(op: Op, p: &Inputs<N>, out: &mut [f64]) {
    let v = |k: usize| p.val(k);
    match op {
        Op::Sum | Op::Mean => {
            let x = v(0);
            let total = parallel::sum_chunks(x.len(), |r| matrix::sum(&x[r]));
            out[0] = if op == Op::Sum { total } else { total / x.len() as f64 };
        }
        Op::Transpose => {
            let (m, n) = p.shape(0).rows_cols();
            matrix::transpose(m, n, v(0), out)
        }
        Op::DiagPart => {
            let n = out.len();
            for (i, o) in out.iter_mut().enumerate() {
                *o = v(0)[i * n + i];
            }
        }
        Op::AddDiag => {
            let n = p.shape(0).rows_cols().0;
            parallel::copy(v(0), out);
            for i in 0..n {
                out[i * n + i] += if v(1).len() == 1 { v(1)[0] } else { v(1)[i] };
            }
        }
        Op::Reshape(_) => out.copy_from_slice(v(0)),
        Op::Slice { start, size } => {
            let vector = p.shape(0).rank() == 1;
            matrix::for_block(p.shape(0).rows_cols().1, start, size, vector, |src, dst, len| {
                out[dst..dst + len].copy_from_slice(&v(0)[src..src + len])
            })
        }
        Op::Concat { axis } => {
            let matrix = p.shape(0).rank() == 2;
            matrix::for_concat(p.parents.len(), |k| p.dims(k), axis, matrix, |k, from, to, len| {
                out[to..to + len].copy_from_slice(&v(k)[from..from + len])
            })
        }
        _ => unreachable!("{} is not a linear op", op.name()),
    }
}

/// The adjoint `g` added to each operand's adjoint that `needs` one.
pub(super) fn adjoint<N: Operand, A: Adjoints + ?Sized>(op: Op, p: &Inputs<N>, g: &[f64], needs: impl Fn(u32) -> bool, adj: &mut A) {
    match op {
        // The parts in one walk for all of them: a walk per part would be
        // quadratic in the number of parts.
        Op::Concat { axis } => {
            let matrix = p.shape(0).rank() == 2;
            matrix::for_concat(p.parents.len(), |k| p.dims(k), axis, matrix, |k, from, to, len| {
                if needs(p.parents[k]) {
                    let part = adj.of(p.parents[k], p.range(k));
                    matrix::axpy(1.0, &g[to..to + len], &mut part[from..from + len])
                }
            });
        }
        _ => each_parent(p, needs, adj, |k, d, fresh| share(op, k, p, g, d, fresh)),
    }
}

/// Operand `k`'s share of the adjoint `g`, added to `d`, or assigned where
/// `d` is fresh and the share covers every entry.
fn share<N: Operand>(op: Op, k: usize, p: &Inputs<N>, g: &[f64], d: &mut [f64], fresh: bool) {
    match op {
        Op::Transpose => {
            let (m, n) = p.shape(0).rows_cols();
            return matrix::add_transposed(n, m, g, d, fresh);
        }
        // addDiag's first operand and reshape's take g whole (axpy's 0 + 1·g).
        Op::AddDiag | Op::Reshape(_) if k == 0 && fresh => {
            return parallel::zip(g, d, |g, d| d.iter_mut().zip(g).for_each(|(d, &g)| *d = 0.0 + 1.0 * g));
        }
        _ => zero_if(fresh, d),
    }
    match op {
        Op::Sum => parallel::chunks(d, |_, d| d.iter_mut().for_each(|di| *di += g[0])),
        Op::Mean => {
            let s = g[0] / d.len() as f64;
            parallel::chunks(d, |_, d| d.iter_mut().for_each(|di| *di += s))
        }
        Op::DiagPart => {
            let n = g.len();
            for (i, &gi) in g.iter().enumerate() {
                d[i * n + i] += gi;
            }
        }
        Op::AddDiag => {
            let n = p.shape(0).rows_cols().0;
            if k == 0 {
                parallel::zip(g, d, |g, d| matrix::axpy(1.0, g, d))
            } else if d.len() == 1 {
                d[0] += matrix::sum_by(n, |i| g[i * n + i]);
            } else {
                for (i, di) in d.iter_mut().enumerate() {
                    *di += g[i * n + i];
                }
            }
        }
        Op::Reshape(_) => matrix::axpy(1.0, g, d),
        Op::Slice { start, size } => {
            let vector = p.shape(0).rank() == 1;
            matrix::for_block(p.shape(0).rows_cols().1, start, size, vector, |src, dst, len| {
                matrix::axpy(1.0, &g[dst..dst + len], &mut d[src..src + len])
            })
        }
        _ => unreachable!("{} is not a linear op", op.name()),
    }
}

/// `rules::pairs`: which value of which operand each value reads.
pub(super) fn pairs(op: Op, operands: &[Shape], out: Shape, mut f: impl FnMut(usize, usize, usize)) {
    match op {
        Op::Transpose => {
            let (m, n) = operands[0].rows_cols();
            for i in 0..m {
                for j in 0..n {
                    f(j * m + i, 0, i * n + j);
                }
            }
        }
        Op::DiagPart => (0..out.size()).for_each(|i| f(i, 0, i * out.size() + i)),
        Op::AddDiag => {
            let n = out.rows_cols().0;
            (0..out.size()).for_each(|e| f(e, 0, e));
            let scalar = operands[1].size() == 1;
            (0..n).for_each(|i| f(i * n + i, 1, if scalar { 0 } else { i }));
        }
        Op::Reshape(_) => (0..out.size()).for_each(|e| f(e, 0, e)),
        Op::Slice { start, size } => {
            let vector = operands[0].rank() == 1;
            matrix::for_block(operands[0].rows_cols().1, start, size, vector, |src, dst, len| (0..len).for_each(|i| f(dst + i, 0, src + i)))
        }
        Op::Concat { axis } => {
            let matrix = operands[0].rank() == 2;
            matrix::for_concat(operands.len(), |k| operands[k].rows_cols(), axis, matrix, |k, from, to, len| {
                (0..len).for_each(|i| f(to + i, k, from + i))
            })
        }
        _ => unreachable!("{} moves no values", op.name()),
    }
}

pub(super) fn tangent(r: &mut dyn Record, op: Op, y: u32, p: &[u32], ts: &[Option<u32>]) -> Result<Option<u32>> {
    match op {
        Op::AddDiag => match (ts[0], ts[1]) {
            (Some(ta), Some(tb)) => r.op(Op::AddDiag, &[ta, tb]).map(Some),
            (Some(ta), None) => Ok(Some(ta)),
            (None, Some(tb)) => {
                let zeros = r.zeros(r.shape(y))?;
                r.op(Op::AddDiag, &[zeros, tb]).map(Some)
            }
            (None, None) => Ok(None),
        },
        Op::Concat { .. } => {
            let mut parts = Vec::with_capacity(p.len());
            for (&part, &t) in p.iter().zip(ts) {
                parts.push(match t {
                    Some(t) => t,
                    None => r.zeros(r.shape(part))?,
                });
            }
            r.op(op, &parts).map(Some)
        }
        Op::Sum | Op::Mean | Op::Transpose | Op::DiagPart | Op::Reshape(_) | Op::Slice { .. } => r.op(op, &[ts[0].expect("one operand")]).map(Some),
        _ => unreachable!("{} is not a linear op", op.name()),
    }
}
