// The browser entry (and any runtime without the native addon): the same
// surface over the WebAssembly build of the core, which lib/grad.wasm.js
// carries inline.
import { install } from './lib/binding.js';
import { loadWasm } from './lib/wasm.js';

install(await loadWasm());

export * from './lib/api.js';
