use super::*;

// ----- Triangular solve --------------------------------------------------

#[test]
fn triangular_solve_satisfies_equation() {
    let mut rng = Lcg(77);
    for &lower in &[true, false] {
        for &k in &[1usize, 3] {
            let n = 7;
            let t = random_triangular(n, lower, &mut rng);
            let b = rng.fill(n * k);
            let mut x = vec![0.0; n * k];
            triangular_solve(&t, n, lower, &b, k, &mut x);
            assert!(x.iter().all(|v| v.is_finite()), "garbage triangle leaked");
            let tx = matmul(&masked(&t, n, lower), &x, n, n, k);
            assert!(max_diff(&tx, &b) <= 1e-14, "lower = {lower}, k = {k}");

            // A different garbage value gives bit-identical results.
            let mut t2 = t.clone();
            for i in 0..n {
                for j in 0..n {
                    if (lower && j > i) || (!lower && j < i) {
                        t2[i * n + j] = 1e300;
                    }
                }
            }
            let mut x2 = vec![0.0; n * k];
            triangular_solve(&t2, n, lower, &b, k, &mut x2);
            assert_eq!(x, x2);

            // bbar: Tᵀ Bbar == Xbar
            let xbar = rng.fill(n * k);
            let mut bbar = vec![f64::NAN; n * k];
            triangular_solve_bbar(&t, n, lower, &xbar, k, &mut bbar);
            let ttb = matmul(&transpose(&masked(&t, n, lower), n, n), &bbar, n, n, k);
            assert!(max_diff(&ttb, &xbar) <= 1e-14, "lower = {lower}, k = {k}");
            let mut bbar2 = vec![0.0; n * k];
            triangular_solve_bbar(&t2, n, lower, &xbar, k, &mut bbar2);
            assert_eq!(bbar, bbar2);
        }
    }
}

#[test]
fn triangular_solve_adjoints_match_finite_differences() {
    let mut rng = Lcg(4242);
    for &lower in &[true, false] {
        for &k in &[1usize, 3] {
            let n = 6;
            let t = random_triangular(n, lower, &mut rng);
            let b = rng.fill(n * k);
            let w = rng.fill(n * k); // f = Σ W ∘ X
            let f = |t: &[f64], b: &[f64]| -> f64 {
                let mut x = vec![0.0; n * k];
                triangular_solve(t, n, lower, b, k, &mut x);
                x.iter().zip(&w).map(|(p, q)| p * q).sum()
            };
            let mut x = vec![0.0; n * k];
            triangular_solve(&t, n, lower, &b, k, &mut x);
            let mut bbar = vec![0.0; n * k];
            triangular_solve_bbar(&t, n, lower, &w, k, &mut bbar);
            let mut tbar = vec![7.0; n * n];
            triangular_solve_tbar(n, lower, &bbar, &x, k, &mut tbar, false);

            let h = 1e-6;
            for idx in 0..n * k {
                let mut bp = b.clone();
                let mut bm = b.clone();
                bp[idx] += h;
                bm[idx] -= h;
                let fd = (f(&t, &bp) - f(&t, &bm)) / (2.0 * h);
                assert!((fd - bbar[idx]).abs() <= 1e-8 * bbar[idx].abs().max(1.0));
            }
            for i in 0..n {
                for j in 0..n {
                    let own = if lower { j <= i } else { j >= i };
                    let got = tbar[i * n + j];
                    if !own {
                        assert_eq!(got, 7.0, "other triangle must be untouched");
                        continue;
                    }
                    let mut tp = t.clone();
                    let mut tm = t.clone();
                    tp[i * n + j] += h;
                    tm[i * n + j] -= h;
                    let fd = (f(&tp, &b) - f(&tm, &b)) / (2.0 * h);
                    let an = got - 7.0;
                    assert!(
                        (fd - an).abs() <= 1e-8 * an.abs().max(1.0),
                        "lower = {lower}, k = {k}, ({i},{j}): fd {fd} vs {an}"
                    );
                }
            }
        }
    }
}

#[test]
fn triangular_solve_zero_pivot_gives_non_finite() {
    let t = [1.0, 0.0, 2.0, 0.0]; // lower, T[1][1] = 0
    let mut x = [0.0; 2];
    triangular_solve(&t, 2, true, &[1.0, 1.0], 1, &mut x);
    assert_eq!(x[0], 1.0);
    assert_eq!(x[1], f64::NEG_INFINITY);
    triangular_solve(&t, 2, true, &[1.0, 2.0], 1, &mut x);
    assert!(x[1].is_nan()); // 0 / 0
    let mut y = [0.0; 2];
    triangular_solve_bbar(&t, 2, true, &[1.0, 1.0], 1, &mut y);
    assert!(!y[1].is_finite());
}

// ----- LU ----------------------------------------------------------------

fn lu_of(a: &[f64], n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut lu = vec![f64::NAN; n * n];
    let mut perm = vec![f64::NAN; n];
    lu_factor(a, n, &mut lu, &mut perm).unwrap();
    (lu, perm)
}

fn check_lu_solves(a: &[f64], n: usize, rng: &mut Lcg) {
    let (lu, perm) = lu_of(a, n);
    // perm is a permutation of 0..n.
    let mut seen = vec![false; n];
    for &p in &perm {
        assert_eq!(p.fract(), 0.0);
        seen[p as usize] = true;
    }
    assert!(seen.iter().all(|&s| s));
    // P A == L U
    let mut l = vec![0.0; n * n];
    let mut u = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            if j < i {
                l[i * n + j] = lu[i * n + j];
            } else {
                u[i * n + j] = lu[i * n + j];
            }
        }
        l[i * n + i] = 1.0;
    }
    let mut pa = vec![0.0; n * n];
    for i in 0..n {
        let p = perm[i] as usize;
        pa[i * n..i * n + n].copy_from_slice(&a[p * n..p * n + n]);
    }
    let scale = max_abs(a);
    assert!(max_diff(&matmul(&l, &u, n, n, n), &pa) <= 1e-14 * scale * n as f64);
    let at = transpose(a, n, n);
    for &k in &[1usize, 3] {
        let b = rng.fill(n * k);
        let mut x = vec![f64::NAN; n * k];
        lu_solve(&lu, &perm, n, &b, k, &mut x);
        assert!(max_diff(&matmul(a, &x, n, n, k), &b) <= 1e-12, "A X == B, n = {n}, k = {k}");
        let c = rng.fill(n * k);
        let mut y = vec![f64::NAN; n * k];
        lu_solve_transpose(&lu, &perm, n, &c, k, &mut y);
        assert!(max_diff(&matmul(&at, &y, n, n, k), &c) <= 1e-12, "Aᵀ Y == C, n = {n}, k = {k}");
    }
}

#[test]
fn lu_solves_random_matrices() {
    let mut rng = Lcg(8675309);
    for &n in &[1usize, 2, 6, 25] {
        let a = random_general(n, &mut rng);
        check_lu_solves(&a, n, &mut rng);
    }
}

#[test]
fn lu_solves_matrices_needing_pivoting() {
    let mut rng = Lcg(11);
    let a = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 9.0];
    check_lu_solves(&a, 3, &mut rng);
    let (_, perm) = lu_of(&a, 3);
    assert_eq!(perm[0], 2.0, "largest pivot chosen");
    // A pure permutation matrix (a 4-cycle) and an anti-diagonal one.
    let p4 = [
        0.0, 1.0, 0.0, 0.0, //
        0.0, 0.0, 1.0, 0.0, //
        0.0, 0.0, 0.0, 1.0, //
        1.0, 0.0, 0.0, 0.0,
    ];
    check_lu_solves(&p4, 4, &mut rng);
    let anti = [0.0, 0.0, 2.0, 0.0, 3.0, 0.0, 5.0, 0.0, 0.0];
    check_lu_solves(&anti, 3, &mut rng);
    // Random matrix with a zero first column head and tiny diagonal.
    let n = 8;
    let mut a = rng.fill(n * n);
    for i in 0..n {
        a[i * n + i] *= 1e-3;
    }
    a[0] = 0.0;
    check_lu_solves(&a, n, &mut rng);
}

#[test]
fn lu_singular_error() {
    let msg = "solve: matrix is singular (pivot below tolerance)";
    let mut lu = vec![0.0; 9];
    let mut perm = vec![0.0; 3];
    let e = lu_factor(&[1.0, 2.0, 2.0, 4.0], 2, &mut lu, &mut perm).unwrap_err();
    assert_eq!(e.0, msg);
    let e = lu_factor(&[0.0; 9], 3, &mut lu, &mut perm).unwrap_err();
    assert_eq!(e.0, msg);
    let e = lu_factor(&[0.0], 1, &mut lu, &mut perm).unwrap_err();
    assert_eq!(e.0, msg);
    // Rank 2 in 3×3: third row = first + second.
    let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 5.0, 7.0, 9.0];
    let e = lu_factor(&a, 3, &mut lu, &mut perm).unwrap_err();
    assert_eq!(e.0, msg);
    // Nearly singular but above tolerance: fine.
    assert!(lu_factor(&[1.0, 1.0, 1.0, 1.0 + 1e-10], 2, &mut lu, &mut perm).is_ok());
    // Empty matrix: nothing to do.
    assert!(lu_factor(&[], 0, &mut [], &mut []).is_ok());
}

#[test]
fn lu_nan_and_inf_propagate() {
    let n = 3;
    let mut lu = vec![0.0; n * n];
    let mut perm = vec![0.0; n];
    let mut x = vec![0.0; n];
    // NaN as the would-be pivot.
    let a = [f64::NAN, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 9.0];
    lu_factor(&a, n, &mut lu, &mut perm).unwrap();
    lu_solve(&lu, &perm, n, &[1.0, 2.0, 3.0], 1, &mut x);
    assert!(x.iter().any(|v| v.is_nan()));
    lu_solve_transpose(&lu, &perm, n, &[1.0, 2.0, 3.0], 1, &mut x);
    assert!(x.iter().any(|v| v.is_nan()));
    // A whole NaN column.
    let a = [f64::NAN, 1.0, 0.0, f64::NAN, 0.0, 1.0, f64::NAN, 2.0, 2.0];
    lu_factor(&a, n, &mut lu, &mut perm).unwrap();
    lu_solve(&lu, &perm, n, &[1.0, 2.0, 3.0], 1, &mut x);
    assert!(x.iter().all(|v| v.is_nan()));
    // Infinity entries propagate too (max|A| is over finite entries).
    let a = [f64::INFINITY, 1.0, 0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 1.0];
    lu_factor(&a, n, &mut lu, &mut perm).unwrap();
    lu_solve(&lu, &perm, n, &[1.0, 2.0, 3.0], 1, &mut x);
    assert_eq!(x[2], 3.0);
    // Garbage permutation: NaN output, no panic.
    let bad_perm = [0.0, 7.0, f64::NAN];
    lu_solve(&lu, &bad_perm, n, &[1.0, 2.0, 3.0], 1, &mut x);
    assert!(x[1].is_nan());
    lu_solve_transpose(&lu, &bad_perm, n, &[1.0, 2.0, 3.0], 1, &mut x);
    assert!(x.iter().all(|v| v.is_nan()));
}

#[test]
fn lu_adjoint_matches_finite_differences() {
    let mut rng = Lcg(555);
    for &k in &[1usize, 3] {
        let n = 5;
        // A well-conditioned matrix with its rows rotated (so pivoting is
        // needed) and a zero at [0][0].
        let d = random_general(n, &mut rng);
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            let src = (i + 1) % n;
            a[i * n..i * n + n].copy_from_slice(&d[src * n..src * n + n]);
        }
        a[0] = 0.0;
        let b = rng.fill(n * k);
        let w = rng.fill(n * k); // f = Σ W ∘ (A⁻¹ B)
        let f = |a: &[f64], b: &[f64]| -> f64 {
            let (lu, perm) = lu_of(a, n);
            let mut x = vec![0.0; n * k];
            lu_solve(&lu, &perm, n, b, k, &mut x);
            x.iter().zip(&w).map(|(p, q)| p * q).sum()
        };
        let (lu, perm) = lu_of(&a, n);
        let mut x = vec![0.0; n * k];
        lu_solve(&lu, &perm, n, &b, k, &mut x);
        let mut bbar = vec![0.0; n * k];
        lu_solve_transpose(&lu, &perm, n, &w, k, &mut bbar);
        let init = rng.fill(n * n);
        let mut abar = init.clone();
        sub_outer(n, &bbar, &x, k, &mut abar);
        let h = 1e-6;
        for idx in 0..n * k {
            let mut bp = b.clone();
            let mut bm = b.clone();
            bp[idx] += h;
            bm[idx] -= h;
            let fd = (f(&a, &bp) - f(&a, &bm)) / (2.0 * h);
            assert!((fd - bbar[idx]).abs() <= 1e-7 * bbar[idx].abs().max(1.0), "k = {k}, B[{idx}]");
        }
        for idx in 0..n * n {
            let mut ap = a.clone();
            let mut am = a.clone();
            ap[idx] += h;
            am[idx] -= h;
            let fd = (f(&ap, &b) - f(&am, &b)) / (2.0 * h);
            let an = abar[idx] - init[idx];
            assert!((fd - an).abs() <= 1e-7 * an.abs().max(1.0), "k = {k}, A[{idx}]: fd {fd} vs {an}");
        }
    }
}

#[test]
fn sub_outer_accumulates() {
    let n = 2;
    let k = 2;
    let bbar = [1.0, 2.0, 3.0, 4.0];
    let x = [5.0, 6.0, 7.0, 8.0];
    let mut abar = [1.0; 4];
    sub_outer(n, &bbar, &x, k, &mut abar);
    // bbar xᵀ = [[17, 23], [39, 53]]
    assert_eq!(abar, [-16.0, -22.0, -38.0, -52.0]);
    let mut abar1 = [0.0; 4];
    sub_outer(2, &[1.0, 2.0], &[3.0, 4.0], 1, &mut abar1);
    assert_eq!(abar1, [-3.0, -4.0, -6.0, -8.0]);
}

fn bits(x: &[f64]) -> Vec<u64> {
    x.iter().map(|v| v.to_bits()).collect()
}

/// The in-place solves with several right-hand sides, whose entries are
/// carried in registers a block at a time, give the bits of the plain
/// substitutions: one `axpy` per term, row after row (or, transposed,
/// column after column), at widths below, at and past a block.
#[test]
fn blocked_solves_match_term_by_term_substitution() {
    fn lower(t: &[f64], n: usize, unit: bool, x: &mut [f64], k: usize) {
        for i in 0..n {
            for p in 0..i {
                let (done, rest) = x.split_at_mut(i * k);
                axpy(&mut rest[..k], -t[i * n + p], &done[p * k..(p + 1) * k]);
            }
            if !unit {
                x[i * k..(i + 1) * k].iter_mut().for_each(|v| *v /= t[i * n + i]);
            }
        }
    }
    fn upper(t: &[f64], n: usize, unit: bool, x: &mut [f64], k: usize) {
        for i in (0..n).rev() {
            for p in i + 1..n {
                let (head, done) = x.split_at_mut((i + 1) * k);
                axpy(&mut head[i * k..], -t[i * n + p], &done[(p - i - 1) * k..(p - i) * k]);
            }
            if !unit {
                x[i * k..(i + 1) * k].iter_mut().for_each(|v| *v /= t[i * n + i]);
            }
        }
    }
    fn lower_transposed(t: &[f64], n: usize, x: &mut [f64], k: usize) {
        for p in (0..n).rev() {
            x[p * k..(p + 1) * k].iter_mut().for_each(|v| *v /= t[p * n + p]);
            for i in 0..p {
                let (head, rest) = x.split_at_mut(p * k);
                axpy(&mut head[i * k..(i + 1) * k], -t[p * n + i], &rest[..k]);
            }
        }
    }
    fn upper_transposed(t: &[f64], n: usize, x: &mut [f64], k: usize) {
        for p in 0..n {
            x[p * k..(p + 1) * k].iter_mut().for_each(|v| *v /= t[p * n + p]);
            for i in p + 1..n {
                let (head, rest) = x.split_at_mut(i * k);
                axpy(&mut rest[..k], -t[p * n + i], &head[p * k..(p + 1) * k]);
            }
        }
    }
    let mut rng = Lcg(5);
    for n in [1usize, 2, 9, 23] {
        for k in [2usize, 3, 7, 8, 9, 16, 21] {
            for up in [false, true] {
                let t = random_triangular(n, !up, &mut rng);
                let b = rng.fill(n * k);
                for unit in [false, true] {
                    let (mut got, mut want) = (b.clone(), b.clone());
                    if up {
                        solve_upper_in_place(&t, n, unit, &mut got, k);
                        upper(&t, n, unit, &mut want, k);
                    } else {
                        solve_lower_in_place(&t, n, unit, &mut got, k);
                        lower(&t, n, unit, &mut want, k);
                    }
                    assert_eq!(bits(&got), bits(&want), "n = {n}, k = {k}, upper = {up}, unit = {unit}");
                }
                let (mut got, mut want) = (b.clone(), b.clone());
                if up {
                    solve_upper_transposed_in_place(&t, n, &mut got, k);
                    upper_transposed(&t, n, &mut want, k);
                } else {
                    solve_lower_transposed_in_place(&t, n, &mut got, k);
                    lower_transposed(&t, n, &mut want, k);
                }
                assert_eq!(bits(&got), bits(&want), "transposed: n = {n}, k = {k}, upper = {up}");
            }
        }
    }
}


/// The column-by-column substitutions `lu::lu_solve_transpose` and
/// `lu::sub_outer` replaced: one row update (`y += (−m)·x`) after another,
/// and one `dot` per entry. The kernels now keep rows in registers and
/// share loads, and must give these bits.
fn column_by_column(lu: &[f64], perm: &[f64], n: usize, c: &[f64], k: usize) -> Vec<f64> {
    let q = |i: usize| perm[i] as usize;
    let mut y = vec![0.0; n * k];
    for i in 0..n {
        y[q(i) * k..q(i) * k + k].copy_from_slice(&c[i * k..i * k + k]);
    }
    let update = |y: &mut [f64], to: usize, from: usize, m: f64| {
        for l in 0..k {
            let x = y[from * k + l];
            y[to * k + l] += -m * x;
        }
    };
    for p in 0..n {
        let d = lu[p * n + p];
        y[q(p) * k..q(p) * k + k].iter_mut().for_each(|v| *v /= d);
        for i in p + 1..n {
            update(&mut y, q(i), q(p), lu[p * n + i]);
        }
    }
    for p in (0..n).rev() {
        for i in 0..p {
            update(&mut y, q(i), q(p), lu[p * n + i]);
        }
    }
    y
}

#[test]
fn lu_adjoint_kernels_keep_the_bits_of_one_update_after_another() {
    let mut rng = Lcg(2026);
    for n in 1..=14 {
        let a = random_general(n, &mut rng);
        let (lu, perm) = lu_of(&a, n);
        for k in [1, 2, 7, 8, 9, 10, 17] {
            let c = rng.fill(n * k);
            let mut y = vec![f64::NAN; n * k];
            lu::lu_solve_transpose(&lu, &perm, n, &c, k, &mut y);
            assert_eq!(bits(&y), bits(&column_by_column(&lu, &perm, n, &c, k)), "lu_solve_transpose n = {n}, k = {k}");

            let (bbar, x, init) = (rng.fill(n * k), rng.fill(n * k), rng.fill(n * n));
            let mut abar = init.clone();
            lu::sub_outer(n, &bbar, &x, k, &mut abar);
            let want: Vec<f64> = (0..n * n).map(|e| init[e] - dot(&bbar[e / n * k..e / n * k + k], &x[e % n * k..e % n * k + k])).collect();
            let want = if k == 1 { (0..n * n).map(|e| init[e] + -bbar[e / n] * x[e % n]).collect() } else { want };
            assert_eq!(bits(&abar), bits(&want), "sub_outer n = {n}, k = {k}");
        }
    }
}
