// Which core the Node entry (index.js) installs: the native addon when one
// loads here, else the WebAssembly build, said once on stderr.
// TANGENT_GRAD_WASM=1 picks the WebAssembly build outright (the test suite
// runs under both).

function wasmForced() {
  try {
    return globalThis.process?.env?.TANGENT_GRAD_WASM === '1';
  } catch {
    return false; // Deno without --allow-env
  }
}

export async function nativeOrWasm() {
  if (!wasmForced()) {
    try {
      return await import('../../binding.js');
    } catch (e) {
      const why = String(e?.message ?? e).split('\n')[0];
      console.warn(
        `@tangent.to/grad: no native addon loads here (${why}); using the WebAssembly build. ` +
          'For the native one, install Rust (https://rustup.rs) and run `node node_modules/@tangent.to/grad/npm/install.mjs`.',
      );
    }
  }
  const { loadWasm } = await import('./wasm.js');
  return loadWasm();
}
