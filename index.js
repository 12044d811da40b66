// The Node, Deno and Bun entry: the native addon when it loads, else the
// WebAssembly build (src/js/load.js). Browsers get src/js/browser.js instead.
import { install } from './src/js/binding.js';
import { nativeOrWasm } from './src/js/load.js';

install(nativeOrWasm());

export * from './src/js/api.js';
