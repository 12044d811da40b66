//! Each library path against the hand-written kernel it replaces, at sizes
//! where `library.rs` picks the library: results within 1e-12 (relative to
//! the largest entry), and every error and non-finite case decided exactly
//! as the hand-written kernel decides it.

use super::*;
use crate::core::linalg::{hand, library};

/// max |x - y| / max |y|.
fn rel(x: &[f64], y: &[f64]) -> f64 {
    max_diff(x, y) / max_abs(y).max(f64::MIN_POSITIVE)
}

/// Equal bit for bit, NaN payloads aside.
fn same(x: &[f64], y: &[f64]) -> bool {
    x.len() == y.len() && x.iter().zip(y).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()))
}

#[test]
fn cholesky_and_its_adjoint_match_the_hand_kernels() {
    // From the library's first size, across its column blocks (64), to the
    // adjoint's wide blocks (256: 651), and one that takes several threads
    // (`library::cholesky_par`; at 788 the last block is 20 columns), and
    // one whose mirror of faer's Lᵀ into L splits too (n²/2 ≥ 2^19: 1100).
    for n in [100, 128, 240, 651, 788, 1100] {
        let mut rng = Lcg(71 + n as u64);
        let a = random_spd(n, &mut rng);
        let (mut l, mut hand) = (vec![0.0; n * n], vec![0.0; n * n]);
        cholesky(&a, n, &mut l).unwrap();
        hand::cholesky(&a, n, &mut hand).unwrap();
        assert!(rel(&l, &hand) <= 1e-12, "n = {n}: {}", rel(&l, &hand));
        assert!(l.iter().enumerate().all(|(i, &v)| i % n <= i / n || v == 0.0), "zeros above the diagonal");

        // Garbage above L̄'s diagonal is never read.
        let mut lbar = rng.fill(n * n);
        for i in 0..n {
            lbar[i * n + i + 1..i * n + n].fill(f64::NAN);
        }
        let mut work = vec![0.0; n * n];
        let start = rng.fill(n * n); // the adjoint accumulates
        let (mut abar, mut hand_abar) = (start.clone(), start.clone());
        cholesky_adjoint(&hand, &lbar, n, &mut work, &mut abar, false);
        hand::cholesky_adjoint(&hand, &lbar, n, &mut work, &mut hand_abar, false);
        assert!(rel(&abar, &hand_abar) <= 1e-12, "n = {n}: {}", rel(&abar, &hand_abar));
        assert!(library::cholesky_adjoint(&hand, &lbar, n, &mut work, &mut abar, false), "the library path ran");
    }
}

#[test]
fn the_library_cholesky_reads_the_lower_triangle_alone() {
    // Symmetric to the 1e-10 the check allows, not exactly: faer factors a
    // column-major view of our buffer, and must be handed A's lower triangle.
    for n in [90, 240] {
        let mut rng = Lcg(73 + n as u64);
        let a = random_spd(n, &mut rng);
        let mut tilted = a.clone();
        for i in 0..n {
            for j in i + 1..n {
                tilted[i * n + j] *= 1.0 + 1e-12;
            }
        }
        let (mut l, mut l_tilted) = (vec![0.0; n * n], vec![0.0; n * n]);
        cholesky(&a, n, &mut l).unwrap();
        cholesky(&tilted, n, &mut l_tilted).unwrap();
        assert!(same(&l, &l_tilted), "n = {n}: the upper triangle was read");
    }
}

#[test]
fn cholesky_errors_and_nan_are_the_hand_kernels() {
    let n = 220;
    let mut rng = Lcg(72);
    let a = random_spd(n, &mut rng);
    let mut l = vec![0.0; n * n];
    let mut hand = vec![0.0; n * n];

    let mut indefinite = a.clone();
    indefinite[150 * n + 150] = -1e6;
    let e = cholesky(&indefinite, n, &mut l).unwrap_err();
    assert_eq!(e.0, hand::cholesky(&indefinite, n, &mut hand).unwrap_err().0);
    assert!(e.0.starts_with("cholesky: matrix is not positive definite (pivot 150 is -"), "{}", e.0);

    let mut asymmetric = a.clone();
    asymmetric[3 * n + 190] += 1.0;
    let e = cholesky(&asymmetric, n, &mut l).unwrap_err();
    assert_eq!(e.0, "cholesky: matrix is not symmetric (A[3][190] != A[190][3])");

    let mut nan = a.clone();
    nan[100 * n + 40] = f64::NAN;
    nan[40 * n + 100] = f64::NAN;
    cholesky(&nan, n, &mut l).unwrap();
    hand::cholesky(&nan, n, &mut hand).unwrap();
    assert!(same(&l, &hand), "NaN spreads as the hand kernel spreads it");
    assert!(l[100 * n + 40].is_nan() && l[39 * n + 39].is_finite());
}

#[test]
fn triangular_solves_match_the_hand_kernels() {
    let mut rng = Lcg(73);
    // Vectors (nalgebra, every n) and matrices (faer, n and k from 12).
    for (n, k) in [(1, 1), (5, 1), (50, 1), (300, 1), (12, 12), (40, 25), (200, 200)] {
        for lower in [true, false] {
            let t = random_triangular(n, lower, &mut rng); // NaN in the other triangle
            let b = rng.fill(n * k);
            let (mut x, mut hand) = (vec![0.0; n * k], vec![0.0; n * k]);
            triangular_solve(&t, n, lower, &b, k, &mut x);
            hand::triangular_solve(&t, n, lower, &b, k, &mut hand);
            assert!(rel(&x, &hand) <= 1e-12, "solve n={n} k={k} lower={lower}: {}", rel(&x, &hand));
            triangular_solve_bbar(&t, n, lower, &b, k, &mut x);
            hand::triangular_solve_bbar(&t, n, lower, &b, k, &mut hand);
            assert!(rel(&x, &hand) <= 1e-12, "bbar n={n} k={k} lower={lower}: {}", rel(&x, &hand));
        }
    }
}

#[test]
fn the_solves_triangle_adjoint_matches_the_hand_kernel() {
    let mut rng = Lcg(29);
    for (n, k, lower) in [(40, 20, true), (40, 20, false), (13, 12, true)] {
        let (bbar, x) = (rng.fill(n * k), rng.fill(n * k));
        let start = rng.fill(n * n); // it accumulates, and leaves the other triangle alone
        let (mut got, mut want) = (start.clone(), start.clone());
        triangular_solve_tbar(n, lower, &bbar, &x, k, &mut got, false);
        hand::triangular_solve_tbar(n, lower, &bbar, &x, k, &mut want, false);
        assert!(rel(&got, &want) <= 1e-12, "n = {n}, k = {k}: {}", rel(&got, &want));
        for i in 0..n {
            for j in 0..n {
                if (j > i && lower) || (j < i && !lower) {
                    assert_eq!(got[i * n + j].to_bits(), start[i * n + j].to_bits(), "the other triangle at ({i}, {j})");
                }
            }
        }
    }
}

/// The products of lower triangles against the full product of the masked
/// matrices (a closed form), by faer (n = 70) and by hand (n = 7): only
/// the lower triangles are read (NaN above them), the adjoints accumulate
/// and leave the upper triangle alone.
#[test]
fn products_of_lower_triangles_match_the_masked_products() {
    let mut rng = Lcg(31);
    for n in [7, 70] {
        let tril = |m: &[f64]| -> Vec<f64> { (0..n * n).map(|k| if k % n <= k / n { m[k] } else { 0.0 }).collect() };
        let product = |a: &[f64], ta: bool, b: &[f64], tb: bool| -> Vec<f64> {
            let at = |m: &[f64], t: bool, i: usize, j: usize| if t { m[j * n + i] } else { m[i * n + j] };
            (0..n * n).map(|k| (0..n).map(|p| at(a, ta, k / n, p) * at(b, tb, p, k % n)).sum()).collect()
        };
        let garbage_above = |m: &mut Vec<f64>| (0..n * n).filter(|k| k % n > k / n).for_each(|k| m[k] = f64::NAN);
        let (mut a, mut b, mut g) = (rng.fill(n * n), rng.fill(n * n), rng.fill(n * n));
        let want = product(&tril(&a), false, &tril(&b), false);
        let want_abar = tril(&product(&tril(&g), false, &tril(&b), true));
        let want_bbar = tril(&product(&tril(&a), true, &tril(&g), false));
        garbage_above(&mut a);
        garbage_above(&mut b);
        garbage_above(&mut g);
        let mut y = vec![f64::NAN; n * n];
        lower_matmul(&a, &b, n, &mut y);
        assert!(rel(&y, &want) <= 1e-13, "n = {n}: {}", rel(&y, &want));
        let start = rng.fill(n * n);
        let (mut abar, mut bbar) = (start.clone(), start.clone());
        lower_matmul_abar(&g, &b, n, &mut abar);
        lower_matmul_bbar(&a, &g, n, &mut bbar);
        for (got, want, what) in [(&abar, &want_abar, "Ā"), (&bbar, &want_bbar, "B̄")] {
            let added: Vec<f64> = got.iter().zip(&start).map(|(x, s)| x - s).collect();
            assert!(rel(&added, want) <= 1e-12, "{what} n = {n}: {}", rel(&added, want));
            assert!((0..n * n).filter(|k| k % n > k / n).all(|k| got[k].to_bits() == start[k].to_bits()), "{what}: upper triangle");
        }
        let mut hand_y = vec![0.0; n * n];
        hand::lower_matmul(&a, &b, n, &mut hand_y);
        assert!(rel(&hand_y, &y) <= 1e-13, "hand n = {n}");
    }
}

#[test]
fn triangular_solves_with_zero_or_nan_pivots_are_the_hand_kernels() {
    let mut rng = Lcg(74);
    for (n, k) in [(30, 1), (30, 20)] {
        for lower in [true, false] {
            for bad in [0.0, f64::NAN, f64::INFINITY] {
                let mut t = random_triangular(n, lower, &mut rng);
                t[17 * n + 17] = bad;
                let b = rng.fill(n * k);
                let (mut x, mut hand) = (vec![0.0; n * k], vec![0.0; n * k]);
                triangular_solve(&t, n, lower, &b, k, &mut x);
                hand::triangular_solve(&t, n, lower, &b, k, &mut hand);
                // A zero or NaN pivot shows in x; an infinite one makes its entry 0.
                assert_eq!(x.iter().any(|v| !v.is_finite()), bad.is_finite() || bad.is_nan(), "pivot {bad}");
                let (xf, hf): (Vec<bool>, Vec<bool>) = (x.iter().map(|v| v.is_finite()).collect(), hand.iter().map(|v| v.is_finite()).collect());
                assert_eq!(xf, hf, "n={n} k={k} lower={lower} pivot {bad}: same entries finite");
                let finite: Vec<(f64, f64)> = x.iter().zip(&hand).filter(|(a, _)| a.is_finite()).map(|(a, b)| (*a, *b)).collect();
                let (fx, fh): (Vec<f64>, Vec<f64>) = finite.into_iter().unzip();
                assert!(rel(&fx, &fh) <= 1e-12);
            }
        }
    }
}

#[test]
fn lu_matches_the_hand_kernels() {
    let mut rng = Lcg(75);
    for (n, k) in [(60, 1), (60, 60), (120, 12), (13, 40), (160, 1)] {
        let a = random_general(n, &mut rng);
        let (mut lu, mut perm) = (vec![0.0; n * n], vec![0.0; n]);
        let (mut hlu, mut hperm) = (vec![0.0; n * n], vec![0.0; n]);
        lu_factor(&a, n, &mut lu, &mut perm).unwrap();
        hand::lu_factor(&a, n, &mut hlu, &mut hperm).unwrap();
        assert!(rel(&lu, &hlu) <= 1e-12 && perm == hperm, "factor n={n}");
        let b = rng.fill(n * k);
        let (mut x, mut hand) = (vec![0.0; n * k], vec![0.0; n * k]);
        lu_solve(&lu, &perm, n, &b, k, &mut x);
        hand::lu_solve(&hlu, &hperm, n, &b, k, &mut hand);
        assert!(rel(&x, &hand) <= 1e-12, "solve n={n} k={k}: {}", rel(&x, &hand));
        lu_solve_transpose(&lu, &perm, n, &b, k, &mut x);
        hand::lu_solve_transpose(&hlu, &hperm, n, &b, k, &mut hand);
        assert!(rel(&x, &hand) <= 1e-12, "transpose n={n} k={k}: {}", rel(&x, &hand));
        // Ā −= B̄ Xᵀ, accumulated onto what Ā held.
        let start = rng.fill(n * n);
        let (mut abar, mut habar) = (start.clone(), start);
        sub_outer(n, &b, &x, k, &mut abar);
        hand::sub_outer(n, &b, &x, k, &mut habar);
        assert!(rel(&abar, &habar) <= 1e-12, "sub_outer n={n} k={k}: {}", rel(&abar, &habar));
        assert_eq!(library::sub_outer(n, &b, &x, k, &mut abar), k >= 12, "the library takes k ≥ 12");
    }
    // A non-finite B̄ or X: the hand kernel's arithmetic, bit for bit.
    let n = 30;
    let (b, mut x) = (rng.fill(n * n), rng.fill(n * n));
    x[7 * n + 4] = f64::INFINITY;
    let (mut abar, mut habar) = (vec![0.0; n * n], vec![0.0; n * n]);
    sub_outer(n, &b, &x, n, &mut abar);
    hand::sub_outer(n, &b, &x, n, &mut habar);
    assert!(same(&abar, &habar), "sub_outer with an infinite entry");
}

#[test]
fn lu_errors_and_bad_factors_are_the_hand_kernels() {
    let mut rng = Lcg(76);
    let n = 64;
    let (mut lu, mut perm) = (vec![0.0; n * n], vec![0.0; n]);
    // Singular: one row a multiple of another.
    let mut a = random_general(n, &mut rng);
    for j in 0..n {
        a[40 * n + j] = 3.0 * a[7 * n + j];
    }
    let e = lu_factor(&a, n, &mut lu, &mut perm).unwrap_err();
    assert_eq!(e.0, "solve: matrix is singular (pivot below tolerance)");
    assert!(!library::lu_factor(&a, n, &mut lu, &mut perm), "the library leaves it to the hand kernel");

    // An invalid permutation or a NaN factor: the hand kernel's NaN rows.
    let a = random_general(n, &mut rng);
    lu_factor(&a, n, &mut lu, &mut perm).unwrap();
    let b = rng.fill(n * n);
    let (mut x, mut hand) = (vec![0.0; n * n], vec![0.0; n * n]);
    for (bad_perm, bad_lu) in [(Some(2.5), None), (Some(0.0), None), (None, Some(f64::NAN))] {
        let (mut p, mut f) = (perm.clone(), lu.clone());
        if let Some(v) = bad_perm {
            p[9] = v;
        }
        if let Some(v) = bad_lu {
            f[20 * n + 3] = v;
        }
        for transposed in [false, true] {
            if transposed {
                lu_solve_transpose(&f, &p, n, &b, n, &mut x);
                hand::lu_solve_transpose(&f, &p, n, &b, n, &mut hand);
            } else {
                lu_solve(&f, &p, n, &b, n, &mut x);
                hand::lu_solve(&f, &p, n, &b, n, &mut hand);
            }
            assert!(same(&x, &hand), "perm {bad_perm:?} lu {bad_lu:?} transposed {transposed}");
        }
    }
}

// ----- Adjoints through the library paths, against central differences

/// Σ w ∘ x.
fn weighted(w: &[f64], x: &[f64]) -> f64 {
    w.iter().zip(x).map(|(a, b)| a * b).sum()
}

/// Central difference of `f` along `d` at `x`, step h.
fn directional(f: impl Fn(&[f64]) -> f64, x: &[f64], d: &[f64], h: f64) -> f64 {
    let plus: Vec<f64> = x.iter().zip(d).map(|(a, b)| a + h * b).collect();
    let minus: Vec<f64> = x.iter().zip(d).map(|(a, b)| a - h * b).collect();
    (f(&plus) - f(&minus)) / (2.0 * h)
}

fn close(analytic: f64, numeric: f64, what: &str) {
    let err = (analytic - numeric).abs() / analytic.abs().max(numeric.abs()).max(1e-8);
    assert!(err <= 1e-6, "{what}: adjoint {analytic} vs central difference {numeric} (relative {err:e})");
}

#[test]
fn cholesky_adjoint_through_faer_matches_central_differences() {
    let n = 160;
    let mut rng = Lcg(81);
    let a = random_spd(n, &mut rng);
    let w = rng.fill(n * n);
    let f = |a: &[f64]| {
        let mut l = vec![0.0; n * n];
        cholesky(a, n, &mut l).unwrap();
        weighted(&w, &l)
    };
    let mut l = vec![0.0; n * n];
    cholesky(&a, n, &mut l).unwrap();
    let (mut work, mut abar) = (vec![0.0; n * n], vec![0.0; n * n]);
    assert!(library::cholesky_adjoint(&l, &w, n, &mut work, &mut abar, false), "faer's path");
    for _ in 0..3 {
        let m = rng.fill(n * n);
        let d: Vec<f64> = (0..n * n).map(|i| m[i] + m[(i % n) * n + i / n]).collect(); // symmetric
        close(weighted(&abar, &d), directional(f, &a, &d, 1e-6), "cholesky");
    }
}

#[test]
fn solve_adjoints_through_faer_match_central_differences() {
    let (n, k) = (20, 15);
    let mut rng = Lcg(82);
    let w = rng.fill(n * k);
    let b = rng.fill(n * k);

    // X = T⁻¹ B: B̄ = T⁻ᵀ W, T̄ = -B̄ Xᵀ on T's triangle.
    for lower in [true, false] {
        let t = masked(&random_triangular(n, lower, &mut rng), n, lower);
        let solve = |t: &[f64], b: &[f64]| {
            let mut x = vec![0.0; n * k];
            triangular_solve(t, n, lower, b, k, &mut x);
            weighted(&w, &x)
        };
        let mut x = vec![0.0; n * k];
        triangular_solve(&t, n, lower, &b, k, &mut x);
        let (mut bbar, mut tbar) = (vec![0.0; n * k], vec![0.0; n * n]);
        triangular_solve_bbar(&t, n, lower, &w, k, &mut bbar);
        triangular_solve_tbar(n, lower, &bbar, &x, k, &mut tbar, false);
        let db = rng.fill(n * k);
        close(weighted(&bbar, &db), directional(|b| solve(&t, b), &b, &db, 1e-6), "triangular B");
        let dt = masked(&rng.fill(n * n), n, lower);
        close(weighted(&tbar, &dt), directional(|t| solve(t, &b), &t, &dt, 1e-6), "triangular T");
    }

    // X = A⁻¹ B: B̄ = A⁻ᵀ W (faer's transposed solve), Ā = -B̄ Xᵀ.
    let a = random_general(n, &mut rng);
    let solve = |a: &[f64], b: &[f64]| {
        let (mut lu, mut perm, mut x) = (vec![0.0; n * n], vec![0.0; n], vec![0.0; n * k]);
        lu_factor(a, n, &mut lu, &mut perm).unwrap();
        lu_solve(&lu, &perm, n, b, k, &mut x);
        weighted(&w, &x)
    };
    let (mut lu, mut perm, mut x) = (vec![0.0; n * n], vec![0.0; n], vec![0.0; n * k]);
    lu_factor(&a, n, &mut lu, &mut perm).unwrap();
    lu_solve(&lu, &perm, n, &b, k, &mut x);
    let (mut bbar, mut abar) = (vec![0.0; n * k], vec![0.0; n * n]);
    assert!(library::lu_solve(&lu, &perm, n, &w, k, &mut bbar, true), "faer's path");
    sub_outer(n, &bbar, &x, k, &mut abar);
    let db = rng.fill(n * k);
    close(weighted(&bbar, &db), directional(|b| solve(&a, b), &b, &db, 1e-6), "LU B");
    let da = rng.fill(n * n);
    close(weighted(&abar, &da), directional(|a| solve(a, &b), &a, &da, 1e-6), "LU A");
}

#[test]
fn large_non_finite_operands_are_found_wherever_the_checks_split() {
    // Past 2^19 values each check runs in parts on several threads (a
    // triangle's in bands of equal area): an entry at either end is found.
    let mut rng = Lcg(77);
    let (n, k) = (1024, 512);
    let t = random_triangular(n, true, &mut rng);
    let b = rng.fill(n * k);
    let (mut x, mut tbar) = (vec![0.0; n * k], vec![0.0; n * n]);
    assert!(library::triangular_solve(&t, n, true, &b, k, &mut x, false), "finite: the library's");
    for at in [0, n * k - 1] {
        let mut bad = b.clone();
        bad[at] = f64::NAN;
        assert!(!library::triangular_solve(&t, n, true, &bad, k, &mut x, false), "a NaN right-hand side at {at}");
        assert!(!library::triangular_solve_tbar(n, true, &bad, &b, k, &mut tbar, false), "a NaN B̄ at {at}");
        assert!(!library::triangular_solve_tbar(n, true, &b, &bad, k, &mut tbar, false), "a NaN X at {at}");
    }
    for (i, j) in [(0, 0), (n - 1, 0), (n - 1, n - 1), (n / 2, n / 3)] {
        let mut bad = t.clone();
        bad[i * n + j] = f64::INFINITY;
        assert!(!library::triangular_solve(&bad, n, true, &b, k, &mut x, false), "an infinite T at ({i}, {j})");
    }
    // Above the diagonal a lower T is never read.
    let mut above = t.clone();
    above[n - 1] = f64::NAN;
    assert!(library::triangular_solve(&above, n, true, &b, k, &mut x, false), "NaN above a lower T's diagonal");

    // LU refuses a matrix with a non-finite entry (its tolerance needs max |A|).
    let a = random_general(n, &mut rng);
    let (mut lu, mut perm) = (vec![0.0; n * n], vec![0.0; n]);
    assert!(library::lu_factor(&a, n, &mut lu, &mut perm), "finite: the library's");
    for (at, v) in [(0, f64::NAN), (n * n - 1, f64::NEG_INFINITY), (n * n / 2 + 5, f64::INFINITY)] {
        let mut bad = a.clone();
        bad[at] = v;
        assert!(!library::lu_factor(&bad, n, &mut lu, &mut perm), "{v} at {at}");
    }
}
