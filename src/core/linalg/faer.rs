//! faer's kernels on views of our row-major slices, with no layout copies
//! but Cholesky's, whose diagonal blocks faer factors with SIMD only in a
//! column-major matrix (`cholesky`). Native builds only; `library.rs` says
//! when each one runs, and on how many threads: `Par::Seq`, or `Par::Rayon`
//! for large matrices, which gives the same bits (`tests/threads.rs`).
//! `benches/linalg.rs` times these same calls, sequential and on two threads.

use ::faer::dyn_stack::{MemBuffer, MemStack, StackReq};
use smallvec::SmallVec;
use std::cell::RefCell;
use ::faer::linalg::cholesky::llt::factor as llt;
use ::faer::linalg::lu::partial_pivoting::{factor as plu, solve as plu_solve};
use ::faer::linalg::matmul::triangular::{self as trimatmul, BlockStructure};
use ::faer::linalg::triangular_solve as tri;
use ::faer::perm::PermRef;
use ::faer::prelude::{Reborrow, ReborrowMut};
use ::faer::{Accum, MatMut, MatRef, Par};
use super::parallel;

/// Scratch kept per thread up to this size (larger requests allocate once
/// per call): at n = 12 a fresh allocation cost 20–40% of a solve.
const KEPT_SCRATCH: usize = 1 << 20;

thread_local! {
    static SCRATCH: RefCell<(usize, MemBuffer)> = RefCell::new((0, MemBuffer::new(StackReq::EMPTY)));
}

/// `f` with a stack of at least `req`.
fn with_scratch<R>(req: StackReq, f: impl FnOnce(&mut MemStack) -> R) -> R {
    let need = req.unaligned_bytes_required();
    if need > KEPT_SCRATCH {
        return f(MemStack::new(&mut MemBuffer::new(req)));
    }
    SCRATCH.with(|cell| {
        let mut kept = cell.borrow_mut();
        if kept.0 < need {
            *kept = (need, MemBuffer::new(StackReq::new::<u8>(need)));
        }
        f(MemStack::new(&mut kept.1))
    })
}

/// The order from which faer's Cholesky takes blocks of 256 columns, not
/// its 128: at n = 2000 on 2 threads its factorization took 44–56 ms
/// against 50–107, and on one 94–103 against 82–97; at n = 1000 no
/// difference either way (six calls each, 2026-12-03). By order alone, so
/// that the blocks, and the bits, are the same at any thread count.
const WIDE_BLOCKS_FROM: usize = 1536;

/// L with A = L Lᵀ into `l` (zeros above the diagonal), reading A's lower
/// triangle; false when a pivot is not positive.
pub fn cholesky(a: &[f64], n: usize, l: &mut [f64], par: Par) -> bool {
    let l = &mut l[..n * n];
    let a = &a[..n * n];
    // faer factors `l` read column-major (below: it has SIMD kernels for
    // that layout alone), whose lower triangle is our upper one: A's lower
    // triangle goes there, transposed, as the hand-written kernel reads it
    // (A need only be symmetric to 1e-10).
    parallel::triangle_rows(l, n, false, |first, band| {
        for (i, row) in (first..).zip(band.chunks_exact_mut(n)) {
            for (j, x) in (i..n).zip(&mut row[i..]) {
                *x = a[j * n + i];
            }
        }
    });
    let mut params: ::faer::Spec<llt::LltParams, f64> = Default::default();
    if n >= WIDE_BLOCKS_FROM {
        params.config.block_size = 256;
    }
    let req = llt::cholesky_in_place_scratch::<f64>(n, par, params);
    // Column-major: faer factors its diagonal blocks with SIMD only in that
    // layout, and a row-major view fell back to scalar loops that took 141
    // of a gp200 gradient's 515 µs. L lands in our upper triangle, as Lᵀ.
    let m = MatMut::from_column_major_slice_mut(&mut *l, n, n);
    if with_scratch(req, |stack| llt::cholesky_in_place(m, Default::default(), par, stack, params)).is_err() {
        return false;
    }
    parallel::lower_from_upper(l, n);
    parallel::triangle_rows(l, n, false, |first, band| {
        for (i, row) in (first..).zip(band.chunks_exact_mut(n)) {
            row[i + 1..].fill(0.0);
        }
    });
    true
}

/// Columns per block of `cholesky_adjoint`'s reverse sweep.
const ADJOINT_BLOCK: usize = 64;

/// From this order on, blocks of 256 columns (each diagonal block swept in
/// blocks of `ADJOINT_BLOCK` in turn): the updates of W's columns to the
/// left, which stream the rows below the block, then pass over W a quarter
/// as often. n = 2000: 156–167 ms a gradient on two threads against 176–184
/// with 64, and 241–250 against 254–267 on one; n = 1000: 27–30 against
/// 30–33; n = 750: 14.7–15.0 against 15.9; n = 500 alike (2026-12-06). By
/// order alone, so the bits do not depend on the thread count.
const WIDE_ADJOINT_FROM: usize = 600;
const WIDE_ADJOINT_BLOCK: usize = 256;

/// The products and solves within `cholesky_adjoint` take `par`'s threads
/// from this many multiply-adds; smaller ones cost more to split than they
/// gain (2 threads, n = 1000: 17–19 ms, against 26–28 with every step split).
const ADJOINT_PARALLEL_FROM: usize = 2_000_000;

/// Ā += sym(Φ), Φ the adjoint of A's lower triangle given L̄ (Murray 2016),
/// by the blocked reverse of a left-looking factorization: ≈ n³/3
/// multiply-adds, as many as the factorization, nearly all in products.
pub fn cholesky_adjoint(l: &[f64], lbar: &[f64], n: usize, work: &mut [f64], abar: &mut [f64], par: Par, assign: bool) {
    let w = super::cholesky::lower_triangle(lbar, n, work);
    let block = if n >= WIDE_ADJOINT_FROM { WIDE_ADJOINT_BLOCK } else { ADJOINT_BLOCK };
    blocked_sweep(MatRef::from_row_major_slice(&l[..n * n], n, n), MatMut::from_row_major_slice_mut(w, n, n), block, par);
    super::cholesky::add_symmetrized(w, n, abar, assign);
}

/// L̄ → Φ in `wm` (L̄'s lower triangle, zeros above, in; Φ out), L in `lm`,
/// by blocks of `b` columns.
///
/// The factorization, per block column D (rows and columns J, R = the
/// columns before J, C = the rows after J):
///   1. S = A_DD − L_DR L_DRᵀ       2. L_DD = chol(S)
///   3. T = A_CD − L_CR L_DRᵀ       4. L_CD = T L_DD⁻ᵀ
///
/// Its reverse, from the last block to the first, on W (L̄, then Φ):
///   4. W_CD = L̄_CD L_DD⁻¹ (this is Φ_CD), W_DD −= tril(W_CDᵀ L_CD)
///   3. W_CR −= W_CD L_DR, W_DR −= W_CDᵀ L_CR
///   2. W_DD = Φ_DD by the unblocked reverse sweep of `cholesky.rs`, or
///      blocked again when D is wider than `ADJOINT_BLOCK`
///   1. W_DR −= (Φ_DD + Φ_DDᵀ) L_DR
///
/// Every later block has given its share to W's columns J before J's turn.
fn blocked_sweep(lm: MatRef<'_, f64>, mut wm: MatMut<'_, f64>, b: usize, par: Par) {
    let n = lm.nrows();
    let big = |multiply_adds: usize| if multiply_adds >= ADJOINT_PARALLEL_FROM { par } else { Par::Seq };
    // The diagonal block's L and W, contiguous for the unblocked sweep, and Φ + Φᵀ.
    let most = b.min(ADJOINT_BLOCK).pow(2);
    let (mut ld, mut wd, mut sym) = (vec![0.0; most], vec![0.0; most], vec![0.0; b * b]);
    for j in (0..n).step_by(b).rev() {
        let (e, bs) = ((j + b).min(n), (j + b).min(n) - j);
        let m = n - e;
        let (mut w_dr, mut w_dd, mut w_cr, mut w_cd) = wm.rb_mut().submatrix_mut(j, 0, n - j, e).split_at_mut(bs, j);
        let (l_dd, l_dr) = (lm.submatrix(j, j, bs, bs), lm.submatrix(j, 0, bs, j));
        if m > 0 {
            let (l_cd, l_cr) = (lm.submatrix(e, j, m, bs), lm.submatrix(e, 0, m, j));
            tri::solve_upper_triangular_in_place(l_dd.transpose(), w_cd.rb_mut().transpose_mut(), big(m * bs * bs));
            let lower = BlockStructure::TriangularLower;
            let rect = BlockStructure::Rectangular;
            trimatmul::matmul(w_dd.rb_mut(), lower, Accum::Add, w_cd.rb().transpose(), rect, l_cd, rect, -1.0, big(m * bs * bs));
            if j > 0 {
                ::faer::linalg::matmul::matmul(w_cr.rb_mut(), Accum::Add, w_cd.rb(), l_dr, -1.0, big(m * j * bs));
                ::faer::linalg::matmul::matmul(w_dr.rb_mut(), Accum::Add, w_cd.rb().transpose(), l_cr, -1.0, big(m * j * bs));
            }
        }
        let sym = &mut sym[..bs * bs];
        if bs > ADJOINT_BLOCK {
            blocked_sweep(l_dd, w_dd.rb_mut(), ADJOINT_BLOCK, par);
        } else {
            let (ld, wd) = (&mut ld[..bs * bs], &mut wd[..bs * bs]);
            for r in 0..bs {
                for c in 0..bs {
                    ld[r * bs + c] = l_dd[(r, c)];
                    wd[r * bs + c] = w_dd[(r, c)];
                }
            }
            clean_upper_state(); // faer's wide kernels before the sweep's SSE code (library.rs says why)
            super::simd::reverse_sweep(ld, wd, bs);
            for r in 0..bs {
                for c in 0..bs {
                    w_dd[(r, c)] = wd[r * bs + c];
                }
            }
        }
        for r in 0..bs {
            for c in 0..bs {
                sym[r * bs + c] = w_dd[(r, c)] + w_dd[(c, r)];
            }
        }
        if j > 0 {
            let sym = MatRef::from_row_major_slice(sym, bs, bs);
            ::faer::linalg::matmul::matmul(w_dr.rb_mut(), Accum::Add, sym, l_dr, -1.0, big(bs * bs * j));
        }
    }
}

/// T̄ −= B̄ Xᵀ on T's own triangle (diagonal included), B̄ and X n×k: a
/// triangular-output product, the other triangle left as it is.
pub fn triangular_solve_tbar(n: usize, lower: bool, bbar: &[f64], x: &[f64], k: usize, tbar: &mut [f64], par: Par) {
    let dst = MatMut::from_row_major_slice_mut(&mut tbar[..n * n], n, n);
    let b = MatRef::from_row_major_slice(&bbar[..n * k], n, k);
    let xt = MatRef::from_row_major_slice(&x[..n * k], n, k).transpose();
    let structure = if lower { BlockStructure::TriangularLower } else { BlockStructure::TriangularUpper };
    trimatmul::matmul(dst, structure, Accum::Add, b, BlockStructure::Rectangular, xt, BlockStructure::Rectangular, -1.0, par);
}

/// Y = tril(A) tril(B) on Y's lower triangle, its strict upper zeroed.
pub fn lower_matmul(a: &[f64], b: &[f64], n: usize, y: &mut [f64], par: Par) {
    for i in 0..n {
        y[i * n + i + 1..i * n + n].fill(0.0);
    }
    let dst = MatMut::from_row_major_slice_mut(&mut y[..n * n], n, n);
    let (a, b) = (MatRef::from_row_major_slice(&a[..n * n], n, n), MatRef::from_row_major_slice(&b[..n * n], n, n));
    let lower = BlockStructure::TriangularLower;
    trimatmul::matmul(dst, lower, Accum::Replace, a, lower, b, lower, 1.0, par);
}

/// Ā += tril(tril(Ȳ) tril(B)ᵀ), the upper triangle left as it is.
pub fn lower_matmul_abar(ybar: &[f64], b: &[f64], n: usize, abar: &mut [f64], par: Par) {
    let dst = MatMut::from_row_major_slice_mut(&mut abar[..n * n], n, n);
    let g = MatRef::from_row_major_slice(&ybar[..n * n], n, n);
    let bt = MatRef::from_row_major_slice(&b[..n * n], n, n).transpose();
    let lower = BlockStructure::TriangularLower;
    trimatmul::matmul(dst, lower, Accum::Add, g, lower, bt, BlockStructure::TriangularUpper, 1.0, par);
}

/// B̄ += tril(tril(A)ᵀ tril(Ȳ)), the upper triangle left as it is.
pub fn lower_matmul_bbar(a: &[f64], ybar: &[f64], n: usize, bbar: &mut [f64], par: Par) {
    let dst = MatMut::from_row_major_slice_mut(&mut bbar[..n * n], n, n);
    let at = MatRef::from_row_major_slice(&a[..n * n], n, n).transpose();
    let g = MatRef::from_row_major_slice(&ybar[..n * n], n, n);
    let lower = BlockStructure::TriangularLower;
    trimatmul::matmul(dst, lower, Accum::Add, at, BlockStructure::TriangularUpper, g, lower, 1.0, par);
}

/// `vzeroupper` where AVX is (`library.rs` calls it after each kernel here).
/// Not inlined: the calling convention leaves no vector register live
/// across a call, so clearing their upper halves here disturbs nothing.
#[inline(never)]
pub fn clean_upper_state() {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: AVX is present; vzeroupper only clears the upper halves
        // of the vector registers, which no live value holds between calls.
        unsafe { std::arch::asm!("vzeroupper", options(nomem, nostack, preserves_flags)) }
    }
}

/// X = T⁻¹ B, or T⁻ᵀ B when `transposed`; reads only T's own triangle.
#[allow(clippy::too_many_arguments)]
pub fn triangular_solve(t: &[f64], n: usize, lower: bool, b: &[f64], k: usize, x: &mut [f64], transposed: bool, par: Par) {
    let x = &mut x[..n * k];
    x.copy_from_slice(&b[..n * k]);
    let xm = MatMut::from_row_major_slice_mut(x, n, k);
    let tm = MatRef::from_row_major_slice(&t[..n * n], n, n);
    match (lower, transposed) {
        (true, false) => tri::solve_lower_triangular_in_place(tm, xm, par),
        (false, false) => tri::solve_upper_triangular_in_place(tm, xm, par),
        (true, true) => tri::solve_upper_triangular_in_place(tm.transpose(), xm, par),
        (false, true) => tri::solve_lower_triangular_in_place(tm.transpose(), xm, par),
    }
}

/// P A = L U packed as the hand-written `lu_factor` packs it.
pub fn lu_factor(a: &[f64], n: usize, lu: &mut [f64], perm: &mut [f64], par: Par) {
    let lu = &mut lu[..n * n];
    lu.copy_from_slice(&a[..n * n]);
    let (mut fwd, mut bwd) = (vec![0usize; n], vec![0usize; n]);
    let req = plu::lu_in_place_scratch::<usize, f64>(n, n, par, Default::default());
    let m = MatMut::from_row_major_slice_mut(lu, n, n);
    with_scratch(req, |stack| plu::lu_in_place(m, &mut fwd, &mut bwd, par, stack, Default::default()));
    for (p, &f) in perm[..n].iter_mut().zip(&fwd) {
        *p = f as f64;
    }
}

/// X = A⁻¹ B (or A⁻ᵀ B when `transposed`) from packed factors; false when
/// `perm` is not a permutation of 0..n.
#[allow(clippy::too_many_arguments)]
pub fn lu_solve(lu: &[f64], perm: &[f64], n: usize, b: &[f64], k: usize, x: &mut [f64], transposed: bool, par: Par) -> bool {
    let mut fwd: SmallVec<[usize; 64]> = SmallVec::with_capacity(n);
    let mut bwd: SmallVec<[usize; 64]> = smallvec::smallvec![usize::MAX; n];
    for (i, &p) in perm[..n].iter().enumerate() {
        if !(p >= 0.0 && p < n as f64 && p.fract() == 0.0) || bwd[p as usize] != usize::MAX {
            return false;
        }
        fwd.push(p as usize);
        bwd[p as usize] = i;
    }
    let x = &mut x[..n * k];
    x.copy_from_slice(&b[..n * k]);
    let f = MatRef::from_row_major_slice(&lu[..n * n], n, n);
    let p = PermRef::new_checked(&fwd, &bwd, n);
    let xm = MatMut::from_row_major_slice_mut(x, n, k);
    if transposed {
        let req = plu_solve::solve_transpose_in_place_scratch::<usize, f64>(n, k, par);
        with_scratch(req, |stack| plu_solve::solve_transpose_in_place(f, f, p, xm, par, stack));
    } else {
        let req = plu_solve::solve_in_place_scratch::<usize, f64>(n, k, par);
        with_scratch(req, |stack| plu_solve::solve_in_place(f, f, p, xm, par, stack));
    }
    true
}

/// C += s op(A) op(B) (`library::gemm` says the layout). C is never one row
/// or column here (`library::gemm`), so faer splits C among threads, never
/// a sum.
#[allow(clippy::too_many_arguments)]
pub fn gemm(m: usize, k: usize, n: usize, a: &[f64], ta: bool, b: &[f64], tb: bool, s: f64, c: &mut [f64], par: Par) {
    fn view(x: &[f64], rows: usize, cols: usize, t: bool) -> MatRef<'_, f64> {
        if t {
            MatRef::from_row_major_slice(&x[..rows * cols], cols, rows).transpose()
        } else {
            MatRef::from_row_major_slice(&x[..rows * cols], rows, cols)
        }
    }
    let dst = MatMut::from_row_major_slice_mut(&mut c[..m * n], m, n);
    ::faer::linalg::matmul::matmul(dst, Accum::Add, view(a, m, k, ta), view(b, k, n, tb), s, par);
}
