//! Every op's tangent rule against central differences of its value, and
//! its Hessian-vector product (reverse over the tangent, in a plan) against
//! central differences of its gradient; the tape's tangent and the plan's
//! agree bit for bit.

use tangent_grad::batch::{self, Pool, Replicas};
use tangent_grad::core::graph::Graph;
use tangent_grad::core::op::{Exponent, Op};
use tangent_grad::core::plan::{Passes, Plan};
use tangent_grad::core::shape::Shape;
use tangent_grad::core::tangent::jvp;

type Build = fn(&mut Graph, &[u32]) -> u32;

struct Case {
    name: &'static str,
    shapes: Vec<Shape>,
    values: Vec<Vec<f64>>,
    build: Build,
}

fn op(g: &mut Graph, op: Op, p: &[u32]) -> u32 {
    g.op(op, p, true).unwrap()
}

fn constant(g: &mut Graph, shape: Shape, data: &[f64]) -> u32 {
    g.leaf(Op::Const, shape, data).unwrap()
}

/// A positive definite matrix from a parameter matrix: A Aᵀ + n I.
fn spd(g: &mut Graph, a: u32) -> u32 {
    let n = g.nodes[a as usize].shape.rows_cols().0;
    let at = op(g, Op::Transpose, &[a]);
    let aat = op(g, Op::Matmul, &[a, at]);
    let d = constant(g, Shape::Scalar, &[n as f64]);
    op(g, Op::AddDiag, &[aat, d])
}

/// Deterministic values in about [-1, 1].
fn wave(n: usize, seed: f64) -> Vec<f64> {
    (0..n).map(|i| (seed + 1.7 * i as f64).sin()).collect()
}

fn v(n: usize) -> Shape {
    Shape::Vector(n)
}
fn m(r: usize, c: usize) -> Shape {
    Shape::Matrix(r, c)
}

fn case(name: &'static str, shapes: &[Shape], build: Build) -> Case {
    let values = shapes.iter().enumerate().map(|(k, s)| wave(s.size(), 0.3 + k as f64)).collect();
    Case { name, shapes: shapes.to_vec(), values, build }
}

fn cases() -> Vec<Case> {
    vec![
        case("add", &[v(3), v(3)], |g, p| op(g, Op::Add, &[p[0], p[1]])),
        case("add scalar left", &[Shape::Scalar, m(2, 3)], |g, p| op(g, Op::Add, &[p[0], p[1]])),
        case("sub row right", &[m(2, 3), v(3)], |g, p| op(g, Op::Sub, &[p[0], p[1]])),
        case("mul row left", &[v(3), m(2, 3)], |g, p| op(g, Op::Mul, &[p[0], p[1]])),
        case("div", &[v(3), v(3)], |g, p| {
            let e = op(g, Op::Exp, &[p[1]]);
            op(g, Op::Div, &[p[0], e])
        }),
        case("div scalar right", &[m(2, 2), Shape::Scalar], |g, p| {
            let e = op(g, Op::Exp, &[p[1]]);
            op(g, Op::Div, &[p[0], e])
        }),
        case("maximum", &[v(4), v(4)], |g, p| op(g, Op::Maximum, &[p[0], p[1]])),
        case("minimum", &[v(4), Shape::Scalar], |g, p| op(g, Op::Minimum, &[p[0], p[1]])),
        case("neg", &[v(3)], |g, p| op(g, Op::Neg, &[p[0]])),
        case("exp", &[v(3)], |g, p| op(g, Op::Exp, &[p[0]])),
        case("log", &[v(3)], |g, p| {
            let e = op(g, Op::Exp, &[p[0]]);
            op(g, Op::Log, &[e])
        }),
        case("sqrt", &[v(3)], |g, p| {
            let e = op(g, Op::Exp, &[p[0]]);
            op(g, Op::Sqrt, &[e])
        }),
        case("square", &[v(3)], |g, p| op(g, Op::Square, &[p[0]])),
        case("tanh", &[v(3)], |g, p| op(g, Op::Tanh, &[p[0]])),
        case("sigmoid", &[v(3)], |g, p| op(g, Op::Sigmoid, &[p[0]])),
        case("relu", &[v(4)], |g, p| {
            let s = op(g, Op::Square, &[p[0]]);
            let r = op(g, Op::Relu, &[p[0]]);
            op(g, Op::Mul, &[s, r])
        }),
        case("lgamma", &[v(3)], |g, p| {
            let e = op(g, Op::Exp, &[p[0]]);
            op(g, Op::Lgamma, &[e])
        }),
        case("pow", &[v(3)], |g, p| {
            let e = op(g, Op::Exp, &[p[0]]);
            op(g, Op::Pow(Exponent::new(2.5)), &[e])
        }),
        case("sum", &[m(2, 3)], |g, p| {
            let s = op(g, Op::Square, &[p[0]]);
            op(g, Op::Sum, &[s])
        }),
        case("mean", &[v(3)], |g, p| {
            let s = op(g, Op::Exp, &[p[0]]);
            op(g, Op::Mean, &[s])
        }),
        case("matmul", &[m(2, 3), m(3, 2)], |g, p| op(g, Op::Matmul, &[p[0], p[1]])),
        case("matmul vector", &[m(2, 3), v(3)], |g, p| op(g, Op::Matmul, &[p[0], p[1]])),
        case("dot", &[v(3), v(3)], |g, p| op(g, Op::Dot, &[p[0], p[1]])),
        case("transpose", &[m(2, 3)], |g, p| op(g, Op::Transpose, &[p[0]])),
        case("diagPart", &[m(3, 3)], |g, p| op(g, Op::DiagPart, &[p[0]])),
        case("addDiag", &[m(2, 2), v(2)], |g, p| op(g, Op::AddDiag, &[p[0], p[1]])),
        case("addDiag diagonal only", &[v(2)], |g, p| {
            let c = constant(g, m(2, 2), &[1.0, 2.0, 3.0, 4.0]);
            op(g, Op::AddDiag, &[c, p[0]])
        }),
        case("reshape", &[v(6)], |g, p| op(g, Op::Reshape(m(2, 3)), &[p[0]])),
        case("slice", &[m(3, 3)], |g, p| op(g, Op::Slice { start: [1, 0], size: [2, 2] }, &[p[0]])),
        case("concat", &[v(2), Shape::Scalar], |g, p| {
            let c = constant(g, v(2), &[5.0, 6.0]);
            op(g, Op::Concat { axis: 0 }, &[p[0], c, p[1]])
        }),
        case("concat matrices", &[m(2, 2), m(2, 1)], |g, p| op(g, Op::Concat { axis: 1 }, &[p[0], p[1]])),
        case("cholesky", &[m(3, 3)], |g, p| {
            let k = spd(g, p[0]);
            op(g, Op::Cholesky, &[k])
        }),
        // K = v·exp(−D/l) + I from a symmetric constant D: its tangent is
        // symmetric by construction, so the rule takes it as its own symmetric part.
        case("cholesky of a kernel matrix", &[Shape::Scalar, Shape::Scalar], |g, p| {
            let d = constant(g, m(3, 3), &[0.0, 0.5, 2.0, 0.5, 0.0, 1.0, 2.0, 1.0, 0.0]);
            let dl = op(g, Op::Div, &[d, p[0]]);
            let e = op(g, Op::Neg, &[dl]);
            let e = op(g, Op::Exp, &[e]);
            let ve = op(g, Op::Mul, &[p[1], e]);
            let one = constant(g, Shape::Scalar, &[1.0]);
            let k = op(g, Op::AddDiag, &[ve, one]);
            op(g, Op::Cholesky, &[k])
        }),
        case("solve through a Cholesky factor", &[m(3, 3), v(3)], |g, p| {
            // solvePSD: Lᵀ \ (L \ b), L = chol(A Aᵀ + 3I), with c/A's negation on the way.
            let a = spd(g, p[0]);
            let l = op(g, Op::Cholesky, &[a]);
            let lt = op(g, Op::Transpose, &[l]);
            let y = op(g, Op::TriangularSolve { lower: true }, &[l, p[1]]);
            let x = op(g, Op::TriangularSolve { lower: false }, &[lt, y]);
            let two = constant(g, Shape::Scalar, &[2.0]);
            let q = op(g, Op::Div, &[two, p[1]]);
            let q = op(g, Op::Neg, &[q]);
            op(g, Op::Add, &[x, q])
        }),
        case("triangularSolve lower", &[m(3, 3), m(3, 2)], |g, p| {
            let k = spd(g, p[0]);
            op(g, Op::TriangularSolve { lower: true }, &[k, p[1]])
        }),
        case("triangularSolve upper", &[m(3, 3), v(3)], |g, p| {
            let k = spd(g, p[0]);
            op(g, Op::TriangularSolve { lower: false }, &[k, p[1]])
        }),
        case("solveGeneral", &[m(3, 3), v(3)], |g, p| {
            let c = constant(g, Shape::Scalar, &[3.0]);
            let a = op(g, Op::AddDiag, &[p[0], c]);
            op(g, Op::SolveGeneral, &[a, p[1]])
        }),
    ]
}

fn record(c: &Case, values: &[Vec<f64>]) -> (Graph, Vec<u32>, u32) {
    let mut g = Graph::default();
    let leaves: Vec<u32> = c.shapes.iter().zip(values).map(|(&s, x)| g.leaf(Op::Leaf, s, x).unwrap()).collect();
    let root = (c.build)(&mut g, &leaves);
    (g, leaves, root)
}

fn along(values: &[Vec<f64>], dirs: &[Vec<f64>], h: f64) -> Vec<Vec<f64>> {
    values.iter().zip(dirs).map(|(x, d)| x.iter().zip(d).map(|(a, b)| a + h * b).collect()).collect()
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * (1.0 + a.abs().max(b.abs()))
}

/// The scalar objective of a case for its Hessian: Σ y² + Σ y.
fn scalar(g: &mut Graph, y: u32) -> u32 {
    let s = op(g, Op::Square, &[y]);
    let both = op(g, Op::Add, &[s, y]);
    op(g, Op::Sum, &[both])
}

#[test]
fn every_tangent_rule_matches_central_differences() {
    for c in cases() {
        let dirs: Vec<Vec<f64>> = c.shapes.iter().enumerate().map(|(k, s)| wave(s.size(), 2.1 + k as f64)).collect();
        // On the tape, evaluated as recorded.
        let (mut g, leaves, root) = record(&c, &c.values);
        let tangents: Vec<u32> = c.shapes.iter().zip(&dirs).map(|(&s, d)| g.leaf(Op::Const, s, d).unwrap()).collect();
        let seeds: Vec<(u32, u32)> = leaves.iter().copied().zip(tangents.iter().copied()).collect();
        let t = jvp(&mut g, root, &seeds, true).unwrap().expect("every case depends on its parameters");
        let got = g.value(t).unwrap().to_vec();
        let h = 1e-6;
        let (gp, _, rp) = record(&c, &along(&c.values, &dirs, h));
        let (gm, _, rm) = record(&c, &along(&c.values, &dirs, -h));
        let (yp, ym) = (gp.value(rp).unwrap(), gm.value(rm).unwrap());
        for i in 0..got.len() {
            let fd = (yp[i] - ym[i]) / (2.0 * h);
            assert!(close(got[i], fd, 1e-7), "{}: tangent[{i}] = {} against {fd}", c.name, got[i]);
        }
    }
}

/// The plan of a case's scalar objective, fed at `values`, and its tangent plan.
fn plans(c: &Case) -> (Plan, Plan) {
    let (mut g, leaves, root) = record(c, &c.values);
    let s = scalar(&mut g, root);
    let plan = Plan::build(&g, s, &leaves, &[]).unwrap();
    let tangent = plan.tangent_plan().unwrap();
    (plan, tangent)
}

fn gradient_at(plan: &mut Plan, c: &Case, values: &[Vec<f64>]) -> Vec<f64> {
    for (i, x) in values.iter().enumerate() {
        plan.set(i, x).unwrap();
    }
    plan.forward().unwrap();
    plan.backward();
    let mut out = Vec::new();
    for (i, s) in c.shapes.iter().enumerate() {
        let mut gi = vec![0.0; s.size()];
        plan.gradient(i, &mut gi).unwrap();
        out.extend(gi);
    }
    out
}

#[test]
fn every_hessian_vector_product_matches_differences_of_the_gradient() {
    for c in cases() {
        let dirs: Vec<Vec<f64>> = c.shapes.iter().enumerate().map(|(k, s)| wave(s.size(), 4.2 + k as f64)).collect();
        let (mut plan, mut tp) = plans(&c);
        let n = c.shapes.len();
        for (i, x) in c.values.iter().enumerate() {
            tp.set(i, x).unwrap();
            tp.set(n + i, &dirs[i]).unwrap();
        }
        tp.forward().unwrap();
        tp.backward();
        let (mut hv, mut grad) = (Vec::new(), Vec::new());
        for (i, s) in c.shapes.iter().enumerate() {
            let (mut a, mut b) = (vec![0.0; s.size()], vec![0.0; s.size()]);
            tp.gradient(i, &mut a).unwrap();
            tp.gradient(n + i, &mut b).unwrap();
            hv.extend(a);
            grad.extend(b);
        }
        // The sweep from the primal root on the same replay: the plan's gradient, bit for bit.
        let mut primal = vec![f64::NAN; hv.len()];
        assert!(tp.primal_gradient(&mut primal).unwrap(), "{}: the tangent plan keeps no primal sweep", c.name);
        let exact = gradient_at(&mut plan, &c, &c.values);
        for (i, (a, b)) in primal.iter().zip(&exact).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "{}: the primal sweep's gradient[{i}] {a} is not the plan's {b}", c.name);
        }
        let h = 1e-5;
        let gp = gradient_at(&mut plan, &c, &along(&c.values, &dirs, h));
        let gm = gradient_at(&mut plan, &c, &along(&c.values, &dirs, -h));
        for i in 0..hv.len() {
            let fd = (gp[i] - gm[i]) / (2.0 * h);
            assert!(close(hv[i], fd, 1e-6), "{}: (Hv)[{i}] = {} against {fd}", c.name, hv[i]);
            assert!(close(grad[i], exact[i], 1e-12), "{}: the tangents' adjoint {} is not the gradient {}", c.name, grad[i], exact[i]);
        }
    }
}

/// A Hessian's rows on a pool of replicas (`batch::units`, every
/// direction, tangents alone replayed past the first): the value and
/// gradient one of them sweeps from its primal root are the plan's, bit
/// for bit, and each row is the H·v of its unit direction.
#[test]
fn hessian_rows_on_replicas_give_the_plans_value_and_gradient() {
    for c in cases() {
        let (mut plan, tp) = plans(&c);
        let pool = Pool::new(&tp);
        // Twice: the second call, at another point, on the replicas the first left.
        for round in 0..2 {
            let values: Vec<Vec<f64>> = c.values.iter().map(|v| v.iter().map(|x| x * (1.0 + 1e-3 * round as f64)).collect()).collect();
            let x: Vec<f64> = values.concat();
            let q = x.len();
            let exact = gradient_at(&mut plan, &c, &values);
            let value = plan.forward().unwrap()[0];
            let (mut rows, mut primal) = (vec![f64::NAN; q * q], vec![f64::NAN; 1 + q]);
            let written = batch::units(Replicas::Pool(&pool), &x, &[], &mut rows, Some(&mut primal)).unwrap();
            assert!(written, "{}, round {round}: no replica kept the primal sweep", c.name);
            assert_eq!(primal[0].to_bits(), value.to_bits(), "{}, round {round}: value {} against {value}", c.name, primal[0]);
            for (i, (a, b)) in primal[1..].iter().zip(&exact).enumerate() {
                assert_eq!(a.to_bits(), b.to_bits(), "{}, round {round}: gradient[{i}] {a} is not the plan's {b}", c.name);
            }
            assert!(rows.iter().all(|r| !r.is_nan()), "{}: every row written", c.name);
        }
    }
}

#[test]
fn the_tape_and_the_tangent_plan_agree_bit_for_bit() {
    for c in cases() {
        let dirs: Vec<Vec<f64>> = c.shapes.iter().enumerate().map(|(k, s)| wave(s.size(), 7.7 + k as f64)).collect();
        let (mut g, leaves, root) = record(&c, &c.values);
        let s = scalar(&mut g, root);
        let tangents: Vec<u32> = c.shapes.iter().zip(&dirs).map(|(&sh, d)| g.leaf(Op::Const, sh, d).unwrap()).collect();
        let seeds: Vec<(u32, u32)> = leaves.iter().copied().zip(tangents.iter().copied()).collect();
        let t = jvp(&mut g, s, &seeds, true).unwrap().unwrap();
        let on_tape = g.value(t).unwrap()[0];
        let (_, mut tp) = plans(&c);
        let n = c.shapes.len();
        for (i, x) in c.values.iter().enumerate() {
            tp.set(i, x).unwrap();
            tp.set(n + i, &dirs[i]).unwrap();
        }
        let replayed = tp.forward().unwrap()[0];
        assert_eq!(on_tape.to_bits(), replayed.to_bits(), "{}: {on_tape} on the tape, {replayed} replayed", c.name);
        // Replaying only what the tangents move gives the same after a change of direction.
        for (i, d) in dirs.iter().enumerate() {
            tp.set(n + i, &d.iter().map(|x| -2.0 * x).collect::<Vec<_>>()).unwrap();
        }
        let partial = tp.forward_tangent().unwrap()[0];
        let full = tp.forward().unwrap()[0];
        assert_eq!(partial.to_bits(), full.to_bits(), "{}: the tangent-only replay differs", c.name);
    }
}

#[test]
fn a_hand_built_node_has_no_forward_rule() {
    let mut g = Graph::default();
    let x = g.leaf(Op::Leaf, Shape::Scalar, &[1.0]).unwrap();
    let e = g.external(Shape::Scalar, &[2.0], &[x]).unwrap();
    let t = g.leaf(Op::Const, Shape::Scalar, &[1.0]).unwrap();
    let err = jvp(&mut g, e, &[(x, t)], true).unwrap_err();
    assert!(err.0.contains("has no forward rule"), "{}", err.0);
    // One that does not depend on the moving leaf is a constant: no tangent.
    let y = g.leaf(Op::Leaf, Shape::Scalar, &[1.0]).unwrap();
    assert_eq!(jvp(&mut g, e, &[(y, t)], true).unwrap(), None);
}

#[test]
fn ties_take_the_side_the_adjoint_takes() {
    // maximum and minimum give a tie's tangent to the left, as their
    // adjoint does; a NaN goes right; relu(0) moves with nothing.
    let mut g = Graph::default();
    let a = g.leaf(Op::Leaf, Shape::Vector(3), &[0.5, f64::NAN, 0.0]).unwrap();
    let b = g.leaf(Op::Leaf, Shape::Vector(3), &[0.5, 1.0, 0.0]).unwrap();
    let ta = g.leaf(Op::Const, Shape::Vector(3), &[1.0, 2.0, 3.0]).unwrap();
    let tb = g.leaf(Op::Const, Shape::Vector(3), &[10.0, 20.0, 30.0]).unwrap();
    for (which, want) in [(Op::Maximum, [1.0, 20.0, 3.0]), (Op::Minimum, [1.0, 20.0, 3.0])] {
        let y = g.op(which, &[a, b], true).unwrap();
        let t = jvp(&mut g, y, &[(a, ta), (b, tb)], true).unwrap().unwrap();
        assert_eq!(g.value(t).unwrap(), want, "{}", which.name());
    }
    let r = g.op(Op::Relu, &[b], true).unwrap();
    let t = jvp(&mut g, r, &[(b, tb)], true).unwrap().unwrap();
    assert_eq!(g.value(t).unwrap(), [10.0, 20.0, 0.0]);
}

/// Cholesky's tangent is one op, which takes the symmetric part of its
/// operand's tangent always, even where the leaves' values make that
/// tangent symmetric: eager and compiled tapes hold different leaves (a
/// constant here is an input there), so a choice made on values would
/// round the second derivatives differently in each. So Ȧ and Ȧᵀ give the
/// same bits; and the op has no tangent of its own (a third derivative).
#[test]
fn the_cholesky_tangent_is_one_op_on_the_symmetric_part() {
    let made = |name: &str, op: Op| {
        let c = cases().into_iter().find(|c| c.name == name).unwrap();
        let (mut g, leaves, root) = record(&c, &c.values);
        let seeds: Vec<(u32, u32)> = leaves.iter().map(|&l| (l, g.leaf(Op::Leaf, g.nodes[l as usize].shape, &[]).unwrap())).collect();
        let before = g.nodes.len();
        jvp(&mut g, root, &seeds, false).unwrap();
        g.nodes[before..].iter().filter(|n| n.op == op).count()
    };
    assert_eq!(made("cholesky of a kernel matrix", Op::CholeskyTangent), 1);
    assert_eq!(made("cholesky of a kernel matrix", Op::Transpose), 0);
    assert_eq!(made("cholesky", Op::Transpose), 1); // Aᵀ's tangent inside A Aᵀ

    let mut g = Graph::default();
    let x = g.leaf(Op::Leaf, m(3, 3), &wave(9, 1.3)).unwrap();
    let a = spd(&mut g, x);
    let l = g.op(Op::Cholesky, &[a], true).unwrap();
    let da = g.leaf(Op::Leaf, m(3, 3), &wave(9, 4.1)).unwrap();
    let dat = g.op(Op::Transpose, &[da], true).unwrap();
    let t = g.op(Op::CholeskyTangent, &[l, da], true).unwrap();
    let tt = g.op(Op::CholeskyTangent, &[l, dat], true).unwrap();
    let bits = |g: &Graph, id: u32| g.value(id).unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&g, t), bits(&g, tt));
    assert!(g.value(t).unwrap().iter().any(|&x| x != 0.0));
    let dd = g.leaf(Op::Const, m(3, 3), &wave(9, 2.2)).unwrap();
    let err = jvp(&mut g, t, &[(da, dd)], true).unwrap_err();
    assert!(err.0.contains("choleskyTangent has no forward rule"), "{}", err.0);
}

/// A solve's rule masks its matrix's tangent to the triangle the solve
/// reads, unless that tangent is zero outside it already (a Cholesky
/// factor's, or its transpose's); and −(−ẋ) is ẋ.
#[test]
fn the_tangent_of_a_solve_through_a_factor_needs_no_mask_and_no_double_negation() {
    let c = cases().into_iter().find(|c| c.name == "solve through a Cholesky factor").unwrap();
    let (mut g, leaves, root) = record(&c, &c.values);
    let seeds: Vec<(u32, u32)> = leaves.iter().map(|&l| (l, g.leaf(Op::Leaf, g.nodes[l as usize].shape, &[]).unwrap())).collect();
    let before = g.nodes.len();
    jvp(&mut g, root, &seeds, false).unwrap();
    let made = &g.nodes[before..];
    let masks = made.iter().filter(|n| n.op == Op::Const && n.shape == m(3, 3)).count();
    assert_eq!(masks, 0, "no triangle (and Φ is inside the factor's tangent)");
    let negations = made.iter().filter(|n| n.op == Op::Neg && g.nodes[n.parents[0] as usize].op == Op::Neg).count();
    assert_eq!(negations, 0);
    // A solve by a matrix leaf still masks its tangent (what it reads of it).
    let c = cases().into_iter().find(|c| c.name == "triangularSolve upper").unwrap();
    let (mut g, leaves, root) = record(&c, &c.values);
    let seeds: Vec<(u32, u32)> = leaves.iter().map(|&l| (l, g.leaf(Op::Leaf, g.nodes[l as usize].shape, &[]).unwrap())).collect();
    let before = g.nodes.len();
    jvp(&mut g, root, &seeds, false).unwrap();
    assert_eq!(g.nodes[before..].iter().filter(|n| n.op == Op::Const && n.shape == m(3, 3)).count(), 1);
}

/// Where large adjoints share blocks of the arena, the primal sweep lays
/// out blocks of its own by when its adjoints are live: the plan's
/// gradient still, bit for bit, after the tangent's sweep has used the
/// arena its own way.
#[test]
fn a_tangent_plan_with_shared_adjoint_blocks_sweeps_the_plans_gradient() {
    let mut g = Graph::default();
    let n = 80; // 6 400 values a matrix, past SHARE_ADJOINTS_FROM
    let x = g.leaf(Op::Leaf, m(n, n), &wave(n * n, 0.3)).unwrap();
    let e = op(&mut g, Op::Exp, &[x]);
    let p = op(&mut g, Op::Mul, &[e, x]);
    let t = op(&mut g, Op::Transpose, &[p]);
    let q = op(&mut g, Op::Add, &[p, t]);
    let r = op(&mut g, Op::Tanh, &[q]);
    let s = op(&mut g, Op::Sum, &[r]);
    let mut plan = Plan::build(&g, s, &[x], &[]).unwrap();
    let mut tp = plan.tangent_plan().unwrap();
    for (at, dir) in [(0.3, 1.9), (0.7, -0.4)] {
        plan.set(0, &wave(n * n, at)).unwrap();
        plan.forward().unwrap();
        plan.backward();
        let mut want = vec![0.0; n * n];
        plan.gradient(0, &mut want).unwrap();
        tp.set(0, &wave(n * n, at)).unwrap();
        tp.set(1, &wave(n * n, dir)).unwrap();
        tp.forward().unwrap();
        tp.backward();
        let mut out = vec![f64::NAN; n * n];
        assert!(tp.primal_gradient(&mut out).unwrap());
        for (i, (a, b)) in out.iter().zip(&want).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "at {at}: gradient[{i}] {a} is not the plan's {b}");
        }
    }
}

/// A tangent plan whose large values no sweep reads take turns in shared
/// blocks (`values::share_values`) gives the bits of one that lays every
/// value out apart: the tangent and the primal root, each sweep's
/// gradient, and after a change of direction alone, `forward_tangent`'s
/// replay over the values the first left (where a block of a value that
/// does not move must not have been written by one that does).
#[test]
fn a_tangent_plan_whose_values_share_blocks_gives_the_same_bits() {
    let shared = Passes { share_values_past: 0, share_adjoints_from: 2, ..Passes::default() };
    let apart = Passes { share_values_past: usize::MAX, share_adjoints_from: usize::MAX, ..Passes::default() };
    let mut smaller = Vec::new();
    for c in cases() {
        let (mut g, leaves, root) = record(&c, &c.values);
        let s = scalar(&mut g, root);
        let plan = Plan::build(&g, s, &leaves, &[]).unwrap();
        let mut tps = [plan.tangent_plan_with(shared).unwrap(), plan.tangent_plan_with(apart).unwrap()];
        if tps[0].held() < tps[1].held() {
            smaller.push(c.name);
        }
        let n = c.shapes.len();
        for round in 0..3 {
            let dirs: Vec<Vec<f64>> = c.shapes.iter().enumerate().map(|(k, s)| wave(s.size(), 4.2 + k as f64 + round as f64)).collect();
            let results: Vec<Vec<u64>> = tps
                .iter_mut()
                .map(|tp| {
                    for (i, d) in dirs.iter().enumerate() {
                        if round == 0 {
                            tp.set(i, &c.values[i]).unwrap();
                        }
                        tp.set(n + i, d).unwrap();
                    }
                    let mut out = vec![if round == 0 { tp.forward().unwrap()[0] } else { tp.forward_tangent().unwrap()[0] }];
                    out.extend_from_slice(tp.output(0).unwrap());
                    tp.backward();
                    for (i, sh) in c.shapes.iter().chain(&c.shapes).enumerate() {
                        let mut gi = vec![0.0; sh.size()];
                        tp.gradient(i, &mut gi).unwrap();
                        out.extend(gi);
                    }
                    let mut primal = vec![0.0; c.values.iter().map(Vec::len).sum()];
                    assert!(tp.primal_gradient(&mut primal).unwrap(), "{}: no primal sweep", c.name);
                    out.extend(primal);
                    out.iter().map(|x| x.to_bits()).collect()
                })
                .collect();
            assert_eq!(results[0], results[1], "{}, round {round}: shared blocks changed the bits", c.name);
        }
    }
    for name in ["cholesky of a kernel matrix", "solve through a Cholesky factor", "solveGeneral"] {
        assert!(smaller.contains(&name), "{name}: no value was laid out in a shared block ({smaller:?})");
    }
}
