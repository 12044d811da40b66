//! Triangular solves and their adjoints, hand-written on row-major slices.

use super::{axpy, dot, solve_lower_in_place, solve_lower_transposed_in_place, solve_upper_in_place, solve_upper_transposed_in_place};

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
pub fn triangular_solve_tbar(n: usize, lower: bool, bbar: &[f64], x: &[f64], k: usize, tbar: &mut [f64]) {
    if k == 0 {
        return; // Bbar Xᵀ is the zero matrix
    }
    for i in 0..n {
        let (lo, hi) = if lower { (0, i + 1) } else { (i, n) };
        let trow = &mut tbar[i * n + lo..i * n + hi];
        if k == 1 {
            axpy(trow, -bbar[i], &x[lo..hi]);
        } else {
            let bi = &bbar[i * k..i * k + k];
            for (tij, xj) in trow.iter_mut().zip(x[lo * k..hi * k].chunks_exact(k)) {
                *tij -= dot(bi, xj);
            }
        }
    }
}
