// Which core the Node, Deno and Bun entry (index.js) installs: the native
// addon when one loads here, else the WebAssembly build, said once on
// stderr. TANGENT_GRAD_WASM=1 picks the WebAssembly build outright (the test
// suite runs under both). Synchronous on purpose: an entry with top-level
// await makes a Web Worker that imports it drop the messages that arrive
// while it loads (Deno and Bun, like browsers, deliver them at once).

import { readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { totalmem } from 'node:os';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setHardCap } from './budget.js';
import { loadWasm } from './wasm.js';

const require = createRequire(import.meta.url);

/**
 * Under Deno, whether a permission is granted already. Using one that is
 * not makes Deno prompt on a terminal, and wait there: reading the
 * environment, or napi-rs's loader (binding.cjs) reading files and
 * NAPI_RS_* variables.
 */
function denoGrants(descriptor) {
  try {
    return Deno.permissions.querySync(descriptor).state === 'granted';
  } catch {
    return false;
  }
}

function wasmForced() {
  if (globalThis.Deno && !denoGrants({ name: 'env', variable: 'TANGENT_GRAD_WASM' })) return false;
  try {
    return globalThis.process?.env?.TANGENT_GRAD_WASM === '1';
  } catch {
    return false;
  }
}

/** The variables napi-rs's loader (binding.cjs) reads. */
const LOADER_VARIABLES = ['NAPI_RS_NATIVE_LIBRARY_PATH', 'NAPI_RS_FORCE_WASI', 'NAPI_RS_WASI_FLAVOR', 'NAPI_RS_ENFORCE_VERSION_CHECK'];

/**
 * Whether loading the native addon may go ahead without a prompt: always,
 * but under Deno without what the loader touches, each asked as narrowly
 * as it is used (so `--allow-read=<the project>` serves): its variables,
 * the addon read and loaded from this package's folder or (from a
 * platform package) the folder beside it, and `/usr/bin/ldd` on Linux.
 */
function addonAllowed() {
  if (!globalThis.Deno) return true;
  const here = fileURLToPath(new URL('../../', import.meta.url));
  const local = denoGrants({ name: 'read', path: here }) && readdirSync(here).some((f) => /^grad\..+\.node$/.test(f));
  const folder = local ? here : dirname(here);
  return (
    LOADER_VARIABLES.every((variable) => denoGrants({ name: 'env', variable })) &&
    denoGrants({ name: 'read', path: folder }) &&
    denoGrants({ name: 'ffi', path: folder }) &&
    (globalThis.process?.platform !== 'linux' || denoGrants({ name: 'read', path: '/usr/bin/ldd' }))
  );
}

function warnWasm() {
  // napi-rs's own message is about npm's optional dependencies, which is
  // rarely the cause here; say what is.
  const platform = globalThis.process ? `${process.platform}-${process.arch}` : 'this platform';
  console.warn(`@tangent.to/grad: no native addon loads for ${platform}; using the WebAssembly build (${advice()}).`);
}

/** What to tell a user whose native addon did not load. */
function advice() {
  if (globalThis.Deno) return 'under Deno, allow it with --allow-ffi --allow-read --allow-env';
  return 'to build one, install Rust (https://rustup.rs) and run `node node_modules/@tangent.to/grad/npm/install.mjs`';
}

export function nativeOrWasm() {
  if (wasmForced()) return loadWasm();
  if (!addonAllowed()) {
    warnWasm();
    return loadWasm();
  }
  let native;
  try {
    native = require('../../binding.cjs');
  } catch {
    warnWasm();
    return loadWasm();
  }
  // Native memory is the machine's, not a wasm32 memory's 4 GiB: plans in
  // use may hold a quarter of it before they are rebuilt (budget.js).
  const memory = machineMemory();
  if (memory > 0) setHardCap(memory / 4);
  return native;
}

/**
 * The memory the process may use in bytes: the machine's, or a container's
 * limit below it (cgroups); 0 where it may not be asked (Deno would prompt).
 */
function machineMemory() {
  try {
    if (globalThis.Deno && Deno.permissions.querySync({ name: 'sys', kind: 'systemMemoryInfo' }).state !== 'granted') return 0;
    const total = totalmem();
    const limit = globalThis.process?.constrainedMemory?.() ?? 0;
    return limit > 0 && limit < total ? limit : total;
  } catch {
    return 0;
  }
}
