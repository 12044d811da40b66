//! The products and solves of a lane replay (lane_kernels.rs): a constant
//! or input matrix times a vector that differs from lane to lane
//! (`matvec`; for unit directions, `columns_of`), and the transposed
//! product of its adjoint (`matvec_t_acc`); a triangular solve of such a
//! matrix with such a vector (`solve`), and its adjoint (`solve_transposed`).
//! Each sums in the order of its kernel in core/kernels or core/linalg, so
//! every lane's result is a single replay's bit for bit.

use super::lane_base::{lanewise, widest, Lane, LANES};
use crate::core::widest::widest_here;
use std::cell::Cell;

/// `matrix::matvec` for every lane: out[i] = Σ_j a[i][j] x[j], left to
/// right from 0. Four rows at a time, so their sums do not wait on each other.
#[inline(always)]
pub(super) fn matvec(m: usize, k: usize, a: &[f64], x: &[Cell<Lane>], out: &[Cell<Lane>]) {
    const ROWS: usize = 4;
    let (a, x, out) = (&a[..m * k], &x[..k], &out[..m]);
    let mut i = 0;
    while i + ROWS <= m {
        let rows: [&[f64]; ROWS] = std::array::from_fn(|r| &a[(i + r) * k..(i + r + 1) * k]);
        let mut s = [[0.0; LANES]; ROWS];
        for (j, xj) in x.iter().enumerate() {
            let xj = xj.get();
            for (sr, row) in s.iter_mut().zip(rows) {
                let aij = row[j];
                for l in 0..LANES {
                    sr[l] += aij * xj[l];
                }
            }
        }
        out[i..i + ROWS].iter().zip(s).for_each(|(o, s)| o.set(s));
        i += ROWS;
    }
    for (i, o) in out.iter().enumerate().skip(i) {
        let mut s = [0.0; LANES];
        for (aij, xj) in a[i * k..(i + 1) * k].iter().zip(x) {
            let xj = xj.get();
            for l in 0..LANES {
                s[l] += aij * xj[l];
            }
        }
        o.set(s);
    }
}

/// Where each lane of `x` is not zero, and its value there, if no lane is
/// so at more than one element (a lane all zeros: element 0, value 0).
#[inline(always)]
pub(super) fn one_per_lane(x: &[Cell<Lane>]) -> Option<([usize; LANES], Lane)> {
    let (mut at, mut c) = ([usize::MAX; LANES], [0.0; LANES]);
    for (j, xj) in x.iter().enumerate() {
        let xj = xj.get();
        // Most elements are zero in every lane: one vector test each, on
        // the bits past the sign (a comparison per lane would branch per lane).
        if xj.iter().fold(0u64, |any, &v| any | (v.to_bits() << 1)) == 0 {
            continue;
        }
        for l in 0..LANES {
            // (A NaN is not zero.)
            if xj[l] != 0.0 {
                if at[l] != usize::MAX {
                    return None;
                }
                (at[l], c[l]) = (j, xj[l]);
            }
        }
    }
    Some((at.map(|j| if j == usize::MAX { 0 } else { j }), c))
}

/// Whether every entry of `a` is finite: then each term a_ij · 0 of a
/// product with a vector of one non-zero is a zero.
#[allow(clippy::eq_op)] // x − x is the test
pub(super) fn every_finite(a: &[f64]) -> bool {
    let (body, rest) = a.as_chunks::<LANES>();
    // x − x is 0 for a finite x and NaN otherwise; summed across lanes in registers.
    let s = body.iter().fold([0.0; LANES], |s, x| lanewise!(|l| s[l] + (x[l] - x[l])));
    s.iter().chain(rest).all(|x| (x - x) == 0.0)
}

/// `matvec` where lane `l` of x is zero but at element `at[l]`, which holds
/// `c[l]`, and every entry of A is finite: each row's sum from 0 passes its
/// zero terms (a_ij · ±0 = ±0, and +0 + ±0 = +0) and takes the one other,
/// so it is 0 + a[i][at[l]] · c[l] bit for bit, one product in place of k.
#[inline(always)]
pub(super) fn columns_of(k: usize, a: &[f64], at: [usize; LANES], c: Lane, out: &[Cell<Lane>]) {
    // Lanes that take consecutive columns (a group of unit directions) are
    // one load per row, lane l reading column base + l. A lane of zeros
    // (c = 0, the directions of other parameters) gets +0 from any finite
    // entry, so it may read past its row into the next or the one before:
    // the regression's two groups start one column before their row and
    // end two past it.
    let mut taking = (0..LANES).filter(|&l| c[l] != 0.0);
    let base = taking.next().map_or(0, |l| at[l] as isize - l as isize);
    if taking.all(|l| at[l] as isize - l as isize == base) {
        for (i, o) in out.iter().enumerate() {
            let row = &a[i * k..];
            match (i * k).checked_add_signed(base).and_then(|from| a.get(from..)).and_then(|a| a.first_chunk::<LANES>()) {
                Some(cols) => o.set(lanewise!(|l| 0.0 + cols[l] * c[l])),
                None => o.set(lanewise!(|l| 0.0 + row[at[l]] * c[l])),
            }
        }
        return;
    }
    for (row, o) in a.chunks_exact(k).zip(out) {
        o.set(lanewise!(|l| 0.0 + row[at[l]] * c[l]));
    }
}

widest! {
/// `matrix::matvec_t_acc` for every lane: d += Aᵀ g. Each d[j] takes
/// the rows in blocks of four, summed as that kernel sums them, then the
/// rows left one at a time. Many columns at a time (all of them, up to
/// sixteen, with AVX-512), held in registers across all rows: their sums
/// do not wait on each other, no lane goes back to memory between blocks,
/// and each block's adjoint lanes are loaded once for all of them (all
/// thirteen columns of the packed regression at once, rather than four by
/// four: 10% faster; the loop the other way round was compiled to gathers
/// and scatters across the columns, ~3× slower).
/// Compiled on its own (`widest!`), not inlined into the whole replay:
/// there its loop was vector code or not depending on what else the replay
/// held. (The other kernels stay inlined: out of line, they measured slower.)
pub(super) fn matvec_t_acc(m: usize, k: usize, a: &[f64], g: &[Cell<Lane>], d: &[Cell<Lane>], write: bool) {
    let (a, g, d) = (&a[..m * k], &g[..m], &d[..k]);
    if write {
        d.iter().for_each(|d| d.set([0.0; LANES]));
    }
    // As many columns at a time as the registers hold beside the block's
    // four adjoint lanes: 32 AVX-512 registers hold sixteen, one a lane;
    // AVX2's 16 registers four, two a lane.
    let most = if widest_here() == 2 { 16 } else { 4 };
    let mut j = 0;
    while j < k {
        let c = (k - j).min(most);
        let d = &d[j..j + c];
        match c {
            16 => columns::<16>(k, a, g, d, j),
            15 => columns::<15>(k, a, g, d, j),
            14 => columns::<14>(k, a, g, d, j),
            13 => columns::<13>(k, a, g, d, j),
            12 => columns::<12>(k, a, g, d, j),
            11 => columns::<11>(k, a, g, d, j),
            10 => columns::<10>(k, a, g, d, j),
            9 => columns::<9>(k, a, g, d, j),
            8 => columns::<8>(k, a, g, d, j),
            7 => columns::<7>(k, a, g, d, j),
            6 => columns::<6>(k, a, g, d, j),
            5 => columns::<5>(k, a, g, d, j),
            4 => columns::<4>(k, a, g, d, j),
            3 => columns::<3>(k, a, g, d, j),
            2 => columns::<2>(k, a, g, d, j),
            _ => columns::<1>(k, a, g, d, j),
        }
        j += c;
    }
}
}

/// `matvec_t_acc` for columns `j..j + C`, their sums in registers.
#[inline(always)]
fn columns<const C: usize>(k: usize, a: &[f64], g: &[Cell<Lane>], d: &[Cell<Lane>], j: usize) {
    let body = g.len() - g.len() % 4;
    let mut acc: [Lane; C] = std::array::from_fn(|c| d[c].get());
    for (block, gs) in g[..body].chunks_exact(4).enumerate() {
        let gs: [Lane; 4] = std::array::from_fn(|r| gs[r].get());
        // The block's four rows, each cut to the C columns once.
        let rows: [&[f64]; 4] = std::array::from_fn(|r| &a[(4 * block + r) * k + j..][..C]);
        for (c, acc) in acc.iter_mut().enumerate() {
            let (s, r) = (*acc, [rows[0][c], rows[1][c], rows[2][c], rows[3][c]]);
            *acc = lanewise!(|l| s[l] + (((gs[0][l] * r[0] + gs[1][l] * r[1]) + gs[2][l] * r[2]) + gs[3][l] * r[3]));
        }
    }
    for (i, gi) in g.iter().enumerate().skip(body) {
        let (gi, row) = (gi.get(), &a[i * k + j..][..C]);
        for (acc, &aij) in acc.iter_mut().zip(row) {
            let s = *acc;
            *acc = lanewise!(|l| s[l] + gi[l] * aij);
        }
    }
    d.iter().zip(acc).for_each(|(d, acc)| d.set(acc));
}

/// nalgebra's dot product of a row of a matrix (`t`) with lanes (`x`), as
/// `library::nalgebra_vector_solve` computes it: over whole blocks of
/// eight, eight partial sums; those added pairwise (0 and 4, 1 and 5, …)
/// to a sum from 0; then the rest, one at a time.
#[inline(always)]
fn nalgebra_dot(t: &[f64], x: &[Cell<Lane>]) -> Lane {
    let (n, x) = (t.len(), &x[..t.len()]);
    let body = n - n % 8;
    let mut acc = [[0.0; LANES]; 8];
    for (ts, xs) in t[..body].chunks_exact(8).zip(x[..body].chunks_exact(8)) {
        for (a, (&tj, xj)) in acc.iter_mut().zip(ts.iter().zip(xs)) {
            let (s, xj) = (*a, xj.get());
            *a = lanewise!(|l| s[l] + tj * xj[l]);
        }
    }
    let mut res = [0.0; LANES];
    for j in 0..4 {
        let (r, a, b) = (res, acc[j], acc[j + 4]);
        res = lanewise!(|l| r[l] + (a[l] + b[l]));
    }
    for (&tj, xj) in t[body..].iter().zip(&x[body..]) {
        let (r, xj) = (res, xj.get());
        res = lanewise!(|l| r[l] + tj * xj[l]);
    }
    res
}

widest! {
/// `linalg::triangular_solve` of one right-hand side for every lane:
/// T x = b, T n×n row-major and lower or upper, by nalgebra's substitution
/// (each row's dot product with the entries solved so far, from row 0 for
/// a lower T, from row n − 1 for an upper). No pivot may be zero.
/// Compiled on its own for each vector width (`widest!`), as loops: a
/// closure inside was compiled apart from the width, to two-wide code, and
/// inlined into every replay the two solves added 32 KB to the addon.
pub(super) fn solve(t: &[f64], n: usize, lower: bool, b: &[Cell<Lane>], x: &[Cell<Lane>]) {
    let (t, b, x) = (&t[..n * n], &b[..n], &x[..n]);
    for step in 0..n {
        let (i, from, to) = if lower { (step, 0, step) } else { (n - 1 - step, n - step, n) };
        let (d, bi, p) = (nalgebra_dot(&t[i * n + from..i * n + to], &x[from..to]), b[i].get(), t[i * n + i]);
        x[i].set(lanewise!(|l| (bi[l] - d[l]) / p));
    }
}
}

widest! {
/// The solve's adjoint for b, `triangular_solve_bbar` then `axpy(1.0, ·, d)`,
/// for every lane: d += T⁻ᵀ g (written, for `d`'s `first` term), by
/// nalgebra's substitution for Tᵀ: each pivot's entry divided out, then
/// taken off the entries of the rows left, a multiple of T's row.
pub(super) fn solve_transposed(t: &[f64], n: usize, lower: bool, g: &[Cell<Lane>], d: &[Cell<Lane>], write: bool) {
    let t = &t[..n * n];
    let mut y: Vec<Lane> = g[..n].iter().map(Cell::get).collect();
    for step in 0..n {
        let i = if lower { n - 1 - step } else { step };
        let p = t[i * n + i];
        let (head, tail) = y.split_at_mut(i);
        let (yi, tail) = tail.split_first_mut().expect("i < n");
        let v = *yi;
        let c = lanewise!(|l| v[l] / p);
        *yi = c;
        let (rest, row) = if lower { (head, &t[i * n..i * n + i]) } else { (tail, &t[i * n + i + 1..i * n + n]) };
        for (yr, &tr) in rest.iter_mut().zip(row) {
            let s = *yr;
            *yr = lanewise!(|l| -c[l] * tr + s[l]);
        }
    }
    for (d, y) in d[..n].iter().zip(&y) {
        let s = if write { [0.0; LANES] } else { d.get() };
        d.set(lanewise!(|l| s[l] + y[l]));
    }
}
}
