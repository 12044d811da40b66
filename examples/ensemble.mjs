// An affine-invariant ensemble sampler (Goodman & Weare 2010, the stretch
// move) on the benchmark's Bayesian linear regression (bench/models.mjs:
// n = 340 observations, 13 covariates, 15 parameters). The log posterior is
// compiled once. Each sweep moves the ensemble in two halves, as emcee's
// parallel stretch move does: every walker of one half proposes a stretch
// toward a walker of the other half, so a whole half is evaluated at once:
// one `batch` call per half, its points packed as one [walkers/2, 15] tensor.
// The same chain is then run again with one compiled call per walker, from
// the same random numbers: it must give the same draws, bit for bit, and the
// two timings say what batching buys. (The stretch move needs only values;
// `batch` returns gradients too, which a gradient-based sampler would use.)
//
//   node examples/ensemble.mjs            48 walkers, 600 warm-up + 2 000 sweeps
//   node examples/ensemble.mjs --small    32 walkers, 100 warm-up + 200 sweeps (also EXAMPLE_SIZE=small)

import { compile, matmul, solveGeneral, tensor, transpose } from '../index.js';
import { lcg, normal } from '../bench/models.mjs';
import { data, dim, logPosterior } from './regression.mjs';

const small = process.argv.includes('--small') || process.env.EXAMPLE_SIZE === 'small';
const walkers = small ? 32 : 48; // even, and more than twice the dimension
const warmup = small ? 100 : 600;
const sweeps = small ? 200 : 2000;
const a = 2; // the stretch scale

const { X, y, n, p } = data;

const logPost = compile(logPosterior);

// The least-squares fit, with this package's ops: (XᵀX)⁻¹ Xᵀy with a column of ones for the intercept.
const Xa = X.map((row) => [1, ...row]);
const fit = solveGeneral(matmul(transpose(Xa), Xa), matmul(transpose(Xa), y)).data;
const rss = y.reduce((s, v, i) => s + (v - Xa[i].reduce((t, x, j) => t + x * fit[j], 0)) ** 2, 0);
const start = [...fit, Math.log(Math.sqrt(rss / n))];

/** Log densities of the points in rows [from, from + count) of `proposals` (a [walkers, dim] buffer). */
const evaluators = {
  batch: (proposals, from, count) => logPost.batch(tensor(proposals.subarray(from * dim, (from + count) * dim), [count, dim])).values,
  'one call per walker': (proposals, from, count) => {
    const out = new Float64Array(count);
    for (let i = 0; i < count; i++) out[i] = logPost(tensor(proposals.subarray((from + i) * dim, (from + i + 1) * dim), [dim])).value;
    return out;
  },
};

/** Run the sampler with one way of evaluating; returns the draws' sums, acceptance and timing. */
function run(evaluate) {
  const rand = lcg(2025);
  // Start in a small ball around the least-squares fit.
  const pos = new Float64Array(walkers * dim);
  for (let w = 0; w < walkers; w++) {
    for (let d = 0; d < dim; d++) pos[w * dim + d] = start[d] + 0.01 * normal(rand);
  }
  let lp = evaluate(pos, 0, walkers);
  const half = walkers / 2;
  const proposals = new Float64Array(walkers * dim);
  const zs = new Float64Array(half);
  const sums = new Float64Array(dim);
  let accepted = 0;
  let proposed = 0;
  let ms = 0;
  for (let sweep = 0; sweep < warmup + sweeps; sweep++) {
    for (const [from, other] of [[0, half], [half, 0]]) {
      // Propose: Y = X_k + z (X_j - X_k), k from the other half, z ~ g(z) ∝ 1/√z on [1/a, a].
      for (let i = 0; i < half; i++) {
        const j = from + i;
        const k = other + Math.floor(rand() * half);
        const z = ((a - 1) * rand() + 1) ** 2 / a;
        zs[i] = z;
        for (let d = 0; d < dim; d++) proposals[j * dim + d] = pos[k * dim + d] + z * (pos[j * dim + d] - pos[k * dim + d]);
      }
      const t0 = performance.now();
      const lpNew = evaluate(proposals, from, half);
      ms += performance.now() - t0;
      // Accept with probability min(1, z^(d-1) p(Y) / p(X_j)).
      for (let i = 0; i < half; i++) {
        const j = from + i;
        const logRatio = (dim - 1) * Math.log(zs[i]) + lpNew[i] - lp[j];
        if (Math.log(rand()) < logRatio) {
          pos.set(proposals.subarray(j * dim, (j + 1) * dim), j * dim);
          lp[j] = lpNew[i];
          if (sweep >= warmup) accepted++;
        }
        if (sweep >= warmup) proposed++;
      }
    }
    if (sweep >= warmup) for (let w = 0; w < walkers; w++) for (let d = 0; d < dim; d++) sums[d] += pos[w * dim + d];
  }
  return { sums, pos, acceptance: accepted / proposed, ms };
}

const results = Object.fromEntries(Object.entries(evaluators).map(([name, f]) => [name, run(f)]));
const [viaBatch, viaCalls] = Object.values(results);
const same = viaBatch.pos.every((v, i) => Object.is(v, viaCalls.pos[i]));
const mean = Array.from(viaBatch.sums, (s) => s / (sweeps * walkers));
const evaluations = walkers * (warmup + sweeps);

console.log(`Ensemble sampler (stretch move, a = ${a}) on the regression: n = ${n}, ${dim} parameters`);
console.log(`${walkers} walkers, ${warmup} warm-up sweeps + ${sweeps} sweeps: ${evaluations} log-density evaluations\n`);
console.log('parameter      posterior mean   value used to simulate');
console.log(`intercept      ${mean[0].toFixed(4).padStart(14)}   1`);
for (const j of [0, 1, 2, p - 1]) {
  console.log(`beta[${j}]`.padEnd(15) + `${mean[1 + j].toFixed(4).padStart(14)}   ${(0.5 + 0.1 * j).toFixed(1)}`);
}
console.log(`log sigma      ${mean[p + 1].toFixed(4).padStart(14)}   ${Math.log(0.7).toFixed(4)} (sigma 0.7)`);
console.log(`\nacceptance rate: ${viaBatch.acceptance.toFixed(3)}`);
console.log(`same draws both ways: ${same ? 'yes' : 'NO'}`);
for (const [name, r] of Object.entries(results)) {
  console.log(`${name.padEnd(20)} ${r.ms.toFixed(0).padStart(6)} ms evaluating (${((r.ms * 1000) / evaluations).toFixed(2)} µs a walker)`);
}
console.log(`batch: ${(viaCalls.ms / viaBatch.ms).toFixed(2)}× the throughput of one call per walker`);
if (!same) process.exit(1);
