//! Issue 11 in the core: every kernel's work is bounded by its values plus
//! its parts (a zero-size dimension is never iterated over), shape
//! arithmetic never wraps, and plans read from JSON replay in time linear in
//! their text plus their declared values. Each case hung, wrapped or took
//! quadratic time before.
//!
//! The time limits are hang guards on a shared machine, generous by two
//! orders of magnitude over linear work, yet far below what the unbounded
//! work took.

use std::time::{Duration, Instant};
use tangent_grad::core::graph::Graph;
use tangent_grad::core::json::plan_from_json;
use tangent_grad::core::op::Op;
use tangent_grad::core::shape::Shape;
use tangent_grad::core::tape::Tape;

/// Run `f` on a thread of its own, giving up after `limit` (a runaway thread
/// is left to die with the process), so that unbounded work fails the test
/// rather than hanging it.
fn within<T: Send + 'static>(limit: Duration, what: &str, f: impl FnOnce() -> T + Send + 'static) -> (T, Duration) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let t0 = Instant::now();
        let out = f();
        let _ = tx.send((out, t0.elapsed()));
    });
    match rx.recv_timeout(limit) {
        Ok(done) => done,
        Err(_) => panic!("{what}: not done after {limit:.2?}, which is not work bounded by the data"),
    }
}

const HANG: Duration = Duration::from_secs(5);

fn zeros(g: &mut Graph, shape: Shape) -> u32 {
    g.leaf(Op::Leaf, shape, &[]).unwrap()
}

#[test]
fn concat_along_columns_of_no_columns_is_instant() {
    // G.concat([z, z], { axis: 1 }) with z = zeros([2 ** 62, 0]): the row
    // loop ran 2^62 times.
    let ((), took) = within(HANG, "concat of two [2^62, 0] on axis 1", || {
        let mut t = Tape::default();
        let z = zeros(&mut t.graph, Shape::Matrix(1 << 62, 0));
        let c = t.graph.op(Op::Concat { axis: 1 }, &[z, z], true).unwrap();
        assert_eq!(t.graph.node(c).unwrap().shape, Shape::Matrix(1 << 62, 0));
        let s = t.graph.op(Op::Sum, &[c], true).unwrap();
        assert_eq!(t.graph.value(s).unwrap(), [0.0]);
        t.backward(s, None).unwrap();
        assert_eq!(t.adjoint(z), Some(&[][..]));
    });
    println!("concat [2^62, 0] ×2 on axis 1, forward and backward: {took:.2?}");
}

#[test]
fn no_kernel_walks_a_dimension_of_an_empty_value() {
    // Every op that takes a [huge, 0] or [0, huge] operand, forward and
    // backward: transpose looped over 2^40 rows of nothing.
    let ((), took) = within(HANG, "ops on [2^40, 0] and [0, 2^40]", || {
        let big = 1usize << 40;
        let mut t = Tape::default();
        let g = &mut t.graph;
        let tall = zeros(g, Shape::Matrix(big, 0));
        let wide = zeros(g, Shape::Matrix(0, big));
        let empty = zeros(g, Shape::Vector(0));
        let x = zeros(g, Shape::Scalar);
        let mut terms = Vec::new();
        let mut op = |g: &mut Graph, op: Op, parents: &[u32], shape: Shape| {
            let id = g.op(op, parents, true).unwrap_or_else(|e| panic!("{}: {e}", op.name()));
            assert_eq!(g.node(id).unwrap().shape, shape, "{}", op.name());
            terms.push(g.op(Op::Sum, &[id], true).unwrap());
            id
        };
        let tt = op(g, Op::Transpose, &[tall], Shape::Matrix(0, big));
        op(g, Op::Transpose, &[wide], Shape::Matrix(big, 0));
        op(g, Op::Matmul, &[wide, tall], Shape::Matrix(0, 0));
        op(g, Op::Matmul, &[tt, tall], Shape::Matrix(0, 0));
        op(g, Op::Add, &[tall, x], Shape::Matrix(big, 0));
        op(g, Op::Mul, &[tall, empty], Shape::Matrix(big, 0));
        op(g, Op::Maximum, &[empty, tall], Shape::Matrix(big, 0));
        op(g, Op::Exp, &[tall], Shape::Matrix(big, 0));
        op(g, Op::Mean, &[wide], Shape::Scalar);
        op(g, Op::Concat { axis: 0 }, &[tall, tall], Shape::Matrix(2 * big, 0));
        op(g, Op::Concat { axis: 1 }, &[wide, wide, wide], Shape::Matrix(0, 3 * big));
        let mut root = x;
        for term in terms {
            root = g.op(Op::Add, &[root, term], true).unwrap();
        }
        t.backward(root, None).unwrap();
        assert_eq!(t.adjoint(tall), Some(&[][..]));
        assert_eq!(t.adjoint(x), Some(&[1.0][..]));
    });
    println!("ops on [2^40, 0] and [0, 2^40], forward and backward: {took:.2?}");
}

#[test]
fn shape_arithmetic_that_overflows_is_an_error() {
    let big = 1usize << 62;
    let mut g = Graph::default();
    // Four [0 × 2^62] parts side by side: 2^64 columns wrapped to [0, 0].
    let wide = zeros(&mut g, Shape::Matrix(0, big));
    let e = g.op(Op::Concat { axis: 1 }, &[wide; 4], true).unwrap_err();
    assert_eq!(e.0, "concat: result is too large");
    let tall = zeros(&mut g, Shape::Matrix(big, 0));
    let e = g.op(Op::Concat { axis: 0 }, &[tall; 4], true).unwrap_err();
    assert_eq!(e.0, "concat: result is too large");
    // Three fit: [0, 3 × 2^62] does not overflow and holds nothing.
    let three = g.op(Op::Concat { axis: 1 }, &[wide; 3], true).unwrap();
    assert_eq!(g.node(three).unwrap().shape, Shape::Matrix(0, 3 * big));
    // A product of 2^80 elements is counted exactly, not saturated.
    let t = zeros(&mut g, Shape::Matrix(1 << 40, 0));
    let w = zeros(&mut g, Shape::Matrix(0, 1 << 40));
    let e = g.op(Op::Matmul, &[t, w], true).unwrap_err();
    assert_eq!(e.0, "matmul: result of 1208925819614629174706176 elements is too large");
    // Reshape to [2^40, 2^40]: a count mismatch, whatever the product.
    let v = zeros(&mut g, Shape::Vector(0));
    let e = g.op(Op::Reshape(Shape::Matrix(1 << 40, 1 << 40)), &[v], true).unwrap_err();
    assert_eq!(e.0, "reshape: cannot view 0 elements as [1099511627776×1099511627776]");
    // Two shapes whose products both overflow are not the same size.
    assert_eq!(Shape::Matrix(1 << 40, 1 << 40).checked_size(), None);
    assert_eq!(Shape::from_dims(&[1 << 40, 1 << 40]), None);
    assert_eq!(Shape::from_dims(&[1 << 62, 0]), Some(Shape::Matrix(1 << 62, 0)));
}

/// A tape holding `parts` scalars concatenated and summed; the time of its
/// backward sweep.
fn concat_backward(parts: usize) -> Duration {
    let mut t = Tape::default();
    let leaves: Vec<u32> = (0..parts).map(|i| t.graph.leaf(Op::Leaf, Shape::Scalar, &[i as f64]).unwrap()).collect();
    let c = t.graph.op(Op::Concat { axis: 0 }, &leaves, true).unwrap();
    let s = t.graph.op(Op::Sum, &[c], true).unwrap();
    let t0 = Instant::now();
    t.backward(s, None).unwrap();
    let took = t0.elapsed();
    assert!(leaves.iter().all(|&l| t.adjoint(l) == Some(&[1.0][..])));
    took
}

#[test]
fn concat_backward_is_linear_in_its_parts() {
    // One adjoint call per part, each walking every part: 40k parts took
    // 943 ms, 160k parts many seconds. Linear work takes a few milliseconds.
    let ((small, large), _) = within(Duration::from_secs(20), "concat backward of 160k parts", || {
        (concat_backward(40_000), concat_backward(160_000))
    });
    println!("concat backward: 40k parts {small:.2?}, 160k parts {large:.2?}");
    assert!(small < Duration::from_millis(250), "40k parts took {small:.2?}");
    assert!(large < Duration::from_secs(1), "160k parts took {large:.2?}");
}

/// A plan concatenating `copies` of one parameter shaped `shape` on `axis`,
/// summed.
fn concat_plan(shape: [usize; 2], copies: usize, axis: u8) -> String {
    let parents = vec!["0"; copies].join(",");
    format!(
        r#"{{"version":2,"input":"map","nodes":[{{"kind":"param","name":"z","shape":[{},{}]}},{{"kind":"op","op":"concat","parents":[{parents}],"list":true,"args":[{{"axis":{axis}}}]}},{{"kind":"op","op":"sum","parents":[1]}}],"root":2}}"#,
        shape[0], shape[1]
    )
}

/// Read `text`, then replay it (forward and backward) with every parameter
/// at zero; the time of one replay.
fn replay_time(text: String, limit: Duration) -> Duration {
    let (took, _) = within(limit, "plan replay", move || {
        let mut plan = plan_from_json(&text).unwrap();
        for i in 0..plan.slot_count() {
            plan.set(i, &vec![0.0; plan.slot_size(i)]).unwrap();
        }
        let t0 = Instant::now();
        assert_eq!(plan.forward().unwrap(), [0.0]);
        plan.backward();
        t0.elapsed()
    });
    took
}

#[test]
fn a_plan_of_empty_rows_replays_at_once() {
    // 335 bytes: 64 copies of a [268435456, 0] parameter side by side took
    // 36.6 s a replay.
    let text = concat_plan([268_435_456, 0], 64, 1);
    let took = replay_time(text, HANG);
    println!("64 × [268435456, 0] on axis 1: replay {took:.2?}");
    assert!(took < Duration::from_millis(100), "replay took {took:.2?}");
}

#[test]
fn a_plan_of_many_parts_replays_in_linear_time() {
    // 160 000 parameters concatenated took 14.3 s a replay.
    let mut text = String::from(r#"{"version":2,"input":"map","nodes":["#);
    let n = 160_000;
    for i in 0..n {
        text.push_str(&format!(r#"{{"kind":"param","name":"p{i}","shape":[]}},"#));
    }
    let parents: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    text.push_str(&format!(r#"{{"kind":"op","op":"concat","parents":[{}],"list":true}},"#, parents.join(",")));
    text.push_str(&format!(r#"{{"kind":"op","op":"sum","parents":[{n}]}}],"root":{}}}"#, n + 1));
    let took = replay_time(text, Duration::from_secs(20));
    println!("160k parameters concatenated: replay {took:.2?}");
    assert!(took < Duration::from_secs(1), "replay took {took:.2?}");
}
