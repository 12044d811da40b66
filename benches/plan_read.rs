//! `cargo bench --bench plan_read`: how long `plan_from_json` takes on large
//! plans (a chain of `add` nodes, and many scalar parameters summed), at
//! 10^4 and 10^5 nodes. For the peak memory, run it under `/usr/bin/time -v`
//! with a filter, e.g. `-- 'params/100000'`.

use criterion::{black_box, Criterion, SamplingMode};
use std::time::Duration;
use tangent_grad::core::json::plan_from_json;

/// A chain of `add` nodes on one scalar parameter, `n` nodes in all.
fn chain(n: usize) -> String {
    let mut t = String::from(r#"{"version":2,"input":"map","nodes":[{"kind":"param","name":"x","shape":[]}"#);
    for i in 1..n {
        t.push_str(&format!(r#",{{"kind":"op","op":"add","parents":[{},0]}}"#, i - 1));
    }
    t + &format!(r#"],"root":{}}}"#, n - 1)
}

/// `n` scalar parameters summed by a chain of `add` nodes (as in the test
/// "a 100 000-parameter plan reads in bounded time" of plans.test.mjs).
fn params(n: usize) -> String {
    let mut t = String::from(r#"{"version":2,"input":"map","nodes":["#);
    for i in 0..n {
        t.push_str(&format!(r#"{{"kind":"param","name":"p{i}","shape":[]}},"#));
    }
    t.push_str(r#"{"kind":"op","op":"add","parents":[0,1]}"#);
    for i in 2..n {
        t.push_str(&format!(r#",{{"kind":"op","op":"add","parents":[{},{i}]}}"#, n + i - 2));
    }
    t + &format!(r#"],"root":{}}}"#, 2 * n - 2)
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let mut g = c.benchmark_group("plan_from_json");
    g.sample_size(10).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2)).sampling_mode(SamplingMode::Flat);
    for (shape, make) in [("chain", chain as fn(usize) -> String), ("params", params)] {
        for n in [10_000, 100_000] {
            let text = make(n);
            g.bench_function(format!("{shape}/{n}"), |b| b.iter(|| plan_from_json(black_box(&text)).unwrap()));
        }
    }
    g.finish();
    c.final_summary();
}
