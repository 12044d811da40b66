//! How long `plan_from_json` takes, and (under `/usr/bin/time -v`) how much
//! memory it peaks at, on large plans. Ignored: run it by hand with
//! `cargo test --release --test json_read_time -- --ignored --nocapture`,
//! and `PLAN_SHAPE=chain|params PLAN_NODES=100000` to pick one plan.

use std::time::Instant;
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

#[test]
#[ignore]
fn read_time() {
    let shapes = std::env::var("PLAN_SHAPE").map_or(vec!["chain".to_string(), "params".to_string()], |s| vec![s]);
    let sizes = std::env::var("PLAN_NODES").map_or(vec![10_000, 100_000], |s| vec![s.parse().unwrap()]);
    for shape in &shapes {
        for &n in &sizes {
            let text = if shape == "chain" { chain(n) } else { params(n) };
            let runs = if n > 200_000 { 1 } else { 7 };
            let mut best = f64::INFINITY;
            for _ in 0..runs {
                let t0 = Instant::now();
                let plan = plan_from_json(&text).unwrap();
                best = best.min(t0.elapsed().as_secs_f64());
                drop(plan);
            }
            println!("{shape} {n}: {:.1} MB of text, read in {:.2} ms (best of {runs})", text.len() as f64 / 1e6, best * 1e3);
        }
    }
}
