//! `cargo bench --bench replay`: the compiled plan's replay of the BENCH.md
//! regression against the same value and gradient written by hand in Rust.
//! The ratio between the two is how far the engine is from the limit.
//!
//! Objective (bench/models.mjs): mu = X·beta + intercept;
//! z = (y − mu) / exp(logSigma); value = −0.5·Σz² − n·logSigma,
//! n = 340, p = 13, data from the same LCG and Box-Muller as models.mjs.

use criterion::{black_box, criterion_group, Criterion};
use std::time::Instant;
use tangent_grad::batch::{units, Pool, Replicas};
use tangent_grad::core::graph::Graph;
use tangent_grad::core::op::Op;
use tangent_grad::core::plan::Plan;
use tangent_grad::core::shape::Shape;

const N: usize = 340;
const P: usize = 13;

/// models.mjs's `lcg`: s = s·1664525 + 1013904223 mod 2^32, u = s / 2^32.
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
}

/// models.mjs's `regressionData`: X row-major [n×p], y [n].
fn regression_data() -> (Vec<f64>, Vec<f64>) {
    let mut r = Lcg(42);
    let mut x = Vec::with_capacity(N * P);
    let mut y = Vec::with_capacity(N);
    for _ in 0..N {
        let row: Vec<f64> = (0..P).map(|_| r.normal()).collect();
        let mut m = 1.0;
        for (j, &v) in row.iter().enumerate() {
            m += (0.5 + 0.1 * j as f64) * v;
        }
        y.push(m + 0.7 * r.normal());
        x.extend_from_slice(&row);
    }
    (x, y)
}

/// models.mjs's `regressionParams`, as (intercept, beta, logSigma).
fn regression_params() -> (f64, Vec<f64>, f64) {
    (0.9, (0..P).map(|j| 0.4 + 0.1 * j as f64).collect(), -0.3)
}

/// The regression recorded with the core API, as `regression(G, d)` records it.
fn regression_plan(x: &[f64], y: &[f64]) -> Plan {
    let (intercept, beta, log_sigma) = regression_params();
    let mut g = Graph::default();
    let e = |r: Result<u32, tangent_grad::core::error::Error>| r.expect("graph op");
    let pi = e(g.leaf(Op::Leaf, Shape::Scalar, &[intercept]));
    let pb = e(g.leaf(Op::Leaf, Shape::Vector(P), &beta));
    let ps = e(g.leaf(Op::Leaf, Shape::Scalar, &[log_sigma]));
    let cx = e(g.leaf(Op::Const, Shape::Matrix(N, P), x));
    let xb = e(g.op(Op::Matmul, &[cx, pb], true));
    let mu = e(g.op(Op::Add, &[xb, pi], true));
    let cy = e(g.leaf(Op::Const, Shape::Vector(N), y));
    let r = e(g.op(Op::Sub, &[cy, mu], true));
    let s = e(g.op(Op::Exp, &[ps], true));
    let z = e(g.op(Op::Div, &[r, s], true));
    let half = e(g.leaf(Op::Const, Shape::Scalar, &[-0.5]));
    let zz = e(g.op(Op::Square, &[z], true));
    let ss = e(g.op(Op::Sum, &[zz], true));
    let a = e(g.op(Op::Mul, &[half, ss], true));
    let n = e(g.leaf(Op::Const, Shape::Scalar, &[N as f64]));
    let b = e(g.op(Op::Mul, &[n, ps], true));
    let root = e(g.op(Op::Sub, &[a, b], true));
    Plan::build(&g, root, &[pi, pb, ps], &[]).expect("plan")
}

/// One evaluation of the plan: feed, forward, backward, read gradients.
/// `grad` is [intercept, beta(13), logSigma].
fn replay(plan: &mut Plan, intercept: f64, beta: &[f64], log_sigma: f64, grad: &mut [f64; P + 2]) -> f64 {
    plan.set(0, &[intercept]).unwrap();
    plan.set(1, beta).unwrap();
    plan.set(2, &[log_sigma]).unwrap();
    let value = plan.forward().unwrap()[0];
    plan.backward();
    plan.gradient(0, &mut grad[0..1]).unwrap();
    plan.gradient(1, &mut grad[1..1 + P]).unwrap();
    plan.gradient(2, &mut grad[1 + P..]).unwrap();
    value
}

/// The same value and gradient derived by hand: one pass over the rows.
fn hand(x: &[f64], y: &[f64], intercept: f64, beta: &[f64], log_sigma: f64, grad: &mut [f64; P + 2]) -> f64 {
    let s = log_sigma.exp();
    let inv = 1.0 / s;
    let mut ss = 0.0;
    let mut gi = 0.0;
    let mut gb = [0.0; P];
    for (row, &yi) in x.chunks_exact(P).zip(y) {
        let mut m = intercept;
        for j in 0..P {
            m += row[j] * beta[j];
        }
        let z = (yi - m) * inv;
        ss += z * z;
        let gz = z * inv;
        gi += gz;
        for j in 0..P {
            gb[j] += gz * row[j];
        }
    }
    grad[0] = gi;
    grad[1..1 + P].copy_from_slice(&gb);
    grad[1 + P] = ss - N as f64;
    -0.5 * ss - N as f64 * log_sigma
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / a.abs().max(b.abs()).max(1e-300)
}

/// Both agree to 1e-10 relative at a few parameter values (outside timing).
fn check(plan: &mut Plan, x: &[f64], y: &[f64]) {
    let (i0, b0, s0) = regression_params();
    for k in 0..4 {
        let t = k as f64;
        let intercept = i0 + 0.1 * t;
        let beta: Vec<f64> = b0.iter().enumerate().map(|(j, b)| b + 0.01 * t * (j as f64 - 6.0)).collect();
        let log_sigma = s0 - 0.05 * t;
        let (mut ga, mut gb) = ([0.0; P + 2], [0.0; P + 2]);
        let va = replay(plan, intercept, &beta, log_sigma, &mut ga);
        let vb = hand(x, y, intercept, &beta, log_sigma, &mut gb);
        assert!(rel(va, vb) <= 1e-10, "value: plan {va} vs hand {vb}");
        // Gradient entries relative to the gradient's scale (entries near an
        // optimum may cancel to small numbers).
        let scale = gb.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        for i in 0..P + 2 {
            let d = (ga[i] - gb[i]).abs();
            assert!(
                d <= 1e-10 * ga[i].abs().max(gb[i].abs()) || d <= 1e-12 * scale,
                "gradient[{i}]: plan {} vs hand {} (relative {})",
                ga[i],
                gb[i],
                rel(ga[i], gb[i])
            );
        }
    }
}

/// Rows H·eⱼ against the closed form (w = (intercept, beta), x̃ᵢ = (1, xᵢ),
/// rᵢ = yᵢ − x̃ᵢ·w): ∂²/∂w∂w = −X̃ᵀX̃/σ², ∂²/∂w∂logSigma = −2Σrᵢx̃ᵢ/σ²,
/// ∂²/∂logSigma² = −2Σrᵢ²/σ².
fn check_hessian(rows: &[f64], x: &[f64], y: &[f64]) {
    let (intercept, beta, log_sigma) = regression_params();
    let (q, s2) = (P + 2, (2.0 * log_sigma).exp());
    let mut h = vec![0.0; q * q];
    for (row, &yi) in x.chunks_exact(P).zip(y) {
        let xt: Vec<f64> = std::iter::once(1.0).chain(row.iter().copied()).collect();
        let r = yi - intercept - row.iter().zip(&beta).map(|(a, b)| a * b).sum::<f64>();
        for a in 0..=P {
            for b in 0..=P {
                h[a * q + b] -= xt[a] * xt[b] / s2;
            }
            h[a * q + P + 1] -= 2.0 * r * xt[a] / s2;
            h[(P + 1) * q + a] -= 2.0 * r * xt[a] / s2;
        }
        h[q * q - 1] -= 2.0 * r * r / s2;
    }
    let scale = h.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for (i, (a, b)) in rows.iter().zip(&h).enumerate() {
        assert!((a - b).abs() <= 1e-12 * scale, "Hessian[{i}]: plan {a} vs closed form {b}");
    }
}

fn bench(c: &mut Criterion) {
    let (x, y) = regression_data();
    let mut plan = regression_plan(&x, &y);
    check(&mut plan, &x, &y);
    let (intercept, beta, log_sigma) = regression_params();
    let mut group = c.benchmark_group("regression");
    let mut grad = [0.0; P + 2];
    group.bench_function("plan replay", |b| {
        b.iter(|| black_box(replay(&mut plan, black_box(intercept), black_box(&beta), black_box(log_sigma), &mut grad)))
    });
    group.bench_function("hand-written", |b| {
        b.iter(|| black_box(hand(&x, &y, black_box(intercept), black_box(&beta), black_box(log_sigma), &mut grad)))
    });
    group.finish();

    // The 15×15 Hessian as `c.hessian` computes it: the tangent plan's
    // gradients at (x, eⱼ), in lanes, on a pool. (Not on the caller's own
    // plan, `Replicas::Own`, which makes its lanes anew every call.)
    let tangent = plan.tangent_plan().expect("tangent plan");
    let pool = Pool::new(&tangent);
    let point: Vec<f64> = std::iter::once(intercept).chain(beta.iter().copied()).chain([log_sigma]).collect();
    let mut rows = vec![0.0; (P + 2) * (P + 2)];
    // With the value and gradient at x, as `c.hessian` asks for them.
    let mut primal = vec![0.0; 1 + P + 2];
    units(Replicas::Pool(&pool), &point, &[], &mut rows, Some(&mut primal)).expect("units");
    check_hessian(&rows, &x, &y);
    let mut group = c.benchmark_group("regression Hessian");
    group.bench_function("pool", |b| b.iter(|| units(Replicas::Pool(&pool), black_box(&point), &[], &mut rows, Some(&mut primal)).expect("units")));
    group.finish();
}

criterion_group!(benches, bench);

/// Median ns per call over batches of ~10 ms, for the ratio line.
fn median_ns(mut f: impl FnMut()) -> f64 {
    let mut n = 1usize;
    loop {
        let t = Instant::now();
        for _ in 0..n {
            f();
        }
        if t.elapsed().as_secs_f64() > 0.01 {
            break;
        }
        n *= 2;
    }
    let mut v: Vec<f64> = (0..31)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_secs_f64() * 1e9 / n as f64
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    // Under `--test`, `--list` or a filter, no ratio line.
    let test_mode = std::env::args().skip(1).any(|a| a == "--test" || a == "--list" || !a.starts_with('-'));
    benches();
    criterion::Criterion::default().configure_from_args().final_summary();
    if test_mode {
        return;
    }
    // The ratio, measured once more side by side (criterion's own estimates
    // above are the reference; this line is the summary to quote).
    let (x, y) = regression_data();
    let mut plan = regression_plan(&x, &y);
    let (intercept, beta, log_sigma) = regression_params();
    let mut grad = [0.0; P + 2];
    let mut ratios = Vec::new();
    let (mut tp, mut th) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let p = median_ns(|| {
            black_box(replay(&mut plan, black_box(intercept), black_box(&beta), black_box(log_sigma), &mut grad));
        });
        let h = median_ns(|| {
            black_box(hand(&x, &y, black_box(intercept), black_box(&beta), black_box(log_sigma), &mut grad));
        });
        tp.push(p);
        th.push(h);
        ratios.push(p / h);
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (p, h, r) = (med(&mut tp), med(&mut th), med(&mut ratios));
    println!(
        "\nregression, n = {N}, p = {P}: plan replay {:.2} µs, hand-written {:.2} µs per call (medians); \
         replay / hand = {r:.2} (median of 5 side-by-side runs, {:.2}–{:.2})",
        p / 1000.0,
        h / 1000.0,
        ratios[0],
        ratios[ratios.len() - 1]
    );
}
