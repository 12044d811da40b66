//! Long O(n²) passes on several threads: a large model's elementwise
//! chains, transposes, copies and clears (a GP's at n = 2000 held a fifth
//! of its time on one core while faer's factorizations used every one).
//! Each element is computed by the same expression, or each test made,
//! whatever the split, so the bits do not depend on the thread count.

use std::mem::MaybeUninit;
use std::ops::Range;

/// Elements from which a pass is split: 2^19 (4 MiB, n ≈ 724 for a square
/// matrix). From 2^17, a GP at n = 500 took 9.5 ms a call on two threads
/// against 7.9 on one: waking rayon's sleeping threads for each of some
/// twenty passes of 0.1–0.4 ms cost more than half of each pass saved.
const SPLIT_FROM: usize = 1 << 19;

/// The parts to split `len` elements into, in whole units of `unit`.
fn parts(len: usize, unit: usize) -> usize {
    #[cfg(not(target_arch = "wasm32"))]
    if len >= SPLIT_FROM && unit > 0 {
        let most = (len / (SPLIT_FROM / 2)).min(len / unit);
        return super::threads::for_kernel().min(most).max(1);
    }
    let _ = (len, unit);
    1
}

/// Whether a pass over `len` values would be split among threads.
pub fn splits(len: usize) -> bool {
    parts(len, 1) > 1
}

/// `f(at, part)` over consecutive parts of `out` of whole `unit`s, `at`
/// being each part's offset: on the threads a kernel may take
/// (`linalg::threads`) when `out` is long, else once, on all of it.
#[inline(always)]
fn split(out: &mut [f64], unit: usize, f: impl Fn(usize, &mut [f64]) + Sync) {
    split_in(out, unit, parts(out.len(), unit), f)
}

/// `split` into `threads` parts (one, the whole, under WebAssembly).
#[inline(always)]
fn split_in<T: Send>(out: &mut [T], unit: usize, threads: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    #[cfg(not(target_arch = "wasm32"))]
    if threads > 1 {
        let size = out.len().div_ceil(unit).div_ceil(threads) * unit;
        let f = &f;
        rayon::scope(|s| {
            for (i, part) in out.chunks_mut(size).enumerate() {
                s.spawn(move |_| f(i * size, part));
            }
        });
        return;
    }
    let _ = (unit, threads);
    f(0, out)
}

/// Sums over `SPLIT_FROM` values or more are taken in chunks of this many,
/// under every build (the WebAssembly one on its one thread), so that their
/// bits depend on the length alone.
const SUM_CHUNK: usize = 1 << 16;

/// Σ of `f` over consecutive chunks of `0..len`: below `SPLIT_FROM` one
/// chunk, `f(0..len)`; from there chunks of `SUM_CHUNK` values, summed on
/// the threads a kernel may take and added left to right. (A sum split by
/// the thread count would round differently on every machine.)
pub fn sum_chunks(len: usize, f: impl Fn(Range<usize>) -> f64 + Sync) -> f64 {
    fold_chunks(len, f, |total, s| total + s)
}

/// The largest of `f` over the chunks `sum_chunks` takes.
#[cfg(not(target_arch = "wasm32"))]
pub fn max_chunks(len: usize, f: impl Fn(Range<usize>) -> f64 + Sync) -> f64 {
    fold_chunks(len, f, f64::max)
}

/// `f` of each chunk as `sum_chunks` cuts them, combined left to right.
fn fold_chunks(len: usize, f: impl Fn(Range<usize>) -> f64 + Sync, combine: impl Fn(f64, f64) -> f64) -> f64 {
    if len < SPLIT_FROM {
        return f(0..len);
    }
    let mut each = vec![0.0; len.div_ceil(SUM_CHUNK)];
    split_in(&mut each, 1, parts(len, SUM_CHUNK), |first, part| {
        for (c, s) in (first..).zip(part) {
            *s = f(c * SUM_CHUNK..((c + 1) * SUM_CHUNK).min(len));
        }
    });
    each[1..].iter().fold(each[0], |total, &s| combine(total, s))
}

/// `f(first row, band)` over bands of whole rows of an n×n matrix `out`
/// that cover about equal parts of its lower (or upper) triangle, where
/// row i holds i + 1 (or n − i) entries. Nothing to do when n = 0.
pub fn triangle_rows(out: &mut [f64], n: usize, lower: bool, f: impl Fn(usize, &mut [f64]) + Sync) {
    if n == 0 {
        return;
    }
    triangle_bands(&mut out[..n * n], n, n, lower, f)
}

/// Where `parts` bands of rows of an n×n matrix end when each covers about
/// an equal part of its lower (or upper) triangle: the lower triangle's
/// first r rows hold about r²/2 entries.
fn triangle_edges(n: usize, parts: usize, lower: bool) -> Vec<usize> {
    let edge = |p: usize| (n as f64 * (p as f64 / parts as f64).sqrt()).round() as usize;
    (1..=parts).map(|p| if lower { edge(p) } else { n - edge(parts - p) }).collect()
}

/// `f(first row, band)` over bands of `rows`, n rows of `unit` items each
/// (values, or one slice a row), cut by `triangle_edges`: on the threads a
/// kernel may take when the triangle is large, else once, on all of them.
fn triangle_bands<T: Send>(rows: &mut [T], unit: usize, n: usize, lower: bool, f: impl Fn(usize, &mut [T]) + Sync) {
    let threads = parts(n * n / 2, n);
    #[cfg(not(target_arch = "wasm32"))]
    if threads > 1 {
        let f = &f;
        rayon::scope(|s| {
            let (mut rest, mut first) = (rows, 0);
            for end in triangle_edges(n, threads, lower) {
                let (band, tail) = std::mem::take(&mut rest).split_at_mut((end.max(first) - first) * unit);
                if !band.is_empty() {
                    s.spawn(move |_| f(first, band));
                }
                (rest, first) = (tail, end.max(first));
            }
        });
        return;
    }
    let _ = (unit, lower, threads);
    f(0, rows)
}

/// Whether `test` holds for every band of rows of an n×n matrix's lower
/// (or upper) triangle (`test` takes a range of rows), the bands cut by
/// `triangle_edges` and tested at once when the triangle is large.
pub fn all_triangle_rows(n: usize, lower: bool, test: impl Fn(Range<usize>) -> bool + Sync) -> bool {
    all_parts(n * n / 2, n, |part, parts| {
        if parts == 1 {
            return test(0..n);
        }
        let edges = triangle_edges(n, parts, lower);
        let first = if part == 0 { 0 } else { edges[part - 1] };
        test(first..edges[part].max(first))
    })
}

/// The strict lower triangle of an n×n `x` set to the transpose of its
/// strict upper one (x_ij = x_ji for j < i), the upper left as it is; in
/// bands of rows on several threads when large. Row by row, each reading
/// down a column of the upper triangle whose cache lines serve the next
/// rows' columns too (tiles of 16 rows that read along the upper rows were
/// 3% slower at n = 200). Each entry is a copy, so the bits do not depend
/// on the split.
pub fn lower_from_upper(x: &mut [f64], n: usize) {
    // Each row split into its entries left of the diagonal, written, and
    // right of it, read: disjoint, so the bands share the upper parts.
    let (mut lowers, mut uppers) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for (i, row) in x[..n * n].chunks_exact_mut(n.max(1)).enumerate() {
        let (lower, upper) = row.split_at_mut(i);
        lowers.push(lower);
        uppers.push(&upper[1..]);
    }
    let uppers = &uppers;
    triangle_bands(&mut lowers, 1, n, true, |first, band| {
        for (i, lower) in (first..).zip(band.iter_mut()) {
            for (j, (x, upper)) in lower.iter_mut().zip(uppers).enumerate() {
                *x = upper[i - j - 1];
            }
        }
    })
}

/// Zeros written into `x`, on the threads a kernel may take when it is
/// long. Fresh memory's first write is the kernel's page faults, and those
/// run on as many cores at once: 80 MB took 25 ms to fault on one thread
/// here, 14.5 on two (a GP's trace at n = 1000 grows its arena by that much).
pub fn zero_uninit(x: &mut [MaybeUninit<f64>]) {
    split_in(x, 1, parts(x.len(), 1), |_, part| part.fill(MaybeUninit::new(0.0)))
}

/// `f(at, part)` over consecutive parts of `out`, `at` each part's offset.
#[inline(always)]
pub fn chunks(out: &mut [f64], f: impl Fn(usize, &mut [f64]) + Sync) {
    split(out, 1, f)
}

/// `f(from part, to part)` over matching parts of `from` and `to`.
#[inline(always)]
pub fn zip(from: &[f64], to: &mut [f64], f: impl Fn(&[f64], &mut [f64]) + Sync) {
    chunks(to, |at, to| f(&from[at..at + to.len()], to))
}

/// Copy `from` into `to`, of its length.
#[inline(always)]
pub fn copy(from: &[f64], to: &mut [f64]) {
    zip(from, to, |from, to| to.copy_from_slice(from))
}

/// Zero `x`.
#[inline(always)]
pub fn zero(x: &mut [f64]) {
    chunks(x, |_, part| part.fill(0.0))
}

/// `f(first row, part)` over parts of `out` holding whole rows of `cols` values.
/// Nothing to do without a value (and `f` never sees zero columns).
#[inline(always)]
pub fn rows(out: &mut [f64], cols: usize, f: impl Fn(usize, &mut [f64]) + Sync) {
    if cols == 0 || out.is_empty() {
        return;
    }
    split(out, cols, |at, part| f(at / cols, part))
}

/// Whether `test(part, parts)` holds for every part of a pass over `len`
/// values in whole `unit`s, the parts tested at once when it is long
/// (`parts` is how many; each `test` picks its own share of the work).
pub fn all_parts(len: usize, unit: usize, test: impl Fn(usize, usize) -> bool + Sync) -> bool {
    let threads = parts(len, unit);
    #[cfg(not(target_arch = "wasm32"))]
    if threads > 1 {
        let test = &test;
        let mut ok = vec![true; threads];
        rayon::scope(|s| {
            for (i, ok) in ok.iter_mut().enumerate() {
                s.spawn(move |_| *ok = test(i, threads));
            }
        });
        return ok.iter().all(|&ok| ok);
    }
    test(0, threads)
}

/// Whether `test` holds for every band of rows of an m-row matrix of
/// `cols` columns (`test` takes a range of rows), bands tested at once.
pub fn all_rows(m: usize, cols: usize, test: impl Fn(Range<usize>) -> bool + Sync) -> bool {
    all_parts(m.saturating_mul(cols), cols, |part, parts| {
        let band = m.div_ceil(parts);
        test((part * band).min(m)..((part + 1) * band).min(m))
    })
}

/// `x[at..at + len]`, or `x` itself where it is one value broadcast.
pub fn part(x: &[f64], at: usize, len: usize) -> &[f64] {
    if x.len() == 1 && len != 1 {
        x
    } else {
        &x[at..at + len]
    }
}
