//! Plans as data (SPEC §8): reading a serialized plan back into a [`Plan`].
//!
//! A plan is untrusted input. Every malformed or hostile plan gets an
//! [`Error`] naming the node at fault, never a panic, and the work done is
//! bounded by the size of the text plus the values the plan declares:
//!
//! - the text is read by a small JSON reader of our own that parses every
//!   number with Rust's correctly rounded `f64` parser (serde_json's default
//!   float parsing is off by an ulp for about one number in five, which
//!   would break bit-identical round trips), and that recurses at most
//!   `MAX_DEPTH` (128) levels: anything nested deeper is skipped iteratively and
//!   refused by whichever node holds it;
//! - a first pass checks every node in order and infers every shape
//!   statically, allocating none of the plan's values: a parent must be an
//!   earlier node (which rules out cycles), shapes are checked for rank,
//!   integrality and size, static arguments for type and range, and the
//!   whole plan may hold at most [`MAX_PLAN_VALUES`] values; only then does
//!   a second pass build the graph, so a refused plan costs O(text);
//! - subgraphs of constants only are evaluated as they are read, so an
//!   error there (the Cholesky factor of a constant matrix that is not
//!   positive definite) names its node too.
//!
//! Unlike the JavaScript version, which rebuilt a plan by evaluating it at
//! zeros, nothing here depends on parameter values: every valid plan is
//! rebuilt, including one whose raw parameter feeds `cholesky`.

use super::error::{js_number, Error, Result};
use super::graph::Graph;
use super::op::{Exponent, Op, Parents};
use super::plan::Plan;
use super::shape::{Shape, MAX_ELEMENTS};
use crate::fail;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

/// At most this many values (every node's value plus kernel scratch) in a
/// plan read from JSON: 2 GiB of f64. A few bytes of JSON can describe many
/// nodes each at the core's per-value cap, or the outer product of two long
/// vectors, so that cap alone does not bound memory; this does, and it is
/// checked for the whole plan before any value is allocated.
pub const MAX_PLAN_VALUES: usize = 1 << 28;

/// Arrays and objects nested deeper than this are refused (a plan needs 5).
const MAX_DEPTH: usize = 128;

// ---------------------------------------------------------------- a JSON reader

/// A parsed JSON value. Arrays holding only numbers, the bulk of any plan
/// (constant data), are kept flat.
#[derive(Debug)]
enum J {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Nums(Vec<f64>),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
    /// An array or object nested beyond [`MAX_DEPTH`], skipped unread: no
    /// plan field may hold one, so whichever node holds it is refused.
    Deep,
}

/// A borrowed view of a value, with `Missing` for an absent key.
#[derive(Debug, Clone, Copy)]
enum V<'a> {
    Missing,
    Null,
    Bool(bool),
    Num(f64),
    Str(&'a str),
    Arr(Items<'a>),
    Obj(&'a [(String, J)]),
    Deep,
}

#[derive(Debug, Clone, Copy)]
enum Items<'a> {
    Nums(&'a [f64]),
    Vals(&'a [J]),
}

impl<'a> Items<'a> {
    fn len(self) -> usize {
        match self {
            Items::Nums(x) => x.len(),
            Items::Vals(x) => x.len(),
        }
    }

    fn get(self, i: usize) -> V<'a> {
        match self {
            Items::Nums(x) => x.get(i).map_or(V::Missing, |&n| V::Num(n)),
            Items::Vals(x) => x.get(i).map_or(V::Missing, J::view),
        }
    }
}

impl J {
    fn view(&self) -> V<'_> {
        match self {
            J::Null => V::Null,
            J::Bool(b) => V::Bool(*b),
            J::Num(n) => V::Num(*n),
            J::Str(s) => V::Str(s),
            J::Nums(x) => V::Arr(Items::Nums(x)),
            J::Arr(x) => V::Arr(Items::Vals(x)),
            J::Obj(x) => V::Obj(x),
            J::Deep => V::Deep,
        }
    }
}

/// The value under `key`; with duplicate keys the last wins, as in `JSON.parse`.
fn get<'a>(obj: &'a [(String, J)], key: &str) -> V<'a> {
    obj.iter().rev().find(|(k, _)| k == key).map_or(V::Missing, |(_, v)| v.view())
}

struct Reader<'a> {
    text: &'a str,
    s: &'a [u8],
    i: usize,
}

impl<'a> Reader<'a> {
    fn new(text: &'a str) -> Self {
        Reader { text, s: text.as_bytes(), i: 0 }
    }

    fn err<T>(&self, what: &str) -> Result<T> {
        fail!("compileFromJSON: not a serialized plan (invalid JSON at byte {}: {})", self.i, what)
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn document(&mut self) -> Result<J> {
        let v = self.value(0)?;
        self.ws();
        if self.i != self.s.len() {
            return self.err("unexpected text after the value");
        }
        Ok(v)
    }

    fn value(&mut self, depth: usize) -> Result<J> {
        self.ws();
        match self.peek() {
            None => self.err("unexpected end"),
            Some(b'{') | Some(b'[') if depth >= MAX_DEPTH => self.skip_deep(),
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => Ok(J::Str(self.string()?)),
            Some(b't') => self.literal("true", J::Bool(true)),
            Some(b'f') => self.literal("false", J::Bool(false)),
            Some(b'n') => self.literal("null", J::Null),
            Some(b'-' | b'0'..=b'9') => Ok(J::Num(self.number()?)),
            Some(_) => self.err("unexpected character"),
        }
    }

    /// Skip a balanced array or object without recursing, however deep.
    fn skip_deep(&mut self) -> Result<J> {
        // Open brackets, true for an array.
        let mut open: Vec<bool> = Vec::new();
        loop {
            match self.peek() {
                None => return self.err("unexpected end"),
                Some(c @ (b'[' | b'{')) => {
                    open.push(c == b'[');
                    self.i += 1;
                }
                Some(c @ (b']' | b'}')) => {
                    if open.pop() != Some(c == b']') {
                        return self.err("mismatched bracket");
                    }
                    self.i += 1;
                    if open.is_empty() {
                        return Ok(J::Deep);
                    }
                }
                Some(b'"') => {
                    self.string()?;
                }
                Some(_) => self.i += 1,
            }
        }
    }

    fn literal(&mut self, word: &str, v: J) -> Result<J> {
        if self.s[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(v)
        } else {
            self.err("unexpected character")
        }
    }

    fn digits(&mut self) -> Result<()> {
        if !matches!(self.peek(), Some(b'0'..=b'9')) {
            return self.err("invalid number");
        }
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
        Ok(())
    }

    fn number(&mut self) -> Result<f64> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            _ => self.digits()?,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            self.digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            self.digits()?;
        }
        // The grammar above is a subset of what `f64::from_str` accepts, and
        // its parse is correctly rounded (overflow gives ±Infinity, as in JS).
        match self.text.get(start..self.i).map(str::parse::<f64>) {
            Some(Ok(x)) => Ok(x),
            _ => self.err("invalid number"),
        }
    }

    fn hex4(&mut self) -> Result<u32> {
        let mut v = 0u32;
        for _ in 0..4 {
            let d = match self.peek() {
                Some(c @ b'0'..=b'9') => c - b'0',
                Some(c @ b'a'..=b'f') => c - b'a' + 10,
                Some(c @ b'A'..=b'F') => c - b'A' + 10,
                _ => return self.err("invalid \\u escape"),
            };
            v = v * 16 + d as u32;
            self.i += 1;
        }
        Ok(v)
    }

    fn string(&mut self) -> Result<String> {
        self.i += 1;
        let mut out = String::new();
        let mut start = self.i;
        loop {
            match self.peek() {
                None => return self.err("unterminated string"),
                Some(b'"') => {
                    // `start` and `i` sit next to ASCII bytes, so on char boundaries.
                    out.push_str(self.text.get(start..self.i).unwrap_or(""));
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    out.push_str(self.text.get(start..self.i).unwrap_or(""));
                    self.i += 1;
                    let c = match self.peek() {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            self.i += 1;
                            let hi = self.hex4()?;
                            let mut code = hi;
                            if (0xD800..0xDC00).contains(&hi) && self.s[self.i..].starts_with(b"\\u") {
                                let save = self.i;
                                self.i += 2;
                                let lo = self.hex4()?;
                                if (0xDC00..0xE000).contains(&lo) {
                                    code = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                                } else {
                                    self.i = save;
                                }
                            }
                            // A lone surrogate, which JavaScript strings may hold, reads as U+FFFD.
                            out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                            start = self.i;
                            continue;
                        }
                        _ => return self.err("invalid escape"),
                    };
                    out.push(c);
                    self.i += 1;
                    start = self.i;
                }
                Some(c) if c < 0x20 => return self.err("control character in string"),
                Some(_) => self.i += 1,
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<J> {
        self.i += 1;
        self.ws();
        let mut nums = Vec::new();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(J::Nums(nums));
        }
        // Numbers only, kept flat, until something else turns up.
        loop {
            self.ws();
            if !matches!(self.peek(), Some(b'-' | b'0'..=b'9')) {
                break;
            }
            nums.push(self.number()?);
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(J::Nums(nums));
                }
                _ => return self.err("expected ',' or ']'"),
            }
        }
        let mut vals: Vec<J> = nums.into_iter().map(J::Num).collect();
        loop {
            vals.push(self.value(depth)?);
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(J::Arr(vals));
                }
                _ => return self.err("expected ',' or ']'"),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<J> {
        self.i += 1;
        self.ws();
        let mut fields = Vec::new();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(J::Obj(fields));
        }
        loop {
            self.ws();
            if self.peek() != Some(b'"') {
                return self.err("expected a key");
            }
            let key = self.string()?;
            self.ws();
            if self.peek() != Some(b':') {
                return self.err("expected ':'");
            }
            self.i += 1;
            let v = self.value(depth)?;
            fields.push((key, v));
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(J::Obj(fields));
                }
                _ => return self.err("expected ',' or '}'"),
            }
        }
    }
}

// ---------------------------------------------------------------- describing values in messages

/// A short JSON-like rendering of a value for an error message, cut off
/// after about 60 characters (so a huge value costs nothing to describe).
fn show(v: V) -> String {
    const LIMIT: usize = 60;
    fn go(v: V, out: &mut String) {
        if out.len() > LIMIT {
            return;
        }
        match v {
            V::Missing => out.push_str("undefined"),
            V::Deep => out.push_str("[… nested too deeply …]"),
            V::Null => out.push_str("null"),
            V::Bool(b) => out.push_str(if b { "true" } else { "false" }),
            V::Num(x) => out.push_str(&js_number(x)),
            V::Str(s) => {
                out.push('"');
                out.extend(s.chars().take(LIMIT));
                out.push('"');
            }
            V::Arr(items) => {
                out.push('[');
                for k in 0..items.len() {
                    if out.len() > LIMIT {
                        break;
                    }
                    if k > 0 {
                        out.push_str(", ");
                    }
                    go(items.get(k), out);
                }
                out.push(']');
            }
            V::Obj(fields) => {
                out.push('{');
                for (k, (key, val)) in fields.iter().enumerate() {
                    if out.len() > LIMIT {
                        break;
                    }
                    if k > 0 {
                        out.push_str(", ");
                    }
                    let _ = write!(out, "{}: ", key.chars().take(LIMIT).collect::<String>());
                    go(val.view(), out);
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
fn js_string(v: V) -> String {
    match v {
        V::Missing => "undefined".into(),
        V::Str(s) => s.chars().take(60).collect(),
        V::Obj(_) => "[object Object]".into(),
        V::Arr(items) => {
            let parts: Vec<String> = (0..items.len().min(8))
                .map(|k| match items.get(k) {
                    V::Null | V::Missing => String::new(),
                    x => js_string(x),
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
fn integer(v: V) -> Option<f64> {
    match v {
        V::Num(x) if x.is_finite() && x.fract() == 0.0 => Some(x),
        _ => None,
    }
}

// ---------------------------------------------------------------- reading a plan

fn not_a_plan<T>() -> Result<T> {
    fail!("compileFromJSON: not a serialized plan")
}

/// The name a node goes by in messages: its op for an op node, else its kind.
struct Ctx<'a> {
    index: usize,
    label: &'a str,
}

impl Ctx<'_> {
    fn err<T>(&self, msg: impl std::fmt::Display) -> Result<T> {
        fail!("compileFromJSON: node {} ({}): {}", self.index, self.label, msg)
    }
}

fn read_shape(cx: &Ctx, v: V) -> Result<Shape> {
    let bad = || cx.err(format_args!("shape must be up to two non-negative integers, got {}", show(v)));
    let V::Arr(items) = v else { return bad() };
    if items.len() > 2 {
        return bad();
    }
    let mut dims = [0usize; 2];
    for (k, d) in dims.iter_mut().enumerate().take(items.len()) {
        match integer(items.get(k)) {
            Some(x) if x >= 0.0 => {
                if x > MAX_ELEMENTS as f64 {
                    return cx.err(format_args!("shape {} holds more than {} values", show(v), MAX_ELEMENTS));
                }
                *d = x as usize;
            }
            _ => return bad(),
        }
    }
    match Shape::from_dims(&dims[..items.len()]) {
        Some(s) => Ok(s),
        None => cx.err(format_args!("shape {} holds more than {} values", show(v), MAX_ELEMENTS)),
    }
}

fn read_data(cx: &Ctx, v: V, shape: Shape) -> Result<Vec<f64>> {
    let V::Arr(items) = v else {
        return cx.err(format_args!("data must be an array of numbers, got {}", show(v)));
    };
    if items.len() != shape.size() {
        return cx.err(format_args!("data length {} does not match shape {}", items.len(), shape));
    }
    match items {
        Items::Nums(x) => Ok(x.to_vec()),
        Items::Vals(vals) => {
            let mut out = Vec::with_capacity(vals.len());
            for (k, j) in vals.iter().enumerate() {
                out.push(match j.view() {
                    V::Num(x) => x,
                    // JSON.stringify writes NaN and ±Infinity as null; our
                    // compileFromJSON writes them as strings.
                    V::Null | V::Str("NaN") => f64::NAN,
                    V::Str("Infinity") => f64::INFINITY,
                    V::Str("-Infinity") => f64::NEG_INFINITY,
                    V::Str("-0") => -0.0,
                    other => return cx.err(format_args!("data[{k}] must be a number, got {}", show(other))),
                });
            }
            Ok(out)
        }
    }
}

/// The static arguments of `args`, empty when absent.
fn read_args<'a>(cx: &Ctx, v: V<'a>) -> Result<Option<Items<'a>>> {
    match v {
        V::Missing => Ok(None),
        V::Arr(items) if items.len() == 0 => Ok(None),
        V::Arr(items) => Ok(Some(items)),
        other => cx.err(format_args!("args must be an array, got {}", show(other))),
    }
}

/// `[[start], [size]]` of a slice of an operand shaped `shape`, checked as the
/// JavaScript `slice` checks them, in the same order.
fn read_slice(cx: &Ctx, args: Option<Items>, shape: Shape) -> Result<Op> {
    let dims = shape.dims();
    let r = dims.len();
    if r == 0 {
        return cx.err("slice: cannot slice a scalar");
    }
    let (start, size) = match args {
        Some(a) if a.len() == 2 => (a.get(0), a.get(1)),
        _ => (V::Missing, V::Missing),
    };
    let (V::Arr(start), V::Arr(size)) = (start, size) else {
        return cx.err(format_args!("slice: start and size need {r} {} for a {shape} operand", if r == 1 { "entry" } else { "entries" }));
    };
    if start.len() != r || size.len() != r {
        return cx.err(format_args!("slice: start and size need {r} {} for a {shape} operand", if r == 1 { "entry" } else { "entries" }));
    }
    let mut s = [0f64; 2];
    let mut z = [0f64; 2];
    for axis in 0..r {
        match (integer(start.get(axis)), integer(size.get(axis))) {
            (Some(a), Some(b)) if a >= 0.0 && b > 0.0 => {
                s[axis] = a;
                z[axis] = b;
            }
            _ => return cx.err("slice: start must be a non-negative integer and size a positive integer"),
        }
    }
    for axis in 0..r {
        let end = s[axis] + z[axis];
        if end > dims[axis] as f64 {
            return cx.err(format_args!(
                "slice: [{}, {}) exceeds axis {} of {}",
                js_number(s[axis]),
                js_number(end),
                axis,
                shape
            ));
        }
    }
    // Now every bound is at most the axis length, itself at most MAX_ELEMENTS.
    Ok(Op::Slice { start: [s[0] as usize, s[1] as usize], size: [z[0] as usize, z[1] as usize] })
}

/// The op of an op node, with its static arguments, given its parents' shapes.
fn read_op(cx: &Ctx, name: &str, args: Option<Items>, list: bool, shapes: &[Shape]) -> Result<Op> {
    if list && name != "concat" {
        return cx.err("list: true is for concat only");
    }
    let no_args = |op: Op| match args {
        None => Ok(op),
        Some(_) => cx.err(format_args!("{name} takes no static arguments")),
    };
    fn one_arg<'a>(cx: &Ctx, name: &str, a: Option<Items<'a>>) -> Result<V<'a>> {
        match a {
            None => Ok(V::Missing),
            Some(a) if a.len() == 1 => Ok(a.get(0)),
            Some(_) => cx.err(format_args!("{name} takes one static argument")),
        }
    }
    match name {
        "pow" => match one_arg(cx, name, args)? {
            V::Num(k) if k.is_finite() => Ok(Op::Pow(Exponent::new(k))),
            other => cx.err(format_args!("pow: exponent must be a finite number; got {}", js_string(other))),
        },
        "reshape" => {
            let bad = || cx.err("reshape: shape must be up to two positive integers");
            let V::Arr(dims) = one_arg(cx, name, args)? else { return bad() };
            if dims.len() > 2 {
                return bad();
            }
            let mut d = [0usize; 2];
            let mut f = [0f64; 2];
            for (k, slot) in f.iter_mut().enumerate().take(dims.len()) {
                match integer(dims.get(k)) {
                    Some(x) if x > 0.0 => *slot = x,
                    _ => return bad(),
                }
            }
            if f.iter().any(|&x| x > MAX_ELEMENTS as f64) {
                // No operand holds that many: the count cannot match. Printed
                // as JavaScript prints the dimensions.
                let to = match dims.len() {
                    1 => format!("[{}]", js_number(f[0])),
                    _ => format!("[{}×{}]", js_number(f[0]), js_number(f[1])),
                };
                return match shapes {
                    [s] => cx.err(format_args!("reshape: cannot view {} elements as {to}", s.size())),
                    // The arity error comes from the shape rule.
                    _ => Ok(Op::Reshape(Shape::Scalar)),
                };
            }
            for (slot, &x) in d.iter_mut().zip(&f) {
                *slot = x as usize;
            }
            let to = match dims.len() {
                0 => Shape::Scalar,
                1 => Shape::Vector(d[0]),
                _ => Shape::Matrix(d[0], d[1]),
            };
            Ok(Op::Reshape(to))
        }
        "slice" => match shapes {
            [s] => read_slice(cx, args, *s),
            // The arity error comes from the shape rule.
            _ => Ok(Op::Slice { start: [0, 0], size: [0, 0] }),
        },
        "triangularSolve" => match one_arg(cx, name, args)? {
            V::Missing => Ok(Op::TriangularSolve { lower: true }),
            V::Obj(fields) => match get(fields, "lower") {
                V::Missing => Ok(Op::TriangularSolve { lower: true }),
                V::Bool(lower) => Ok(Op::TriangularSolve { lower }),
                other => cx.err(format_args!("triangularSolve: lower must be true or false, got {}", show(other))),
            },
            other => cx.err(format_args!("triangularSolve: options must be an object like {{lower: true}}, got {}", show(other))),
        },
        "concat" => {
            let matrices = shapes.first().is_some_and(|s| s.rank() == 2);
            let axis = match one_arg(cx, name, args)? {
                V::Missing => V::Missing,
                V::Obj(fields) => get(fields, "axis"),
                other => return cx.err(format_args!("concat: options must be an object like {{axis: 0}}, got {}", show(other))),
            };
            match axis {
                // Scalars and vectors flatten; the axis is not read.
                _ if !matrices => Ok(Op::Concat { axis: 0 }),
                V::Missing | V::Null => Ok(Op::Concat { axis: 0 }),
                V::Num(a) if a == 0.0 || a == 1.0 => Ok(Op::Concat { axis: a as u8 }),
                _ => cx.err("concat: axis must be 0 or 1"),
            }
        }
        _ => match Op::simple(name) {
            Some(op) => no_args(op),
            None => unknown_op(name),
        },
    }
}

fn unknown_op<T>(name: &str) -> Result<T> {
    if name.chars().count() > 80 {
        let cut: String = name.chars().take(80).collect();
        return fail!("compileFromJSON: unknown op \"{cut}…\"");
    }
    fail!("compileFromJSON: unknown op \"{name}\"")
}

/// Names of every op that may appear in a plan.
const OPS: [&str; 29] = [
    "add", "sub", "mul", "div", "maximum", "minimum", "neg", "exp", "log", "sqrt", "square", "tanh", "sigmoid", "relu",
    "lgamma", "pow", "sum", "mean", "matmul", "dot", "transpose", "diagPart", "addDiag", "reshape", "slice", "concat",
    "cholesky", "triangularSolve", "solveGeneral",
];

/// A node once checked: what the second pass builds. Parents are JSON indices.
enum Checked {
    Param(Shape),
    Input(Shape),
    Const(Shape, Vec<f64>),
    Op(Op, Parents),
}

/// Rebuild a plan from its JSON text (SPEC §8), optimized as `compile` would.
/// Parameters come in the order their nodes appear, then inputs likewise.
///
/// Two passes: the first checks every node and infers every shape, counting
/// the values the plan will hold, without allocating any of them; only a
/// plan that passes is built, by the second.
pub fn plan_from_json(text: &str) -> Result<Plan> {
    let doc = Reader::new(text).document()?;
    let J::Obj(top) = &doc else { return not_a_plan() };
    let V::Arr(nodes) = get(top, "nodes") else { return not_a_plan() };
    let version = match get(top, "version") {
        V::Num(1.0) => 1,
        V::Num(2.0) => 2,
        _ => return not_a_plan(),
    };
    let n = nodes.len();
    let root = match integer(get(top, "root")) {
        Some(r) if r >= 0.0 && r < n as f64 => r as usize,
        _ => {
            return fail!(
                "compileFromJSON: root must be the index of one of the plan's {} nodes, got {}",
                n,
                show(get(top, "root"))
            )
        }
    };
    // Parameters are read from a {name: value} map when the plan says so, or,
    // lacking an `input` field (version 1), when they have names.
    let map = match get(top, "input") {
        V::Str("map") => true,
        V::Str("single") => false,
        V::Missing => (0..n).any(|i| match nodes.get(i) {
            V::Obj(node) => matches!(get(node, "kind"), V::Str("param")) && matches!(get(node, "name"), V::Str(_)),
            _ => false,
        }),
        other => return fail!("compileFromJSON: input must be \"map\" or \"single\", got {}", show(other)),
    };

    // ---- pass 1: check, infer shapes, count values.
    let mut checked: Vec<Checked> = Vec::with_capacity(n);
    let mut shape_of: Vec<Shape> = Vec::with_capacity(n);
    // The earlier node an op node is identical to (same op, same parents),
    // as the graph will merge it; itself otherwise.
    let mut canon: Vec<u32> = Vec::with_capacity(n);
    let mut seen: HashMap<(Op, Parents), u32> = HashMap::new();
    let mut param_names: HashSet<&str> = HashSet::new();
    let mut input_names: HashSet<&str> = HashSet::new();
    let mut n_params = 0usize;
    let mut total = 0usize;
    let mut shapes: Vec<Shape> = Vec::new();

    for i in 0..n {
        let V::Obj(node) = nodes.get(i) else {
            return fail!("compileFromJSON: node {i}: expected an object, got {}", show(nodes.get(i)));
        };
        let label = match get(node, "kind") {
            V::Str("op") => match get(node, "op") {
                V::Str(name) if OPS.contains(&name) => name,
                V::Str(name) => return unknown_op(name),
                other => {
                    let cx = Ctx { index: i, label: "op" };
                    return cx.err(format_args!("op must be the name of an op, got {}", show(other)));
                }
            },
            V::Str(k @ ("param" | "input" | "const")) => k,
            other => {
                return fail!(
                    "compileFromJSON: node {i}: kind must be \"param\", \"input\", \"const\" or \"op\", got {}",
                    show(other)
                )
            }
        };
        let cx = Ctx { index: i, label };
        let (node_checked, shape, size) = match label {
            "param" | "input" | "const" => {
                let shape = read_shape(&cx, get(node, "shape"))?;
                if label == "input" && version == 1 {
                    return cx.err("a version 1 plan has no inputs");
                }
                let names = match label {
                    "param" => Some(&mut param_names),
                    "input" => Some(&mut input_names),
                    _ => None,
                };
                if let Some(names) = names {
                    match get(node, "name") {
                        V::Str(name) => {
                            if !names.insert(name) && (label == "input" || map) {
                                return cx.err(format_args!("name {} is used twice", show(V::Str(name))));
                            }
                        }
                        V::Missing if label == "param" && !map => {}
                        other if label == "param" && !map => {
                            return cx.err(format_args!("name must be a string, got {}", show(other)))
                        }
                        other => {
                            let whose = if label == "param" { "a parameter of a map plan" } else { "an input" };
                            return cx.err(format_args!("{whose} needs a string name, got {}", show(other)));
                        }
                    }
                }
                if label == "param" {
                    if !map && n_params > 0 {
                        return cx.err("a plan with input \"single\" has exactly one param node");
                    }
                    n_params += 1;
                }
                let c = match label {
                    "param" => Checked::Param(shape),
                    "input" => Checked::Input(shape),
                    // Data as long as the shape says is already in the text.
                    _ => Checked::Const(shape, read_data(&cx, get(node, "data"), shape)?),
                };
                if total.saturating_add(shape.size()) > MAX_PLAN_VALUES {
                    return cx.err(format_args!("the plan would hold more than {MAX_PLAN_VALUES} values"));
                }
                (c, shape, shape.size())
            }
            name => {
                let list = match get(node, "list") {
                    V::Missing | V::Bool(false) => false,
                    V::Bool(true) => true,
                    other => return cx.err(format_args!("list must be true or absent, got {}", show(other))),
                };
                let mut items = match get(node, "parents") {
                    V::Arr(items) => items,
                    other => return cx.err(format_args!("parents must be an array of node indices, got {}", show(other))),
                };
                // A list op's parents may also come as one nested array.
                if name == "concat" && items.len() == 1 {
                    if let V::Arr(inner) = items.get(0) {
                        items = inner;
                    }
                }
                let mut parents = Parents::with_capacity(items.len());
                shapes.clear();
                for k in 0..items.len() {
                    let p = items.get(k);
                    match integer(p) {
                        Some(x) if x >= 0.0 && x < i as f64 => {
                            let x = x as usize;
                            parents.push(canon[x]);
                            shapes.push(shape_of[x]);
                        }
                        Some(_) => return cx.err(format_args!("parent {} is not an earlier node", show(p))),
                        None => return cx.err(format_args!("parent {} is not a node index", show(p))),
                    }
                }
                let args = read_args(&cx, get(node, "args"))?;
                let op = read_op(&cx, name, args, list, &shapes)?;
                let shape = op.infer(&shapes).or_else(|e| cx.err(e))?;
                let size = shape.size().saturating_add(op.aux_len(&shapes));
                if let Some(&same) = seen.get(&(op, parents.clone())) {
                    // Merged into an earlier node: nothing more to hold.
                    checked.push(Checked::Op(op, parents));
                    shape_of.push(shape);
                    canon.push(same);
                    continue;
                }
                if total.saturating_add(size) > MAX_PLAN_VALUES {
                    return cx.err(format_args!("the plan would hold more than {MAX_PLAN_VALUES} values"));
                }
                seen.insert((op, parents.clone()), i as u32);
                (Checked::Op(op, parents), shape, size)
            }
        };
        total += size;
        checked.push(node_checked);
        shape_of.push(shape);
        canon.push(i as u32);
    }
    if !map && n_params == 0 {
        return fail!("compileFromJSON: a plan with input \"single\" needs one param node");
    }
    drop(seen);

    // ---- pass 2: build. Only evaluating constants can still fail.
    let mut graph = Graph::default();
    // Graph id of each JSON node; `u32::MAX` for one merged into another.
    let mut ids: Vec<u32> = vec![u32::MAX; n];
    // Whether a JSON node is computed from constants only (then it is
    // evaluated now, so that a failure names it).
    let mut constant: Vec<bool> = vec![false; n];
    let mut params: Vec<u32> = Vec::new();
    let mut inputs: Vec<u32> = Vec::new();
    let mut graph_parents: Vec<u32> = Vec::new();
    for (i, c) in checked.into_iter().enumerate() {
        if canon[i] != i as u32 {
            ids[i] = ids[canon[i] as usize];
            constant[i] = constant[canon[i] as usize];
            continue;
        }
        let label = match &c {
            Checked::Param(_) => "param",
            Checked::Input(_) => "input",
            Checked::Const(..) => "const",
            Checked::Op(op, _) => op.name(),
        };
        let cx = Ctx { index: i, label };
        let id = match c {
            Checked::Param(shape) => {
                let id = graph.leaf(Op::Leaf, shape, &[]).or_else(|e| cx.err(e))?;
                params.push(id);
                id
            }
            Checked::Input(shape) => {
                let id = graph.leaf(Op::Input, shape, &[]).or_else(|e| cx.err(e))?;
                inputs.push(id);
                id
            }
            Checked::Const(shape, data) => {
                constant[i] = true;
                graph.leaf(Op::Const, shape, &data).or_else(|e| cx.err(e))?
            }
            Checked::Op(op, parents) => {
                graph_parents.clear();
                graph_parents.extend(parents.iter().map(|&p| ids[p as usize]));
                let evaluate = parents.iter().all(|&p| constant[p as usize]);
                constant[i] = evaluate;
                graph.op(op, &graph_parents, evaluate).or_else(|e| cx.err(e))?
            }
        };
        ids[i] = id;
    }
    Plan::build(&graph, ids[root], &params, &inputs).map_err(|e| Error(format!("compileFromJSON: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"{"version":2,"input":"map","nodes":[
 {"kind":"param","name":"w","shape":[]},
 {"kind":"param","name":"b","shape":[2]},
 {"kind":"input","name":"x","shape":[2]},
 {"kind":"input","name":"y","shape":[2]},
 {"kind":"op","op":"add","parents":[3,1]},
 {"kind":"op","op":"mul","parents":[0,2]},
 {"kind":"op","op":"sub","parents":[5,4]},
 {"kind":"op","op":"square","parents":[6]},
 {"kind":"op","op":"sum","parents":[7]}],"root":8}"#;

    fn err(text: &str) -> String {
        match plan_from_json(text) {
            Ok(_) => panic!("expected an error for {text}"),
            Err(e) => e.0,
        }
    }

    /// A map plan around `nodes` (a JSON list body) with the given root.
    fn plan(nodes: &str, root: usize) -> String {
        format!(r#"{{"version":2,"input":"map","nodes":[{nodes}],"root":{root}}}"#)
    }

    #[test]
    fn rebuilds_the_worked_example() {
        let mut p = plan_from_json(EXAMPLE).unwrap();
        assert_eq!(p.params().len(), 2);
        assert_eq!(p.inputs().len(), 2);
        assert_eq!(p.root_shape(), Shape::Scalar);
        p.set(0, &[2.0]).unwrap();
        p.set(1, &[0.5, 0.5]).unwrap();
        p.set(2, &[1.0, 2.0]).unwrap();
        p.set(3, &[2.0, 5.0]).unwrap();
        assert_eq!(p.forward().unwrap(), &[2.5]);
        p.backward();
        let mut w = [0.0];
        let mut b = [0.0; 2];
        p.gradient(0, &mut w).unwrap();
        p.gradient(1, &mut b).unwrap();
        assert_eq!(w, [-7.0]);
        assert_eq!(b, [1.0, 3.0]);
    }

    #[test]
    fn reads_version_1_and_single_plans() {
        let v1 = r#"{"version":1,"nodes":[{"kind":"param","name":"w","shape":[2]},{"kind":"const","shape":[2],"data":[1,null]},
            {"kind":"op","op":"mul","parents":[0,1]},{"kind":"op","op":"sum","parents":[2]}],"root":3}"#;
        let mut p = plan_from_json(v1).unwrap();
        p.set(0, &[3.0, 4.0]).unwrap();
        assert!(p.forward().unwrap()[0].is_nan());
        let single = r#"{"version":2,"input":"single","nodes":[{"kind":"param","shape":[2,2]},
            {"kind":"op","op":"cholesky","parents":[0]},{"kind":"op","op":"sum","parents":[1]}],"root":2}"#;
        let mut p = plan_from_json(single).unwrap();
        p.set(0, &[4.0, 2.0, 2.0, 5.0]).unwrap();
        assert_eq!(p.forward().unwrap(), &[2.0 + 1.0 + 2.0]);
    }

    #[test]
    fn numbers_parse_exactly() {
        // serde_json's default parser rounds these wrongly.
        for x in [1.1290774160688077_f64, 3.8415492685252453, -1.490143767845386e129, 1.947700395895162e-169, 5e-324] {
            let text = plan(&format!(r#"{{"kind":"const","shape":[],"data":[{x:e}]}}"#), 0);
            let mut p = plan_from_json(&text).unwrap();
            assert_eq!(p.forward().unwrap()[0].to_bits(), x.to_bits());
        }
        let text = plan(r#"{"kind":"const","shape":[5],"data":["NaN","Infinity","-Infinity",null,"-0"]}"#, 0);
        let mut p = plan_from_json(&text).unwrap();
        let v = p.forward().unwrap();
        assert!(v[0].is_nan() && v[1] == f64::INFINITY && v[2] == f64::NEG_INFINITY && v[3].is_nan());
        assert!(v[4] == 0.0 && v[4].is_sign_negative());
    }

    #[test]
    fn not_a_plan() {
        for text in [
            "5",
            "[]",
            "null",
            r#"{"version":2}"#,
            r#"{"version":3,"nodes":[],"root":0}"#,
            r#"{"version":"2","nodes":[],"root":0}"#,
            r#"{"nodes":[{"kind":"param","shape":[]}],"root":0}"#,
        ] {
            assert_eq!(err(text), "compileFromJSON: not a serialized plan", "{text}");
        }
        assert!(err("{").starts_with("compileFromJSON: not a serialized plan (invalid JSON"));
        let deep = format!(r#"{{"version":2,"nodes":{}{},"root":0}}"#, "[".repeat(100_000), "]".repeat(100_000));
        assert!(err(&deep).starts_with("compileFromJSON: node 0: expected an object, got [[[["));
        let deep = format!(
            r#"{{"version":2,"nodes":[{{"kind":"param","name":"a","shape":[3]}},{{"kind":"op","op":"pow","parents":[0],"args":{}2{}}}],"root":1}}"#,
            "[{\"k\":".repeat(50_000),
            "}]".repeat(50_000)
        );
        assert_eq!(err(&deep), "compileFromJSON: node 1 (pow): pow: exponent must be a finite number; got [object Object]");
        assert!(err(&format!("{}2{}", "[".repeat(1000), "}".repeat(1000))).contains("mismatched bracket"));
    }

    #[test]
    fn unknown_ops() {
        for op in ["trace", "logdetPSD", "solvePSD", "inv", "frobnicate", "constructor", ""] {
            let text = plan(&format!(r#"{{"kind":"param","name":"a","shape":[2,2]}},{{"kind":"op","op":"{op}","parents":[0]}}"#), 1);
            assert_eq!(err(&text), format!("compileFromJSON: unknown op \"{op}\""));
        }
    }

    #[test]
    fn bad_roots_and_kinds() {
        let p = r#"{"kind":"param","name":"a","shape":[]}"#;
        assert_eq!(err(&plan(p, 1)), "compileFromJSON: root must be the index of one of the plan's 1 nodes, got 1");
        let text = format!(r#"{{"version":2,"nodes":[{p}],"root":-1}}"#);
        assert!(err(&text).starts_with("compileFromJSON: root must be"));
        let text = format!(r#"{{"version":2,"nodes":[{p}],"root":0.5}}"#);
        assert!(err(&text).starts_with("compileFromJSON: root must be"));
        assert_eq!(
            err(&plan(&format!(r#"{p},{{"kind":"lambda"}}"#), 0)),
            r#"compileFromJSON: node 1: kind must be "param", "input", "const" or "op", got "lambda""#
        );
        assert_eq!(err(&plan(&format!("{p},7"), 0)), "compileFromJSON: node 1: expected an object, got 7");
        assert_eq!(
            err(&format!(r#"{{"version":1,"nodes":[{p},{{"kind":"input","name":"x","shape":[]}}],"root":0}}"#)),
            "compileFromJSON: node 1 (input): a version 1 plan has no inputs"
        );
    }

    #[test]
    fn bad_shapes() {
        for (shape, msg) in [
            ("[-1]", "shape must be up to two non-negative integers, got [-1]"),
            ("[1.5]", "shape must be up to two non-negative integers, got [1.5]"),
            ("[1,2,3]", "shape must be up to two non-negative integers, got [1, 2, 3]"),
            (r#"["2"]"#, r#"shape must be up to two non-negative integers, got ["2"]"#),
            ("3", "shape must be up to two non-negative integers, got 3"),
        ] {
            assert_eq!(
                err(&plan(&format!(r#"{{"kind":"param","name":"a","shape":{shape}}}"#), 0)),
                format!("compileFromJSON: node 0 (param): {msg}")
            );
        }
        for (shape, shown) in [("[1e300]", "[1e+300]"), ("[65536,65536]", "[65536, 65536]"), ("[4294967296,0]", "[4294967296, 0]")] {
            assert_eq!(
                err(&plan(&format!(r#"{{"kind":"param","name":"a","shape":{shape}}}"#), 0)),
                format!("compileFromJSON: node 0 (param): shape {shown} holds more than {MAX_ELEMENTS} values")
            );
        }
        // Each within the per-value cap, together beyond the plan's budget:
        // refused before anything is allocated.
        assert_eq!(
            err(&plan(
                r#"{"kind":"param","name":"a","shape":[16384,16384]},{"kind":"param","name":"b","shape":[16384,16384]}"#,
                0
            )),
            format!("compileFromJSON: node 1 (param): the plan would hold more than {MAX_PLAN_VALUES} values")
        );
        let outer = r#"{"kind":"param","name":"a","shape":[40000,1]},{"kind":"param","name":"b","shape":[1,40000]},
            {"kind":"op","op":"matmul","parents":[0,1]}"#;
        assert_eq!(
            err(&plan(outer, 2)),
            format!("compileFromJSON: node 2 (matmul): the plan would hold more than {MAX_PLAN_VALUES} values")
        );
    }

    #[test]
    fn bad_data() {
        assert_eq!(
            err(&plan(r#"{"kind":"const","shape":[3],"data":[1,2]}"#, 0)),
            "compileFromJSON: node 0 (const): data length 2 does not match shape [3]"
        );
        assert_eq!(
            err(&plan(r#"{"kind":"const","shape":[2],"data":[1,"x"]}"#, 0)),
            r#"compileFromJSON: node 0 (const): data[1] must be a number, got "x""#
        );
        assert_eq!(
            err(&plan(r#"{"kind":"const","shape":[2]}"#, 0)),
            "compileFromJSON: node 0 (const): data must be an array of numbers, got undefined"
        );
    }

    #[test]
    fn bad_parents() {
        let a = r#"{"kind":"param","name":"a","shape":[3]}"#;
        for (parents, msg) in [
            ("[0,1]", "parent 1 is not an earlier node"),
            ("[0,5]", "parent 5 is not an earlier node"),
            ("[0,-1]", "parent -1 is not an earlier node"),
            ("[0,0.5]", "parent 0.5 is not a node index"),
            (r#"[0,"0"]"#, r#"parent "0" is not a node index"#),
            ("[0,1e300]", "parent 1e+300 is not an earlier node"),
            ("0", "parents must be an array of node indices, got 0"),
            ("[0,0,0]", "add: takes 2 operands, got 3"),
            ("[0]", "add: takes 2 operands, got 1"),
        ] {
            assert_eq!(
                err(&plan(&format!(r#"{a},{{"kind":"op","op":"add","parents":{parents}}}"#), 1)),
                format!("compileFromJSON: node 1 (add): {msg}")
            );
        }
    }

    #[test]
    fn shape_rules_name_the_node() {
        let nodes = r#"{"kind":"param","name":"a","shape":[3]},{"kind":"param","name":"b","shape":[2]},"#;
        let cases = [
            (r#"{"kind":"op","op":"add","parents":[0,1]}"#, "add: shapes [3] and [2] do not match"),
            (r#"{"kind":"op","op":"slice","parents":[0],"args":[[1],[3]]}"#, "slice: [1, 4) exceeds axis 0 of [3]"),
            (r#"{"kind":"op","op":"slice","parents":[0],"args":[[1,0],[1,1]]}"#, "slice: start and size need 1 entry for a [3] operand"),
            (r#"{"kind":"op","op":"slice","parents":[0],"args":[[-1],[1]]}"#, "slice: start must be a non-negative integer and size a positive integer"),
            (r#"{"kind":"op","op":"slice","parents":[0],"args":[[0],[0]]}"#, "slice: start must be a non-negative integer and size a positive integer"),
            (r#"{"kind":"op","op":"transpose","parents":[0]}"#, "transpose: needs a matrix, got [3]"),
            (r#"{"kind":"op","op":"cholesky","parents":[0]}"#, "cholesky: needs a square matrix, got [3]"),
            (r#"{"kind":"op","op":"reshape","parents":[0],"args":[[2]]}"#, "reshape: cannot view 3 elements as [2]"),
            (r#"{"kind":"op","op":"reshape","parents":[0],"args":[[0]]}"#, "reshape: shape must be up to two positive integers"),
            (r#"{"kind":"op","op":"reshape","parents":[0],"args":[3]}"#, "reshape: shape must be up to two positive integers"),
            (r#"{"kind":"op","op":"reshape","parents":[0],"args":[[1e300,3]]}"#, "reshape: cannot view 3 elements as [1e+300×3]"),
            (r#"{"kind":"op","op":"reshape","parents":[0],"args":[[3,3,1]]}"#, "reshape: shape must be up to two positive integers"),
            (r#"{"kind":"op","op":"pow","parents":[0],"args":["NaN"]}"#, "pow: exponent must be a finite number; got NaN"),
            (r#"{"kind":"op","op":"pow","parents":[0]}"#, "pow: exponent must be a finite number; got undefined"),
            (r#"{"kind":"op","op":"pow","parents":[0],"args":["2"]}"#, "pow: exponent must be a finite number; got 2"),
            (r#"{"kind":"op","op":"exp","parents":[0],"args":[1]}"#, "exp takes no static arguments"),
            (r#"{"kind":"op","op":"exp","parents":[0],"list":true}"#, "list: true is for concat only"),
            (r#"{"kind":"op","op":"dot","parents":[0,1]}"#, "dot: needs two vectors of equal length, got [3] and [2]"),
            (r#"{"kind":"op","op":"triangularSolve","parents":[0,1],"args":[{"lower":1}]}"#, "triangularSolve: lower must be true or false, got 1"),
            (r#"{"kind":"op","op":"concat","parents":[],"list":true}"#, "concat: needs a non-empty array of parts"),
        ];
        for (node, msg) in cases {
            let op = node.split("\"op\":\"").nth(1).unwrap().split('"').next().unwrap();
            assert_eq!(err(&plan(&format!("{nodes}{node}"), 2)), format!("compileFromJSON: node 2 ({op}): {msg}"), "{node}");
        }
        let m = r#"{"kind":"param","name":"a","shape":[2,2]},{"kind":"param","name":"b","shape":[2,3]},"#;
        assert_eq!(
            err(&plan(&format!(r#"{m}{{"kind":"op","op":"concat","parents":[0,1],"list":true,"args":[{{"axis":2}}]}}"#), 2)),
            "compileFromJSON: node 2 (concat): concat: axis must be 0 or 1"
        );
        assert_eq!(
            err(&plan(&format!(r#"{m}{{"kind":"op","op":"concat","parents":[0,1],"list":true}}"#), 2)),
            "compileFromJSON: node 2 (concat): concat: parts must agree on axis 1, got [2×2] and [2×3]"
        );
        assert!(plan_from_json(&plan(&format!(r#"{m}{{"kind":"op","op":"concat","parents":[0,1],"list":true,"args":[{{"axis":1}}]}}"#), 2)).is_ok());
    }

    #[test]
    fn constant_failures_name_the_node() {
        let text = plan(
            r#"{"kind":"const","shape":[2,2],"data":[1,2,2,1]},{"kind":"op","op":"cholesky","parents":[0]}"#,
            1,
        );
        let e = err(&text);
        assert!(e.starts_with("compileFromJSON: node 1 (cholesky): cholesky: matrix is not positive definite"), "{e}");
    }

    #[test]
    fn names() {
        let dup = r#"{"kind":"param","name":"a","shape":[]},{"kind":"param","name":"a","shape":[]}"#;
        assert_eq!(err(&plan(dup, 0)), r#"compileFromJSON: node 1 (param): name "a" is used twice"#);
        let unnamed = r#"{"kind":"param","name":"a","shape":[]},{"kind":"param","shape":[]}"#;
        assert_eq!(
            err(&plan(unnamed, 0)),
            "compileFromJSON: node 1 (param): a parameter of a map plan needs a string name, got undefined"
        );
        let text = r#"{"version":2,"input":"single","nodes":[{"kind":"param","shape":[]},{"kind":"param","shape":[]}],"root":0}"#;
        assert_eq!(err(text), "compileFromJSON: node 1 (param): a plan with input \"single\" has exactly one param node");
        let text = r#"{"version":2,"input":"single","nodes":[{"kind":"const","shape":[],"data":[1]}],"root":0}"#;
        assert_eq!(err(text), "compileFromJSON: a plan with input \"single\" needs one param node");
        let text = r#"{"version":2,"input":"map","nodes":[{"kind":"input","shape":[]}],"root":0}"#;
        assert_eq!(err(text), "compileFromJSON: node 0 (input): an input needs a string name, got undefined");
        // A map plan with no parameters at all is fine.
        assert!(plan_from_json(r#"{"version":2,"input":"map","nodes":[{"kind":"const","shape":[],"data":[1]}],"root":0}"#).is_ok());
    }

    #[test]
    fn raw_parameter_into_cholesky_and_solve() {
        let text = plan(
            r#"{"kind":"param","name":"A","shape":[2,2]},{"kind":"param","name":"b","shape":[2]},
               {"kind":"op","op":"solveGeneral","parents":[0,1]},{"kind":"op","op":"cholesky","parents":[0]},
               {"kind":"op","op":"diagPart","parents":[3]},{"kind":"op","op":"add","parents":[2,4]},{"kind":"op","op":"sum","parents":[5]}"#,
            6,
        );
        let mut p = plan_from_json(&text).unwrap();
        p.set(0, &[4.0, 0.0, 0.0, 9.0]).unwrap();
        p.set(1, &[8.0, 9.0]).unwrap();
        assert_eq!(p.forward().unwrap(), &[2.0 + 1.0 + 2.0 + 3.0]);
    }

    #[test]
    fn merged_duplicates_and_dead_nodes() {
        // Two identical cholesky nodes (the JavaScript version does not merge)
        // and a dead node; the rebuilt plan keeps one factorization.
        let text = plan(
            r#"{"kind":"param","name":"A","shape":[2,2]},{"kind":"op","op":"cholesky","parents":[0]},
               {"kind":"op","op":"cholesky","parents":[0]},{"kind":"op","op":"exp","parents":[0]},
               {"kind":"op","op":"add","parents":[1,2]},{"kind":"op","op":"sum","parents":[4]}"#,
            5,
        );
        let p = plan_from_json(&text).unwrap();
        assert_eq!(p.len(), 4);
    }
}
