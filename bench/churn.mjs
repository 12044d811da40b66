// `node bench/churn.mjs`: plan churn, as in a server that compiles per
// request. Each iteration captures a fresh 20×3 matrix in a new compiled
// function, calls it once and drops it, in one synchronous loop that never
// yields (so Node runs no finalizer: only the plan budget, src/js/budget.js,
// frees plans). Every iteration is timed alone; printed: the slowest, the
// 99th percentile, how many took over 20 and 50 ms, how many plans the
// budget released, and process memory (RSS, V8's heap, external and
// ArrayBuffer bytes) at the end and at its peak, as growth over the start.
//
//   node bench/churn.mjs [--iterations N] [--every K] [--json]
//
// `--every K` samples memory every K iterations (default 1000; a sample
// costs about a microsecond and is not in any iteration's time).

import * as G from '../index.js';
import { stats } from '../src/js/budget.js';

const argv = process.argv.slice(2);
const arg = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 ? Number(argv[i + 1]) : fallback;
};
const ITERATIONS = arg('--iterations', 100_000);
const EVERY = arg('--every', 1000);
const json = argv.includes('--json');

const MB = 2 ** 20;
const FIELDS = ['rss', 'heapUsed', 'external', 'arrayBuffers'];

/** One iteration: make, call, drop. `k` varies the captured data. */
function step(k, params) {
  const X = [];
  for (let i = 0; i < 20; i++) X.push([Math.sin(k + i), Math.cos(k - i), (k % 7) + i / 20]);
  const f = G.compile((p) => G.sum(G.matmul(X, p)));
  return f(params).value;
}

const params = [0.5, -0.25, 1];
const start = process.memoryUsage();
const peak = Object.fromEntries(FIELDS.map((k) => [k, start[k]]));
const times = new Float64Array(ITERATIONS);
const released = stats.released;
let check = 0;
const t0 = process.hrtime.bigint();
for (let i = 0; i < ITERATIONS; i++) {
  const a = process.hrtime.bigint();
  check += step(i, params);
  times[i] = Number(process.hrtime.bigint() - a) / 1e6;
  if (i % EVERY === 0) {
    const m = process.memoryUsage();
    for (const k of FIELDS) if (m[k] > peak[k]) peak[k] = m[k];
  }
}
const totalMs = Number(process.hrtime.bigint() - t0) / 1e6;
const end = process.memoryUsage();
for (const k of FIELDS) if (end[k] > peak[k]) peak[k] = end[k];
if (!Number.isFinite(check)) throw new Error('a non-finite value');

const sorted = Float64Array.from(times).sort();
let worstAt = 0;
for (let i = 1; i < ITERATIONS; i++) if (times[i] > times[worstAt]) worstAt = i;
const result = {
  iterations: ITERATIONS,
  totalS: totalMs / 1000,
  meanUs: (totalMs * 1000) / ITERATIONS,
  medianUs: sorted[ITERATIONS >> 1] * 1000,
  p99Ms: sorted[Math.floor(ITERATIONS * 0.99)],
  maxMs: sorted[ITERATIONS - 1],
  worstAt,
  over20: times.filter((t) => t > 20).length,
  over50: times.filter((t) => t > 50).length,
  released: stats.released - released,
  startMB: Object.fromEntries(FIELDS.map((k) => [k, start[k] / MB])),
  endGrowthMB: Object.fromEntries(FIELDS.map((k) => [k, (end[k] - start[k]) / MB])),
  peakGrowthMB: Object.fromEntries(FIELDS.map((k) => [k, (peak[k] - start[k]) / MB])),
};

if (json) {
  console.log(JSON.stringify(result));
} else {
  const f = (o) => FIELDS.map((k) => `${k} ${o[k] >= 0 ? '+' : ''}${o[k].toFixed(1)}`).join(', ');
  console.log(
    `churn (${process.env.TANGENT_GRAD_WASM === '1' ? 'WebAssembly' : 'native'}): ${ITERATIONS} make-call-drop iterations in ${result.totalS.toFixed(1)} s ` +
      `(mean ${result.meanUs.toFixed(0)} µs, median ${result.medianUs.toFixed(0)} µs)`,
  );
  console.log(
    `  slowest ${result.maxMs.toFixed(1)} ms (iteration ${worstAt}), p99 ${result.p99Ms.toFixed(2)} ms, ` +
      `${result.over20} over 20 ms, ${result.over50} over 50 ms; the budget released ${result.released} plans`,
  );
  console.log(`  end growth MB: ${f(result.endGrowthMB)}`);
  console.log(`  peak growth MB (sampled every ${EVERY}): ${f(result.peakGrowthMB)}`);
}
