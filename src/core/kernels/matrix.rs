//! Reductions, products and the shape ops. Row-major throughout; products go
//! through nalgebra's gemm (matrixmultiply for all but tiny sizes) on views of
//! the arena, so nothing is allocated.

use crate::core::widest::widest;
use nalgebra::{DMatrixView, DMatrixViewMut, Dyn};

/// A row-major `rows×cols` block of the arena as a nalgebra matrix, or as
/// its transpose, without copying: only the strides change.
fn view(data: &[f64], rows: usize, cols: usize, transposed: bool) -> DMatrixView<'_, f64, Dyn, Dyn> {
    if transposed {
        DMatrixView::from_slice_with_strides(data, cols, rows, 1, cols)
    } else {
        DMatrixView::from_slice_with_strides(data, rows, cols, cols, 1)
    }
}

/// Below this size on any side nalgebra's gemm falls back to a path that
/// does not handle our strided (transposed) views, so we multiply directly.
const SMALL_DIM: usize = 5;

/// C = beta·C + op(A) op(B) for row-major C [m×n]; `a` holds A as stored
/// (`[m×k]`, or `[k×m]` when `ta`), `b` likewise (`[k×n]`, or `[n×k]` when
/// `tb`). `beta` is 0 (overwrite C without reading it) or 1 (accumulate).
#[allow(clippy::too_many_arguments)]
pub fn gemm(m: usize, k: usize, n: usize, a: &[f64], ta: bool, b: &[f64], tb: bool, beta: f64, c: &mut [f64]) {
    if m == 0 || n == 0 {
        return;
    }
    if beta == 0.0 {
        c.fill(0.0);
    }
    if k == 0 {
        return;
    }
    // Large products: faer's, on several threads (linalg/library.rs).
    if crate::core::linalg::large_gemm(m, k, n, a, ta, b, tb, c) {
        return;
    }
    if m <= SMALL_DIM || k <= SMALL_DIM || n <= SMALL_DIM {
        small_gemm(m, k, n, a, ta, b, tb, c);
        return;
    }
    // The rest: faer's on this thread natively, nalgebra's under WebAssembly.
    if crate::core::linalg::gemm_here(m, k, n, a, ta, b, tb, c) {
        return;
    }
    let (ar, ac) = if ta { (k, m) } else { (m, k) };
    let (br, bc) = if tb { (n, k) } else { (k, n) };
    let av = view(a, ar, ac, ta);
    let bv = view(b, br, bc, tb);
    let mut cv = DMatrixViewMut::from_slice_with_strides_mut(c, m, n, n, 1);
    cv.gemm(1.0, &av, &bv, 1.0);
}

widest! {
/// C += op(A) op(B) by loops whose inner step runs along contiguous rows,
/// compiled per vector width (the same bits at each).
#[allow(clippy::too_many_arguments)]
fn small_gemm(m: usize, k: usize, n: usize, a: &[f64], ta: bool, b: &[f64], tb: bool, c: &mut [f64]) {
    // A vector on the right, or an outer product: B, or A, is one contiguous
    // run whatever its transposition, so these reduce to level-1 loops.
    if n == 1 {
        if ta {
            matvec_t_acc(m, a, b, c);
        } else {
            for (ci, row) in c.iter_mut().zip(a.chunks_exact(k)) {
                *ci += dot(row, b);
            }
        }
        return;
    }
    if k == 1 {
        for (&ai, crow) in a.iter().zip(c.chunks_exact_mut(n)) {
            axpy(ai, b, crow);
        }
        return;
    }
    match (ta, tb) {
        (false, false) => {
            for (arow, crow) in a.chunks_exact(k).zip(c.chunks_exact_mut(n)) {
                for (&s, brow) in arow.iter().zip(b.chunks_exact(n)) {
                    axpy(s, brow, crow);
                }
            }
        }
        (false, true) => {
            for (arow, crow) in a.chunks_exact(k).zip(c.chunks_exact_mut(n)) {
                for (cij, brow) in crow.iter_mut().zip(b.chunks_exact(k)) {
                    *cij += dot(arow, brow);
                }
            }
        }
        (true, false) => {
            for (acol, brow) in a.chunks_exact(m).zip(b.chunks_exact(n)) {
                for (&s, crow) in acol.iter().zip(c.chunks_exact_mut(n)) {
                    axpy(s, brow, crow);
                }
            }
        }
        (true, true) => {
            for i in 0..m {
                for j in 0..n {
                    c[i * n + j] += (0..k).fold(0.0, |s, l| s + a[l * m + i] * b[j * k + l]);
                }
            }
        }
    }
}
}

/// Σ f(i) for i < n, in four interleaved partial sums so the additions do not
/// wait on one another (one running sum is latency-bound: ~4 cycles an add).
#[inline(always)]
pub fn sum_by(n: usize, f: impl Fn(usize) -> f64) -> f64 {
    let mut s = [0.0; 4];
    let body = n - n % 4;
    let mut i = 0;
    while i < body {
        s[0] += f(i);
        s[1] += f(i + 1);
        s[2] += f(i + 2);
        s[3] += f(i + 3);
        i += 4;
    }
    let mut total = (s[0] + s[1]) + (s[2] + s[3]);
    while i < n {
        total += f(i);
        i += 1;
    }
    total
}

/// Σ x.
pub fn sum(x: &[f64]) -> f64 {
    sum_by(x.len(), |i| x[i])
}

/// Σ x[i] y[i], left to right.
pub fn dot(x: &[f64], y: &[f64]) -> f64 {
    x.iter().zip(y).fold(0.0, |s, (&a, &b)| s + a * b)
}

/// y += s x.
#[inline(always)]
pub fn axpy(s: f64, x: &[f64], y: &mut [f64]) {
    for (yi, &xi) in y.iter_mut().zip(x) {
        *yi += s * xi;
    }
}

/// out = A x for row-major A [m×k]. Each entry is `dot(row, x)` bit for
/// bit; eight rows run together so their sums do not wait on each other.
pub fn matvec(k: usize, a: &[f64], x: &[f64], out: &mut [f64]) {
    const ROWS: usize = 8;
    if k == 0 {
        out.fill(0.0);
        return;
    }
    let mut outs = out.chunks_exact_mut(ROWS);
    let mut blocks = a.chunks_exact(ROWS * k);
    let x = &x[..k];
    for (o, block) in (&mut outs).zip(&mut blocks) {
        let rows: [&[f64]; ROWS] = std::array::from_fn(|r| &block[r * k..(r + 1) * k]);
        let mut s = [0.0; ROWS];
        for (l, &xl) in x.iter().enumerate() {
            for r in 0..ROWS {
                s[r] += rows[r][l] * xl;
            }
        }
        o.copy_from_slice(&s);
    }
    for (o, row) in outs.into_remainder().iter_mut().zip(blocks.remainder().chunks_exact(k)) {
        *o = dot(row, x);
    }
}

widest! {
/// d += Aᵀ g for row-major A [m×k]: four rows at a time, so each entry of
/// `d` is loaded and stored once per four rows rather than once per row;
/// compiled per vector width (the same bits at each).
pub fn matvec_t_acc(k: usize, a: &[f64], g: &[f64], d: &mut [f64]) {
    macro_rules! narrow {
        ($($k:literal)*) => {
            match k {
                0 => return,
                $($k => return narrow::<$k>(a, g, d),)*
                _ => {}
            }
        };
    }
    narrow!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
    let mut blocks = a.chunks_exact(4 * k);
    let mut gs = g.chunks_exact(4);
    for (block, g4) in (&mut blocks).zip(&mut gs) {
        let (r0, rest) = block.split_at(k);
        let (r1, rest) = rest.split_at(k);
        let (r2, r3) = rest.split_at(k);
        for l in 0..k {
            d[l] += ((g4[0] * r0[l] + g4[1] * r1[l]) + g4[2] * r2[l]) + g4[3] * r3[l];
        }
    }
    for (row, &gi) in blocks.remainder().chunks_exact(k).zip(gs.remainder()) {
        axpy(gi, row, d);
    }
}
}

/// `matvec_t_acc` for `K` columns, their sums held in registers across
/// all rows rather than loaded and stored once per block of four (the same
/// sums in the same order). A regression's 340×13 design matrix took
/// 1.2 µs the other way.
#[inline(always)]
fn narrow<const K: usize>(a: &[f64], g: &[f64], d: &mut [f64]) {
    let Some(d) = d.first_chunk_mut::<K>() else { unreachable!("d holds the product's k entries") };
    let mut acc = *d;
    let mut blocks = a.chunks_exact(4 * K);
    let mut gs = g.chunks_exact(4);
    for (block, g4) in (&mut blocks).zip(&mut gs) {
        let r: [&[f64]; 4] = std::array::from_fn(|i| &block[i * K..][..K]);
        for (l, acc) in acc.iter_mut().enumerate() {
            *acc += ((g4[0] * r[0][l] + g4[1] * r[1][l]) + g4[2] * r[2][l]) + g4[3] * r[3][l];
        }
    }
    for (row, &gi) in blocks.remainder().chunks_exact(K).zip(gs.remainder()) {
        for (acc, &x) in acc.iter_mut().zip(row) {
            *acc += gi * x;
        }
    }
    *d = acc;
}

/// out = Aᵀ for row-major A [m×n].
pub fn transpose(m: usize, n: usize, a: &[f64], out: &mut [f64]) {
    by_columns(m, n, a, out, |o, x| *o = x);
}

/// out += Aᵀ for row-major A [m×n] (the adjoint of transpose); with
/// `assign`, out = 0 + Aᵀ, those bits without reading `out`.
pub fn add_transposed(m: usize, n: usize, a: &[f64], out: &mut [f64], assign: bool) {
    if assign {
        by_columns(m, n, a, out, |o, x| *o = 0.0 + x);
    } else {
        by_columns(m, n, a, out, |o, x| *o += x);
    }
}

/// Rows of A a transpose walks at a time: their cache lines (and pages)
/// stay in L1 while each of A's columns in them is written out.
const TRANSPOSE_ROWS: usize = 64;

/// `f(&mut out[j·m + i], a[i·n + j])` for every entry of a row-major m×n
/// A (`out` is n×m): by runs of `TRANSPOSE_ROWS` rows of A, each column of
/// the run written to one contiguous run of `out`, which the strided reads
/// hit in cache. (Tiles of 16×16 that read rows and wrote columns took
/// 0.7–0.9 ns an entry at n = 50–200, this 0.5.) On several threads when
/// large, each taking a band of `out`'s rows. Each entry once, so any
/// order gives the same bits.
#[inline(always)]
fn by_columns(m: usize, n: usize, a: &[f64], out: &mut [f64], f: impl Fn(&mut f64, f64) + Sync) {
    let a = &a[..m * n];
    crate::core::linalg::parallel::rows(&mut out[..m * n], m, |j0, band| {
        for i0 in (0..m).step_by(TRANSPOSE_ROWS) {
            let rows = TRANSPOSE_ROWS.min(m - i0);
            for (j, run) in (j0..).zip(band.chunks_exact_mut(m)) {
                let column = &a[i0 * n + j..];
                for (r, o) in run[i0..i0 + rows].iter_mut().enumerate() {
                    f(o, column[r * n]);
                }
            }
        }
    })
}

/// Visit the rows of a `[start, start+size)` block of a row-major matrix
/// with `cols` columns (a vector is one row): `f(offset in the matrix,
/// offset in the block, length)`.
pub fn for_block(cols: usize, start: [usize; 2], size: [usize; 2], vector: bool, mut f: impl FnMut(usize, usize, usize)) {
    if vector {
        f(start[0], 0, size[0]);
        return;
    }
    for r in 0..size[0] {
        f((start[0] + r) * cols + start[1], r * size[1], size[1]);
    }
}

/// Visit each of `count` parts of a concatenation, part `k` laid out as
/// `dims(k)` = (rows, cols): `f(part, offset in the part, offset in the
/// result, length)` over row pieces, so the forward copy and the adjoint
/// split walk the same layout. The work is O(parts + values): a part with
/// no columns is not walked row by row.
pub fn for_concat(
    count: usize,
    dims: impl Fn(usize) -> (usize, usize),
    axis: u8,
    matrix: bool,
    mut f: impl FnMut(usize, usize, usize, usize),
) {
    if !matrix || axis == 0 {
        // Scalars and vectors flatten; matrices stacked by rows are contiguous too.
        let mut at = 0;
        for k in 0..count {
            let (r, c) = dims(k);
            f(k, 0, at, r * c);
            at += r * c;
        }
        return;
    }
    let total: usize = (0..count).map(|k| dims(k).1).sum();
    let mut col = 0;
    for k in 0..count {
        let (r, c) = dims(k);
        if c > 0 {
            for i in 0..r {
                f(k, i * c, i * total + col, c);
            }
        }
        col += c;
    }
}
