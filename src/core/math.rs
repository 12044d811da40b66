//! Elementary functions the kernels take from the platform: the system libm
//! natively, the JavaScript host's `Math` under WebAssembly. Rust's own
//! WebAssembly libm rounds differently (`exp(1)` is one ulp above
//! `Math.exp(1)`), and users compare results with `Math`, which the
//! JavaScript version used; calling out costs ~10 ns an element.
//!
//! `exp`, which a GP calls once per kernel entry, is `Math.exp`'s method
//! written here instead (`host_exp`), in both builds: its slice loop runs
//! in vector registers, 0.8 ns an element under AVX-512 and 1.3 under AVX2
//! against glibc's 3.0, and gives `Math.exp`'s bits where glibc differs
//! from them by an ulp in one result of ten.

mod host_exp;

#[cfg(not(target_arch = "wasm32"))]
mod platform {
    use crate::core::widest::widest;

    pub fn exp(x: f64) -> f64 {
        super::host_exp::exp(x)
    }
    widest! {
        pub fn exp_slice(a: &[f64], out: &mut [f64]) {
            super::host_exp::exp_slice(a, out)
        }
    }
    pub fn ln(x: f64) -> f64 {
        x.ln()
    }
    pub fn ln_1p(x: f64) -> f64 {
        x.ln_1p()
    }
    pub fn sin(x: f64) -> f64 {
        x.sin()
    }
    pub fn cos(x: f64) -> f64 {
        x.cos()
    }
    pub fn pow(x: f64, k: f64) -> f64 {
        x.powf(k)
    }
}

#[cfg(target_arch = "wasm32")]
mod platform {
    #[link(wasm_import_module = "math")]
    extern "C" {
        fn js_log(x: f64) -> f64;
        fn js_log1p(x: f64) -> f64;
        fn js_sin(x: f64) -> f64;
        fn js_cos(x: f64) -> f64;
        fn js_pow(x: f64, k: f64) -> f64;
    }
    pub fn exp(x: f64) -> f64 {
        super::host_exp::exp(x)
    }
    pub fn exp_slice(a: &[f64], out: &mut [f64]) {
        super::host_exp::exp_slice(a, out)
    }
    // SAFETY (all below): pure functions of their arguments, supplied by src/js/wasm.js.
    pub fn ln(x: f64) -> f64 {
        unsafe { js_log(x) }
    }
    pub fn ln_1p(x: f64) -> f64 {
        unsafe { js_log1p(x) }
    }
    pub fn sin(x: f64) -> f64 {
        unsafe { js_sin(x) }
    }
    pub fn cos(x: f64) -> f64 {
        unsafe { js_cos(x) }
    }
    /// `Math.pow` differs from C's `pow` only for a non-finite exponent,
    /// which `Exponent` never holds.
    pub fn pow(x: f64, k: f64) -> f64 {
        unsafe { js_pow(x, k) }
    }
}

pub use platform::*;
