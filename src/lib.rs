//! @tangent.to/grad, native: a reverse-mode automatic differentiation core in
//! pure Rust (`core`), and the thin napi layer that exposes it to JavaScript.

pub mod core;
#[cfg(feature = "node")]
mod binding;
