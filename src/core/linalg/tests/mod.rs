//! Tests of the public kernels (whichever implementation they pick) and
//! of each library path against the hand-written one.

use super::*;

mod cholesky;
mod library;
mod solves;


/// Small fixed-seed LCG producing values in [-1, 1).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }
    fn fill(&mut self, len: usize) -> Vec<f64> {
        (0..len).map(|_| self.next()).collect()
    }
}

/// C = A B, A m×p, B p×q.
fn matmul(a: &[f64], b: &[f64], m: usize, p: usize, q: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * q];
    for i in 0..m {
        for r in 0..p {
            for j in 0..q {
                c[i * q + j] += a[i * p + r] * b[r * q + j];
            }
        }
    }
    c
}

fn transpose(a: &[f64], m: usize, q: usize) -> Vec<f64> {
    let mut t = vec![0.0; m * q];
    for i in 0..m {
        for j in 0..q {
            t[j * m + i] = a[i * q + j];
        }
    }
    t
}

fn max_abs(a: &[f64]) -> f64 {
    a.iter().fold(0.0f64, |m, v| m.max(v.abs()))
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).fold(0.0f64, |m, (x, y)| m.max((x - y).abs()))
}

/// Random SPD matrix M Mᵀ + n I.
fn random_spd(n: usize, rng: &mut Lcg) -> Vec<f64> {
    let m = rng.fill(n * n);
    let mut a = matmul(&m, &transpose(&m, n, n), n, n, n);
    for i in 0..n {
        a[i * n + i] += n as f64;
    }
    a
}

fn chol(a: &[f64], n: usize) -> Vec<f64> {
    let mut l = vec![f64::NAN; n * n];
    cholesky(a, n, &mut l).unwrap();
    l
}

/// Well-conditioned triangular matrix with garbage (NaN) in the other triangle.
fn random_triangular(n: usize, lower: bool, rng: &mut Lcg) -> Vec<f64> {
    let mut t = vec![f64::NAN; n * n];
    for i in 0..n {
        for j in 0..n {
            let own = if lower { j <= i } else { j >= i };
            if own {
                t[i * n + j] = 0.5 * rng.next();
            }
        }
        t[i * n + i] = 2.0 + rng.next().abs();
    }
    t
}

/// The triangle of T that the solver may read, with zeros elsewhere.
fn masked(t: &[f64], n: usize, lower: bool) -> Vec<f64> {
    let mut m = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            if (lower && j <= i) || (!lower && j >= i) {
                m[i * n + j] = t[i * n + j];
            }
        }
    }
    m
}

fn random_general(n: usize, rng: &mut Lcg) -> Vec<f64> {
    let mut a = rng.fill(n * n);
    for i in 0..n {
        a[i * n + i] += 1.5; // keep it comfortably nonsingular
    }
    a
}
