//! Triangular solves, products of lower triangles, and their adjoints,
//! hand-written on row-major slices.

use super::{axpy, dot, parallel, solve_lower_in_place, solve_lower_transposed_in_place, solve_upper_in_place, solve_upper_transposed_in_place};

/// Solve T X = B for X, T n×n triangular (lower if `lower`, else upper),
/// B n×k. Reads only T's own triangle. Zero pivots give ±Infinity/NaN.
pub fn triangular_solve(t: &[f64], n: usize, lower: bool, b: &[f64], k: usize, x: &mut [f64]) {
    let x = &mut x[..n * k];
    x.copy_from_slice(&b[..n * k]);
    if lower {
        solve_lower_in_place(t, n, false, x, k);
    } else {
        solve_upper_in_place(t, n, false, x, k);
    }
}

/// Reverse mode of `triangular_solve`, step 1: Bbar = T⁻ᵀ Xbar (overwrites
/// `bbar`, n×k). Reads only T's own triangle.
pub fn triangular_solve_bbar(t: &[f64], n: usize, lower: bool, xbar: &[f64], k: usize, bbar: &mut [f64]) {
    let y = &mut bbar[..n * k];
    y.copy_from_slice(&xbar[..n * k]);
    if lower {
        solve_lower_transposed_in_place(t, n, y, k);
    } else {
        solve_upper_transposed_in_place(t, n, y, k);
    }
}

/// Step 2: ACCUMULATE Tbar -= Bbar Xᵀ restricted to T's own triangle
/// (diagonal included); the other triangle of `tbar` is left untouched.
/// With `assign` (a fresh T̄: `kernels::FirstWrites`), T̄ = 0 − Bbar Xᵀ on
/// the triangle, those bits without reading T̄, and zeros off it.
pub fn triangular_solve_tbar(n: usize, lower: bool, bbar: &[f64], x: &[f64], k: usize, tbar: &mut [f64], assign: bool) {
    if k == 0 {
        // Bbar Xᵀ is the zero matrix
        if assign {
            parallel::zero(&mut tbar[..n * n]);
        }
        return;
    }
    // Each entry takes one update, so bands of rows may go to several threads.
    parallel::triangle_rows(tbar, n, lower, |first, band| {
        for (i, row) in (first..).zip(band.chunks_exact_mut(n)) {
            let (lo, hi) = if lower { (0, i + 1) } else { (i, n) };
            if assign {
                row[..lo].fill(0.0);
                row[hi..].fill(0.0);
            }
            let trow = &mut row[lo..hi];
            if k == 1 && !assign {
                axpy(trow, -bbar[i], &x[lo..hi]);
            } else if k == 1 {
                let s = -bbar[i];
                for (tij, &xj) in trow.iter_mut().zip(&x[lo..hi]) {
                    *tij = 0.0 + s * xj;
                }
            } else {
                let bi = &bbar[i * k..i * k + k];
                for (tij, xj) in trow.iter_mut().zip(x[lo * k..hi * k].chunks_exact(k)) {
                    *tij = if assign { 0.0 } else { *tij } - dot(bi, xj);
                }
            }
        }
    })
}

/// Y = tril(A) tril(B), A, B n×n, read on and below the diagonal only; all
/// of `y` written (zeros above the diagonal). Y[i][j] sums over j ≤ k ≤ i.
pub fn lower_matmul(a: &[f64], b: &[f64], n: usize, y: &mut [f64]) {
    let y = &mut y[..n * n];
    y.fill(0.0);
    for i in 0..n {
        let yi = &mut y[i * n..i * n + i + 1];
        for (k, &aik) in a[i * n..i * n + i + 1].iter().enumerate() {
            axpy(&mut yi[..k + 1], aik, &b[k * n..k * n + k + 1]);
        }
    }
}

/// `lower_matmul`'s adjoint for A: ACCUMULATE Ā += tril(tril(Ȳ) tril(B)ᵀ)
/// on and below the diagonal; Ā[i][j] sums over k ≤ j.
pub fn lower_matmul_abar(ybar: &[f64], b: &[f64], n: usize, abar: &mut [f64]) {
    for i in 0..n {
        for j in 0..=i {
            abar[i * n + j] += dot(&ybar[i * n..i * n + j + 1], &b[j * n..j * n + j + 1]);
        }
    }
}

/// `lower_matmul`'s adjoint for B: ACCUMULATE B̄ += tril(tril(A)ᵀ tril(Ȳ))
/// on and below the diagonal; B̄[i][j] sums over k ≥ i.
pub fn lower_matmul_bbar(a: &[f64], ybar: &[f64], n: usize, bbar: &mut [f64]) {
    for k in 0..n {
        for i in 0..=k {
            let aki = a[k * n + i];
            axpy(&mut bbar[i * n..i * n + i + 1], aki, &ybar[k * n..k * n + i + 1]);
        }
    }
}
