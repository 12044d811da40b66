//! `Math.exp` as V8 and SpiderMonkey compute it, the `exp` of both builds:
//! under WebAssembly, calling out to the host's `Math.exp` cost ~16 ns an
//! element, most of it the crossing (a GP's kernel matrix at n = 200 takes
//! 40 000); natively, glibc's `exp` rounds an ulp apart from it in one
//! result of ten, and its scalar calls took 3 ns an element.
//!
//! The method is fdlibm's (Sun's freely distributable libm, which both
//! engines port): reduce x = k·ln2 + r with |r| ≤ ln2/2, r carried as
//! hi − lo; approximate e^r through R(r) = r·(e^r + 1)/(e^r − 1), a
//! polynomial of degree 5 in r² (Remez coefficients P1..P5 below); scale by
//! 2^k in the exponent bits. V8 also returns Math.E for x = 1 exactly (the
//! method alone rounds that one up by an ulp). Every step is one IEEE
//! operation in the method's order, so the result is the engines' bit for
//! bit (__test__/wasm-simd.test.mjs compares the shipped module with
//! `Math.exp`, __test__/exp.test.mjs the addon).

// The method's constants, as bit patterns.
const HALF: [f64; 2] = [0.5, -0.5];
const HUGE: f64 = 1.0e300;
/// 2^-1000.
const TWO_M1000: f64 = f64::from_bits(0x0170_0000_0000_0000);
const O_THRESHOLD: f64 = f64::from_bits(0x4086_2e42_fefa_39ef);
const U_THRESHOLD: f64 = f64::from_bits(0xc087_4910_d52d_3051);
/// ln 2 split in two: the high part has trailing zero bits, so k·LN2_HI is exact.
const LN2_HI: [f64; 2] = [f64::from_bits(0x3fe6_2e42_fee0_0000), f64::from_bits(0xbfe6_2e42_fee0_0000)];
const LN2_LO: [f64; 2] = [f64::from_bits(0x3dea_39ef_3579_3c76), f64::from_bits(0xbdea_39ef_3579_3c76)];
const INV_LN2: f64 = std::f64::consts::LOG2_E;
const P1: f64 = f64::from_bits(0x3fc5_5555_5555_553e);
const P2: f64 = f64::from_bits(0xbf66_c16c_16be_bd93);
const P3: f64 = f64::from_bits(0x3f11_566a_af25_de2c);
const P4: f64 = f64::from_bits(0xbebb_bd41_c5d2_6bf1);
const P5: f64 = f64::from_bits(0x3e66_3769_72be_a4d0);

/// e^x, bit for bit as `Math.exp(x)` in V8.
pub fn exp(x: f64) -> f64 {
    let high = (x.to_bits() >> 32) as u32;
    let negative = (high >> 31) as usize;
    let hx = high & 0x7fff_ffff;
    // |x| ≥ 709.78: not finite, or past overflow or underflow.
    if hx >= 0x4086_2e42 {
        if hx >= 0x7ff0_0000 {
            if x.is_nan() {
                return x + x;
            }
            return if negative == 0 { x } else { 0.0 };
        }
        if x > O_THRESHOLD {
            return HUGE * HUGE;
        }
        if x < U_THRESHOLD {
            return TWO_M1000 * TWO_M1000;
        }
    }
    // Reduce: x = k·ln2 + (hi − lo).
    let (r, hi, lo, k) = if hx > 0x3fd6_2e42 {
        // |x| > ln2/2.
        let (hi, lo, k) = if hx < 0x3ff0_a2b2 {
            // |x| < 1.5·ln2: k is ±1.
            if x == 1.0 {
                return std::f64::consts::E;
            }
            (x - LN2_HI[negative], LN2_LO[negative], 1 - 2 * negative as i32)
        } else {
            let k = (INV_LN2 * x + HALF[negative]) as i32;
            let t = k as f64;
            (x - t * LN2_HI[0], t * LN2_LO[0], k)
        };
        (hi - lo, hi, lo, k)
    } else if hx < 0x3e30_0000 {
        // |x| < 2^-28: e^x rounds to 1 + x.
        return 1.0 + x;
    } else {
        (x, 0.0, 0.0, 0)
    };
    let t = r * r;
    let c = r - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))));
    if k == 0 {
        return 1.0 - ((r * c) / (c - 2.0) - r);
    }
    let y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi);
    // Times 2^k, added to the exponent (below 2^-1021 in two steps, the
    // last a multiplication that rounds a subnormal result).
    let scaled = |y: f64, k: i32| f64::from_bits(y.to_bits().wrapping_add((k as i64 as u64) << 52));
    if k >= -1021 {
        scaled(y, k)
    } else {
        scaled(y, k + 1000) * TWO_M1000
    }
}

/// How many elements `exp_slice` takes at a time before it looks back for
/// those its loop left to `exp`.
const BLOCK: usize = 256;
/// 2^-28, the least |x| whose high word is 0x3e30_0000 or more.
const TWO_M28: f64 = f64::from_bits(0x3e30_0000_0000_0000);
/// The least |x| whose high word passes 0x3fd6_2e42 (|x| > ln2/2 in `exp`).
const SMALLEST_PAST_HALF_LN2: f64 = f64::from_bits(0x3fd6_2e43_0000_0000);
/// The least |x| whose high word is 0x4086_2e42 or more (|x| ≥ 709.78).
const SMALLEST_PAST_709: f64 = f64::from_bits(0x4086_2e42_0000_0000);
/// 1.5·2^52: added to an integral |t| < 2^51, the sum's low bits hold t.
const ROUND: f64 = 6_755_399_441_055_744.0;

/// `exp` of each element, bit for bit, in one loop free of branches and
/// of calls, which vector code runs several elements an instruction (eight
/// with AVX-512, two under WebAssembly's `simd128`): the steps `exp` takes
/// in its common range, with the reduction's k chosen by a select (t = 0
/// where |x| ≤ ln2/2, which makes hi = x and lo = +0, as `exp` has them
/// there; then 1 − ((lo − q) − hi) is `exp`'s 1 − ((r·c)/(c − 2) − r),
/// 0 − q and (r·c)/(c − 2) both being exactly −q). An element outside that
/// range (0 < |x| < 2^-28, |x| ≥ 709.78, not finite, x = 1, or a result below
/// 2^-1021) is computed again by `exp`, in a second pass over the blocks
/// that hold one. (Split into phases with the intermediates in buffers, as
/// `fastmath` does for `tanh`, this loop stayed scalar: 2.7 ns an element
/// under AVX-512 against 0.8 fused.) Inlined into each vector width's
/// copy (`widest!`).
#[inline(always)]
pub fn exp_slice(a: &[f64], out: &mut [f64]) {
    // `exp`'s tests of the high word of |x|, as comparisons of |x| (false
    // for NaN). ±0 (a kernel matrix's diagonal) comes out of the loop as 1,
    // exactly as `exp` gives it.
    let common = |x: f64, t: f64| ((TWO_M28..SMALLEST_PAST_709).contains(&x.abs()) | (x == 0.0)) & (x != 1.0) & (t >= -1021.0);
    let reduced = |x: f64| {
        let k = (INV_LN2 * x + 0.5f64.copysign(x)).trunc();
        if x.abs() >= SMALLEST_PAST_HALF_LN2 {
            k
        } else {
            0.0
        }
    };
    for (a, out) in a.chunks(BLOCK).zip(out.chunks_mut(BLOCK)) {
        let mut all_common = true;
        for (o, &x) in out.iter_mut().zip(a) {
            let t = reduced(x);
            let hi = x - t * LN2_HI[0];
            let lo = t * LN2_LO[0];
            let r = hi - lo;
            let u = r * r;
            let c = r - u * (P1 + u * (P2 + u * (P3 + u * (P4 + u * P5))));
            let y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi);
            let k = (t + ROUND).to_bits().wrapping_sub(ROUND.to_bits());
            *o = f64::from_bits(y.to_bits().wrapping_add(k << 52));
            all_common &= common(x, t);
        }
        if !all_common {
            for (o, &x) in out.iter_mut().zip(a) {
                if !common(x, reduced(x)) {
                    *o = exp(x);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{exp, exp_slice};

    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    /// The next of a xorshift sequence, as a number in [0, 1).
    fn unit(s: &mut u64) -> f64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        (*s >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Within an ulp of the system's exp across the range (both are
    /// faithful; they may round differently), and the edges as `Math.exp`
    /// has them. Bit-for-bit agreement with `Math.exp` is checked in
    /// JavaScript, in both builds (__test__/exp.test.mjs, wasm-simd.test.mjs).
    #[test]
    fn within_an_ulp_of_libm_and_the_edges_right() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..200_000 {
            let u = unit(&mut s);
            let x = match i % 3 {
                0 => -745.0 + 1455.0 * u,
                1 => -2.0 + 4.0 * u,
                _ => (u - 0.5) * 1e-6,
            };
            let (got, want) = (exp(x), x.exp());
            assert!(ulps(got, want) <= 1, "exp({x:e}): {got:e} against {want:e}");
        }
        assert_eq!(exp(1.0), std::f64::consts::E);
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
        assert_eq!(exp(f64::INFINITY), f64::INFINITY);
        assert_eq!(exp(f64::NEG_INFINITY).to_bits(), 0);
        assert!(exp(f64::NAN).is_nan());
        assert_eq!(exp(709.8), f64::INFINITY);
        assert_eq!(exp(-746.0).to_bits(), 0);
        assert_eq!(exp(-745.0), 5e-324);
        assert_eq!(exp(709.0), 8.218407461554972e307);
    }

    /// The block loops give `exp`'s bits at every element, in every range
    /// and at every slice length and offset.
    #[test]
    fn the_slice_is_exp_bit_for_bit() {
        let mut xs = vec![1.0, -1.0, 0.0, -0.0, 2f64.powi(-28), -(2f64.powi(-28)), 2f64.powi(-29), 5e-324, 0.34657359027997264];
        xs.extend([-0.34657359027997264, 1.0397207708399179, -1.0397207708399179, 709.78, 709.8, -707.0, -708.3, -708.4, -720.0]);
        xs.extend([-745.2, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1.0 + f64::EPSILON, 1.0 - f64::EPSILON / 2.0]);
        let mut s = 0x2545_f491_4f6c_dd1du64;
        for i in 0..100_000 {
            let u = unit(&mut s);
            xs.push([-750.0 + 1460.0 * u, -3.0 + 6.0 * u, (u - 0.5) * 1e-7, (u - 0.5) * 60.0][i % 4]);
        }
        for from in [0, 1, 5] {
            for len in [0, 1, 31, 32, 33, xs.len() - from] {
                let a = &xs[from..from + len];
                let mut out = vec![0.0; len];
                exp_slice(a, &mut out);
                for (x, y) in a.iter().zip(&out) {
                    assert_eq!(y.to_bits(), exp(*x).to_bits(), "exp({x:e}): {y:e}");
                }
            }
        }
    }
}
