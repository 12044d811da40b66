// Fit a Gaussian process's hyperparameters by gradient ascent on the log
// marginal likelihood, in log l and log v (so both stay positive), with
// Adam steps. The objective is compiled: traced once, replayed natively.
//
//   node examples/gp-fit.mjs            100 points, 300 steps
//   node examples/gp-fit.mjs --small    30 points, 60 steps (also EXAMPLE_SIZE=small)

import { addDiag, dot, exp, div, mul, neg, sub, solvePSD, logdetPSD, compile } from '../index.js';

const small = process.argv.includes('--small') || process.env.EXAMPLE_SIZE === 'small';
const n = small ? 30 : 100;
const steps = small ? 60 : 300;

let seed = 11;
const rand = () => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 4294967296;
const xs = Array.from({ length: n }, () => 10 * rand()).sort((a, b) => a - b);
const y = xs.map((x) => Math.sin(x) + 0.15 * Math.cos(4 * x) + 0.2 * (rand() - 0.5));
const D2 = xs.map((a) => xs.map((b) => (a - b) ** 2));

// l² = exp(2 log l), v = exp(log v); noise fixed at 0.05.
const logML = compile((p) => {
  const K = addDiag(mul(exp(p.logV), exp(neg(div(D2, mul(2, exp(mul(2, p.logL))))))), 0.05);
  return sub(mul(-0.5, dot(y, solvePSD(K, y))), mul(0.5, logdetPSD(K)));
});

// Adam, ascending.
const theta = { logL: Math.log(3), logV: Math.log(0.2) };
const keys = Object.keys(theta);
const m = { logL: 0, logV: 0 };
const s = { logL: 0, logV: 0 };
const [rate, b1, b2] = [0.1, 0.9, 0.999];

const start = logML(theta).value;
const show = (k, value) =>
  console.log(`step ${String(k).padStart(4)}  log p(y) ${value.toFixed(4).padStart(10)}  l ${Math.exp(theta.logL).toFixed(4)}  v ${Math.exp(theta.logV).toFixed(4)}`);
console.log(`GP hyperparameter fit, n = ${n}, ${steps} Adam steps on (log l, log v)\n`);
let value = start;
for (let k = 1; k <= steps; k++) {
  const r = logML(theta);
  value = r.value;
  if (k === 1 || k % (steps / 5) === 0) show(k - 1, value);
  for (const key of keys) {
    const g = r.gradient[key];
    m[key] = b1 * m[key] + (1 - b1) * g;
    s[key] = b2 * s[key] + (1 - b2) * g * g;
    const mh = m[key] / (1 - b1 ** k);
    const sh = s[key] / (1 - b2 ** k);
    theta[key] += (rate * mh) / (Math.sqrt(sh) + 1e-8);
  }
}
const end = logML(theta);
show(steps, end.value);
console.log(`\nlog likelihood: ${start.toFixed(4)} -> ${end.value.toFixed(4)}`);
console.log(`gradient at the end: ∂/∂log l = ${end.gradient.logL.toExponential(2)}, ∂/∂log v = ${end.gradient.logV.toExponential(2)}`);
console.log(`fitted l = ${Math.exp(theta.logL).toFixed(4)}, v = ${Math.exp(theta.logV).toFixed(4)}`);
if (!(end.value > start)) process.exit(1);
