use super::*;
use crate::core::error::js_number;

// ----- Cholesky forward -------------------------------------------------

#[test]
fn cholesky_reconstructs() {
    let mut rng = Lcg(12345);
    for &n in &[1usize, 2, 5, 40] {
        let a = random_spd(n, &mut rng);
        let l = chol(&a, n);
        for i in 0..n {
            for j in i + 1..n {
                assert_eq!(l[i * n + j], 0.0, "upper triangle must be zero");
            }
            assert!(l[i * n + i] > 0.0);
        }
        let llt = matmul(&l, &transpose(&l, n, n), n, n, n);
        assert!(max_diff(&llt, &a) <= 1e-13 * max_abs(&a), "n = {n}");
    }
    // 1×1 closed form, and the empty matrix.
    assert_eq!(chol(&[9.0], 1), vec![3.0]);
    let mut empty: [f64; 0] = [];
    assert!(cholesky(&[], 0, &mut empty).is_ok());
}

#[test]
fn cholesky_ignores_upper_triangle_within_tolerance() {
    let mut rng = Lcg(7);
    let n = 6;
    let a = random_spd(n, &mut rng);
    let mut b = a.clone();
    for i in 0..n {
        for j in i + 1..n {
            b[i * n + j] *= 1.0 + 5e-11; // within the 1e-10 relative tolerance
        }
    }
    assert_eq!(chol(&a, n), chol(&b, n));
}

#[test]
fn cholesky_symmetry_error() {
    let mut a = vec![
        4.0, 1.0, 0.5, 0.0, //
        1.0, 4.0, 1.0, 9.0, //
        0.7, 1.0, 4.0, 1.0, //
        0.0, 2.0, 1.0, 4.0,
    ];
    let mut l = vec![0.0; 16];
    let e = cholesky(&a, 4, &mut l).unwrap_err();
    assert_eq!(e.to_string(), "cholesky: matrix is not symmetric (A[0][2] != A[2][0])");
    a[8] = 0.5;
    let e = cholesky(&a, 4, &mut l).unwrap_err();
    assert_eq!(e.to_string(), "cholesky: matrix is not symmetric (A[1][3] != A[3][1])");
    // Symmetry is checked before positive-definiteness.
    let e = cholesky(&[-1.0, 2.0, 3.0, 1.0], 2, &mut l).unwrap_err();
    assert_eq!(e.0, "cholesky: matrix is not symmetric (A[0][1] != A[1][0])");
    // Relative tolerance: a 1e-9 relative difference is an error.
    let e = cholesky(&[2.0, 1.0, 1.0 + 1e-9, 2.0], 2, &mut l).unwrap_err();
    assert_eq!(e.0, "cholesky: matrix is not symmetric (A[0][1] != A[1][0])");
}

#[test]
fn cholesky_not_positive_definite_error() {
    let mut l = vec![0.0; 9];
    let e = cholesky(&[1.0, 2.0, 2.0, 1.0], 2, &mut l).unwrap_err();
    assert_eq!(e.0, "cholesky: matrix is not positive definite (pivot 1 is -3)");
    let e = cholesky(&[-2.5], 1, &mut l).unwrap_err();
    assert_eq!(e.0, "cholesky: matrix is not positive definite (pivot 0 is -2.5)");
    let e = cholesky(&[0.0], 1, &mut l).unwrap_err();
    assert_eq!(e.0, "cholesky: matrix is not positive definite (pivot 0 is 0)");
    // Third pivot: [[1,0,0],[0,1,0],[0,0,-1e-20]].
    let a = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, -1e-20];
    let e = cholesky(&a, 3, &mut l).unwrap_err();
    assert_eq!(e.0, "cholesky: matrix is not positive definite (pivot 2 is -1e-20)");
    // Pivots inside and after a block of four rows.
    let mut l = vec![0.0; 36];
    for (bad, d) in [(1usize, 0.0), (2, -1.0), (3, -0.25), (4, -7.0), (5, -2.0)] {
        let n = 6;
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            a[i * n + i] = 4.0;
        }
        // Row `bad` is 0.5 × row 0 in the leading 1×1 part, then a_bb = d + 1.
        a[bad * n] = 2.0;
        a[bad] = 2.0;
        a[bad * n + bad] = d + 1.0;
        let e = cholesky(&a, n, &mut l).unwrap_err();
        let want = format!(
            "cholesky: matrix is not positive definite (pivot {bad} is {})",
            js_number(d)
        );
        assert_eq!(e.0, want);
    }
}

#[test]
fn cholesky_nan_propagates() {
    let mut rng = Lcg(99);
    let n = 4;
    let mut a = random_spd(n, &mut rng);
    a[n + 2] = f64::NAN; // A[1][2] NaN, A[2][1] finite: not a symmetry error
    let mut l = vec![0.0; n * n];
    cholesky(&a, n, &mut l).unwrap();
    // ... and the factorization reads only the lower triangle.
    assert!(l.iter().all(|v| v.is_finite()));
    // The factorization reads the lower triangle: NaN in the lower one.
    let mut a = random_spd(n, &mut rng);
    a[2 * n + 1] = f64::NAN;
    cholesky(&a, n, &mut l).unwrap();
    assert!(l[2 * n + 1].is_nan() && l[2 * n + 2].is_nan() && l[3 * n + 3].is_nan());
    // NaN on the diagonal: NaN pivot, no error.
    let mut a = random_spd(n, &mut rng);
    a[0] = f64::NAN;
    cholesky(&a, n, &mut l).unwrap();
    assert!(l[0].is_nan() && l[n * n - 1].is_nan());
    // Infinity entries do not panic either.
    let mut a = random_spd(n, &mut rng);
    a[1] = f64::INFINITY;
    a[n] = f64::INFINITY;
    let _ = cholesky(&a, n, &mut l);
}

// ----- Cholesky adjoint ------------------------------------------------

fn weighted_chol(a: &[f64], n: usize, w: &[f64]) -> f64 {
    chol(a, n).iter().zip(w).map(|(x, y)| x * y).sum()
}

#[test]
fn cholesky_adjoint_matches_finite_differences() {
    let mut rng = Lcg(2024);
    for &n in &[1usize, 2, 5, 8] {
        let a = random_spd(n, &mut rng);
        let l = chol(&a, n);
        // W random lower; Lbar = W, with garbage in Lbar's upper triangle.
        let mut w = rng.fill(n * n);
        let mut lbar = w.clone();
        for i in 0..n {
            for j in i + 1..n {
                w[i * n + j] = 0.0;
                lbar[i * n + j] = 1e6 * rng.next();
            }
        }
        let mut work = vec![f64::NAN; n * n];
        let init = rng.fill(n * n);
        let mut abar = init.clone();
        cholesky_adjoint(&l, &lbar, n, &mut work, &mut abar, false);
        let g: Vec<f64> = abar.iter().zip(&init).map(|(x, y)| x - y).collect();
        // Symmetric result.
        for i in 0..n {
            for j in 0..i {
                assert!((g[i * n + j] - g[j * n + i]).abs() <= 1e-15 * max_abs(&g));
            }
        }
        let h = 1e-5;
        let gscale = max_abs(&g);
        let mut worst = 0.0f64;
        for i in 0..n {
            for j in 0..=i {
                let mut ap = a.clone();
                let mut am = a.clone();
                ap[i * n + j] += h;
                am[i * n + j] -= h;
                if i != j {
                    ap[j * n + i] += h;
                    am[j * n + i] -= h;
                }
                let fd = (weighted_chol(&ap, n, &w) - weighted_chol(&am, n, &w)) / (2.0 * h);
                let an = if i == j { g[i * n + i] } else { g[i * n + j] + g[j * n + i] };
                let err = (fd - an).abs() / an.abs().max(gscale);
                worst = worst.max(err);
            }
        }
        assert!(worst <= 1e-7, "n = {n}: worst relative error {worst}");
    }
}

#[test]
fn cholesky_adjoint_scalar_closed_form() {
    let a: f64 = 6.25;
    let l = [a.sqrt()];
    let mut work = [0.0];
    let mut abar = [1.0];
    cholesky_adjoint(&l, &[3.0], 1, &mut work, &mut abar, false);
    assert_eq!(abar[0], 1.0 + 3.0 / (2.0 * a.sqrt()));
}

#[test]
fn cholesky_adjoint_of_log_det_is_inverse() {
    let mut rng = Lcg(31337);
    for &n in &[3usize, 12, 40] {
        let a = random_spd(n, &mut rng);
        let l = chol(&a, n);
        // f = 2 Σ log L_ii  =>  Lbar = diag(2 / L_ii)
        let mut lbar = vec![0.0; n * n];
        for i in 0..n {
            lbar[i * n + i] = 2.0 / l[i * n + i];
        }
        let mut work = vec![0.0; n * n];
        let mut abar = vec![0.0; n * n];
        cholesky_adjoint(&l, &lbar, n, &mut work, &mut abar, false);
        // abar == A⁻¹  <=>  abar A == I
        let prod = matmul(&abar, &a, n, n, n);
        let mut eye = vec![0.0; n * n];
        for i in 0..n {
            eye[i * n + i] = 1.0;
        }
        assert!(max_diff(&prod, &eye) <= 1e-10, "n = {n}: {}", max_diff(&prod, &eye));
    }
}

#[test]
fn cholesky_adjoint_propagates_nan() {
    let mut rng = Lcg(5);
    let n = 4;
    let a = random_spd(n, &mut rng);
    let l = chol(&a, n);
    let mut lbar = vec![0.0; n * n];
    lbar[2 * n + 1] = f64::NAN;
    let mut work = vec![0.0; n * n];
    let mut abar = vec![0.0; n * n];
    cholesky_adjoint(&l, &lbar, n, &mut work, &mut abar, false);
    assert!(abar[2 * n + 1].is_nan() && abar[n + 2].is_nan());
}

// ----- the symmetry check of the library path ---------------------------

/// `linalg::cholesky::symmetric` (by tiles, each mirror copied transposed) says
/// what the plain walk `cholesky::first_differing` says, for every kind of pair:
/// one past the tolerance, one within it, NaN, infinities, at orders around
/// the tile's 16.
#[test]
fn symmetric_agrees_with_the_plain_walk() {
    let mut rng = Lcg(2026);
    for &n in &[1usize, 2, 15, 16, 17, 31, 33, 64, 100, 203] {
        let mut a = rng.fill(n * n);
        for i in 0..n {
            for j in 0..i {
                a[i * n + j] = a[j * n + i];
            }
        }
        assert!(super::super::cholesky::symmetric(&a, n), "n = {n}: symmetric");
        let pairs = if n > 1 { 40 } else { 0 };
        for k in 0..pairs {
            let i = (rng.next().abs() * n as f64) as usize % n;
            let j = (rng.next().abs() * n as f64) as usize % n;
            if i == j {
                continue;
            }
            let (x, y) = (i * n + j, j * n + i);
            let keep = a[x];
            a[x] = match k % 5 {
                0 => keep * (1.0 + 1e-9),        // differs
                1 => keep * (1.0 + 1e-12),       // within the tolerance
                2 => f64::NAN,                   // NaN never differs
                3 => f64::INFINITY,              // against a finite entry: differs
                _ => -keep,                      // differs, unless 0
            };
            if k % 5 == 3 && k % 2 == 0 {
                a[y] = f64::INFINITY; // Inf against Inf does not differ
            }
            assert_eq!(
                super::super::cholesky::symmetric(&a, n),
                super::super::cholesky::first_differing(&a, n).is_none(),
                "n = {n}, pair ({i}, {j}), case {}",
                k % 5
            );
            a[x] = keep;
            a[y] = keep;
        }
    }
}
