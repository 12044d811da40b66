//! A batch replays a plan of scalars and vectors eight points at a time
//! (src/core/plan/lanes.rs). Random programs of every op that has a lane
//! kernel (elementwise ops with broadcast scalars, sum, mean, dot, slices,
//! reshapes and concatenations of scalars and vectors, a constant or input
//! matrix times a vector, a triangular solve of a constant matrix and a
//! vector) are replayed that way and one
//! point at a time: every value and gradient must be the same bits (a NaN
//! only needs to be a NaN: which operand's NaN an instruction keeps is the
//! compiler's choice in either replay). Half of each program's steps take
//! the step before, so that chains form whose lanes the replay shares.

use std::sync::atomic::Ordering;
use tangent_grad::batch::{self, Pool, Replicas};
use tangent_grad::core::graph::Graph;
use tangent_grad::core::kernels::scalar::{partial, Formula};
use tangent_grad::core::op::{Exponent, Op};
use tangent_grad::core::plan::{Plan, LANES};
use tangent_grad::core::widest::WIDEST;
use tangent_grad::core::shape::Shape;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 11
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn normal(&mut self) -> f64 {
        let u = (self.next() as f64 + 0.5) / (1u64 << 53) as f64;
        let v = (self.next() as f64) / (1u64 << 53) as f64;
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// A random program over a vector parameter [n], a scalar one, an input
/// matrix [m×n] and vector [m], and constants; returns the plan.
fn program(seed: u64, n: usize, m: usize) -> Plan {
    let mut r = Rng(seed);
    let mut g = Graph::default();
    let v = g.leaf(Op::Leaf, Shape::Vector(n), &[]).unwrap();
    let s = g.leaf(Op::Leaf, Shape::Scalar, &[]).unwrap();
    let x = g.leaf(Op::Input, Shape::Matrix(m, n), &[]).unwrap();
    let y = g.leaf(Op::Input, Shape::Vector(m), &[]).unwrap();
    let square: Vec<f64> = (0..n * n).map(|_| r.normal()).collect();
    let a = g.leaf(Op::Const, Shape::Matrix(n, n), &square).unwrap();
    // For triangular solves: pivots away from zero, so that a chain of solves stays finite.
    let tri: Vec<f64> = (0..n * n).map(|i| if i % (n + 1) == 0 { 1.5 + r.normal().abs() } else { 0.3 * r.normal() }).collect();
    let tri = g.leaf(Op::Const, Shape::Matrix(n, n), &tri).unwrap();
    let c = g.leaf(Op::Const, Shape::Scalar, &[0.5 + r.normal().abs()]).unwrap();
    let cv: Vec<f64> = (0..n).map(|_| r.normal()).collect();
    let cv = g.leaf(Op::Const, Shape::Vector(n), &cv).unwrap();
    // Nodes to draw operands from.
    let mut pool: Vec<(u32, Shape)> = [v, s, y, c, cv].iter().map(|&id| (id, g.nodes[id as usize].shape)).collect();
    let unary = [Op::Neg, Op::Exp, Op::Log, Op::Sqrt, Op::Square, Op::Tanh, Op::Sigmoid, Op::Relu, Op::Lgamma];
    let binary = [Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Maximum, Op::Minimum];
    let mut last = v;
    for _ in 0..24 {
        let (p, shape) = if r.below(2) == 0 { (last, g.nodes[last as usize].shape) } else { pool[r.below(pool.len())] };
        let (op, parents) = match r.below(13) {
            0 | 1 => (unary[r.below(unary.len())], vec![p]),
            2 => (Op::Pow(Exponent::new([2.0, 0.5, -1.0, 3.0][r.below(4)])), vec![p]),
            3..=5 => {
                // A partner of the same length or a scalar, on either side.
                let fits = |q: Shape| q == shape || q == Shape::Scalar || shape == Shape::Scalar;
                let partners: Vec<u32> = pool.iter().filter(|q| fits(q.1)).map(|q| q.0).collect();
                let q = partners[r.below(partners.len())];
                let (p, q) = if r.below(2) == 0 { (p, q) } else { (q, p) };
                (binary[r.below(binary.len())], vec![p, q])
            }
            6 => ([Op::Sum, Op::Mean][r.below(2)], vec![p]),
            7 if shape == Shape::Vector(n) => (Op::Matmul, vec![[x, a][r.below(2)], p]),
            8 if shape.rank() == 1 => {
                let same: Vec<u32> = pool.iter().filter(|q| q.1 == shape).map(|q| q.0).collect();
                (Op::Dot, vec![p, same[r.below(same.len())]])
            }
            9 if shape.rank() == 1 => {
                let len = shape.size();
                let start = r.below(len);
                (Op::Slice { start: [start, 0], size: [1 + r.below(len - start), 0] }, vec![p])
            }
            10 => {
                let to = match shape {
                    Shape::Scalar => Shape::Vector(1),
                    Shape::Vector(1) => Shape::Scalar,
                    other => other,
                };
                (Op::Reshape(to), vec![p])
            }
            11 => {
                let (q, _) = pool[r.below(pool.len())];
                (Op::Concat { axis: 0 }, vec![p, q, p])
            }
            12 if shape == Shape::Vector(n) => (Op::TriangularSolve { lower: r.below(2) == 0 }, vec![tri, p]),
            _ => (Op::Neg, vec![p]),
        };
        let id = g.op(op, &parents, false).unwrap();
        pool.push((id, g.nodes[id as usize].shape));
        last = id;
    }
    // A scalar root that reads both parameters and the last node.
    let tail = g.op(Op::Sum, &[last], false).unwrap();
    let both = g.op(Op::Dot, &[v, v], false).unwrap();
    let t = g.op(Op::Mul, &[both, s], false).unwrap();
    let root = g.op(Op::Add, &[tail, t], false).unwrap();
    Plan::build(&g, root, &[v, s], &[x, y]).unwrap()
}

/// One point through the ordinary replay.
fn single(p: &mut Plan, point: &[f64], inputs: &[f64], n: usize) -> (f64, Vec<f64>) {
    p.set(0, &point[..n]).unwrap();
    p.set(1, &point[n..]).unwrap();
    let m = inputs.len() / (n + 1);
    p.set(2, &inputs[..m * n]).unwrap();
    p.set(3, &inputs[m * n..]).unwrap();
    let value = p.forward().unwrap()[0];
    p.backward();
    let mut grad = vec![0.0; n + 1];
    let (gv, gs) = grad.split_at_mut(n);
    p.gradient(0, gv).unwrap();
    p.gradient(1, gs).unwrap();
    (value, grad)
}

fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

#[test]
fn random_vector_programs_replayed_in_lanes_give_the_single_results() {
    // Every variant the machine can run (AVX-512, AVX2, baseline), not only the widest.
    for widest in [0, 1, 2] {
        WIDEST.store(widest, Ordering::Relaxed);
        random_programs();
    }
}

fn random_programs() {
    let (mut finite, mut shared) = (0, 0);
    for seed in 0..300u64 {
        let (n, m) = [(1, 1), (3, 5), (4, 4), (5, 9), (13, 34), (20, 6)][seed as usize % 6];
        let mut plan = program(seed, n, m);
        let mut r = Rng(seed ^ 0x5eed);
        // Two sets of inputs, so that lanes kept from one batch must take the other's.
        let inputs: [Vec<f64>; 2] = std::array::from_fn(|_| (0..m * n + m).map(|_| r.normal()).collect());
        plan.set(2, &inputs[0][..m * n]).unwrap();
        plan.set(3, &inputs[0][m * n..]).unwrap();
        assert!(plan.lanes(None, 0, true).is_some(), "seed {seed}: every op here has a lane kernel");
        shared += plan.lanes_shared().unwrap();
        let k = [1, LANES - 1, LANES, 2 * LANES + 3][seed as usize % 4];
        let w = n + 1;
        let params: Vec<f64> = (0..k * w).map(|_| if r.below(16) == 0 { 0.0 } else { r.normal() }).collect();
        let expected: [Vec<(f64, Vec<f64>)>; 2] =
            std::array::from_fn(|j| (0..k).map(|i| single(&mut plan, &params[i * w..(i + 1) * w], &inputs[j], n)).collect());
        finite += expected[0].iter().filter(|(v, g)| v.is_finite() && g.iter().all(|x| x.is_finite())).count();
        let pool = Pool::new(&plan);
        for (threads, j) in [(1, 0), (2, 1), (1, 0), (1, 1)] {
            let (mut values, mut grads) = (vec![0.0; k], vec![0.0; k * w]);
            batch::run(Replicas::Pool(&pool), &params, &inputs[j], k, threads, &mut values, &mut grads, 0).unwrap();
            for (i, (v, g)) in expected[j].iter().enumerate() {
                assert!(same(values[i], *v), "seed {seed}, point {i}: value {} vs {v}", values[i]);
                for (e, (&a, &b)) in grads[i * w..(i + 1) * w].iter().zip(g).enumerate() {
                    assert!(same(a, b), "seed {seed}, point {i}, gradient {e}: {a} vs {b}");
                }
            }
        }
    }
    assert!(finite > 500, "most points are finite, so the test compares numbers ({finite})");
    assert!(shared > 300, "the replay shares lanes along chains ({shared} nodes in 300 programs)");
}

#[test]
fn points_that_share_their_leading_slots_give_the_single_results_in_lanes() {
    // The vector slot held alike by every point, the scalar one not: the
    // adjoints that reach the shared slot from what varies by partials that
    // read nothing that varies are the same in every lane, swept once
    // (lane_uniform.rs), whatever the ops (a Hessian's tangent plan is
    // linear in what varies; these programs are not).
    let (mut uniform, mut left_out) = (0, 0);
    for seed in 0..300u64 {
        let (n, m) = [(1, 1), (3, 5), (4, 4), (5, 9), (13, 34), (20, 6)][seed as usize % 6];
        let mut plan = program(seed, n, m);
        let mut r = Rng(seed ^ 0x51de);
        let inputs: Vec<f64> = (0..m * n + m).map(|_| r.normal()).collect();
        plan.set(2, &inputs[..m * n]).unwrap();
        plan.set(3, &inputs[m * n..]).unwrap();
        let v: Vec<f64> = (0..n).map(|_| r.normal()).collect();
        plan.set(0, &v).unwrap();
        uniform += plan.lanes_uniform(1).unwrap();
        left_out += plan.lanes_left_out(1).unwrap();
        let k = [1, LANES - 1, LANES, 2 * LANES + 3][seed as usize % 4];
        let w = n + 1;
        let params: Vec<f64> = (0..k).flat_map(|_| v.iter().copied().chain([r.normal()])).collect();
        let expected: Vec<(f64, Vec<f64>)> = (0..k).map(|i| single(&mut plan, &params[i * w..(i + 1) * w], &inputs, n)).collect();
        let pool = Pool::new(&plan);
        let (mut values, mut grads) = (vec![0.0; k], vec![0.0; k * w]);
        batch::run(Replicas::Pool(&pool), &params, &inputs, k, 1, &mut values, &mut grads, 1).unwrap();
        // Only the shared slot's gradients are wanted: the sweep goes to
        // them alone, and the root's value may be left uncomputed.
        for (i, (_, g)) in expected.iter().enumerate() {
            for (e, (&a, &b)) in grads[i * w..i * w + n].iter().zip(g).enumerate() {
                assert!(same(a, b), "seed {seed}, point {i}, gradient {e}: {a} vs {b}");
            }
        }
    }
    assert!(uniform > 300, "adjoints the same in every lane are swept once ({uniform} in 300 programs)");
    assert!(left_out > 200, "steps whose values no sweep reads are left out ({left_out} in 300 programs)");
}

#[test]
fn each_formula_reads_all_that_its_partial_depends_on() {
    // A lane replay overwrites a value no partial reads (`Formula::reads`):
    // one left out of the table would change results. Each value the table
    // leaves out is changed, and the partial must not change.
    use Formula::*;
    let all = [Add, Sub, Mul, Div, Maximum, Minimum, Neg, Exp, Log, Sqrt, Square, Tanh, Sigmoid, Relu, Lgamma, Pow];
    let mut r = Rng(11);
    for f in all {
        for i in 0..if f.binary() { 2 } else { 1 } {
            let reads = f.reads(i);
            for _ in 0..200 {
                let [x, y, out, g, other] = std::array::from_fn(|_| 3.0 * r.normal());
                let k = [2.0, 0.5, -1.0, 3.0][r.below(4)];
                let base = partial(f, k, i, x, y, out, g);
                for (j, &read) in reads.iter().enumerate() {
                    let mut args = [x, y, out];
                    args[j] = other;
                    let [x, y, out] = args;
                    assert!(read || same(partial(f, k, i, x, y, out, g), base), "{f:?} operand {i} reads argument {j}");
                }
            }
        }
    }
}

#[test]
fn plans_with_other_ops_or_matrix_parameters_are_not_replayed_in_lanes() {
    let mut g = Graph::default();
    let w = g.leaf(Op::Leaf, Shape::Matrix(2, 2), &[]).unwrap();
    let root = g.op(Op::Sum, &[w], false).unwrap();
    assert!(Plan::build(&g, root, &[w], &[]).unwrap().lanes(None, 0, true).is_none(), "a matrix parameter");
    // A solve of a matrix that does not vary has a lane kernel, nalgebra's
    // substitution, unless a pivot is zero (then the kernels differ).
    let solve = |matrix: &[f64]| {
        let mut g = Graph::default();
        let v = g.leaf(Op::Leaf, Shape::Vector(4), &[]).unwrap();
        let l = g.leaf(Op::Const, Shape::Matrix(4, 4), matrix).unwrap();
        let t = g.op(Op::TriangularSolve { lower: true }, &[l, v], false).unwrap();
        let root = g.op(Op::Sum, &[t], false).unwrap();
        Plan::build(&g, root, &[v], &[]).unwrap()
    };
    assert!(solve(&[1.0; 16]).lanes(None, 0, true).is_some(), "a solve of a constant matrix");
    let mut pivot = [1.0; 16];
    pivot[5] = 0.0;
    assert!(solve(&pivot).lanes(None, 0, true).is_none(), "a zero pivot");
    let mut g = Graph::default();
    let (v, c) = (g.leaf(Op::Leaf, Shape::Vector(4), &[]).unwrap(), g.leaf(Op::Leaf, Shape::Scalar, &[]).unwrap());
    let l = g.leaf(Op::Const, Shape::Matrix(4, 4), &[1.0; 16]).unwrap();
    let cl = g.op(Op::Mul, &[c, l], false).unwrap();
    let t = g.op(Op::TriangularSolve { lower: true }, &[cl, v], false).unwrap();
    let root = g.op(Op::Sum, &[t], false).unwrap();
    let mut plan = Plan::build(&g, root, &[v, c], &[]).unwrap();
    assert!(plan.lanes(None, 0, true).is_none(), "a solve of a matrix that varies");
    assert!(plan.lanes(None, 0, true).is_none(), "asked again (the refusal is remembered)");
    // A refusal stands for the slots it was asked with, not for others:
    // a matrix that depends on slot 0 times a vector has a lane kernel
    // forward only while slot 0 is fixed (a forward Jacobian's lanes).
    let mut g = Graph::default();
    let (a, v) = (g.leaf(Op::Leaf, Shape::Scalar, &[]).unwrap(), g.leaf(Op::Leaf, Shape::Vector(2), &[]).unwrap());
    let m = g.leaf(Op::Const, Shape::Matrix(2, 2), &[1.0, 2.0, 3.0, 4.0]).unwrap();
    let am = g.op(Op::Mul, &[a, m], false).unwrap();
    let amv = g.op(Op::Matmul, &[am, v], false).unwrap();
    let root = g.op(Op::Sum, &[amv], false).unwrap();
    let mut plan = Plan::build(&g, root, &[a, v], &[]).unwrap();
    for _ in 0..2 {
        assert!(plan.lanes(None, 0, false).is_none(), "the matrix varies");
        assert!(plan.lanes(None, 1, false).is_some(), "the matrix is fixed");
    }
    // What does not depend on a parameter may be any op: it runs once.
    let mut g = Graph::default();
    let v = g.leaf(Op::Leaf, Shape::Vector(2), &[]).unwrap();
    let k = g.leaf(Op::Input, Shape::Matrix(2, 2), &[]).unwrap();
    let l = g.op(Op::Cholesky, &[k], false).unwrap();
    let lv = g.op(Op::Matmul, &[l, v], false).unwrap();
    let root = g.op(Op::Dot, &[lv, v], false).unwrap();
    let mut plan = Plan::build(&g, root, &[v], &[k]).unwrap();
    plan.set(1, &[4.0, 2.0, 2.0, 3.0]).unwrap();
    assert!(plan.lanes(None, 0, true).is_some(), "a Cholesky factor of an input");
    plan.set(1, &[1.0, 2.0, 2.0, 1.0]).unwrap();
    assert!(plan.lanes(None, 0, true).is_none(), "one that fails leaves each point to fail on its own");
    plan.set(1, &[4.0, 2.0, 2.0, 3.0]).unwrap();
    assert!(plan.lanes(None, 0, true).is_some(), "a failure on values is not remembered");
}

/// A tangent plan's Jacobian column by column (`Plan::forward_tangent`
/// after one replay of the primal): the reference for `batch::columns`.
/// `x` holds the parameters, `inputs` the inputs, slot after slot.
fn columns_one_at_a_time(tp: &mut Plan, x: &[f64], inputs: &[f64]) -> Vec<f64> {
    let slots = tp.params().len() / 2;
    let (q, mut at) = (x.len(), 0);
    for i in 0..slots {
        let n = tp.slot_size(i);
        tp.set(i, &x[at..at + n]).unwrap();
        tp.set(slots + i, &vec![0.0; n]).unwrap();
        at += n;
    }
    let mut at = 0;
    for i in 2 * slots..tp.slot_count() {
        let n = tp.slot_size(i);
        tp.set(i, &inputs[at..at + n]).unwrap();
        at += n;
    }
    let m = tp.forward().unwrap().len();
    let mut out = vec![0.0; m * q];
    for j in 0..q {
        let mut unit = vec![0.0; q];
        unit[j] = 1.0;
        let mut at = 0;
        for i in 0..slots {
            let n = tp.slot_size(i);
            tp.set(slots + i, &unit[at..at + n]).unwrap();
            at += n;
        }
        for (i, &c) in tp.forward_tangent().unwrap().iter().enumerate() {
            out[i * q + j] = c;
        }
    }
    out
}

#[test]
fn forward_jacobians_in_lanes_give_the_columns_one_at_a_time() {
    let check = |tp: &mut Plan, x: &[f64], inputs: &[f64], what: &str| {
        let expected = columns_one_at_a_time(tp, x, inputs);
        assert!(tp.lanes(None, tp.params().len() / 2, false).is_some(), "{what}: the tangent steps have lane kernels");
        let pool = Pool::new(tp);
        let flat = [x, inputs].concat();
        // Twice: the second call replays in the lanes the replica kept.
        for _ in 0..2 {
            let mut out = vec![f64::NAN; expected.len()];
            let finite = batch::columns(&pool, &flat, &mut out).unwrap();
            for (e, (&a, &b)) in out.iter().zip(&expected).enumerate() {
                assert!(same(a, b), "{what}, entry {e}: {a} vs {b}");
            }
            assert_eq!(finite, expected.iter().all(|x| x.is_finite()), "{what}: whether every entry is finite");
        }
    };
    for seed in 0..120u64 {
        let (n, m) = [(1, 1), (3, 5), (4, 4), (5, 9), (13, 34), (20, 6)][seed as usize % 6];
        let mut tp = program(seed, n, m).tangent_plan().unwrap();
        let mut r = Rng(seed ^ 0xf0f0);
        let x: Vec<f64> = (0..n + 1).map(|_| r.normal()).collect();
        let inputs: Vec<f64> = (0..m * n + m).map(|_| r.normal()).collect();
        check(&mut tp, &x, &inputs, &format!("seed {seed}"));
    }
    // A vector root, 19 columns: two full groups of lanes and one of three.
    let n = 19;
    let mut r = Rng(19);
    let mut g = Graph::default();
    let v = g.leaf(Op::Leaf, Shape::Vector(n), &[]).unwrap();
    let a: Vec<f64> = (0..n * n).map(|_| r.normal()).collect();
    let a = g.leaf(Op::Const, Shape::Matrix(n, n), &a).unwrap();
    let c: Vec<f64> = (0..n).map(|_| r.normal()).collect();
    let c = g.leaf(Op::Const, Shape::Vector(n), &c).unwrap();
    let t = g.op(Op::Tanh, &[v], false).unwrap();
    let at = g.op(Op::Matmul, &[a, t], false).unwrap();
    let v2 = g.op(Op::Square, &[v], false).unwrap();
    let cv2 = g.op(Op::Mul, &[c, v2], false).unwrap();
    let root = g.op(Op::Add, &[at, cv2], false).unwrap();
    let mut tp = Plan::build(&g, root, &[v], &[]).unwrap().tangent_plan().unwrap();
    let x: Vec<f64> = (0..n).map(|_| r.normal()).collect();
    check(&mut tp, &x, &[], "A·tanh(v) + c·v²");
}

/// A plan's value and gradient at `x` (its parameters flat), one replay.
fn value_and_gradient(plan: &Plan, x: &[f64], inputs: &[f64]) -> Vec<f64> {
    let mut p = plan.clone();
    let np = p.params().len();
    let (mut at, mut from_inputs) = (0, 0);
    for i in 0..p.slot_count() {
        let n = p.slot_size(i);
        if i < np {
            p.set(i, &x[at..at + n]).unwrap();
            at += n;
        } else {
            p.set(i, &inputs[from_inputs..from_inputs + n]).unwrap();
            from_inputs += n;
        }
    }
    let mut out = vec![p.forward().unwrap()[0]];
    p.backward();
    for i in 0..np {
        let mut g = vec![0.0; p.slot_size(i)];
        p.gradient(i, &mut g).unwrap();
        out.extend(g);
    }
    out
}

/// The gradients of `p` at (x, eⱼ), one ordinary replay per unit direction
/// eⱼ of the parameter values past x; each one's first x.len() values, row
/// after row: the reference for `batch::units`.
fn units_one_at_a_time(p: &mut Plan, x: &[f64], inputs: &[f64]) -> Vec<f64> {
    let np = p.params().len();
    let width: usize = (0..np).map(|i| p.slot_size(i)).sum();
    let mut at = 0;
    for i in np..p.slot_count() {
        let n = p.slot_size(i);
        p.set(i, &inputs[at..at + n]).unwrap();
        at += n;
    }
    let mut rows = Vec::new();
    for j in x.len()..width {
        let mut point = x.to_vec();
        point.resize(width, 0.0);
        point[j] = 1.0;
        let mut at = 0;
        for i in 0..np {
            let n = p.slot_size(i);
            p.set(i, &point[at..at + n]).unwrap();
            at += n;
        }
        p.forward().unwrap();
        p.backward();
        let mut grad = vec![0.0; width];
        let mut at = 0;
        for i in 0..np {
            let n = p.slot_size(i);
            p.gradient(i, &mut grad[at..at + n]).unwrap();
            at += n;
        }
        rows.extend_from_slice(&grad[..x.len()]);
    }
    rows
}

#[test]
fn hessian_and_jacobian_rows_in_lanes_with_x_fixed_give_the_single_results() {
    // The tangent plan's rows are a Hessian's, the row plan's a reverse
    // Jacobian's: x is the same at every point, so the lanes compute what
    // depends on x alone once and sweep the adjoints back to x in lanes;
    // a Hessian's tangent nodes' adjoints, the same in every lane, once.
    let mut uniform = 0;
    for seed in 0..120u64 {
        let (n, m) = [(1, 1), (3, 5), (4, 4), (5, 9), (13, 34), (20, 6)][seed as usize % 6];
        let plan = program(seed, n, m);
        let mut r = Rng(seed ^ 0xabcd);
        let x: Vec<f64> = (0..n + 1).map(|_| r.normal()).collect();
        let inputs: Vec<f64> = (0..m * n + m).map(|_| r.normal()).collect();
        for (what, mut p) in [("hessian", plan.tangent_plan().unwrap()), ("jacobian", plan.row_plan().unwrap())] {
            let expected = units_one_at_a_time(&mut p, &x, &inputs);
            let mut fixed = p.clone();
            fixed.set(0, &x[..n]).unwrap();
            fixed.set(1, &x[n..]).unwrap();
            let mut at = 0;
            for slot in 4..fixed.slot_count() {
                let size = fixed.slot_size(slot);
                fixed.set(slot, &inputs[at..at + size]).unwrap();
                at += size;
            }
            assert!(!fixed.inputs_current(), "a replica holds no computed value");
            assert!(fixed.lanes(None, 2, true).is_some(), "seed {seed}, {what}: replayed in lanes with x fixed");
            // The nodes of the inputs alone are computed; the same bits fed again keep them.
            assert!(fixed.inputs_current());
            fixed.set(4, &inputs[..fixed.slot_size(4)]).unwrap();
            assert!(fixed.inputs_current(), "seed {seed}: the same input");
            fixed.set(0, &x[..n].iter().map(|v| v + 1.0).collect::<Vec<_>>()).unwrap();
            assert!(fixed.inputs_current(), "seed {seed}: a parameter");
            uniform += fixed.lanes_uniform(2).unwrap() * usize::from(what == "hessian");
            let pool = Pool::new(&p);
            // Three times: the second call replays in the lanes the replica
            // kept, at another x, with the nodes of the inputs alone as the
            // first left them; the third with other inputs, which they follow.
            for round in 0..3 {
                let x: Vec<f64> = x.iter().map(|&v| v + round.min(1) as f64).collect();
                let inputs: Vec<f64> = inputs.iter().map(|&v| if round == 2 { 0.5 * v + 0.1 } else { v }).collect();
                let expected = if round == 0 { expected.clone() } else { units_one_at_a_time(&mut p, &x, &inputs) };
                let mut rows = vec![f64::NAN; expected.len()];
                // A Hessian's value and gradient at x, from a replica's sweep from its primal root.
                let mut primal = vec![f64::NAN; 1 + x.len()];
                let wanted = (what == "hessian").then_some(&mut primal[..]);
                let written = batch::units(Replicas::Pool(&pool), &x, &inputs, &mut rows, wanted).unwrap();
                assert_eq!(written, what == "hessian", "seed {seed}, {what}: value and gradient written");
                if written {
                    let want = value_and_gradient(&plan, &x, &inputs);
                    for (e, (&a, &b)) in primal.iter().zip(&want).enumerate() {
                        assert_eq!(a.to_bits(), b.to_bits(), "seed {seed}, round {round}, value and gradient [{e}]: {a} vs {b}");
                    }
                }
                for (e, (&a, &b)) in rows.iter().zip(&expected).enumerate() {
                    assert!(same(a, b), "seed {seed}, {what}, round {round}, entry {e}: {a} vs {b}");
                }
            }
        }
    }
    assert!(uniform > 1000, "most tangent nodes' adjoints are the same in every lane ({uniform} in 120 Hessians)");
}

#[test]
fn a_matrix_times_vectors_of_one_non_zero_per_lane_gives_the_dense_bits() {
    // Lanes whose vector is zero but at one element take a column of the
    // matrix (lane_products.rs, `columns_of`) where every entry is finite,
    // and the dense product where one is not (a_ij · 0 is then NaN): the
    // product's every element, signed zeros included, as one point gives it.
    let (m, k) = (5, 6);
    let mut g = Graph::default();
    let v = g.leaf(Op::Leaf, Shape::Vector(k), &[]).unwrap();
    let a = g.leaf(Op::Input, Shape::Matrix(m, k), &[]).unwrap();
    let root = g.op(Op::Matmul, &[a, v], false).unwrap();
    let mut plan = Plan::build(&g, root, &[v], &[a]).unwrap();
    let mut r = Rng(77);
    let mut finite: Vec<f64> = (0..m * k).map(|_| r.normal()).collect();
    (finite[3], finite[10], finite[17]) = (0.0, -0.0, -0.0);
    let with = |at: usize, x: f64| {
        let mut a = finite.clone();
        a[at] = x;
        a
    };
    let matrices = [finite.clone(), with(7, f64::INFINITY), with(20, f64::NAN), with(0, f64::NEG_INFINITY)];
    // Each lane: one non-zero (of these values; -0 and 0 leave it all zeros) at a random element.
    let values = [1.0, -2.5, 0.0, -0.0, 3e300, f64::INFINITY, f64::NAN];
    let mut lanes = None;
    for (which, matrix) in matrices.iter().enumerate() {
        plan.set(1, matrix).unwrap();
        for round in 0..6 {
            let params: Vec<f64> = (0..LANES)
                .flat_map(|l| {
                    let mut point = vec![0.0; k];
                    let j = r.below(k);
                    point[j] = values[(l + round) % values.len()];
                    // In the last round one lane holds two non-zeros: the dense product for all.
                    if round == 5 && l == 3 {
                        point[(j + 1) % k] = 0.5;
                    }
                    point
                })
                .collect();
            let expected: Vec<f64> = params
                .chunks(k)
                .flat_map(|point| {
                    plan.set(0, point).unwrap();
                    plan.forward().unwrap().to_vec()
                })
                .collect();
            lanes = plan.lanes(lanes.take(), 0, false);
            // Element e of point l at e·LANES + l (a Jacobian's rows, LANES columns wide).
            let mut got = vec![f64::NAN; LANES * m];
            plan.replay_lanes_forward(lanes.as_mut().expect("replayed in lanes"), &params, k, &mut got, LANES);
            for (j, &y) in expected.iter().enumerate() {
                let (l, e) = (j / m, j % m);
                let x = got[e * LANES + l];
                assert!(same(x, y), "matrix {which}, round {round}, point {l}, element {e}: {x} vs {y}");
            }
        }
    }
}

#[test]
fn a_matrix_of_no_columns_times_an_empty_vector_gives_zeros_in_lanes() {
    // one_per_lane finds every lane of an empty vector all zeros; there is
    // no column to take, and the product is the dense one: zeros.
    let mut g = Graph::default();
    let v = g.leaf(Op::Leaf, Shape::Vector(0), &[]).unwrap();
    let s = g.leaf(Op::Leaf, Shape::Scalar, &[]).unwrap();
    let a = g.leaf(Op::Const, Shape::Matrix(3, 0), &[]).unwrap();
    let av = g.op(Op::Matmul, &[a, v], false).unwrap();
    let root = g.op(Op::Add, &[av, s], false).unwrap();
    let mut plan = Plan::build(&g, root, &[v, s], &[]).unwrap();
    let mut lanes = plan.lanes(None, 0, false).expect("replayed in lanes");
    let params: Vec<f64> = (0..LANES).map(|l| l as f64 - 2.5).collect();
    let mut got = vec![f64::NAN; LANES * 3];
    plan.replay_lanes_forward(&mut lanes, &params, 1, &mut got, LANES);
    for (j, &x) in got.iter().enumerate() {
        let (e, l) = (j / LANES, j % LANES);
        assert!(same(x, 0.0 + params[l]), "point {l}, element {e}: {x}");
    }
}

#[test]
fn the_nodes_of_the_inputs_alone_are_computed_again_only_for_other_inputs() {
    // A Laplace approximation's Hessian: f(v) = −½ vᵀK⁻¹v + Σ tanh(v), K
    // an input, through its factor L (computed once per lanes, not in them).
    let n = 6;
    let mut g = Graph::default();
    let v = g.leaf(Op::Leaf, Shape::Vector(n), &[]).unwrap();
    let k = g.leaf(Op::Input, Shape::Matrix(n, n), &[]).unwrap();
    let l = g.op(Op::Cholesky, &[k], false).unwrap();
    let w = g.op(Op::TriangularSolve { lower: true }, &[l, v], false).unwrap();
    let ww = g.op(Op::Dot, &[w, w], false).unwrap();
    let half = g.leaf(Op::Const, Shape::Scalar, &[-0.5]).unwrap();
    let quad = g.op(Op::Mul, &[half, ww], false).unwrap();
    let t = g.op(Op::Tanh, &[v], false).unwrap();
    let st = g.op(Op::Sum, &[t], false).unwrap();
    let root = g.op(Op::Add, &[quad, st], false).unwrap();
    let plan = Plan::build(&g, root, &[v], &[k]).unwrap();
    let mut tp = plan.tangent_plan().unwrap();
    let spd = |scale: f64| -> Vec<f64> { (0..n * n).map(|e| if e / n == e % n { 2.0 + scale } else { scale / (1.0 + (e / n + e % n) as f64) }).collect() };
    let pool = Pool::new(&tp);
    let x: Vec<f64> = (0..n).map(|i| 0.3 * i as f64 - 0.7).collect();
    for (round, scale) in [0.4, 0.4, 0.9, 0.9].into_iter().enumerate() {
        let k = spd(scale);
        let expected = units_one_at_a_time(&mut tp, &x, &k);
        let mut rows = vec![f64::NAN; n * n];
        batch::units(Replicas::Pool(&pool), &x, &k, &mut rows, None).unwrap();
        for (e, (&a, &b)) in rows.iter().zip(&expected).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "round {round}, entry {e}: {a} vs {b}");
        }
    }
    // The flag itself, on a copy fed by hand.
    let mut p = tp.clone();
    p.set(0, &x).unwrap();
    p.set(2, &spd(0.4)).unwrap();
    assert!(p.lanes(None, 1, true).is_some() && p.inputs_current());
    p.set(2, &spd(0.4)).unwrap();
    assert!(p.inputs_current(), "the same bits");
    p.set(2, &spd(0.5)).unwrap();
    assert!(!p.inputs_current(), "other bits");
}

#[test]
fn values_and_adjoints_read_from_the_plans_arenas_give_the_single_results() {
    // Hessians whose lane steps read vectors that do not vary, and adjoints
    // the same in every lane, from the plan's arenas (`Layout::flat`,
    // `Layout::flat_adjoint`): Σ lgamma(v), whose every same adjoint is
    // read so (the uniform sweep must still run), and Σ c ⊙ tanh(v) · exp(v)
    // with c an input. Bit for bit against a replay per direction.
    let n = 11;
    for case in 0..2 {
        let mut g = Graph::default();
        let v = g.leaf(Op::Leaf, Shape::Vector(n), &[]).unwrap();
        let c = g.leaf(Op::Input, Shape::Vector(n), &[]).unwrap();
        let body = if case == 0 {
            g.op(Op::Lgamma, &[v], false).unwrap()
        } else {
            let t = g.op(Op::Tanh, &[v], false).unwrap();
            let e = g.op(Op::Exp, &[v], false).unwrap();
            let ct = g.op(Op::Mul, &[c, t], false).unwrap();
            g.op(Op::Mul, &[ct, e], false).unwrap()
        };
        let root = g.op(Op::Sum, &[body], false).unwrap();
        let plan = Plan::build(&g, root, &[v], &[c]).unwrap();
        let mut tp = plan.tangent_plan().unwrap();
        let (values, adjoints) = tp.lanes_flat(1).unwrap();
        assert!(adjoints > 0, "case {case}: an adjoint read from the plan's arena");
        assert!(case == 0 || values > 0, "case {case}: a value read from the plan's arena");
        let pool = Pool::new(&tp);
        for round in 0..3 {
            let x: Vec<f64> = (0..n).map(|i| 0.4 + 0.3 * i as f64 + round as f64).collect();
            let inputs: Vec<f64> = (0..n).map(|i| 1.0 - 0.1 * (i + round) as f64).collect();
            let expected = units_one_at_a_time(&mut tp, &x, &inputs);
            let mut rows = vec![f64::NAN; n * n];
            batch::units(Replicas::Pool(&pool), &x, &inputs, &mut rows, None).unwrap();
            for (e, (&a, &b)) in rows.iter().zip(&expected).enumerate() {
                assert_eq!(a.to_bits(), b.to_bits(), "case {case}, round {round}, entry {e}: {a} vs {b}");
            }
        }
    }
}

/// A plan's size for lanes counts what depends on a parameter: a logistic
/// likelihood's Hessian over 1 600 × 21 constant covariates (33 600
/// values, past the 2^15 the lanes take) replays its directions in lanes,
/// its rows the bits of one replay per direction; with a 2^15-value
/// parameter of its own it does not.
#[test]
fn large_constant_data_do_not_keep_a_hessian_out_of_lanes() {
    let mut r = Rng(17);
    let hessian_plan = |n: usize, p: usize, r: &mut Rng| {
        let mut g = Graph::default();
        let b = g.leaf(Op::Leaf, Shape::Vector(p), &[]).unwrap();
        let data: Vec<f64> = (0..n * p).map(|_| r.normal()).collect();
        let x = g.leaf(Op::Const, Shape::Matrix(n, p), &data).unwrap();
        let one = g.leaf(Op::Const, Shape::Scalar, &[1.0]).unwrap();
        let eta = g.op(Op::Matmul, &[x, b], false).unwrap();
        let e = g.op(Op::Exp, &[eta], false).unwrap();
        let s = g.op(Op::Add, &[e, one], false).unwrap();
        let l = g.op(Op::Log, &[s], false).unwrap();
        let root = g.op(Op::Sum, &[l], false).unwrap();
        Plan::build(&g, root, &[b], &[]).unwrap().tangent_plan().unwrap()
    };
    let (n, p) = (1600, 21);
    let mut tp = hessian_plan(n, p, &mut r);
    let x: Vec<f64> = (0..p).map(|_| 0.1 * r.normal()).collect();
    let mut fixed = tp.clone();
    fixed.set(0, &x).unwrap();
    fixed.set(1, &vec![0.0; p]).unwrap();
    assert!(fixed.lanes(None, 1, true).is_some(), "replayed in lanes with x fixed");
    let expected = units_one_at_a_time(&mut tp, &x, &[]);
    let pool = Pool::new(&tp);
    let mut rows = vec![f64::NAN; p * p];
    batch::units(Replicas::Pool(&pool), &x, &[], &mut rows, None).unwrap();
    for (e, (&a, &b)) in rows.iter().zip(&expected).enumerate() {
        assert!(same(a, b), "entry {e}: {a} vs {b}");
    }
    // Past the limit in what depends on the parameter: one direction at a time.
    let big = 1 << 15;
    let mut g = Graph::default();
    let b = g.leaf(Op::Leaf, Shape::Vector(big), &[]).unwrap();
    let root = g.op(Op::Dot, &[b, b], false).unwrap();
    let mut tp = Plan::build(&g, root, &[b], &[]).unwrap().tangent_plan().unwrap();
    tp.set(0, &vec![0.5; big]).unwrap();
    tp.set(1, &vec![0.0; big]).unwrap();
    assert!(tp.lanes(None, 1, true).is_none(), "a 2^15-value parameter is too large for lanes");
}
