// The browser entry (and any runtime without the native addon): the same
// surface over the WebAssembly build of the core, which grad.wasm.js here
// carries inline.
import { install } from './binding.js';
import { loadWasm } from './wasm.js';

install(await loadWasm());

export * from './api.js';
