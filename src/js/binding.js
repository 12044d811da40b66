// The core's functions (napi addon or WebAssembly adapter), installed once by the entry module.
// Rooms reach the core only through `N` here, and only when called, never
// while modules are being evaluated: ESM evaluates this folder before the
// entry's body runs, and a WebAssembly entry installs its binding only after
// instantiating it.

export let N = null;
/** Op codes by name, in the core's numbering. */
export let CODE = null;

export function install(binding) {
  N = binding;
  CODE = Object.fromEntries(N.opCodes().map((name, i) => [name, i]));
}

/** What forgets the core's handles (plans, spare tapes) when the core is replaced. */
const forgetters = [];

/** Call `forget()` when the core is replaced: a WebAssembly core after a trap (src/js/wasm.js). */
export function onCoreReplaced(forget) {
  forgetters.push(forget);
}

/** How many times the core was replaced: a handle made before the last replacement names nothing. */
export let replacements = 0;

/** The core was replaced: every plan and tape it held is gone. */
export function coreReplaced() {
  replacements++;
  for (const forget of forgetters) forget();
}
