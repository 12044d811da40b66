use tangent_grad::core::kernels::matrix::gemm;
#[test]
fn probe() {
    for &(m, k, n) in &[(64usize, 32usize, 1usize), (3, 2, 1), (1, 3, 4), (7, 7, 7), (64, 8, 32), (64, 1, 32), (32, 64, 1), (5, 1, 1), (1, 1, 1), (9, 2, 3)] {
        for &(ta, tb) in &[(false, false), (false, true), (true, false), (true, true)] {
            let a: Vec<f64> = (0..m * k).map(|i| (i as f64).sin()).collect();
            let b: Vec<f64> = (0..k * n).map(|i| (i as f64).cos()).collect();
            let mut c = vec![0.0; m * n];
            gemm(m, k, n, &a, ta, &b, tb, 0.0, &mut c);
            for i in 0..m { for j in 0..n {
                let mut s = 0.0;
                for l in 0..k { let av = if ta { a[l * m + i] } else { a[i * k + l] }; let bv = if tb { b[j * k + l] } else { b[l * n + j] }; s += av * bv; }
                assert!((s - c[i * n + j]).abs() < 1e-12, "{m} {k} {n} {ta} {tb}");
            }}
            eprintln!("ok {m} {k} {n} {ta} {tb}");
        }
    }
}

#[test]
fn matvec_rows_equal_dot_bit_for_bit() {
    use tangent_grad::core::kernels::matrix::{dot, matvec};
    for m in [1usize, 3, 4, 7, 340] {
        let k = 13;
        let a: Vec<f64> = (0..m * k).map(|i| ((i * 7919) as f64).sin()).collect();
        let x: Vec<f64> = (0..k).map(|i| (i as f64 * 0.37).cos()).collect();
        let mut out = vec![0.0; m];
        matvec(k, &a, &x, &mut out);
        for i in 0..m {
            assert_eq!(out[i].to_bits(), dot(&a[i * k..(i + 1) * k], &x).to_bits());
        }
    }
}
