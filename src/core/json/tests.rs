//! The reader's behaviour and messages, pinned.

use super::*;
use crate::core::shape::{Shape, MAX_ELEMENTS};

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
    let param = |shape: &str| err(&plan(&format!(r#"{{"kind":"param","name":"a","shape":{shape}}}"#), 0));
    for (shape, shown) in [("[1e300]", "[1e+300]"), ("[65536,65536]", "[65536, 65536]"), ("[1e20,1]", "[100000000000000000000, 1]")] {
        assert_eq!(param(shape), format!("compileFromJSON: node 0 (param): shape {shown} holds more than {MAX_ELEMENTS} values"));
    }
    // A dimension beside a 0 is taken as `compile` takes it, up to a usize.
    assert_eq!(param("[0,1e20]"), "compileFromJSON: node 0 (param): shape [0, 100000000000000000000] is too large");
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

