// Hamiltonian Monte Carlo on the benchmark's Bayesian linear regression
// (bench/models.mjs: n = 340 observations, 13 covariates). The potential
// energy, minus the log posterior, is compiled once; every leapfrog step is one
// native replay. The 15 parameters travel as one tensor { data, shape: [15] },
// its gradient returned as a fresh Float64Array (so few values are copied into
// the plan's buffer; a tensor of more than 1 024 would be read in place).
//
//   node examples/hmc.mjs            1 000 warm-up + 2 000 draws
//   node examples/hmc.mjs --small    200 warm-up + 300 draws (also EXAMPLE_SIZE=small)

import { compile, neg, tensor } from '../index.js';
import { lcg, normal } from '../bench/models.mjs';
import { data, dim, logPosterior } from './regression.mjs';

const small = process.argv.includes('--small') || process.env.EXAMPLE_SIZE === 'small';
const warmup = small ? 200 : 1000;
const draws = small ? 300 : 2000;
const leapfrogSteps = 10;

const { y, n, p } = data;

// U(θ) = -log p(θ | y).
const potential = compile((theta) => neg(logPosterior(theta)));

const rand = lcg(2024);
const gauss = () => normal(rand);

/** One HMC transition from q (a tensor) with step size eps: { q, accepted, acceptProb }. */
function transition(q, eps) {
  const start = potential(q);
  const r0 = Float64Array.from({ length: dim }, gauss);
  const qn = tensor(q.data.slice(), [dim]);
  const r = r0.slice();
  let g = start.gradient.data;
  // Leapfrog: half step in momentum, L full steps, half step back.
  for (let i = 0; i < dim; i++) r[i] -= 0.5 * eps * g[i];
  let u = start.value;
  for (let step = 0; step < leapfrogSteps; step++) {
    for (let i = 0; i < dim; i++) qn.data[i] += eps * r[i];
    const e = potential(qn);
    u = e.value;
    g = e.gradient.data;
    const w = step === leapfrogSteps - 1 ? 0.5 : 1;
    for (let i = 0; i < dim; i++) r[i] -= w * eps * g[i];
  }
  const kinetic = (m) => 0.5 * m.reduce((a, b) => a + b * b, 0);
  const logRatio = start.value + kinetic(r0) - (u + kinetic(r));
  const acceptProb = Number.isFinite(logRatio) ? Math.min(1, Math.exp(logRatio)) : 0;
  const accepted = rand() < acceptProb;
  return { q: accepted ? qn : q, accepted, acceptProb };
}

// Start at the prior's centre, with sigma at the data's spread.
const ySd = Math.sqrt(y.reduce((a, v) => a + v * v, 0) / n);
let q = tensor(new Float64Array(dim), [dim]);
q.data[p + 1] = Math.log(ySd);

// Warm-up: adapt the step size toward ~80% acceptance (Robbins-Monro on log eps).
let logEps = Math.log(0.005);
for (let k = 1; k <= warmup; k++) {
  const t = transition(q, Math.exp(logEps));
  q = t.q;
  logEps += (t.acceptProb - 0.8) / Math.sqrt(k + 10);
}
const eps = Math.exp(logEps);

const t0 = performance.now();
let accepted = 0;
const sums = new Float64Array(dim);
for (let k = 0; k < draws; k++) {
  const t = transition(q, eps);
  q = t.q;
  if (t.accepted) accepted++;
  for (let i = 0; i < dim; i++) sums[i] += q.data[i];
}
const seconds = (performance.now() - t0) / 1000;
const mean = Array.from(sums, (s) => s / draws);

console.log(`HMC on the regression: n = ${n}, ${dim} parameters, ${leapfrogSteps} leapfrog steps per draw`);
console.log(`${warmup} warm-up draws (step size adapted to ${eps.toExponential(3)}), then ${draws} draws`);
console.log(`${draws * (leapfrogSteps + 1)} gradient evaluations in ${seconds.toFixed(2)} s\n`);
console.log('parameter      posterior mean   value used to simulate');
console.log(`intercept      ${mean[0].toFixed(4).padStart(14)}   1`);
for (const j of [0, 1, 2, p - 1]) {
  console.log(`beta[${j}]`.padEnd(15) + `${mean[1 + j].toFixed(4).padStart(14)}   ${(0.5 + 0.1 * j).toFixed(1)}`);
}
console.log(`log sigma      ${mean[p + 1].toFixed(4).padStart(14)}   ${Math.log(0.7).toFixed(4)} (sigma 0.7)`);
console.log(`\nacceptance rate: ${(accepted / draws).toFixed(3)}`);
