//! The Cholesky factor's tangent as one op, and its adjoints: what a
//! Hessian through `cholesky` spends most of its time in.
//!
//! L̇ = L P, P = Φ(M), M = L⁻¹ S L⁻ᵀ, S = (Ȧ + Ȧᵀ)/2, Φ the lower
//! triangle with half the diagonal. For an adjoint G of L̇ (its lower
//! triangle: L̇ is lower), M̄ = Φ(Lᵀ G) and
//! - Ā is `cholesky`'s own adjoint of G (L̇ is the factor's differential);
//! - L̄ = tril(G Pᵀ − L⁻ᵀ (M̄ + M̄ᵀ) M), from dM = −L⁻¹ dL M − M dLᵀ L⁻ᵀ.
//!
//! Written as separate ops (sym, two solves, a transpose, a mask and a
//! lower product) the same tangent kept eight n×n values and their
//! adjoints; here it keeps M and two scratch matrices (`AUX_MATRICES`),
//! and its sweep back skips the masks' and transposes' passes.

use super::matrix;
use crate::core::linalg::{cholesky_adjoint, lower_matmul, lower_matmul_abar, lower_matmul_bbar, parallel, triangular_solve, triangular_solve_bbar};
use crate::core::op::CHOLESKY_TANGENT_AUX as AUX_MATRICES;

/// L̇ into `out` (n×n, zeros above the diagonal) from the factor L and the
/// tangent Ȧ of the matrix it factors; M stays in `aux` for the adjoints.
pub fn cholesky_tangent(l: &[f64], adot: &[f64], n: usize, out: &mut [f64], aux: &mut [f64]) {
    let nn = n * n;
    let (m, rest) = aux[..AUX_MATRICES * nn].split_at_mut(nn);
    let (a, b) = rest.split_at_mut(nn);
    matrix::transpose(n, n, adot, a);
    // (x + y)/2 is the same bits for (y, x): S is exactly symmetric.
    parallel::rows(a, n, |r0, band| {
        for (s, &x) in band.iter_mut().zip(&adot[r0 * n..]) {
            *s = (x + *s) * 0.5;
        }
    });
    triangular_solve(l, n, true, a, n, b);
    matrix::transpose(n, n, b, a);
    triangular_solve(l, n, true, a, n, m);
    half_lower(m, n, a);
    lower_matmul(l, a, n, out);
}

/// ACCUMULATE into `lbar` the adjoint of L, from the adjoint `g` of L̇ and
/// the M that `cholesky_tangent` left in `aux`; with `assign` (a fresh L̄)
/// zeroed first.
pub fn cholesky_tangent_lbar(l: &[f64], g: &[f64], n: usize, aux: &mut [f64], lbar: &mut [f64], assign: bool) {
    let nn = n * n;
    let (m, rest) = aux[..AUX_MATRICES * nn].split_at_mut(nn);
    let (a, b) = rest.split_at_mut(nn);
    if assign {
        parallel::zero(lbar);
    }
    half_lower(m, n, a);
    lower_matmul_abar(g, a, n, lbar);
    parallel::zero(b);
    lower_matmul_bbar(l, g, n, b);
    mask_half_lower(b, n);
    a.copy_from_slice(b);
    matrix::add_transposed(n, n, b, a, false);
    // L⁻ᵀ X on and below the diagonal reads X there alone (L⁻ᵀ is upper).
    lower_product_transposed(a, m, n, b);
    triangular_solve_bbar(l, n, true, b, n, a);
    parallel::rows(lbar, n, |r0, band| {
        for (r, row) in band.chunks_exact_mut(n).enumerate() {
            let i = r0 + r;
            for (x, &y) in row[..=i].iter_mut().zip(&a[i * n..i * n + i + 1]) {
                *x -= y;
            }
        }
    });
}

/// ACCUMULATE into `abar` the adjoint of Ȧ (symmetrized, as `cholesky`'s);
/// with `assign`, 0 + each term. Uses `aux`'s scratch.
pub fn cholesky_tangent_adotbar(l: &[f64], g: &[f64], n: usize, aux: &mut [f64], abar: &mut [f64], assign: bool) {
    cholesky_adjoint(l, g, n, &mut aux[n * n..2 * n * n], abar, assign)
}

/// Rows of the product `lower_product_transposed` makes at a time: 32,
/// or an eighth of them when large, for products big enough to split on
/// several threads (`library.rs`).
fn product_rows(n: usize) -> usize {
    n.div_ceil(8).max(32)
}

/// `out` = tril(X Yᵀ) (zeros above the diagonal) of n×n X and Y, as X Y for
/// a symmetric Y: each band of rows only as far right as its last row's
/// diagonal, about half a full product's work.
fn lower_product_transposed(x: &[f64], y: &[f64], n: usize, out: &mut [f64]) {
    for r0 in (0..n).step_by(product_rows(n)) {
        let r1 = (r0 + product_rows(n)).min(n);
        let band = &mut out[r0 * n..r1 * n];
        // The band's (r1 − r0)×r1 product, packed at its start, then each
        // row moved to its place, the last first (a row only moves right).
        matrix::gemm(r1 - r0, n, r1, &x[r0 * n..r1 * n], false, &y[..r1 * n], true, 0.0, &mut band[..(r1 - r0) * r1]);
        for r in (0..r1 - r0).rev() {
            band.copy_within(r * r1..r * r1 + r1, r * n);
            band[r * n + r0 + r + 1..(r + 1) * n].fill(0.0);
        }
    }
}

/// `p` = Φ(`m`): m's entries below the diagonal, half of it on it, 0 above.
fn half_lower(m: &[f64], n: usize, p: &mut [f64]) {
    p.copy_from_slice(&m[..n * n]);
    mask_half_lower(p, n);
}

/// `p` = Φ(`p`) in place.
fn mask_half_lower(p: &mut [f64], n: usize) {
    parallel::rows(p, n, |r0, band| {
        for (r, row) in band.chunks_exact_mut(n).enumerate() {
            let i = r0 + r;
            row[i] *= 0.5;
            row[i + 1..].fill(0.0);
        }
    });
}
