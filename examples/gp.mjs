// `npm run demo`: the motivating example. The log marginal likelihood of a
// Gaussian process (RBF kernel, fixed noise) and its exact gradient in the
// hyperparameters l (length scale) and v (signal variance), at a few values,
// checked against central finite differences and against the compiled plan.
//
//   node examples/gp.mjs            100 points
//   node examples/gp.mjs --small    20 points (also EXAMPLE_SIZE=small)

import {
  addDiag, dot, exp, div, mul, neg, square, sub, solvePSD, logdetPSD, valueAndGrad, compile,
} from '../index.js';

const small = process.argv.includes('--small') || process.env.EXAMPLE_SIZE === 'small';
const n = small ? 20 : 100;

// Data: noisy samples of sin(x) at n sorted points in [0, 10], from a fixed LCG.
let seed = 7;
const rand = () => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 4294967296;
const xs = Array.from({ length: n }, () => 10 * rand()).sort((a, b) => a - b);
const y = xs.map((x) => Math.sin(x) + 0.2 * (rand() - 0.5));
const D2 = xs.map((a) => xs.map((b) => (a - b) ** 2)); // squared distances, a constant

// log p(y | l, v) = -½ yᵀK⁻¹y - ½ log|K| (+ a constant), K = v·exp(-D²/2l²) + 0.05·I
const logML = (p) => {
  const K = addDiag(mul(p.v, exp(neg(div(D2, mul(2, square(p.l)))))), 0.05);
  return sub(mul(-0.5, dot(y, solvePSD(K, y))), mul(0.5, logdetPSD(K)));
};

const vg = valueAndGrad(logML);
const compiled = compile(logML);

/** Central difference of the log likelihood in one hyperparameter. */
function central(p, key, h = 1e-6) {
  const up = vg.value({ ...p, [key]: p[key] + h });
  const down = vg.value({ ...p, [key]: p[key] - h });
  return (up - down) / (2 * h);
}

console.log(`GP log marginal likelihood, n = ${n} points, RBF kernel, noise 0.05\n`);
console.log('    l      v   log p(y)      ∂/∂l        ∂/∂v    (central differences)');
let worst = 0;
let identical = true;
for (const p of [{ l: 0.5, v: 0.5 }, { l: 1.3, v: 0.9 }, { l: 2.0, v: 1.5 }]) {
  const { value, gradient } = vg(p);
  const fl = central(p, 'l');
  const fv = central(p, 'v');
  worst = Math.max(worst, Math.abs(gradient.l - fl) / Math.max(1, Math.abs(fl)), Math.abs(gradient.v - fv) / Math.max(1, Math.abs(fv)));
  const c = compiled(p);
  identical &&= Object.is(c.value, value) && Object.is(c.gradient.l, gradient.l) && Object.is(c.gradient.v, gradient.v);
  const f = (x, w = 10) => x.toFixed(4).padStart(w);
  console.log(`${f(p.l, 5)}  ${f(p.v, 5)} ${f(value)}  ${f(gradient.l)}  ${f(gradient.v)}    (${fl.toFixed(4)}, ${fv.toFixed(4)})`);
}
console.log(`\nlargest difference from central differences: ${worst.toExponential(2)}`);
console.log(`compile(logML) gives the same numbers bit for bit: ${identical ? 'yes' : 'NO'}`);
if (!identical || !(worst < 1e-4)) process.exit(1);
