//! Cholesky factorization and its adjoint, hand-written on row-major slices.

use super::{axpy, dot, dot4};
use crate::core::error::{js_number, Result};
use super::parallel;

/// Whether a_ij and a_ji differ: |a_ij - a_ji| > 1e-10 max(|a_ij|, |a_ji|),
/// written as `>` so that Inf against Inf (difference NaN) is accepted; a
/// pair involving NaN never differs (NaN propagates instead). The larger
/// magnitude by a comparison, not `f64::max`, which WebAssembly calls
/// `fmax` for (2% of a compiled GP's gradient there); either way the
/// same for a pair without NaN, and a pair with one is decided after.
/// Branch-free (`&`, not `&&`), so that a loop of it vectorizes.
#[inline(always)]
fn differ(x: f64, y: f64) -> bool {
    let (ax, ay) = (x.abs(), y.abs());
    ((x - y).abs() > 1e-10 * if ax >= ay { ax } else { ay }) & !x.is_nan() & !y.is_nan()
}

/// From this order `asymmetry` asks `symmetric` first, and walks the pairs
/// one by one only to name the first that differs.
const TILED_CHECK_FROM: usize = 32;

/// The first pair (row-major, j > i) that `differ`s.
pub(super) fn asymmetry(a: &[f64], n: usize) -> Option<(usize, usize)> {
    if n >= TILED_CHECK_FROM && symmetric(a, n) {
        return None;
    }
    first_differing(a, n)
}

/// `asymmetry` pair by pair.
pub(super) fn first_differing(a: &[f64], n: usize) -> Option<(usize, usize)> {
    for i in 0..n {
        for j in i + 1..n {
            if differ(a[i * n + j], a[j * n + i]) {
                return Some((i, j));
            }
        }
    }
    None
}

/// Whether `first_differing` finds no pair, by 16×16 tiles above the diagonal
/// and their mirrors below (the plain walk's strided side took a cache
/// line per entry), the tiles' rows dealt out in turn to the threads (an
/// equal band of rows each would leave the first most of the triangle).
/// Each mirror is copied transposed into a block on the stack first, so
/// that a tile's rows and the block's compare in vector registers: read
/// across, pair by pair, the check took 5.8 ns a pair at n = 2000, 8% of
/// a GP's gradient.
pub(super) fn symmetric(a: &[f64], n: usize) -> bool {
    const TILE: usize = 16;
    parallel::all_parts(n * n, n, |part, parts| {
        let mut mirror = [[0.0f64; TILE]; TILE];
        for i0 in (part * TILE..n).step_by(parts * TILE) {
            let rows = TILE.min(n - i0);
            for j0 in (i0..n).step_by(TILE) {
                let cols = TILE.min(n - j0);
                // mirror[r][c] = A[j0 + c][i0 + r], the entry paired with A[i0 + r][j0 + c].
                for c in 0..cols {
                    for (r, &x) in a[(j0 + c) * n + i0..][..rows].iter().enumerate() {
                        mirror[r][c] = x;
                    }
                }
                let mut any = false;
                for (r, m) in mirror.iter().enumerate().take(rows) {
                    // Only j > i: on the diagonal tile (rows = cols), the columns past r.
                    let from = if j0 == i0 { r + 1 } else { 0 };
                    let row = &a[(i0 + r) * n + j0..][..cols];
                    for (&x, &y) in row[from..].iter().zip(&m[from..cols]) {
                        any |= differ(x, y);
                    }
                }
                if any {
                    return false;
                }
            }
        }
        true
    })
}

/// Lower Cholesky factor L of a symmetric positive-definite A: A = L Lᵀ.
/// Writes all n² entries of `l` (zeros above the diagonal).
///
/// Errors:
///  - "cholesky: matrix is not symmetric (A[i][j] != A[j][i])" for the pair
///    `asymmetry` finds.
///  - "cholesky: matrix is not positive definite (pivot j is d)" when a pivot
///    (before the square root) is <= 0. A NaN pivot propagates instead.
///
/// The factorization itself reads only the lower triangle.
pub fn cholesky(a: &[f64], n: usize, l: &mut [f64]) -> Result<()> {
    if let Some((i, j)) = asymmetry(a, n) {
        return crate::fail!("cholesky: matrix is not symmetric (A[{i}][{j}] != A[{j}][{i}])");
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
/// `abar` (or with `assign`, write as `add_symmetrized` does) the
/// symmetrized adjoint ½(Φ + Φᵀ) of A, where Φ is the
/// lower-triangular adjoint of Murray (2016), unblocked reverse-mode
/// algorithm. `work` has n² entries of scratch.
///
/// This walks the row-oriented factorization of `cholesky` backwards:
/// for each output entry (in reverse order) the adjoint of its pre-division /
/// pre-sqrt value s is formed, and pushed back onto the L entries s was
/// computed from. Cost ≈ n³/3 multiply-adds.
pub fn cholesky_adjoint(l: &[f64], lbar: &[f64], n: usize, work: &mut [f64], abar: &mut [f64], assign: bool) {
    let w = lower_triangle(lbar, n, work);
    reverse_sweep(l, w, n);
    add_symmetrized(w, n, abar, assign);
}

/// `work`'s first n² entries set to L̄'s lower triangle, zeros above: where
/// each Cholesky adjoint kernel starts.
pub(super) fn lower_triangle<'w>(lbar: &[f64], n: usize, work: &'w mut [f64]) -> &'w mut [f64] {
    let w = &mut work[..n * n];
    parallel::rows(w, n, |r0, band| {
        for (r, row) in band.chunks_exact_mut(n).enumerate() {
            let i = r0 + r;
            row[..=i].copy_from_slice(&lbar[i * n..i * n + i + 1]);
            row[i + 1..].fill(0.0);
        }
    });
    w
}

/// Ā += sym(Φ) for Φ (the adjoint of A's lower triangle) in `w`'s lower
/// triangle: Φ_ii on the diagonal, Φ_ij/2 on both sides of it; with
/// `assign` (Ā fresh: `kernels::FirstWrites`), Ā = 0 + sym(Φ), those bits
/// without reading Ā. Ā by bands of rows (on several threads when large):
/// a row's part left of the diagonal reads its own row of `w`, the part
/// right of it a column, by 16×16 tiles for the strided side's cache
/// lines. One add per entry, so neither the order nor the split changes
/// the bits.
pub(super) fn add_symmetrized(w: &[f64], n: usize, abar: &mut [f64], assign: bool) {
    if assign {
        symmetrized::<true>(w, n, abar)
    } else {
        symmetrized::<false>(w, n, abar)
    }
}

fn symmetrized<const ASSIGN: bool>(w: &[f64], n: usize, abar: &mut [f64]) {
    const TILE: usize = 16;
    let put = |a: &mut f64, term: f64| *a = if ASSIGN { 0.0 } else { *a } + term;
    parallel::rows(&mut abar[..n * n], n, |r0, band| {
        let r1 = r0 + band.len() / n;
        for (r, row) in band.chunks_exact_mut(n).enumerate() {
            let i = r0 + r;
            for (a, &x) in row[..i].iter_mut().zip(&w[i * n..i * n + i]) {
                put(a, 0.5 * x);
            }
            put(&mut row[i], w[i * n + i]);
        }
        for i0 in (r0..r1).step_by(TILE) {
            for j0 in (i0..n).step_by(TILE) {
                for i in i0..(i0 + TILE).min(r1) {
                    let row = &mut band[(i - r0) * n..(i - r0 + 1) * n];
                    for j in j0.max(i + 1)..(j0 + TILE).min(n) {
                        put(&mut row[j], 0.5 * w[j * n + i]);
                    }
                }
            }
        }
    });
}

/// L̄ → Φ in place: `w` holds L̄'s lower triangle (zeros above) and leaves
/// with the adjoint of A's lower triangle, the upper still zero. The
/// reference: what runs is its twin `simd::reverse_sweep`, the same bits
/// three rows at a time (tests/wasm_simd.rs), alone below faer's order and
/// on each diagonal block of the blocked adjoint (`faer.rs`).
pub(super) fn reverse_sweep(l: &[f64], w: &mut [f64], n: usize) {
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
}
