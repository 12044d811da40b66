// @ts-self-types="./index.d.ts"
// The JSR entry (jsr.json): JSR cannot carry a native addon, so its users
// get the WebAssembly build, the one browsers get from the npm package
// (src/js/browser.js), typed by the npm package's own index.d.ts.
export * from './src/js/browser.js';
