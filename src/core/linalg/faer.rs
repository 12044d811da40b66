//! faer's kernels on views of our row-major slices, with no layout copies
//! (native builds only; `library.rs` says when each one runs, and on how
//! many threads: `Par::Seq`, or `Par::Rayon` for large matrices, which
//! gives the same bits, `tests/threads.rs`). `benches/linalg.rs` times these
//! same calls, sequential and on two threads.

use ::faer::dyn_stack::{MemBuffer, MemStack, StackReq};
use smallvec::SmallVec;
use std::cell::RefCell;
use ::faer::linalg::cholesky::llt::factor as llt;
use ::faer::linalg::lu::partial_pivoting::{factor as plu, solve as plu_solve};
use ::faer::linalg::matmul::triangular::{self as trimatmul, BlockStructure};
use ::faer::linalg::triangular_solve as tri;
use ::faer::perm::PermRef;
use ::faer::prelude::ReborrowMut;
use ::faer::{Accum, MatMut, MatRef, Par};

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

/// L with A = L Lᵀ into `l` (zeros above the diagonal), reading A's lower
/// triangle; false when a pivot is not positive.
pub fn cholesky(a: &[f64], n: usize, l: &mut [f64], par: Par) -> bool {
    let l = &mut l[..n * n];
    l.copy_from_slice(&a[..n * n]);
    let req = llt::cholesky_in_place_scratch::<f64>(n, par, Default::default());
    let m = MatMut::from_row_major_slice_mut(l, n, n);
    if with_scratch(req, |stack| llt::cholesky_in_place(m, Default::default(), par, stack, Default::default())).is_err() {
        return false;
    }
    for i in 0..n {
        l[i * n + i + 1..i * n + n].fill(0.0);
    }
    true
}

/// `cholesky_adjoint` solves for its result's lower triangle in blocks of
/// columns, n/8 of them but at least this many: larger blocks solve more
/// of the upper triangle for nothing (≈ 1.5·block/n of the work), smaller
/// ones split poorly across threads (2 threads, blocks of n/8 against 64:
/// 28 against 35 ms at n = 1000, 175 against 300 ms at n = 2000).
const LOWER_SOLVE_BLOCK: usize = 64;

/// Murray (2016) in matrix form, ACCUMULATED into `abar`:
/// Ā += sym(L⁻ᵀ Φ(Lᵀ L̄) L⁻¹), Φ the lower triangle with its diagonal halved.
///
/// sym(L⁻ᵀ Φ L⁻¹) = L⁻ᵀ M L⁻¹ with M = ½(Φ + Φᵀ) symmetric, so the result is
/// symmetric and only its lower triangle is solved for: Z = L⁻ᵀ M in full,
/// then Y = L⁻ᵀ Zᵀ from the diagonal down, column block by column block
/// (rows above a block's first column are never read by the rows below).
/// That is n³/3 + n³ + n³/3 flops, against 2n³ + n³/3 for two full solves.
pub fn cholesky_adjoint(l: &[f64], lbar: &[f64], n: usize, work: &mut [f64], abar: &mut [f64], par: Par) {
    let w = &mut work[..n * n];
    let lm = MatRef::from_row_major_slice(&l[..n * n], n, n);
    let lb = MatRef::from_row_major_slice(&lbar[..n * n], n, n);
    {
        // Only Φ's lower triangle is needed: ½ Lᵀ L̄ on the lower half.
        let m = MatMut::from_row_major_slice_mut(w, n, n);
        trimatmul::matmul(
            m,
            BlockStructure::TriangularLower,
            Accum::Replace,
            lm.transpose(),
            BlockStructure::TriangularUpper,
            lb,
            BlockStructure::TriangularLower,
            0.5,
            par,
        );
    }
    // M = ½(Φ + Φᵀ) is that lower half mirrored: Φ's halved diagonal is
    // the sum's two halves.
    for i in 0..n {
        for j in 0..i {
            w[j * n + i] = w[i * n + j];
        }
    }
    let mut z = MatMut::from_row_major_slice_mut(w, n, n);
    tri::solve_upper_triangular_in_place(lm.transpose(), z.rb_mut(), par); // Z = L⁻ᵀ M
    let mut y = z.transpose_mut(); // Zᵀ = M L⁻¹, overwritten by Y = L⁻ᵀ M L⁻¹
    let block = (n / 8).max(LOWER_SOLVE_BLOCK);
    for c0 in (0..n).step_by(block) {
        let c1 = (c0 + block).min(n);
        let cols = y.rb_mut().submatrix_mut(c0, c0, n - c0, c1 - c0);
        tri::solve_upper_triangular_in_place(lm.submatrix(c0, c0, n - c0, n - c0).transpose(), cols, par);
    }
    // Y[i][j] (i ≥ j) is w[j][i]: row j of w from its diagonal on.
    for j in 0..n {
        abar[j * n + j] += w[j * n + j];
        for i in j + 1..n {
            let v = w[j * n + i];
            abar[i * n + j] += v;
            abar[j * n + i] += v;
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

/// C += op(A) op(B) (`library::gemm` says the layout). C is never one row
/// or column here (`library::gemm`), so faer splits C among threads, never
/// a sum.
#[allow(clippy::too_many_arguments)]
pub fn gemm(m: usize, k: usize, n: usize, a: &[f64], ta: bool, b: &[f64], tb: bool, c: &mut [f64], par: Par) {
    fn view(x: &[f64], rows: usize, cols: usize, t: bool) -> MatRef<'_, f64> {
        if t {
            MatRef::from_row_major_slice(&x[..rows * cols], cols, rows).transpose()
        } else {
            MatRef::from_row_major_slice(&x[..rows * cols], rows, cols)
        }
    }
    let dst = MatMut::from_row_major_slice_mut(&mut c[..m * n], m, n);
    ::faer::linalg::matmul::matmul(dst, Accum::Add, view(a, m, k, ta), view(b, k, n, tb), 1.0, par);
}
