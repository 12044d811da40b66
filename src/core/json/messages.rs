//! The words of the reader's messages: text that is not JSON, as this
//! module has always worded it, and JSON values quoted in a message.

use super::super::error::{js_number, Error};
use serde_json::Value;
use std::fmt::Write as _;

/// serde_json's error for text that is not JSON, as this module has always
/// worded it: the byte where reading stopped, and what was wrong there. The
/// words are serde_json's, matched on its `Display` text (which its error
/// type exposes no other way); any this does not know pass through as they are.
pub fn invalid_json(text: &str, e: &serde_json::Error) -> Error {
    // serde_json counts lines from 1, and columns in bytes up to and
    // including the byte at fault; at the end of the text, that is the end.
    let at = if e.is_eof() {
        text.len()
    } else {
        let line_start: usize = text.split_inclusive('\n').take(e.line().saturating_sub(1)).map(str::len).sum();
        (line_start + e.column()).saturating_sub(1).min(text.len())
    };
    let full = e.to_string();
    let said = full.strip_suffix(&format!(" at line {} column {}", e.line(), e.column())).unwrap_or(&full);
    let what = match said {
        "EOF while parsing a value" | "EOF while parsing a list" | "EOF while parsing an object" => "unexpected end",
        "EOF while parsing a string" => "unterminated string",
        "expected value" | "expected ident" => "unexpected character",
        "trailing comma" if text.as_bytes().get(at) == Some(&b'}') => "expected a key",
        "trailing comma" => "unexpected character",
        "key must be a string" => "expected a key",
        "expected `:`" => "expected ':'",
        "expected `,` or `]`" => "expected ',' or ']'",
        "expected `,` or `}`" => "expected ',' or '}'",
        "trailing characters" => "unexpected text after the value",
        "control character (\\u0000-\\u001F) found while parsing a string" => "control character in string",
        "lone leading surrogate in hex escape" | "unexpected end of hex escape" => "lone surrogate in a \\u escape",
        "recursion limit exceeded" => "nested too deeply",
        other => other,
    };
    Error(format!("compileFromJSON: not a serialized plan (invalid JSON at byte {at}: {what})"))
}

// ---------------------------------------------------------------- describing values in messages

/// A short JSON-like rendering of a value for an error message, cut off
/// after about 60 characters (so a huge value costs nothing to describe).
pub fn show(v: Option<&Value>) -> String {
    const LIMIT: usize = 60;
    fn go(v: Option<&Value>, out: &mut String) {
        if out.len() > LIMIT {
            return;
        }
        match v {
            None => out.push_str("undefined"),
            Some(Value::Null) => out.push_str("null"),
            Some(Value::Bool(b)) => out.push_str(if *b { "true" } else { "false" }),
            Some(Value::Number(x)) => out.push_str(&js_number(x.as_f64().unwrap_or(f64::NAN))),
            Some(Value::String(s)) => {
                out.push('"');
                out.extend(s.chars().take(LIMIT));
                out.push('"');
            }
            Some(Value::Array(items)) => {
                out.push('[');
                for (k, item) in items.iter().enumerate() {
                    if out.len() > LIMIT {
                        break;
                    }
                    if k > 0 {
                        out.push_str(", ");
                    }
                    go(Some(item), out);
                }
                out.push(']');
            }
            Some(Value::Object(fields)) => {
                out.push('{');
                for (k, (key, val)) in fields.iter().enumerate() {
                    if out.len() > LIMIT {
                        break;
                    }
                    if k > 0 {
                        out.push_str(", ");
                    }
                    let _ = write!(out, "{}: ", key.chars().take(LIMIT).collect::<String>());
                    go(Some(val), out);
                }
                out.push('}');
            }
        }
    }
    let mut out = String::new();
    go(v, &mut out);
    if out.len() > LIMIT + 8 {
        let cut: String = out.chars().take(LIMIT).collect();
        return format!("{cut}…");
    }
    out
}

/// A value the way JavaScript's `${v}` prints it, for messages that quote the
/// JavaScript version (`pow: exponent must be a finite number; got NaN`).
pub fn js_string(v: Option<&Value>) -> String {
    match v {
        None => "undefined".into(),
        Some(Value::String(s)) => s.chars().take(60).collect(),
        Some(Value::Object(_)) => "[object Object]".into(),
        Some(Value::Array(items)) => {
            let parts: Vec<String> = items
                .iter()
                .take(8)
                .map(|x| match x {
                    Value::Null => String::new(),
                    x => js_string(Some(x)),
                })
                .collect();
            let mut s = parts.join(",");
            if items.len() > 8 {
                s.push_str(",…");
            }
            s
        }
        other => show(other),
    }
}

/// `Number.isInteger(x)`.
pub fn integer(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64).filter(|x| x.is_finite() && x.fract() == 0.0)
}
