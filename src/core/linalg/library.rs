//! Where a library's kernel replaces the hand-written one. Each function
//! returns true when it computed the result, and false to leave the call to
//! the hand-written kernel, which decides every error and every non-finite
//! input (so messages and NaN rules stay word for word).
//!
//! The sizes come from `cargo bench --bench linalg` (library time ÷ ours at
//! n = 5 … 1000, in ARCHITECTURE.md): a library is used where it is within
//! 10% of ours or faster.
//! - nalgebra: triangular solves with one right-hand side, at every n.
//! - faer (native builds only: it would double the WebAssembly module):
//!   solves with a matrix right-hand side, and LU's transposed solves (the
//!   adjoint's), from n = 12; LU from n = 50; Cholesky from n = 90, its
//!   adjoint from n = 100; LU's solve of one right-hand side from n = 150.
//! - The hand-written kernels: everything smaller; under WebAssembly,
//!   everything but Cholesky from n = 150, which is tiled (`simd.rs`).
//! - Several threads (faer's, `threads.rs` says how many) for solves with a
//!   matrix right-hand side, their adjoints and products (faer's gemm, from
//!   the same size) of at least 600³ multiply-adds; for Cholesky and its
//!   adjoint from order 725, LU from 1200.

use nalgebra::{DMatrixView, DVectorViewMut};

/// LU's vector solve by faer from this order on.
#[cfg(not(target_arch = "wasm32"))]
const LARGE_FROM: usize = 150;
/// faer's Cholesky from this order on (`cargo bench --bench linalg`, one
/// thread, 2026-12-07, AMD EPYC): faer's call 14.3 µs at n = 80, 16.7 at
/// 90, 21.3 at 100, 31.9 at 120, against the hand-written kernel's 17.1,
/// 23.8, 32.5, 51.0, which include the symmetry check that faer's path
/// makes before the call (~1 ns a pair: 1.2 µs at 50, 5.2 at 100). (From
/// 150 until faer was given a column-major view, where it factors its
/// diagonal blocks with SIMD.)
#[cfg(not(target_arch = "wasm32"))]
const CHOLESKY_FROM: usize = 90;
/// Under WebAssembly, the tiled Cholesky (`simd::tiled_cholesky`) from this
/// order: below it, the WebAssembly build and the native one below
/// `CHOLESKY_FROM` share the hand-written kernel's bits.
#[cfg(target_arch = "wasm32")]
const TILED_FROM: usize = 150;
/// faer's (blocked) Cholesky adjoint from this order on: 0.69x ours at
/// 100, 0.92x at 80, 1.27x at 64 (one thread, 2026-12-02).
#[cfg(not(target_arch = "wasm32"))]
const ADJOINT_FROM: usize = 100;
/// faer's LU factorization from this order on.
#[cfg(not(target_arch = "wasm32"))]
const LU_FROM: usize = 50;
/// faer's partially pivoted LU on several threads from this order on: its
/// column panels run on one, so two threads gained nothing at n = 1000
/// (15.2 ms against 15.2–15.8) and lost at 600 (3.5 against 5.6–8.1), and
/// gained 1.1× at 1500, 1.25× at 2000 (2026-12-05).
#[cfg(not(target_arch = "wasm32"))]
const LU_PARALLEL_FROM: usize = 1200;
/// faer's solves when both the order and the right-hand side's columns
/// reach this (LU's transposed solves: the order alone).
#[cfg(not(target_arch = "wasm32"))]
const MATRIX_SOLVE_FROM: usize = 12;

/// faer on the calling thread only: below the sizes that follow, and for
/// one right-hand side (faer's parallel matrix-vector product splits its
/// sum, so its bits would depend on the thread count; O(n²) gains little).
#[cfg(not(target_arch = "wasm32"))]
const SEQ: ::faer::Par = ::faer::Par::Seq;

/// Several threads (`threads.rs` says how many) for a solve or product
/// when its n²k flops reach this order's n³ (`benches/linalg.rs`, `faer-2t`
/// against `faer-1t`), and for LU from `LU_PARALLEL_FROM`, Cholesky as
/// `cholesky_par` says.
#[cfg(not(target_arch = "wasm32"))]
const PARALLEL_FROM: usize = 600;

/// faer's parallelism for a Cholesky factorization or adjoint of order n:
/// several threads only where the O(n²) passes around it split too
/// (`parallel::splits`, from 2^19 values: n ≥ 725). From order 600, on two
/// threads, a compiled log-determinant took 7.7–10.3 ms at n = 600–650
/// against 5.6–8.1 on one, and 12.0–13.8 against 9.7–10.2 at 720; at 730,
/// 9.4–13.5 against 11.4–12.3, and 750–1000 gain (2026-12-06). Products
/// and matrix solves gain from 600 (1.2–1.5× at 650–700).
#[cfg(not(target_arch = "wasm32"))]
fn cholesky_par(n: usize) -> ::faer::Par {
    if !super::parallel::splits(n * n) {
        return SEQ;
    }
    par(n, n)
}

/// faer's parallelism for a kernel of order n with k right-hand columns.
#[cfg(not(target_arch = "wasm32"))]
fn par(n: usize, k: usize) -> ::faer::Par {
    if k < MATRIX_SOLVE_FROM {
        return SEQ;
    }
    par_for(n.saturating_mul(n).saturating_mul(k))
}

/// faer's parallelism for a kernel of `flops` multiply-adds.
#[cfg(not(target_arch = "wasm32"))]
fn par_for(flops: usize) -> ::faer::Par {
    if flops < PARALLEL_FROM * PARALLEL_FROM * PARALLEL_FROM {
        return SEQ;
    }
    match super::threads::for_kernel() {
        1 => SEQ,
        t => ::faer::Par::rayon(t),
    }
}

/// Run a faer kernel, then clear the vector registers' upper halves: its
/// wide kernels can return with them dirty, and every SSE instruction
/// after (the crate's baseline code, libm's functions) then waits on them. A GP
/// gradient at n = 50 ran 2.1× slower after one Hessian-vector product
/// (whose solve adjoints took faer's triangle product) until this.
#[cfg(not(target_arch = "wasm32"))]
fn faer<R>(kernel: impl FnOnce() -> R) -> R {
    let r = kernel();
    super::faer::clean_upper_state();
    r
}

/// Whether every entry is finite. (x · 0 is 0 for finite x and NaN
/// otherwise; summed in 8 lanes this vectorizes, where an early exit would
/// not: it costs a few percent of the solve it guards.)
#[cfg(not(target_arch = "wasm32"))]
fn finite(xs: &[f64]) -> bool {
    let mut acc = [0.0f64; 8];
    let chunks = xs.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for (a, x) in acc.iter_mut().zip(c) {
            *a += x * 0.0;
        }
    }
    acc.iter().chain(rest).fold(0.0, |s, x| s + x * 0.0) == 0.0
}

/// max |x| if every entry is finite, by chunks (on several threads when
/// long; a maximum does not depend on the order it is taken in).
#[cfg(not(target_arch = "wasm32"))]
fn finite_max_abs(xs: &[f64]) -> Option<f64> {
    let m = super::parallel::max_chunks(xs.len(), |range| {
        let xs = &xs[range];
        let mut acc = [0.0f64; 8];
        let chunks = xs.chunks_exact(8);
        let rest = chunks.remainder();
        for c in chunks {
            for (a, x) in acc.iter_mut().zip(c) {
                *a = a.max(x.abs());
            }
        }
        let m = acc.iter().chain(rest).fold(0.0f64, |m, x| m.max(x.abs()));
        // max ignores NaN, so finiteness is asked separately.
        if m.is_finite() && finite(xs) { m } else { f64::INFINITY }
    });
    m.is_finite().then_some(m)
}

/// Whether every entry of an n-column matrix is finite, by bands of rows
/// (on several threads when large).
#[cfg(not(target_arch = "wasm32"))]
fn finite_rows(a: &[f64], n: usize) -> bool {
    super::parallel::all_rows(a.len() / n.max(1), n, |rows| finite(&a[rows.start * n..rows.end * n]))
}

/// Whether T's own triangle (diagonal included) is finite. Below order 64
/// the whole matrix is tried first, in one pass: the other triangle is
/// usually finite too (a factor's zeros), and row by row the short rows
/// cost more than the entries (a SEM's 12×12 solves: 5% of its Hessian).
#[cfg(not(target_arch = "wasm32"))]
fn finite_triangle(t: &[f64], n: usize, lower: bool) -> bool {
    if n < 64 && finite(&t[..n * n]) {
        return true;
    }
    super::parallel::all_triangle_rows(n, lower, |rows| rows.into_iter().all(|i| finite(if lower { &t[i * n..i * n + i + 1] } else { &t[i * n + i..i * n + n] })))
}

pub fn cholesky(a: &[f64], n: usize, l: &mut [f64]) -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    if n >= CHOLESKY_FROM && finite_rows(&a[..n * n], n) && super::cholesky::symmetric(a, n) {
        return faer(|| super::faer::cholesky(a, n, l, cholesky_par(n)));
    }
    #[cfg(target_arch = "wasm32")]
    if n >= TILED_FROM {
        return super::simd::tiled_cholesky(a, n, l);
    }
    let _ = (a, n, l);
    false
}

pub fn cholesky_adjoint(l: &[f64], lbar: &[f64], n: usize, work: &mut [f64], abar: &mut [f64], assign: bool) -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    if n >= ADJOINT_FROM && finite_triangle(l, n, true) && finite_triangle(lbar, n, true) {
        faer(|| super::faer::cholesky_adjoint(l, lbar, n, work, abar, cholesky_par(n), assign));
        return true;
    }
    let _ = (l, lbar, n, work, abar, assign);
    false
}

/// T X = B (or Tᵀ X = B when `transposed`, the adjoint's solve).
pub fn triangular_solve(t: &[f64], n: usize, lower: bool, b: &[f64], k: usize, x: &mut [f64], transposed: bool) -> bool {
    if k == 1 {
        return nalgebra_vector_solve(t, n, lower, b, x, transposed);
    }
    #[cfg(not(target_arch = "wasm32"))]
    if n >= MATRIX_SOLVE_FROM && k >= MATRIX_SOLVE_FROM && finite_triangle(t, n, lower) && finite_rows(&b[..n * k], k) {
        faer(|| super::faer::triangular_solve(t, n, lower, b, k, x, transposed, par(n, k)));
        return true;
    }
    false
}

/// The solve's adjoint for T with a matrix right-hand side: T̄ −= B̄ Xᵀ on
/// T's triangle as one blocked product (the hand-written kernel takes a dot
/// product per entry: 22% of a GP Hessian-vector product at n = 200).
pub fn triangular_solve_tbar(n: usize, lower: bool, bbar: &[f64], x: &[f64], k: usize, tbar: &mut [f64], assign: bool) -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    if n >= MATRIX_SOLVE_FROM && k >= MATRIX_SOLVE_FROM && finite_rows(&bbar[..n * k], k) && finite_rows(&x[..n * k], k) {
        if assign {
            super::parallel::zero(&mut tbar[..n * n]);
        }
        faer(|| super::faer::triangular_solve_tbar(n, lower, bbar, x, k, tbar, par(n, k)));
        return true;
    }
    let _ = (n, lower, bbar, x, k, tbar, assign);
    false
}

/// faer's products of lower triangles from this order on (`lower_matmul`
/// in benches/linalg.rs: 1.1× ours at n = 50, 0.53× at 100).
#[cfg(not(target_arch = "wasm32"))]
const TRIANGLE_PRODUCT_FROM: usize = 64;

/// The three products of `lower_matmul` and its adjoint, each on two
/// lower triangles `x` and `y`.
pub enum LowerProduct {
    /// out = tril(x) tril(y)
    Forward,
    /// out += tril(tril(x) tril(y)ᵀ): Ā from x = Ȳ, y = B
    AdjointA,
    /// out += tril(tril(x)ᵀ tril(y)): B̄ from x = A, y = Ȳ
    AdjointB,
}

/// A `LowerProduct` by faer when the triangles it reads are finite.
pub fn lower_matmul(which: LowerProduct, x: &[f64], y: &[f64], n: usize, out: &mut [f64]) -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    if n >= TRIANGLE_PRODUCT_FROM && finite_triangle(x, n, true) && finite_triangle(y, n, true) {
        let par = par_for(n.saturating_mul(n).saturating_mul(n) / 6);
        faer(|| match which {
            LowerProduct::Forward => super::faer::lower_matmul(x, y, n, out, par),
            LowerProduct::AdjointA => super::faer::lower_matmul_abar(x, y, n, out, par),
            LowerProduct::AdjointB => super::faer::lower_matmul_bbar(x, y, n, out, par),
        });
        return true;
    }
    let _ = (which, x, y, n, out);
    false
}

/// One right-hand side with nalgebra, on a column-major view of T, which is
/// Tᵀ: its `tr_solve_*` solve T itself (by dot products of T's rows, as
/// ours), its `solve_*` solve Tᵀ. False at a zero pivot, which the
/// hand-written kernel turns into ±Infinity/NaN.
fn nalgebra_vector_solve(t: &[f64], n: usize, lower: bool, b: &[f64], x: &mut [f64], transposed: bool) -> bool {
    let x = &mut x[..n];
    x.copy_from_slice(&b[..n]);
    let tt = DMatrixView::from_slice(&t[..n * n], n, n);
    let mut xv = DVectorViewMut::from_slice(x, n);
    match (lower, transposed) {
        (true, false) => tt.tr_solve_upper_triangular_mut(&mut xv),
        (false, false) => tt.tr_solve_lower_triangular_mut(&mut xv),
        (true, true) => tt.solve_upper_triangular_mut(&mut xv),
        (false, true) => tt.solve_lower_triangular_mut(&mut xv),
    }
}

/// P A = L U; accepted only when every pivot clears the hand-written
/// kernel's singularity tolerance (n ε max|A|) and is finite.
pub fn lu_factor(a: &[f64], n: usize, lu: &mut [f64], perm: &mut [f64]) -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    if let Some(amax) = (n >= LU_FROM).then(|| finite_max_abs(&a[..n * n])).flatten() {
        let par = if n >= LU_PARALLEL_FROM { par(n, n) } else { SEQ };
        faer(|| super::faer::lu_factor(a, n, lu, perm, par));
        let tol = n as f64 * f64::EPSILON * amax;
        return (0..n).all(|j| {
            let p = lu[j * n + j].abs();
            p.is_finite() && p > tol
        });
    }
    let _ = (a, n, lu, perm);
    false
}

/// A⁻¹ B, or A⁻ᵀ B when `transposed`, from packed factors.
pub fn lu_solve(lu: &[f64], perm: &[f64], n: usize, b: &[f64], k: usize, x: &mut [f64], transposed: bool) -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    if n >= MATRIX_SOLVE_FROM
        && (transposed || k >= MATRIX_SOLVE_FROM || n >= LARGE_FROM)
        && finite_rows(&lu[..n * n], n)
        && finite_rows(&b[..n * k], k)
    {
        return faer(|| super::faer::lu_solve(lu, perm, n, b, k, x, transposed, par(n, k)));
    }
    let _ = (lu, perm, n, b, k, x, transposed);
    false
}

/// Ā −= B̄ Xᵀ (B̄, X n×k), the adjoint of A in X = A⁻¹ B, by faer's gemm
/// (on several threads when large) where the hand-written loop of dots
/// is slower: k ≥ `MATRIX_SOLVE_FROM`, all entries finite.
pub fn sub_outer(n: usize, bbar: &[f64], x: &[f64], k: usize, abar: &mut [f64]) -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    if n >= MATRIX_SOLVE_FROM && k >= MATRIX_SOLVE_FROM && finite_rows(&bbar[..n * k], k) && finite_rows(&x[..n * k], k) {
        let par = par_for(n.saturating_mul(n).saturating_mul(k));
        faer(|| super::faer::gemm(n, k, n, bbar, false, x, true, -1.0, abar, par));
        return true;
    }
    let _ = (n, bbar, x, k, abar);
    false
}

/// Products from this many multiply-adds (m k n) go to faer's gemm, on one
/// thread or several: chosen by size, never by thread count, so the bits
/// are the same at any cap. C at least this wide and tall: faer's parallel
/// matrix-vector product (one row or column) splits its sum.
#[cfg(not(target_arch = "wasm32"))]
const GEMM_FROM: usize = PARALLEL_FROM * PARALLEL_FROM * PARALLEL_FROM;
#[cfg(not(target_arch = "wasm32"))]
const GEMM_SIDE_FROM: usize = 16;

/// C += op(A) op(B) as `gemm` lays it out, by faer on the calling thread:
/// for products short of `gemm`'s sizes and past `small_gemm`'s, where
/// faer's kernels beat nalgebra's, which allocate and pack (the mlp's
/// 64×8×32 products); false under WebAssembly, which keeps nalgebra's.
#[allow(clippy::too_many_arguments)]
pub fn gemm_here(m: usize, k: usize, n: usize, a: &[f64], ta: bool, b: &[f64], tb: bool, c: &mut [f64]) -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    {
        faer(|| super::faer::gemm(m, k, n, a, ta, b, tb, 1.0, c, SEQ));
        true
    }
    #[cfg(target_arch = "wasm32")]
    {
        let _ = (m, k, n, a, ta, b, tb, c);
        false
    }
}

/// C += op(A) op(B), C m×n row-major (`kernels::matrix::gemm`'s layout: A
/// stored m×k, or k×m when `ta`; B k×n, or n×k when `tb`), by faer when
/// the product is large; false to leave it to the caller's kernel.
#[allow(clippy::too_many_arguments)]
pub fn gemm(m: usize, k: usize, n: usize, a: &[f64], ta: bool, b: &[f64], tb: bool, c: &mut [f64]) -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    if m >= GEMM_SIDE_FROM && n >= GEMM_SIDE_FROM && m.saturating_mul(k).saturating_mul(n) >= GEMM_FROM {
        let par = par_for(m.saturating_mul(k).saturating_mul(n));
        faer(|| super::faer::gemm(m, k, n, a, ta, b, tb, 1.0, c, par));
        return true;
    }
    let _ = (m, k, n, a, ta, b, tb, c);
    false
}
