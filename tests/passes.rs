//! The plan optimizer's passes must never change a number: values and
//! gradients are compared bit for bit (f64::to_bits) with every pass
//! combination on and off, and against the eager tape. Also: dead nodes are
//! dropped, constant subgraphs are folded, identical nodes are merged.

use tangent_grad::core::graph::{post_order, Graph};
use tangent_grad::core::op::Op;
use tangent_grad::core::plan::{Passes, Plan, SHARE_ADJOINTS_FROM};
use tangent_grad::core::shape::Shape;
use tangent_grad::core::tape::Tape;

// ---------------------------------------------------------------- recording helpers

/// Records into a graph with values computed on the spot (as the eager tape does).
struct Rec<'a> {
    g: &'a mut Graph,
    params: Vec<u32>,
    inputs: Vec<u32>,
}

impl<'a> Rec<'a> {
    fn new(g: &'a mut Graph) -> Self {
        Rec { g, params: Vec::new(), inputs: Vec::new() }
    }
    fn param(&mut self, shape: Shape, data: &[f64]) -> u32 {
        let id = self.g.leaf(Op::Leaf, shape, data).unwrap();
        self.params.push(id);
        id
    }
    fn input(&mut self, shape: Shape, data: &[f64]) -> u32 {
        let id = self.g.leaf(Op::Input, shape, data).unwrap();
        self.inputs.push(id);
        id
    }
    fn konst(&mut self, shape: Shape, data: &[f64]) -> u32 {
        self.g.leaf(Op::Const, shape, data).unwrap()
    }
    fn num(&mut self, x: f64) -> u32 {
        self.konst(Shape::Scalar, &[x])
    }
    fn op(&mut self, op: Op, parents: &[u32]) -> u32 {
        self.g.op(op, parents, true).unwrap_or_else(|e| panic!("{}: {e}", op.name()))
    }
    fn op1(&mut self, op: Op, a: u32) -> u32 {
        self.op(op, &[a])
    }
    fn op2(&mut self, op: Op, a: u32, b: u32) -> u32 {
        self.op(op, &[a, b])
    }
}

/// A recorded objective: parameter and input leaves (in slot order) and the root.
struct Objective {
    params: Vec<u32>,
    inputs: Vec<u32>,
    root: u32,
}

/// Parameter values then input values, one Vec per slot.
type Args = (Vec<Vec<f64>>, Vec<Vec<f64>>);

/// A test case: how to record it at given arguments, and argument sets.
struct Case {
    name: &'static str,
    record: fn(&mut Rec, &Args) -> u32,
    args: Vec<Args>,
}

fn record(case: &Case, args: &Args) -> (Tape, Objective) {
    let mut tape = Tape::default();
    let (params, inputs, root) = {
        let mut r = Rec::new(&mut tape.graph);
        let root = (case.record)(&mut r, args);
        (r.params, r.inputs, root)
    };
    assert_eq!(params.len(), args.0.len(), "{}: parameter count", case.name);
    assert_eq!(inputs.len(), args.1.len(), "{}: input count", case.name);
    (tape, Objective { params, inputs, root })
}

/// Value and per-parameter gradients, as bits.
#[derive(Debug, PartialEq)]
struct Bits {
    value: u64,
    grads: Vec<Vec<u64>>,
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn eager(tape: &mut Tape, obj: &Objective) -> Bits {
    assert_eq!(tape.backward(obj.root, None).unwrap(), None, "no hand-built node to pause at");
    let value = tape.graph.value(obj.root).unwrap()[0];
    let grads = obj
        .params
        .iter()
        .map(|&p| match tape.adjoint(p) {
            Some(a) => bits(a),
            None => vec![0f64.to_bits(); tape.graph.node(p).unwrap().shape.size()],
        })
        .collect();
    Bits { value: value.to_bits(), grads }
}

fn replay(plan: &mut Plan, args: &Args) -> Bits {
    let np = args.0.len();
    for (i, v) in args.0.iter().enumerate() {
        plan.set(i, v).unwrap();
    }
    for (j, v) in args.1.iter().enumerate() {
        plan.set(np + j, v).unwrap();
    }
    let value = plan.forward().unwrap()[0];
    plan.backward();
    let grads = (0..np)
        .map(|i| {
            let mut out = vec![f64::NAN; args.0[i].len()];
            plan.gradient(i, &mut out).unwrap();
            bits(&out)
        })
        .collect();
    Bits { value: value.to_bits(), grads }
}

fn show(b: &Bits) -> String {
    format!(
        "value {} grads {:?}",
        f64::from_bits(b.value),
        b.grads.iter().map(|g| g.iter().map(|&x| f64::from_bits(x)).collect::<Vec<_>>()).collect::<Vec<_>>()
    )
}

const NO_SHARING: usize = usize::MAX;
const COMBOS: [Passes; 7] = [
    Passes { fold_constants: false, skip_constant_adjoints: false, merge_identical: true, share_adjoints_from: NO_SHARING, share_values_past: NO_SHARING },
    Passes { fold_constants: true, skip_constant_adjoints: false, merge_identical: true, share_adjoints_from: NO_SHARING, share_values_past: NO_SHARING },
    Passes { fold_constants: false, skip_constant_adjoints: true, merge_identical: true, share_adjoints_from: NO_SHARING, share_values_past: NO_SHARING },
    Passes { fold_constants: true, skip_constant_adjoints: true, merge_identical: true, share_adjoints_from: NO_SHARING, share_values_past: NO_SHARING },
    // Every vector and matrix adjoint in shared blocks (by default only large
    // ones are), and the second time every such value no sweep reads too.
    Passes { fold_constants: true, skip_constant_adjoints: true, merge_identical: true, share_adjoints_from: 2, share_values_past: NO_SHARING },
    Passes { fold_constants: false, skip_constant_adjoints: false, merge_identical: true, share_adjoints_from: 2, share_values_past: 0 },
    Passes { fold_constants: true, skip_constant_adjoints: true, merge_identical: true, share_adjoints_from: 2, share_values_past: 0 },
];

/// The heart of it: for each pass combination, a plan built from the tape
/// recorded at the first argument set, replayed at every argument set, gives
/// the eager tape's bits recorded at that set.
fn check_case(case: &Case) {
    let (tape0, obj0) = record(case, &case.args[0]);
    let mut plans: Vec<Plan> = COMBOS
        .iter()
        .map(|&passes| Plan::build_with(&tape0.graph, obj0.root, &obj0.params, &obj0.inputs, passes).unwrap())
        .collect();
    for (k, args) in case.args.iter().enumerate() {
        let (mut tape, obj) = record(case, args);
        let expected = eager(&mut tape, &obj);
        // A meaningful comparison: finite numbers, not all zeros.
        assert!(f64::from_bits(expected.value).is_finite(), "{} args #{k}: value {}", case.name, show(&expected));
        let finite = expected.grads.iter().flatten().all(|&b| f64::from_bits(b).is_finite());
        assert!(finite, "{} args #{k}: {}", case.name, show(&expected));
        if case.name != "constant root" {
            assert!(expected.grads.iter().flatten().any(|&b| f64::from_bits(b) != 0.0), "{}: all-zero gradient", case.name);
        }
        for (plan, passes) in plans.iter_mut().zip(COMBOS.iter()) {
            let got = replay(plan, args);
            assert!(
                got == expected,
                "{} args #{k} with {:?}:\n plan  {}\n eager {}",
                case.name,
                passes,
                show(&got),
                show(&expected)
            );
        }
        // Replaying twice in a row changes nothing either (arenas reused).
        let again = replay(&mut plans[3], args);
        assert!(again == expected, "{} args #{k}: second replay differs", case.name);
    }
}

// ---------------------------------------------------------------- data

struct Lcg(u32);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(1664525).wrapping_add(1013904223);
        self.0 as f64 / 4294967296.0
    }
    fn normal(&mut self) -> f64 {
        let u = self.next().max(1e-12);
        let v = self.next();
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
    fn vec(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.normal()).collect()
    }
}

const RN: usize = 340;
const RP: usize = 13;

fn regression_data() -> (Vec<f64>, Vec<f64>) {
    let mut r = Lcg(42);
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for _ in 0..RN {
        let row = r.vec(RP);
        let m = 1.0 + row.iter().enumerate().map(|(j, v)| (0.5 + 0.1 * j as f64) * v).sum::<f64>();
        y.push(m + 0.7 * r.normal());
        x.extend_from_slice(&row);
    }
    (x, y)
}

fn regression_args(k: usize) -> Vec<Vec<f64>> {
    let t = k as f64;
    vec![
        vec![0.9 + 0.1 * t],
        (0..RP).map(|j| 0.4 + 0.1 * j as f64 + 0.01 * t * (j as f64 - 6.0)).collect(),
        vec![-0.3 - 0.05 * t],
    ]
}

/// Sorted points on [0, 10) and their squared distances, as models.mjs's gpData.
fn gp_data(n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut r = Lcg(3);
    let mut xs: Vec<f64> = (0..n).map(|_| 10.0 * r.next()).collect();
    xs.sort_by(f64::total_cmp);
    let y: Vec<f64> = xs.iter().map(|&x| x.sin() + 0.15 * (4.0 * x).cos() + 0.1 * r.normal()).collect();
    let d2 = xs.iter().flat_map(|&a| xs.iter().map(move |&b| (a - b) * (a - b))).collect();
    (d2, y)
}

const GN: usize = 25;

// ---------------------------------------------------------------- the objectives

/// mu = X·beta + intercept; z = (y − mu)/exp(logSigma); −0.5·Σz² − n·logSigma.
fn rec_regression(r: &mut Rec, a: &Args) -> u32 {
    let (x, y) = regression_data();
    let pi = r.param(Shape::Scalar, &a.0[0]);
    let pb = r.param(Shape::Vector(RP), &a.0[1]);
    let ps = r.param(Shape::Scalar, &a.0[2]);
    let cx = r.konst(Shape::Matrix(RN, RP), &x);
    let xb = r.op2(Op::Matmul, cx, pb);
    let mu = r.op2(Op::Add, xb, pi);
    let cy = r.konst(Shape::Vector(RN), &y);
    let res = r.op2(Op::Sub, cy, mu);
    let s = r.op1(Op::Exp, ps);
    let z = r.op2(Op::Div, res, s);
    let half = r.num(-0.5);
    let zz = r.op1(Op::Square, z);
    let ss = r.op1(Op::Sum, zz);
    let a1 = r.op2(Op::Mul, half, ss);
    let n = r.num(RN as f64);
    let a2 = r.op2(Op::Mul, n, ps);
    r.op2(Op::Sub, a1, a2)
}

/// The regression with X and y fed as inputs; an input-only subgraph
/// (exp(neg(y))) must not be folded.
fn rec_regression_inputs(r: &mut Rec, a: &Args) -> u32 {
    let pi = r.param(Shape::Scalar, &a.0[0]);
    let pb = r.param(Shape::Vector(RP), &a.0[1]);
    let ps = r.param(Shape::Scalar, &a.0[2]);
    let ix = r.input(Shape::Matrix(20, RP), &a.1[0]);
    let iy = r.input(Shape::Vector(20), &a.1[1]);
    let xb = r.op2(Op::Matmul, ix, pb);
    let mu = r.op2(Op::Add, xb, pi);
    let res = r.op2(Op::Sub, iy, mu);
    let s = r.op1(Op::Exp, ps);
    let z = r.op2(Op::Div, res, s);
    let zz = r.op1(Op::Square, z);
    let ss = r.op1(Op::Sum, zz);
    let half = r.num(-0.5);
    let a1 = r.op2(Op::Mul, half, ss);
    let ny = r.op1(Op::Neg, iy);
    let ey = r.op1(Op::Exp, ny);
    let w = r.op2(Op::Dot, ey, iy);
    let a2 = r.op2(Op::Mul, w, ps);
    r.op2(Op::Sub, a1, a2)
}

/// Cholesky-based GP: K = v·exp(−D2) + l²·exp(−D2/4) + 0.05 I (two
/// constant-only subgraphs), then solvePSD and logdetPSD of the same K built
/// from cholesky/transpose/triangularSolve/diagPart/log/sum/mul as SPEC §5
/// composes them, cholesky(K) recorded twice and merged.
fn rec_gp_const(r: &mut Rec, a: &Args) -> u32 {
    let (d2, y) = gp_data(GN);
    let pl = r.param(Shape::Scalar, &a.0[0]);
    let pv = r.param(Shape::Scalar, &a.0[1]);
    let cd = r.konst(Shape::Matrix(GN, GN), &d2);
    let nd = r.op1(Op::Neg, cd);
    let r1 = r.op1(Op::Exp, nd);
    let quarter = r.num(0.25);
    let dq = r.op2(Op::Mul, cd, quarter);
    let ndq = r.op1(Op::Neg, dq);
    let r2 = r.op1(Op::Exp, ndq);
    let k1 = r.op2(Op::Mul, pv, r1);
    let l2 = r.op1(Op::Square, pl);
    let k2 = r.op2(Op::Mul, l2, r2);
    let k12 = r.op2(Op::Add, k1, k2);
    let noise = r.num(0.05);
    let k = r.op2(Op::AddDiag, k12, noise);
    gp_tail(r, k, &y)
}

/// -0.5·yᵀK⁻¹y − 0.5·log|K|, composed from the primitives.
fn gp_tail(r: &mut Rec, k: u32, y: &[f64]) -> u32 {
    let cy = r.konst(Shape::Vector(y.len()), y);
    // solvePSD(K, y)
    let l = r.op1(Op::Cholesky, k);
    let a1 = r.op2(Op::TriangularSolve { lower: true }, l, cy);
    let lt = r.op1(Op::Transpose, l);
    let alpha = r.op2(Op::TriangularSolve { lower: false }, lt, a1);
    let quad = r.op2(Op::Dot, cy, alpha);
    // logdetPSD(K): a second cholesky(K), merged into the first unless the
    // graph records without merging.
    let l_again = r.op1(Op::Cholesky, k);
    let merging = r.g.op(Op::Cholesky, &[k], false).unwrap() == l;
    assert_eq!(l_again == l, merging, "cholesky(K) recorded twice is one node when the graph merges");
    let dg = r.op1(Op::DiagPart, l_again);
    let lg = r.op1(Op::Log, dg);
    let s = r.op1(Op::Sum, lg);
    let two = r.num(2.0);
    let logdet = r.op2(Op::Mul, two, s);
    let mh = r.num(-0.5);
    let t1 = r.op2(Op::Mul, mh, quad);
    let h = r.num(0.5);
    let t2 = r.op2(Op::Mul, h, logdet);
    r.op2(Op::Sub, t1, t2)
}

/// The BENCH gp: K = addDiag(v·exp(−D2 / (2 l²)), 0.05).
fn rec_gp_bench(r: &mut Rec, a: &Args) -> u32 {
    rec_gp_n::<GN>(r, a)
}

/// A constant subgraph (tanh(C·B), a constant Cholesky solve, a constant
/// solveGeneral, slices/reshape/concat/pow of constants) feeding the
/// parameter path.
fn rec_const_feeds_param(r: &mut Rec, a: &Args) -> u32 {
    let mut g = Lcg(7);
    let pt = r.param(Shape::Vector(4), &a.0[0]);
    let pm = r.param(Shape::Matrix(2, 4), &a.0[1]);
    let c = r.konst(Shape::Matrix(6, 3), &g.vec(18));
    let b = r.konst(Shape::Matrix(3, 4), &g.vec(12));
    let cb = r.op2(Op::Matmul, c, b);
    let w = r.op1(Op::Tanh, cb); // [6×4]
    let wt = r.op1(Op::Transpose, w);
    let wtw = r.op2(Op::Matmul, wt, w);
    let one = r.num(1.0);
    let spd = r.op2(Op::AddDiag, wtw, one); // [4×4] SPD
    let l = r.op1(Op::Cholesky, spd);
    let rhs = r.konst(Shape::Vector(4), &g.vec(4));
    let sol = r.op2(Op::TriangularSolve { lower: true }, l, rhs);
    let gen = r.konst(
        Shape::Matrix(4, 4),
        &[4.0, 1.0, 0.5, 0.0, 0.2, 3.0, 0.1, 0.3, 0.0, 0.4, 5.0, 1.0, 0.6, 0.0, 0.2, 2.0],
    );
    let solg = r.op2(Op::SolveGeneral, gen, sol); // [4]
    let wblk = r.op1(Op::Slice { start: [1, 0], size: [4, 4] }, w); // [4×4]
    let flat = r.op1(Op::Reshape(Shape::Vector(16)), wblk);
    let part = r.op1(Op::Slice { start: [2, 0], size: [4, 0] }, flat); // [4]
    let sq = r.op1(Op::Square, part);
    let pw = r.op1(Op::Pow(tangent_grad::core::op::Exponent::new(1.5)), sq);
    let cc = r.op(Op::Concat { axis: 0 }, &[solg, pw]); // [8]
    let cm = r.op1(Op::Reshape(Shape::Matrix(2, 4)), cc);
    let dl = r.op1(Op::DiagPart, l);
    let ll = r.op1(Op::Log, dl);
    let logdet = r.op1(Op::Sum, ll); // constant scalar
    // The parameter path.
    let u = r.op2(Op::Mul, pt, solg);
    let v = r.op2(Op::Matmul, wblk, pt);
    let uv = r.op2(Op::Add, u, v);
    let mx = r.op2(Op::Maximum, uv, part);
    let h = r.op1(Op::Tanh, mx);
    let m = r.op2(Op::Mul, pm, cm);
    let mm = r.op2(Op::Matmul, m, h);
    let mm2 = r.op1(Op::Square, mm);
    let s1 = r.op1(Op::Sum, mm2);
    let s2 = r.op2(Op::Dot, h, part);
    let st = r.op1(Op::Sum, pt);
    let s3 = r.op2(Op::Mul, logdet, st);
    let s12 = r.op2(Op::Add, s1, s2);
    r.op2(Op::Add, s12, s3)
}

/// Many ops and broadcasting cases at once, parameters everywhere.
fn rec_many_ops(r: &mut Rec, a: &Args) -> u32 {
    let pa = r.param(Shape::Vector(3), &a.0[0]);
    let pm = r.param(Shape::Matrix(2, 3), &a.0[1]);
    let ps = r.param(Shape::Scalar, &a.0[2]);
    let pq = r.param(Shape::Matrix(3, 3), &a.0[3]);
    let m1 = r.op2(Op::Add, pm, pa); // row broadcast, right
    let m2 = r.op2(Op::Sub, ps, m1); // scalar left
    let m3 = r.op2(Op::Mul, pa, m2); // row broadcast, left
    let sg = r.op1(Op::Sigmoid, m3);
    let two = r.num(2.0);
    let d = r.op2(Op::Div, sg, two);
    let mx = r.op2(Op::Maximum, d, pm);
    let mn = r.op2(Op::Minimum, mx, ps);
    let rl = r.op1(Op::Relu, mn);
    let sqv = r.op1(Op::Square, pa);
    let one = r.num(1.0);
    let pos = r.op2(Op::Add, sqv, one);
    let lg = r.op1(Op::Lgamma, pos);
    let sq = r.op1(Op::Sqrt, pos);
    let lo = r.op1(Op::Log, sq);
    let pw = r.op1(Op::Pow(tangent_grad::core::op::Exponent::new(-1.5)), pos);
    let vv = r.op(Op::Concat { axis: 0 }, &[lg, ps, lo, pw]); // [10]
    let vm = r.op1(Op::Slice { start: [1, 0], size: [6, 0] }, vv);
    let vr = r.op1(Op::Reshape(Shape::Matrix(2, 3)), vm);
    let side = r.op(Op::Concat { axis: 1 }, &[rl, vr]); // [2×6]
    let stack = r.op(Op::Concat { axis: 0 }, &[rl, vr]); // [4×3]
    let st = r.op1(Op::Transpose, stack); // [3×4]
    let c63 = r_const_6x3(r);
    let prod = r.op2(Op::Matmul, side, c63); // [2×3]
    let sq3 = r.op2(Op::Matmul, st, stack); // [3×3]
    let dg = r.op1(Op::DiagPart, pq);
    let ad = r.op2(Op::AddDiag, sq3, dg);
    let five = r.num(5.0);
    let qq = r.op2(Op::AddDiag, pq, five);
    let sol = r.op2(Op::SolveGeneral, qq, pa);
    let t1 = r.op1(Op::Mean, prod);
    let t2 = r.op1(Op::Sum, ad);
    let t3 = r.op2(Op::Dot, sol, pa);
    let th = r.op1(Op::Tanh, t3);
    let ex = r.op1(Op::Exp, th);
    let ng = r.op1(Op::Neg, ex);
    let a12 = r.op2(Op::Add, t1, t2);
    r.op2(Op::Mul, a12, ng)
}

/// Adjoints that turn live at their first writer, which assigns into them
/// rather than adding to a cleared block (`kernels::FirstWrites`): writers
/// that assign (elementwise, transpose, addDiag, reshape), ones that add
/// (a product, a sum's), a node written by several steps, one read twice
/// by one op, and a row broadcast whose adjoint is a sum of rows.
fn rec_first_writes(r: &mut Rec, a: &Args) -> u32 {
    let x = r.param(Shape::Matrix(3, 3), &a.0[0]);
    let s = r.param(Shape::Scalar, &a.0[1]);
    let row = r.param(Shape::Vector(3), &a.0[2]);
    let t = r.op1(Op::Tanh, x);
    let tt = r.op2(Op::Mul, t, t);
    let tr = r.op1(Op::Transpose, t);
    let m = r.op2(Op::Matmul, tr, tt);
    let e = r.op2(Op::Mul, s, m);
    let d = r.op2(Op::AddDiag, e, s);
    let q = r.op1(Op::Exp, d);
    let u = r.op2(Op::Sub, q, t);
    let v = r.op1(Op::Reshape(Shape::Vector(9)), u);
    let w = r.op1(Op::Reshape(Shape::Matrix(3, 3)), v);
    let rb = r.op2(Op::Add, row, w);
    let three = r.num(3.0);
    let dv = r.op2(Op::Div, rb, three);
    r.op1(Op::Sum, dv)
}

/// Every elementwise op on scalars, which a plan runs as scalar steps and
/// the eager tape through the kernels: parameters on either side, a
/// constant on either side (no adjoint into it), one operand twice.
fn rec_scalar_ops(r: &mut Rec, a: &Args) -> u32 {
    let x = r.param(Shape::Scalar, &a.0[0]);
    let y = r.param(Shape::Scalar, &a.0[1]);
    let c = r.num(0.75);
    let mut terms = Vec::new();
    for op in [Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Maximum, Op::Minimum] {
        terms.push(r.op2(op, x, y));
        terms.push(r.op2(op, y, x));
        terms.push(r.op2(op, c, x));
        terms.push(r.op2(op, y, c));
    }
    terms.push(r.op2(Op::Mul, x, x));
    terms.push(r.op2(Op::Maximum, y, y)); // a tie: the adjoint goes left
    let pos = r.op1(Op::Square, x);
    let pos = r.op2(Op::Add, pos, c); // > 0 for log, sqrt, lgamma, pow
    for op in [Op::Neg, Op::Exp, Op::Tanh, Op::Sigmoid, Op::Relu] {
        terms.push(r.op1(op, y));
    }
    for op in [Op::Log, Op::Sqrt, Op::Lgamma, Op::Pow(tangent_grad::core::op::Exponent::new(-1.5)), Op::Pow(tangent_grad::core::op::Exponent::new(3.0))] {
        terms.push(r.op1(op, pos));
    }
    // Weighted, so that no term's adjoint is a plain copy of the root's.
    let mut acc = terms[0];
    for (i, &t) in terms.iter().enumerate().skip(1) {
        let w = r.num(0.1 * i as f64);
        let wt = r.op2(Op::Mul, t, w);
        acc = r.op2(Op::Add, acc, wt);
    }
    let scale = r.num(0.01);
    let small = r.op2(Op::Mul, acc, scale);
    r.op1(Op::Tanh, small)
}

fn r_const_6x3(r: &mut Rec) -> u32 {
    let data: Vec<f64> = (0..18).map(|i| 0.1 * i as f64 - 0.7).collect();
    r.konst(Shape::Matrix(6, 3), &data)
}

/// Dead nodes on the tape (including a dead constant subgraph and an unused
/// parameter and input) that do not reach the root.
fn rec_dead(r: &mut Rec, a: &Args) -> u32 {
    let pa = r.param(Shape::Vector(3), &a.0[0]);
    let pb = r.param(Shape::Scalar, &a.0[1]);
    let _pc = r.param(Shape::Vector(2), &a.0[2]); // never read
    let _ix = r.input(Shape::Vector(3), &a.1[0]); // never read
    let dead1 = r.op1(Op::Exp, pa);
    let cm = r.konst(Shape::Matrix(2, 3), &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let _dead2 = r.op2(Op::Matmul, cm, dead1);
    let ct = r.op1(Op::Transpose, cm);
    let cc = r.op2(Op::Matmul, cm, ct);
    let _dead3 = r.op1(Op::Cholesky, cc);
    let ab = r.op2(Op::Mul, pa, pb);
    let sq = r.op1(Op::Square, ab);
    let root = r.op1(Op::Sum, sq);
    let _dead4 = r.op1(Op::Neg, root); // after the root, too
    root
}

/// The root is a parameter itself; another parameter is unused.
fn rec_root_is_param(r: &mut Rec, a: &Args) -> u32 {
    let p = r.param(Shape::Scalar, &a.0[0]);
    let q = r.param(Shape::Vector(2), &a.0[1]);
    let _ = r.op1(Op::Exp, q);
    p
}

/// The root depends on constants only: it folds entirely.
fn rec_const_root(r: &mut Rec, a: &Args) -> u32 {
    let _p = r.param(Shape::Vector(2), &a.0[0]);
    let c = r.konst(Shape::Vector(3), &[0.5, -1.0, 2.0]);
    let e = r.op1(Op::Exp, c);
    r.op1(Op::Sum, e)
}

fn cases() -> Vec<Case> {
    let mut g = Lcg(99);
    let mut v = |n: usize| g.vec(n);
    let regression_inputs = |k: usize| -> Args {
        let mut g = Lcg(500 + k as u32);
        (regression_args(k), vec![g.vec(20 * RP), g.vec(20)])
    };
    vec![
        Case { name: "regression", record: rec_regression, args: (0..4).map(|k| (regression_args(k), vec![])).collect() },
        Case { name: "regression with inputs", record: rec_regression_inputs, args: (0..4).map(regression_inputs).collect() },
        Case {
            name: "gp with constant subgraphs",
            record: rec_gp_const,
            args: vec![
                (vec![vec![1.0], vec![1.0]], vec![]),
                (vec![vec![0.5], vec![2.0]], vec![]),
                (vec![vec![-1.3], vec![0.2]], vec![]),
            ],
        },
        Case {
            name: "gp as in BENCH",
            record: rec_gp_bench,
            args: vec![
                (vec![vec![1.2], vec![0.9]], vec![]),
                (vec![vec![0.6], vec![1.5]], vec![]),
                (vec![vec![2.5], vec![0.3]], vec![]),
            ],
        },
        Case {
            name: "constant subgraph feeding the parameter path",
            record: rec_const_feeds_param,
            args: (0..3).map(|_| (vec![v(4), v(8)], vec![])).collect(),
        },
        Case {
            name: "many ops",
            record: rec_many_ops,
            args: (0..3).map(|_| (vec![v(3), v(6), v(1), v(9)], vec![])).collect(),
        },
        Case {
            name: "dead nodes",
            record: rec_dead,
            args: (0..3).map(|_| (vec![v(3), v(1), v(2)], vec![v(3)])).collect(),
        },
        Case {
            name: "every scalar op",
            record: rec_scalar_ops,
            args: vec![
                (vec![vec![0.3], vec![-1.2]], vec![]),
                (vec![vec![-2.1], vec![0.8]], vec![]),
                (vec![vec![1.7], vec![1.7]], vec![]),
            ],
        },
        Case {
            name: "first writes",
            record: rec_first_writes,
            args: (0..3).map(|_| (vec![v(9), vec![0.7], v(3)], vec![])).collect(),
        },
        Case { name: "root is a parameter", record: rec_root_is_param, args: (0..2).map(|_| (vec![v(1), v(2)], vec![])).collect() },
        Case { name: "constant root", record: rec_const_root, args: (0..2).map(|_| (vec![v(2)], vec![])).collect() },
    ]
}

// ---------------------------------------------------------------- tests

#[test]
fn every_pass_combination_gives_the_eager_bits() {
    for case in cases() {
        check_case(&case);
    }
}

#[test]
fn default_build_is_all_passes_on_and_matches() {
    for case in cases() {
        let (mut tape, obj) = record(&case, &case.args[0]);
        let expected = eager(&mut tape, &obj);
        let mut plan = Plan::build(&tape.graph, obj.root, &obj.params, &obj.inputs).unwrap();
        assert!(replay(&mut plan, &case.args[0]) == expected, "{}", case.name);
    }
}

/// The graph as toJSON writes it: parameters, then inputs, then every other
/// node in the walk's post-order from the root.
fn in_plan_order(g: &Graph, obj: &Objective) -> (Graph, Objective) {
    let mut out = Graph::default();
    let mut id = vec![u32::MAX; g.nodes.len()];
    for (&old, op) in obj.params.iter().map(|p| (p, Op::Leaf)).chain(obj.inputs.iter().map(|i| (i, Op::Input))) {
        id[old as usize] = out.leaf(op, g.nodes[old as usize].shape, g.value(old).unwrap()).unwrap();
    }
    for old in post_order(&g.nodes, obj.root) {
        let node = &g.nodes[old as usize];
        if id[old as usize] == u32::MAX {
            id[old as usize] = if node.op.is_leaf() {
                out.leaf(Op::Const, node.shape, g.value(old).unwrap()).unwrap()
            } else {
                let parents: Vec<u32> = node.parents.iter().map(|&p| id[p as usize]).collect();
                out.op(node.op, &parents, true).unwrap()
            };
        }
    }
    let map = |ids: &[u32]| ids.iter().map(|&i| id[i as usize]).collect();
    let obj = Objective { params: map(&obj.params), inputs: map(&obj.inputs), root: id[obj.root as usize] };
    (out, obj)
}

/// A graph that compaction would only reorder is adopted as it is (a plan
/// read from JSON that toJSON wrote), with the bits of the eager tape; a
/// graph compaction would change (a dead node, a constant subgraph to
/// fold) is compacted first.
#[test]
fn adopting_a_compact_graph_changes_no_number() {
    let mut adopted = Vec::new();
    for case in cases() {
        let (tape0, obj0) = record(&case, &case.args[0]);
        let (g, obj) = in_plan_order(&tape0.graph, &obj0);
        for passes in COMBOS {
            let compact = Plan::compact_already(&g, obj.root, &obj.params, &obj.inputs, passes).unwrap();
            if compact && !adopted.contains(&case.name) {
                adopted.push(case.name);
            }
            let mut plan = Plan::adopt(g.clone(), obj.root, &obj.params, &obj.inputs, passes).unwrap();
            for args in &case.args {
                let (mut tape, o) = record(&case, args);
                let (got, expected) = (replay(&mut plan, args), eager(&mut tape, &o));
                assert!(got == expected, "{} with {passes:?} (adopted: {compact}):\n plan  {}\n eager {}", case.name, show(&got), show(&expected));
            }
        }
    }
    for name in ["regression", "regression with inputs", "gp as in BENCH", "many ops", "every scalar op"] {
        assert!(adopted.contains(&name), "{name} is adopted: {adopted:?}");
    }
    for name in ["dead nodes", "root is a parameter", "constant root"] {
        assert!(!adopted.contains(&name), "{name} is compacted: {adopted:?}");
    }
    // Off the walk's order, a graph is compacted: the eager tape's order.
    let case = cases().into_iter().find(|c| c.name == "regression").unwrap();
    let (tape, obj) = record(&case, &case.args[0]);
    assert!(!Plan::compact_already(&tape.graph, obj.root, &obj.params, &obj.inputs, Passes::default()).unwrap());
}

#[test]
fn inputs_are_fed_not_folded() {
    let case = &cases()[1];
    let (tape, obj) = record(case, &case.args[0]);
    let mut plan = Plan::build(&tape.graph, obj.root, &obj.params, &obj.inputs).unwrap();
    let a = replay(&mut plan, &case.args[0]);
    // Same parameters, other inputs: the value changes.
    let other: Args = (case.args[0].0.clone(), case.args[1].1.clone());
    let b = replay(&mut plan, &other);
    assert_ne!(a.value, b.value);
    let (mut t2, o2) = record(case, &other);
    assert!(b == eager(&mut t2, &o2));
}

#[test]
fn dead_nodes_are_dropped() {
    let case = cases().into_iter().find(|c| c.name == "dead nodes").unwrap();
    let (tape, obj) = record(&case, &case.args[0]);
    let live = post_order(&tape.graph.nodes, obj.root).len();
    assert!(live < tape.graph.nodes.len());
    for passes in COMBOS {
        let plan = Plan::build_with(&tape.graph, obj.root, &obj.params, &obj.inputs, passes).unwrap();
        assert!(
            plan.len() <= live && plan.len() < tape.graph.nodes.len(),
            "{passes:?}: plan keeps {} nodes; the tape holds {}, {} of them live",
            plan.len(),
            tape.graph.nodes.len(),
            live
        );
        assert!(plan.params()[2].node.is_none(), "the unused parameter feeds no node");
        assert!(plan.inputs()[0].node.is_none(), "the unused input feeds no node");
        assert!(plan.params()[0].node.is_some() && plan.params()[1].node.is_some());
    }
    // Every other case keeps no more than its live nodes either.
    for case in cases() {
        let (tape, obj) = record(&case, &case.args[0]);
        let live = post_order(&tape.graph.nodes, obj.root).len();
        let plan = Plan::build(&tape.graph, obj.root, &obj.params, &obj.inputs).unwrap();
        assert!(plan.len() <= live, "{}: {} > {live}", case.name, plan.len());
    }
}

#[test]
fn unused_parameter_gets_zeros() {
    let case = cases().into_iter().find(|c| c.name == "dead nodes").unwrap();
    let (tape, obj) = record(&case, &case.args[0]);
    let mut plan = Plan::build(&tape.graph, obj.root, &obj.params, &obj.inputs).unwrap();
    let b = replay(&mut plan, &case.args[0]);
    assert_eq!(b.grads[2], vec![0f64.to_bits(); 2]);
}

#[test]
fn identical_nodes_merge() {
    let mut g = Graph::default();
    let a = g.leaf(Op::Leaf, Shape::Matrix(2, 2), &[1.0, 2.0, 3.0, 4.0]).unwrap();
    let a2 = g.leaf(Op::Leaf, Shape::Matrix(2, 2), &[1.0, 2.0, 3.0, 4.0]).unwrap();
    assert_ne!(a, a2, "leaves are never merged");
    let c1 = g.leaf(Op::Const, Shape::Scalar, &[2.0]).unwrap();
    let c2 = g.leaf(Op::Const, Shape::Scalar, &[2.0]).unwrap();
    assert_ne!(c1, c2, "constants are leaves too");
    let at = g.op(Op::Transpose, &[a], true).unwrap();
    let ata = g.op(Op::Matmul, &[a, at], true).unwrap();
    let k = g.op(Op::AddDiag, &[ata, c1], true).unwrap();
    let n = g.nodes.len();
    let l1 = g.op(Op::Cholesky, &[k], true).unwrap();
    let l2 = g.op(Op::Cholesky, &[k], true).unwrap();
    assert_eq!(l1, l2, "cholesky(K) twice is one node");
    assert_eq!(g.nodes.len(), n + 1, "and the graph grew by one node");
    assert_eq!(g.op(Op::Transpose, &[a], true).unwrap(), at);
    assert_eq!(g.op(Op::Transpose, &[a], false).unwrap(), g.op(Op::Transpose, &[a], true).unwrap());
    // Different ops, static arguments, parents or parent order are different nodes.
    let tl = g.op(Op::TriangularSolve { lower: true }, &[l1, a], true).unwrap();
    let tu = g.op(Op::TriangularSolve { lower: false }, &[l1, a], true).unwrap();
    assert_ne!(tl, tu);
    let p2 = g.op(Op::Pow(tangent_grad::core::op::Exponent::new(2.0)), &[a], true).unwrap();
    let p3 = g.op(Op::Pow(tangent_grad::core::op::Exponent::new(3.0)), &[a], true).unwrap();
    assert_ne!(p2, p3);
    // Elementwise ops, sums, dot and matmul are never merged
    // (graph::batched): JavaScript records them in batches, numbering the
    // nodes itself.
    assert_ne!(ata, g.op(Op::Matmul, &[a, at], true).unwrap());
    let v = g.leaf(Op::Leaf, Shape::Vector(2), &[1.0, 2.0]).unwrap();
    assert_ne!(g.op(Op::Dot, &[v, v], true).unwrap(), g.op(Op::Dot, &[v, v], true).unwrap());
    assert_ne!(p2, g.op(Op::Pow(tangent_grad::core::op::Exponent::new(2.0)), &[a], true).unwrap());
    let s = g.op(Op::Sum, &[a], true).unwrap();
    assert_ne!(s, g.op(Op::Sum, &[a], true).unwrap());
    let s1 = g.op(Op::Sub, &[a, a2], true).unwrap();
    let s2 = g.op(Op::Sub, &[a2, a], true).unwrap();
    assert_ne!(s1, s2);
    assert_ne!(g.op(Op::Exp, &[a], true).unwrap(), g.op(Op::Exp, &[a2], true).unwrap());
    // A failing op leaves nothing behind and is not remembered as merged.
    let bad = g.leaf(Op::Const, Shape::Matrix(2, 2), &[1.0, 2.0, 2.0, 1.0]).unwrap();
    let before = g.nodes.len();
    assert!(g.op(Op::Cholesky, &[bad], true).is_err());
    assert_eq!(g.nodes.len(), before);
    assert!(g.op(Op::Cholesky, &[bad], true).is_err(), "a failed node is not merged into a later call");
}

#[test]
fn merged_nodes_in_the_gp_plan_give_the_eager_bits() {
    // The gp recorder asserts cholesky(K) twice is one node; with the two
    // uses merged, solvePSD and logdetPSD adjoints both flow into it.
    let case = cases().into_iter().find(|c| c.name == "gp with constant subgraphs").unwrap();
    let (tape, obj) = record(&case, &case.args[0]);
    let count = |op: Op| tape.graph.nodes.iter().filter(|n| n.op == op).count();
    assert_eq!(count(Op::Cholesky), 1);
    drop(tape);
    drop(obj);
    check_case(&case);
}

/// Folding evaluates a constant subgraph once, at build time: a constant
/// non-positive-definite matrix fails the build when folding, and every
/// forward pass when not.
#[test]
fn constant_folding_happens_at_build_time() {
    let mut g = Graph::default();
    let p = g.leaf(Op::Leaf, Shape::Vector(2), &[1.0, 2.0]).unwrap();
    let bad = g.leaf(Op::Const, Shape::Matrix(2, 2), &[1.0, 2.0, 2.0, 1.0]).unwrap();
    // Recorded without evaluation, as a plan rebuilt from JSON would be.
    let l = g.op(Op::Cholesky, &[bad], false).unwrap();
    let d = g.op(Op::DiagPart, &[l], false).unwrap();
    let s = g.op(Op::Sum, &[d], false).unwrap();
    let sp = g.op(Op::Sum, &[p], false).unwrap();
    let root = g.op(Op::Mul, &[s, sp], false).unwrap();
    let folded = Plan::build_with(&g, root, &[p], &[], Passes { fold_constants: true, skip_constant_adjoints: true, ..Passes::default() });
    match folded {
        Err(e) => assert!(e.0.contains("not positive definite"), "{}", e.0),
        Ok(_) => panic!("folding should evaluate the constant cholesky at build time"),
    }
    let mut plain =
        Plan::build_with(&g, root, &[p], &[], Passes { fold_constants: false, skip_constant_adjoints: true, ..Passes::default() }).unwrap();
    plain.set(0, &[1.0, 2.0]).unwrap();
    for _ in 0..2 {
        let e = plain.forward().map(|v| v.to_vec()).unwrap_err();
        assert!(e.0.contains("not positive definite"), "{}", e.0);
    }
}

/// With a big constant subgraph (a 250×250 Cholesky) and a tiny parameter
/// path, folding leaves only the parameter path to evaluate per replay, drops
/// the folded nodes' constant ancestors, and changes no bit of the results.
#[test]
fn constant_folding_reduces_the_work_per_replay() {
    let n = 250;
    let mut r = Lcg(5);
    let a: Vec<f64> = r.vec(n * n);
    let mut g = Graph::default();
    let p = g.leaf(Op::Leaf, Shape::Vector(3), &[0.1, 0.2, 0.3]).unwrap();
    let ca = g.leaf(Op::Const, Shape::Matrix(n, n), &a).unwrap();
    let cat = g.op(Op::Transpose, &[ca], true).unwrap();
    let aat = g.op(Op::Matmul, &[ca, cat], true).unwrap();
    let nn = g.leaf(Op::Const, Shape::Scalar, &[n as f64]).unwrap();
    let k = g.op(Op::AddDiag, &[aat, nn], true).unwrap();
    let l = g.op(Op::Cholesky, &[k], true).unwrap();
    let d = g.op(Op::DiagPart, &[l], true).unwrap();
    let lg = g.op(Op::Log, &[d], true).unwrap();
    let c = g.op(Op::Sum, &[lg], true).unwrap();
    let sq = g.op(Op::Square, &[p], true).unwrap();
    let s = g.op(Op::Sum, &[sq], true).unwrap();
    let root = g.op(Op::Mul, &[c, s], true).unwrap();
    let run = |passes: Passes| {
        let mut plan = Plan::build_with(&g, root, &[p], &[], passes).unwrap();
        let mut out = [0.0; 3];
        plan.set(0, &[0.1, 0.2, 0.3]).unwrap();
        let value = plan.forward().unwrap()[0];
        plan.backward();
        plan.gradient(0, &mut out).unwrap();
        (plan.evaluated(), plan.len(), value.to_bits(), out.map(f64::to_bits))
    };
    let (work_fold, len_fold, v_fold, g_fold) = run(Passes { fold_constants: true, skip_constant_adjoints: true, ..Passes::default() });
    let (work_plain, len_plain, v_plain, g_plain) = run(Passes { fold_constants: false, skip_constant_adjoints: true, ..Passes::default() });
    assert_eq!(v_fold, v_plain);
    assert_eq!(g_fold, g_plain);
    // Folded: square, sum and the final mul; the seven constant ops are gone.
    assert_eq!(work_fold, 3, "ops evaluated per replay with folding");
    assert_eq!(work_plain, 10, "ops evaluated per replay without folding");
    // p, square, sum, the folded constant, mul.
    assert_eq!(len_fold, 5, "nodes kept with folding");
    assert!(len_plain > len_fold);
}

/// Merging identical nodes is the one pass that cannot be exact: the merged
/// Cholesky's adjoint is chol_adj(L̄₁ + L̄₂) where the unmerged graph sums
/// chol_adj(L̄₁) + chol_adj(L̄₂), which rounds differently. So the eager tape
/// merges exactly as plans do (eager, compiled and rebuilt plans then agree
/// bit for bit), and here, recording without merging, the merged plan gives
/// the same value bit for bit, gradients equal to 1e-12 relative, and one
/// Cholesky where there were two.
#[test]
fn merging_identical_nodes_changes_values_by_nothing_and_gradients_by_rounding() {
    let case = cases().into_iter().find(|c| c.name == "gp with constant subgraphs").unwrap();
    for args in &case.args {
        let mut g = Graph::without_merging();
        let (params, inputs, root) = {
            let mut r = Rec::new(&mut g);
            let root = (case.record)(&mut r, args);
            (r.params, r.inputs, root)
        };
        let cholesky_nodes = |plan_merge: bool| {
            let passes = Passes { merge_identical: plan_merge, ..Passes::default() };
            let mut plan = Plan::build_with(&g, root, &params, &inputs, passes).unwrap();
            (plan.len(), replay(&mut plan, args))
        };
        let (len_merged, merged) = cholesky_nodes(true);
        let (len_plain, plain) = cholesky_nodes(false);
        assert!(len_merged < len_plain, "merging drops nodes: {len_merged} vs {len_plain}");
        assert_eq!(merged.value, plain.value, "values agree bit for bit");
        for (a, b) in merged.grads.iter().zip(&plain.grads) {
            for (&x, &y) in a.iter().zip(b) {
                let (x, y) = (f64::from_bits(x), f64::from_bits(y));
                assert!((x - y).abs() <= 1e-12 * x.abs().max(y.abs()).max(1.0), "{x} vs {y}");
            }
        }
    }
}

/// The BENCH GP at n = 80, whose n×n adjoints (6 400 values) pass the
/// default threshold for sharing blocks.
fn rec_gp_80(r: &mut Rec, a: &Args) -> u32 {
    rec_gp_n::<80>(r, a)
}

fn rec_gp_n<const N: usize>(r: &mut Rec, a: &Args) -> u32 {
    let (d2, y) = gp_data(N);
    let pl = r.param(Shape::Scalar, &a.0[0]);
    let pv = r.param(Shape::Scalar, &a.0[1]);
    let cd = r.konst(Shape::Matrix(N, N), &d2);
    let two = r.num(2.0);
    let l2 = r.op1(Op::Square, pl);
    let den = r.op2(Op::Mul, two, l2);
    let q = r.op2(Op::Div, cd, den);
    let nq = r.op1(Op::Neg, q);
    let e = r.op1(Op::Exp, nq);
    let kv = r.op2(Op::Mul, pv, e);
    let noise = r.num(0.05);
    let k = r.op2(Op::AddDiag, kv, noise);
    gp_tail(r, k, &y)
}

/// With the default passes the GP's large adjoints share blocks (the
/// elementwise chain from D² to K takes turns in two), which saves at least
/// four n×n adjoints, and the replay still gives the eager bits, twice in a
/// row (a block is cleared each time its adjoint turns live).
#[test]
fn large_adjoints_share_blocks_and_change_no_number() {
    let n = 80;
    let case = Case {
        name: "gp, n = 80",
        record: rec_gp_80,
        args: vec![(vec![vec![1.2], vec![0.9]], vec![]), (vec![vec![0.6], vec![1.5]], vec![])],
    };
    let (tape0, obj0) = record(&case, &case.args[0]);
    let build = |from: usize| {
        let passes = Passes { share_adjoints_from: from, ..Passes::default() };
        Plan::build_with(&tape0.graph, obj0.root, &obj0.params, &obj0.inputs, passes).unwrap()
    };
    let (mut shared, mut private) = (build(SHARE_ADJOINTS_FROM), build(NO_SHARING));
    let saved = private.bytes() as f64 - shared.bytes() as f64;
    assert!(saved >= (4 * 8 * n * n) as f64, "sharing saved {saved} bytes: {} against {}", shared.bytes(), private.bytes());
    for a in &case.args {
        let (mut tape, obj) = record(&case, a);
        let expected = eager(&mut tape, &obj);
        for _ in 0..2 {
            assert!(replay(&mut shared, a) == expected, "shared {}\n eager {}", show(&replay(&mut shared, a)), show(&expected));
            assert!(replay(&mut private, a) == expected);
        }
    }
    check_case(&case);
}

fn rec_gp_200(r: &mut Rec, a: &Args) -> u32 {
    rec_gp_n::<200>(r, a)
}

/// The GP at n = 200 at two points, and the eager tape's bits at each.
fn gp_200_and_its_eager_bits() -> (Case, Vec<Bits>) {
    let case = Case {
        name: "gp, n = 200",
        record: rec_gp_200,
        args: vec![(vec![vec![1.2], vec![0.9]], vec![]), (vec![vec![0.6], vec![1.5]], vec![])],
    };
    let expected = case.args.iter().map(|a| {
        let (mut tape, obj) = record(&case, a);
        eager(&mut tape, &obj)
    }).collect();
    (case, expected)
}

/// A large trace is adopted as it was recorded, its ops in the tape's order
/// (not the walk's, which the sweep follows, here the logdet's chain before
/// the solves'), and its values kept: the first replay at the traced
/// arguments computes nothing forward; every replay gives the eager bits.
#[test]
fn a_large_trace_is_adopted_in_its_own_order_and_gives_the_eager_bits() {
    let (case, expected) = gp_200_and_its_eager_bits();
    let (mut tape, obj) = record(&case, &case.args[0]);
    assert!(Plan::trace_adoptable(&tape.graph, obj.root, &obj.params, &obj.inputs).unwrap());
    assert!(!Plan::compact_already(&tape.graph, obj.root, &obj.params, &obj.inputs, Passes::default()).unwrap(), "the trace's ops come in another order than the walk's");
    let values = tape.graph.values.clone();
    let mut plan = Plan::adopt_current(std::mem::take(&mut tape.graph), obj.root, &obj.params, &obj.inputs).unwrap();
    for (k, a) in [0, 1, 0].into_iter().map(|k| (k, &case.args[k])) {
        assert!(replay(&mut plan, a) == expected[k], "args #{k}");
    }
    // The first replay took the trace's values as they were: the adopted
    // arena held them (a plan built by copying holds only the constants).
    assert!(values.iter().filter(|x| **x != 0.0).count() > 5 * 200 * 200);
}

fn rec_times_one(r: &mut Rec, a: &Args) -> u32 {
    let x = r.param(Shape::Scalar, &a.0[0]);
    let one = r.num(1.0);
    r.op2(Op::Mul, x, one)
}

/// The adopted values are used only while the arguments fed are the traced
/// bits: fed -0.0 where the trace had 0.0 (equal, other bits), x·1 is -0.0.
#[test]
fn an_adopted_trace_replays_once_fed_other_bits() {
    let case = Case { name: "x·1", record: rec_times_one, args: vec![(vec![vec![0.0]], vec![]), (vec![vec![-0.0]], vec![])] };
    let (mut tape, obj) = record(&case, &case.args[0]);
    let mut plan = Plan::adopt_current(std::mem::take(&mut tape.graph), obj.root, &obj.params, &obj.inputs).unwrap();
    let got = replay(&mut plan, &case.args[1]);
    assert_eq!(got.value, (-0.0f64).to_bits());
}

/// Values no sweep step reads (the GP's D²/(2l²), its negation, v·E and K)
/// take turns in two blocks in a plan too large for lanes, and the sweep's
/// three adjoint blocks lie over those two: four n×n fewer. Built, adopted
/// with the trace's values, or replayed in a batch on two threads, the
/// plan gives the eager bits.
#[test]
fn values_no_sweep_reads_share_blocks_and_change_no_number() {
    use tangent_grad::batch::{self, Pool, Replicas};
    let n = 200;
    let (case, expected) = gp_200_and_its_eager_bits();
    let (mut tape, obj) = record(&case, &case.args[0]);
    let build = |past: usize| Plan::build_with(&tape.graph, obj.root, &obj.params, &obj.inputs, Passes { share_values_past: past, ..Passes::default() }).unwrap();
    let (mut shared, mut private) = (build(Passes::default().share_values_past), build(NO_SHARING));
    let nn = 8 * n * n;
    assert!(private.bytes() >= shared.bytes() + 4 * nn, "bytes: {} shared, {} not", shared.bytes(), private.bytes());
    for _ in 0..2 {
        for (k, a) in case.args.iter().enumerate() {
            assert!(replay(&mut shared, a) == expected[k], "built, args #{k}");
            assert!(replay(&mut private, a) == expected[k]);
        }
    }
    let pool = Pool::new(&shared);
    let points: Vec<f64> = case.args.iter().chain(&case.args).flat_map(|a| a.0.concat()).collect();
    let (mut values, mut grads) = (vec![0.0; 4], vec![0.0; 8]);
    batch::run(Replicas::Pool(&pool), &points, &[], 4, 2, &mut values, &mut grads, 0).unwrap();
    for i in 0..4 {
        let e = &expected[i % 2];
        assert_eq!(values[i].to_bits(), e.value, "batch point {i}");
        assert_eq!([grads[2 * i].to_bits(), grads[2 * i + 1].to_bits()], [e.grads[0][0], e.grads[1][0]], "batch point {i}");
    }
    let bytes = private.bytes();
    let mut adopted = Plan::adopt_current(std::mem::take(&mut tape.graph), obj.root, &obj.params, &obj.inputs).unwrap();
    assert!(bytes >= adopted.bytes() + 4 * nn, "adopted: {} bytes", adopted.bytes());
    for (k, a) in [0, 1, 0].into_iter().map(|k| (k, &case.args[k])) {
        assert!(replay(&mut adopted, a) == expected[k], "adopted, args #{k}");
    }
}

/// A first writer's assignment is the sum it replaces, bit for bit: each
/// kernel that may assign into a fresh adjoint gives, over a buffer of
/// NaN, what it adds to zeros, −0 terms included (0 + −0 is +0), on both
/// sides of the size past which `add_transposed` splits across threads.
#[test]
fn assigning_a_first_term_gives_the_bits_of_adding_it_to_zeros() {
    use tangent_grad::core::kernels::{elementwise as ew, matrix};
    use tangent_grad::core::op::Broadcast;
    let term = |i: usize| if i % 5 == 0 { -0.0 } else { ((i * 37 % 101) as f64 - 50.0) / 7.0 };
    let same = |assign: bool, f: &dyn Fn(&mut [f64])| {
        let mut d = vec![if assign { f64::NAN } else { 0.0 }; 64];
        f(&mut d);
        d
    };
    let a: Vec<f64> = (0..64).map(term).collect();
    let b: Vec<f64> = (0..64).map(|i| term(i + 3)).collect();
    let g: Vec<f64> = (0..64).map(|i| term(i + 1)).collect();
    let partial = |x: f64, y: f64, g: f64| g * x - y;
    for (bc, k, a, b) in [(Broadcast::Same, 0, &a[..], &b[..]), (Broadcast::ScalarLeft, 1, &a[..1], &b[..]), (Broadcast::ScalarRight, 0, &a[..], &b[..1])] {
        let [added, assigned] = [false, true].map(|assign| same(assign, &|d| ew::binary_adjoint(bc, k, a, b, &g, d, assign, partial)));
        assert_eq!(bits(&added), bits(&assigned), "{bc:?}, operand {k}");
    }
    let [added, assigned] = [false, true].map(|assign| same(assign, &|d| ew::unary_adjoint(&a, &b, &g, d, assign, partial)));
    assert_eq!(bits(&added), bits(&assigned), "unary");
    assert!(assigned.iter().all(|x| !x.is_nan() && x.to_bits() != (-0.0f64).to_bits()), "every entry written, no −0");
    for (m, n) in [(3, 5), (700, 800)] {
        let a: Vec<f64> = (0..m * n).map(term).collect();
        let mut added = vec![0.0; m * n];
        matrix::add_transposed(m, n, &a, &mut added, false);
        let mut assigned = vec![f64::NAN; m * n];
        matrix::add_transposed(m, n, &a, &mut assigned, true);
        assert_eq!(bits(&added), bits(&assigned), "add_transposed {m}×{n}");
    }
    // The factor's adjoint and a triangular solve's, by the hand-written
    // kernels and by faer's (n = 120: past both libraries' sizes).
    use tangent_grad::core::linalg;
    for n in [7, 120] {
        let mut g = Lcg(n as u32);
        let m = g.vec(n * n);
        let spd: Vec<f64> = (0..n * n).map(|e| (0..n).map(|t| m[e / n * n + t] * m[e % n * n + t]).sum::<f64>() + if e / n == e % n { n as f64 } else { 0.0 }).collect();
        let mut l = vec![0.0; n * n];
        linalg::cholesky(&spd, n, &mut l).unwrap();
        let lbar: Vec<f64> = (0..n * n).map(term).collect();
        let [added, assigned] = [false, true].map(|assign| {
            let (mut work, mut abar) = (vec![0.0; n * n], vec![if assign { f64::NAN } else { 0.0 }; n * n]);
            linalg::cholesky_adjoint(&l, &lbar, n, &mut work, &mut abar, assign);
            abar
        });
        assert_eq!(bits(&added), bits(&assigned), "cholesky_adjoint, n = {n}");
        for (lower, k) in [(true, 1), (false, 1), (true, 3), (false, n)] {
            let (b, x) = (g.vec(n * k), g.vec(n * k));
            let [added, assigned] = [false, true].map(|assign| {
                let mut tbar = vec![if assign { f64::NAN } else { 0.0 }; n * n];
                linalg::triangular_solve_tbar(n, lower, &b, &x, k, &mut tbar, assign);
                tbar
            });
            assert_eq!(bits(&added), bits(&assigned), "triangular_solve_tbar, n = {n}, lower {lower}, k = {k}");
        }
    }
}
