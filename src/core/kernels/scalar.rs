//! The elementwise ops' formulas on one element, in one place: the
//! elementwise kernels (kernels/mod.rs) apply them across whole arrays, and
//! a plan's scalar steps (plan.rs) one node at a time, so the two compute
//! bit-identical values and adjoints. Callers in a loop pass `op` as a
//! constant, so that the match folds away once inlined.

use super::elementwise::{js_max, js_min, relu};
use crate::core::fastmath;
use crate::core::math;
use crate::core::op::Op;
use crate::core::special;

/// Whether `op` is elementwise with a formula here (one operand or two).
pub fn has_formula(op: Op) -> bool {
    matches!(
        op,
        Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Maximum
            | Op::Minimum
            | Op::Neg
            | Op::Exp
            | Op::Log
            | Op::Sqrt
            | Op::Square
            | Op::Tanh
            | Op::Sigmoid
            | Op::Relu
            | Op::Lgamma
            | Op::Pow(_)
    )
}

/// A scalar node's adjoint, at `out` in `adj`, accumulated into its
/// operands' at `a` and `b` (for a unary op, `b` is `a` and takes nothing),
/// operand 0 first as the kernels do, each only if it `needs` one.
#[inline(always)]
pub fn accumulate(op: Op, [a, b, out]: [usize; 3], unary: bool, [needs_a, needs_b]: [bool; 2], values: &[f64], adj: &mut [f64]) {
    let (x, y, v, g) = (values[a], values[b], values[out], adj[out]);
    if needs_a {
        adj[a] += partial(op, 0, x, y, v, g);
    }
    if !unary && needs_b {
        adj[b] += partial(op, 1, x, y, v, g);
    }
}

/// The op's value at `x` (and `y`, which a unary op ignores).
#[inline(always)]
pub fn value(op: Op, x: f64, y: f64) -> f64 {
    match op {
        Op::Add => x + y,
        Op::Sub => x - y,
        Op::Mul => x * y,
        Op::Div => x / y,
        Op::Maximum => js_max(x, y),
        Op::Minimum => js_min(x, y),
        Op::Neg => -x,
        Op::Exp => math::exp(x),
        Op::Log => math::ln(x),
        Op::Sqrt => x.sqrt(),
        Op::Square => x * x,
        Op::Tanh => fastmath::tanh(x),
        Op::Sigmoid => 1.0 / (1.0 + math::exp(-x)),
        Op::Relu => relu(x),
        Op::Lgamma => special::lgamma(x),
        Op::Pow(k) => math::pow(x, k.get()),
        _ => f64::NAN,
    }
}

/// What operand `k` (0 left, 1 right) receives of the adjoint `g` of a
/// result `out` computed from `x` (and `y`).
#[inline(always)]
pub fn partial(op: Op, k: usize, x: f64, y: f64, out: f64, g: f64) -> f64 {
    match (op, k) {
        (Op::Add, _) | (Op::Sub, 0) => g,
        (Op::Sub, _) => -g,
        (Op::Mul, 0) => g * y,
        (Op::Mul, _) => g * x,
        (Op::Div, 0) => g / y,
        (Op::Div, _) => -g * x / (y * y),
        // Ties go left; a NaN fails the comparison and goes right.
        (Op::Maximum, 0) => if x >= y { g } else { 0.0 },
        (Op::Maximum, _) => if x >= y { 0.0 } else { g },
        (Op::Minimum, 0) => if x <= y { g } else { 0.0 },
        (Op::Minimum, _) => if x <= y { 0.0 } else { g },
        (Op::Neg, _) => -g,
        (Op::Exp, _) => g * out,
        (Op::Log, _) => g / x,
        (Op::Sqrt, _) => g / (2.0 * out),
        (Op::Square, _) => 2.0 * x * g,
        (Op::Tanh, _) => g * (1.0 - out * out),
        (Op::Sigmoid, _) => g * out * (1.0 - out),
        (Op::Relu, _) => if x > 0.0 { g } else { 0.0 },
        (Op::Lgamma, _) => g * special::digamma(x),
        (Op::Pow(e), _) => {
            let k = e.get();
            g * k * math::pow(x, k - 1.0)
        }
        _ => f64::NAN,
    }
}
