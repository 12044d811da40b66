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

/// An n×n symmetric, diagonally dominant (so positive definite) matrix from seed `seed`.
fn spd(n: usize, seed: u64) -> Vec<f64> {
    let x = Lcg(seed).fill(n * n);
    (0..n * n).map(|k| {
        let (i, j) = (k / n, k % n);
        x[i * n + j] + x[j * n + i] + if i == j { 2.0 * n as f64 } else { 0.0 }
    }).collect()
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
    lf::cholesky_adjoint(&l, &lbar, n, &mut work, &mut abar, par, false);
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
    let n = 751;
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
    // LU takes several threads only from order 1200 (library::LU_PARALLEL_FROM).
    let big = 1201;
    let g = r.fill(big * big);
    let run = || {
        let mut l = vec![0.0; n * n];
        linalg::cholesky(&a, n, &mut l).unwrap();
        let (mut work, mut abar) = (vec![0.0; n * n], vec![0.0; n * n]);
        linalg::cholesky_adjoint(&l, &b, n, &mut work, &mut abar, false);
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
        let (mut big_lu, mut big_perm) = (vec![0.0; big * big], vec![0.0; big]);
        linalg::lu_factor(&g, big, &mut big_lu, &mut big_perm).unwrap();
        vec![
            ("cholesky", l),
            ("cholesky_adjoint", abar),
            ("triangular_solve", xm),
            ("lu_factor", lu),
            ("lu_solve_transpose", y),
            ("lu_solve_transpose, one column", yv),
            ("lu_solve, one column", xv),
            ("lu_factor, order 1201", big_lu),
            ("lu_factor permutation, order 1201", big_perm),
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

#[test]
fn long_elementwise_passes_give_the_same_bits_at_any_cap() {
    use tangent_grad::core::{op::Op, shape::Shape, tape::Tape};
    // 640 000 elements a pass: split among threads (linalg/parallel.rs).
    let n = 800;
    let d2: Vec<f64> = Lcg(3).fill(n * n).iter().map(|x| 4.0 * x.abs()).collect();
    let s = 0.7;
    let run = || {
        let mut t = Tape::default();
        let g = &mut t.graph;
        let x = g.leaf(Op::Leaf, Shape::Matrix(n, n), &d2).unwrap();
        let l = g.leaf(Op::Leaf, Shape::Scalar, &[s]).unwrap();
        let scaled = g.op(Op::Div, &[x, l], true).unwrap(); // a scalar on the right
        let neg = g.op(Op::Neg, &[scaled], true).unwrap();
        let e = g.op(Op::Exp, &[neg], true).unwrap();
        let k = g.op(Op::Mul, &[l, e], true).unwrap(); // on the left
        let kd = g.op(Op::AddDiag, &[k, l], true).unwrap();
        let th = g.op(Op::Tanh, &[kd], true).unwrap();
        let tr = g.op(Op::Transpose, &[th], true).unwrap();
        let both = g.op(Op::Mul, &[tr, x], true).unwrap(); // same shapes
        let root = g.op(Op::Sum, &[both], true).unwrap();
        assert_eq!(t.backward(root, None).unwrap(), None);
        let mut out: Vec<(&str, Vec<f64>)> = [("e", e), ("k", k), ("kd", kd), ("tanh", th)].iter().map(|&(name, id)| (name, t.graph.value(id).unwrap().to_vec())).collect();
        out.push(("x̄", t.adjoint(x).unwrap().to_vec()));
        out.push(("l̄", t.adjoint(l).unwrap().to_vec()));
        out
    };
    let machine = threads::set_threads(0);
    let all = run();
    threads::set_threads(1);
    let one = run();
    threads::set_threads(0);
    same_bits(n, &format!("elementwise, cap 1 against {machine}"), &one, &all);
    // Each element is its own formula, whatever the split.
    let (e, k) = (&all[0].1, &all[1].1);
    for i in (0..n * n).step_by(997) {
        // (The crate's exp is Math.exp's method, an ulp from glibc's at times.)
        assert_eq!(e[i].to_bits(), tangent_grad::core::math::exp(-(d2[i] / s)).to_bits(), "exp at {i}");
        assert_eq!(k[i].to_bits(), (s * e[i]).to_bits(), "s·e at {i}");
    }
    // x̄ of Σ tanh(s·exp(−x/s) + s·I)ᵀ∘x, entry by entry: the transposed
    // tanh, and through it xᵀ·(1 − tanh²)·s·e·(−1/s).
    let (th, xbar) = (&all[3].1, &all[4].1);
    for k in (0..n * n).step_by(1009) {
        let (i, j) = (k / n, k % n);
        let want = th[j * n + i] + d2[j * n + i] * (1.0 - th[k] * th[k]) * s * e[k] * (-1.0 / s);
        assert!((xbar[k] - want).abs() <= 1e-13 * want.abs().max(1.0), "x̄ at ({i}, {j}): {} against {want}", xbar[k]);
    }
}

#[test]
fn a_large_asymmetric_matrix_names_its_first_pair() {
    // Checked by tiles on several threads (linalg/parallel.rs) from 2^19 entries.
    let n = 800;
    let mut a: Vec<f64> = (0..n * n).map(|k| if k / n == k % n { n as f64 } else { 0.5 }).collect();
    // Two pairs apart, in different bands of rows: the first in row-major order is named.
    a[650 * n + 799] = 0.25;
    a[3 * n + 640] = 0.75;
    let mut l = vec![0.0; n * n];
    for cap in [0, 1] {
        threads::set_threads(cap);
        let e = linalg::cholesky(&a, n, &mut l).unwrap_err();
        assert_eq!(e.0, "cholesky: matrix is not symmetric (A[3][640] != A[640][3])");
    }
    threads::set_threads(0);
}

#[test]
fn a_cholesky_in_wide_blocks_gives_the_same_bits_at_any_cap() {
    // Past faer.rs's WIDE_BLOCKS_FROM, where faer takes 256 columns a block.
    let n = 1601;
    let a = spd(n, 13);
    let run = |cap: usize| {
        threads::set_threads(cap);
        let mut l = vec![0.0; n * n];
        linalg::cholesky(&a, n, &mut l).unwrap();
        l
    };
    let (all, one) = (run(0), run(1));
    threads::set_threads(0);
    same_bits(n, "cholesky, cap 1 against the machine's", &[("cholesky", one)], &[("cholesky", all.clone())]);
    // And a factor: (L Lᵀ)ᵢⱼ = Aᵢⱼ at scattered entries.
    for (i, j) in [(0, 0), (1600, 1600), (1600, 3), (800, 799), (1234, 567)] {
        let s: f64 = (0..=j.min(i)).map(|k| all[i * n + k] * all[j * n + k]).sum();
        assert!((s - a[i * n + j]).abs() <= 1e-12 * a[i * n + i].abs(), "(L Lᵀ)[{i}][{j}] = {s} against {}", a[i * n + j]);
    }
}

#[test]
fn the_cholesky_tangent_and_its_adjoints_give_the_same_bits_at_any_cap() {
    use tangent_grad::core::kernels::factor_tangent::{cholesky_tangent, cholesky_tangent_adotbar, cholesky_tangent_lbar};
    // Large enough for parallel solves and, in the product's last bands, parallel products.
    let n = 1300;
    let a = spd(n, 17);
    let mut l = vec![0.0; n * n];
    linalg::cholesky(&a, n, &mut l).unwrap();
    let adot = Lcg(19).fill(n * n);
    let g = Lcg(23).fill(n * n);
    let run = |cap: usize| {
        threads::set_threads(cap);
        let (mut t, mut aux) = (vec![0.0; n * n], vec![0.0; 3 * n * n]);
        cholesky_tangent(&l, &adot, n, &mut t, &mut aux);
        let (mut lbar, mut abar) = (vec![0.0; n * n], vec![0.0; n * n]);
        cholesky_tangent_lbar(&l, &g, n, &mut aux, &mut lbar, true);
        cholesky_tangent_adotbar(&l, &g, n, &mut aux, &mut abar, true);
        vec![("choleskyTangent", t), ("its adjoint to L", lbar), ("its adjoint to Ȧ", abar)]
    };
    let (all, one) = (run(0), run(1));
    threads::set_threads(0);
    same_bits(n, "choleskyTangent, cap 1 against the machine's", &one, &all);
    assert!(all.iter().all(|(_, v)| v.iter().all(|x| x.is_finite()) && v.iter().any(|&x| x != 0.0)));
}

#[test]
fn empty_matrices_pass_through_the_split_kernels() {
    let (mut l, mut work, mut abar) = (vec![], vec![], vec![]);
    linalg::cholesky(&[], 0, &mut l).unwrap();
    linalg::cholesky_adjoint(&[], &[], 0, &mut work, &mut abar, false);
    let mut out = vec![];
    tangent_grad::core::kernels::matrix::transpose(0, 5, &[], &mut out);
    tangent_grad::core::kernels::matrix::add_transposed(5, 0, &[], &mut out, false);
    tangent_grad::core::kernels::matrix::add_transposed(5, 0, &[], &mut out, true);
    assert!(l.is_empty() && abar.is_empty() && out.is_empty());
}

#[test]
fn a_solve_adjoint_and_long_sums_give_the_same_bits_at_any_cap() {
    use tangent_grad::core::{op::Op, shape::Shape, tape::Tape};
    // T̄ −= b̄ xᵀ on a triangle of 1100² / 2 entries, in bands of rows on several threads.
    let n = 1100;
    let start = Lcg(21).fill(n * n);
    let (bbar, x) = (Lcg(22).fill(n), Lcg(23).fill(n));
    for lower in [true, false] {
        let run = |cap: usize| {
            threads::set_threads(cap);
            let mut tbar = start.clone();
            linalg::triangular_solve_tbar(n, lower, &bbar, &x, 1, &mut tbar, false);
            tbar
        };
        let (all, one) = (run(0), run(1));
        same_bits(n, "triangular_solve_tbar, cap 1 against the machine's", &[("tbar", one)], &[("tbar", all.clone())]);
        for k in (0..n * n).step_by(331) {
            let (i, j) = (k / n, k % n);
            let inside = if lower { j <= i } else { j >= i };
            let want = if inside { start[k] + -bbar[i] * x[j] } else { start[k] };
            assert_eq!(all[k].to_bits(), want.to_bits(), "T̄[{i}][{j}], lower: {lower}");
        }
    }
    // Σ over 2^20 + 3 values, and a broadcast scalar's adjoint over as many:
    // chunks summed on several threads, added in order (linalg/parallel.rs).
    let len = (1 << 20) + 3;
    let v: Vec<f64> = (0..len).map(|i| (i % 1000) as f64).collect();
    let run = |cap: usize| {
        threads::set_threads(cap);
        let mut t = Tape::default();
        let g = &mut t.graph;
        let a = g.leaf(Op::Leaf, Shape::Vector(len), &v).unwrap();
        let s = g.leaf(Op::Leaf, Shape::Scalar, &[0.1]).unwrap();
        let scaled = g.op(Op::Mul, &[s, a], true).unwrap();
        let e = g.op(Op::Exp, &[scaled], true).unwrap();
        let root = g.op(Op::Sum, &[e], true).unwrap();
        let whole = g.op(Op::Sum, &[a], true).unwrap();
        assert_eq!(t.backward(root, None).unwrap(), None);
        let value = |id| t.graph.value(id).unwrap()[0];
        vec![("Σ a", vec![value(whole)]), ("Σ exp(s·a)", vec![value(root)]), ("s̄", t.adjoint(s).unwrap().to_vec())]
    };
    let (all, one) = (run(0), run(1));
    threads::set_threads(0);
    same_bits(len, "long sums, cap 1 against the machine's", &one, &all);
    // Integers: exact in any order.
    let exact: f64 = (0..len).map(|i| (i % 1000) as f64).sum();
    assert_eq!(all[0].1[0], exact);
    // s̄ = Σ aᵢ exp(s aᵢ), against a sum in f64 in another order.
    let want: f64 = v.iter().rev().map(|&a| a * (0.1 * a).exp()).sum();
    assert!((all[2].1[0] - want).abs() <= 1e-12 * want, "s̄ = {} against {want}", all[2].1[0]);
}
