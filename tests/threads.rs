//! Results do not depend on the thread count, bit for bit: each faer call
//! the package makes (`linalg::faer`), sequential and on rayon pools of 1, 2
//! and 4 threads (`Par::rayon(t)` inside a pool of t threads), at odd orders
//! on both sides of the parallel threshold; and the package's own functions
//! with the cap at 1 against the machine's.

use faer::Par;
use tangent_grad::core::linalg::{self, faer as lf, threads};

/// A fixed-seed LCG in [-1, 1).
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

/// Every output of every faer call the package makes, for one order.
fn outputs(n: usize, par: Par) -> Vec<(&'static str, Vec<f64>)> {
    let mut r = Lcg(0xC0FFEE ^ n as u64);
    // A = X Xᵀ/n + I: symmetric positive definite, well conditioned.
    let x = r.fill(n * n);
    let mut a = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = (0..n).map(|k| x[i * n + k] * x[j * n + k]).sum::<f64>() / n as f64;
            a[i * n + j] = s;
            a[j * n + i] = s;
        }
        a[i * n + i] += 1.0;
    }
    let b = r.fill(n * n);
    let v = r.fill(n);
    let lbar = r.fill(n * n);
    let mut out = Vec::new();

    let mut l = vec![0.0; n * n];
    assert!(lf::cholesky(&a, n, &mut l, par));
    out.push(("cholesky", l.clone()));

    let (mut work, mut abar) = (vec![0.0; n * n], vec![0.0; n * n]);
    lf::cholesky_adjoint(&l, &lbar, n, &mut work, &mut abar, par);
    out.push(("cholesky_adjoint", abar));

    let u: Vec<f64> = (0..n * n).map(|i| l[(i % n) * n + i / n]).collect();
    for (t, lower) in [(&l, true), (&u, false)] {
        for transposed in [false, true] {
            let mut xm = vec![0.0; n * n];
            lf::triangular_solve(t, n, lower, &b, n, &mut xm, transposed, par);
            out.push((if transposed { "triangular_solve transposed" } else { "triangular_solve" }, xm.clone()));
            let mut tbar = b.clone();
            lf::triangular_solve_tbar(n, lower, &lbar, &xm, n, &mut tbar, par);
            out.push(("triangular_solve_tbar", tbar));
        }
    }

    let (mut lu, mut perm) = (vec![0.0; n * n], vec![0.0; n]);
    // A nonsymmetric matrix, so the pivots move rows.
    let g: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x + 0.5 * y).collect();
    lf::lu_factor(&g, n, &mut lu, &mut perm, par);
    out.push(("lu_factor", lu.clone()));
    out.push(("lu_factor permutation", perm.clone()));
    for transposed in [false, true] {
        let mut xm = vec![0.0; n * n];
        assert!(lf::lu_solve(&lu, &perm, n, &b, n, &mut xm, transposed, par));
        out.push(("lu_solve matrix", xm));
    }

    let mut p = vec![0.0; n * n];
    faer::linalg::matmul::matmul(
        faer::MatMut::from_row_major_slice_mut(&mut p, n, n),
        faer::Accum::Replace,
        faer::MatRef::from_row_major_slice(&a, n, n),
        faer::MatRef::from_row_major_slice(&b, n, n).transpose(),
        1.0,
        par,
    );
    out.push(("matmul", p));
    let _ = v;
    out
}

fn in_pool<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap().install(f)
}

fn same_bits(n: usize, what: &str, one: &[(&str, Vec<f64>)], other: &[(&str, Vec<f64>)]) {
    for ((name, x), (_, y)) in one.iter().zip(other) {
        let differ = x.iter().zip(y).filter(|(p, q)| p.to_bits() != q.to_bits()).count();
        let worst = x.iter().zip(y).map(|(p, q)| (p - q).abs() / p.abs().max(q.abs()).max(f64::MIN_POSITIVE)).fold(0.0, f64::max);
        assert_eq!(differ, 0, "n = {n}, {name}, {what}: {differ} entries differ, by up to {worst:e} relative");
    }
}

#[test]
fn faer_calls_give_the_same_bits_on_1_2_and_4_threads() {
    for n in [257, 600, 1100] {
        let seq = outputs(n, Par::Seq);
        for t in [1, 2, 4] {
            let par = in_pool(t, || outputs(n, Par::rayon(t)));
            same_bits(n, &format!("{t} threads against sequential"), &seq, &par);
        }
    }
}

#[test]
fn the_package_gives_the_same_bits_at_any_cap() {
    let n = 701;
    let mut r = Lcg(7);
    let x = r.fill(n * n);
    let mut a = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            a[i * n + j] = (0..n).map(|k| x[i * n + k] * x[j * n + k]).sum::<f64>() / n as f64;
        }
        a[i * n + i] += 1.0;
    }
    let b = r.fill(n * n);
    let run = || {
        let mut l = vec![0.0; n * n];
        linalg::cholesky(&a, n, &mut l).unwrap();
        let (mut work, mut abar) = (vec![0.0; n * n], vec![0.0; n * n]);
        linalg::cholesky_adjoint(&l, &b, n, &mut work, &mut abar);
        let mut xm = vec![0.0; n * n];
        linalg::triangular_solve(&l, n, true, &b, n, &mut xm);
        let (mut lu, mut perm) = (vec![0.0; n * n], vec![0.0; n]);
        linalg::lu_factor(&b, n, &mut lu, &mut perm).unwrap();
        let mut y = vec![0.0; n * n];
        linalg::lu_solve_transpose(&lu, &perm, n, &a, n, &mut y);
        // One right-hand side: faer's parallel matrix-vector product splits
        // its sum (1099 of 1100 entries moved, by up to 2e-11, at n = 1100
        // on 2 threads), so the package keeps these on one thread.
        let mut yv = vec![0.0; n];
        linalg::lu_solve_transpose(&lu, &perm, n, &a[..n], 1, &mut yv);
        let mut xv = vec![0.0; n];
        linalg::lu_solve(&lu, &perm, n, &a[..n], 1, &mut xv);
        vec![
            ("cholesky", l),
            ("cholesky_adjoint", abar),
            ("triangular_solve", xm),
            ("lu_factor", lu),
            ("lu_solve_transpose", y),
            ("lu_solve_transpose, one column", yv),
            ("lu_solve, one column", xv),
        ]
    };
    let machine = threads::set_threads(0);
    let all = run();
    assert_eq!(threads::set_threads(1), 1);
    let one = run();
    threads::set_threads(0);
    same_bits(n, &format!("cap 1 against cap {machine}"), &one, &all);
}


#[test]
fn large_products_are_right_and_give_the_same_bits_at_any_cap() {
    use tangent_grad::core::kernels::matrix::gemm;
    let (m, k, n) = (421, 433, 409);
    let mut r = Lcg(11);
    let a = r.fill(m * k);
    let b = r.fill(k * n);
    for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
        let at = |i: usize, l: usize| if ta { a[l * m + i] } else { a[i * k + l] };
        let bt = |l: usize, j: usize| if tb { b[j * k + l] } else { b[l * n + j] };
        let run = |beta: f64| {
            let mut c = vec![0.5; m * n];
            gemm(m, k, n, &a, ta, &b, tb, beta, &mut c);
            c
        };
        let machine = threads::set_threads(0);
        let (all, all_acc) = (run(0.0), run(1.0));
        threads::set_threads(1);
        let (one, one_acc) = (run(0.0), run(1.0));
        threads::set_threads(0);
        same_bits(m, &format!("gemm {ta} {tb}, cap 1 against {machine}"), &[("gemm", one), ("gemm, accumulated", one_acc)], &[("gemm", all.clone()), ("gemm, accumulated", all_acc.clone())]);
        for i in (0..m).step_by(37) {
            for j in (0..n).step_by(29) {
                let s: f64 = (0..k).map(|l| at(i, l) * bt(l, j)).sum();
                assert!((all[i * n + j] - s).abs() <= 1e-12 * k as f64, "gemm {ta} {tb} ({i}, {j}): {} against {s}", all[i * n + j]);
                assert!((all_acc[i * n + j] - 0.5 - s).abs() <= 1e-12 * k as f64, "accumulated ({i}, {j})");
            }
        }
    }
}
