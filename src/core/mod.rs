//! The pure-Rust core: no napi types, tested with `cargo test`.

pub mod error;
pub mod fastmath;
pub mod graph;
pub mod json;
pub mod kernels;
pub mod linalg;
pub mod math;
pub mod op;
pub mod pattern;
pub mod plan;
pub mod rules;
pub mod shape;
pub mod special;
pub mod tangent;
pub mod tape;
pub mod widest;
