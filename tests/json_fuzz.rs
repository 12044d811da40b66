//! Property-based fuzz of `plan_from_json`: a plan is untrusted input, so
//! whatever the text, reading it must return `Ok` or `Err`, never panic, and
//! finish quickly. Valid plans are mutated (kinds, indices, shapes, data,
//! static arguments, names, roots, versions), their text is damaged byte by
//! byte, and token soups and deep nests are thrown in. Plans that do build
//! are also fed and replayed, forward and backward, with an oracle: the same
//! text rebuilt with each optimizer pass switched off must replay to the same
//! bits (gradients within 1e-12 relative where merging identical nodes
//! reorders sums), and every replay must finish within a budget linear in
//! the plan's text plus the values it holds.
//!
//! A fixed-seed generator makes every run see the same cases; set
//! `JSON_FUZZ_SEED` to explore others and `JSON_FUZZ_CASES` to run more.

#![allow(clippy::explicit_auto_deref)] // `*r.pick(..)` also picks the type `pick` returns

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tangent_grad::core::json::{plan_from_json, plan_from_json_with};
use tangent_grad::core::plan::{Passes, Plan};
use tangent_grad::core::shape::Shape;

// ---------------------------------------------------------------- a fixed-seed generator

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

// ---------------------------------------------------------------- JSON values to mutate

#[derive(Clone, Debug)]
enum Js {
    Null,
    Bool(bool),
    Num(f64),
    /// Number text written as is (`1e400`, `-0`, `00`, `1.`), valid or not.
    Raw(String),
    Str(String),
    Arr(Vec<Js>),
    Obj(Vec<(String, Js)>),
}

fn num(x: f64) -> Js {
    Js::Num(x)
}
fn s(x: &str) -> Js {
    Js::Str(x.into())
}
fn arr(xs: &[f64]) -> Js {
    Js::Arr(xs.iter().map(|&x| Js::Num(x)).collect())
}
fn obj(fields: Vec<(&str, Js)>) -> Js {
    Js::Obj(fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

fn write(v: &Js, out: &mut String) {
    match v {
        Js::Null => out.push_str("null"),
        Js::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Js::Num(x) if !x.is_finite() => out.push_str("null"),
        Js::Num(x) if x.fract() == 0.0 && x.abs() < 1e21 => out.push_str(&format!("{x}")),
        Js::Num(x) => out.push_str(&format!("{x:e}")),
        Js::Raw(t) => out.push_str(t),
        Js::Str(t) => {
            out.push('"');
            for c in t.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                    c => out.push(c),
                }
            }
            out.push('"');
        }
        Js::Arr(xs) => {
            out.push('[');
            for (i, x) in xs.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(x, out);
            }
            out.push(']');
        }
        Js::Obj(fields) => {
            out.push('{');
            for (i, (k, x)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(&Js::Str(k.clone()), out);
                out.push(':');
                write(x, out);
            }
            out.push('}');
        }
    }
}

fn text(v: &Js) -> String {
    let mut out = String::new();
    write(v, &mut out);
    out
}

// ---------------------------------------------------------------- valid plans to start from

fn param(name: &str, shape: &[f64]) -> Js {
    obj(vec![("kind", s("param")), ("name", s(name)), ("shape", arr(shape))])
}
fn input(name: &str, shape: &[f64]) -> Js {
    obj(vec![("kind", s("input")), ("name", s(name)), ("shape", arr(shape))])
}
fn konst(shape: &[f64], data: &[f64]) -> Js {
    obj(vec![("kind", s("const")), ("shape", arr(shape)), ("data", arr(data))])
}
fn op(name: &str, parents: &[f64]) -> Js {
    obj(vec![("kind", s("op")), ("op", s(name)), ("parents", arr(parents))])
}
fn op_args(name: &str, parents: &[f64], args: Js) -> Js {
    obj(vec![("kind", s("op")), ("op", s(name)), ("parents", arr(parents)), ("args", args)])
}
fn plan(nodes: Vec<Js>) -> Js {
    let root = nodes.len() as f64 - 1.0;
    obj(vec![("version", num(2.0)), ("input", s("map")), ("nodes", Js::Arr(nodes)), ("root", num(root))])
}

fn bases() -> Vec<Js> {
    let mut out = Vec::new();
    // SPEC §8's worked example.
    out.push(plan(vec![
        param("w", &[]),
        param("b", &[2.0]),
        input("x", &[2.0]),
        input("y", &[2.0]),
        op("add", &[3.0, 1.0]),
        op("mul", &[0.0, 2.0]),
        op("sub", &[5.0, 4.0]),
        op("square", &[6.0]),
        op("sum", &[7.0]),
    ]));
    // Every unary op.
    for name in ["neg", "exp", "log", "sqrt", "square", "tanh", "sigmoid", "relu", "lgamma"] {
        out.push(plan(vec![param("a", &[3.0]), op(name, &[0.0]), op("sum", &[1.0])]));
    }
    // Binary ops, broadcasting a row vector and a scalar over a matrix.
    for name in ["add", "sub", "mul", "div", "maximum", "minimum"] {
        out.push(plan(vec![
            param("A", &[2.0, 3.0]),
            param("v", &[3.0]),
            konst(&[], &[0.5]),
            op(name, &[1.0, 0.0]),
            op(name, &[3.0, 2.0]),
            op("mean", &[4.0]),
        ]));
    }
    // Matrix ops.
    out.push(plan(vec![
        param("A", &[3.0, 3.0]),
        param("x", &[3.0]),
        op("matmul", &[0.0, 1.0]),
        op("dot", &[2.0, 1.0]),
        op("transpose", &[0.0]),
        op("matmul", &[4.0, 0.0]),
        op("diagPart", &[5.0]),
        op("addDiag", &[5.0, 6.0]),
        op("sum", &[7.0]),
        op("add", &[8.0, 3.0]),
    ]));
    // Static arguments.
    out.push(plan(vec![
        param("a", &[6.0]),
        op_args("pow", &[0.0], arr(&[3.0])),
        op_args("reshape", &[1.0], Js::Arr(vec![arr(&[2.0, 3.0])])),
        op_args("slice", &[2.0], Js::Arr(vec![arr(&[0.0, 1.0]), arr(&[2.0, 2.0])])),
        op_args("slice", &[0.0], Js::Arr(vec![arr(&[1.0]), arr(&[4.0])])),
        obj(vec![("kind", s("op")), ("op", s("concat")), ("parents", arr(&[4.0, 0.0])), ("list", Js::Bool(true))]),
        obj(vec![
            ("kind", s("op")),
            ("op", s("concat")),
            ("parents", arr(&[3.0, 3.0])),
            ("list", Js::Bool(true)),
            ("args", Js::Arr(vec![obj(vec![("axis", num(1.0))])])),
        ]),
        op("sum", &[6.0]),
        op("sum", &[5.0]),
        op("add", &[7.0, 8.0]),
        op_args("reshape", &[9.0], Js::Arr(vec![arr(&[1.0, 1.0])])),
        op_args("reshape", &[10.0], Js::Arr(vec![arr(&[])])),
    ]));
    // Linear algebra on raw parameters.
    out.push(plan(vec![
        param("A", &[2.0, 2.0]),
        param("B", &[2.0, 2.0]),
        op("cholesky", &[0.0]),
        op_args("triangularSolve", &[2.0, 1.0], Js::Arr(vec![obj(vec![("lower", Js::Bool(true))])])),
        op("transpose", &[2.0]),
        op_args("triangularSolve", &[4.0, 3.0], Js::Arr(vec![obj(vec![("lower", Js::Bool(false))])])),
        op("solveGeneral", &[0.0, 5.0]),
        op("sum", &[6.0]),
    ]));
    // Constants folded at build time (a PD matrix, its factor and inverse).
    out.push(plan(vec![
        param("x", &[2.0]),
        konst(&[2.0, 2.0], &[4.0, 1.0, 1.0, 3.0]),
        konst(&[2.0, 2.0], &[1.0, 0.0, 0.0, 1.0]),
        op("cholesky", &[1.0]),
        op("solveGeneral", &[1.0, 2.0]),
        op("matmul", &[4.0, 0.0]),
        op("matmul", &[3.0, 5.0]),
        op("diagPart", &[3.0]),
        op("log", &[7.0]),
        op("sum", &[8.0]),
        op("dot", &[6.0, 0.0]),
        op("add", &[9.0, 10.0]),
    ]));
    // A small GP marginal likelihood, written as toJSON writes it.
    out.push(plan(vec![
        param("l", &[]),
        param("v", &[]),
        input("D2", &[3.0, 3.0]),
        input("y", &[3.0]),
        konst(&[], &[2.0]),
        op("square", &[0.0]),
        op("mul", &[4.0, 5.0]),
        op("div", &[2.0, 6.0]),
        op("neg", &[7.0]),
        op("exp", &[8.0]),
        op("mul", &[1.0, 9.0]),
        konst(&[], &[0.05]),
        op("addDiag", &[10.0, 11.0]),
        op("cholesky", &[12.0]),
        op_args("triangularSolve", &[13.0, 3.0], Js::Arr(vec![obj(vec![("lower", Js::Bool(true))])])),
        op("transpose", &[13.0]),
        op_args("triangularSolve", &[15.0, 14.0], Js::Arr(vec![obj(vec![("lower", Js::Bool(false))])])),
        op("dot", &[3.0, 16.0]),
        konst(&[], &[-0.5]),
        op("mul", &[18.0, 17.0]),
        op("diagPart", &[13.0]),
        op("log", &[20.0]),
        op("sum", &[21.0]),
        op("mul", &[4.0, 22.0]),
        konst(&[], &[0.5]),
        op("mul", &[24.0, 23.0]),
        op("sub", &[19.0, 25.0]),
    ]));
    // A single-parameter plan, and a version 1 plan without `input`.
    out.push(obj(vec![
        ("version", num(2.0)),
        ("input", s("single")),
        ("nodes", Js::Arr(vec![obj(vec![("kind", s("param")), ("shape", arr(&[2.0, 2.0]))]), op("transpose", &[0.0]), op("sum", &[1.0])])),
        ("root", num(2.0)),
    ]));
    out.push(obj(vec![
        ("version", num(1.0)),
        ("nodes", Js::Arr(vec![param("w", &[3.0]), konst(&[3.0], &[1.0, 2.0, 3.0]), op("dot", &[0.0, 1.0])])),
        ("root", num(2.0)),
    ]));
    // Empty extents.
    out.push(plan(vec![param("e", &[0.0]), op("exp", &[0.0]), op("sum", &[1.0]), op("mean", &[1.0]), op("add", &[2.0, 3.0])]));
    out.push(plan(vec![param("E", &[0.0, 0.0]), op("cholesky", &[0.0]), op("solveGeneral", &[0.0, 1.0]), op("sum", &[2.0])]));
    // Identical nodes, which the production build merges: a Cholesky
    // factor and an exp each computed twice.
    out.push(plan(vec![
        param("A", &[3.0, 3.0]),
        param("y", &[3.0]),
        op("transpose", &[0.0]),
        op("matmul", &[0.0, 2.0]),
        konst(&[], &[3.0]),
        op("addDiag", &[3.0, 4.0]),
        op("cholesky", &[5.0]),
        op("cholesky", &[5.0]),
        op_args("triangularSolve", &[6.0, 1.0], Js::Arr(vec![obj(vec![("lower", Js::Bool(true))])])),
        op("diagPart", &[7.0]),
        op("log", &[9.0]),
        op("sum", &[10.0]),
        op("dot", &[8.0, 8.0]),
        op("exp", &[1.0]),
        op("exp", &[1.0]),
        op("mul", &[13.0, 14.0]),
        op("sum", &[15.0]),
        op("add", &[11.0, 12.0]),
        op("add", &[17.0, 16.0]),
    ]));
    // Huge dimensions of empty values, through every op that takes a matrix
    // with a zero side: no kernel may walk the huge side.
    const HUGE: f64 = 268435456.0;
    let list = |parents: &[f64], axis: f64| {
        obj(vec![
            ("kind", s("op")),
            ("op", s("concat")),
            ("parents", arr(parents)),
            ("list", Js::Bool(true)),
            ("args", Js::Arr(vec![obj(vec![("axis", num(axis))])])),
        ])
    };
    out.push(plan(vec![
        param("T", &[HUGE, 0.0]),
        param("W", &[0.0, HUGE]),
        param("v", &[0.0]),
        param("x", &[]),
        list(&[1.0; 4], 1.0),
        op("transpose", &[4.0]),
        op("matmul", &[1.0, 0.0]),
        op("add", &[0.0, 2.0]),
        op("mul", &[3.0, 0.0]),
        list(&[7.0, 5.0, 8.0], 0.0),
        op("exp", &[9.0]),
        op("addDiag", &[6.0, 3.0]),
        op("diagPart", &[11.0]),
        op("sum", &[10.0]),
        op("sum", &[12.0]),
        op("add", &[13.0, 14.0]),
        op("mul", &[15.0, 3.0]),
        op("sum", &[5.0]),
        op("add", &[16.0, 17.0]),
    ]));
    // The issue's plan: 64 copies of a [2^28, 0] parameter side by side.
    out.push(plan(vec![param("z", &[HUGE, 0.0]), list(&[0.0; 64], 1.0), op("sum", &[1.0])]));
    // Many parts: vectors flattened, and columns side by side.
    {
        let mut nodes: Vec<Js> = (0..200).map(|i| param(&format!("p{i}"), &[2.0])).collect();
        nodes.extend((0..100).map(|i| param(&format!("c{i}"), &[2.0, 1.0])));
        let vectors: Vec<f64> = (0..200).map(|i| i as f64).collect();
        let columns: Vec<f64> = (200..300).map(|i| i as f64).collect();
        nodes.push(list(&vectors, 0.0)); // 300
        nodes.push(list(&columns, 1.0)); // 301: [2, 100]
        nodes.push(op_args("slice", &[300.0], Js::Arr(vec![arr(&[100.0]), arr(&[100.0])]))); // 302
        nodes.push(op("matmul", &[301.0, 302.0])); // 303
        nodes.push(op("dot", &[300.0, 300.0])); // 304
        nodes.push(op("sum", &[303.0])); // 305
        nodes.push(op("add", &[304.0, 305.0])); // 306
        out.push(plan(nodes));
    }
    out
}

// ---------------------------------------------------------------- hostile values

const OPS: &[&str] = &[
    "add", "sub", "mul", "div", "maximum", "minimum", "neg", "exp", "log", "sqrt", "square", "tanh", "sigmoid", "relu",
    "lgamma", "pow", "sum", "mean", "matmul", "dot", "transpose", "diagPart", "addDiag", "reshape", "slice", "concat",
    "cholesky", "triangularSolve", "solveGeneral", "trace", "logdetPSD", "solvePSD", "inv", "", "Add", "__proto__",
    "constructor", "param",
];

fn hostile_number(r: &mut Rng, n: usize) -> Js {
    let nf = n as f64;
    match r.below(24) {
        0 => num(-1.0),
        1 => num(0.5),
        2 => num(1e300),
        3 => num(-1e300),
        4 => num(nf),
        5 => num(nf + 7.0),
        6 => num(9007199254740993.0),
        7 => num(18446744073709551616.0),
        8 => num(4294967295.0),
        9 => num(4294967296.0),
        10 => num(2147483648.0),
        11 => num(65536.0),
        12 => num(46341.0),
        13 => Js::Raw("1e400".into()),
        14 => Js::Raw("-0".into()),
        15 => Js::Raw("-1e-400".into()),
        16 => Js::Raw("1.0".into()),
        17 => Js::Raw("01".into()),
        18 => Js::Raw("1.".into()),
        19 => Js::Raw("-".into()),
        20 => Js::Raw("1e".into()),
        21 => Js::Raw("123456789012345678901234567890".into()),
        22 => num(r.below(n + 2) as f64),
        _ => num((r.unit() - 0.5) * 10.0),
    }
}

fn hostile(r: &mut Rng, n: usize, depth: usize) -> Js {
    match r.below(if depth > 3 { 6 } else { 12 }) {
        0 => Js::Null,
        1 => Js::Bool(r.chance(0.5)),
        2 | 3 => hostile_number(r, n),
        4 => s(*r.pick(&["", "NaN", "Infinity", "-Infinity", "-0", "2", "param", "op", "é\u{1F600}", "\u{0}", "x\"y\\"])),
        5 => s(*r.pick(OPS)),
        6 | 7 => {
            let k = r.below(4);
            Js::Arr((0..k).map(|_| hostile(r, n, depth + 1)).collect())
        }
        8 => {
            let k = r.below(3);
            let keys = ["lower", "axis", "kind", "shape", "", "__proto__"];
            Js::Obj((0..k).map(|_| (r.pick(&keys).to_string(), hostile(r, n, depth + 1))).collect())
        }
        9 => hostile_shape(r),
        10 => {
            // Deep nesting around a value.
            let d = *r.pick(&[10usize, 127, 128, 129, 500, 5000]);
            let mut v = hostile_number(r, n);
            for _ in 0..d {
                v = Js::Arr(vec![v]);
            }
            v
        }
        _ => arr(&[r.below(n + 1) as f64, r.below(n + 1) as f64]),
    }
}

fn hostile_shape(r: &mut Rng) -> Js {
    match r.below(24) {
        18 => arr(&[268435456.0]),
        19 => arr(&[268435457.0]),
        20 => arr(&[16384.0, 16384.0]),
        21 => arr(&[16385.0, 16384.0]),
        22 => arr(&[268435456.0, 0.0]),
        23 => arr(&[0.0, 268435456.0]),
        0 => arr(&[-1.0]),
        1 => arr(&[1.5]),
        2 => arr(&[2147483648.0]),
        3 => arr(&[2147483649.0]),
        4 => arr(&[65536.0, 65536.0]),
        5 => arr(&[46340.0, 46340.0]),
        6 => arr(&[1.0, 2.0, 3.0]),
        7 => arr(&[]),
        8 => arr(&[0.0]),
        9 => arr(&[0.0, 0.0]),
        10 => s("2"),
        11 => Js::Arr(vec![arr(&[2.0])]),
        12 => Js::Arr(vec![Js::Raw("1e400".into())]),
        13 => arr(&[1e300, 1e300]),
        14 => arr(&[0.0, 1e300]),
        15 => arr(&[(r.below(4) + 1) as f64, (r.below(4) + 1) as f64]),
        16 => arr(&[(r.below(6)) as f64]),
        _ => Js::Null,
    }
}

fn hostile_args(r: &mut Rng, n: usize) -> Js {
    match r.below(16) {
        0 => Js::Arr(vec![]),
        1 => Js::Arr(vec![Js::Arr(vec![])]),
        2 => Js::Arr(vec![obj(vec![])]),
        3 => Js::Arr(vec![obj(vec![("lower", s("yes"))])]),
        4 => Js::Arr(vec![s("NaN")]),
        5 => Js::Arr(vec![arr(&[-1.0]), arr(&[2.0])]),
        6 => Js::Arr(vec![arr(&[1e300]), arr(&[1.0])]),
        7 => Js::Arr(vec![arr(&[0.0, 0.0]), arr(&[1.0, 1e300])]),
        8 => Js::Arr(vec![obj(vec![("axis", num(2.0))])]),
        9 => Js::Arr(vec![obj(vec![("axis", num(1.0))])]),
        10 => Js::Arr(vec![arr(&[2147483648.0, 2.0])]),
        11 => Js::Arr(vec![arr(&[46340.0, 46340.0])]),
        12 => Js::Arr(vec![num(2.0), num(3.0)]),
        13 => obj(vec![("lower", Js::Bool(false))]),
        14 => Js::Arr(vec![arr(&[1.0]), arr(&[1.0])]),
        _ => hostile(r, n, 1),
    }
}

// ---------------------------------------------------------------- mutations

fn nodes_mut(p: &mut Js) -> Option<&mut Vec<Js>> {
    let Js::Obj(fields) = p else { return None };
    fields.iter_mut().find(|(k, _)| k == "nodes").and_then(|(_, v)| match v {
        Js::Arr(xs) => Some(xs),
        _ => None,
    })
}

fn set_field(v: &mut Js, key: &str, val: Js) {
    if let Js::Obj(fields) = v {
        match fields.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = val,
            None => fields.push((key.to_string(), val)),
        }
    }
}

fn field_mut<'a>(v: &'a mut Js, key: &str) -> Option<&'a mut Js> {
    match v {
        Js::Obj(fields) => fields.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
        _ => None,
    }
}

fn mutate(r: &mut Rng, p: &mut Js) {
    let n = nodes_mut(p).map_or(0, |xs| xs.len());
    match r.below(16) {
        // The top level.
        0 => {
            let key = *r.pick(&["version", "root", "input", "nodes"]);
            let v = match key {
                "version" => {
                    if r.chance(0.5) {
                        num(*r.pick(&[0.0, 1.0, 2.0, 3.0, 2.5]))
                    } else {
                        hostile(r, n, 0)
                    }
                }
                "root" => hostile_number(r, n),
                "input" => {
                    if r.chance(0.5) {
                        s(*r.pick(&["map", "single", "Map", ""]))
                    } else {
                        hostile(r, n, 0)
                    }
                }
                _ => hostile(r, n, 0),
            };
            set_field(p, key, v);
        }
        1 => {
            if let Js::Obj(fields) = p {
                if !fields.is_empty() {
                    let k = r.below(fields.len());
                    fields.remove(k);
                }
            }
        }
        _ => {
            let Some(nodes) = nodes_mut(p) else { return };
            if nodes.is_empty() {
                nodes.push(hostile(r, n, 0));
                return;
            }
            let i = r.below(nodes.len());
            match r.below(14) {
                0 => {
                    let kind = if r.chance(0.7) {
                        s(*r.pick(&["param", "input", "const", "op", "lambda", "Param"]))
                    } else {
                        hostile(r, n, 1)
                    };
                    set_field(&mut nodes[i], "kind", kind);
                }
                1 => {
                    if let Js::Obj(fields) = &mut nodes[i] {
                        if !fields.is_empty() {
                            let k = r.below(fields.len());
                            fields.remove(k);
                        }
                    }
                }
                2 | 3 => {
                    // A parent index gone wrong: out of range, negative, a
                    // forward reference or the node itself (a cycle), a
                    // fraction, a string, huge.
                    let bad = match r.below(8) {
                        0 => num(i as f64),
                        1 => num((i + 1 + r.below(3)) as f64),
                        2 => num(-1.0),
                        3 => num(n as f64),
                        _ => hostile_number(r, n),
                    };
                    match field_mut(&mut nodes[i], "parents") {
                        Some(Js::Arr(ps)) if !ps.is_empty() => {
                            let k = r.below(ps.len());
                            ps[k] = bad;
                        }
                        _ => set_field(&mut nodes[i], "parents", Js::Arr(vec![bad])),
                    }
                }
                4 => {
                    // Extra or missing parents, or a valid but different one.
                    let ps: Vec<Js> = (0..r.below(5)).map(|_| num(r.below(i.max(1)) as f64)).collect();
                    set_field(&mut nodes[i], "parents", Js::Arr(ps));
                }
                5 | 6 => {
                    let shape = hostile_shape(r);
                    set_field(&mut nodes[i], "shape", shape);
                }
                7 => {
                    // Data cut short, grown, or holding the wrong things.
                    let data = match field_mut(&mut nodes[i], "data") {
                        Some(Js::Arr(d)) => {
                            let mut d = d.clone();
                            match r.below(4) {
                                0 => {
                                    d.pop();
                                }
                                1 => d.push(num(1.0)),
                                2 if !d.is_empty() => {
                                    let k = r.below(d.len());
                                    d[k] = hostile(r, n, 2);
                                }
                                _ => d = vec![],
                            }
                            Js::Arr(d)
                        }
                        _ => hostile(r, n, 1),
                    };
                    set_field(&mut nodes[i], "data", data);
                }
                8 => {
                    let name = if r.chance(0.8) { s(*r.pick(OPS)) } else { hostile(r, n, 1) };
                    set_field(&mut nodes[i], "op", name);
                }
                9 | 10 => {
                    let args = hostile_args(r, n);
                    set_field(&mut nodes[i], "args", args);
                }
                11 => {
                    let key = *r.pick(&["name", "list", "kind", "op", "shape", "data", "parents", "args"]);
                    let v = hostile(r, n, 1);
                    set_field(&mut nodes[i], key, v);
                }
                12 => {
                    // Reorder, duplicate or drop whole nodes.
                    let j = r.below(nodes.len());
                    match r.below(3) {
                        0 => nodes.swap(i, j),
                        1 => {
                            let c = nodes[i].clone();
                            nodes.insert(j, c);
                        }
                        _ => {
                            nodes.remove(i);
                        }
                    }
                }
                _ => nodes[i] = hostile(r, n, 0),
            }
        }
    }
}

/// Damage the text itself: cut it, overwrite or insert bytes.
fn damage(r: &mut Rng, t: &str) -> String {
    let mut b = t.as_bytes().to_vec();
    let junk = b"{}[],:\"\\-+.eE0123456789 \ntruefalsenullxu";
    for _ in 0..1 + r.below(3) {
        if b.is_empty() {
            break;
        }
        let at = r.below(b.len());
        match r.below(4) {
            0 => b.truncate(at),
            1 => b[at] = *r.pick(junk),
            2 => b.insert(at, *r.pick(junk)),
            _ => {
                b.remove(at);
            }
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

/// Tokens thrown together, and pathological nests.
fn soup(r: &mut Rng) -> String {
    const TOKENS: &[&str] = &[
        "{", "}", "[", "]", ",", ":", "\"version\"", "2", "\"nodes\"", "\"root\"", "0", "\"kind\"", "\"param\"",
        "\"op\"", "\"add\"", "\"parents\"", "\"shape\"", "[]", "null", "true", "-1", "1e999", "\"\\u", "\"\\ud800\"",
        "\"\\ud83d\\ude00\"", " ", "\"", "\\",
    ];
    match r.below(6) {
        0 => {
            let d = *r.pick(&[127usize, 128, 129, 1000, 100_000]);
            format!(r#"{{"version":2,"nodes":{}{},"root":0}}"#, "[".repeat(d), "]".repeat(d))
        }
        1 => {
            let d = *r.pick(&[127usize, 128, 129, 1000, 100_000]);
            "{\"a\":".repeat(d)
        }
        2 => (0..r.below(64)).map(|_| (r.next() as u8 & 0x7f) as char).collect(),
        _ => {
            let mut out = String::new();
            out.push_str(r#"{"version":2,"nodes":["#);
            for _ in 0..r.below(40) {
                out.push_str(*r.pick(TOKENS));
            }
            out
        }
    }
}

// ---------------------------------------------------------------- running a case

static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// What a case did, for the tally.
enum Outcome {
    /// Built, replayed, and checked against this many variants, of which
    /// `rounded` merged nodes (gradients then compared to 1e-12); `load` is
    /// the largest share of its time budget a replay took.
    Built { variants: usize, rounded: usize, load: f64 },
    /// Refused, with the kind of error (the message without its node and values).
    Refused(String),
}

/// The kind of an error message: its text after the node label, up to the
/// first value, so that messages differing only in numbers count as one.
fn kind_of(msg: &str) -> String {
    let rest = match msg.find("): ") {
        Some(at) => &msg[at + 3..],
        None => msg.trim_start_matches("compileFromJSON: "),
    };
    let rest = rest.split(" got ").next().unwrap_or("");
    rest.split(|c: char| c.is_ascii_digit() || c == '"' || c == '[' || c == '(').next().unwrap_or("").trim().to_string()
}

/// The oracle's variants of the production build: each pass switched off
/// alone, and every vector and matrix adjoint in shared blocks, and every
/// vector or matrix value no sweep reads (production shares only large
/// ones, in large plans, which the fuzzed plans rarely hold). Only
/// merging may change a result, and then only a gradient, by the rounding
/// of sums taken in another order.
const VARIANTS: [Passes; 4] = [
    Passes { fold_constants: false, skip_constant_adjoints: true, merge_identical: true, share_adjoints_from: 2, share_values_past: 0 },
    Passes { fold_constants: true, skip_constant_adjoints: false, merge_identical: true, share_adjoints_from: 2, share_values_past: 0 },
    Passes { fold_constants: true, skip_constant_adjoints: true, merge_identical: false, share_adjoints_from: 2, share_values_past: 0 },
    Passes { fold_constants: true, skip_constant_adjoints: true, merge_identical: true, share_adjoints_from: usize::MAX, share_values_past: usize::MAX },
];

/// A replay may take a constant plus this long per byte of text and per
/// value held: tens of times what linear work takes, and far below what
/// walking a huge empty dimension, or work quadratic in the parts, takes.
/// (Products and factorizations are O(n³) on n² values; the small matrices
/// fuzzed here keep that within the constant.) A debug build is allowed its
/// slowdown.
const BUDGET_BASE: Duration = Duration::from_micros(50);
const BUDGET_PER_UNIT: Duration = Duration::from_nanos(200);
const DEBUG_SLOWDOWN: u32 = if cfg!(debug_assertions) { 30 } else { 1 };

fn budget(text: &str, held: usize) -> Duration {
    (BUDGET_BASE + BUDGET_PER_UNIT * (text.len() + held) as u32) * DEBUG_SLOWDOWN
}

/// What a replay computed: the root's value (or the error), and each
/// parameter's gradient when the root is a scalar.
struct Replay {
    value: Result<Vec<f64>, String>,
    grads: Vec<Vec<f64>>,
}

impl std::fmt::Display for Replay {
    /// The first few values of each result: a replay may hold millions.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let head = |v: &[f64]| format!("{:?}{}", &v[..v.len().min(6)], if v.len() > 6 { "…" } else { "" });
        match &self.value {
            Ok(v) => write!(f, "value {}", head(v))?,
            Err(e) => write!(f, "error {e}")?,
        }
        for g in self.grads.iter().take(6) {
            write!(f, ", gradient {}", head(g))?;
        }
        Ok(())
    }
}

/// Feed `args` and replay forward and backward: the root's value (or the
/// error), and how long the replay took.
fn replay(p: &mut Plan, args: &[Vec<f64>]) -> (Result<Vec<f64>, String>, Duration) {
    for (i, a) in args.iter().enumerate() {
        p.set(i, a).unwrap();
    }
    let t0 = Instant::now();
    let value = p.forward().map(<[f64]>::to_vec).map_err(|e| e.0);
    if value.is_ok() && p.root_shape() == Shape::Scalar {
        p.backward();
    }
    (value, t0.elapsed())
}

/// Replay within the budget of a plan read from `text`: what it computed,
/// and the share of the budget it took. The first replay, which touches
/// fresh memory, is not timed; then the fastest of up to ten counts, so that
/// moments the shared machine spends elsewhere are not taken for unbounded
/// work, which is over budget every time.
fn replay_within(p: &mut Plan, args: &[Vec<f64>], text: &str) -> (Replay, f64) {
    let budget = budget(text, p.held());
    let (value, _) = replay(p, args);
    let grads = if value.is_ok() && p.root_shape() == Shape::Scalar {
        (0..p.params().len())
            .map(|i| {
                let mut g = vec![f64::NAN; p.params()[i].shape.size()];
                p.gradient(i, &mut g).unwrap();
                g
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut took = Duration::MAX;
    for _ in 0..10 {
        took = took.min(replay(p, args).1);
        if took <= budget {
            break;
        }
    }
    assert!(took <= budget, "replay took {took:.2?}, over its budget of {budget:.2?} ({} values held)", p.held());
    (Replay { value, grads }, took.as_secs_f64() / budget.as_secs_f64())
}

fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// Equal to 1e-12 relative (absolute below 1), or the same bits.
fn close(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(&x, &y)| x.to_bits() == y.to_bits() || (x - y).abs() <= 1e-12 * x.abs().max(y.abs()).max(1.0))
}

/// Read the plan; if it builds, feed it values and replay it, within its
/// time budget and checked against the oracle. Returns how long the reading
/// took, which must be bounded whether or not the plan builds.
fn run_case(t: &str, r: &mut Rng) -> (Outcome, Duration) {
    let t0 = Instant::now();
    let read = plan_from_json(t);
    let took = t0.elapsed();
    let outcome = match read {
        Err(e) => {
            assert!(e.0.starts_with("compileFromJSON: "), "message without the prefix: {}", e.0);
            Outcome::Refused(kind_of(&e.0))
        }
        Ok(mut p) => {
            let args: Vec<Vec<f64>> = (0..p.slot_count())
                .map(|i| (0..p.slot_size(i)).map(|k| if k % 7 == 3 { 2.0 } else { r.unit() * 2.0 - 0.5 }).collect())
                .collect();
            let (expected, mut load) = replay_within(&mut p, &args, t);
            let nodes = p.len();
            drop(p);
            let (mut variants, mut rounded) = (0, 0);
            for passes in VARIANTS {
                let mut v = match plan_from_json_with(t, passes) {
                    Ok(v) => v,
                    // Without merging, duplicates count against the value budget too.
                    Err(e) if !passes.merge_identical && e.0.contains("the plan would hold more than") => continue,
                    Err(e) => panic!("{passes:?} refused a plan the production build reads: {}", e.0),
                };
                let (got, l) = replay_within(&mut v, &args, t);
                load = load.max(l);
                variants += 1;
                // Merging is the one pass that may round a gradient otherwise,
                // and only where it merged something.
                let exact = passes.merge_identical || v.len() == nodes;
                rounded += usize::from(!exact);
                let value_agrees = match (&expected.value, &got.value) {
                    (Ok(a), Ok(b)) => same_bits(a, b),
                    (a, b) => a == b,
                };
                let grads_agree = expected.grads.len() == got.grads.len()
                    && expected.grads.iter().zip(&got.grads).all(|(a, b)| if exact { same_bits(a, b) } else { close(a, b) });
                assert!(
                    value_agrees && grads_agree,
                    "{passes:?} changed the results:\n  production {expected}\n  variant    {got}"
                );
            }
            Outcome::Built { variants, rounded, load }
        }
    };
    (outcome, took)
}

#[test]
fn fuzz_plan_from_json() {
    let seed = std::env::var("JSON_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5EED_2024_u64);
    let cases: usize = std::env::var("JSON_FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let mut r = Rng(seed | 1);
    let bases = bases();
    let texts: Vec<String> = bases.iter().map(text).collect();
    // Every base plan is valid to begin with.
    for t in &texts {
        if let Err(e) = plan_from_json(t) {
            panic!("base plan refused: {e}\n{t}");
        }
    }

    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some(info.to_string());
    }));

    let started = Instant::now();
    let mut failures: Vec<(String, String)> = Vec::new();
    let (mut built, mut refused, mut slowest) = (0usize, 0usize, (Duration::ZERO, String::new()));
    let (mut variants, mut rounded, mut load, mut most_loaded) = (0usize, 0usize, 0f64, String::new());
    let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
    for case in 0..cases {
        let t = match case % 10 {
            // Damaged text of a base plan or of a mutated one.
            0 => {
                let base = r.pick(&texts).clone();
                damage(&mut r, &base)
            }
            1 => soup(&mut r),
            2 => {
                let mut p = r.pick(&bases).clone();
                mutate(&mut r, &mut p);
                damage(&mut r, &text(&p))
            }
            // Mutated plans, one to four mutations deep.
            _ => {
                let mut p = r.pick(&bases).clone();
                for _ in 0..1 + r.below(4) {
                    mutate(&mut r, &mut p);
                }
                text(&p)
            }
        };
        let result = catch_unwind(AssertUnwindSafe(|| run_case(&t, &mut r)));
        if let Ok((_, took)) = result {
            if took > slowest.0 {
                slowest = (took, t.chars().take(300).collect());
            }
        }
        match result.map(|(outcome, _)| outcome) {
            Ok(Outcome::Built { variants: v, rounded: m, load: l }) => {
                built += 1;
                variants += v;
                rounded += m;
                if l > load {
                    load = l;
                    most_loaded = t.chars().take(300).collect();
                }
            }
            Ok(Outcome::Refused(kind)) => {
                refused += 1;
                *kinds.entry(kind).or_default() += 1;
            }
            Err(_) => {
                let msg = LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_default();
                failures.push((msg, t.chars().take(600).collect()));
            }
        }
    }
    std::panic::set_hook(previous);
    let elapsed = started.elapsed();
    println!(
        "json fuzz: {cases} cases in {:.2?} ({built} built and replayed, {refused} refused, {} panicked); slowest read {:.2?}",
        elapsed,
        failures.len(),
        slowest.0
    );
    println!(
        "oracle: {variants} variant replays agreed ({rounded} of them with merged nodes, gradients to 1e-12); \
         the slowest replay took {:.1}% of its time budget",
        100.0 * load
    );
    println!("{} kinds of refusal", kinds.len());
    if std::env::var("JSON_FUZZ_VERBOSE").is_ok() {
        println!("the replay nearest its budget: {most_loaded}");
        println!("the slowest read: {}", slowest.1);
        for (kind, n) in &kinds {
            println!("{n:>8}  {kind}");
        }
    }
    for (msg, t) in failures.iter().take(10) {
        println!("PANIC: {msg}\n  on: {t}\n");
    }
    assert!(failures.is_empty(), "{} of {cases} cases panicked (first: {})", failures.len(), failures[0].0);
    assert!(
        slowest.0 < Duration::from_secs(30),
        "a case took {:.2?}, which is not bounded work: {}",
        slowest.0,
        slowest.1
    );
    assert!(built > cases / 50, "too few cases built ({built}): the mutations are too destructive to test much");
    assert!(kinds.len() >= 40, "only {} kinds of refusal: the mutations reach too few checks", kinds.len());
}

// ---------------------------------------------------------------- large plans: bounded, linear work

/// Time to read `t`, which must finish with the expected outcome.
fn timed(t: &str, ok: bool) -> Duration {
    let t0 = Instant::now();
    let r = catch_unwind(AssertUnwindSafe(|| plan_from_json(t).map(|_| ())));
    let took = t0.elapsed();
    match r {
        Err(_) => panic!("panicked on a large plan"),
        Ok(res) => assert_eq!(res.is_ok(), ok, "{:?}", res.err()),
    }
    took
}

fn add_chain(params: usize, ops: usize) -> String {
    let mut out = String::from(r#"{"version":2,"input":"map","nodes":["#);
    for i in 0..params {
        out.push_str(&format!(r#"{{"kind":"param","name":"p{i}","shape":[]}},"#));
    }
    // Sum every parameter, then keep adding the first.
    let mut last = 0usize;
    let mut n = params;
    for i in 1..params {
        out.push_str(&format!(r#"{{"kind":"op","op":"add","parents":[{last},{i}]}},"#));
        last = n;
        n += 1;
    }
    for _ in 0..ops {
        out.push_str(&format!(r#"{{"kind":"op","op":"add","parents":[{last},0]}},"#));
        last = n;
        n += 1;
    }
    out.pop();
    out.push_str(&format!(r#"],"root":{last}}}"#));
    out
}

#[test]
fn long_chains_read_in_linear_time() {
    let small = timed(&add_chain(1, 20_000), true);
    let large = timed(&add_chain(1, 200_000), true);
    println!("add chain: 20k nodes {small:.2?}, 200k nodes {large:.2?}");
    // A hang guard, not a speed test (that is for benchmarks): linear work
    // takes about a second, quadratic work many minutes.
    assert!(large < Duration::from_secs(30), "200k-node chain took {large:.2?}");
}

/// Read `t` on a thread of its own, giving up after `limit` (the thread is
/// left to finish or to die with the process): a quadratic reader fails fast.
fn within(t: String, limit: Duration) -> Option<Duration> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let t0 = Instant::now();
        let ok = catch_unwind(AssertUnwindSafe(|| plan_from_json(&t).is_ok())).unwrap_or(false);
        let _ = tx.send((ok, t0.elapsed()));
    });
    match rx.recv_timeout(limit) {
        Ok((ok, took)) => {
            assert!(ok, "the plan was refused or panicked");
            Some(took)
        }
        Err(_) => None,
    }
}

#[test]
fn many_parameters_read_in_linear_time() {
    // 200k parameters summed by a chain of adds: 400k nodes, 7 MB of JSON.
    // Linear work reads it in about a second here; work quadratic in the
    // number of parameters takes many minutes. The generous limit is a hang
    // guard on a shared machine, not a speed test.
    let small = timed(&add_chain(20_000, 0), true);
    let large = within(add_chain(200_000, 0), Duration::from_secs(30));
    println!("parameters summed: 20k {small:.2?}, 200k {large:.2?}");
    assert!(
        large.is_some(),
        "200k parameters took over 30 s, where 20k took {small:.2?}: the work grows faster than the plan"
    );
}

#[test]
fn huge_declarations_are_refused_before_allocating() {
    // Each of these would need gigabytes; each must be refused at once.
    let cases = [
        r#"{"version":2,"input":"map","nodes":[{"kind":"param","name":"a","shape":[2147483648]}],"root":0}"#.to_string(),
        r#"{"version":2,"input":"map","nodes":[{"kind":"param","name":"a","shape":[46340,46340]}],"root":0}"#.to_string(),
        r#"{"version":2,"input":"map","nodes":[{"kind":"param","name":"a","shape":[46340,1]},{"kind":"param","name":"b","shape":[1,46340]},{"kind":"op","op":"matmul","parents":[0,1]}],"root":2}"#.to_string(),
        r#"{"version":2,"input":"map","nodes":[{"kind":"const","shape":[2147483647],"data":[1]}],"root":0}"#.to_string(),
        // Many nodes each under the budget, over it together.
        {
            let mut out = String::from(r#"{"version":2,"input":"map","nodes":[{"kind":"param","name":"a","shape":[16777216]}"#);
            for i in 0..40 {
                out.push_str(&format!(r#",{{"kind":"op","op":"exp","parents":[{i}]}}"#));
            }
            out.push_str(r#"],"root":40}"#);
            out
        },
    ];
    for t in &cases {
        let took = timed(t, false);
        // Refused by the first pass, which allocates nothing per value: in
        // microseconds, where touching the gigabytes would take seconds.
        assert!(took < Duration::from_secs(2), "took {took:.2?}");
    }
}
