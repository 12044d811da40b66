//! The two-lane kernels the WebAssembly module runs under `simd128`
//! (src/core/linalg/simd.rs) against the hand-written kernels, bit for bit.
//! Natively the lanes are a pair of f64 (the same IEEE operations one lane
//! at a time), so this checks the kernels' blocking and order;
//! `__test__/wasm-simd.test.mjs` checks the SIMD module itself against a
//! scalar build.

use tangent_grad::core::linalg::{hand, simd};

/// Fixed-seed values in [-1, 1).
fn lcg(seed: u64, len: usize) -> Vec<f64> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

/// A well-conditioned symmetric positive-definite n×n matrix.
fn spd(n: usize, seed: u64) -> Vec<f64> {
    let b = lcg(seed, n * n);
    let mut a = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            a[i * n + j] = (0..n).map(|k| b[i * n + k] * b[j * n + k]).sum::<f64>() / n as f64;
        }
        a[i * n + i] += 1.0;
    }
    for i in 0..n {
        for j in 0..i {
            a[j * n + i] = a[i * n + j];
        }
    }
    a
}

fn bits(x: &[f64]) -> Vec<u64> {
    x.iter().map(|v| v.to_bits()).collect()
}

/// Every order to 41 covers each blocking remainder (rows by 8, 4, 1; j's
/// by 4, 2, 1; odd and even row lengths); 64, 150 and 200 the large paths.
const ORDERS: [usize; 45] = {
    let mut o = [0; 45];
    let mut i = 0;
    while i < 42 {
        o[i] = i;
        i += 1;
    }
    o[42] = 64;
    o[43] = 150;
    o[44] = 200;
    o
};

#[test]
fn cholesky_matches_the_hand_written_kernel() {
    for n in ORDERS {
        let a = spd(n, 7 + n as u64);
        let (mut x, mut y) = (vec![f64::NAN; n * n], vec![f64::NAN; n * n]);
        hand::cholesky(&a, n, &mut x).unwrap();
        simd::cholesky(&a, n, &mut y).unwrap();
        assert_eq!(bits(&x), bits(&y), "n = {n}");
    }
}

#[test]
fn cholesky_errors_are_the_hand_written_kernels() {
    // Not positive definite at pivot 9 (in the second block of eight rows
    // at n = 20), and asymmetric.
    let n = 20;
    let mut a = spd(n, 3);
    a[9 * n + 9] = -1.0;
    let mut l = vec![0.0; n * n];
    let e = simd::cholesky(&a, n, &mut l).unwrap_err().to_string();
    assert_eq!(e, hand::cholesky(&a, n, &mut l).unwrap_err().to_string());
    assert!(e.contains("pivot 9"), "{e}");
    a[9 * n + 9] = 1.0;
    a[2 * n + 5] += 1.0;
    let e = simd::cholesky(&a, n, &mut l).unwrap_err().to_string();
    assert_eq!(e, "cholesky: matrix is not symmetric (A[2][5] != A[5][2])");
    // NaN propagates as in the scalar kernel.
    let mut a = spd(n, 4);
    a[12 * n + 3] = f64::NAN;
    a[3 * n + 12] = f64::NAN;
    let (mut x, mut y) = (vec![0.0; n * n], vec![0.0; n * n]);
    let (rx, ry) = (hand::cholesky(&a, n, &mut x), simd::cholesky(&a, n, &mut y));
    assert_eq!(rx.is_ok(), ry.is_ok());
    assert_eq!(x.iter().map(|v| v.is_nan()).collect::<Vec<_>>(), y.iter().map(|v| v.is_nan()).collect::<Vec<_>>());
    let finite = |v: &[f64]| v.iter().filter(|x| !x.is_nan()).map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(finite(&x), finite(&y));
}

#[test]
fn the_tiled_cholesky_agrees_with_the_hand_written_kernel() {
    // Its own order: the factor within rounding, and L·Lᵀ = A.
    for n in ORDERS {
        let a = spd(n, 17 + n as u64);
        let (mut x, mut y) = (vec![f64::NAN; n * n], vec![f64::NAN; n * n]);
        hand::cholesky(&a, n, &mut x).unwrap();
        assert!(simd::tiled_cholesky(&a, n, &mut y), "n = {n}");
        for i in 0..n {
            for j in 0..n {
                let (h, t) = (x[i * n + j], y[i * n + j]);
                assert!(if j > i { t == 0.0 } else { (h - t).abs() <= 1e-14 * (1.0 + h.abs()) }, "n = {n}: L[{i}][{j}] {t} against {h}");
                let llt: f64 = (0..n).map(|k| y[i * n + k] * y[j * n + k]).sum();
                assert!((llt - a[i * n + j]).abs() <= 1e-13, "n = {n}: (LLᵀ)[{i}][{j}]");
            }
        }
    }
}

#[test]
fn the_tiled_cholesky_leaves_every_failure_to_the_hand_written_kernel() {
    let n = 21;
    let mut l = vec![0.0; n * n];
    let mut a = spd(n, 5);
    a[9 * n + 9] = -1.0;
    assert!(!simd::tiled_cholesky(&a, n, &mut l), "a pivot that is not positive");
    let mut a = spd(n, 5);
    a[2 * n + 5] += 1.0;
    assert!(!simd::tiled_cholesky(&a, n, &mut l), "not symmetric");
    let mut a = spd(n, 5);
    a[12 * n + 3] = f64::NAN;
    a[3 * n + 12] = f64::NAN;
    assert!(!simd::tiled_cholesky(&a, n, &mut l), "not finite");
}

#[test]
fn cholesky_adjoint_matches_the_hand_written_kernel() {
    for n in ORDERS {
        let a = spd(n, 11 + n as u64);
        let mut l = vec![0.0; n * n];
        hand::cholesky(&a, n, &mut l).unwrap();
        let lbar = lcg(5 + n as u64, n * n);
        // Accumulates: start from a nonzero adjoint.
        let start = lcg(9 + n as u64, n * n);
        let (mut x, mut y) = (start.clone(), start);
        let (mut wx, mut wy) = (vec![0.0; n * n], vec![0.0; n * n]);
        hand::cholesky_adjoint(&l, &lbar, n, &mut wx, &mut x, false);
        simd::cholesky_adjoint(&l, &lbar, n, &mut wy, &mut y, false);
        assert_eq!(bits(&x), bits(&y), "n = {n}");
        // The swept W whole, above the diagonal too: faer's blocked adjoint
        // runs `simd::reverse_sweep` on its diagonal blocks and reads back
        // every entry.
        assert_eq!(bits(&wx), bits(&wy), "W, n = {n}");
    }
}
