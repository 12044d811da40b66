//! The elementwise kernels (rules/elementwise.rs, `values` and
//! `adjoint_loop`) and the small products (kernels/matrix.rs,
//! `small_gemm`, `matvec_t_acc`) are compiled per x86-64 vector width
//! (`widest!`) and must give the same bits at every width: each op, each
//! broadcast, forward and adjoint, on values that include zeros of both
//! signs, infinities, NaN and subnormals (a NaN need only be a NaN).

use std::sync::atomic::Ordering;
use tangent_grad::core::graph::Graph;
use tangent_grad::core::op::{Exponent, Op};
use tangent_grad::core::plan::Plan;
use tangent_grad::core::shape::Shape;
use tangent_grad::core::widest::WIDEST;

fn values(seed: u64, n: usize) -> Vec<f64> {
    let special = [0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1e-310, -1e-310, 1e300, 1.0, -1.0];
    let mut s = seed;
    (0..n)
        .map(|i| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let u = (s >> 11) as f64 / (1u64 << 53) as f64;
            if i % 7 == 3 { special[(s >> 3) as usize % special.len()] } else { 6.0 * u - 3.0 }
        })
        .collect()
}

/// Value and gradient of sum(w ∘ op(x[, y])) at every width, as bits (NaN as one).
fn at_each_width(op: Op, shapes: &[Shape], seed: u64) -> Vec<Vec<u64>> {
    let mut g = Graph::default();
    let params: Vec<u32> = shapes.iter().map(|&s| g.leaf(Op::Leaf, s, &[]).unwrap()).collect();
    let z = g.op(op, &params, false).unwrap();
    let size = g.nodes[z as usize].shape;
    let w = g.leaf(Op::Const, size, &values(seed ^ 9, size.size())).unwrap();
    let wz = g.op(Op::Mul, &[w, z], false).unwrap();
    let root = g.op(Op::Sum, &[wz], false).unwrap();
    let mut plan = Plan::build(&g, root, &params, &[]).unwrap();
    for (i, s) in shapes.iter().enumerate() {
        plan.set(i, &values(seed + i as u64, s.size())).unwrap();
    }
    let bits = |x: f64| if x.is_nan() { u64::MAX } else { x.to_bits() };
    (0..3u8)
        .map(|widest| {
            WIDEST.store(widest, Ordering::Relaxed);
            let mut out: Vec<u64> = plan.forward().unwrap().iter().map(|&x| bits(x)).collect();
            plan.backward();
            for (i, s) in shapes.iter().enumerate() {
                let mut grad = vec![0.0; s.size()];
                plan.gradient(i, &mut grad).unwrap();
                out.extend(grad.iter().map(|&x| bits(x)));
            }
            out
        })
        .collect()
}

#[test]
fn elementwise_kernels_and_small_products_give_the_same_bits_at_every_vector_width() {
    let (v, m, s) = (Shape::Vector(37), Shape::Matrix(5, 37), Shape::Scalar);
    let binary = [Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Maximum, Op::Minimum];
    let unary = [Op::Neg, Op::Exp, Op::Log, Op::Sqrt, Op::Square, Op::Tanh, Op::Sigmoid, Op::Relu, Op::Lgamma];
    let powers = [2.0, 0.5, -1.0, 3.0, 1.7].map(|k| Op::Pow(Exponent::new(k)));
    let mut cases: Vec<(Op, Vec<Shape>)> = Vec::new();
    for op in binary {
        for shapes in [[v, v], [s, v], [v, s], [m, m], [v, m], [m, v], [s, m]] {
            cases.push((op, shapes.to_vec()));
        }
    }
    for op in unary.into_iter().chain(powers) {
        cases.push((op, vec![v]));
        cases.push((op, vec![m]));
    }
    // Products with a side of at most 5 (`small_gemm`, its transposed
    // forms in the adjoint) and a matrix times a vector (`matvec_t_acc`).
    for shapes in [[Shape::Matrix(4, 7), Shape::Matrix(7, 9)], [Shape::Matrix(9, 3), Shape::Matrix(3, 37)], [Shape::Matrix(37, 6), Shape::Vector(6)]] {
        cases.push((Op::Matmul, shapes.to_vec()));
    }
    for (i, (op, shapes)) in cases.iter().enumerate() {
        let widths = at_each_width(*op, shapes, i as u64);
        assert_eq!(widths[0], widths[1], "{op:?} {shapes:?}: AVX2 against the baseline");
        assert_eq!(widths[0], widths[2], "{op:?} {shapes:?}: AVX-512 against the baseline");
    }
    WIDEST.store(2, Ordering::Relaxed);
}
