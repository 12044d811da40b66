//! The fast tanh against references: bits of the slice and one-value forms
//! against the scalar function, accuracy, special values.

use super::*;

#[test]
fn tanh_one_is_tanh_bit_for_bit() {
    let mut rng = Rng(7);
    let specials = [0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 5e-324, -5e-324, 1e-300, 20.0, 40.0, 1e300];
    let near_split = [TANH_SPLIT, -TANH_SPLIT, f64::from_bits(TANH_SPLIT.to_bits() - 1), f64::from_bits(TANH_SPLIT.to_bits() + 1)];
    let random = (0..200_000).map(|_| {
        let u = rng.next();
        // Spread over exponents: |x| from about 1e-6 to 1e3, either sign.
        let m = (u >> 11) as f64 / (1u64 << 53) as f64;
        let x = 10f64.powf(-6.0 + 9.0 * m);
        if u & 1 == 1 { -x } else { x }
    });
    for x in specials.into_iter().chain(near_split).chain(random) {
        let (one, both) = (tanh_one(x), tanh(x));
        assert!(one.to_bits() == both.to_bits() || (one.is_nan() && both.is_nan()), "tanh({x:e}): {one:e} vs {both:e}");
    }
}

/// Distance in representable doubles (both non-NaN).
fn ulps(a: f64, b: f64) -> u64 {
    if a == b {
        return 0;
    }
    assert!(!a.is_nan() && !b.is_nan(), "NaN: {a} vs {b}");
    let key = |v: f64| {
        let b = v.to_bits() as i64;
        if b < 0 {
            i64::MIN - b
        } else {
            b
        }
    };
    key(a).abs_diff(key(b))
}

/// splitmix64
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// uniform in [lo, hi)
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 * (1.0 / (1u64 << 53) as f64))
    }
}

fn grid(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    (0..=n).map(|i| lo + (hi - lo) * (i as f64 / n as f64)).collect()
}

/// Double-double arithmetic (value = .0 + .1), for reference values
/// accurate to ~1e-28, independent of libm.
#[derive(Clone, Copy, Debug)]
struct Dd(f64, f64);
fn two_sum(a: f64, b: f64) -> Dd {
    let s = a + b;
    let bb = s - a;
    Dd(s, (a - (s - bb)) + (b - bb))
}
fn quick_two_sum(a: f64, b: f64) -> Dd {
    let s = a + b;
    Dd(s, b - (s - a))
}
fn split(a: f64) -> (f64, f64) {
    let c = 134217729.0 * a;
    let h = c - (c - a);
    (h, a - h)
}
fn two_prod(a: f64, b: f64) -> Dd {
    let p = a * b;
    let (ah, al) = split(a);
    let (bh, bl) = split(b);
    Dd(p, ((ah * bh - p) + ah * bl + al * bh) + al * bl)
}
impl Dd {
    fn add(self, o: Dd) -> Dd {
        let s = two_sum(self.0, o.0);
        quick_two_sum(s.0, s.1 + self.1 + o.1)
    }
    fn mul(self, o: Dd) -> Dd {
        let p = two_prod(self.0, o.0);
        quick_two_sum(p.0, p.1 + self.0 * o.1 + self.1 * o.0)
    }
    fn scale(self, b: f64) -> Dd {
        let p = two_prod(self.0, b);
        quick_two_sum(p.0, p.1 + self.1 * b)
    }
    fn div(self, o: Dd) -> Dd {
        let q1 = self.0 / o.0;
        let r = self.add(o.scale(-q1));
        let q2 = r.0 / o.0;
        let r = r.add(o.scale(-q2));
        let q3 = r.0 / o.0;
        quick_two_sum(q1, q2).add(Dd(q3, 0.0))
    }
}
/// e^h − 1 for a double-double |h| ≤ 64: Taylor series after halving
/// h below 1e-3, then em(2y) = em(y)·(em(y) + 2) back up.
fn expm1_dd(h: Dd) -> Dd {
    let mut h = h;
    let mut m = 0;
    while h.0.abs() > 1e-3 {
        h = Dd(h.0 * 0.5, h.1 * 0.5);
        m += 1;
    }
    let mut term = h;
    let mut sum = h;
    for n in 2..=14 {
        term = term.mul(h).div(Dd(n as f64, 0.0));
        sum = sum.add(term);
    }
    for _ in 0..m {
        sum = sum.mul(sum.add(Dd(2.0, 0.0)));
    }
    sum
}
/// tanh x = E/(E + 2), E = e^{2|x|} − 1.
fn tanh_ref(x: f64) -> Dd {
    let z = 2.0 * x.abs();
    let t = if z > 60.0 {
        Dd(1.0, 0.0)
    } else {
        let e = expm1_dd(Dd(z, 0.0));
        e.div(e.add(Dd(2.0, 0.0)))
    };
    if x < 0.0 {
        Dd(-t.0, -t.1)
    } else {
        t
    }
}

/// Error of y in ulps of the reference value.
fn err_ulps(y: f64, r: Dd) -> f64 {
    let ulp = {
        let a = r.0.abs();
        f64::from_bits(a.to_bits() + 1) - a
    };
    ((y - r.0) - r.1).abs() / ulp
}

fn tanh_points() -> Vec<f64> {
    let mut xs = grid(-25.0, 25.0, 1_000_000);
    xs.extend(grid(-1.0, 1.0, 200_000));
    let mut rng = Rng(2);
    xs.extend((0..100_000).map(|_| rng.uniform(-25.0, 25.0)));
    let base = grid(-1.0, 1.0, 20_000);
    xs.extend(base.iter().map(|x| x * 1e-6));
    xs.extend(base.iter().map(|x| x * 1e-12));
    xs.extend(base.iter().map(|x| x * 1e-300));
    xs.extend([
        5e-324,
        -5e-324,
        1e-310,
        f64::MIN_POSITIVE,
        0.625,
        -0.625,
        0.6249999999999999,
        20.0,
        30.0,
        400.0,
        1e300,
    ]);
    xs
}

#[test]
fn tanh_accuracy_vs_libm() {
    let xs = tanh_points();
    let mut out = vec![0.0; xs.len()];
    tanh_slice(&xs, &mut out);
    let (mut worst, mut over): (f64, usize) = (0.0, 0);
    for (&x, &y) in xs.iter().zip(&out) {
        let r = x.tanh();
        // glibc's tanh is itself up to ~2 ulp from the exact value (see
        // the double-double test for this tanh's own error), so a 2-ulp
        // difference (4.0e-16..4.44e-16 relative for results in
        // [0.5, 0.555)) can occur where glibc errs by 1.3 ulp.
        let rel = if r == 0.0 { y.abs() } else { ((y - r) / r).abs() };
        assert!(rel <= 4.5e-16, "tanh({x:e}) = {y:e}, libm {r:e}, rel {rel:e}");
        assert!(ulps(y, r) <= 2, "tanh({x:e}) = {y:e}, libm {r:e}");
        worst = worst.max(rel);
        if rel > 4e-16 {
            over += 1;
        }
    }
    println!(
        "tanh vs libm: max rel {worst:.3e}, {over} of {} points above 4e-16",
        xs.len()
    );
    // All but a handful of points meet 4e-16.
    assert!(over * 100_000 < xs.len(), "{over} points above 4e-16 (max {worst:e})");
}

#[test]
fn tanh_accuracy_vs_double_double() {
    let mut rng = Rng(12);
    let mut worst: f64 = 0.0;
    for i in 0..40_000 {
        let x = match i % 4 {
            0 => rng.uniform(0.0, 0.625),
            1 => rng.uniform(0.625, 1.5),
            2 => rng.uniform(1.5, 20.0),
            _ => rng.uniform(0.0, 1.0) * 1e-5,
        };
        worst = worst.max(err_ulps(tanh(x), tanh_ref(x)));
    }
    println!("tanh: max error vs double-double {worst:.3} ulp");
    assert!(worst < 0.85, "max error {worst} ulp");
}

#[test]
fn tanh_special_values_and_symmetry() {
    assert_eq!(tanh(0.0).to_bits(), 0.0f64.to_bits());
    assert_eq!(tanh(-0.0).to_bits(), (-0.0f64).to_bits());
    assert_eq!(tanh(f64::INFINITY), 1.0);
    assert_eq!(tanh(f64::NEG_INFINITY), -1.0);
    assert_eq!(tanh(f64::MAX), 1.0);
    assert_eq!(tanh(20.0), 1.0);
    assert!(tanh(f64::NAN).is_nan());
    assert_eq!(tanh(5e-324), 5e-324);
    assert_eq!(tanh(-5e-324), -5e-324);
    assert_eq!(tanh(1e-200), 1e-200);
    let mut rng = Rng(3);
    for i in 0..200_000 {
        let x = match i % 4 {
            0 => rng.uniform(0.0, 30.0),
            1 => rng.uniform(0.0, 1.0),
            2 => f64::from_bits(rng.next() >> 1), // any non-negative double, NaNs included
            _ => rng.uniform(0.0, 1e-6),
        };
        let (p, m) = (tanh(x), tanh(-x));
        if x.is_nan() {
            assert!(p.is_nan() && m.is_nan());
        } else {
            assert_eq!(m.to_bits(), (-p).to_bits(), "x = {x:e}");
            assert!(p.abs() <= 1.0);
        }
    }
}

/// The slice kernels give the scalar function's bits at every offset and
/// length (short path, whole blocks, partial blocks, SIMD remainders).
#[test]
fn slices_match_scalar_at_any_offset() {
    let mut rng = Rng(5);
    let mut xs: Vec<f64> = (0..1200)
        .map(|i| match i % 5 {
            0 => rng.uniform(-3.0, 3.0),
            1 => rng.uniform(-800.0, 800.0),
            2 => rng.uniform(-1.0, 1.0) * 1e-9,
            3 => rng.uniform(-30.0, 0.0),
            _ => f64::from_bits(rng.next()),
        })
        .collect();
    xs.extend([
        0.0,
        -0.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        5e-324,
        -5e-324,
        709.8,
        -745.1,
        0.625,
        -0.625,
    ]);
    // Every vector width `widest!` compiles for (the same bits: results
    // do not depend on it, so other tests running meanwhile are unaffected).
    for widest in [2, 1, 0] {
        crate::core::widest::WIDEST.store(widest, std::sync::atomic::Ordering::Relaxed);
        let (slice_fn, scalar_fn) = (tanh_slice, tanh);
        for start in 0..5 {
            for len in [0, 1, 2, 3, 15, 16, 17, 31, 255, 256, 257, 513, 1000, xs.len() - start] {
                let a = &xs[start..start + len];
                let mut out = vec![0.0; len];
                slice_fn(a, &mut out);
                for (&x, &y) in a.iter().zip(&out) {
                    let s = scalar_fn(x);
                    assert!(
                        y.to_bits() == s.to_bits() || (y.is_nan() && s.is_nan()),
                        "x = {x:e}: slice {y:e} vs scalar {s:e} (widest {widest})"
                    );
                }
            }
        }
    }
    crate::core::widest::WIDEST.store(2, std::sync::atomic::Ordering::Relaxed);
}
