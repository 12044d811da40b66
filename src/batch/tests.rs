//! Tests of src/batch.rs: bit-identical batches on any number of threads,
//! errors by point, block sizes.

use super::*;
use crate::core::json::plan_from_json;

/// SPEC §8's example: w scalar, b [2]; inputs x, y [2].
const SPEC: &str = r#"{"version":2,"input":"map","nodes":[
    {"kind":"param","name":"w","shape":[]},{"kind":"param","name":"b","shape":[2]},
    {"kind":"input","name":"x","shape":[2]},{"kind":"input","name":"y","shape":[2]},
    {"kind":"op","op":"add","parents":[3,1]},{"kind":"op","op":"mul","parents":[0,2]},
    {"kind":"op","op":"sub","parents":[5,4]},{"kind":"op","op":"square","parents":[6]},
    {"kind":"op","op":"sum","parents":[7]}],"root":8}"#;

/// Half logdetPSD of a [2×2] parameter: fails where it is not positive definite.
const LOGDET: &str = r#"{"version":2,"input":"single","nodes":[
    {"kind":"param","shape":[2,2]},{"kind":"op","op":"cholesky","parents":[0]},
    {"kind":"op","op":"diagPart","parents":[1]},{"kind":"op","op":"log","parents":[2]},
    {"kind":"op","op":"sum","parents":[3]}],"root":4}"#;

/// Every formula on scalars: parameters a, b, an unused [3] one, input
/// c; `mul(a, a)` adds twice into one adjoint; sqrt and log of a
/// negative give NaN.
const SCALARS: &str = r#"{"version":2,"input":"map","nodes":[
    {"kind":"param","name":"a","shape":[]},{"kind":"param","name":"b","shape":[]},
    {"kind":"param","name":"unused","shape":[3]},{"kind":"input","name":"c","shape":[]},
    {"kind":"op","op":"add","parents":[0,1]},{"kind":"op","op":"sub","parents":[4,3]},
    {"kind":"op","op":"mul","parents":[5,0]},{"kind":"op","op":"div","parents":[6,1]},
    {"kind":"op","op":"maximum","parents":[7,0]},{"kind":"op","op":"minimum","parents":[8,1]},
    {"kind":"op","op":"neg","parents":[9]},{"kind":"op","op":"exp","parents":[10]},
    {"kind":"op","op":"log","parents":[5]},{"kind":"op","op":"sqrt","parents":[0]},
    {"kind":"op","op":"square","parents":[1]},{"kind":"op","op":"tanh","parents":[12]},
    {"kind":"op","op":"sigmoid","parents":[11]},{"kind":"op","op":"relu","parents":[5]},
    {"kind":"op","op":"lgamma","parents":[14]},{"kind":"op","op":"pow","parents":[0],"args":[2.5]},
    {"kind":"op","op":"mul","parents":[0,0]},{"kind":"op","op":"add","parents":[15,16]},
    {"kind":"op","op":"add","parents":[21,17]},{"kind":"op","op":"add","parents":[22,18]},
    {"kind":"op","op":"add","parents":[23,19]},{"kind":"op","op":"add","parents":[24,20]},
    {"kind":"op","op":"add","parents":[25,13]}],"root":26}"#;

/// One point through the ordinary replay (never in lanes).
fn single(p: &mut Plan, point: &[f64], inputs: &[f64]) -> (f64, Vec<f64>) {
    let flat = [point, inputs].concat();
    let mut grads = vec![0.0; point.len()];
    let value = crate::api::plan_run_flat(p, &flat, &mut grads).unwrap();
    (value, grads)
}

fn bits(xs: &[f64]) -> Vec<u64> {
    xs.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn scalar_plans_replayed_in_lanes_give_the_single_results_bit_for_bit() {
    let mut p = plan_from_json(SCALARS).unwrap();
    assert!(p.lanes(None, 0, true).is_some(), "this plan is replayed in lanes");
    assert!(plan_from_json(LOGDET).unwrap().lanes(None, 0, true).is_none(), "a plan with a matrix parameter is not");
    let pool = Pool::new(&p);
    let inputs = [0.75];
    // Group sizes below, at and past LANES, and a negative `a` for NaN.
    for k in [1, LANES - 1, LANES, LANES + 1, 2 * LANES + 3, 301] {
        let params: Vec<f64> = (0..k * 5).map(|i| 1.3 * (i as f64 * 0.37).sin() + 0.4).collect();
        let expected: Vec<(f64, Vec<f64>)> = (0..k).map(|i| single(&mut p, &params[i * 5..i * 5 + 5], &inputs)).collect();
        assert!(expected.iter().any(|(v, _)| v.is_nan()) == (k > 2), "some points give NaN");
        assert!(expected.iter().any(|(v, g)| v.is_finite() && g[0] != 0.0 && g[1] != 0.0 && g[2..] == [0.0; 3]));
        for threads in [1, 2, 3] {
            let (mut values, mut grads) = (vec![0.0; k], vec![f64::NAN; k * 5]);
            run(Replicas::Pool(&pool), &params, &inputs, k, threads, &mut values, &mut grads, 0).unwrap();
            for (i, (v, g)) in expected.iter().enumerate() {
                assert_eq!(values[i].to_bits(), v.to_bits(), "value {i} of {k}, {threads} threads");
                assert_eq!(bits(&grads[i * 5..i * 5 + 5]), bits(g), "gradient {i} of {k}, {threads} threads");
            }
        }
    }
}

#[test]
fn every_thread_count_gives_the_single_results_bit_for_bit() {
    let mut p = plan_from_json(SPEC).unwrap();
    let pool = Pool::new(&p);
    let inputs = [1.0, 2.0, 2.0, 5.0];
    let k = 301;
    let params: Vec<f64> = (0..k * 3).map(|i| (i as f64 * 0.37).sin()).collect();
    let expected: Vec<(f64, Vec<f64>)> = (0..k).map(|i| single(&mut p, &params[i * 3..i * 3 + 3], &inputs)).collect();
    assert_eq!(single(&mut p, &[2.0, 0.5, 0.5], &inputs), (2.5, vec![-7.0, 1.0, 3.0]));
    for threads in [0, 1, 2, 3, 8, 64] {
        let (mut values, mut grads) = (vec![0.0; k], vec![0.0; k * 3]);
        run(Replicas::Pool(&pool), &params, &inputs, k, threads, &mut values, &mut grads, 0).unwrap();
        for (i, (v, g)) in expected.iter().enumerate() {
            assert_eq!(values[i].to_bits(), v.to_bits(), "value {i}, {threads} threads");
            let got: Vec<u64> = grads[i * 3..i * 3 + 3].iter().map(|x| x.to_bits()).collect();
            assert_eq!(got, g.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), "gradient {i}");
        }
    }
}

#[test]
fn blocks_are_whole_lane_groups_only_for_plans_in_lanes() {
    assert_eq!(block_size(20, 1, LANES), LANES, "not blocks of three");
    assert_eq!(block_size(64, 2, LANES), LANES);
    assert_eq!(block_size(1024, 2, LANES), 64);
    assert_eq!(block_size(3, 2, 1), 1, "three heavy points spread over two threads");
    assert_eq!(block_size(0, 2, 1), 1);
    assert_eq!(Pool::new(&plan_from_json(SPEC).unwrap()).group, LANES);
    assert_eq!(Pool::new(&plan_from_json(LOGDET).unwrap()).group, 1, "a Cholesky has no lane kernel");
}

#[test]
fn the_first_failing_point_is_named_whatever_the_threads() {
    let p = plan_from_json(LOGDET).unwrap();
    let pool = Pool::new(&p);
    let k = 400;
    let mut params = Vec::new();
    for i in 0..k {
        let bad = i == 123 || i == 350;
        params.extend_from_slice(if bad { &[1.0, 2.0, 2.0, 1.0] } else { &[2.0, 0.0, 0.0, 2.0] });
    }
    for threads in [1, 2, 4] {
        let (mut values, mut grads) = (vec![0.0; k], vec![0.0; k * 4]);
        let f = run(Replicas::Pool(&pool), &params, &[], k, threads, &mut values, &mut grads, 0).unwrap_err();
        assert_eq!(f.index, Some(123));
        assert_eq!(f.message("batch"), "batch: point 123: cholesky: matrix is not positive definite (pivot 1 is -3)");
    }
    // The pool's replicas keep working.
    let (mut values, mut grads) = (vec![0.0; 2], vec![0.0; 8]);
    run(Replicas::Pool(&pool), &params[..8], &[], 2, 2, &mut values, &mut grads, 0).unwrap();
    let mut q = plan_from_json(LOGDET).unwrap();
    assert_eq!(values[0].to_bits(), single(&mut q, &params[..4], &[]).0.to_bits());
    assert!((values[0] - 2f64.ln()).abs() < 1e-15);
}

#[test]
fn sizes_are_checked_before_anything_runs() {
    let p = plan_from_json(SPEC).unwrap();
    let pool = Pool::new(&p);
    let run_k = |params: &[f64], inputs: &[f64], k: usize| {
        let (mut values, mut grads) = (vec![0.0; k.min(4)], vec![0.0; (k * 3).min(12)]);
        run(Replicas::Pool(&pool), params, inputs, k, 1, &mut values, &mut grads, 0).unwrap_err().message("batch")
    };
    assert_eq!(run_k(&[0.0; 6], &[0.0; 4], 1 << 25), "batch: 33554432 points are more than the 16777216 a batch takes");
    assert_eq!(run_k(&[0.0; 5], &[0.0; 4], 2), "batch: 5 parameter values for 2 points of 3");
    assert_eq!(run_k(&[0.0; 6], &[0.0; 3], 2), "batch: 3 input values, the plan takes 4");
    assert_eq!(threads_for(&p, 1000, 10), 10);
    assert_eq!(threads_for(&p, 1000, 100_000), MAX_THREADS);
}

/// A batch's default thread count is the package's cap (what
/// `TANGENT_GRAD_THREADS` and `setThreads` set), not the machine's cores;
/// and a thread that finds no block copies no replica: three points in
/// lanes are one block, so four threads leave one replica idle, not four.
/// (No other test of this binary sets the cap.)
#[test]
fn the_default_threads_follow_the_cap_and_a_thread_with_no_block_copies_nothing() {
    use crate::core::linalg::threads::{available, set_threads};
    let p = plan_from_json(SPEC).unwrap();
    assert!(p.replays_in_lanes());
    set_threads(1);
    let one = threads_for(&p, 0, 1000);
    set_threads(0);
    assert_eq!(one, 1, "capped at one thread");
    // The whole cap while no other evaluation runs on the package's threads
    // (other tests of this binary run some: looked at until one sees none).
    let all = available().min(MAX_THREADS);
    assert!((0..10_000).any(|_| threads_for(&p, 0, 1000) == all), "never the whole cap");
    assert_eq!(threads_for(&p, 3, 1000), 3, "an explicit count is the caller's");
    let pool = Pool::new(&p);
    let (mut values, mut grads) = (vec![0.0; 3], vec![0.0; 9]);
    let params = [0.5, 1.0, -1.0, 0.25, 2.0, 0.5, -0.75, 0.0, 1.5];
    run(Replicas::Pool(&pool), &params, &[1.0, 2.0, 3.0, 4.0], 3, 4, &mut values, &mut grads, 0).unwrap();
    assert_eq!(lock(&pool.idle).len(), 1, "replicas left by a one-block batch on four threads");
    let mut p1 = p.clone();
    for (i, point) in params.chunks_exact(3).enumerate() {
        let (value, gradient) = single(&mut p1, point, &[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(bits(&[value]), bits(&values[i..=i]));
        assert_eq!(bits(&gradient), bits(&grads[3 * i..3 * i + 3]));
    }
}

/// A Hessian's rows (`units` on a tangent plan with matrix steps, so no
/// lanes) on one replica: after the first direction only the tangent steps
/// are replayed, through an LU whose factors the sweep must leave (the
/// tangent's solve by the same matrix solves with them, unfactored) and a
/// Cholesky; every row is the bits of a whole replay of that direction.
#[test]
fn hessian_rows_after_the_first_replay_only_the_tangent_steps() {
    use crate::core::graph::Graph;
    use crate::core::op::Op;
    use crate::core::shape::Shape;
    let mut g = Graph::default();
    let a = g.leaf(Op::Leaf, Shape::Matrix(3, 3), &[]).unwrap();
    let b = g.leaf(Op::Const, Shape::Vector(3), &[1.0, -2.0, 0.5]).unwrap();
    let three = g.leaf(Op::Const, Shape::Scalar, &[3.0]).unwrap();
    let solved = g.op(Op::SolveGeneral, &[a, b], false).unwrap();
    let t = g.op(Op::Tanh, &[solved], false).unwrap();
    let st = g.op(Op::Sum, &[t], false).unwrap();
    let at = g.op(Op::Transpose, &[a], false).unwrap();
    let aat = g.op(Op::Matmul, &[a, at], false).unwrap();
    let k = g.op(Op::AddDiag, &[aat, three], false).unwrap();
    let l = g.op(Op::Cholesky, &[k], false).unwrap();
    let d = g.op(Op::DiagPart, &[l], false).unwrap();
    let logd = g.op(Op::Log, &[d], false).unwrap();
    let sl = g.op(Op::Sum, &[logd], false).unwrap();
    let root = g.op(Op::Add, &[st, sl], false).unwrap();
    let mut tp = Plan::build(&g, root, &[a], &[]).unwrap().tangent_plan().unwrap();
    assert!(tp.replays_tangents_alone() && tp.lanes(None, 0, true).is_none());
    assert_eq!(tp.solves_kept(), 1);
    let x = [2.0, 0.3, -0.4, 0.1, 1.5, 0.2, -0.3, 0.6, 1.8];
    // Each direction by a whole replay of the plan, on a replica of its own.
    let mut expected = Vec::new();
    for j in 0..9 {
        let mut p = tp.clone();
        let mut unit = [0.0; 9];
        unit[j] = 1.0;
        p.set(0, &x).unwrap();
        p.set(1, &unit).unwrap();
        crate::api::plan_evaluate(&mut p).unwrap();
        let mut row = [0.0; 9];
        p.gradient(0, &mut row).unwrap();
        expected.extend(row.map(f64::to_bits));
    }
    let mut rows = vec![0.0; 81];
    units(Replicas::Own(&mut tp), &x, &[], &mut rows, None).unwrap();
    assert_eq!(rows.iter().map(|r| r.to_bits()).collect::<Vec<_>>(), expected);
    assert!(rows.iter().any(|&r| r != 0.0));
}
