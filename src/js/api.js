// @tangent.to/grad: the ESM surface. Values, the tape and the kernels live in
// the Rust core (reached through ./binding.js, once the entry has installed
// it); these modules coerce JavaScript arguments, keep the Var graph the user
// sees (for `parents`, `spec` and `toJSON`), and turn results back into the
// caller's forms. Every call into Rust passes numbers and typed arrays only.

export { isTensor, tensor, zeros, eye, toNested } from './forms.js';
export { Var, asTensor, variable } from './tape.js';
export {
  add,
  mul,
  sub,
  div,
  maximum,
  minimum,
  neg,
  exp,
  log,
  sqrt,
  square,
  tanh,
  sigmoid,
  relu,
  lgamma,
  sum,
  mean,
  transpose,
  diagPart,
  cholesky,
  matmul,
  dot,
  addDiag,
  solveGeneral,
  pow,
  trace,
  reshape,
  slice,
  concat,
  triangularSolve,
  logdetPSD,
  solvePSD,
  inv,
} from './ops.js';
export { valueAndGrad, grad } from './drivers.js';
export { jacobian, jvp, hvp, hessian } from './higher.js';
export { compile } from './compile.js';
export { compileFromJSON } from './plans.js';
export { splitValueAndGrad, valueAndGradFns } from './split.js';

import { N } from './binding.js';

/**
 * The most threads one large factorization, solve or product may use: a
 * whole number, 0 for the machine's available parallelism, cut to it when
 * more; without an argument, nothing changes. Returns the number now in
 * effect; always 1 in the WebAssembly build, which runs on one thread.
 * Results do not depend on it, bit for bit.
 */
export function setThreads(n) {
  if (n !== undefined && (typeof n !== 'number' || !Number.isInteger(n) || n < 0)) {
    const got = typeof n === 'number' ? String(n) : typeof n === 'string' ? JSON.stringify(n) : typeof n;
    throw new Error(`setThreads: n must be a whole number (0 for the machine's cores), got ${got}`);
  }
  if (typeof N.setThreads !== 'function') return 1;
  return n === undefined ? N.threads() : N.setThreads(Math.min(n, 0xffffffff));
}
