//! Dense linear algebra kernels (forward and reverse mode) on row-major `f64`
//! slices: Cholesky, triangular solves and LU with partial pivoting.
//!
//! Conventions: matrices are row-major; `n` is the order of the square
//! matrix; `k` is the number of right-hand-side columns (a vector is k = 1).
//! Nothing here allocates: all scratch is passed in. Non-finite entries never
//! panic; they propagate through the arithmetic.

use crate::core::error::{js_number, Result};

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
        for (p, xp) in done.chunks_exact(k).enumerate() {
            axpy(xi, -t[i * n + p], xp);
        }
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
        let trow = &t[i * n + i + 1..i * n + n];
        for (&tip, xp) in trow.iter().zip(done.chunks_exact(k)) {
            axpy(xi, -tip, xp);
        }
        if !unit {
            let d = t[i * n + i];
            for v in xi.iter_mut() {
                *v /= d;
            }
        }
    }
}

/// Solve Tᵀ Y = X in place, T lower triangular (so Tᵀ is upper).
/// Column-oriented back substitution that walks the rows of T (contiguous).
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
    for p in (0..n).rev() {
        let (head, rest) = x.split_at_mut(p * k);
        let yp = &mut rest[..k];
        let d = t[p * n + p];
        for v in yp.iter_mut() {
            *v /= d;
        }
        let trow = &t[p * n..p * n + p];
        for (&tpi, yi) in trow.iter().zip(head.chunks_exact_mut(k)) {
            axpy(yi, -tpi, yp);
        }
    }
}

/// Solve Tᵀ Y = X in place, T upper triangular (so Tᵀ is lower).
/// Column-oriented forward substitution that walks the rows of T.
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
    for p in 0..n {
        let (head, tail) = x.split_at_mut((p + 1) * k);
        let yp = &mut head[p * k..];
        let d = t[p * n + p];
        for v in yp.iter_mut() {
            *v /= d;
        }
        let trow = &t[p * n + p + 1..p * n + n];
        for (&tpi, yi) in trow.iter().zip(tail.chunks_exact_mut(k)) {
            axpy(yi, -tpi, yp);
        }
    }
}

// ---------------------------------------------------------------------------
// Cholesky
// ---------------------------------------------------------------------------

/// Lower Cholesky factor L of a symmetric positive-definite A: A = L Lᵀ.
/// Writes all n² entries of `l` (zeros above the diagonal).
///
/// Errors:
///  - "cholesky: matrix is not symmetric (A[i][j] != A[j][i])" for the first
///    pair (row-major, j > i) with |a_ij - a_ji| > 1e-10 max(|a_ij|, |a_ji|);
///    pairs involving NaN are skipped (NaN propagates).
///  - "cholesky: matrix is not positive definite (pivot j is d)" when a pivot
///    (before the square root) is <= 0. A NaN pivot propagates instead.
///
/// The factorization itself reads only the lower triangle.
pub fn cholesky(a: &[f64], n: usize, l: &mut [f64]) -> Result<()> {
    for i in 0..n {
        for j in i + 1..n {
            let x = a[i * n + j];
            let y = a[j * n + i];
            if x.is_nan() || y.is_nan() {
                continue;
            }
            // Written as `>` so that Inf vs Inf (difference NaN) is accepted.
            if (x - y).abs() > 1e-10 * x.abs().max(y.abs()) {
                return crate::fail!(
                    "cholesky: matrix is not symmetric (A[{i}][{j}] != A[{j}][{i}])"
                );
            }
        }
    }
    let l = &mut l[..n * n];
    l.fill(0.0);
    // Row-oriented (Cholesky–Banachiewicz): every inner loop is a dot product
    // of contiguous row prefixes. Rows are done four at a time: each load of
    // an earlier row j then serves four dot products, and the four rows'
    // dependency chains (L_ij needs L_i,<j) overlap.
    let mut i = 0;
    while i < n {
        let block = if n - i >= 4 { 4 } else { 1 };
        if block == 4 {
            let (done, rest) = l.split_at_mut(i * n);
            let (r0, rest) = rest.split_at_mut(n);
            let (r1, rest) = rest.split_at_mut(n);
            let (r2, r3) = rest.split_at_mut(n);
            for j in 0..i {
                let lj = &done[j * n..j * n + j];
                let d = dot4([&r0[..j], &r1[..j], &r2[..j], &r3[..j]], lj);
                // The reciprocal is off the rows' dependency chains; a
                // division there would sit on them.
                let r = 1.0 / done[j * n + j];
                r0[j] = (a[i * n + j] - d[0]) * r;
                r1[j] = (a[(i + 1) * n + j] - d[1]) * r;
                r2[j] = (a[(i + 2) * n + j] - d[2]) * r;
                r3[j] = (a[(i + 3) * n + j] - d[3]) * r;
            }
        }
        // Remaining columns of each row of the block, then its pivot.
        let first = if block == 4 { i } else { 0 };
        for row in i..i + block {
            let (done, rest) = l.split_at_mut(row * n);
            let lr = &mut rest[..n];
            for j in first..row {
                let lj = &done[j * n..j * n + j];
                lr[j] = (a[row * n + j] - dot(&lr[..j], lj)) * (1.0 / done[j * n + j]);
            }
            let d = a[row * n + row] - dot(&lr[..row], &lr[..row]);
            if d <= 0.0 {
                return crate::fail!(
                    "cholesky: matrix is not positive definite (pivot {row} is {})",
                    js_number(d)
                );
            }
            lr[row] = d.sqrt();
        }
        i += block;
    }
    Ok(())
}

/// Reverse mode of `cholesky`: given L and the adjoint Lbar of the output
/// (only Lbar's lower triangle, diagonal included, is read), ACCUMULATE into
/// `abar` the symmetrized adjoint ½(Φ + Φᵀ) of A, where Φ is the
/// lower-triangular adjoint of Murray (2016), unblocked reverse-mode
/// algorithm. `work` has n² entries of scratch.
///
/// This walks the row-oriented factorization of `cholesky` backwards:
/// for each output entry (in reverse order) the adjoint of its pre-division /
/// pre-sqrt value s is formed, and pushed back onto the L entries s was
/// computed from. Cost ≈ n³/3 multiply-adds.
pub fn cholesky_adjoint(l: &[f64], lbar: &[f64], n: usize, work: &mut [f64], abar: &mut [f64]) {
    let w = &mut work[..n * n];
    for i in 0..n {
        let row = &mut w[i * n..i * n + n];
        row[..=i].copy_from_slice(&lbar[i * n..i * n + i + 1]);
        row[i + 1..].fill(0.0);
    }
    for i in (0..n).rev() {
        let (head, rest) = w.split_at_mut(i * n);
        let wi = &mut rest[..n];
        let li = &l[i * n..i * n + n];

        // Diagonal: L_ii = sqrt(s), s = A_ii - Σ_{k<i} L_ik².
        let sbar = wi[i] / (2.0 * li[i]);
        wi[i] = sbar;
        axpy(&mut wi[..i], -2.0 * sbar, &li[..i]);

        // Off-diagonal, j = i-1 down to 0: L_ij = s / L_jj,
        // s = A_ij - Σ_{k<j} L_ik L_jk. Two j's per pass (j and j-1) so each
        // sweep over k reads and writes row i once for two updates.
        let mut j = i;
        while j >= 2 {
            j -= 2;
            let (j0, j1) = (j, j + 1); // process j1 first, then j0
            let (w_lo, w_hi) = head.split_at_mut(j1 * n);
            let w0 = &mut w_lo[j0 * n..j0 * n + j1];
            let w1 = &mut w_hi[..j1 + 1];
            let l0 = &l[j0 * n..j0 * n + j1];
            let l1 = &l[j1 * n..j1 * n + j1 + 1];

            let s1 = wi[j1] * (1.0 / l1[j1]);
            wi[j1] = s1;
            w1[j1] -= s1 * li[j1];
            wi[j0] -= s1 * l1[j0];
            w1[j0] -= s1 * li[j0];

            let s0 = wi[j0] * (1.0 / l0[j0]);
            wi[j0] = s0;
            w0[j0] -= s0 * li[j0];

            for ((((wik, w1k), w0k), &lik), (&l1k, &l0k)) in wi[..j0]
                .iter_mut()
                .zip(w1[..j0].iter_mut())
                .zip(w0[..j0].iter_mut())
                .zip(&li[..j0])
                .zip(l1[..j0].iter().zip(&l0[..j0]))
            {
                *wik = (*wik - s1 * l1k) - s0 * l0k;
                *w1k -= s1 * lik;
                *w0k -= s0 * lik;
            }
        }
        if j == 1 {
            // j = 0: nothing below it.
            let s0 = wi[0] / l[0];
            wi[0] = s0;
            head[0] -= s0 * li[0];
        }
    }
    // w now holds Φ (the adjoint of A's lower triangle); symmetrize.
    for i in 0..n {
        abar[i * n + i] += w[i * n + i];
        for j in 0..i {
            let h = 0.5 * w[i * n + j];
            abar[i * n + j] += h;
            abar[j * n + i] += h;
        }
    }
}

// ---------------------------------------------------------------------------
// Triangular solve
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// LU with partial pivoting
// ---------------------------------------------------------------------------

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
            let m = lu[p * n + i];
            let qi = q(i);
            for col in 0..k {
                y[qi * k + col] -= m * y[qp * k + col];
            }
        }
    }
    // Lᵀ W = Z (unit diagonal): backward, column-oriented over the rows of L.
    for p in (0..n).rev() {
        let qp = q(p);
        for i in 0..p {
            let m = lu[p * n + i];
            let qi = q(i);
            for col in 0..k {
                y[qi * k + col] -= m * y[qp * k + col];
            }
        }
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
            let bi = &bbar[i * k..i * k + k];
            for (aij, xj) in arow.iter_mut().zip(x[..n * k].chunks_exact(k)) {
                *aij -= dot(bi, xj);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small fixed-seed LCG producing values in [-1, 1).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> f64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        }
        fn fill(&mut self, len: usize) -> Vec<f64> {
            (0..len).map(|_| self.next()).collect()
        }
    }

    /// C = A B, A m×p, B p×q.
    fn matmul(a: &[f64], b: &[f64], m: usize, p: usize, q: usize) -> Vec<f64> {
        let mut c = vec![0.0; m * q];
        for i in 0..m {
            for r in 0..p {
                for j in 0..q {
                    c[i * q + j] += a[i * p + r] * b[r * q + j];
                }
            }
        }
        c
    }

    fn transpose(a: &[f64], m: usize, q: usize) -> Vec<f64> {
        let mut t = vec![0.0; m * q];
        for i in 0..m {
            for j in 0..q {
                t[j * m + i] = a[i * q + j];
            }
        }
        t
    }

    fn max_abs(a: &[f64]) -> f64 {
        a.iter().fold(0.0f64, |m, v| m.max(v.abs()))
    }

    fn max_diff(a: &[f64], b: &[f64]) -> f64 {
        assert_eq!(a.len(), b.len());
        a.iter().zip(b).fold(0.0f64, |m, (x, y)| m.max((x - y).abs()))
    }

    /// Random SPD matrix M Mᵀ + n I.
    fn random_spd(n: usize, rng: &mut Lcg) -> Vec<f64> {
        let m = rng.fill(n * n);
        let mut a = matmul(&m, &transpose(&m, n, n), n, n, n);
        for i in 0..n {
            a[i * n + i] += n as f64;
        }
        a
    }

    fn chol(a: &[f64], n: usize) -> Vec<f64> {
        let mut l = vec![f64::NAN; n * n];
        cholesky(a, n, &mut l).unwrap();
        l
    }

    /// Well-conditioned triangular matrix with garbage (NaN) in the other triangle.
    fn random_triangular(n: usize, lower: bool, rng: &mut Lcg) -> Vec<f64> {
        let mut t = vec![f64::NAN; n * n];
        for i in 0..n {
            for j in 0..n {
                let own = if lower { j <= i } else { j >= i };
                if own {
                    t[i * n + j] = 0.5 * rng.next();
                }
            }
            t[i * n + i] = 2.0 + rng.next().abs();
        }
        t
    }

    /// The triangle of T that the solver may read, with zeros elsewhere.
    fn masked(t: &[f64], n: usize, lower: bool) -> Vec<f64> {
        let mut m = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                if (lower && j <= i) || (!lower && j >= i) {
                    m[i * n + j] = t[i * n + j];
                }
            }
        }
        m
    }

    fn random_general(n: usize, rng: &mut Lcg) -> Vec<f64> {
        let mut a = rng.fill(n * n);
        for i in 0..n {
            a[i * n + i] += 1.5; // keep it comfortably nonsingular
        }
        a
    }

    // ----- Cholesky forward -------------------------------------------------

    #[test]
    fn cholesky_reconstructs() {
        let mut rng = Lcg(12345);
        for &n in &[1usize, 2, 5, 40] {
            let a = random_spd(n, &mut rng);
            let l = chol(&a, n);
            for i in 0..n {
                for j in i + 1..n {
                    assert_eq!(l[i * n + j], 0.0, "upper triangle must be zero");
                }
                assert!(l[i * n + i] > 0.0);
            }
            let llt = matmul(&l, &transpose(&l, n, n), n, n, n);
            assert!(max_diff(&llt, &a) <= 1e-13 * max_abs(&a), "n = {n}");
        }
        // 1×1 closed form, and the empty matrix.
        assert_eq!(chol(&[9.0], 1), vec![3.0]);
        let mut empty: [f64; 0] = [];
        assert!(cholesky(&[], 0, &mut empty).is_ok());
    }

    #[test]
    fn cholesky_ignores_upper_triangle_within_tolerance() {
        let mut rng = Lcg(7);
        let n = 6;
        let a = random_spd(n, &mut rng);
        let mut b = a.clone();
        for i in 0..n {
            for j in i + 1..n {
                b[i * n + j] *= 1.0 + 5e-11; // within the 1e-10 relative tolerance
            }
        }
        assert_eq!(chol(&a, n), chol(&b, n));
    }

    #[test]
    fn cholesky_symmetry_error() {
        let mut a = vec![
            4.0, 1.0, 0.5, 0.0, //
            1.0, 4.0, 1.0, 9.0, //
            0.7, 1.0, 4.0, 1.0, //
            0.0, 2.0, 1.0, 4.0,
        ];
        let mut l = vec![0.0; 16];
        let e = cholesky(&a, 4, &mut l).unwrap_err();
        assert_eq!(e.to_string(), "cholesky: matrix is not symmetric (A[0][2] != A[2][0])");
        a[8] = 0.5;
        let e = cholesky(&a, 4, &mut l).unwrap_err();
        assert_eq!(e.to_string(), "cholesky: matrix is not symmetric (A[1][3] != A[3][1])");
        // Symmetry is checked before positive-definiteness.
        let e = cholesky(&[-1.0, 2.0, 3.0, 1.0], 2, &mut l).unwrap_err();
        assert_eq!(e.0, "cholesky: matrix is not symmetric (A[0][1] != A[1][0])");
        // Relative tolerance: a 1e-9 relative difference is an error.
        let e = cholesky(&[2.0, 1.0, 1.0 + 1e-9, 2.0], 2, &mut l).unwrap_err();
        assert_eq!(e.0, "cholesky: matrix is not symmetric (A[0][1] != A[1][0])");
    }

    #[test]
    fn cholesky_not_positive_definite_error() {
        let mut l = vec![0.0; 9];
        let e = cholesky(&[1.0, 2.0, 2.0, 1.0], 2, &mut l).unwrap_err();
        assert_eq!(e.0, "cholesky: matrix is not positive definite (pivot 1 is -3)");
        let e = cholesky(&[-2.5], 1, &mut l).unwrap_err();
        assert_eq!(e.0, "cholesky: matrix is not positive definite (pivot 0 is -2.5)");
        let e = cholesky(&[0.0], 1, &mut l).unwrap_err();
        assert_eq!(e.0, "cholesky: matrix is not positive definite (pivot 0 is 0)");
        // Third pivot: [[1,0,0],[0,1,0],[0,0,-1e-20]].
        let a = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, -1e-20];
        let e = cholesky(&a, 3, &mut l).unwrap_err();
        assert_eq!(e.0, "cholesky: matrix is not positive definite (pivot 2 is -1e-20)");
        // Pivots inside and after a block of four rows.
        let mut l = vec![0.0; 36];
        for (bad, d) in [(1usize, 0.0), (2, -1.0), (3, -0.25), (4, -7.0), (5, -2.0)] {
            let n = 6;
            let mut a = vec![0.0; n * n];
            for i in 0..n {
                a[i * n + i] = 4.0;
            }
            // Row `bad` is 0.5 × row 0 in the leading 1×1 part, then a_bb = d + 1.
            a[bad * n] = 2.0;
            a[bad] = 2.0;
            a[bad * n + bad] = d + 1.0;
            let e = cholesky(&a, n, &mut l).unwrap_err();
            let want = format!(
                "cholesky: matrix is not positive definite (pivot {bad} is {})",
                js_number(d)
            );
            assert_eq!(e.0, want);
        }
    }

    #[test]
    fn cholesky_nan_propagates() {
        let mut rng = Lcg(99);
        let n = 4;
        let mut a = random_spd(n, &mut rng);
        a[n + 2] = f64::NAN; // A[1][2] NaN, A[2][1] finite: not a symmetry error
        let mut l = vec![0.0; n * n];
        cholesky(&a, n, &mut l).unwrap();
        // ... and the factorization reads only the lower triangle.
        assert!(l.iter().all(|v| v.is_finite()));
        // The factorization reads the lower triangle: NaN in the lower one.
        let mut a = random_spd(n, &mut rng);
        a[2 * n + 1] = f64::NAN;
        cholesky(&a, n, &mut l).unwrap();
        assert!(l[2 * n + 1].is_nan() && l[2 * n + 2].is_nan() && l[3 * n + 3].is_nan());
        // NaN on the diagonal: NaN pivot, no error.
        let mut a = random_spd(n, &mut rng);
        a[0] = f64::NAN;
        cholesky(&a, n, &mut l).unwrap();
        assert!(l[0].is_nan() && l[n * n - 1].is_nan());
        // Infinity entries do not panic either.
        let mut a = random_spd(n, &mut rng);
        a[1] = f64::INFINITY;
        a[n] = f64::INFINITY;
        let _ = cholesky(&a, n, &mut l);
    }

    // ----- Cholesky adjoint ------------------------------------------------

    fn weighted_chol(a: &[f64], n: usize, w: &[f64]) -> f64 {
        chol(a, n).iter().zip(w).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn cholesky_adjoint_matches_finite_differences() {
        let mut rng = Lcg(2024);
        for &n in &[1usize, 2, 5, 8] {
            let a = random_spd(n, &mut rng);
            let l = chol(&a, n);
            // W random lower; Lbar = W, with garbage in Lbar's upper triangle.
            let mut w = rng.fill(n * n);
            let mut lbar = w.clone();
            for i in 0..n {
                for j in i + 1..n {
                    w[i * n + j] = 0.0;
                    lbar[i * n + j] = 1e6 * rng.next();
                }
            }
            let mut work = vec![f64::NAN; n * n];
            let init = rng.fill(n * n);
            let mut abar = init.clone();
            cholesky_adjoint(&l, &lbar, n, &mut work, &mut abar);
            let g: Vec<f64> = abar.iter().zip(&init).map(|(x, y)| x - y).collect();
            // Symmetric result.
            for i in 0..n {
                for j in 0..i {
                    assert!((g[i * n + j] - g[j * n + i]).abs() <= 1e-15 * max_abs(&g));
                }
            }
            let h = 1e-5;
            let gscale = max_abs(&g);
            let mut worst = 0.0f64;
            for i in 0..n {
                for j in 0..=i {
                    let mut ap = a.clone();
                    let mut am = a.clone();
                    ap[i * n + j] += h;
                    am[i * n + j] -= h;
                    if i != j {
                        ap[j * n + i] += h;
                        am[j * n + i] -= h;
                    }
                    let fd = (weighted_chol(&ap, n, &w) - weighted_chol(&am, n, &w)) / (2.0 * h);
                    let an = if i == j { g[i * n + i] } else { g[i * n + j] + g[j * n + i] };
                    let err = (fd - an).abs() / an.abs().max(gscale);
                    worst = worst.max(err);
                }
            }
            assert!(worst <= 1e-7, "n = {n}: worst relative error {worst}");
        }
    }

    #[test]
    fn cholesky_adjoint_scalar_closed_form() {
        let a: f64 = 6.25;
        let l = [a.sqrt()];
        let mut work = [0.0];
        let mut abar = [1.0];
        cholesky_adjoint(&l, &[3.0], 1, &mut work, &mut abar);
        assert_eq!(abar[0], 1.0 + 3.0 / (2.0 * a.sqrt()));
    }

    #[test]
    fn cholesky_adjoint_of_log_det_is_inverse() {
        let mut rng = Lcg(31337);
        for &n in &[3usize, 12, 40] {
            let a = random_spd(n, &mut rng);
            let l = chol(&a, n);
            // f = 2 Σ log L_ii  =>  Lbar = diag(2 / L_ii)
            let mut lbar = vec![0.0; n * n];
            for i in 0..n {
                lbar[i * n + i] = 2.0 / l[i * n + i];
            }
            let mut work = vec![0.0; n * n];
            let mut abar = vec![0.0; n * n];
            cholesky_adjoint(&l, &lbar, n, &mut work, &mut abar);
            // abar == A⁻¹  <=>  abar A == I
            let prod = matmul(&abar, &a, n, n, n);
            let mut eye = vec![0.0; n * n];
            for i in 0..n {
                eye[i * n + i] = 1.0;
            }
            assert!(max_diff(&prod, &eye) <= 1e-10, "n = {n}: {}", max_diff(&prod, &eye));
        }
    }

    #[test]
    fn cholesky_adjoint_propagates_nan() {
        let mut rng = Lcg(5);
        let n = 4;
        let a = random_spd(n, &mut rng);
        let l = chol(&a, n);
        let mut lbar = vec![0.0; n * n];
        lbar[2 * n + 1] = f64::NAN;
        let mut work = vec![0.0; n * n];
        let mut abar = vec![0.0; n * n];
        cholesky_adjoint(&l, &lbar, n, &mut work, &mut abar);
        assert!(abar[2 * n + 1].is_nan() && abar[n + 2].is_nan());
    }

    // ----- Triangular solve --------------------------------------------------

    #[test]
    fn triangular_solve_satisfies_equation() {
        let mut rng = Lcg(77);
        for &lower in &[true, false] {
            for &k in &[1usize, 3] {
                let n = 7;
                let t = random_triangular(n, lower, &mut rng);
                let b = rng.fill(n * k);
                let mut x = vec![0.0; n * k];
                triangular_solve(&t, n, lower, &b, k, &mut x);
                assert!(x.iter().all(|v| v.is_finite()), "garbage triangle leaked");
                let tx = matmul(&masked(&t, n, lower), &x, n, n, k);
                assert!(max_diff(&tx, &b) <= 1e-14, "lower = {lower}, k = {k}");

                // A different garbage value gives bit-identical results.
                let mut t2 = t.clone();
                for i in 0..n {
                    for j in 0..n {
                        if (lower && j > i) || (!lower && j < i) {
                            t2[i * n + j] = 1e300;
                        }
                    }
                }
                let mut x2 = vec![0.0; n * k];
                triangular_solve(&t2, n, lower, &b, k, &mut x2);
                assert_eq!(x, x2);

                // bbar: Tᵀ Bbar == Xbar
                let xbar = rng.fill(n * k);
                let mut bbar = vec![f64::NAN; n * k];
                triangular_solve_bbar(&t, n, lower, &xbar, k, &mut bbar);
                let ttb = matmul(&transpose(&masked(&t, n, lower), n, n), &bbar, n, n, k);
                assert!(max_diff(&ttb, &xbar) <= 1e-14, "lower = {lower}, k = {k}");
                let mut bbar2 = vec![0.0; n * k];
                triangular_solve_bbar(&t2, n, lower, &xbar, k, &mut bbar2);
                assert_eq!(bbar, bbar2);
            }
        }
    }

    #[test]
    fn triangular_solve_adjoints_match_finite_differences() {
        let mut rng = Lcg(4242);
        for &lower in &[true, false] {
            for &k in &[1usize, 3] {
                let n = 6;
                let t = random_triangular(n, lower, &mut rng);
                let b = rng.fill(n * k);
                let w = rng.fill(n * k); // f = Σ W ∘ X
                let f = |t: &[f64], b: &[f64]| -> f64 {
                    let mut x = vec![0.0; n * k];
                    triangular_solve(t, n, lower, b, k, &mut x);
                    x.iter().zip(&w).map(|(p, q)| p * q).sum()
                };
                let mut x = vec![0.0; n * k];
                triangular_solve(&t, n, lower, &b, k, &mut x);
                let mut bbar = vec![0.0; n * k];
                triangular_solve_bbar(&t, n, lower, &w, k, &mut bbar);
                let mut tbar = vec![7.0; n * n];
                triangular_solve_tbar(n, lower, &bbar, &x, k, &mut tbar);

                let h = 1e-6;
                for idx in 0..n * k {
                    let mut bp = b.clone();
                    let mut bm = b.clone();
                    bp[idx] += h;
                    bm[idx] -= h;
                    let fd = (f(&t, &bp) - f(&t, &bm)) / (2.0 * h);
                    assert!((fd - bbar[idx]).abs() <= 1e-8 * bbar[idx].abs().max(1.0));
                }
                for i in 0..n {
                    for j in 0..n {
                        let own = if lower { j <= i } else { j >= i };
                        let got = tbar[i * n + j];
                        if !own {
                            assert_eq!(got, 7.0, "other triangle must be untouched");
                            continue;
                        }
                        let mut tp = t.clone();
                        let mut tm = t.clone();
                        tp[i * n + j] += h;
                        tm[i * n + j] -= h;
                        let fd = (f(&tp, &b) - f(&tm, &b)) / (2.0 * h);
                        let an = got - 7.0;
                        assert!(
                            (fd - an).abs() <= 1e-8 * an.abs().max(1.0),
                            "lower = {lower}, k = {k}, ({i},{j}): fd {fd} vs {an}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn triangular_solve_zero_pivot_gives_non_finite() {
        let t = [1.0, 0.0, 2.0, 0.0]; // lower, T[1][1] = 0
        let mut x = [0.0; 2];
        triangular_solve(&t, 2, true, &[1.0, 1.0], 1, &mut x);
        assert_eq!(x[0], 1.0);
        assert_eq!(x[1], f64::NEG_INFINITY);
        triangular_solve(&t, 2, true, &[1.0, 2.0], 1, &mut x);
        assert!(x[1].is_nan()); // 0 / 0
        let mut y = [0.0; 2];
        triangular_solve_bbar(&t, 2, true, &[1.0, 1.0], 1, &mut y);
        assert!(!y[1].is_finite());
    }

    // ----- LU ----------------------------------------------------------------

    fn lu_of(a: &[f64], n: usize) -> (Vec<f64>, Vec<f64>) {
        let mut lu = vec![f64::NAN; n * n];
        let mut perm = vec![f64::NAN; n];
        lu_factor(a, n, &mut lu, &mut perm).unwrap();
        (lu, perm)
    }

    fn check_lu_solves(a: &[f64], n: usize, rng: &mut Lcg) {
        let (lu, perm) = lu_of(a, n);
        // perm is a permutation of 0..n.
        let mut seen = vec![false; n];
        for &p in &perm {
            assert_eq!(p.fract(), 0.0);
            seen[p as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        // P A == L U
        let mut l = vec![0.0; n * n];
        let mut u = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                if j < i {
                    l[i * n + j] = lu[i * n + j];
                } else {
                    u[i * n + j] = lu[i * n + j];
                }
            }
            l[i * n + i] = 1.0;
        }
        let mut pa = vec![0.0; n * n];
        for i in 0..n {
            let p = perm[i] as usize;
            pa[i * n..i * n + n].copy_from_slice(&a[p * n..p * n + n]);
        }
        let scale = max_abs(a);
        assert!(max_diff(&matmul(&l, &u, n, n, n), &pa) <= 1e-14 * scale * n as f64);
        let at = transpose(a, n, n);
        for &k in &[1usize, 3] {
            let b = rng.fill(n * k);
            let mut x = vec![f64::NAN; n * k];
            lu_solve(&lu, &perm, n, &b, k, &mut x);
            assert!(max_diff(&matmul(a, &x, n, n, k), &b) <= 1e-12, "A X == B, n = {n}, k = {k}");
            let c = rng.fill(n * k);
            let mut y = vec![f64::NAN; n * k];
            lu_solve_transpose(&lu, &perm, n, &c, k, &mut y);
            assert!(max_diff(&matmul(&at, &y, n, n, k), &c) <= 1e-12, "Aᵀ Y == C, n = {n}, k = {k}");
        }
    }

    #[test]
    fn lu_solves_random_matrices() {
        let mut rng = Lcg(8675309);
        for &n in &[1usize, 2, 6, 25] {
            let a = random_general(n, &mut rng);
            check_lu_solves(&a, n, &mut rng);
        }
    }

    #[test]
    fn lu_solves_matrices_needing_pivoting() {
        let mut rng = Lcg(11);
        let a = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 9.0];
        check_lu_solves(&a, 3, &mut rng);
        let (_, perm) = lu_of(&a, 3);
        assert_eq!(perm[0], 2.0, "largest pivot chosen");
        // A pure permutation matrix (a 4-cycle) and an anti-diagonal one.
        let p4 = [
            0.0, 1.0, 0.0, 0.0, //
            0.0, 0.0, 1.0, 0.0, //
            0.0, 0.0, 0.0, 1.0, //
            1.0, 0.0, 0.0, 0.0,
        ];
        check_lu_solves(&p4, 4, &mut rng);
        let anti = [0.0, 0.0, 2.0, 0.0, 3.0, 0.0, 5.0, 0.0, 0.0];
        check_lu_solves(&anti, 3, &mut rng);
        // Random matrix with a zero first column head and tiny diagonal.
        let n = 8;
        let mut a = rng.fill(n * n);
        for i in 0..n {
            a[i * n + i] *= 1e-3;
        }
        a[0] = 0.0;
        check_lu_solves(&a, n, &mut rng);
    }

    #[test]
    fn lu_singular_error() {
        let msg = "solve: matrix is singular (pivot below tolerance)";
        let mut lu = vec![0.0; 9];
        let mut perm = vec![0.0; 3];
        let e = lu_factor(&[1.0, 2.0, 2.0, 4.0], 2, &mut lu, &mut perm).unwrap_err();
        assert_eq!(e.0, msg);
        let e = lu_factor(&[0.0; 9], 3, &mut lu, &mut perm).unwrap_err();
        assert_eq!(e.0, msg);
        let e = lu_factor(&[0.0], 1, &mut lu, &mut perm).unwrap_err();
        assert_eq!(e.0, msg);
        // Rank 2 in 3×3: third row = first + second.
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 5.0, 7.0, 9.0];
        let e = lu_factor(&a, 3, &mut lu, &mut perm).unwrap_err();
        assert_eq!(e.0, msg);
        // Nearly singular but above tolerance: fine.
        assert!(lu_factor(&[1.0, 1.0, 1.0, 1.0 + 1e-10], 2, &mut lu, &mut perm).is_ok());
        // Empty matrix: nothing to do.
        assert!(lu_factor(&[], 0, &mut [], &mut []).is_ok());
    }

    #[test]
    fn lu_nan_and_inf_propagate() {
        let n = 3;
        let mut lu = vec![0.0; n * n];
        let mut perm = vec![0.0; n];
        let mut x = vec![0.0; n];
        // NaN as the would-be pivot.
        let a = [f64::NAN, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 9.0];
        lu_factor(&a, n, &mut lu, &mut perm).unwrap();
        lu_solve(&lu, &perm, n, &[1.0, 2.0, 3.0], 1, &mut x);
        assert!(x.iter().any(|v| v.is_nan()));
        lu_solve_transpose(&lu, &perm, n, &[1.0, 2.0, 3.0], 1, &mut x);
        assert!(x.iter().any(|v| v.is_nan()));
        // A whole NaN column.
        let a = [f64::NAN, 1.0, 0.0, f64::NAN, 0.0, 1.0, f64::NAN, 2.0, 2.0];
        lu_factor(&a, n, &mut lu, &mut perm).unwrap();
        lu_solve(&lu, &perm, n, &[1.0, 2.0, 3.0], 1, &mut x);
        assert!(x.iter().all(|v| v.is_nan()));
        // Infinity entries propagate too (max|A| is over finite entries).
        let a = [f64::INFINITY, 1.0, 0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 1.0];
        lu_factor(&a, n, &mut lu, &mut perm).unwrap();
        lu_solve(&lu, &perm, n, &[1.0, 2.0, 3.0], 1, &mut x);
        assert_eq!(x[2], 3.0);
        // Garbage permutation: NaN output, no panic.
        let bad_perm = [0.0, 7.0, f64::NAN];
        lu_solve(&lu, &bad_perm, n, &[1.0, 2.0, 3.0], 1, &mut x);
        assert!(x[1].is_nan());
        lu_solve_transpose(&lu, &bad_perm, n, &[1.0, 2.0, 3.0], 1, &mut x);
        assert!(x.iter().all(|v| v.is_nan()));
    }

    #[test]
    fn lu_adjoint_matches_finite_differences() {
        let mut rng = Lcg(555);
        for &k in &[1usize, 3] {
            let n = 5;
            // A well-conditioned matrix with its rows rotated (so pivoting is
            // needed) and a zero at [0][0].
            let d = random_general(n, &mut rng);
            let mut a = vec![0.0; n * n];
            for i in 0..n {
                let src = (i + 1) % n;
                a[i * n..i * n + n].copy_from_slice(&d[src * n..src * n + n]);
            }
            a[0] = 0.0;
            let b = rng.fill(n * k);
            let w = rng.fill(n * k); // f = Σ W ∘ (A⁻¹ B)
            let f = |a: &[f64], b: &[f64]| -> f64 {
                let (lu, perm) = lu_of(a, n);
                let mut x = vec![0.0; n * k];
                lu_solve(&lu, &perm, n, b, k, &mut x);
                x.iter().zip(&w).map(|(p, q)| p * q).sum()
            };
            let (lu, perm) = lu_of(&a, n);
            let mut x = vec![0.0; n * k];
            lu_solve(&lu, &perm, n, &b, k, &mut x);
            let mut bbar = vec![0.0; n * k];
            lu_solve_transpose(&lu, &perm, n, &w, k, &mut bbar);
            let init = rng.fill(n * n);
            let mut abar = init.clone();
            sub_outer(n, &bbar, &x, k, &mut abar);
            let h = 1e-6;
            for idx in 0..n * k {
                let mut bp = b.clone();
                let mut bm = b.clone();
                bp[idx] += h;
                bm[idx] -= h;
                let fd = (f(&a, &bp) - f(&a, &bm)) / (2.0 * h);
                assert!((fd - bbar[idx]).abs() <= 1e-7 * bbar[idx].abs().max(1.0), "k = {k}, B[{idx}]");
            }
            for idx in 0..n * n {
                let mut ap = a.clone();
                let mut am = a.clone();
                ap[idx] += h;
                am[idx] -= h;
                let fd = (f(&ap, &b) - f(&am, &b)) / (2.0 * h);
                let an = abar[idx] - init[idx];
                assert!((fd - an).abs() <= 1e-7 * an.abs().max(1.0), "k = {k}, A[{idx}]: fd {fd} vs {an}");
            }
        }
    }

    #[test]
    fn sub_outer_accumulates() {
        let n = 2;
        let k = 2;
        let bbar = [1.0, 2.0, 3.0, 4.0];
        let x = [5.0, 6.0, 7.0, 8.0];
        let mut abar = [1.0; 4];
        sub_outer(n, &bbar, &x, k, &mut abar);
        // bbar xᵀ = [[17, 23], [39, 53]]
        assert_eq!(abar, [-16.0, -22.0, -38.0, -52.0]);
        let mut abar1 = [0.0; 4];
        sub_outer(2, &[1.0, 2.0], &[3.0, 4.0], 1, &mut abar1);
        assert_eq!(abar1, [-3.0, -4.0, -6.0, -8.0]);
    }

    #[test]
    #[ignore]
    fn timing_cholesky_200() {
        use std::time::Instant;
        let n = 200;
        let mut rng = Lcg(1);
        let a = random_spd(n, &mut rng);
        let lbar = rng.fill(n * n);
        let mut l = vec![0.0; n * n];
        let mut work = vec![0.0; n * n];
        let mut abar = vec![0.0; n * n];
        let reps = 400;
        let mut best_f = f64::INFINITY;
        let mut best_b = f64::INFINITY;
        for _ in 0..reps {
            let t0 = Instant::now();
            cholesky(&a, n, &mut l).unwrap();
            let t1 = Instant::now();
            cholesky_adjoint(&l, &lbar, n, &mut work, &mut abar);
            let t2 = Instant::now();
            best_f = best_f.min((t1 - t0).as_secs_f64());
            best_b = best_b.min((t2 - t1).as_secs_f64());
        }
        // Symmetry check alone: a non-symmetric last entry makes cholesky fail
        // right after the full check.
        let mut bad = a.clone();
        bad[n * n - 2] += 1.0;
        let mut best_c = f64::INFINITY;
        for _ in 0..reps {
            let t0 = Instant::now();
            assert!(cholesky(&bad, n, &mut l).is_err());
            best_c = best_c.min(t0.elapsed().as_secs_f64());
        }
        println!("n = {n}: symmetry check {:.3} ms", best_c * 1e3);
        println!(
            "n = {n}: cholesky {:.3} ms, adjoint {:.3} ms, total {:.3} ms (best of {reps})",
            best_f * 1e3,
            best_b * 1e3,
            (best_f + best_b) * 1e3
        );
        assert!(abar.iter().all(|v| v.is_finite()));
    }
}
