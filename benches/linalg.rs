//! `cargo bench --bench linalg --features linalg-bench`: the hand-written
//! kernels of `src/core/linalg/` (`linalg::hand`) against nalgebra 0.35 and
//! faer, at n = 5, 12, 50, 100, 150, 200, 500, 1000; `package` is what the
//! package runs (`linalg::library` picks per size).
//!
//! Every contender reads and writes the same data as ours: row-major `f64`
//! slices, as the arena holds them. A is X Xᵀ + n I (X from a fixed LCG),
//! L = cholesky(A), U = Lᵀ, B an n×n LCG matrix, b an LCG vector.
//!
//! - `ours`: the hand-written kernel.
//! - `package`: the public function, hand-written or a library's by size
//!   (from n = 600 on the machine's threads; `TANGENT_GRAD_THREADS=1` for one).
//! - `nalgebra`: a drop-in, from and back to our row-major slices. It uses
//!   zero-copy views where the layout allows (a row-major triangle viewed
//!   column-major is its transpose, so `tr_solve_*` solves the original),
//!   and transposing copies where it does not (matrix right-hand sides,
//!   Cholesky's output, LU's input).
//!   Cholesky's drop-ins also run our symmetry check (its error is pinned).
//! - `nalgebra-packed` (LU): nalgebra's factorization unpacked into the
//!   arena's packed layout, the drop-in `lu_factor` would need.
//! - `nalgebra-kernel`: nalgebra's call alone on data already in its
//!   column-major layout (only the copy the call itself consumes), to
//!   separate the conversion cost from the kernel.
//! - `faer-1t` / `faer-2t`: the package's faer calls (`linalg::faer`: views
//!   of our row-major slices, no layout copies), `Par::Seq` and
//!   `Par::rayon(2)` (2-thread only at n >= 200).
//!
//! Before anything is timed, each contender's result is checked against ours:
//! max |theirs - ours| / max |ours| <= 1e-10, and the difference is printed.
//! Group names are `op/n=N`; `-- 'n=(200|500|1000)/'` reruns the big sizes.

use criterion::{black_box, BenchmarkGroup, Criterion, SamplingMode};
use criterion::measurement::WallTime;
use std::time::Duration;
use tangent_grad::core::linalg;

use faer::Par;
use nalgebra::{DMatrix, DMatrixView, DVectorViewMut};

const SIZES: [usize; 8] = [5, 12, 50, 100, 150, 200, 500, 1000];

/// Small fixed-seed LCG producing values in [-1, 1) (as linalg.rs's tests).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }
    fn fill(&mut self, len: usize) -> Vec<f64> {
        (0..len).map(|_| self.next()).collect()
    }
}

struct Data {
    n: usize,
    a: Vec<f64>,    // SPD, row-major
    l: Vec<f64>,    // ours: cholesky(a)
    u: Vec<f64>,    // Lᵀ, row-major
    b: Vec<f64>,    // vector rhs
    bm: Vec<f64>,   // n×n rhs, row-major
    lbar: Vec<f64>, // adjoint of L (lower read)
}

fn data(n: usize) -> Data {
    let mut r = Lcg(0x5EED ^ n as u64);
    let x = r.fill(n * n);
    let mut a = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            let mut s = 0.0;
            for k in 0..n {
                s += x[i * n + k] * x[j * n + k];
            }
            a[i * n + j] = s;
        }
        a[i * n + i] += n as f64;
    }
    let mut l = vec![0.0; n * n];
    linalg::hand::cholesky(&a, n, &mut l).unwrap();
    let u = transpose(&l, n, n);
    let b = r.fill(n);
    let bm = r.fill(n * n);
    let lbar = r.fill(n * n);
    Data { n, a, l, u, b, bm, lbar }
}

fn transpose(a: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    let mut t = vec![0.0; rows * cols];
    for i in 0..rows {
        for j in 0..cols {
            t[j * rows + i] = a[i * cols + j];
        }
    }
    t
}

/// Max |x - y| / max |y|; panics above 1e-10 (a bench of a wrong answer is
/// no bench).
fn agree(what: &str, n: usize, theirs: &[f64], ours: &[f64]) {
    assert_eq!(theirs.len(), ours.len(), "{what} n={n}: length");
    let scale = ours.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(f64::MIN_POSITIVE);
    let diff = theirs.iter().zip(ours).fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
    let rel = diff / scale;
    println!("check {what:<34} n={n:<5} max rel diff {rel:.2e}");
    assert!(rel <= 1e-10, "{what} n={n}: relative difference {rel:e} > 1e-10");
}

fn group<'a>(c: &'a mut Criterion, op: &str, n: usize) -> BenchmarkGroup<'a, WallTime> {
    let mut g = c.benchmark_group(format!("{op}/n={n}"));
    if n <= 50 {
        g.sample_size(30).warm_up_time(Duration::from_millis(200)).measurement_time(Duration::from_millis(600));
    } else if n <= 200 {
        g.sample_size(15)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_millis(1000))
            .sampling_mode(SamplingMode::Flat);
    } else {
        g.sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_millis(1500))
            .sampling_mode(SamplingMode::Flat);
    }
    g
}

fn pars(n: usize) -> Vec<(&'static str, Par)> {
    let mut v = vec![("faer-1t", Par::Seq)];
    if n >= 200 {
        v.push(("faer-2t", Par::rayon(2)));
    }
    v
}

// ---------------------------------------------------------------------------
// Contenders: each writes its result where ours does, in our layout.
// ---------------------------------------------------------------------------

/// The symmetry check `linalg::cholesky` runs before factoring (same test,
/// same order). Its error message is pinned by the tests, so a drop-in keeps
/// it; the library drop-ins below run it too, so all three pay the same.
fn symmetry_check(a: &[f64], n: usize) -> bool {
    for i in 0..n {
        for j in i + 1..n {
            let (x, y) = (a[i * n + j], a[j * n + i]);
            if x.is_nan() || y.is_nan() {
                continue;
            }
            if (x - y).abs() > 1e-10 * x.abs().max(y.abs()) {
                return false;
            }
        }
    }
    true
}

/// nalgebra drop-in: A (symmetric, checked, so its row-major slice is also
/// its column-major one) → Cholesky → L written back row-major, zeros above.
fn na_cholesky(a: &[f64], n: usize, out: &mut [f64]) {
    assert!(symmetry_check(a, n));
    let c = nalgebra::linalg::Cholesky::new(DMatrix::from_column_slice(n, n, a)).unwrap();
    let l = c.l_dirty();
    for i in 0..n {
        for j in 0..n {
            out[i * n + j] = if j <= i { l[(i, j)] } else { 0.0 };
        }
    }
}

/// The package's faer call (`linalg::faer`), after the same symmetry check.
fn faer_cholesky(a: &[f64], n: usize, out: &mut [f64], par: Par) {
    assert!(symmetry_check(a, n));
    assert!(linalg::faer::cholesky(a, n, out, par));
}

/// Murray (2016) in matrix form: Ā = sym(L⁻ᵀ Φ(Lᵀ L̄) L⁻¹), Φ = lower
/// triangle with the diagonal halved; what a library-based adjoint would do
/// (its solves are the "solves the adjoint needs"). nalgebra, column-major
/// inputs (L, L̄ as DMatrix); result symmetric, so layout-free.
fn na_cholesky_adjoint(l: &DMatrix<f64>, lbar: &DMatrix<f64>, abar: &mut [f64]) {
    let n = l.nrows();
    let mut m = l.tr_mul(&lbar.lower_triangle());
    for j in 0..n {
        m[(j, j)] *= 0.5;
        for i in 0..j {
            m[(i, j)] = 0.0;
        }
    }
    l.tr_solve_lower_triangular_mut(&mut m); // S = L⁻ᵀ Φ
    let mut st = m.transpose();
    l.tr_solve_lower_triangular_mut(&mut st); // (S L⁻¹)ᵀ = L⁻ᵀ Sᵀ
    for i in 0..n {
        for j in 0..n {
            abar[i * n + j] += 0.5 * (st[(i, j)] + st[(j, i)]);
        }
    }
}

/// The same by the package's faer call (Murray's matrix form).
fn faer_cholesky_adjoint(l: &[f64], lbar: &[f64], n: usize, w: &mut [f64], abar: &mut [f64], par: Par) {
    linalg::faer::cholesky_adjoint(l, lbar, n, w, abar, par, false)
}

#[derive(Clone, Copy, PartialEq)]
enum Tri {
    Lower,      // L X = B
    Upper,      // U X = B
    LowerTrans, // Lᵀ X = B (the adjoint's solve, triangular_solve_bbar)
}

/// Ours: the kernel each case runs in the plan.
fn ours_tri(d: &Data, tri: Tri, rhs: &[f64], k: usize, out: &mut [f64]) {
    let n = d.n;
    match tri {
        Tri::Lower => linalg::hand::triangular_solve(&d.l, n, true, rhs, k, out),
        Tri::Upper => linalg::hand::triangular_solve(&d.u, n, false, rhs, k, out),
        Tri::LowerTrans => linalg::hand::triangular_solve_bbar(&d.l, n, true, rhs, k, out),
    }
}

/// What the package runs (`src/core/linalg/library.rs` picks).
fn package_tri(d: &Data, tri: Tri, rhs: &[f64], k: usize, out: &mut [f64]) {
    let n = d.n;
    match tri {
        Tri::Lower => linalg::triangular_solve(&d.l, n, true, rhs, k, out),
        Tri::Upper => linalg::triangular_solve(&d.u, n, false, rhs, k, out),
        Tri::LowerTrans => linalg::triangular_solve_bbar(&d.l, n, true, rhs, k, out),
    }
}

/// nalgebra drop-in. A row-major triangle T viewed column-major is Tᵀ, so
/// the vector cases are zero-copy (`tr_solve_*` on the view solves T). A
/// matrix right-hand side is transposed into column-major and back.
fn na_tri(d: &Data, tri: Tri, rhs: &[f64], k: usize, out: &mut [f64]) {
    let n = d.n;
    let (t, trans_view) = match tri {
        Tri::Lower => (&d.l, true),
        Tri::Upper => (&d.u, true),
        Tri::LowerTrans => (&d.l, false),
    };
    let tv = DMatrixView::from_slice(t, n, n); // = Tᵀ
    let solve = |x: &mut nalgebra::DMatrixViewMut<f64>| match tri {
        Tri::Lower => tv.tr_solve_upper_triangular_mut(x),  // (Lᵀ)ᵀ x = b
        Tri::Upper => tv.tr_solve_lower_triangular_mut(x),  // (Uᵀ)ᵀ x = b
        Tri::LowerTrans => tv.solve_upper_triangular_mut(x), // Lᵀ x = b
    };
    let _ = trans_view;
    if k == 1 {
        out.copy_from_slice(rhs);
        let mut x = nalgebra::DMatrixViewMut::from_slice(out, n, 1);
        assert!(solve(&mut x));
    } else {
        let mut bm = DMatrix::from_row_slice(n, k, rhs);
        let mut x = bm.as_view_mut();
        assert!(solve(&mut x));
        for i in 0..n {
            for j in 0..k {
                out[i * k + j] = bm[(i, j)];
            }
        }
    }
}

/// nalgebra's call alone: column-major triangle and right-hand side
/// prepared (not timed); the copy of B the in-place solve consumes is timed.
fn na_tri_kernel(t_cm: &DMatrix<f64>, tri: Tri, b_cm: &DMatrix<f64>) -> DMatrix<f64> {
    let mut x = b_cm.clone();
    let ok = match tri {
        Tri::Lower => t_cm.solve_lower_triangular_mut(&mut x),
        Tri::Upper => t_cm.solve_upper_triangular_mut(&mut x),
        Tri::LowerTrans => t_cm.tr_solve_lower_triangular_mut(&mut x),
    };
    assert!(ok);
    x
}

fn faer_tri(d: &Data, tri: Tri, rhs: &[f64], k: usize, out: &mut [f64], par: Par) {
    let n = d.n;
    match tri {
        Tri::Lower => linalg::faer::triangular_solve(&d.l, n, true, rhs, k, out, false, par),
        Tri::Upper => linalg::faer::triangular_solve(&d.u, n, false, rhs, k, out, false, par),
        Tri::LowerTrans => linalg::faer::triangular_solve(&d.l, n, true, rhs, k, out, true, par),
    }
}

/// faer's factors in the arena's packed layout, as the package keeps them.
struct FaerLu {
    lu: Vec<f64>,
    perm: Vec<f64>,
}

fn faer_lu_factor(a: &[f64], n: usize, f: &mut FaerLu, par: Par) {
    linalg::faer::lu_factor(a, n, &mut f.lu, &mut f.perm, par)
}

#[allow(clippy::too_many_arguments)]
fn faer_lu_solve(f: &FaerLu, n: usize, rhs: &[f64], k: usize, out: &mut [f64], trans: bool, par: Par) {
    assert!(linalg::faer::lu_solve(&f.lu, &f.perm, n, rhs, k, out, trans, par));
}

/// nalgebra's LU as a drop-in for `lu_factor`: factor a column-major copy,
/// then unpack L, U and P into the arena's packed layout.
fn na_lu_packed(a: &[f64], n: usize, lu: &mut [f64], perm: &mut [f64]) {
    let (p, l, u) = nalgebra::linalg::LU::new(DMatrix::from_row_slice(n, n, a)).unpack();
    for i in 0..n {
        for j in 0..n {
            lu[i * n + j] = if j < i { l[(i, j)] } else { u[(i, j)] };
        }
    }
    let mut rows = nalgebra::DVector::from_fn(n, |i, _| i as f64);
    p.permute_rows(&mut rows);
    perm[..n].copy_from_slice(rows.as_slice());
}

/// nalgebra drop-in LU solve: the factorization lives in nalgebra's own
/// object (it cannot be read back into our packed `lu`/`perm` without
/// unpacking); a matrix right-hand side is transposed in and out.
fn na_lu_solve(lu: &nalgebra::linalg::LU<f64, nalgebra::Dyn, nalgebra::Dyn>, n: usize, rhs: &[f64], k: usize, out: &mut [f64]) {
    if k == 1 {
        out.copy_from_slice(rhs);
        let mut x = DVectorViewMut::from_slice(out, n);
        assert!(lu.solve_mut(&mut x));
    } else {
        let mut bm = DMatrix::from_row_slice(n, k, rhs);
        assert!(lu.solve_mut(&mut bm));
        for i in 0..n {
            for j in 0..k {
                out[i * k + j] = bm[(i, j)];
            }
        }
    }
}

// ---------------------------------------------------------------------------

fn bench_size(c: &mut Criterion, n: usize) {
    let d = data(n);
    let nn = n * n;
    let mut out = vec![0.0; nn];
    let mut out2 = vec![0.0; nn];

    // --- Products of lower triangles (Cholesky's tangent) and an adjoint ---
    {
        linalg::lower_matmul(&d.l, &d.l, n, &mut out);
        linalg::hand::lower_matmul(&d.l, &d.l, n, &mut out2);
        agree("lower_matmul package", n, &out, &out2);
        let mut g = group(c, "lower_matmul", n);
        g.bench_function("ours", |bch| bch.iter(|| linalg::hand::lower_matmul(black_box(&d.l), &d.l, n, &mut out)));
        g.bench_function("package", |bch| bch.iter(|| linalg::lower_matmul(black_box(&d.l), &d.l, n, &mut out)));
        g.bench_function("ours-adjoint-b", |bch| bch.iter(|| linalg::hand::lower_matmul_bbar(black_box(&d.l), &d.l, n, &mut out)));
        g.bench_function("package-adjoint-b", |bch| bch.iter(|| linalg::lower_matmul_bbar(black_box(&d.l), &d.l, n, &mut out)));
        g.finish();
    }

    // --- Cholesky -----------------------------------------------------------
    {
        na_cholesky(&d.a, n, &mut out);
        agree("cholesky nalgebra", n, &out, &d.l);
        let a_cm = DMatrix::from_column_slice(n, n, &d.a);
        let pars = pars(n);
        for &(_, par) in &pars {
            faer_cholesky(&d.a, n, &mut out, par);
            agree("cholesky faer", n, &out, &d.l);
        }
        let mut g = group(c, "cholesky", n);
        g.bench_function("ours", |bch| bch.iter(|| linalg::hand::cholesky(black_box(&d.a), n, &mut out).unwrap()));
        g.bench_function("package", |bch| bch.iter(|| linalg::cholesky(black_box(&d.a), n, &mut out).unwrap()));
        g.bench_function("nalgebra", |bch| bch.iter(|| na_cholesky(black_box(&d.a), n, &mut out)));
        g.bench_function("nalgebra-kernel", |bch| {
            bch.iter(|| nalgebra::linalg::Cholesky::new(black_box(&a_cm).clone()).unwrap())
        });
        g.bench_function("symmetry-check", |bch| bch.iter(|| symmetry_check(black_box(&d.a), n)));
        for &(name, par) in &pars {
            g.bench_function(name, |bch| bch.iter(|| faer_cholesky(black_box(&d.a), n, &mut out, par)));
        }
        g.finish();
    }

    // --- Cholesky adjoint ----------------------------------------------------
    {
        let mut work = vec![0.0; nn];
        let mut ours = vec![0.0; nn];
        linalg::hand::cholesky_adjoint(&d.l, &d.lbar, n, &mut work, &mut ours, false);
        let l_cm = DMatrix::from_row_slice(n, n, &d.l);
        let lbar_cm = DMatrix::from_row_slice(n, n, &d.lbar);
        out.fill(0.0);
        na_cholesky_adjoint(&l_cm, &lbar_cm, &mut out);
        agree("cholesky_adjoint nalgebra (matrix form)", n, &out, &ours);
        let pars = pars(n);
        for &(_, par) in &pars {
            out.fill(0.0);
            faer_cholesky_adjoint(&d.l, &d.lbar, n, &mut work, &mut out, par);
            agree("cholesky_adjoint faer (matrix form)", n, &out, &ours);
        }
        let mut g = group(c, "cholesky_adjoint", n);
        g.bench_function("ours", |bch| {
            bch.iter(|| {
                out.fill(0.0);
                linalg::hand::cholesky_adjoint(black_box(&d.l), black_box(&d.lbar), n, &mut work, &mut out, false)
            })
        });
        g.bench_function("package", |bch| {
            bch.iter(|| {
                out.fill(0.0);
                linalg::cholesky_adjoint(black_box(&d.l), black_box(&d.lbar), n, &mut work, &mut out, false)
            })
        });
        g.bench_function("nalgebra-kernel", |bch| {
            bch.iter(|| {
                out.fill(0.0);
                na_cholesky_adjoint(black_box(&l_cm), black_box(&lbar_cm), &mut out)
            })
        });
        for &(name, par) in &pars {
            g.bench_function(name, |bch| {
                bch.iter(|| {
                    out.fill(0.0);
                    faer_cholesky_adjoint(black_box(&d.l), black_box(&d.lbar), n, &mut work, &mut out, par)
                })
            });
        }
        g.finish();
    }

    // --- Triangular solves ---------------------------------------------------
    for (op, tri) in [("trsolve_lower", Tri::Lower), ("trsolve_upper", Tri::Upper), ("trsolve_lowerT_adj", Tri::LowerTrans)] {
        for (rhs, k, kind) in [(&d.b, 1usize, "vec"), (&d.bm, n, "mat")] {
            let len = n * k;
            let name = format!("{op}_{kind}");
            ours_tri(&d, tri, rhs, k, &mut out[..len]);
            let ours = out[..len].to_vec();
            na_tri(&d, tri, rhs, k, &mut out2[..len]);
            agree(&format!("{name} nalgebra"), n, &out2[..len], &ours);
            let t_cm = match tri {
                Tri::Lower | Tri::LowerTrans => DMatrix::from_row_slice(n, n, &d.l),
                Tri::Upper => DMatrix::from_row_slice(n, n, &d.u),
            };
            let b_cm = DMatrix::from_row_slice(n, k, rhs);
            let x = na_tri_kernel(&t_cm, tri, &b_cm);
            agree(&format!("{name} nalgebra-kernel"), n, &transpose(x.as_slice(), k, n), &ours);
            let pars = pars(n);
            for &(_, par) in &pars {
                faer_tri(&d, tri, rhs, k, &mut out2[..len], par);
                agree(&format!("{name} faer"), n, &out2[..len], &ours);
            }
            let mut g = group(c, &name, n);
            g.bench_function("ours", |bch| bch.iter(|| ours_tri(&d, tri, black_box(rhs), k, &mut out[..len])));
            g.bench_function("package", |bch| bch.iter(|| package_tri(&d, tri, black_box(rhs), k, &mut out[..len])));
            g.bench_function("nalgebra", |bch| bch.iter(|| na_tri(&d, tri, black_box(rhs), k, &mut out[..len])));
            if k > 1 {
                g.bench_function("nalgebra-kernel", |bch| bch.iter(|| na_tri_kernel(&t_cm, tri, black_box(&b_cm))));
            }
            for &(pname, par) in &pars {
                g.bench_function(pname, |bch| bch.iter(|| faer_tri(&d, tri, black_box(rhs), k, &mut out[..len], par)));
            }
            g.finish();
        }
    }

    // --- LU ------------------------------------------------------------------
    {
        let mut lu = vec![0.0; nn];
        let mut perm = vec![0.0; n];
        linalg::hand::lu_factor(&d.a, n, &mut lu, &mut perm).unwrap();
        let a_cm = DMatrix::from_row_slice(n, n, &d.a);
        let na_lu = nalgebra::linalg::LU::new(a_cm.clone());
        let mut flu = FaerLu { lu: vec![0.0; nn], perm: vec![0.0; n] };
        let pars = pars(n);
        for &(_, par) in &pars {
            faer_lu_factor(&d.a, n, &mut flu, par);
            agree("lu_factor faer (packed LU)", n, &flu.lu, &lu);
            assert_eq!(flu.perm, perm, "lu_factor faer n={n}: permutation differs");
        }
        // nalgebra's packed factors are private: a drop-in unpacks them into
        // the arena's layout (`nalgebra-packed`, timed below).
        {
            let (mut packed, mut np) = (vec![0.0; nn], vec![0.0; n]);
            na_lu_packed(&d.a, n, &mut packed, &mut np);
            agree("lu_factor nalgebra (unpacked LU)", n, &packed, &lu);
            assert_eq!(np, perm, "lu_factor nalgebra n={n}: permutation differs");
        }
        let mut g = group(c, "lu_factor", n);
        g.bench_function("ours", |bch| bch.iter(|| linalg::hand::lu_factor(black_box(&d.a), n, &mut lu, &mut perm).unwrap()));
        g.bench_function("package", |bch| bch.iter(|| linalg::lu_factor(black_box(&d.a), n, &mut lu, &mut perm).unwrap()));
        g.bench_function("nalgebra", |bch| {
            bch.iter(|| nalgebra::linalg::LU::new(DMatrix::from_row_slice(n, n, black_box(&d.a))))
        });
        g.bench_function("nalgebra-kernel", |bch| bch.iter(|| nalgebra::linalg::LU::new(black_box(&a_cm).clone())));
        g.bench_function("nalgebra-packed", |bch| bch.iter(|| na_lu_packed(black_box(&d.a), n, &mut lu, &mut perm)));
        for &(name, par) in &pars {
            g.bench_function(name, |bch| bch.iter(|| faer_lu_factor(black_box(&d.a), n, &mut flu, par)));
        }
        g.finish();

        faer_lu_factor(&d.a, n, &mut flu, Par::Seq);
        for trans in [false, true] {
            for (rhs, k, kind) in [(&d.b, 1usize, "vec"), (&d.bm, n, "mat")] {
                let len = n * k;
                let name = format!("{}_{kind}", if trans { "lu_solve_transpose_adj" } else { "lu_solve" });
                let run_ours = |out: &mut [f64]| {
                    if trans {
                        linalg::hand::lu_solve_transpose(&lu, &perm, n, rhs, k, out)
                    } else {
                        linalg::hand::lu_solve(&lu, &perm, n, rhs, k, out)
                    }
                };
                run_ours(&mut out[..len]);
                let ours = out[..len].to_vec();
                if !trans {
                    na_lu_solve(&na_lu, n, rhs, k, &mut out2[..len]);
                    agree(&format!("{name} nalgebra"), n, &out2[..len], &ours);
                }
                for &(_, par) in &pars {
                    faer_lu_solve(&flu, n, rhs, k, &mut out2[..len], trans, par);
                    agree(&format!("{name} faer"), n, &out2[..len], &ours);
                }
                let mut g = group(c, &name, n);
                g.bench_function("ours", |bch| bch.iter(|| run_ours(black_box(&mut out[..len]))));
                g.bench_function("package", |bch| {
                    bch.iter(|| {
                        let out = black_box(&mut out[..len]);
                        if trans {
                            linalg::lu_solve_transpose(&lu, &perm, n, rhs, k, out)
                        } else {
                            linalg::lu_solve(&lu, &perm, n, rhs, k, out)
                        }
                    })
                });
                if !trans {
                    // nalgebra's LU has no transpose solve.
                    g.bench_function("nalgebra", |bch| bch.iter(|| na_lu_solve(&na_lu, n, black_box(rhs), k, &mut out[..len])));
                }
                for &(pname, par) in &pars {
                    g.bench_function(pname, |bch| {
                        bch.iter(|| faer_lu_solve(&flu, n, black_box(rhs), k, &mut out[..len], trans, par))
                    });
                }
                g.finish();
            }
        }
    }
}

fn benches(c: &mut Criterion) {
    for n in SIZES {
        bench_size(c, n);
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
}
