//! @tangent.to/grad: a reverse-mode automatic differentiation core in pure
//! Rust (`core`), the calls both bindings share (`api`), and the two thin
//! bindings: napi for Node (`binding`), the C ABI for WebAssembly (`wasm`).

mod api;
pub mod core;
#[cfg(feature = "node")]
mod binding;
#[cfg(target_arch = "wasm32")]
mod wasm;
