//! LU with partial pivoting, its solves and its adjoint's outer product,
//! hand-written on row-major slices.

use super::{axpy, dot, solve_lower_in_place, solve_upper_in_place};
use crate::core::error::Result;

/// LU factorization with partial pivoting, P A = L U, stored compactly in
/// `lu` (unit lower L strictly below the diagonal, U on and above) and `perm`
/// (row i of PA is row perm[i] of A, stored as f64).
///
/// Error "solve: matrix is singular (pivot below tolerance)" when the largest
/// available pivot of a column has |p| <= n ε max|A| (or max|A| is 0). Here
/// max|A| is taken over the finite entries, so NaN and ±Infinity entries
/// propagate into the result instead of producing an error; a NaN pivot is
/// used as is (never an error).
pub fn lu_factor(a: &[f64], n: usize, lu: &mut [f64], perm: &mut [f64]) -> Result<()> {
    let lu = &mut lu[..n * n];
    lu.copy_from_slice(&a[..n * n]);
    for (i, p) in perm[..n].iter_mut().enumerate() {
        *p = i as f64;
    }
    let mut amax = 0.0f64;
    for &v in lu.iter() {
        let av = v.abs();
        if av.is_finite() && av > amax {
            amax = av;
        }
    }
    let tol = n as f64 * f64::EPSILON * amax;
    for c in 0..n {
        // Pivot search: largest |entry| in column c at or below the diagonal;
        // a NaN candidate wins outright (it poisons the column anyway).
        let mut p = c;
        let mut best = lu[c * n + c].abs();
        if !best.is_nan() {
            for r in c + 1..n {
                let v = lu[r * n + c].abs();
                if v.is_nan() {
                    p = r;
                    best = v;
                    break;
                }
                if v > best {
                    p = r;
                    best = v;
                }
            }
        }
        if !best.is_nan() && (best <= tol || amax == 0.0) {
            return crate::fail!("solve: matrix is singular (pivot below tolerance)");
        }
        if p != c {
            let (top, bottom) = lu.split_at_mut(p * n);
            top[c * n..c * n + n].swap_with_slice(&mut bottom[..n]);
            perm.swap(c, p);
        }
        let (top, bottom) = lu.split_at_mut((c + 1) * n);
        let prow = &top[c * n..c * n + n];
        let piv = prow[c];
        for row in bottom.chunks_exact_mut(n) {
            let m = row[c] / piv;
            row[c] = m;
            axpy(&mut row[c + 1..], -m, &prow[c + 1..]);
        }
    }
    Ok(())
}

/// perm[i] as a row index, if it is a valid one.
#[inline]
fn perm_index(perm: &[f64], i: usize, n: usize) -> Option<usize> {
    let v = perm[i];
    if v >= 0.0 && v < n as f64 && v.fract() == 0.0 {
        Some(v as usize)
    } else {
        None
    }
}

/// X = A⁻¹ B from the factorization of `lu_factor`; B, X n×k.
/// (An invalid `perm` entry yields a NaN row rather than a panic.)
pub fn lu_solve(lu: &[f64], perm: &[f64], n: usize, b: &[f64], k: usize, x: &mut [f64]) {
    let x = &mut x[..n * k];
    // X ← P B
    for (i, xi) in x.chunks_exact_mut(k.max(1)).enumerate().take(n) {
        match perm_index(perm, i, n) {
            Some(p) => xi.copy_from_slice(&b[p * k..p * k + k]),
            None => xi.fill(f64::NAN),
        }
    }
    // L U X = P B
    solve_lower_in_place(lu, n, true, x, k);
    solve_upper_in_place(lu, n, false, x, k);
}

/// Y = A⁻ᵀ C from the factorization (solve Aᵀ Y = C); C, Y n×k.
///
/// Aᵀ = Uᵀ Lᵀ P, so Uᵀ Z = C, Lᵀ W = Z, Y = Pᵀ W (Y[perm[i]] = W[i]).
/// The solves run directly in the permuted layout (row i of W lives in row
/// perm[i] of Y), so no scratch is needed. An invalid `perm` gives all NaN.
pub fn lu_solve_transpose(lu: &[f64], perm: &[f64], n: usize, c: &[f64], k: usize, y: &mut [f64]) {
    let y = &mut y[..n * k];
    if (0..n).any(|i| perm_index(perm, i, n).is_none()) {
        y.fill(f64::NAN);
        return;
    }
    let q = |i: usize| perm[i] as usize; // valid: checked above
    for i in 0..n {
        let qi = q(i);
        y[qi * k..qi * k + k].copy_from_slice(&c[i * k..i * k + k]);
    }
    // Uᵀ Z = C: forward, column-oriented over the rows of U.
    for p in 0..n {
        let qp = q(p);
        let d = lu[p * n + p];
        for v in &mut y[qp * k..qp * k + k] {
            *v /= d;
        }
        for i in p + 1..n {
            sub_row(y, k, q(i), qp, lu[p * n + i]);
        }
    }
    // Lᵀ W = Z (unit diagonal): backward, column-oriented over the rows of L.
    for p in (0..n).rev() {
        let qp = q(p);
        for i in 0..p {
            sub_row(y, k, q(i), qp, lu[p * n + i]);
        }
    }
}

/// Row `to` −= m · row `from` of a k-column matrix. Distinct rows are
/// borrowed apart, so the update runs as vector instructions (y − m·x and
/// y + (−m)·x round alike); the same row twice comes only from a `perm`
/// that repeats an index.
#[inline(always)]
fn sub_row(y: &mut [f64], k: usize, to: usize, from: usize, m: f64) {
    let (to, from) = match to.cmp(&from) {
        std::cmp::Ordering::Less => {
            let (head, tail) = y.split_at_mut(from * k);
            (&mut head[to * k..to * k + k], &tail[..k])
        }
        std::cmp::Ordering::Greater => {
            let (head, tail) = y.split_at_mut(to * k);
            (&mut tail[..k], &head[from * k..from * k + k])
        }
        std::cmp::Ordering::Equal => {
            y[to * k..to * k + k].iter_mut().for_each(|v| *v -= m * *v);
            return;
        }
    };
    axpy(to, -m, from);
}

/// ACCUMULATE abar -= bbar xᵀ over the full n×n (bbar, x are n×k): the
/// adjoint of A in X = A⁻¹ B.
pub fn sub_outer(n: usize, bbar: &[f64], x: &[f64], k: usize, abar: &mut [f64]) {
    if k == 0 {
        return; // Bbar Xᵀ is the zero matrix
    }
    for i in 0..n {
        let arow = &mut abar[i * n..i * n + n];
        if k == 1 {
            axpy(arow, -bbar[i], &x[..n]);
        } else {
            let bi = &bbar[i * k..i * k + k];
            for (aij, xj) in arow.iter_mut().zip(x[..n * k].chunks_exact(k)) {
                *aij -= dot(bi, xj);
            }
        }
    }
}
