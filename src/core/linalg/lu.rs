//! LU with partial pivoting, its solves and its adjoint's outer product,
//! hand-written on row-major slices.

use super::{axpy, dot, dot4, solve_lower_in_place, solve_upper_in_place, BLOCK};
use smallvec::SmallVec;
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
/// perm[i] of Y), with no scratch the size of Y. Row by row: each row takes its
/// terms in the order a column-by-column substitution would give them
/// (`sub_rows`), with its entries in registers throughout. An invalid
/// `perm` gives all NaN.
pub fn lu_solve_transpose(lu: &[f64], perm: &[f64], n: usize, c: &[f64], k: usize, y: &mut [f64]) {
    let y = &mut y[..n * k];
    let Some(q) = (0..n).map(|i| perm_index(perm, i, n)).collect::<Option<SmallVec<[usize; 16]>>>() else {
        y.fill(f64::NAN);
        return;
    };
    for (i, &qi) in q.iter().enumerate() {
        y[qi * k..qi * k + k].copy_from_slice(&c[i * k..i * k + k]);
    }
    // Column i of the factors, the coefficients of row i's terms.
    let mut column: SmallVec<[f64; 16]> = SmallVec::with_capacity(n);
    // Uᵀ Z = C, forward: row i less U[p][i]·Z[p] for p = 0, 1, …, i − 1, over U[i][i].
    for i in 0..n {
        column.clear();
        column.extend((0..i).map(|p| lu[p * n + i]));
        sub_rows(y, k, q[i], column.iter().copied().zip(q[..i].iter().copied()));
        let d = lu[i * n + i];
        for v in &mut y[q[i] * k..q[i] * k + k] {
            *v /= d;
        }
    }
    // Lᵀ W = Z (unit diagonal), backward: row i less L[p][i]·W[p] for p = n − 1, …, i + 1.
    for i in (0..n).rev() {
        column.clear();
        column.extend((i + 1..n).rev().map(|p| lu[p * n + i]));
        sub_rows(y, k, q[i], column.iter().copied().zip(q[i + 1..].iter().rev().copied()));
    }
}

/// Row `to` of a k-column matrix −= Σ m · row `from` over `terms` (m,
/// from) in their order, each term added as `axpy(row, −m, from)` adds it,
/// so the bits are those of one row update after another; but `BLOCK`
/// entries of the row stay in registers through all the terms. This is
/// `sub_terms` (the triangular solves') for rows of one matrix named by
/// index: rows scattered by the permutation cannot be borrowed apart from
/// the one they update. A `from` equal to `to` (only from a `perm` that
/// repeats an index) reads the row as it was before the update.
#[inline(always)]
fn sub_rows(y: &mut [f64], k: usize, to: usize, terms: impl Iterator<Item = (f64, usize)> + Clone) {
    let body = k - k % BLOCK;
    for j in (0..body).step_by(BLOCK) {
        let mut acc: [f64; BLOCK] = y[to * k + j..to * k + j + BLOCK].try_into().unwrap();
        for (m, from) in terms.clone() {
            let (s, x): (f64, &[f64; BLOCK]) = (-m, y[from * k + j..from * k + j + BLOCK].try_into().unwrap());
            for l in 0..BLOCK {
                acc[l] += s * x[l];
            }
        }
        y[to * k + j..to * k + j + BLOCK].copy_from_slice(&acc);
    }
    // The last k mod BLOCK entries, one at a time (a copy of a length not
    // known here would be a call to memcpy per row).
    for j in body..k {
        let mut acc = y[to * k + j];
        for (m, from) in terms.clone() {
            acc += -m * y[from * k + j];
        }
        y[to * k + j] = acc;
    }
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
            // Four dots at a time sharing B̄'s row, each summed as `dot` sums it.
            let bi = &bbar[i * k..i * k + k];
            let mut xs = x[..n * k].chunks_exact(k);
            let mut quads = arow.chunks_exact_mut(4);
            for a4 in &mut quads {
                let rows: [&[f64]; 4] = std::array::from_fn(|_| xs.next().unwrap_or_default());
                for (aij, d) in a4.iter_mut().zip(dot4(rows, bi)) {
                    *aij -= d;
                }
            }
            for (aij, xj) in quads.into_remainder().iter_mut().zip(xs) {
                *aij -= dot(bi, xj);
            }
        }
    }
}
