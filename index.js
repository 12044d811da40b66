// The Node, Deno and Bun entry: the native addon when it loads, else the
// WebAssembly build (lib/load.js). Browsers get browser.js instead.
import { install } from './lib/binding.js';
import { nativeOrWasm } from './lib/load.js';

install(await nativeOrWasm());

export * from './lib/api.js';
