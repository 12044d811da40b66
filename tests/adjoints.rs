//! Every op's adjoint in the core, against central finite differences of a
//! composed scalar objective Σ W ∘ op(parameters) with a fixed random W.

use tangent_grad::core::graph::Graph;
use tangent_grad::core::op::{Exponent, Op};
use tangent_grad::core::shape::Shape;
use tangent_grad::core::tape::Tape;

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64) / ((1u64 << 53) as f64)
    }
    fn vec(&mut self, n: usize, lo: f64, hi: f64) -> Vec<f64> {
        (0..n).map(|_| lo + (hi - lo) * self.next()).collect()
    }
}

/// Builds the op under test from parameter leaves; returns its node.
type Build = fn(&mut Graph, &[u32]) -> u32;

struct Case {
    name: &'static str,
    params: Vec<Shape>,
    /// Range the parameter values are drawn from (kept inside each op's domain).
    range: (f64, f64),
    build: Build,
}

fn op(g: &mut Graph, op: Op, parents: &[u32]) -> u32 {
    g.op(op, parents, true).unwrap_or_else(|e| panic!("{}: {e}", op.name()))
}

/// A symmetric positive definite matrix from a square parameter X: X Xᵀ + n I.
fn spd(g: &mut Graph, x: u32, n: usize) -> u32 {
    let xt = op(g, Op::Transpose, &[x]);
    let xxt = op(g, Op::Matmul, &[x, xt]);
    let c = g.leaf(Op::Const, Shape::Scalar, &[n as f64]).unwrap();
    op(g, Op::AddDiag, &[xxt, c])
}

/// Value of Σ W ∘ op(params) and, when asked, the parameters' gradients.
fn evaluate(case: &Case, values: &[Vec<f64>], w_seed: u64, with_grad: bool) -> (f64, Vec<Vec<f64>>) {
    let mut t = Tape::default();
    let leaves: Vec<u32> =
        case.params.iter().zip(values).map(|(&s, v)| t.graph.leaf(Op::Leaf, s, v).unwrap()).collect();
    let out = (case.build)(&mut t.graph, &leaves);
    let shape = t.graph.node(out).unwrap().shape;
    let w = Lcg(w_seed).vec(shape.size(), -1.0, 1.0);
    let wc = t.graph.leaf(Op::Const, shape, &w).unwrap();
    let prod = op(&mut t.graph, Op::Mul, &[wc, out]);
    let root = op(&mut t.graph, Op::Sum, &[prod]);
    let value = t.graph.value(root).unwrap()[0];
    if !with_grad {
        return (value, vec![]);
    }
    assert_eq!(t.backward(root, None).unwrap(), None);
    let grads = leaves
        .iter()
        .zip(&case.params)
        .map(|(&l, s)| t.adjoint(l).map_or(vec![0.0; s.size()], <[f64]>::to_vec))
        .collect();
    (value, grads)
}

fn check(case: &Case) {
    let mut r = Lcg(7);
    let values: Vec<Vec<f64>> = case.params.iter().map(|s| r.vec(s.size(), case.range.0, case.range.1)).collect();
    let (_, grads) = evaluate(case, &values, 99, true);
    for (i, g) in grads.iter().enumerate() {
        for j in 0..g.len() {
            let x = values[i][j];
            let h = 1e-6 * x.abs().max(1.0);
            let at = |d: f64| {
                let mut v = values.clone();
                v[i][j] = x + d;
                evaluate(case, &v, 99, false).0
            };
            let fd = (at(h) - at(-h)) / (2.0 * h);
            let err = (fd - g[j]).abs() / fd.abs().max(g[j].abs()).max(1.0);
            assert!(err <= 1e-7, "{}: d/dp{i}[{j}] adjoint {} vs finite difference {fd} (error {err:e})", case.name, g[j]);
        }
    }
}

fn cases() -> Vec<Case> {
    let v3 = Shape::Vector(3);
    let m23 = Shape::Matrix(2, 3);
    let m33 = Shape::Matrix(3, 3);
    let s = Shape::Scalar;
    let unary = |name, op: Op, range| Case { name, params: vec![m23], range, build: unary_build(op) };
    vec![
        Case { name: "add same", params: vec![m23, m23], range: (-2.0, 2.0), build: |g, p| op(g, Op::Add, &[p[0], p[1]]) },
        Case { name: "sub scalar left", params: vec![s, m23], range: (-2.0, 2.0), build: |g, p| op(g, Op::Sub, &[p[0], p[1]]) },
        Case { name: "mul scalar right", params: vec![m23, s], range: (-2.0, 2.0), build: |g, p| op(g, Op::Mul, &[p[0], p[1]]) },
        Case { name: "div row left", params: vec![v3, m23], range: (0.5, 2.0), build: |g, p| op(g, Op::Div, &[p[0], p[1]]) },
        Case { name: "div row right", params: vec![m23, v3], range: (0.5, 2.0), build: |g, p| op(g, Op::Div, &[p[0], p[1]]) },
        Case { name: "mul same operand twice", params: vec![v3], range: (-2.0, 2.0), build: |g, p| op(g, Op::Mul, &[p[0], p[0]]) },
        Case { name: "maximum", params: vec![m23, m23], range: (-2.0, 2.0), build: |g, p| op(g, Op::Maximum, &[p[0], p[1]]) },
        Case { name: "minimum row", params: vec![m23, v3], range: (-2.0, 2.0), build: |g, p| op(g, Op::Minimum, &[p[0], p[1]]) },
        unary("neg", Op::Neg, (-2.0, 2.0)),
        unary("exp", Op::Exp, (-2.0, 2.0)),
        unary("log", Op::Log, (0.5, 3.0)),
        unary("sqrt", Op::Sqrt, (0.5, 3.0)),
        unary("square", Op::Square, (-2.0, 2.0)),
        unary("tanh", Op::Tanh, (-2.0, 2.0)),
        unary("sigmoid", Op::Sigmoid, (-3.0, 3.0)),
        unary("relu", Op::Relu, (-2.0, 2.0)),
        unary("lgamma", Op::Lgamma, (0.3, 5.0)),
        unary("digamma", Op::Digamma, (0.3, 5.0)),
        // The indicators a tangent rule records: flat on either side, so no adjoint.
        Case { name: "greaterEqual", params: vec![m23, m23], range: (-2.0, 2.0), build: |g, p| op(g, Op::Ge, &[p[0], p[1]]) },
        Case { name: "greater", params: vec![m23, s], range: (-2.0, 2.0), build: |g, p| op(g, Op::Gt, &[p[0], p[1]]) },
        unary("pow", Op::Pow(Exponent::new(2.5)), (0.5, 2.0)),
        unary("sum", Op::Sum, (-2.0, 2.0)),
        unary("mean", Op::Mean, (-2.0, 2.0)),
        unary("transpose", Op::Transpose, (-2.0, 2.0)),
        unary("reshape", Op::Reshape(Shape::Matrix(3, 2)), (-2.0, 2.0)),
        Case { name: "matmul", params: vec![m23, Shape::Matrix(3, 4)], range: (-1.0, 1.0), build: |g, p| op(g, Op::Matmul, &[p[0], p[1]]) },
        Case {
            name: "matmul large (gemm path)",
            params: vec![Shape::Matrix(7, 6), Shape::Matrix(6, 8)],
            range: (-1.0, 1.0),
            build: |g, p| op(g, Op::Matmul, &[p[0], p[1]]),
        },
        Case { name: "matmul vector", params: vec![m23, v3], range: (-1.0, 1.0), build: |g, p| op(g, Op::Matmul, &[p[0], p[1]]) },
        Case { name: "dot", params: vec![v3, v3], range: (-1.0, 1.0), build: |g, p| op(g, Op::Dot, &[p[0], p[1]]) },
        Case { name: "diagPart", params: vec![m33], range: (-1.0, 1.0), build: |g, p| op(g, Op::DiagPart, &[p[0]]) },
        Case { name: "addDiag scalar", params: vec![m33, s], range: (-1.0, 1.0), build: |g, p| op(g, Op::AddDiag, &[p[0], p[1]]) },
        Case { name: "addDiag vector", params: vec![m33, v3], range: (-1.0, 1.0), build: |g, p| op(g, Op::AddDiag, &[p[0], p[1]]) },
        Case {
            name: "slice",
            params: vec![Shape::Matrix(3, 4)],
            range: (-1.0, 1.0),
            build: |g, p| op(g, Op::Slice { start: [1, 1], size: [2, 2] }, &[p[0]]),
        },
        Case {
            name: "concat vectors and scalars",
            params: vec![v3, s, Shape::Vector(2)],
            range: (-1.0, 1.0),
            build: |g, p| op(g, Op::Concat { axis: 0 }, &[p[0], p[1], p[2]]),
        },
        Case {
            name: "concat matrices side by side",
            params: vec![m23, Shape::Matrix(2, 1)],
            range: (-1.0, 1.0),
            build: |g, p| op(g, Op::Concat { axis: 1 }, &[p[0], p[1]]),
        },
        Case {
            name: "cholesky",
            params: vec![m33],
            range: (-1.0, 1.0),
            build: |g, p| {
                let a = spd(g, p[0], 3);
                op(g, Op::Cholesky, &[a])
            },
        },
        Case {
            name: "triangularSolve lower, matrix right-hand side",
            params: vec![m33, Shape::Matrix(3, 2)],
            range: (-1.0, 1.0),
            build: |g, p| {
                let a = spd(g, p[0], 3);
                let l = op(g, Op::Cholesky, &[a]);
                op(g, Op::TriangularSolve { lower: true }, &[l, p[1]])
            },
        },
        Case {
            name: "triangularSolve upper, vector",
            params: vec![m33, v3],
            range: (-1.0, 1.0),
            build: |g, p| {
                let a = spd(g, p[0], 3);
                let l = op(g, Op::Cholesky, &[a]);
                let u = op(g, Op::Transpose, &[l]);
                op(g, Op::TriangularSolve { lower: false }, &[u, p[1]])
            },
        },
        // The Cholesky tangent L Φ(L⁻¹ sym(Ȧ) L⁻ᵀ): Ȧ not symmetric, L a
        // factor, or a leaf whose upper triangle the op does not read.
        Case {
            name: "choleskyTangent",
            params: vec![m33, m33],
            range: (-1.0, 1.0),
            build: |g, p| {
                let a = spd(g, p[0], 3);
                let l = op(g, Op::Cholesky, &[a]);
                op(g, Op::CholeskyTangent, &[l, p[1]])
            },
        },
        Case { name: "choleskyTangent of a leaf", params: vec![m33, m33], range: (1.0, 2.0), build: |g, p| op(g, Op::CholeskyTangent, &[p[0], p[1]]) },
        Case {
            name: "choleskyTangent large (library paths)",
            params: vec![Shape::Matrix(64, 64), Shape::Matrix(64, 64)],
            range: (-1.0, 1.0),
            build: |g, p| {
                let a = spd(g, p[0], 64);
                let l = op(g, Op::Cholesky, &[a]);
                op(g, Op::CholeskyTangent, &[l, p[1]])
            },
        },
        Case {
            name: "solveGeneral",
            params: vec![m33, Shape::Matrix(3, 2)],
            range: (-1.0, 1.0),
            build: |g, p| {
                let c = g.leaf(Op::Const, Shape::Scalar, &[3.0]).unwrap();
                let a = op(g, Op::AddDiag, &[p[0], c]);
                op(g, Op::SolveGeneral, &[a, p[1]])
            },
        },
    ]
}

fn unary_build(o: Op) -> Build {
    macro_rules! one {
        ($($pat:pat => $op:expr),*) => {
            match o {
                $($pat => |g: &mut Graph, p: &[u32]| op(g, $op, &[p[0]]),)*
                _ => unreachable!(),
            }
        };
    }
    one!(
        Op::Neg => Op::Neg, Op::Exp => Op::Exp, Op::Log => Op::Log, Op::Sqrt => Op::Sqrt,
        Op::Square => Op::Square, Op::Tanh => Op::Tanh, Op::Sigmoid => Op::Sigmoid, Op::Relu => Op::Relu,
        Op::Lgamma => Op::Lgamma, Op::Digamma => Op::Digamma, Op::Pow(_) => Op::Pow(Exponent::new(2.5)), Op::Sum => Op::Sum, Op::Mean => Op::Mean,
        Op::Transpose => Op::Transpose, Op::Reshape(_) => Op::Reshape(Shape::Matrix(3, 2))
    )
}

#[test]
fn every_adjoint_matches_central_differences() {
    for case in cases() {
        check(&case);
    }
}

/// Every op computed by the core (all but the leaves and hand-built nodes,
/// whose adjoints are JavaScript's) is the result of at least one case above.
/// `Op::ALL` is declared with the enum itself, so a new op is listed there
/// and fails here until it is given a case.
#[test]
fn every_op_has_an_adjoint_case() {
    let tested: Vec<&str> = cases()
        .iter()
        .map(|case| {
            let mut g = Graph::default();
            let mut r = Lcg(7);
            let leaves: Vec<u32> = case
                .params
                .iter()
                .map(|&s| g.leaf(Op::Leaf, s, &r.vec(s.size(), case.range.0, case.range.1)).unwrap())
                .collect();
            let out = (case.build)(&mut g, &leaves);
            g.node(out).unwrap().op.name()
        })
        .collect();
    for op in Op::ALL.iter().filter(|op| op.is_pure()) {
        assert!(tested.contains(&op.name()), "{} has no case in tests/adjoints.rs", op.name());
    }
}

/// d log|A| / dA = A⁻¹, through cholesky, diagPart, log and sum, for A given
/// directly as a (symmetric) parameter.
#[test]
fn logdet_gradient_is_the_inverse() {
    let n = 4;
    let mut r = Lcg(3);
    let x = r.vec(n * n, -1.0, 1.0);
    // A = X Xᵀ + n I, symmetric positive definite.
    let mut a = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            a[i * n + j] = (0..n).map(|k| x[i * n + k] * x[j * n + k]).sum::<f64>() + if i == j { n as f64 } else { 0.0 };
        }
    }
    let mut t = Tape::default();
    let g = &mut t.graph;
    let leaf = g.leaf(Op::Leaf, Shape::Matrix(n, n), &a).unwrap();
    let l = op(g, Op::Cholesky, &[leaf]);
    let d = op(g, Op::DiagPart, &[l]);
    let lg = op(g, Op::Log, &[d]);
    let s = op(g, Op::Sum, &[lg]);
    let two = g.leaf(Op::Const, Shape::Scalar, &[2.0]).unwrap();
    let root = op(g, Op::Mul, &[two, s]);
    t.backward(root, None).unwrap();
    let grad = t.adjoint(leaf).unwrap().to_vec();
    // A⁻¹ by Gauss–Jordan, independently of the package's solvers.
    let mut m = a.clone();
    let mut inv: Vec<f64> = (0..n * n).map(|k| if k % (n + 1) == 0 { 1.0 } else { 0.0 }).collect();
    for c in 0..n {
        let p = m[c * n + c];
        for j in 0..n {
            m[c * n + j] /= p;
            inv[c * n + j] /= p;
        }
        for i in 0..n {
            if i != c {
                let f = m[i * n + c];
                for j in 0..n {
                    m[i * n + j] -= f * m[c * n + j];
                    inv[i * n + j] -= f * inv[c * n + j];
                }
            }
        }
    }
    for k in 0..n * n {
        assert!((grad[k] - inv[k]).abs() <= 1e-10, "entry {k}: {} vs {}", grad[k], inv[k]);
    }
}

/// Zero-sized operands (a [0×0] matrix, a [0] vector, a [2×0]·[0×3] product)
/// flow through every kernel forward and backward without a panic.
#[test]
fn empty_shapes_go_through_every_kernel() {
    let mut t = Tape::default();
    let g = &mut t.graph;
    let e = g.leaf(Op::Leaf, Shape::Matrix(0, 0), &[]).unwrap();
    let v0 = g.leaf(Op::Leaf, Shape::Vector(0), &[]).unwrap();
    let a = g.leaf(Op::Leaf, Shape::Matrix(2, 0), &[]).unwrap();
    let b = g.leaf(Op::Leaf, Shape::Matrix(0, 3), &[]).unwrap();
    let mut terms = vec![];
    let d = op(g, Op::DiagPart, &[e]);
    terms.push(op(g, Op::Div, &[e, d]));
    terms.push(op(g, Op::Mul, &[d, e]));
    terms.push(op(g, Op::Matmul, &[a, b]));
    terms.push(op(g, Op::Matmul, &[a, v0]));
    terms.push(op(g, Op::Dot, &[v0, v0]));
    terms.push(op(g, Op::Exp, &[v0]));
    terms.push(op(g, Op::Tanh, &[a]));
    terms.push(op(g, Op::Transpose, &[a]));
    terms.push(op(g, Op::Cholesky, &[e]));
    terms.push(op(g, Op::SolveGeneral, &[e, e]));
    terms.push(op(g, Op::TriangularSolve { lower: true }, &[e, v0]));
    terms.push(op(g, Op::AddDiag, &[e, v0]));
    let sums: Vec<u32> = terms.iter().map(|&x| op(g, Op::Sum, &[x])).collect();
    let root = op(g, Op::Concat { axis: 0 }, &sums);
    let root = op(g, Op::Sum, &[root]);
    assert!(t.backward(root, None).unwrap().is_none());
    // [2×0]·[0×3] is a zero matrix, so its sum is 0.
    assert_eq!(t.graph.value(root).unwrap()[0], 0.0);
}
