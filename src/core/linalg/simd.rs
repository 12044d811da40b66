//! Two-lane (f64x2) twins of the hand-written kernels, which the
//! WebAssembly module runs when it is built with `simd128`
//! (`npm/build-wasm.mjs`), each tested against its hand-written kernel.
//! Natively the Cholesky adjoint's sweep runs here too (`reverse_sweep`):
//! its three rows at a time keep three chains of dependent steps in
//! flight, where the scalar kernel waits on one (n = 50: 8.6 → 6.7 µs;
//! compiled for AVX-512 by `widest!` it took 7.5).
//!
//! Every result is the hand-written kernel's bit for bit: the lanes run
//! across independent outputs (two adjacent entries of a row, or a dot
//! product's partial sums, which the scalar code already keeps apart), never
//! across the terms of one sum, so each entry sees the same IEEE operations
//! in the same order. WebAssembly has no fused multiply-add in `simd128`, and
//! `F2` below has none either.

use super::{axpy, dot};
use crate::core::error::Result;

/// Two f64 lanes: WebAssembly's `v128` where `simd128` is on, else a pair
/// (the same arithmetic, one lane at a time: what the native tests run).
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod f2 {
    use core::arch::wasm32::*;

    #[derive(Clone, Copy)]
    pub struct F2(v128);

    #[inline(always)]
    pub fn load(x: &[f64]) -> F2 {
        assert!(x.len() >= 2);
        // SAFETY: two f64 in bounds; v128.load takes any alignment.
        F2(unsafe { v128_load(x.as_ptr() as *const v128) })
    }
    #[inline(always)]
    pub fn store(x: &mut [f64], v: F2) {
        assert!(x.len() >= 2);
        // SAFETY: as `load`.
        unsafe { v128_store(x.as_mut_ptr() as *mut v128, v.0) }
    }
    #[inline(always)]
    pub fn splat(s: f64) -> F2 {
        F2(f64x2_splat(s))
    }
    #[inline(always)]
    pub fn add(a: F2, b: F2) -> F2 {
        F2(f64x2_add(a.0, b.0))
    }
    #[inline(always)]
    pub fn sub(a: F2, b: F2) -> F2 {
        F2(f64x2_sub(a.0, b.0))
    }
    #[inline(always)]
    pub fn mul(a: F2, b: F2) -> F2 {
        F2(f64x2_mul(a.0, b.0))
    }
    #[inline(always)]
    pub fn lanes(v: F2) -> [f64; 2] {
        [f64x2_extract_lane::<0>(v.0), f64x2_extract_lane::<1>(v.0)]
    }
}

#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
mod f2 {
    #[derive(Clone, Copy)]
    pub struct F2([f64; 2]);

    #[inline(always)]
    pub fn load(x: &[f64]) -> F2 {
        F2([x[0], x[1]])
    }
    #[inline(always)]
    pub fn store(x: &mut [f64], v: F2) {
        x[..2].copy_from_slice(&v.0);
    }
    #[inline(always)]
    pub fn splat(s: f64) -> F2 {
        F2([s, s])
    }
    #[inline(always)]
    pub fn add(a: F2, b: F2) -> F2 {
        F2([a.0[0] + b.0[0], a.0[1] + b.0[1]])
    }
    #[inline(always)]
    pub fn sub(a: F2, b: F2) -> F2 {
        F2([a.0[0] - b.0[0], a.0[1] - b.0[1]])
    }
    #[inline(always)]
    pub fn mul(a: F2, b: F2) -> F2 {
        F2([a.0[0] * b.0[0], a.0[1] * b.0[1]])
    }
    #[inline(always)]
    pub fn lanes(v: F2) -> [f64; 2] {
        v.0
    }
}

use f2::{add, lanes, load, mul, splat, store, sub};

/// y[k] -= s x[k] over the common length, two entries at a time.
#[inline(always)]
fn sub_scaled(y: &mut [f64], s: f64, x: &[f64]) {
    let m = y.len().min(x.len());
    let (y, x) = (&mut y[..m], &x[..m]);
    let sv = splat(s);
    let mut ys = y.chunks_exact_mut(2);
    let mut xs = x.chunks_exact(2);
    for (yk, xk) in (&mut ys).zip(&mut xs) {
        store(yk, sub(load(yk), mul(sv, load(xk))));
    }
    for (yk, &xk) in ys.into_remainder().iter_mut().zip(xs.remainder()) {
        *yk -= s * xk;
    }
}

/// y[k] += s x[k] (the hand-written `axpy`), two entries at a time.
#[inline(always)]
fn add_scaled(y: &mut [f64], s: f64, x: &[f64]) {
    let m = y.len().min(x.len());
    let (y, x) = (&mut y[..m], &x[..m]);
    let sv = splat(s);
    let mut ys = y.chunks_exact_mut(2);
    let mut xs = x.chunks_exact(2);
    for (yk, xk) in (&mut ys).zip(&mut xs) {
        store(yk, add(load(yk), mul(sv, load(xk))));
    }
    axpy(ys.into_remainder(), s, xs.remainder());
}

// ---------------------------------------------------------------------------
// Cholesky
// ---------------------------------------------------------------------------

/// The hand-written `dot4` (four partial sums per product, k mod 4) with
/// the partial sums in two lane pairs, {0, 1} and {2, 3}, for `R` rows.
#[inline(always)]
fn dot_rows<const R: usize>(rows: [&[f64]; R], c: &[f64]) -> [f64; R] {
    let m = rows.iter().fold(c.len(), |m, r| m.min(r.len()));
    let c = &c[..m];
    let rows = rows.map(|r| &r[..m]);
    let full = m - m % 4;
    let mut lo = [splat(0.0); R];
    let mut hi = [splat(0.0); R];
    let mut k = 0;
    while k < full {
        let (z0, z1) = (load(&c[k..k + 2]), load(&c[k + 2..k + 4]));
        for r in 0..R {
            lo[r] = add(lo[r], mul(load(&rows[r][k..k + 2]), z0));
            hi[r] = add(hi[r], mul(load(&rows[r][k + 2..k + 4]), z1));
        }
        k += 4;
    }
    std::array::from_fn(|r| {
        let ([s0, s1], [s2, s3]) = (lanes(lo[r]), lanes(hi[r]));
        let mut t = (s0 + s1) + (s2 + s3);
        for k in full..m {
            t += rows[r][k] * c[k];
        }
        t
    })
}

/// `cholesky::cholesky` bit for bit: four rows at a time, as there, each
/// dot product's four partial sums in two lane pairs. (Eight rows at a time
/// spilled V8's sixteen vector registers and ran no faster.) Where the scalar kernel fails (an asymmetric A, a pivot that is not
/// positive) it is called to say so, word for word.
pub fn cholesky(a: &[f64], n: usize, l: &mut [f64]) -> Result<()> {
    if super::cholesky::asymmetry(a, n).is_none() && factor(a, n, l) {
        return Ok(());
    }
    super::cholesky::cholesky(a, n, l)
}

/// The factorization of a symmetric A; false at a pivot that is not positive.
fn factor(a: &[f64], n: usize, l: &mut [f64]) -> bool {
    let l = &mut l[..n * n];
    l.fill(0.0);
    let mut i = 0;
    while i < n {
        let block = if n - i >= 4 { 4 } else { 1 };
        if block == 4 {
            let (done, rest) = l.split_at_mut(i * n);
            let rest = &mut rest[..4 * n];
            for j in 0..i {
                let lj = &done[j * n..j * n + j];
                let r = 1.0 / done[j * n + j];
                let d = dot_rows::<4>(std::array::from_fn(|q| &rest[q * n..q * n + j]), lj);
                for (q, dq) in d.iter().enumerate() {
                    rest[q * n + j] = (a[(i + q) * n + j] - dq) * r;
                }
            }
        }
        if !finish_rows(a, n, l, i, block) {
            return false;
        }
        i += block;
    }
    true
}

/// Rows i..i + block of L, whose entries left of column i a block of
/// several rows has (else none): the rest of each row one entry at a time,
/// as the hand-written kernel takes them, then its pivot; false at a pivot
/// that is not positive.
#[inline(always)]
fn finish_rows(a: &[f64], n: usize, l: &mut [f64], i: usize, block: usize) -> bool {
    let first = if block > 1 { i } else { 0 };
    for row in i..i + block {
        let (done, rest) = l.split_at_mut(row * n);
        let lr = &mut rest[..n];
        for j in first..row {
            lr[j] = (a[row * n + j] - dot(&lr[..j], &done[j * n..j * n + j])) * (1.0 / done[j * n + j]);
        }
        let d = a[row * n + row] - dot(&lr[..row], &lr[..row]);
        if d <= 0.0 {
            return false;
        }
        lr[row] = d.sqrt();
    }
    true
}

/// The factorization of large orders under WebAssembly, in both of its
/// builds (`library::TILED_FROM`): with `simd128` or without, `F2` gives the
/// same bits, but not the hand-written kernel's, whose order it does not
/// keep. Each block of four rows takes its entries two columns at a time,
/// the eight dot products together, two terms at a time in the lanes (a
/// column's sum then takes its few terms past the pair's common length):
/// the four-row kernel's loads of a row of L serve two columns. 1.45× it at
/// n = 200 in V8 (323 → 223 µs); 3×3 and 2×4 tiles were 5% slower, 4×3 3%.
/// False where A is not finite, not symmetric, or a pivot is not positive:
/// the hand-written kernel then decides (and says why).
pub fn tiled_cholesky(a: &[f64], n: usize, l: &mut [f64]) -> bool {
    const ROWS: usize = 4;
    const COLS: usize = 2;
    if !a[..n * n].iter().all(|x| x.is_finite()) || super::cholesky::asymmetry(a, n).is_some() {
        return false;
    }
    let l = &mut l[..n * n];
    l.fill(0.0);
    let mut i = 0;
    while i < n {
        let block = if n - i >= ROWS { ROWS } else { 1 };
        if block == ROWS {
            let (done, rest) = l.split_at_mut(i * n);
            let rest = &mut rest[..ROWS * n];
            let mut j = 0;
            while j < i {
                let cols = COLS.min(i - j);
                let s = if cols == COLS {
                    tile::<ROWS, COLS>(std::array::from_fn(|q| &rest[q * n..q * n + j]), std::array::from_fn(|c| &done[(j + c) * n..(j + c) * n + j]), j)
                } else {
                    tile::<ROWS, 1>(std::array::from_fn(|q| &rest[q * n..q * n + j]), [&done[j * n..j * n + j]], j).map(|[x]| [x, 0.0])
                };
                for (q, sq) in s.iter().enumerate() {
                    for (c, &sum) in sq.iter().enumerate().take(cols) {
                        let jc = j + c;
                        // The terms from j on, which the pair's common length left out.
                        let t = (j..jc).fold(sum, |t, k| t + rest[q * n + k] * done[jc * n + k]);
                        rest[q * n + jc] = (a[(i + q) * n + jc] - t) * (1.0 / done[jc * n + jc]);
                    }
                }
                j += cols;
            }
        }
        if !finish_rows(a, n, l, i, block) {
            return false;
        }
        i += block;
    }
    true
}

/// The `R`×`C` dot products of `rows` with `cols` over their first `m`
/// values: two terms at a time in the lanes, then the lanes' sum, then the
/// last term of an odd `m`.
#[inline(always)]
fn tile<const R: usize, const C: usize>(rows: [&[f64]; R], cols: [&[f64]; C], m: usize) -> [[f64; C]; R] {
    let rows = rows.map(|r| &r[..m]);
    let cols = cols.map(|c| &c[..m]);
    let pairs = m - m % 2;
    let mut acc = [[splat(0.0); C]; R];
    let mut k = 0;
    while k < pairs {
        let cv: [_; C] = std::array::from_fn(|c| load(&cols[c][k..k + 2]));
        for (r, row) in rows.iter().enumerate() {
            let x = load(&row[k..k + 2]);
            for (c, &y) in cv.iter().enumerate() {
                acc[r][c] = add(acc[r][c], mul(x, y));
            }
        }
        k += 2;
    }
    std::array::from_fn(|r| {
        std::array::from_fn(|c| {
            let [s0, s1] = lanes(acc[r][c]);
            let t = s0 + s1;
            if pairs < m {
                t + rows[r][pairs] * cols[c][pairs]
            } else {
                t
            }
        })
    })
}

/// `cholesky::cholesky_adjoint` bit for bit, blocked for the cache and for
/// the steps' latency.
///
/// The scalar kernel, row i from the bottom: the pivot's step (s̄ = W_ii /
/// 2L_ii, W_i,<i += −2s̄ L_i,<i), then for j from i − 1 down to 0: s =
/// W_ij · (1/L_jj) (W_i0 / L_00 when i is odd: its pairs of j leave 0
/// alone), W_ij = s, W_i,<j −= s L_j,<j, W_j,≤j −= s L_i,≤j. Row i reads
/// every earlier row of W and L once, so the kernel streams the whole
/// lower triangle per row. Here `ROWS` rows i take each sweep together and
/// `COLS` j's at a time: an entry of W still receives its updates in the
/// scalar order (falling j for row i's own entries, falling i for W_j's),
/// each rounded once, but the triangle is streamed once per `ROWS` rows
/// and row i's entries once per `COLS` j's. (3 and 2 measured a few percent
/// faster than 2 and 2, 2 and 4, or 4 and 1 at n = 200; more would spill
/// V8's sixteen vector registers.)
pub fn cholesky_adjoint(l: &[f64], lbar: &[f64], n: usize, work: &mut [f64], abar: &mut [f64], assign: bool) {
    let w = super::cholesky::lower_triangle(lbar, n, work);
    reverse_sweep(l, w, n);
    super::cholesky::add_symmetrized(w, n, abar, assign);
}

/// `cholesky::reverse_sweep` bit for bit (L̄'s lower triangle in `w` → Φ),
/// by the blocks `cholesky_adjoint` describes.
pub fn reverse_sweep(l: &[f64], w: &mut [f64], n: usize) {
    const ROWS: usize = 3;
    const COLS: usize = 2;
    // Rows top..top+rows (the block), from the bottom of the matrix up.
    let mut end = n;
    while end > 0 {
        let rows = if end >= ROWS { ROWS } else { 1 };
        let top = end - rows;
        let (head, block) = w.split_at_mut(top * n);
        let block = &mut block[..rows * n];
        // Within the block, from its last row: each row's pivot step once
        // the rows below it in the block have swept past it.
        for t in (top..end).rev() {
            for u in (t + 1..end).rev() {
                // Row u's step j = t (whose W_j row is in the block too).
                let (lo, hi) = block.split_at_mut((u - top) * n);
                let wt = &mut lo[(t - top) * n..(t - top) * n + n];
                step(&mut hi[..n], &l[u * n..u * n + n], wt, &l[t * n..t * n + n], t, u % 2 == 1);
            }
            let wt = &mut block[(t - top) * n..(t - top) * n + n];
            let lt = &l[t * n..t * n + n];
            let sbar = wt[t] / (2.0 * lt[t]);
            wt[t] = sbar;
            add_scaled(&mut wt[..t], -2.0 * sbar, &lt[..t]);
        }
        // Then all rows of the block together down to j = 0.
        let mut j = top;
        if rows == ROWS {
            let mut it = block.chunks_exact_mut(n).rev();
            let wr: [&mut [f64]; ROWS] = std::array::from_fn(|_| it.next().unwrap());
            let lr: [&[f64]; ROWS] = std::array::from_fn(|r| &l[(end - 1 - r) * n..(end - r) * n]);
            let odd: [bool; ROWS] = std::array::from_fn(|r| (end - 1 - r) % 2 == 1);
            let mut wr = wr;
            while j >= COLS {
                j -= COLS;
                sweep::<ROWS, COLS>(&mut wr, &lr, head, l, n, j, odd);
            }
            while j >= 1 {
                j -= 1;
                sweep::<ROWS, 1>(&mut wr, &lr, head, l, n, j, odd);
            }
        } else {
            let mut wr = [&mut block[..n]];
            let lr = [&l[top * n..top * n + n]];
            let odd = [top % 2 == 1];
            while j >= COLS {
                j -= COLS;
                sweep::<1, COLS>(&mut wr, &lr, head, l, n, j, odd);
            }
            while j >= 1 {
                j -= 1;
                sweep::<1, 1>(&mut wr, &lr, head, l, n, j, odd);
            }
        }
        end = top;
    }
}

/// Row i's step at j (scalar: only the block's own few): `wi`, `li` row i
/// of W and L, `wj`, `lj` row j; `odd` whether i is.
#[inline(always)]
fn step(wi: &mut [f64], li: &[f64], wj: &mut [f64], lj: &[f64], j: usize, odd: bool) {
    let s = if j == 0 && odd { wi[0] / lj[0] } else { wi[j] * (1.0 / lj[j]) };
    wi[j] = s;
    sub_scaled(&mut wi[..j], s, &lj[..j]);
    sub_scaled(&mut wj[..=j], s, &li[..=j]);
}

/// The steps j = j0 + C − 1 down to j0 of the R rows `wr` (row i first,
/// then i − 1, ...; their L rows `lr`), whose steps above j0 + C are done.
/// `head` holds W's rows above the block (rows j among them).
#[inline(always)]
fn sweep<const R: usize, const C: usize>(
    wr: &mut [&mut [f64]; R],
    lr: &[&[f64]; R],
    head: &mut [f64],
    l: &[f64],
    n: usize,
    j0: usize,
    odd: [bool; R],
) {
    let mut it = head[j0 * n..(j0 + C) * n].chunks_exact_mut(n);
    let mut wj: [&mut [f64]; C] = std::array::from_fn(|_| it.next().unwrap());
    let lj: [&[f64]; C] = std::array::from_fn(|q| &l[(j0 + q) * n..(j0 + q + 1) * n]);
    // The s of each row and j, and the entries at and above j0 (the
    // triangle of the C j's), in the scalar order.
    let mut s = [[0.0; C]; R];
    for q in (0..C).rev() {
        let jq = j0 + q;
        for r in 0..R {
            let x = &mut wr[r];
            let v = if jq == 0 && odd[r] { x[0] / lj[q][0] } else { x[jq] * (1.0 / lj[q][jq]) };
            s[r][q] = v;
            x[jq] = v;
            for p in (0..q).rev() {
                x[j0 + p] -= v * lj[q][j0 + p];
            }
        }
        for r in 0..R {
            for p in (0..=q).rev() {
                wj[q][j0 + p] -= s[r][q] * lr[r][j0 + p];
            }
        }
    }
    // The entries below j0, two at a time.
    let sv = s.map(|row| row.map(splat));
    let wr: [&mut [f64]; R] = wr.each_mut().map(|x| &mut x[..j0]);
    let lr: [&[f64]; R] = lr.map(|x| &x[..j0]);
    let wj: [&mut [f64]; C] = wj.each_mut().map(|x| &mut x[..j0]);
    let lj: [&[f64]; C] = lj.map(|x| &x[..j0]);
    let pairs = j0 - j0 % 2;
    let mut k = 0;
    while k < pairs {
        let lrk: [_; R] = std::array::from_fn(|r| load(&lr[r][k..k + 2]));
        let ljk: [_; C] = std::array::from_fn(|q| load(&lj[q][k..k + 2]));
        for r in 0..R {
            let mut x = load(&wr[r][k..k + 2]);
            for q in (0..C).rev() {
                x = sub(x, mul(sv[r][q], ljk[q]));
            }
            store(&mut wr[r][k..k + 2], x);
        }
        for q in 0..C {
            let mut y = load(&wj[q][k..k + 2]);
            for r in 0..R {
                y = sub(y, mul(sv[r][q], lrk[r]));
            }
            store(&mut wj[q][k..k + 2], y);
        }
        k += 2;
    }
    if k < j0 {
        for r in 0..R {
            let mut x = wr[r][k];
            for q in (0..C).rev() {
                x -= s[r][q] * lj[q][k];
            }
            wr[r][k] = x;
        }
        for q in 0..C {
            let mut y = wj[q][k];
            for r in 0..R {
                y -= s[r][q] * lr[r][k];
            }
            wj[q][k] = y;
        }
    }
}
