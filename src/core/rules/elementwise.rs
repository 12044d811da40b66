//! The elementwise ops: add, sub, mul, div, maximum, minimum, the
//! indicators ge and gt, and the unary ops. Each element's value and
//! partials are the formulas of `kernels/scalar.rs`; here they become
//! whole loops (forward, adjoint), and each op's tangent, ẏ = Σᵢ ∂y/∂xᵢ · ẋᵢ,
//! with the partial the adjoint takes, so `maximum`, `minimum` and `relu`
//! follow the side their adjoint takes, ties and NaN included.

use crate::core::error::Result;
use crate::core::fastmath;
use crate::core::kernels::elementwise as ew;
use crate::core::kernels::scalar::{self, Formula};
use crate::core::kernels::{zero_if, Inputs, Operand};
use crate::core::linalg::parallel::{self, part};
use crate::core::math;
use crate::core::op::{broadcast, Broadcast, Exponent, Op};
use crate::core::shape::Shape;
use super::Record;
use crate::core::widest::widest;
use crate::fail;

/// `$apply` with each listed op's formula bound to the constant `$o`, so
/// that the formula it hands an elementwise loop folds to that op's alone:
/// one loop per op, as if written out.
macro_rules! for_each_op {
    ($op:expr, [$($name:ident),+], |$o:ident| $apply:expr) => {
        match $op {
            $(Op::$name => {
                const $o: Formula = Formula::$name;
                $apply
            })+
            _ => unreachable!("{} is not in this loop's list", $op.name()),
        }
    };
}

pub(super) fn forward<N: Operand>(op: Op, p: &Inputs<N>, out: &mut [f64]) -> Result<()> {
    let v = |k: usize| p.val(k);
    match op {
        Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Maximum | Op::Minimum | Op::Ge | Op::Gt => {
            let (_, bc) = broadcast(op.name(), p.shape(0), p.shape(1))?;
            let (a, b) = (v(0), v(1));
            if matches!(bc, Broadcast::RowLeft | Broadcast::RowRight) {
                values(op, bc, a, b, out)
            } else {
                parallel::chunks(out, |at, out| values(op, bc, part(a, at, out.len()), part(b, at, out.len()), out))
            }
        }
        // Blocked, for speed on long arrays; element by element the same bits as scalar::value.
        Op::Tanh => parallel::zip(v(0), out, fastmath::tanh_slice),
        // Math.exp's bits in vector registers (math/host_exp.rs).
        Op::Exp => parallel::zip(v(0), out, math::exp_slice),
        Op::Sigmoid => parallel::zip(v(0), out, sigmoid_slice),
        Op::Neg | Op::Log | Op::Sqrt | Op::Square | Op::Relu | Op::Lgamma | Op::Digamma | Op::Pow(_) => {
            parallel::zip(v(0), out, |a, out| values(op, Broadcast::Same, a, a, out))
        }
        _ => unreachable!("{} is not elementwise", op.name()),
    }
    Ok(())
}

/// σ(x) = 1/(1 + e^−x) along a slice, e^−x by `math::exp_slice`: the
/// scalar formula's bits, element by element, in vector registers.
fn sigmoid_slice(a: &[f64], out: &mut [f64]) {
    const BLOCK: usize = 256;
    let mut negated = [0.0; BLOCK];
    for (a, out) in a.chunks(BLOCK).zip(out.chunks_mut(BLOCK)) {
        let negated = &mut negated[..a.len()];
        for (n, &x) in negated.iter_mut().zip(a) {
            *n = -x;
        }
        math::exp_slice(negated, out);
        for o in out.iter_mut() {
            *o = 1.0 / (1.0 + *o);
        }
    }
}

/// Operand `k`'s share of the adjoint `g` of a node whose value is `out`,
/// added to `d`, or assigned where `d` is `fresh` (`Adjoints::fresh`).
pub(super) fn adjoint<N: Operand>(op: Op, k: usize, p: &Inputs<N>, out: &[f64], g: &[f64], d: &mut [f64], fresh: bool) {
    if p.parents.len() == 1 {
        return adjoint_parts(op, 0, Broadcast::Same, [p.val(0), p.val(0), out, g], d, fresh);
    }
    let Ok((_, bc)) = broadcast(op.name(), p.shape(0), p.shape(1)) else { return zero_if(fresh, d) };
    adjoint_parts(op, k, bc, [p.val(0), p.val(1), out, g], d, fresh)
}

widest! {
/// An elementwise op's values (a unary one reads `a` only), compiled per
/// x86-64 vector width: each loop is the same per-element expression at
/// every width, so the bits are too.
fn values(op: Op, bc: Broadcast, a: &[f64], b: &[f64], out: &mut [f64]) {
    match op {
        Op::Pow(e) => {
            let k = e.get();
            ew::unary(a, out, |x| scalar::value(Formula::Pow, k, x, 0.0))
        }
        Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Maximum | Op::Minimum | Op::Ge | Op::Gt => {
            for_each_op!(op, [Add, Sub, Mul, Div, Maximum, Minimum, Ge, Gt], |O| ew::binary(bc, a, b, out, |x, y| scalar::value(O, 0.0, x, y)))
        }
        op => for_each_op!(op, [Neg, Log, Sqrt, Square, Relu, Lgamma, Digamma], |O| ew::unary(a, out, |x| scalar::value(O, 0.0, x, 0.0))),
    }
}
}

widest! {
/// Operand `k`'s share of an elementwise op's adjoint added to `d`, from
/// [left operand, right operand (a unary op's: the left again), value,
/// adjoint]; compiled per vector width like `values`. With `assign`, `d` is
/// fresh and each of its entries takes one term (`ew::binary_adjoint`).
fn adjoint_loop(op: Op, k: usize, bc: Broadcast, reads: [&[f64]; 4], d: &mut [f64], assign: bool) {
    let [a, b, out, g] = reads;
    match op {
        Op::Pow(e) => {
            let k = e.get();
            ew::unary_adjoint(a, out, g, d, assign, |x, y, g| scalar::partial(Formula::Pow, k, 0, x, 0.0, y, g))
        }
        Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Maximum | Op::Minimum | Op::Ge | Op::Gt if k == 0 => for_each_op!(op, [Add, Sub, Mul, Div, Maximum, Minimum, Ge, Gt], |O| {
            ew::binary_adjoint(bc, 0, a, b, g, d, assign, |x, y, g| scalar::partial(O, 0.0, 0, x, y, 0.0, g))
        }),
        Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Maximum | Op::Minimum | Op::Ge | Op::Gt => for_each_op!(op, [Add, Sub, Mul, Div, Maximum, Minimum, Ge, Gt], |O| {
            ew::binary_adjoint(bc, 1, a, b, g, d, assign, |x, y, g| scalar::partial(O, 0.0, 1, x, y, 0.0, g))
        }),
        op => for_each_op!(op, [Neg, Exp, Log, Sqrt, Square, Tanh, Sigmoid, Relu, Lgamma, Digamma], |O| {
            ew::unary_adjoint(a, out, g, d, assign, |x, y, g| scalar::partial(O, 0.0, 0, x, 0.0, y, g))
        }),
    }
}
}

/// `adjoint_loop` on several threads when long: in parts of `d`, or for a
/// broadcast scalar's adjoint, a sum over every element, in the chunks of
/// `parallel::sum_chunks` (a row's sums keep their one order).
fn adjoint_parts(op: Op, k: usize, bc: Broadcast, reads: [&[f64]; 4], d: &mut [f64], fresh: bool) {
    let [a, b, out, g] = reads;
    if matches!((bc, k), (Broadcast::ScalarLeft, 0) | (Broadcast::ScalarRight, 1)) {
        zero_if(fresh, d);
        // Each chunk's sum is 0 + sum_by's, which is never −0: below the
        // chunks, the same bits as adding sum_by's to d[0] at once.
        let total = parallel::sum_chunks(g.len(), |r| {
            let (a, b) = if k == 0 { (a, &b[r.clone()]) } else { (&a[r.clone()], b) };
            let mut sum = [0.0];
            adjoint_loop(op, k, bc, [a, b, &out[r.clone()], &g[r]], &mut sum, false);
            sum[0]
        });
        d[0] += total;
        return;
    }
    if d.len() != g.len() || matches!(bc, Broadcast::RowLeft | Broadcast::RowRight) {
        zero_if(fresh, d);
        return adjoint_loop(op, k, bc, reads, d, false);
    }
    parallel::chunks(d, |at, d| {
        let n = d.len();
        adjoint_loop(op, k, bc, [part(a, at, n), part(b, at, n), &out[at..at + n], &g[at..at + n]], d, fresh)
    })
}

pub(super) fn tangent(r: &mut dyn Record, op: Op, y: u32, p: &[u32], ts: &[Option<u32>]) -> Result<Option<u32>> {
    let shape = r.shape(y);
    let t = |k: usize| ts[k];
    match op {
        // Piecewise constant: zero tangent.
        Op::Ge | Op::Gt => Ok(None),
        Op::Digamma => fail!("digamma has no forward rule (a third derivative of lgamma)"),
        Op::Add => r.sum(t(0), t(1), shape),
        Op::Sub => {
            let b = match t(1) {
                Some(b) => Some(r.op(Op::Neg, &[b])?),
                None => None,
            };
            match (t(0), t(1)) {
                (Some(a), Some(b)) => r.op(Op::Sub, &[a, b]).map(Some),
                _ => r.sum(t(0), b, shape),
            }
        }
        Op::Mul => {
            let a = match t(0) {
                Some(ta) => Some(r.op(Op::Mul, &[ta, p[1]])?),
                None => None,
            };
            let b = match t(1) {
                Some(tb) => Some(r.op(Op::Mul, &[p[0], tb])?),
                None => None,
            };
            r.sum(a, b, shape)
        }
        Op::Div => match (t(0), t(1)) {
            // (ȧ − y ḃ) / b
            (Some(ta), Some(tb)) => {
                let yb = r.op(Op::Mul, &[y, tb])?;
                let num = r.op(Op::Sub, &[ta, yb])?;
                over(r, num, p[1]).map(Some)
            }
            (Some(ta), None) => over(r, ta, p[1]).map(Some),
            // −ḃ/b on scalars, then one product with y: a kernel's D²/ℓ²
            // takes one n×n tangent value, not three.
            (None, Some(tb)) if r.shape(y) != Shape::Scalar && r.shape(tb) == Shape::Scalar && r.shape(p[1]) == Shape::Scalar => {
                let q = r.op(Op::Div, &[tb, p[1]])?;
                let minus = r.op(Op::Neg, &[q])?;
                r.op(Op::Mul, &[y, minus]).map(Some)
            }
            (None, Some(tb)) => {
                let yb = r.op(Op::Mul, &[y, tb])?;
                let q = over(r, yb, p[1])?;
                r.op(Op::Neg, &[q]).map(Some)
            }
            (None, None) => Ok(None),
        },
        Op::Maximum | Op::Minimum => {
            // The left side when a >= b (maximum) or a <= b (minimum); a
            // NaN fails the comparison and takes the right, as the adjoint.
            let left = if op == Op::Maximum { r.op(Op::Ge, &[p[0], p[1]])? } else { r.op(Op::Ge, &[p[1], p[0]])? };
            let a = match t(0) {
                Some(ta) => Some(r.op(Op::Mul, &[ta, left])?),
                None => None,
            };
            let b = match t(1) {
                Some(tb) => {
                    let one = r.number(1.0)?;
                    let right = r.op(Op::Sub, &[one, left])?;
                    Some(r.op(Op::Mul, &[tb, right])?)
                }
                None => None,
            };
            r.sum(a, b, shape)
        }
        Op::Neg | Op::Exp | Op::Log | Op::Sqrt | Op::Square | Op::Tanh | Op::Sigmoid | Op::Relu | Op::Lgamma | Op::Pow(_) => {
            unary_tangent(r, op, y, p[0], t(0).expect("a unary op's tangent comes from its operand"))
        }
        _ => unreachable!("{} is not elementwise", op.name()),
    }
}

/// `num / b` in a tangent: by b's reciprocal where b is a scalar and
/// `num` is not, one division in place of one per element (a Hessian
/// replays this eight directions at a time, where divisions were most of
/// the regression's sweep).
fn over(r: &mut dyn Record, num: u32, b: u32) -> Result<u32> {
    if r.shape(b) != Shape::Scalar || r.shape(num) == Shape::Scalar {
        return r.op(Op::Div, &[num, b]);
    }
    let one = r.number(1.0)?;
    let inverse = r.op(Op::Div, &[one, b])?;
    r.op(Op::Mul, &[num, inverse])
}

/// ẏ = ẋ · dy/dx for y = op(x), the derivative written with y where that is cheaper.
fn unary_tangent(r: &mut dyn Record, op: Op, y: u32, x: u32, tx: u32) -> Result<Option<u32>> {
    let d = match op {
        Op::Neg => return r.op(Op::Neg, &[tx]).map(Some),
        Op::Exp => y,
        Op::Log => return r.op(Op::Div, &[tx, x]).map(Some),
        Op::Sqrt => {
            let two = r.number(2.0)?;
            let twice = r.op(Op::Mul, &[two, y])?;
            return r.op(Op::Div, &[tx, twice]).map(Some);
        }
        Op::Square => {
            let two = r.number(2.0)?;
            r.op(Op::Mul, &[two, x])?
        }
        Op::Tanh => {
            let (c, y2) = (r.number(1.0)?, r.op(Op::Square, &[y])?);
            r.op(Op::Sub, &[c, y2])?
        }
        Op::Sigmoid => {
            let c = r.number(1.0)?;
            let rest = r.op(Op::Sub, &[c, y])?;
            r.op(Op::Mul, &[y, rest])?
        }
        Op::Relu => {
            let zero = r.number(0.0)?;
            r.op(Op::Gt, &[x, zero])?
        }
        Op::Lgamma => r.op(Op::Digamma, &[x])?,
        // ẋ·1 = ẋ, the same bits; but no pow(x, 0), whose own derivative,
        // 0·x⁻¹, would make the Hessian of x¹ NaN at 0.
        Op::Pow(k) if k.get() == 1.0 => return Ok(Some(tx)),
        Op::Pow(k) => {
            let (kc, less) = (r.number(k.get())?, r.op(Op::Pow(Exponent::new(k.get() - 1.0)), &[x])?);
            r.op(Op::Mul, &[kc, less])?
        }
        _ => unreachable!("{} is not a unary elementwise op", op.name()),
    };
    r.op(Op::Mul, &[tx, d]).map(Some)
}
