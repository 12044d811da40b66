// Many points per call (issue 9): `batch`, the packed form and `async`,
// each measured side by side with the calls they replace, in one process,
// round after round; medians over the rounds.
//
//   node bench/batch.mjs              11 rounds
//   node bench/batch.mjs --rounds 21
//   node bench/batch.mjs --quick      3 rounds, shorter timings (a smoke test)
//
// Workloads and targets:
//   regression, 256 points     batch ≥ 1.8× 256 sequential compiled calls (default threads),
//                              ≥ 0.95× with threads: 1
//   eight schools, 1 024 points (10 scalar parameters, ~100 scalar ops)
//                              batch ≥ 3× sequential compiled calls
//   regression on a 13-vector, 1 024 points
//                              packed [k, 13] tensor ≥ 1.3× the array-of-points form (number[] points;
//                              Float64Array points shown for comparison)
//   gp200, 100 evaluations     `async`, two in flight, ≥ 1.6× sequential synchronous calls;
//                              a 1 ms setInterval's largest lag ≤ 5 ms meanwhile

import os from 'node:os';
import { performance } from 'node:perf_hooks';
import * as G from '../index.js';
import { gp, gpData, lcg, normal, regression, regressionData, regressionParams } from './models.mjs';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const roundsAt = args.indexOf('--rounds');
const rounds = roundsAt >= 0 ? Number(args[roundsAt + 1]) : quick ? 3 : 11;
const minMs = quick ? 15 : 60;

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

/** Milliseconds per run of fn, repeated for at least minMs. */
function msPer(fn) {
  let n = 0;
  const t0 = performance.now();
  let t = t0;
  do {
    fn();
    n++;
    t = performance.now();
  } while (t - t0 < minMs);
  return (t - t0) / n;
}

/** Side by side: each round times every contender once, in turn. */
function sideBySide(contenders) {
  for (const f of Object.values(contenders)) for (let i = 0; i < 3; i++) f(); // warm up
  const times = Object.fromEntries(Object.keys(contenders).map((k) => [k, []]));
  for (let r = 0; r < rounds; r++) for (const [k, f] of Object.entries(contenders)) times[k].push(msPer(f));
  return times;
}

/** The median over rounds of the ratio a/b, measured in the same round. */
const ratio = (a, b) => median(a.map((x, i) => x / b[i]));
const fmt = (ms) => (ms >= 1 ? `${ms.toFixed(2)} ms` : `${(ms * 1000).toFixed(0)} µs`);

const rows = [];
function report(name, target, times, base, against, pass) {
  const r = ratio(times[base], times[against]);
  rows.push({ name, target, r, pass: pass(r) });
  console.log(`  ${name}: ${r.toFixed(2)}× (target ${target}) — ${fmt(median(times[base]))} vs ${fmt(median(times[against]))}`);
}

console.log(
  `bench/batch.mjs: ${rounds} rounds, Node ${process.versions.node}, ${os.availableParallelism()} threads available` +
    `${process.env.TANGENT_GRAD_WASM === '1' ? ', WebAssembly core' : ''}`,
);

// ---------------------------------------------------------------- regression, 256 points

{
  const f = G.compile(regression(G, regressionData()));
  const q = regressionParams();
  const r = lcg(7);
  const points = Array.from({ length: 256 }, () => ({
    intercept: q.intercept + 0.1 * normal(r),
    beta: q.beta.map((b) => b + 0.1 * normal(r)),
    logSigma: q.logSigma + 0.1 * normal(r),
  }));
  const times = sideBySide({
    sequential: () => {
      for (const p of points) f(p);
    },
    batch: () => f.batch(points),
    batch1: () => f.batch(points, undefined, { threads: 1 }),
  });
  console.log('\nregression (340 × 13, 15 parameters as a map), 256 points');
  report('batch, default threads', '≥ 1.8×', times, 'sequential', 'batch', (x) => x >= 1.8);
  report('batch, threads: 1', '≥ 0.95×', times, 'sequential', 'batch1', (x) => x >= 0.95);
}

// ---------------------------------------------------------------- eight schools, 1 024 points

/** Eight schools, non-centred: mu, logTau and eight school effects, ten scalars, ~100 scalar ops. */
function eightSchools(G) {
  const { add, div, exp, mul, square, sub } = G;
  const y = [28, 8, -3, 7, -1, 1, 18, 12];
  const sigma = [15, 10, 16, 11, 9, 11, 10, 18];
  return (p) => {
    const tau = exp(p.logTau);
    let lp = add(mul(-0.5, square(div(p.mu, 5))), mul(-0.5, square(tau)), p.logTau);
    for (let j = 0; j < 8; j++) {
      const eta = p[`eta${j}`];
      const theta = add(p.mu, mul(tau, eta));
      lp = add(lp, mul(-0.5, square(eta)), mul(-0.5, square(div(sub(y[j], theta), sigma[j]))));
    }
    return lp;
  };
}

{
  const f = G.compile(eightSchools(G));
  const r = lcg(8);
  const points = Array.from({ length: 1024 }, () => {
    const p = { mu: 4 + normal(r), logTau: 1 + 0.3 * normal(r) };
    for (let j = 0; j < 8; j++) p[`eta${j}`] = normal(r);
    return p;
  });
  const times = sideBySide({
    sequential: () => {
      for (const p of points) f(p);
    },
    batch: () => f.batch(points),
  });
  console.log('\neight schools (10 scalar parameters, ~100 scalar ops), 1 024 points');
  report('batch, default threads', '≥ 3×', times, 'sequential', 'batch', (x) => x >= 3);
}

// ---------------------------------------------------------------- packed form, 1 024 points

{
  const d = regressionData();
  const q = regressionParams();
  const full = regression(G, d);
  const f = G.compile((beta) => full({ intercept: q.intercept, beta, logSigma: q.logSigma }));
  const r = lcg(9);
  const k = 1024;
  const n = q.beta.length;
  const arrays = Array.from({ length: k }, () => q.beta.map((b) => b + 0.1 * normal(r)));
  const typed = arrays.map((a) => Float64Array.from(a));
  const packed = G.tensor(Float64Array.from(arrays.flat()), [k, n]);
  const times = sideBySide({
    arrays: () => f.batch(arrays),
    typed: () => f.batch(typed),
    packed: () => f.batch(packed),
  });
  console.log('\nregression on a 13-vector (intercept and log sigma fixed), 1 024 points');
  report('packed [1024, 13] vs number[] points', '≥ 1.3×', times, 'arrays', 'packed', (x) => x >= 1.3);
  // The target is against the points as plain arrays; Float64Array points cost less JavaScript to read.
  const vsTyped = ratio(times.typed, times.packed);
  console.log(`  packed [1024, 13] vs Float64Array points (for comparison): ${vsTyped.toFixed(2)}× — ${fmt(median(times.typed))} vs ${fmt(median(times.packed))}`);
}

// ---------------------------------------------------------------- gp200 through async

/** Run fn (async) while a 1 ms setInterval ticks; resolves { ms, lag } with lag its largest delay beyond 1 ms. */
async function withTicker(fn) {
  let last = performance.now();
  let lag = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    lag = Math.max(lag, now - last - 1);
    last = now;
  }, 1);
  await new Promise((resolve) => setTimeout(resolve, 5)); // let it tick once
  last = performance.now();
  const t0 = performance.now();
  await fn();
  const ms = performance.now() - t0;
  clearInterval(timer);
  lag = Math.max(lag, performance.now() - last - 1);
  return { ms, lag };
}

{
  const f = G.compile(gp(G, gpData(200)));
  const count = quick ? 20 : 100;
  const points = Array.from({ length: count }, (_, i) => ({ l: 1 + 0.005 * i, v: 0.9 }));
  const sequential = async () => {
    for (const p of points) f(p);
  };
  const twoInFlight = async () => {
    let next = 0;
    const lane = async () => {
      while (next < points.length) await f.async(points[next++]);
    };
    await Promise.all([lane(), lane()]);
  };
  const allAtOnce = () => f.batchAsync(points);
  await twoInFlight();
  await allAtOnce();
  await sequential();
  const seq = [];
  const asy = [];
  const all = [];
  for (let r = 0; r < rounds; r++) {
    seq.push(await withTicker(sequential));
    asy.push(await withTicker(twoInFlight));
    all.push(await withTicker(allAtOnce));
  }
  console.log(`\ngp200, ${count} evaluations`);
  const r = ratio(
    seq.map((x) => x.ms),
    asy.map((x) => x.ms),
  );
  const lag = median(asy.map((x) => x.lag));
  const worst = Math.max(...asy.map((x) => x.lag));
  rows.push({ name: 'gp200 async throughput', target: '≥ 1.6×', r, pass: r >= 1.6 });
  rows.push({ name: 'gp200 async largest lag', target: '≤ 5 ms', r: lag, pass: lag <= 5 });
  console.log(
    `  async, two in flight: ${r.toFixed(2)}× (target ≥ 1.6×) — ${fmt(median(seq.map((x) => x.ms)))} sequential vs ${fmt(
      median(asy.map((x) => x.ms)),
    )}`,
  );
  const rAll = ratio(
    seq.map((x) => x.ms),
    all.map((x) => x.ms),
  );
  console.log(
    `  batchAsync of all ${count} (for comparison): ${rAll.toFixed(2)}× — ${fmt(median(all.map((x) => x.ms)))}, ` +
      `largest lag ${median(all.map((x) => x.lag)).toFixed(2)} ms`,
  );
  console.log(
    `  largest setInterval(1 ms) lag: ${lag.toFixed(2)} ms with async (median over rounds; worst ${worst.toFixed(2)}), ` +
      `${median(seq.map((x) => x.lag)).toFixed(1)} ms with synchronous calls (target ≤ 5 ms)`,
  );
}

console.log(`\n${rows.filter((x) => x.pass).length} of ${rows.length} targets met (medians over ${rounds} rounds).`);
