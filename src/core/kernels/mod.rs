//! Forward and adjoint kernels for every op, dispatched by one match each.
//! Kernels read parents' values and write into slices of the arenas; they
//! never allocate.

pub mod elementwise;
pub mod matrix;
pub mod scalar;

use super::error::Result;
use super::fastmath;
use super::linalg;
use super::math;
use super::op::{broadcast, Broadcast, Op};
use super::widest::widest;
use super::shape::Shape;
use elementwise as ew;
use super::linalg::parallel::{self, part};
use scalar::Formula;

/// `$apply` with each listed op's formula bound to the constant `$o`, so
/// that the formula (kernels/scalar.rs) it hands an elementwise loop folds
/// to that op's alone: one loop per op, as if written out.
macro_rules! for_each_op {
    ($op:expr, [$($name:ident),+], |$o:ident| $apply:expr) => {
        match $op {
            $(Op::$name => {
                const $o: Formula = Formula::$name;
                $apply
            })+
            _ => {}
        }
    };
}

/// What a kernel needs to know of an operand: its shape, and the offset of
/// its value in the arena (and of its adjoint, in an adjoint arena laid out
/// alike). The graph's nodes provide it; kernels know nothing else of them.
pub trait Operand {
    fn shape(&self) -> Shape;
    fn offset(&self) -> usize;
}

/// The parents of a node as a kernel sees them, looked up on demand so that
/// nothing is allocated however many parents a node has.
pub struct Inputs<'a, N> {
    /// Every operand that may be a parent, by id.
    pub operands: &'a [N],
    pub parents: &'a [u32],
    /// An arena, or the part of it below the value being computed...
    pub values: &'a [f64],
    /// ...and the part above it, from offset `above_from` (empty if none):
    /// a plan whose values share blocks (`plan::values`) may hold an
    /// operand above the value computed from it.
    pub above: &'a [f64],
    pub above_from: usize,
}

impl<'a, N: Operand> Inputs<'a, N> {
    /// Where parent `k`'s value (or adjoint) sits in an arena.
    fn range(&self, k: usize) -> std::ops::Range<usize> {
        let o = &self.operands[self.parents[k] as usize];
        o.offset()..o.offset() + o.shape().size()
    }

    pub fn val(&self, k: usize) -> &'a [f64] {
        let r = self.range(k);
        if r.start < self.above_from {
            &self.values[r]
        } else {
            &self.above[r.start - self.above_from..r.end - self.above_from]
        }
    }

    pub fn shape(&self, k: usize) -> Shape {
        self.operands[self.parents[k] as usize].shape()
    }

    /// The layout of parent `k` as (rows, cols), a scalar or vector being one row.
    fn dims(&self, k: usize) -> (usize, usize) {
        self.shape(k).rows_cols()
    }
}

fn rhs_cols(s: Shape) -> usize {
    match s {
        Shape::Matrix(_, k) => k,
        _ => 1,
    }
}


/// Compute a node's value from its parents'.
pub fn forward<N: Operand>(op: Op, p: &Inputs<N>, out: &mut [f64], aux: &mut [f64]) -> Result<()> {
    let v = |k: usize| p.val(k);
    match op {
        Op::Leaf | Op::Input | Op::Const | Op::External => {}
        Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Maximum | Op::Minimum | Op::Ge | Op::Gt => {
            let (_, bc) = broadcast(op.name(), p.shape(0), p.shape(1))?;
            let (a, b) = (v(0), v(1));
            if matches!(bc, Broadcast::RowLeft | Broadcast::RowRight) {
                elementwise_values(op, bc, a, b, out)
            } else {
                parallel::chunks(out, |at, out| elementwise_values(op, bc, part(a, at, out.len()), part(b, at, out.len()), out))
            }
        }
        // Blocked, for speed on long arrays; element by element the same bits as scalar::value.
        Op::Tanh => parallel::zip(v(0), out, fastmath::tanh_slice),
        // Under WebAssembly blocked too (math/host_exp.rs); natively libm's, element by element.
        Op::Exp => parallel::zip(v(0), out, math::exp_slice),
        Op::Neg | Op::Log | Op::Sqrt | Op::Square | Op::Sigmoid | Op::Relu | Op::Lgamma | Op::Digamma | Op::Pow(_) => {
            parallel::zip(v(0), out, |a, out| elementwise_values(op, Broadcast::Same, a, a, out))
        }
        Op::Sum | Op::Mean => {
            let x = v(0);
            let total = parallel::sum_chunks(x.len(), |r| matrix::sum(&x[r]));
            out[0] = if op == Op::Sum { total } else { total / x.len() as f64 };
        }
        Op::Matmul => {
            let (m, k) = p.shape(0).rows_cols();
            match p.shape(1) {
                Shape::Matrix(_, n) => matrix::gemm(m, k, n, v(0), false, v(1), false, 0.0, out),
                _ => matrix::matvec(k, v(0), v(1), out),
            }
        }
        Op::Dot => out[0] = matrix::dot(v(0), v(1)),
        Op::LowerMatmul => linalg::lower_matmul(v(0), v(1), p.shape(0).rows_cols().0, out),
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
        Op::Cholesky => linalg::cholesky(v(0), p.shape(0).rows_cols().0, out)?,
        Op::TriangularSolve { lower } => {
            let n = p.shape(0).rows_cols().0;
            linalg::triangular_solve(v(0), n, lower, v(1), rhs_cols(p.shape(1)), out)
        }
        Op::SolveGeneral => {
            let n = p.shape(0).rows_cols().0;
            let (lu, rest) = aux.split_at_mut(n * n);
            let perm = &mut rest[..n];
            linalg::lu_factor(v(0), n, lu, perm)?;
            linalg::lu_solve(lu, perm, n, v(1), rhs_cols(p.shape(1)), out)
        }
    }
    Ok(())
}

widest! {
/// An elementwise op's values (a unary one reads `a` only), compiled per
/// x86-64 vector width: each loop is the same per-element expression at
/// every width, so the bits are too.
fn elementwise_values(op: Op, bc: Broadcast, a: &[f64], b: &[f64], out: &mut [f64]) {
    match op {
        Op::Pow(e) => {
            let k = e.get();
            ew::unary(a, out, |x| scalar::value(Formula::Pow, k, x, 0.0))
        }
        Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Maximum | Op::Minimum | Op::Ge | Op::Gt => {
            for_each_op!(op, [Add, Sub, Mul, Div, Maximum, Minimum, Ge, Gt], |O| ew::binary(bc, a, b, out, |x, y| scalar::value(O, 0.0, x, y)))
        }
        op => for_each_op!(op, [Neg, Log, Sqrt, Square, Sigmoid, Relu, Lgamma, Digamma], |O| ew::unary(a, out, |x| scalar::value(O, 0.0, x, 0.0))),
    }
}
}

widest! {
/// Operand `k`'s share of an elementwise op's adjoint added to `d`, from
/// [left operand, right operand (a unary op's: the left again), value,
/// adjoint]; compiled per vector width like `elementwise_values`.
fn elementwise_adjoint(op: Op, k: usize, bc: Broadcast, reads: [&[f64]; 4], d: &mut [f64]) {
    let [a, b, out, g] = reads;
    match op {
        Op::Pow(e) => {
            let k = e.get();
            ew::unary_adjoint(a, out, g, d, |x, y, g| scalar::partial(Formula::Pow, k, 0, x, 0.0, y, g))
        }
        Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Maximum | Op::Minimum | Op::Ge | Op::Gt if k == 0 => for_each_op!(op, [Add, Sub, Mul, Div, Maximum, Minimum, Ge, Gt], |O| {
            ew::binary_adjoint(bc, 0, a, b, g, d, |x, y, g| scalar::partial(O, 0.0, 0, x, y, 0.0, g))
        }),
        Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Maximum | Op::Minimum | Op::Ge | Op::Gt => for_each_op!(op, [Add, Sub, Mul, Div, Maximum, Minimum, Ge, Gt], |O| {
            ew::binary_adjoint(bc, 1, a, b, g, d, |x, y, g| scalar::partial(O, 0.0, 1, x, y, 0.0, g))
        }),
        op => for_each_op!(op, [Neg, Exp, Log, Sqrt, Square, Tanh, Sigmoid, Relu, Lgamma, Digamma], |O| {
            ew::unary_adjoint(a, out, g, d, |x, y, g| scalar::partial(O, 0.0, 0, x, 0.0, y, g))
        }),
    }
}
}

/// `elementwise_adjoint` on several threads when long: in parts of `d`, or
/// for a broadcast scalar's adjoint, a sum over every element, in the
/// chunks of `parallel::sum_chunks` (a row's sums keep their one order).
fn elementwise_adjoint_parts(op: Op, k: usize, bc: Broadcast, reads: [&[f64]; 4], d: &mut [f64]) {
    let [a, b, out, g] = reads;
    if matches!((bc, k), (Broadcast::ScalarLeft, 0) | (Broadcast::ScalarRight, 1)) {
        // Each chunk's sum is 0 + sum_by's, which is never −0: below the
        // chunks, the same bits as adding sum_by's to d[0] at once.
        let total = parallel::sum_chunks(g.len(), |r| {
            let (a, b) = if k == 0 { (a, &b[r.clone()]) } else { (&a[r.clone()], b) };
            let mut sum = [0.0];
            elementwise_adjoint(op, k, bc, [a, b, &out[r.clone()], &g[r]], &mut sum);
            sum[0]
        });
        d[0] += total;
        return;
    }
    if d.len() != g.len() || matches!(bc, Broadcast::RowLeft | Broadcast::RowRight) {
        return elementwise_adjoint(op, k, bc, reads, d);
    }
    parallel::chunks(d, |at, d| {
        let n = d.len();
        elementwise_adjoint(op, k, bc, [part(a, at, n), part(b, at, n), &out[at..at + n], &g[at..at + n]], d)
    })
}

/// Where the parents' adjoints are, for `adjoint`: an arena laid out like
/// the values, each adjoint at its value's offset (`[f64]`, the tape's), or
/// a plan's, whose large adjoints take turns in shared blocks.
pub trait Adjoints {
    /// Node `id`'s adjoint, whose value lies at `val`.
    fn of(&mut self, id: u32, val: std::ops::Range<usize>) -> &mut [f64];
}

impl Adjoints for [f64] {
    fn of(&mut self, _: u32, val: std::ops::Range<usize>) -> &mut [f64] {
        &mut self[val]
    }
}

/// Accumulate the adjoint `g` of a node whose value is `out` into the
/// adjoint of each parent that `needs` one, in `adj`.
pub fn adjoint<N: Operand, A: Adjoints + ?Sized>(op: Op, p: &Inputs<N>, out: &[f64], g: &[f64], aux: &mut [f64], needs: impl Fn(u32) -> bool, adj: &mut A) {
    if let Op::Concat { axis } = op {
        // One walk over the parts for all of them: a walk per part would be
        // quadratic in the number of parts.
        let matrix = p.shape(0).rank() == 2;
        matrix::for_concat(p.parents.len(), |k| p.dims(k), axis, matrix, |k, from, to, len| {
            if needs(p.parents[k]) {
                let part = adj.of(p.parents[k], p.range(k));
                matrix::axpy(1.0, &g[to..to + len], &mut part[from..from + len])
            }
        });
        return;
    }
    prepare_adjoint(op, p, g, aux);
    for (k, &parent) in p.parents.iter().enumerate() {
        if needs(parent) {
            parent_adjoint(op, k, p, out, g, aux, adj.of(parent, p.range(k)));
        }
    }
}

/// Work an op's adjoint shares between its parents, done once per sweep
/// before `parent_adjoint` is called for each parent: B̄ for the solves.
fn prepare_adjoint<N: Operand>(op: Op, p: &Inputs<N>, g: &[f64], aux: &mut [f64]) {
    match op {
        Op::TriangularSolve { lower } => {
            let n = p.shape(0).rows_cols().0;
            linalg::triangular_solve_bbar(p.val(0), n, lower, g, rhs_cols(p.shape(1)), aux)
        }
        Op::SolveGeneral => {
            let n = p.shape(0).rows_cols().0;
            let (lu, rest) = aux.split_at_mut(n * n);
            let (perm, bbar) = rest.split_at_mut(n);
            linalg::lu_solve_transpose(lu, perm, n, g, rhs_cols(p.shape(1)), bbar)
        }
        _ => {}
    }
}


/// Accumulate into `d` the adjoint of parent `k`, given the node's value
/// `out` and adjoint `g`.
fn parent_adjoint<N: Operand>(op: Op, k: usize, p: &Inputs<N>, out: &[f64], g: &[f64], aux: &mut [f64], d: &mut [f64]) {
    let v = |k: usize| p.val(k);
    match op {
        // Concat's parents are served all at once, by `adjoint`.
        Op::Leaf | Op::Input | Op::Const | Op::External | Op::Concat { .. } => {}
        Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Maximum | Op::Minimum | Op::Ge | Op::Gt => {
            let Ok((_, bc)) = broadcast(op.name(), p.shape(0), p.shape(1)) else { return };
            elementwise_adjoint_parts(op, k, bc, [p.val(0), p.val(1), out, g], d)
        }
        Op::Neg | Op::Exp | Op::Log | Op::Sqrt | Op::Square | Op::Tanh | Op::Sigmoid | Op::Relu | Op::Lgamma | Op::Digamma | Op::Pow(_) => {
            elementwise_adjoint_parts(op, 0, Broadcast::Same, [v(0), v(0), out, g], d)
        }
        Op::Sum => parallel::chunks(d, |_, d| d.iter_mut().for_each(|di| *di += g[0])),
        Op::Mean => {
            let s = g[0] / d.len() as f64;
            parallel::chunks(d, |_, d| d.iter_mut().for_each(|di| *di += s))
        }
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
        Op::LowerMatmul => {
            let n = p.shape(0).rows_cols().0;
            if k == 0 {
                linalg::lower_matmul_abar(g, v(1), n, d)
            } else {
                linalg::lower_matmul_bbar(v(0), g, n, d)
            }
        }
        Op::Transpose => {
            let (m, n) = p.shape(0).rows_cols();
            matrix::add_transposed(n, m, g, d)
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
        Op::Cholesky => linalg::cholesky_adjoint(out, g, p.shape(0).rows_cols().0, aux, d),
        Op::TriangularSolve { lower } => {
            let n = p.shape(0).rows_cols().0;
            if k == 0 {
                linalg::triangular_solve_tbar(n, lower, aux, out, rhs_cols(p.shape(1)), d)
            } else {
                matrix::axpy(1.0, aux, d)
            }
        }
        Op::SolveGeneral => {
            let n = p.shape(0).rows_cols().0;
            let bbar = &aux[n * n + n..];
            if k == 0 {
                linalg::sub_outer(n, bbar, out, rhs_cols(p.shape(1)), d)
            } else {
                matrix::axpy(1.0, bbar, d)
            }
        }
    }
}
