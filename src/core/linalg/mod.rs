//! Dense linear algebra kernels (forward and reverse mode) on row-major `f64`
//! slices: Cholesky, triangular solves and LU with partial pivoting.
//!
//! Conventions: matrices are row-major; `n` is the order of the square
//! matrix; `k` is the number of right-hand-side columns (a vector is k = 1).
//! Non-finite entries never panic; they propagate through the arithmetic.
//!
//! Each public function below picks an implementation: a library's kernel
//! where `library.rs` says one is faster (measured), else the hand-written
//! one in `cholesky.rs`, `triangular.rs` or `lu.rs`, which also decides
//! every error and every non-finite input. The hand-written kernels take
//! all their scratch from the caller; faer's calls allocate their own.

mod cholesky;
#[cfg(not(target_arch = "wasm32"))]
pub mod faer;
mod library;
mod lu;
pub mod simd;
pub mod parallel;
pub mod threads;
mod triangular;

/// The Cholesky factor behind the library paths: the hand-written one,
/// or in a WebAssembly module built with `simd128` its two-lane twin
/// (`simd.rs`: the same bits). Its adjoint takes the twin everywhere.
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
use cholesky as cholesky_kernel;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use simd as cholesky_kernel;

/// The hand-written kernels alone, whatever the size: what the library
/// paths are measured (`benches/linalg.rs`) and tested against.
pub mod hand {
    pub use super::cholesky::{cholesky, cholesky_adjoint};
    pub use super::lu::{lu_factor, lu_solve, lu_solve_transpose, sub_outer};
    pub use super::triangular::{lower_matmul, lower_matmul_abar, lower_matmul_bbar, triangular_solve, triangular_solve_bbar, triangular_solve_tbar};
}

use crate::core::error::Result;
use library::LowerProduct;

/// Lower Cholesky factor L of a symmetric positive-definite A (all n² entries
/// of `l` written, zeros above the diagonal). Errors: `cholesky::cholesky`.
pub fn cholesky(a: &[f64], n: usize, l: &mut [f64]) -> Result<()> {
    if library::cholesky(a, n, l) {
        return Ok(());
    }
    cholesky_kernel::cholesky(a, n, l)
}

/// C += op(A) op(B) by a library's blocked product, on several threads when
/// large (`library.rs` says from which size); false to leave the product to
/// `kernels::matrix::gemm`'s own kernel.
#[allow(clippy::too_many_arguments)]
pub fn large_gemm(m: usize, k: usize, n: usize, a: &[f64], ta: bool, b: &[f64], tb: bool, c: &mut [f64]) -> bool {
    library::gemm(m, k, n, a, ta, b, tb, c)
}

/// C += op(A) op(B) on this thread by a library's product; false to leave
/// the product to nalgebra's (`kernels::matrix::gemm`).
#[allow(clippy::too_many_arguments)]
pub fn gemm_here(m: usize, k: usize, n: usize, a: &[f64], ta: bool, b: &[f64], tb: bool, c: &mut [f64]) -> bool {
    library::gemm_here(m, k, n, a, ta, b, tb, c)
}

/// ACCUMULATE into `abar` the adjoint of A from L and L̄ (`work`: n² scratch);
/// with `assign` (a fresh Ā), write 0 + each term without reading Ā.
pub fn cholesky_adjoint(l: &[f64], lbar: &[f64], n: usize, work: &mut [f64], abar: &mut [f64], assign: bool) {
    if !library::cholesky_adjoint(l, lbar, n, work, abar, assign) {
        simd::cholesky_adjoint(l, lbar, n, work, abar, assign)
    }
}

/// Solve T X = B, T n×n triangular (lower if `lower`), B n×k; reads only T's
/// own triangle. Zero pivots give ±Infinity/NaN.
pub fn triangular_solve(t: &[f64], n: usize, lower: bool, b: &[f64], k: usize, x: &mut [f64]) {
    if !library::triangular_solve(t, n, lower, b, k, x, false) {
        triangular::triangular_solve(t, n, lower, b, k, x)
    }
}

/// The adjoint's first step: B̄ = T⁻ᵀ X̄ (overwrites `bbar`, n×k).
pub fn triangular_solve_bbar(t: &[f64], n: usize, lower: bool, xbar: &[f64], k: usize, bbar: &mut [f64]) {
    if !library::triangular_solve(t, n, lower, xbar, k, bbar, true) {
        triangular::triangular_solve_bbar(t, n, lower, xbar, k, bbar)
    }
}

/// The adjoint's second step: ACCUMULATE T̄ −= B̄ Xᵀ on T's own triangle;
/// with `assign` (a fresh T̄), T̄ = 0 − B̄ Xᵀ there and zeros off it.
pub fn triangular_solve_tbar(n: usize, lower: bool, bbar: &[f64], x: &[f64], k: usize, tbar: &mut [f64], assign: bool) {
    if !library::triangular_solve_tbar(n, lower, bbar, x, k, tbar, assign) {
        triangular::triangular_solve_tbar(n, lower, bbar, x, k, tbar, assign)
    }
}

/// Y = tril(A) tril(B), A and B n×n read on and below the diagonal only
/// (all of `y` written, zeros above).
pub fn lower_matmul(a: &[f64], b: &[f64], n: usize, y: &mut [f64]) {
    if !library::lower_matmul(LowerProduct::Forward, a, b, n, y) {
        triangular::lower_matmul(a, b, n, y)
    }
}

/// `lower_matmul`'s adjoint for A: ACCUMULATE Ā += tril(tril(Ȳ) tril(B)ᵀ).
pub fn lower_matmul_abar(ybar: &[f64], b: &[f64], n: usize, abar: &mut [f64]) {
    if !library::lower_matmul(LowerProduct::AdjointA, ybar, b, n, abar) {
        triangular::lower_matmul_abar(ybar, b, n, abar)
    }
}

/// `lower_matmul`'s adjoint for B: ACCUMULATE B̄ += tril(tril(A)ᵀ tril(Ȳ)).
pub fn lower_matmul_bbar(a: &[f64], ybar: &[f64], n: usize, bbar: &mut [f64]) {
    if !library::lower_matmul(LowerProduct::AdjointB, a, ybar, n, bbar) {
        triangular::lower_matmul_bbar(a, ybar, n, bbar)
    }
}

/// P A = L U with partial pivoting, packed into `lu` and `perm` (row i of PA
/// is row perm[i] of A). Errors: `lu::lu_factor`.
pub fn lu_factor(a: &[f64], n: usize, lu: &mut [f64], perm: &mut [f64]) -> Result<()> {
    if library::lu_factor(a, n, lu, perm) {
        return Ok(());
    }
    lu::lu_factor(a, n, lu, perm)
}

/// The adjoint of A in X = A⁻¹ B: ACCUMULATE Ā −= B̄ Xᵀ (B̄, X n×k).
pub fn sub_outer(n: usize, bbar: &[f64], x: &[f64], k: usize, abar: &mut [f64]) {
    if !library::sub_outer(n, bbar, x, k, abar) {
        lu::sub_outer(n, bbar, x, k, abar)
    }
}

/// X = A⁻¹ B from `lu_factor`'s factors; B, X n×k.
pub fn lu_solve(lu: &[f64], perm: &[f64], n: usize, b: &[f64], k: usize, x: &mut [f64]) {
    if !library::lu_solve(lu, perm, n, b, k, x, false) {
        lu::lu_solve(lu, perm, n, b, k, x)
    }
}

/// Y = A⁻ᵀ C from `lu_factor`'s factors (the adjoint's solve); C, Y n×k.
pub fn lu_solve_transpose(lu: &[f64], perm: &[f64], n: usize, c: &[f64], k: usize, y: &mut [f64]) {
    if !library::lu_solve(lu, perm, n, c, k, y, true) {
        lu::lu_solve_transpose(lu, perm, n, c, k, y)
    }
}

// ---------------------------------------------------------------------------
// Small kernels
// ---------------------------------------------------------------------------

/// y[j] += s * x[j] over the common length (auto-vectorizes).
#[inline(always)]
fn axpy(y: &mut [f64], s: f64, x: &[f64]) {
    for (yj, &xj) in y.iter_mut().zip(x) {
        *yj += s * xj;
    }
}

/// Dot product over the common length, with 4 independent accumulators.
#[inline(always)]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let m = a.len().min(b.len());
    let (a, b) = (&a[..m], &b[..m]);
    let ca = a.chunks_exact(4);
    let cb = b.chunks_exact(4);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    let mut s = [0.0f64; 4];
    for (x, y) in ca.zip(cb) {
        s[0] += x[0] * y[0];
        s[1] += x[1] * y[1];
        s[2] += x[2] * y[2];
        s[3] += x[3] * y[3];
    }
    let mut t = (s[0] + s[1]) + (s[2] + s[3]);
    for (&x, &y) in ra.iter().zip(rb) {
        t += x * y;
    }
    t
}

/// The dot products of each of `rows` with `c` (over the common length),
/// sharing the loads of `c`; 4 partial sums per product.
#[inline(always)]
fn dot4(rows: [&[f64]; 4], c: &[f64]) -> [f64; 4] {
    let m = rows.iter().fold(c.len(), |m, r| m.min(r.len()));
    let c = &c[..m];
    let [a0, a1, a2, a3] = rows.map(|r| &r[..m]);
    let mut s = [[0.0f64; 4]; 4];
    let full = m - m % 4;
    let mut k = 0;
    while k < full {
        let z = &c[k..k + 4];
        let (x0, x1, x2, x3) = (&a0[k..k + 4], &a1[k..k + 4], &a2[k..k + 4], &a3[k..k + 4]);
        for q in 0..4 {
            s[0][q] += x0[q] * z[q];
            s[1][q] += x1[q] * z[q];
            s[2][q] += x2[q] * z[q];
            s[3][q] += x3[q] * z[q];
        }
        k += 4;
    }
    let mut out = s.map(|p| (p[0] + p[1]) + (p[2] + p[3]));
    for k in full..m {
        out[0] += a0[k] * c[k];
        out[1] += a1[k] * c[k];
        out[2] += a2[k] * c[k];
        out[3] += a3[k] * c[k];
    }
    out
}

// ---------------------------------------------------------------------------
// In-place triangular solves (the building blocks of every solve below)
// ---------------------------------------------------------------------------

/// How many columns of a right-hand side the solves below carry in
/// registers at once: four two-lane vectors (WebAssembly's `v128`, SSE2).
const BLOCK: usize = 8;

/// `y -= Σ c·x` over `terms` (c, x) in their order, each term added as
/// `axpy(y, -c, x)` adds it: every entry of `y` takes the same operations
/// in the same order, so the bits are those of one `axpy` after another.
/// But `BLOCK` entries of `y` stay in registers through all the terms,
/// rather than going to memory and back once per term (a 200×200 lower
/// solve with 200 right-hand sides, natively: 1.15 → 0.74 ms).
#[inline(always)]
fn sub_terms<'a>(y: &mut [f64], terms: impl Iterator<Item = (f64, &'a [f64])> + Clone) {
    let k = y.len();
    let body = k - k % BLOCK;
    for j in (0..body).step_by(BLOCK) {
        let mut acc: [f64; BLOCK] = y[j..j + BLOCK].try_into().unwrap();
        for (c, x) in terms.clone() {
            let (s, x): (f64, &[f64; BLOCK]) = (-c, x[j..j + BLOCK].try_into().unwrap());
            for q in 0..BLOCK {
                acc[q] += s * x[q];
            }
        }
        y[j..j + BLOCK].copy_from_slice(&acc);
    }
    if body < k {
        for (c, x) in terms {
            axpy(&mut y[body..], -c, &x[body..k]);
        }
    }
}

/// Solve T Y = X in place (X n×k), T lower triangular (unit diagonal if
/// `unit`). Reads only T's strict lower triangle (and its diagonal unless
/// `unit`). Row-oriented forward substitution.
fn solve_lower_in_place(t: &[f64], n: usize, unit: bool, x: &mut [f64], k: usize) {
    if k == 0 {
        return;
    }
    if k == 1 {
        for i in 0..n {
            let row = &t[i * n..i * n + i];
            let s = x[i] - dot(row, &x[..i]);
            x[i] = if unit { s } else { s / t[i * n + i] };
        }
        return;
    }
    for i in 0..n {
        let (done, rest) = x.split_at_mut(i * k);
        let xi = &mut rest[..k];
        sub_terms(xi, t[i * n..i * n + i].iter().copied().zip(done.chunks_exact(k)));
        if !unit {
            let d = t[i * n + i];
            for v in xi.iter_mut() {
                *v /= d;
            }
        }
    }
}

/// Solve T Y = X in place (X n×k), T upper triangular (unit diagonal if
/// `unit`). Reads only T's strict upper triangle (and its diagonal unless
/// `unit`). Row-oriented back substitution.
fn solve_upper_in_place(t: &[f64], n: usize, unit: bool, x: &mut [f64], k: usize) {
    if k == 0 {
        return;
    }
    if k == 1 {
        for i in (0..n).rev() {
            let row = &t[i * n + i + 1..i * n + n];
            let s = x[i] - dot(row, &x[i + 1..n]);
            x[i] = if unit { s } else { s / t[i * n + i] };
        }
        return;
    }
    for i in (0..n).rev() {
        let (head, done) = x.split_at_mut((i + 1) * k);
        let xi = &mut head[i * k..];
        sub_terms(xi, t[i * n + i + 1..i * n + n].iter().copied().zip(done.chunks_exact(k)));
        if !unit {
            let d = t[i * n + i];
            for v in xi.iter_mut() {
                *v /= d;
            }
        }
    }
}

/// Solve Tᵀ Y = X in place, T lower triangular (so Tᵀ is upper): back
/// substitution, row i of Y taking the terms of rows n−1 down to i+1 (T's
/// column i, read from the bottom up), in the order a column-oriented
/// substitution adds them.
fn solve_lower_transposed_in_place(t: &[f64], n: usize, x: &mut [f64], k: usize) {
    if k == 0 {
        return;
    }
    if k == 1 {
        for p in (0..n).rev() {
            let yp = x[p] / t[p * n + p];
            x[p] = yp;
            axpy(&mut x[..p], -yp, &t[p * n..p * n + p]);
        }
        return;
    }
    for i in (0..n).rev() {
        let (head, done) = x.split_at_mut((i + 1) * k);
        let yi = &mut head[i * k..];
        sub_terms(yi, (i + 1..n).rev().map(|p| (t[p * n + i], &done[(p - i - 1) * k..(p - i) * k])));
        let d = t[i * n + i];
        for v in yi.iter_mut() {
            *v /= d;
        }
    }
}

/// Solve Tᵀ Y = X in place, T upper triangular (so Tᵀ is lower): forward
/// substitution, row i of Y taking the terms of rows 0 to i−1 (T's column
/// i), in the order a column-oriented substitution adds them.
fn solve_upper_transposed_in_place(t: &[f64], n: usize, x: &mut [f64], k: usize) {
    if k == 0 {
        return;
    }
    if k == 1 {
        for p in 0..n {
            let yp = x[p] / t[p * n + p];
            x[p] = yp;
            axpy(&mut x[p + 1..n], -yp, &t[p * n + p + 1..p * n + n]);
        }
        return;
    }
    for i in 0..n {
        let (done, rest) = x.split_at_mut(i * k);
        let yi = &mut rest[..k];
        sub_terms(yi, (0..i).map(|p| (t[p * n + i], &done[p * k..(p + 1) * k])));
        let d = t[i * n + i];
        for v in yi.iter_mut() {
            *v /= d;
        }
    }
}

#[cfg(test)]
mod tests;
