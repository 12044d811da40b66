//! The first pass over a plan's typed nodes: every node is checked in order
//! and every shape inferred statically, allocating none of the plan's
//! values. A parent must be an earlier node (which rules out cycles),
//! shapes are checked for rank, integrality and size, static arguments for
//! type and range, and the whole plan may hold at most [`MAX_PLAN_VALUES`]
//! values.

use super::super::error::{js_number, Result};
use super::super::graph::batched;
use super::super::op::{slice_op, Exponent, Op, Parents};
use super::super::plan::Passes;
use super::super::shape::{Shape, MAX_ELEMENTS};
use super::messages::{integer, js_string, show};
use super::schema::{Arg, Data, Field, Node, Numbers, OpName, Quoted};
use super::MAX_PLAN_VALUES;
use crate::fail;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// A node once checked: what the second pass builds. Parents are JSON
/// indices, each that of the earliest identical node.
pub enum Checked {
    /// A parameter, with its name when it has one.
    Param(Shape, Option<String>),
    /// An input, with its name.
    Input(Shape, String),
    Const(Shape, Vec<f64>),
    Op(Op, Parents),
    /// Identical to an earlier node (same op, same parents), as the graph
    /// will merge it: the index of that node.
    Merged(u32),
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

/// A field as messages print it (`undefined` when absent).
fn shown<T: Quoted>(f: &Field<T>) -> String {
    show(f.value().as_ref())
}

/// `Number.isInteger(x)`.
fn whole(x: f64) -> Option<f64> {
    Some(x).filter(|x| x.is_finite() && x.fract() == 0.0)
}

pub fn unknown_op<T>(name: &str) -> Result<T> {
    if name.chars().count() > 80 {
        let cut: String = name.chars().take(80).collect();
        return fail!("compileFromJSON: unknown op \"{cut}…\"");
    }
    fail!("compileFromJSON: unknown op \"{name}\"")
}

/// Check every node of a plan, in order; `map` tells whether parameters are
/// read from a {name: value} map. With the checked nodes, the values they
/// hold together (merged ones aside, scratch aside): the room the build
/// lays its graph over.
pub fn check(nodes: Vec<Field<Node>>, version: u32, map: bool, passes: Passes) -> Result<(Vec<Checked>, usize)> {
    let n = nodes.len();
    let mut checked: Vec<Checked> = Vec::with_capacity(n);
    let mut shape_of: Vec<Shape> = Vec::with_capacity(n);
    // The earliest node each node is identical to: itself, unless merged.
    let mut canon: Vec<u32> = Vec::with_capacity(n);
    let mut seen: HashMap<(Op, Parents), u32> = HashMap::new();
    let mut param_names: HashSet<String> = HashSet::new();
    let mut input_names: HashSet<String> = HashSet::new();
    let mut n_params = 0usize;
    let mut total = 0usize;
    let mut values = 0usize;
    let mut shapes: Vec<Shape> = Vec::new();

    for (i, node) in nodes.into_iter().enumerate() {
        let node = match node {
            Field::Is(node) => node,
            Field::Not(v) => return fail!("compileFromJSON: node {i}: expected an object, got {}", show(Some(&v))),
            Field::Absent => unreachable!("an array item is present"),
        };
        let label = match &node {
            Node::Op { op: Field::Is(OpName::Known(name)), .. } => name,
            Node::Op { op: Field::Is(OpName::Unknown(name)), .. } => return unknown_op(name),
            Node::Op { op, .. } => {
                let cx = Ctx { index: i, label: "op" };
                return cx.err(format_args!("op must be the name of an op, got {}", shown(op)));
            }
            Node::Param { .. } => "param",
            Node::Input { .. } => "input",
            Node::Const { .. } => "const",
            Node::Unknown { kind } => {
                return fail!(
                    "compileFromJSON: node {i}: kind must be \"param\", \"input\", \"const\" or \"op\", got {}",
                    show(kind.as_ref())
                )
            }
        };
        let cx = Ctx { index: i, label };
        let (node_checked, shape, size) = match node {
            Node::Param { name, shape } | Node::Input { name, shape } => {
                let param = label == "param";
                let shape = read_shape(&cx, &shape)?;
                if !param && version == 1 {
                    return cx.err("a version 1 plan has no inputs");
                }
                let names = if param { &mut param_names } else { &mut input_names };
                let name = match name {
                    Field::Is(name) => {
                        if names.contains(&name) {
                            if !param || map {
                                return cx.err(format_args!("name {} is used twice", show(Some(&name.to_value()))));
                            }
                        } else {
                            names.insert(name.clone());
                        }
                        Some(name)
                    }
                    Field::Absent if param && !map => None,
                    other if param && !map => return cx.err(format_args!("name must be a string, got {}", shown(&other))),
                    other => {
                        let whose = if param { "a parameter of a map plan" } else { "an input" };
                        return cx.err(format_args!("{whose} needs a string name, got {}", shown(&other)));
                    }
                };
                if param {
                    if !map && n_params > 0 {
                        return cx.err("a plan with input \"single\" has exactly one param node");
                    }
                    n_params += 1;
                }
                if total.saturating_add(shape.size()) > MAX_PLAN_VALUES {
                    return cx.err(format_args!("the plan would hold more than {MAX_PLAN_VALUES} values"));
                }
                let checked = if param { Checked::Param(shape, name) } else { Checked::Input(shape, name.unwrap_or_default()) };
                (checked, shape, shape.size())
            }
            Node::Const { shape, data } => {
                let shape = read_shape(&cx, &shape)?;
                // Data as long as the shape says is already in the text.
                let data = read_data(&cx, data, shape)?;
                if total.saturating_add(shape.size()) > MAX_PLAN_VALUES {
                    return cx.err(format_args!("the plan would hold more than {MAX_PLAN_VALUES} values"));
                }
                (Checked::Const(shape, data), shape, shape.size())
            }
            Node::Op { parents, args, list, .. } => {
                let list = match list {
                    Field::Absent | Field::Is(false) => false,
                    Field::Is(true) => true,
                    other => return cx.err(format_args!("list must be true or absent, got {}", shown(&other))),
                };
                let mut ids = Parents::new();
                shapes.clear();
                let mut parent = |index: Option<f64>, item: &dyn Fn() -> String| match index {
                    Some(x) if x >= 0.0 && x < i as f64 => {
                        ids.push(canon[x as usize]);
                        shapes.push(shape_of[x as usize]);
                        Ok(())
                    }
                    Some(_) => cx.err(format_args!("parent {} is not an earlier node", item())),
                    None => cx.err(format_args!("parent {} is not a node index", item())),
                };
                match &parents {
                    Field::Is(Numbers(xs)) => {
                        for &x in xs {
                            parent(whole(x), &|| show(Some(&x.to_value())))?;
                        }
                    }
                    Field::Not(v) if v.is_array() => {
                        let mut items = v.as_array().expect("an array");
                        // A list op's parents may also come as one nested array.
                        if label == "concat" && items.len() == 1 {
                            if let Value::Array(inner) = &items[0] {
                                items = inner;
                            }
                        }
                        for p in items {
                            parent(integer(Some(p)), &|| show(Some(p)))?;
                        }
                    }
                    other => return cx.err(format_args!("parents must be an array of node indices, got {}", shown(other))),
                }
                let args = match &args {
                    Field::Absent => None,
                    Field::Is(items) if items.is_empty() => None,
                    Field::Is(items) => Some(&items[..]),
                    Field::Not(v) => return cx.err(format_args!("args must be an array, got {}", show(Some(v)))),
                };
                let op = read_op(&cx, label, args, list, &shapes)?;
                let shape = op.infer(&shapes).or_else(|e| cx.err(e))?;
                // A shape past a usize is past the budget too.
                let size = shape.checked_size().and_then(|n| n.checked_add(op.aux_len(&shapes))).unwrap_or(usize::MAX);
                // Merged as the graph would (graph::batched ops never are),
                // so a rebuilt plan sums adjoints as the traced one did.
                let mergeable = passes.merge_identical && !batched(op);
                if let Some(&same) = seen.get(&(op, ids.clone())).filter(|_| mergeable) {
                    // Merged into an earlier node: nothing more to hold.
                    checked.push(Checked::Merged(same));
                    shape_of.push(shape);
                    canon.push(same);
                    continue;
                }
                if total.saturating_add(size) > MAX_PLAN_VALUES {
                    return cx.err(format_args!("the plan would hold more than {MAX_PLAN_VALUES} values"));
                }
                if mergeable {
                    seen.insert((op, ids.clone()), i as u32);
                }
                (Checked::Op(op, ids), shape, size)
            }
            Node::Unknown { .. } => unreachable!("refused above"),
        };
        total += size;
        values += shape.size();
        checked.push(node_checked);
        shape_of.push(shape);
        canon.push(i as u32);
    }
    if !map && n_params == 0 {
        return fail!("compileFromJSON: a plan with input \"single\" needs one param node");
    }
    Ok((checked, values))
}

fn read_shape(cx: &Ctx, v: &Field<Numbers>) -> Result<Shape> {
    let bad = || cx.err(format_args!("shape must be up to two non-negative integers, got {}", shown(v)));
    let Field::Is(Numbers(items)) = v else { return bad() };
    if items.len() > 2 {
        return bad();
    }
    let mut dims = [0usize; 2];
    let empty = items.contains(&0.0);
    for (d, &item) in dims.iter_mut().zip(items) {
        match whole(item) {
            Some(x) if x >= 0.0 => {
                // A dimension below usize::MAX, as `compile` takes it (beside a 0).
                if x >= usize::MAX as f64 {
                    return match empty {
                        true => cx.err(format_args!("shape {} is too large", shown(v))),
                        false => cx.err(format_args!("shape {} holds more than {} values", shown(v), MAX_ELEMENTS)),
                    };
                }
                *d = x as usize;
            }
            _ => return bad(),
        }
    }
    match Shape::from_dims(&dims[..items.len()]) {
        Some(s) => Ok(s),
        None => cx.err(format_args!("shape {} holds more than {} values", shown(v), MAX_ELEMENTS)),
    }
}

fn read_data(cx: &Ctx, v: Field<Data>, shape: Shape) -> Result<Vec<f64>> {
    let data = match v {
        Field::Is(data) => data,
        Field::Absent => return cx.err("data must be an array of numbers, got undefined"),
        Field::Not(v) => return cx.err(format_args!("data must be an array of numbers, got {}", show(Some(&v)))),
    };
    if data.len != shape.size() {
        return cx.err(format_args!("data length {} does not match shape {}", data.len, shape));
    }
    if let Some((k, item)) = data.first_bad {
        return cx.err(format_args!("data[{k}] must be a number, got {}", show(Some(&item))));
    }
    Ok(data.values)
}

/// `[[start], [size]]` of a slice of an operand shaped `shape`, checked as the
/// JavaScript `slice` checks them, in the same order.
fn read_slice(cx: &Ctx, args: Option<&[Field<Arg>]>, shape: Shape) -> Result<Op> {
    // As from JavaScript: an entry that is not an integer goes in as NaN,
    // arguments that are not two arrays as no entries at all.
    let entries = |v: &Field<Arg>| -> Vec<f64> {
        match v {
            Field::Is(Arg::Numbers(Numbers(xs))) => xs.iter().map(|&x| whole(x).unwrap_or(f64::NAN)).collect(),
            Field::Not(v) => v.as_array().map_or_else(Vec::new, |a| a.iter().map(|x| integer(Some(x)).unwrap_or(f64::NAN)).collect()),
            _ => Vec::new(),
        }
    };
    let (start, size) = match args {
        Some([start, size]) => (entries(start), entries(size)),
        _ => (Vec::new(), Vec::new()),
    };
    slice_op(shape, &start, &size).or_else(|e| cx.err(e))
}

/// The op of an op node, with its static arguments, given its parents' shapes.
fn read_op(cx: &Ctx, name: &str, args: Option<&[Field<Arg>]>, list: bool, shapes: &[Shape]) -> Result<Op> {
    if list && name != "concat" {
        return cx.err("list: true is for concat only");
    }
    let no_args = |op: Op| match args {
        None => Ok(op),
        Some(_) => cx.err(format_args!("{name} takes no static arguments")),
    };
    fn one_arg<'a>(cx: &Ctx, name: &str, a: Option<&'a [Field<Arg>]>) -> Result<Option<&'a Field<Arg>>> {
        match a {
            None => Ok(None),
            Some([x]) => Ok(Some(x)),
            Some(_) => cx.err(format_args!("{name} takes one static argument")),
        }
    }
    let value = |a: Option<&Field<Arg>>| a.and_then(Field::value);
    match name {
        "pow" => match one_arg(cx, name, args)? {
            Some(Field::Is(Arg::Number(k))) if k.is_finite() => Ok(Op::Pow(Exponent::new(*k))),
            k => cx.err(format_args!("pow: exponent must be a finite number; got {}", js_string(value(k).as_ref()))),
        },
        "reshape" => {
            let bad = || cx.err("reshape: shape must be up to two positive integers");
            let Some(Field::Is(Arg::Numbers(Numbers(dims)))) = one_arg(cx, name, args)? else { return bad() };
            if dims.len() > 2 {
                return bad();
            }
            let mut d = [0usize; 2];
            let mut f = [0f64; 2];
            for (slot, &dim) in f.iter_mut().zip(dims) {
                match whole(dim) {
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
            Some(Field::Is(Arg::Options(o))) => match &o.lower {
                Field::Absent => Ok(Op::TriangularSolve { lower: true }),
                Field::Is(lower) => Ok(Op::TriangularSolve { lower: *lower }),
                other => cx.err(format_args!("triangularSolve: lower must be true or false, got {}", shown(other))),
            },
            other => cx.err(format_args!("triangularSolve: options must be an object like {{lower: true}}, got {}", show(value(other).as_ref()))),
        },
        "concat" => {
            let matrices = shapes.first().is_some_and(|s| s.rank() == 2);
            let axis = match one_arg(cx, name, args)? {
                None => &Field::Absent,
                Some(Field::Is(Arg::Options(o))) => &o.axis,
                other => return cx.err(format_args!("concat: options must be an object like {{axis: 0}}, got {}", show(value(other).as_ref()))),
            };
            match axis {
                // Scalars and vectors flatten; the axis is not read.
                _ if !matrices => Ok(Op::Concat { axis: 0 }),
                Field::Absent => Ok(Op::Concat { axis: 0 }),
                Field::Not(v) if v.is_null() => Ok(Op::Concat { axis: 0 }),
                Field::Is(a) if *a == 0.0 || *a == 1.0 => Ok(Op::Concat { axis: *a as u8 }),
                _ => cx.err("concat: axis must be 0 or 1"),
            }
        }
        _ => match Op::simple(name) {
            Some(op) => no_args(op),
            None => unknown_op(name),
        },
    }
}
