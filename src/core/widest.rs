//! `widest!`: a function compiled once per x86-64 vector width and chosen
//! at run time, for the loops that gain from wide registers (the lane
//! replay's kernels, `tanh`'s slice), with the same bits at every width.

/// The widest variant of those `widest!` compiles that may run: 2 for
/// AVX-512, 1 for AVX2, 0 for the baseline (where the CPU has them). Tests
/// lower it, to check every variant on a machine that would only run the
/// widest.
#[doc(hidden)]
pub static WIDEST: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(2);

/// Which variant `widest!` runs on this CPU: 2 AVX-512, 1 AVX2, 0 the
/// baseline (at most `WIDEST`).
#[cfg(not(target_arch = "wasm32"))]
pub fn widest_here() -> u8 {
    #[cfg(target_arch = "x86_64")]
    {
        let cap = WIDEST.load(std::sync::atomic::Ordering::Relaxed);
        if cap >= 2 && std::arch::is_x86_feature_detected!("avx512f") {
            return 2;
        }
        if cap >= 1 && std::arch::is_x86_feature_detected!("avx2") {
            return 1;
        }
    }
    0
}

/// The function inside, compiled three times: for AVX-512 (a lane of
/// eight f64 is one register), for AVX2 (two) and for the baseline, the
/// one chosen at run time (`widest_here`). All three compute the same
/// bits: Rust never fuses a multiply and an add unless asked (`mul_add`).
macro_rules! widest {
    ($(#[$doc:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),*) $body:block) => {
        $(#[$doc])*
        $vis fn $name($($arg: $ty),*) {
            #[inline(always)]
            fn body($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                fn avx512($($arg: $ty),*) {
                    body($($arg),*)
                }
                #[target_feature(enable = "avx2")]
                fn avx2($($arg: $ty),*) {
                    body($($arg),*)
                }
                match $crate::core::widest::widest_here() {
                    // SAFETY (both): the CPU has the feature.
                    2 => return unsafe { avx512($($arg),*) },
                    1 => return unsafe { avx2($($arg),*) },
                    _ => {}
                }
            }
            body($($arg),*)
        }
    };
}
pub(crate) use widest;
