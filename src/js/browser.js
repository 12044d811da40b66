// The browser entry: the same surface over the WebAssembly build of the
// core, which grad.wasm.js here carries inline. No top-level await: a module
// worker that imports the package would drop messages posted while it loads.
import { install } from './binding.js';
import { loadWasm } from './wasm.js';

install(loadWasm());

export * from './api.js';
