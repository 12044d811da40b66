//! The elementwise ops' formulas on one element, in one place: the
//! elementwise rules (rules/elementwise.rs) apply them across whole arrays, a
//! plan's scalar steps (plan/), the eager tape's scalar nodes (graph.rs)
//! and its queued scalars (tape.rs) one node at a time, so all compute
//! bit-identical values and adjoints. A formula is a byte (`Formula`) with pow's exponent beside it,
//! which keeps a plan's scalar steps small; callers in a loop pass it as a
//! constant, so that the match folds away once inlined.

use super::elementwise::{js_max, js_min, relu};
use crate::core::fastmath;
use crate::core::math;
use crate::core::op::Op;
use crate::core::special;

/// The elementwise ops, each with a formula here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Formula {
    Add,
    Sub,
    Mul,
    Div,
    Maximum,
    Minimum,
    Neg,
    Exp,
    Log,
    Sqrt,
    Square,
    Tanh,
    Sigmoid,
    Relu,
    Lgamma,
    Pow,
    /// lgamma's derivative, which only a tangent rule records.
    Digamma,
    /// The indicator x ≥ y (1 or 0; 0 with a NaN), which only a tangent rule
    /// records: the side `maximum` and `minimum` give their adjoint to.
    Ge,
    /// The indicator x > y, `relu`'s side.
    Gt,
}

impl Formula {
    /// The formula of `op` and its exponent (0 but for pow), if it is elementwise.
    pub fn of(op: Op) -> Option<(Formula, f64)> {
        Some(match op {
            Op::Add => (Formula::Add, 0.0),
            Op::Sub => (Formula::Sub, 0.0),
            Op::Mul => (Formula::Mul, 0.0),
            Op::Div => (Formula::Div, 0.0),
            Op::Maximum => (Formula::Maximum, 0.0),
            Op::Minimum => (Formula::Minimum, 0.0),
            Op::Neg => (Formula::Neg, 0.0),
            Op::Exp => (Formula::Exp, 0.0),
            Op::Log => (Formula::Log, 0.0),
            Op::Sqrt => (Formula::Sqrt, 0.0),
            Op::Square => (Formula::Square, 0.0),
            Op::Tanh => (Formula::Tanh, 0.0),
            Op::Sigmoid => (Formula::Sigmoid, 0.0),
            Op::Relu => (Formula::Relu, 0.0),
            Op::Lgamma => (Formula::Lgamma, 0.0),
            Op::Pow(k) => (Formula::Pow, k.get()),
            Op::Digamma => (Formula::Digamma, 0.0),
            Op::Ge => (Formula::Ge, 0.0),
            Op::Gt => (Formula::Gt, 0.0),
            _ => return None,
        })
    }

    /// Whether it takes two operands.
    pub fn binary(self) -> bool {
        matches!(
            self,
            Formula::Add | Formula::Sub | Formula::Mul | Formula::Div | Formula::Maximum | Formula::Minimum | Formula::Ge | Formula::Gt
        )
    }

    /// Which of `x`, `y` and `out` operand `i`'s `partial` reads (besides
    /// `g`): a lane replay lets a step overwrite an operand that no later
    /// step reads (lanes.rs), so this must say everything `partial` does.
    pub fn reads(self, i: usize) -> [bool; 3] {
        const NONE: [bool; 3] = [false; 3];
        const X: [bool; 3] = [true, false, false];
        const Y: [bool; 3] = [false, true, false];
        const XY: [bool; 3] = [true, true, false];
        const OUT: [bool; 3] = [false, false, true];
        match (self, i) {
            (Formula::Add | Formula::Sub | Formula::Neg | Formula::Ge | Formula::Gt, _) => NONE,
            (Formula::Mul | Formula::Div, 0) => Y,
            (Formula::Mul, _) => X,
            (Formula::Div | Formula::Maximum | Formula::Minimum, _) => XY,
            (Formula::Exp | Formula::Sqrt | Formula::Tanh | Formula::Sigmoid, _) => OUT,
            (Formula::Log | Formula::Square | Formula::Relu | Formula::Lgamma | Formula::Pow | Formula::Digamma, _) => X,
        }
    }
}

/// `$body` with `$c` bound to the formula `$f`, one arm per formula, so that
/// in each arm the formula is a constant and a loop over many elements
/// inlines its arithmetic with no match inside.
macro_rules! with_constant_formula {
    ($f:expr, |$c:ident| $body:expr) => {{
        use $crate::core::kernels::scalar::Formula as F;
        match $f {
            F::Add => { let $c = F::Add; $body }
            F::Sub => { let $c = F::Sub; $body }
            F::Mul => { let $c = F::Mul; $body }
            F::Div => { let $c = F::Div; $body }
            F::Maximum => { let $c = F::Maximum; $body }
            F::Minimum => { let $c = F::Minimum; $body }
            F::Neg => { let $c = F::Neg; $body }
            F::Exp => { let $c = F::Exp; $body }
            F::Log => { let $c = F::Log; $body }
            F::Sqrt => { let $c = F::Sqrt; $body }
            F::Square => { let $c = F::Square; $body }
            F::Tanh => { let $c = F::Tanh; $body }
            F::Sigmoid => { let $c = F::Sigmoid; $body }
            F::Relu => { let $c = F::Relu; $body }
            F::Lgamma => { let $c = F::Lgamma; $body }
            F::Pow => { let $c = F::Pow; $body }
            F::Digamma => { let $c = F::Digamma; $body }
            F::Ge => { let $c = F::Ge; $body }
            F::Gt => { let $c = F::Gt; $body }
        }
    }};
}
pub(crate) use with_constant_formula;

/// Whether `op` is elementwise with a formula here (one operand or two).
pub fn has_formula(op: Op) -> bool {
    Formula::of(op).is_some()
}

/// A scalar node's adjoint, at `out` in `adj`, accumulated into its
/// operands' at `a` and `b` (for a unary op, `b` is `a` and takes nothing),
/// operand 0 first as the kernels do, each only if it `needs` one.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn accumulate(f: Formula, k: f64, [a, b, out]: [usize; 3], [needs_a, needs_b]: [bool; 2], values: &[f64], adj: &mut [f64]) {
    let (x, y, v, g) = (values[a], values[b], values[out], adj[out]);
    if needs_a {
        adj[a] += partial(f, k, 0, x, y, v, g);
    }
    if needs_b && f.binary() {
        adj[b] += partial(f, k, 1, x, y, v, g);
    }
}

/// The formula's value at `x` (and `y`, which a unary one ignores); `k` is pow's exponent.
#[inline(always)]
pub fn value(f: Formula, k: f64, x: f64, y: f64) -> f64 {
    match f {
        Formula::Add => x + y,
        Formula::Sub => x - y,
        Formula::Mul => x * y,
        Formula::Div => x / y,
        Formula::Maximum => js_max(x, y),
        Formula::Minimum => js_min(x, y),
        Formula::Neg => -x,
        Formula::Exp => math::exp(x),
        Formula::Log => math::ln(x),
        Formula::Sqrt => x.sqrt(),
        Formula::Square => x * x,
        Formula::Tanh => fastmath::tanh_one(x),
        Formula::Sigmoid => 1.0 / (1.0 + math::exp(-x)),
        Formula::Relu => relu(x),
        Formula::Lgamma => special::lgamma(x),
        Formula::Pow => math::pow(x, k),
        Formula::Digamma => special::digamma(x),
        Formula::Ge => (x >= y) as u8 as f64,
        Formula::Gt => (x > y) as u8 as f64,
    }
}

/// What operand `i` (0 left, 1 right) receives of the adjoint `g` of a
/// result `out` computed from `x` (and `y`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn partial(f: Formula, k: f64, i: usize, x: f64, y: f64, out: f64, g: f64) -> f64 {
    match (f, i) {
        (Formula::Add, _) | (Formula::Sub, 0) => g,
        (Formula::Sub, _) => -g,
        (Formula::Mul, 0) => g * y,
        (Formula::Mul, _) => g * x,
        // By reciprocals: a divisor broadcast over a vector (a scale σ)
        // costs one division for all its elements, not one each. The
        // divisor's as (g/y)·(x/y), never through y², which overflows past
        // 1.3e154 (the partial was a silent 0 at 1e300/1e160), nor g·x; it
        // fails in turn only where g/y and x/y lie hundreds of orders of
        // magnitude apart (docs/PERFORMANCE.md says what fixing that costs).
        (Formula::Div, 0) => g * (1.0 / y),
        (Formula::Div, _) => -(g * (1.0 / y)) * (x * (1.0 / y)),
        // Ties go left; a NaN fails the comparison and goes right.
        (Formula::Maximum, 0) => if x >= y { g } else { 0.0 },
        (Formula::Maximum, _) => if x >= y { 0.0 } else { g },
        (Formula::Minimum, 0) => if x <= y { g } else { 0.0 },
        (Formula::Minimum, _) => if x <= y { 0.0 } else { g },
        (Formula::Neg, _) => -g,
        (Formula::Exp, _) => g * out,
        (Formula::Log, _) => g / x,
        (Formula::Sqrt, _) => g / (2.0 * out),
        (Formula::Square, _) => 2.0 * x * g,
        (Formula::Tanh, _) => g * (1.0 - out * out),
        (Formula::Sigmoid, _) => g * out * (1.0 - out),
        (Formula::Relu, _) => if x > 0.0 { g } else { 0.0 },
        (Formula::Lgamma, _) => g * special::digamma(x),
        (Formula::Pow, _) => g * k * math::pow(x, k - 1.0),
        (Formula::Digamma, _) => g * special::trigamma(x),
        // Piecewise constant: no adjoint, whatever g holds.
        (Formula::Ge | Formula::Gt, _) => 0.0,
    }
}
