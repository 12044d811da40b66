//! Special functions: log-gamma, digamma and trigamma.
//!
//! `lgamma` uses the Lanczos approximation (g = 7, 9 coefficients) with the
//! reflection formula below 1/2. Near the two zeros of log Γ (x = 1 and x = 2)
//! the Lanczos sum only has small *absolute* error, so there a Taylor series
//! of log Γ(1 + z) is used instead, keeping the *relative* error small.
//!
//! `digamma` uses upward recurrence to x >= 6 followed by the asymptotic
//! (Bernoulli) series, and the reflection formula for negative arguments.

use super::math::{cos, ln, ln_1p, sin};
use std::f64::consts::PI;

/// Lanczos coefficients for g = 7, n = 9.
const LANCZOS_G: f64 = 7.0;
const LANCZOS: [f64; 9] = [
    0.999_999_999_999_809_9,
    676.520_368_121_885_1,
    -1_259.139_216_722_402_8,
    771.323_428_777_653_1,
    -176.615_029_162_140_6,
    12.507_343_278_686_905,
    -0.138_571_095_265_720_12,
    9.984_369_578_019_572e-6,
    1.505_632_735_149_311_6e-7,
];

/// 0.5 * ln(2π)
const HALF_LN_2PI: f64 = 0.918_938_533_204_672_7;
/// Euler–Mascheroni constant γ.
const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;

/// Coefficients c_k = (-1)^k ζ(k) / k, k = 2..=25, of
/// log Γ(1 + z) = -γ z + Σ_k c_k z^k  (|z| < 1).
const LGAMMA1P_SERIES: [f64; 24] = [
    1.644_934_066_848_226_4 / 2.0,
    -1.202_056_903_159_594_3 / 3.0,
    1.082_323_233_711_138_2 / 4.0,
    -1.036_927_755_143_37 / 5.0,
    1.017_343_061_984_449 / 6.0,
    -1.008_349_277_381_922_8 / 7.0,
    1.004_077_356_197_944_3 / 8.0,
    -1.002_008_392_826_082_2 / 9.0,
    1.000_994_575_127_818_1 / 10.0,
    -1.000_494_188_604_119_5 / 11.0,
    1.000_246_086_553_308 / 12.0,
    -1.000_122_713_347_578_5 / 13.0,
    1.000_061_248_135_058_7 / 14.0,
    -1.000_030_588_236_307 / 15.0,
    1.000_015_282_259_408_7 / 16.0,
    -1.000_007_637_197_637_9 / 17.0,
    1.000_003_817_293_265 / 18.0,
    -1.000_001_908_212_716_6 / 19.0,
    1.000_000_953_962_033_9 / 20.0,
    -1.000_000_476_932_986_8 / 21.0,
    1.000_000_238_450_502_7 / 22.0,
    -1.000_000_119_219_926 / 23.0,
    1.000_000_059_608_189 / 24.0,
    -1.000_000_029_803_503_5 / 25.0,
];

/// Half-width of the windows around 1 and 2 where the series is used.
const SERIES_RADIUS: f64 = 0.25;

/// log Γ(1 + z) for |z| <= SERIES_RADIUS, by its Taylor series.
fn lgamma1p_series(z: f64) -> f64 {
    // Terms up to z^25: the truncation error is below 0.25^26 / 26 ≈ 5e-17,
    // i.e. under 1e-15 relative to log Γ anywhere in the window.
    let mut acc = 0.0;
    for &c in LGAMMA1P_SERIES.iter().rev() {
        acc = acc * z + c;
    }
    z * (acc * z - EULER_GAMMA)
}

/// sin(π x) with exact argument reduction (x finite).
fn sin_pi(x: f64) -> f64 {
    // `%` is exact in floating point: r in (-2, 2).
    let mut r = x % 2.0;
    if r > 1.0 {
        r -= 2.0; // exact (Sterbenz)
    } else if r < -1.0 {
        r += 2.0;
    }
    // r in [-1, 1]
    if r > 0.5 {
        sin(PI * (1.0 - r))
    } else if r < -0.5 {
        -sin(PI * (1.0 + r))
    } else {
        sin(PI * r)
    }
}

/// π / tan(π x) with exact argument reduction (x finite, not an integer).
fn pi_cot_pi(x: f64) -> f64 {
    // tan has period π, so reduce x to r in [-1/2, 1/2] exactly.
    let r = x - x.round();
    let a = PI * r;
    PI * cos(a) / sin(a)
}

/// Lanczos log Γ(x) for x >= 0.5.
fn lgamma_lanczos(x: f64) -> f64 {
    let z = x - 1.0;
    let mut sum = LANCZOS[0];
    for (i, &p) in LANCZOS.iter().enumerate().skip(1) {
        sum += p / (z + i as f64);
    }
    // t = z + g + 1/2;  (z + 1/2) ln t - t == (z + 1/2)(ln t - 1) - g,
    // written this way so that huge x does not overflow early.
    let t = z + LANCZOS_G + 0.5;
    HALF_LN_2PI + (z + 0.5) * (ln(t) - 1.0) - LANCZOS_G + ln(sum)
}

/// log Γ(x) for x >= 0.5.
fn lgamma_pos(x: f64) -> f64 {
    if x == 1.0 || x == 2.0 {
        return 0.0;
    }
    let z1 = x - 1.0;
    if z1.abs() <= SERIES_RADIUS {
        return lgamma1p_series(z1);
    }
    let z2 = x - 2.0;
    if z2.abs() <= SERIES_RADIUS {
        // log Γ(2 + z) = log Γ(1 + z) + log(1 + z)
        return lgamma1p_series(z2) + ln_1p(z2);
    }
    lgamma_lanczos(x)
}

/// log|Γ(x)| by the Lanczos approximation with g = 7 (9 coefficients),
/// reflection for x < 0.5. At non-positive integers: +Infinity.
/// NaN -> NaN, +Inf -> +Inf (and -Inf -> +Inf).
pub fn lgamma(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x.is_infinite() {
        return f64::INFINITY;
    }
    if x <= 0.0 && x == x.floor() {
        return f64::INFINITY; // pole (includes -0.0 and 0.0)
    }
    if x.abs() < 1e-17 {
        // Γ(x) = 1/x - γ + O(x): log|Γ(x)| = -log|x| - γ x + O(x²).
        // (Avoids π / sin(π x) overflowing for subnormal x.)
        return -ln(x.abs()) - EULER_GAMMA * x;
    }
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 - x) = π / sin(π x)
        let s = sin_pi(x).abs();
        return ln(PI / s) - lgamma_pos(1.0 - x);
    }
    lgamma_pos(x)
}

/// c_k = B_{2k} / (2k), k = 1..=10, for ψ(x) ~ ln x - 1/(2x) - Σ c_k x^(-2k).
const DIGAMMA_ASYMPTOTIC: [f64; 10] = [
    1.0 / 12.0,
    -1.0 / 120.0,
    1.0 / 252.0,
    -1.0 / 240.0,
    1.0 / 132.0,
    -691.0 / 32760.0,
    1.0 / 12.0,
    -3617.0 / 8160.0,
    43867.0 / 14364.0,
    -174611.0 / 6600.0,
];

/// ψ(x) for x >= 6 by the asymptotic series (through x^-20).
fn digamma_asymptotic(x: f64) -> f64 {
    let u = 1.0 / (x * x);
    let mut acc = 0.0;
    for &c in DIGAMMA_ASYMPTOTIC.iter().rev() {
        acc = acc * u + c;
    }
    ln(x) - 0.5 / x - u * acc
}

/// ψ(x) = d/dx lgamma(x). Non-positive integers (and -Infinity): NaN.
/// NaN -> NaN, +Inf -> +Inf.
pub fn digamma(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return f64::INFINITY;
    }
    if x == f64::NEG_INFINITY {
        return f64::NAN;
    }
    if x <= 0.0 && x == x.floor() {
        return f64::NAN;
    }
    let mut x = x;
    let mut acc = 0.0;
    if x < 0.0 {
        // Reflection: ψ(x) = ψ(1 - x) - π / tan(π x); 1 - x > 1.
        acc -= pi_cot_pi(x);
        x = 1.0 - x;
    }
    // Recurrence ψ(x) = ψ(x + 1) - 1/x up to x >= 6.
    while x < 6.0 {
        acc -= 1.0 / x;
        x += 1.0;
    }
    acc + digamma_asymptotic(x)
}

/// ψ'(x) = d/dx ψ(x), the second derivative of lgamma. Non-positive
/// integers (and -Infinity): NaN, as for `digamma`. +Inf -> 0.
pub fn trigamma(x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY || (x <= 0.0 && x == x.floor()) {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return 0.0;
    }
    let mut x = x;
    let mut acc = 0.0;
    let mut sign = 1.0;
    if x < 0.0 {
        // Reflection: ψ'(x) = π² / sin²(π x) - ψ'(1 - x); 1 - x > 1.
        let s = sin(PI * (x - x.round()));
        acc = PI * PI / (s * s);
        sign = -1.0;
        x = 1.0 - x;
    }
    // Recurrence ψ'(x) = ψ'(x + 1) + 1/x² up to x >= 12, where the series
    // below has converged to a few ulps.
    let mut rec = 0.0;
    while x < 12.0 {
        rec += 1.0 / (x * x);
        x += 1.0;
    }
    acc + sign * (rec + trigamma_asymptotic(x))
}

/// B_2k for k = 1..=8: ψ'(x) ~ 1/x + 1/(2x²) + Σ B_2k / x^(2k+1).
const TRIGAMMA_ASYMPTOTIC: [f64; 8] =
    [1.0 / 6.0, -1.0 / 30.0, 1.0 / 42.0, -1.0 / 30.0, 5.0 / 66.0, -691.0 / 2730.0, 7.0 / 6.0, -3617.0 / 510.0];

fn trigamma_asymptotic(x: f64) -> f64 {
    let u = 1.0 / (x * x);
    let mut acc = 0.0;
    for &c in TRIGAMMA_ASYMPTOTIC.iter().rev() {
        acc = acc * u + c;
    }
    1.0 / x + 0.5 * u + acc * u / x
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(a: f64, b: f64) -> f64 {
        if a == b {
            0.0
        } else {
            (a - b).abs() / b.abs().max(f64::MIN_POSITIVE)
        }
    }

    #[test]
    fn lgamma_known_values() {
        let cases = [
            (0.5, 0.5723649429247001),
            (10.0, 12.801827480081469),
            (100.0, 359.1342053695754),
            (-0.5, 1.2655121234846454),
            (1e-8, 18.420_680_738_180_21),
            (0.1, 2.252712651734206),
            (1.5, -0.12078223763524522),
            (3.0, std::f64::consts::LN_2),
            (-2.5, -0.05624371649767405),
        ];
        for &(x, want) in &cases {
            let got = lgamma(x);
            assert!(rel(got, want) <= 1e-13, "lgamma({x}) = {got}, want {want}");
        }
        assert_eq!(lgamma(1.0), 0.0);
        assert_eq!(lgamma(2.0), 0.0);
    }

    #[test]
    fn lgamma_reference_table() {
        // Reference values computed independently at 40 significant digits.
        let cases = [
            (0.1, 2.252712651734206),
            (0.25, 1.2880225246980774),
            (0.37, 0.8769468194848793),
            (0.77, 0.18206516866053704),
            (0.9, 0.06637623973474295),
            (1.01, -0.005690307946069651),
            (1.3, -0.10817480950786047),
            (1.5, -0.12078223763524522),
            (1.7, -0.09580769740706588),
            (1.77, -0.07929959547387044),
            (1.99, -0.004195529088791668),
            (2.01, 0.004260022907098346),
            (2.3, 0.15418945495963046),
            (2.6, 0.35741186354897986),
            (3.3, 0.9870985778947344),
            (4.5, 2.4537365708424423),
            (7.5, 7.534364236758733),
            (13.7, 21.77464517303463),
            (42.42, 115.60113124678627),
            (99.9, 358.67423945197754),
            (-0.1, 2.3689613327287886),
            (-1.3, 1.2024757863901114),
            (-3.7, -1.3797399049658245),
            (-10.25, -14.20399790093109),
        ];
        for &(x, want) in &cases {
            let got = lgamma(x);
            assert!(rel(got, want) <= 1e-13, "lgamma({x}) = {got}, want {want}");
        }
    }

    #[test]
    fn trigamma_closed_forms_and_recurrence() {
        let z2 = PI * PI / 6.0;
        // ψ'(1) = π²/6, ψ'(1/2) = π²/2, ψ'(2) = π²/6 - 1, ψ'(-1/2) = π²/2 + 4.
        for (x, want) in [(1.0, z2), (0.5, PI * PI / 2.0), (2.0, z2 - 1.0), (-0.5, PI * PI / 2.0 + 4.0)] {
            assert!(rel(trigamma(x), want) < 4e-15, "trigamma({x}) = {} against {want}", trigamma(x));
        }
        // ψ'(x) - ψ'(x + 1) = 1/x² across the switch to the series.
        for x in [0.3, 3.7, 11.5, 11.99, 12.0, 40.0, -2.3] {
            assert!(rel(trigamma(x) - trigamma(x + 1.0), 1.0 / (x * x)) < 1e-12, "recurrence at {x}");
        }
        // Central differences of digamma agree.
        for x in [0.2f64, 1.3, 7.5, 25.0, -1.6] {
            let h = 1e-5 * (1.0f64).max(x.abs());
            let fd = (digamma(x + h) - digamma(x - h)) / (2.0 * h);
            assert!(rel(trigamma(x), fd) < 1e-7, "trigamma({x}) against digamma's differences");
        }
        assert!(trigamma(0.0).is_nan() && trigamma(-3.0).is_nan() && trigamma(f64::NAN).is_nan());
        assert_eq!(trigamma(f64::INFINITY), 0.0);
    }

    #[test]
    fn digamma_reference_table() {
        let cases = [
            (0.1, -10.423754940411076),
            (0.37, -2.795301410890564),
            (1.3, -0.16919088886679962),
            (1.7, 0.2085478748734939),
            (2.6, 0.7510474527734763),
            (4.5, 1.388870926359529),
            (5.99, 1.704302797413849),
            (6.01, 1.7079292604712082),
            (13.7, 2.5804557238996524),
            (99.9, 4.599156330708133),
            (-0.1, 9.245073050052948),
            (-1.3, 2.8825405488661673),
            (-3.7, -0.8450768588704194),
            (-10.25, 5.516858419886273),
        ];
        for &(x, want) in &cases {
            let got = digamma(x);
            assert!(rel(got, want) <= 1e-13, "digamma({x}) = {got}, want {want}");
        }
    }

    #[test]
    fn lgamma_matches_factorials() {
        // log((n-1)!) computed by summing logs.
        let mut lf = 0.0f64;
        for n in 1..=60u32 {
            if n > 1 {
                lf += ((n - 1) as f64).ln();
            }
            let got = lgamma(n as f64);
            let err = if lf == 0.0 { got.abs() } else { rel(got, lf) };
            assert!(err <= 1e-13, "lgamma({n}) = {got}, want {lf}");
        }
    }

    #[test]
    fn lgamma_near_the_zeros_is_relatively_accurate() {
        // log Γ(1 + z) ≈ -γ z + ζ(2)/2 z² for tiny z; log Γ(2 + z) ≈ (1 - γ) z.
        for &z0 in &[1e-6, -1e-6, 1e-9, -3e-10] {
            let z = (1.0 + z0) - 1.0; // the perturbation actually representable at 1
            let want1 = -EULER_GAMMA * z + 1.6449340668482264 / 2.0 * z * z;
            assert!(rel(lgamma(1.0 + z), want1) <= 1e-9, "z = {z}");
            let z = (2.0 + z0) - 2.0;
            let want2 = (1.0 - EULER_GAMMA) * z + (1.6449340668482264 - 1.0) / 2.0 * z * z;
            assert!(rel(lgamma(2.0 + z), want2) <= 1e-9, "z = {z}");
        }
    }

    #[test]
    fn lgamma_recurrence_holds() {
        // log Γ(x + 1) = log Γ(x) + log x, checked away from the zeros.
        let mut x: f64 = 0.13;
        while x < 90.0 {
            let lhs = lgamma(x + 1.0);
            let rhs = lgamma(x) + x.ln();
            let scale = lhs.abs().max(lgamma(x).abs()).max(x.ln().abs());
            assert!((lhs - rhs).abs() <= 4e-15 * scale.max(1.0), "x = {x}: {lhs} vs {rhs}");
            x += 0.377;
        }
    }

    #[test]
    fn lgamma_reflection_consistent() {
        // log|Γ(x)| + log|Γ(-x)| = log(π / (x |sin(π x)|)) for x > 0.
        for &x in &[0.3, 1.7, 2.25, 5.5, 12.1, 33.3] {
            let lhs = lgamma(x) + lgamma(-x);
            let rhs = (PI / (x * sin_pi(x).abs())).ln();
            assert!((lhs - rhs).abs() <= 1e-12 * rhs.abs().max(1.0), "x = {x}");
        }
    }

    #[test]
    fn lgamma_poles_and_specials() {
        for &x in &[0.0, -0.0, -1.0, -2.0, -7.0, -1e20, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(lgamma(x), f64::INFINITY, "x = {x}");
        }
        assert!(lgamma(f64::NAN).is_nan());
        // Tiny and subnormal arguments stay finite: -log(x).
        assert!(rel(lgamma(5e-324), 744.4400719213812) <= 1e-15);
        assert!(rel(lgamma(-1e-30), 69.07755278982137) <= 1e-15);
        // Huge argument: finite, then overflow.
        assert!(lgamma(1e300).is_finite());
        assert_eq!(lgamma(1e307), f64::INFINITY);
    }

    #[test]
    fn digamma_known_values() {
        let cases = [
            (1.0, -0.5772156649015329),
            (0.5, -1.9635100260214235),
            (10.0, 2.251752589066721),
            (-0.5, 0.03648997397857652),
            (2.0, 0.42278433509846713),
            (6.0, 1.7061176684318005),
            (100.0, 4.600161852738087),
            (-2.5, 1.103156640645243),
        ];
        for &(x, want) in &cases {
            let got = digamma(x);
            assert!(rel(got, want) <= 1e-14, "digamma({x}) = {got}, want {want}");
        }
    }

    #[test]
    fn digamma_poles_and_specials() {
        for &x in &[0.0, -0.0, -1.0, -3.0, -1e20, f64::NEG_INFINITY, f64::NAN] {
            assert!(digamma(x).is_nan(), "x = {x}");
        }
        assert_eq!(digamma(f64::INFINITY), f64::INFINITY);
        // Close to 0: ψ(x) ≈ -1/x - γ.
        assert!(rel(digamma(1e-10), -1e10 - EULER_GAMMA) <= 1e-15);
    }

    #[test]
    fn digamma_matches_finite_differences_of_lgamma() {
        let h = 1e-5;
        let mut x: f64 = -4.93;
        let mut count = 0;
        while x < 60.0 {
            // Skip points too close to a pole: there the central difference's own
            // truncation error, about h²/(3 d³) at distance d, exceeds the tolerance.
            let d = if x > 0.0 { x } else { (x - x.round()).abs() };
            if d > 0.15 {
                let fd = (lgamma(x + h) - lgamma(x - h)) / (2.0 * h);
                let d = digamma(x);
                let err = (fd - d).abs() / d.abs().max(1.0);
                assert!(err <= 1e-8, "x = {x}: digamma {d}, fd {fd}");
                count += 1;
            }
            x += 0.0731;
        }
        assert!(count > 700);
    }

    #[test]
    fn digamma_recurrence_and_reflection() {
        let mut x: f64 = 0.07;
        while x < 40.0 {
            let lhs = digamma(x + 1.0);
            let rhs = digamma(x) + 1.0 / x;
            assert!((lhs - rhs).abs() <= 1e-14 * lhs.abs().max(1.0 / x), "x = {x}");
            let refl = digamma(1.0 - x) - digamma(x) - PI / (PI * x).tan();
            if (x - x.round()).abs() > 1e-3 {
                assert!(refl.abs() <= 1e-11 * digamma(1.0 - x).abs().max(1.0), "x = {x}: {refl}");
            }
            x += 0.313;
        }
    }
}
