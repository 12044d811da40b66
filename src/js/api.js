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
export { setThreads } from './threads.js';
