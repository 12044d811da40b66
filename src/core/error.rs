//! One error type for the core. Its `Display` is exactly the message a user sees.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub struct Error(pub String);

pub type Result<T> = std::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// Build an `Err(Error)` from a format string.
#[macro_export]
macro_rules! fail {
    ($($arg:tt)*) => { Err($crate::core::error::Error(format!($($arg)*))) };
}

/// A number printed the way JavaScript's `String(x)` prints it, so messages
/// match the JavaScript version digit for digit.
pub fn js_number(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    if x == 0.0 {
        return "0".into();
    }
    let a = x.abs();
    if (1e-7..1e21).contains(&a) {
        return format!("{x}");
    }
    // Exponent form: Rust writes `1.5e-8` / `1e21`; JavaScript writes `1.5e-8` / `1e+21`.
    let s = format!("{x:e}");
    match s.split_once('e') {
        Some((m, e)) if !e.starts_with('-') => format!("{m}e+{e}"),
        _ => s,
    }
}

#[cfg(test)]
mod tests {
    use super::js_number;

    #[test]
    fn prints_like_javascript() {
        assert_eq!(js_number(0.5), "0.5");
        assert_eq!(js_number(-3.0), "-3");
        assert_eq!(js_number(-0.0), "0");
        assert_eq!(js_number(1e21), "1e+21");
        assert_eq!(js_number(1.5e-8), "1.5e-8");
        assert_eq!(js_number(-1.1102230246251565e-16), "-1.1102230246251565e-16");
        assert_eq!(js_number(123456.789), "123456.789");
        assert_eq!(js_number(f64::NEG_INFINITY), "-Infinity");
    }
}
