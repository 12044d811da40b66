//! @tangent.to/grad: a reverse-mode automatic differentiation core in pure
//! Rust (`core`), the calls both bindings share (`api`), and the two thin
//! bindings: napi for Node (`binding`), the C ABI for WebAssembly (`wasm`).
//! `batch` evaluates a plan at many points per call, on many threads.

// Without a binding (the core's own `cargo test`) nothing calls into these.
#[cfg_attr(not(any(feature = "node", target_arch = "wasm32")), allow(dead_code, unused_imports))]
mod api;
pub mod batch;
pub mod core;
#[cfg_attr(not(any(feature = "node", target_arch = "wasm32")), allow(dead_code, unused_imports))]
mod workers;
#[cfg(feature = "node")]
mod binding;
#[cfg(all(any(feature = "node", test), target_os = "linux"))]
mod alloc;
#[cfg(all(feature = "node", target_os = "linux"))]
#[global_allocator]
static ALLOCATOR: alloc::Allocator = alloc::Allocator;
#[cfg(target_arch = "wasm32")]
mod wasm;
