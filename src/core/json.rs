//! Plans as data (SPEC §8): reading a serialized plan back into a [`Plan`].
//!
//! A plan is untrusted input. Every malformed or hostile plan gets an
//! [`Error`] naming the node at fault, never a panic, and the work done is
//! bounded by the size of the text plus the values the plan declares:
//!
//! - the text is parsed by serde_json into a [`Value`], with its
//!   `float_roundtrip` feature on so that every number is correctly rounded
//!   (the default parser is off by an ulp for about one number in five, which
//!   would break bit-identical round trips), and with its recursion limit:
//!   arrays and objects nested more than 127 deep, text that is not JSON, and
//!   a number too large for an `f64` are refused as invalid JSON, at the byte
//!   where reading stopped;
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
//!
//! Below, a field is an `Option<&Value>`: `None` for an absent key, which
//! messages print as JavaScript prints `undefined`. With duplicate keys the
//! last wins, as in `JSON.parse`.

use super::error::{js_number, Error, Result};
use super::graph::Graph;
use super::op::{slice_op, Exponent, Op, Parents};
use super::plan::{Passes, Plan};
use super::shape::{Shape, MAX_ELEMENTS};
use crate::fail;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

/// At most this many values (every node's value plus kernel scratch) in a
/// plan read from JSON: 2 GiB of f64. A few bytes of JSON can describe many
/// nodes each at the core's per-value cap, or the outer product of two long
/// vectors, so that cap alone does not bound memory; this does, and it is
/// checked for the whole plan before any value is allocated.
pub const MAX_PLAN_VALUES: usize = 1 << 28;

// ---------------------------------------------------------------- invalid JSON

/// serde_json's error for text that is not JSON, as this module has always
/// worded it: the byte where reading stopped, and what was wrong there. The
/// words are serde_json's, matched on its `Display` text (which its error
/// type exposes no other way); any this does not know pass through as they are.
fn invalid_json(text: &str, e: &serde_json::Error) -> Error {
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
fn show(v: Option<&Value>) -> String {
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
fn js_string(v: Option<&Value>) -> String {
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
fn integer(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64).filter(|x| x.is_finite() && x.fract() == 0.0)
}

/// The text of a string value.
fn string(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str)
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

fn read_shape(cx: &Ctx, v: Option<&Value>) -> Result<Shape> {
    let bad = || cx.err(format_args!("shape must be up to two non-negative integers, got {}", show(v)));
    let Some(Value::Array(items)) = v else { return bad() };
    if items.len() > 2 {
        return bad();
    }
    let mut dims = [0usize; 2];
    for (d, item) in dims.iter_mut().zip(items) {
        match integer(Some(item)) {
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

fn read_data(cx: &Ctx, v: Option<&Value>, shape: Shape) -> Result<Vec<f64>> {
    let Some(Value::Array(items)) = v else {
        return cx.err(format_args!("data must be an array of numbers, got {}", show(v)));
    };
    if items.len() != shape.size() {
        return cx.err(format_args!("data length {} does not match shape {}", items.len(), shape));
    }
    let mut out = Vec::with_capacity(items.len());
    for (k, item) in items.iter().enumerate() {
        out.push(match item {
            Value::Number(x) => x.as_f64().unwrap_or(f64::NAN),
            // JSON.stringify writes NaN and ±Infinity as null; our
            // compileFromJSON writes them as strings.
            Value::Null => f64::NAN,
            Value::String(s) if s == "NaN" => f64::NAN,
            Value::String(s) if s == "Infinity" => f64::INFINITY,
            Value::String(s) if s == "-Infinity" => f64::NEG_INFINITY,
            Value::String(s) if s == "-0" => -0.0,
            other => return cx.err(format_args!("data[{k}] must be a number, got {}", show(Some(other)))),
        });
    }
    Ok(out)
}

/// The static arguments of `args`, `None` when absent or empty.
fn read_args<'a>(cx: &Ctx, v: Option<&'a Value>) -> Result<Option<&'a [Value]>> {
    match v {
        None => Ok(None),
        Some(Value::Array(items)) if items.is_empty() => Ok(None),
        Some(Value::Array(items)) => Ok(Some(items)),
        other => cx.err(format_args!("args must be an array, got {}", show(other))),
    }
}

/// `[[start], [size]]` of a slice of an operand shaped `shape`, checked as the
/// JavaScript `slice` checks them, in the same order.
fn read_slice(cx: &Ctx, args: Option<&[Value]>, shape: Shape) -> Result<Op> {
    // As from JavaScript: an entry that is not an integer goes in as NaN,
    // arguments that are not two arrays as no entries at all.
    let entries = |v: &Value| -> Vec<f64> {
        v.as_array().map_or_else(Vec::new, |a| a.iter().map(|x| integer(Some(x)).unwrap_or(f64::NAN)).collect())
    };
    let (start, size) = match args {
        Some([start, size]) => (entries(start), entries(size)),
        _ => (Vec::new(), Vec::new()),
    };
    slice_op(shape, &start, &size).or_else(|e| cx.err(e))
}

/// The op of an op node, with its static arguments, given its parents' shapes.
fn read_op(cx: &Ctx, name: &str, args: Option<&[Value]>, list: bool, shapes: &[Shape]) -> Result<Op> {
    if list && name != "concat" {
        return cx.err("list: true is for concat only");
    }
    let no_args = |op: Op| match args {
        None => Ok(op),
        Some(_) => cx.err(format_args!("{name} takes no static arguments")),
    };
    fn one_arg<'a>(cx: &Ctx, name: &str, a: Option<&'a [Value]>) -> Result<Option<&'a Value>> {
        match a {
            None => Ok(None),
            Some([x]) => Ok(Some(x)),
            Some(_) => cx.err(format_args!("{name} takes one static argument")),
        }
    }
    match name {
        "pow" => {
            let k = one_arg(cx, name, args)?;
            match k.and_then(Value::as_f64) {
                Some(k) if k.is_finite() => Ok(Op::Pow(Exponent::new(k))),
                _ => cx.err(format_args!("pow: exponent must be a finite number; got {}", js_string(k))),
            }
        }
        "reshape" => {
            let bad = || cx.err("reshape: shape must be up to two positive integers");
            let Some(Value::Array(dims)) = one_arg(cx, name, args)? else { return bad() };
            if dims.len() > 2 {
                return bad();
            }
            let mut d = [0usize; 2];
            let mut f = [0f64; 2];
            for (slot, dim) in f.iter_mut().zip(dims) {
                match integer(Some(dim)) {
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
            None => Ok(Op::TriangularSolve { lower: true }),
            Some(Value::Object(fields)) => match fields.get("lower") {
                None => Ok(Op::TriangularSolve { lower: true }),
                Some(&Value::Bool(lower)) => Ok(Op::TriangularSolve { lower }),
                other => cx.err(format_args!("triangularSolve: lower must be true or false, got {}", show(other))),
            },
            other => cx.err(format_args!("triangularSolve: options must be an object like {{lower: true}}, got {}", show(other))),
        },
        "concat" => {
            let matrices = shapes.first().is_some_and(|s| s.rank() == 2);
            let axis = match one_arg(cx, name, args)? {
                None => None,
                Some(Value::Object(fields)) => fields.get("axis"),
                other => return cx.err(format_args!("concat: options must be an object like {{axis: 0}}, got {}", show(other))),
            };
            match axis {
                // Scalars and vectors flatten; the axis is not read.
                _ if !matrices => Ok(Op::Concat { axis: 0 }),
                None | Some(Value::Null) => Ok(Op::Concat { axis: 0 }),
                Some(a) => match a.as_f64() {
                    Some(a) if a == 0.0 || a == 1.0 => Ok(Op::Concat { axis: a as u8 }),
                    _ => cx.err("concat: axis must be 0 or 1"),
                },
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
    plan_from_json_with(text, Passes::default())
}

/// Rebuild a plan optimized by `passes` only (to test that the passes change
/// no result); without merging, no two nodes of the text are merged.
pub fn plan_from_json_with(text: &str, passes: Passes) -> Result<Plan> {
    let doc: Value = serde_json::from_str(text).map_err(|e| invalid_json(text, &e))?;
    let Value::Object(top) = &doc else { return not_a_plan() };
    let Some(Value::Array(nodes)) = top.get("nodes") else { return not_a_plan() };
    let version = match top.get("version").and_then(Value::as_f64) {
        Some(1.0) => 1,
        Some(2.0) => 2,
        _ => return not_a_plan(),
    };
    let n = nodes.len();
    let root = match integer(top.get("root")) {
        Some(r) if r >= 0.0 && r < n as f64 => r as usize,
        _ => {
            return fail!(
                "compileFromJSON: root must be the index of one of the plan's {} nodes, got {}",
                n,
                show(top.get("root"))
            )
        }
    };
    // Parameters are read from a {name: value} map when the plan says so, or,
    // lacking an `input` field (version 1), when they have names.
    let map = match top.get("input") {
        Some(Value::String(s)) if s == "map" => true,
        Some(Value::String(s)) if s == "single" => false,
        None => nodes.iter().any(|node| match node {
            Value::Object(node) => string(node.get("kind")) == Some("param") && string(node.get("name")).is_some(),
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

    for (i, node) in nodes.iter().enumerate() {
        let Value::Object(node) = node else {
            return fail!("compileFromJSON: node {i}: expected an object, got {}", show(Some(node)));
        };
        let label = match string(node.get("kind")) {
            Some("op") => match node.get("op") {
                Some(Value::String(name)) if OPS.contains(&name.as_str()) => name.as_str(),
                Some(Value::String(name)) => return unknown_op(name),
                other => {
                    let cx = Ctx { index: i, label: "op" };
                    return cx.err(format_args!("op must be the name of an op, got {}", show(other)));
                }
            },
            Some(k @ ("param" | "input" | "const")) => k,
            _ => {
                return fail!(
                    "compileFromJSON: node {i}: kind must be \"param\", \"input\", \"const\" or \"op\", got {}",
                    show(node.get("kind"))
                )
            }
        };
        let cx = Ctx { index: i, label };
        let (node_checked, shape, size) = match label {
            "param" | "input" | "const" => {
                let shape = read_shape(&cx, node.get("shape"))?;
                if label == "input" && version == 1 {
                    return cx.err("a version 1 plan has no inputs");
                }
                let names = match label {
                    "param" => Some(&mut param_names),
                    "input" => Some(&mut input_names),
                    _ => None,
                };
                if let Some(names) = names {
                    match node.get("name") {
                        Some(Value::String(name)) => {
                            if !names.insert(name) && (label == "input" || map) {
                                return cx.err(format_args!("name {} is used twice", show(node.get("name"))));
                            }
                        }
                        None if label == "param" && !map => {}
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
                    _ => Checked::Const(shape, read_data(&cx, node.get("data"), shape)?),
                };
                if total.saturating_add(shape.size()) > MAX_PLAN_VALUES {
                    return cx.err(format_args!("the plan would hold more than {MAX_PLAN_VALUES} values"));
                }
                (c, shape, shape.size())
            }
            name => {
                let list = match node.get("list") {
                    None | Some(Value::Bool(false)) => false,
                    Some(Value::Bool(true)) => true,
                    other => return cx.err(format_args!("list must be true or absent, got {}", show(other))),
                };
                let mut items: &[Value] = match node.get("parents") {
                    Some(Value::Array(items)) => items,
                    other => return cx.err(format_args!("parents must be an array of node indices, got {}", show(other))),
                };
                // A list op's parents may also come as one nested array.
                if name == "concat" && items.len() == 1 {
                    if let Value::Array(inner) = &items[0] {
                        items = inner;
                    }
                }
                let mut parents = Parents::with_capacity(items.len());
                shapes.clear();
                for p in items {
                    match integer(Some(p)) {
                        Some(x) if x >= 0.0 && x < i as f64 => {
                            let x = x as usize;
                            parents.push(canon[x]);
                            shapes.push(shape_of[x]);
                        }
                        Some(_) => return cx.err(format_args!("parent {} is not an earlier node", show(Some(p)))),
                        None => return cx.err(format_args!("parent {} is not a node index", show(Some(p)))),
                    }
                }
                let args = read_args(&cx, node.get("args"))?;
                let op = read_op(&cx, name, args, list, &shapes)?;
                let shape = op.infer(&shapes).or_else(|e| cx.err(e))?;
                // A shape past a usize is past the budget too.
                let size = shape.checked_size().and_then(|n| n.checked_add(op.aux_len(&shapes))).unwrap_or(usize::MAX);
                if let Some(&same) = seen.get(&(op, parents.clone())).filter(|_| passes.merge_identical) {
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
    // Everything pass 2 needs is owned by `checked`: free the parsed text
    // before the graph's values are allocated.
    drop(doc);

    // ---- pass 2: build. Only evaluating constants can still fail.
    let mut graph = if passes.merge_identical { Graph::default() } else { Graph::without_merging() };
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
    Plan::build_with(&graph, ids[root], &params, &inputs, passes).map_err(|e| Error(format!("compileFromJSON: {e}")))
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
    }

    #[test]
    fn invalid_json() {
        let invalid = |at: usize, what: &str| format!("compileFromJSON: not a serialized plan (invalid JSON at byte {at}: {what})");
        // The byte at fault, or the end of the text; text that ends too soon
        // is always an "unexpected end".
        for (text, at, what) in [
            ("", 0, "unexpected end"),
            ("{", 1, "unexpected end"),
            ("[1", 2, "unexpected end"),
            (r#"{"a":"#, 5, "unexpected end"),
            (r#"{"a":"b"#, 7, "unterminated string"),
            ("[[2}}", 3, "expected ',' or ']'"),
            (r#"{"a":1]"#, 6, "expected ',' or '}'"),
            (r#"{"a" 1}"#, 5, "expected ':'"),
            ("{\n  \"a\"\n  1}", 10, "expected ':'"),
            ("{\"a\":\n\"b\nc\"}", 8, "control character in string"),
            ("{1:2}", 1, "expected a key"),
            (r#"{"a":1,}"#, 7, "expected a key"),
            ("[1,]", 3, "unexpected character"),
            ("[1] 2", 4, "unexpected text after the value"),
            ("[tru]", 4, "unexpected character"),
            ("[+1]", 1, "unexpected character"),
            ("[01]", 2, "invalid number"),
            ("[1.]", 3, "invalid number"),
            (r#"["\x"]"#, 3, "invalid escape"),
            // Beyond the reader this module had: a lone surrogate, a number
            // too large for an f64 (JSON.stringify writes neither), and
            // nesting beyond serde_json's recursion limit.
            (r#"["\ud800"]"#, 8, "lone surrogate in a \\u escape"),
            (r#"["\udc00"]"#, 7, "lone surrogate in a \\u escape"),
            ("[1e400]", 5, "number out of range"),
            ("[-1.8e308]", 8, "number out of range"),
        ] {
            assert_eq!(err(text), invalid(at, what), "{text}");
        }
        // Arrays and objects nest at most 127 deep: the 128th is refused
        // where it opens, however deep the text goes on.
        let nest = |d: usize| format!(r#"{{"version":2,"nodes":{}{},"root":0}}"#, "[".repeat(d - 1), "]".repeat(d - 1));
        assert_eq!(err(&nest(127)), "compileFromJSON: node 0: expected an object, got [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[…");
        for d in [128, 100_000] {
            assert_eq!(err(&nest(d)), invalid(21 + 126, "nested too deeply"));
        }
        let deep = format!(
            r#"{{"version":2,"nodes":[{{"kind":"param","name":"a","shape":[3]}},{{"kind":"op","op":"pow","parents":[0],"args":{}2{}}}],"root":1}}"#,
            "[{\"k\":".repeat(50_000),
            "}]".repeat(50_000)
        );
        assert!(err(&deep).ends_with("nested too deeply)"));
        assert!(err(&format!("{}2{}", "[".repeat(1000), "}".repeat(1000))).ends_with("nested too deeply)"));
    }

    #[test]
    fn strings_and_keys() {
        // Escapes, and a surrogate pair, in a parameter's name; with
        // duplicate keys the last wins, as in JSON.parse.
        let text = r#"{"version":2,"input":"map","nodes":[{"kind":"param","name":"a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00","shape":[]},
            {"kind":"op","op":"exp","op":"neg","parents":[0]}],"root":1,"root":0}"#;
        let mut p = plan_from_json(text).unwrap();
        p.set(0, &[2.0]).unwrap();
        assert_eq!(p.forward().unwrap(), &[2.0]);
        let dup = r#"{"kind":"param","name":"a\u00e9\ud83d\ude00","shape":[]},{"kind":"param","name":"aé😀","shape":[]}"#;
        assert_eq!(err(&plan(dup, 0)), "compileFromJSON: node 1 (param): name \"aé😀\" is used twice");
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
