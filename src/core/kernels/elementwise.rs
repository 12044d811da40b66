//! Elementwise kernels: each op is a whole loop, monomorphized per op so the
//! arithmetic inlines (the dispatch happens once per node, not per element).
//!
//! Under WebAssembly each loop is a function of its own rather than inlined
//! into its caller (`rules::elementwise`, every op's loops in one body):
//! there V8's register allocator kept `sum_by`'s four sums on the stack,
//! ~4.5 cycles an element where the loop alone takes ~1.1.

use super::matrix::sum_by;
use crate::core::op::Broadcast;

/// out[i] = f(a[ia], b[ib]) under one of the broadcasting cases.
#[cfg_attr(target_arch = "wasm32", inline(never))]
#[cfg_attr(not(target_arch = "wasm32"), inline(always))]
pub fn binary(bc: Broadcast, a: &[f64], b: &[f64], out: &mut [f64], f: impl Fn(f64, f64) -> f64) {
    if out.is_empty() {
        return; // a row of length 0 would make the row loops below chunk by 0
    }
    match bc {
        Broadcast::Same => {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                *o = f(x, y);
            }
        }
        Broadcast::ScalarLeft => {
            let x = a[0];
            for (o, &y) in out.iter_mut().zip(b) {
                *o = f(x, y);
            }
        }
        Broadcast::ScalarRight => {
            let y = b[0];
            for (o, &x) in out.iter_mut().zip(a) {
                *o = f(x, y);
            }
        }
        Broadcast::RowLeft => {
            for (row, brow) in out.chunks_exact_mut(a.len()).zip(b.chunks_exact(a.len())) {
                for ((o, &x), &y) in row.iter_mut().zip(a).zip(brow) {
                    *o = f(x, y);
                }
            }
        }
        Broadcast::RowRight => {
            for (row, arow) in out.chunks_exact_mut(b.len()).zip(a.chunks_exact(b.len())) {
                for ((o, &x), &y) in row.iter_mut().zip(arow).zip(b) {
                    *o = f(x, y);
                }
            }
        }
    }
}

/// Accumulate into the adjoint `d` of operand `k` (0 left, 1 right) the
/// contributions `c(a, b, g)` of every output element; a broadcast operand
/// sums its contributions (a scalar over everything, a row vector over rows).
/// With `assign`, `d` is fresh (`kernels::Adjoints::fresh`) and an operand
/// whose entries take one term each is written d[i] = 0 + term, the bits of
/// adding it to a zero (one that sums terms is zeroed by the caller).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn binary_adjoint(
    bc: Broadcast,
    k: usize,
    a: &[f64],
    b: &[f64],
    g: &[f64],
    d: &mut [f64],
    assign: bool,
    c: impl Fn(f64, f64, f64) -> f64,
) {
    if g.is_empty() {
        return;
    }
    if assign {
        let one_term = matches!((bc, k), (Broadcast::Same, _) | (Broadcast::ScalarLeft, 1) | (Broadcast::ScalarRight, 0));
        assert!(one_term, "an operand that takes a sum of terms is zeroed, not assigned");
        binary_adjoint_with(bc, k, a, b, g, d, |d, t| *d = 0.0 + t, c)
    } else {
        binary_adjoint_with(bc, k, a, b, g, d, |d, t| *d += t, c)
    }
}

/// `binary_adjoint`, each one-term entry written by `put(entry, term)`.
#[cfg_attr(target_arch = "wasm32", inline(never))]
#[cfg_attr(not(target_arch = "wasm32"), inline(always))]
#[allow(clippy::too_many_arguments)]
fn binary_adjoint_with(
    bc: Broadcast,
    k: usize,
    a: &[f64],
    b: &[f64],
    g: &[f64],
    d: &mut [f64],
    put: impl Fn(&mut f64, f64),
    c: impl Fn(f64, f64, f64) -> f64,
) {
    match (bc, k) {
        (Broadcast::Same, _) => {
            for (((di, &x), &y), &gi) in d.iter_mut().zip(a).zip(b).zip(g) {
                put(di, c(x, y, gi));
            }
        }
        (Broadcast::ScalarLeft, 0) => {
            let x = a[0];
            d[0] += sum_by(g.len(), |i| c(x, b[i], g[i]));
        }
        (Broadcast::ScalarLeft, _) => {
            let x = a[0];
            for ((di, &y), &gi) in d.iter_mut().zip(b).zip(g) {
                put(di, c(x, y, gi));
            }
        }
        (Broadcast::ScalarRight, 0) => {
            let y = b[0];
            for ((di, &x), &gi) in d.iter_mut().zip(a).zip(g) {
                put(di, c(x, y, gi));
            }
        }
        (Broadcast::ScalarRight, _) => {
            let y = b[0];
            d[0] += sum_by(g.len(), |i| c(a[i], y, g[i]));
        }
        (Broadcast::RowLeft, 0) => {
            let n = a.len();
            for (brow, grow) in b.chunks_exact(n).zip(g.chunks_exact(n)) {
                for (((di, &x), &y), &gi) in d.iter_mut().zip(a).zip(brow).zip(grow) {
                    *di += c(x, y, gi);
                }
            }
        }
        (Broadcast::RowLeft, _) => {
            let n = a.len();
            for ((drow, brow), grow) in d.chunks_exact_mut(n).zip(b.chunks_exact(n)).zip(g.chunks_exact(n)) {
                for (((di, &x), &y), &gi) in drow.iter_mut().zip(a).zip(brow).zip(grow) {
                    *di += c(x, y, gi);
                }
            }
        }
        (Broadcast::RowRight, 0) => {
            let n = b.len();
            for ((drow, arow), grow) in d.chunks_exact_mut(n).zip(a.chunks_exact(n)).zip(g.chunks_exact(n)) {
                for (((di, &x), &y), &gi) in drow.iter_mut().zip(arow).zip(b).zip(grow) {
                    *di += c(x, y, gi);
                }
            }
        }
        (Broadcast::RowRight, _) => {
            let n = b.len();
            for (arow, grow) in a.chunks_exact(n).zip(g.chunks_exact(n)) {
                for (((di, &x), &y), &gi) in d.iter_mut().zip(arow).zip(b).zip(grow) {
                    *di += c(x, y, gi);
                }
            }
        }
    }
}

#[cfg_attr(target_arch = "wasm32", inline(never))]
#[cfg_attr(not(target_arch = "wasm32"), inline(always))]
pub fn unary(a: &[f64], out: &mut [f64], f: impl Fn(f64) -> f64) {
    for (o, &x) in out.iter_mut().zip(a) {
        *o = f(x);
    }
}

/// d[i] += c(x[i], out[i], g[i]); with `assign` (a fresh `d`), d[i] = 0 + c(…).
#[inline(always)]
pub fn unary_adjoint(a: &[f64], out: &[f64], g: &[f64], d: &mut [f64], assign: bool, c: impl Fn(f64, f64, f64) -> f64) {
    if assign {
        unary_adjoint_with(a, out, g, d, |d, t| *d = 0.0 + t, c)
    } else {
        unary_adjoint_with(a, out, g, d, |d, t| *d += t, c)
    }
}

/// `unary_adjoint`, each entry written by `put(entry, term)`.
#[cfg_attr(target_arch = "wasm32", inline(never))]
#[cfg_attr(not(target_arch = "wasm32"), inline(always))]
fn unary_adjoint_with(a: &[f64], out: &[f64], g: &[f64], d: &mut [f64], put: impl Fn(&mut f64, f64), c: impl Fn(f64, f64, f64) -> f64) {
    for (((di, &x), &y), &gi) in d.iter_mut().zip(a).zip(out).zip(g) {
        put(di, c(x, y, gi));
    }
}

pub fn relu(x: f64) -> f64 {
    // max(x, 0) that keeps NaN, as Math.max does.
    if x > 0.0 || x.is_nan() {
        x
    } else {
        0.0
    }
}

/// JavaScript's Math.max for two numbers: NaN wins, +0 beats -0.
pub fn js_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == b {
        if a.is_sign_negative() { b } else { a }
    } else if a > b {
        a
    } else {
        b
    }
}

pub fn js_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == b {
        if a.is_sign_negative() { a } else { b }
    } else if a < b {
        a
    } else {
        b
    }
}
