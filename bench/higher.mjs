// `node bench/higher.mjs`: the forward-mode and second-order workloads of
// ../shared/bench/higher.mjs, compiled, against the bars: JAX's
// `jit` and what users of the JavaScript version do today (its figures as
// published in the issue, measured on this 2-core VM), with each result's
// error against the plain-JS exact reference, the first call, and the cost
// beside one compiled gradient call. Native, then WebAssembly from a child
// process (one process holds one core).
//
//   node bench/higher.mjs [--quick] [--no-wasm] [workload ...]
//
// A full run (no --quick, no filter) records its medians in
// bench/results.json and redraws docs/speed.svg (bench/chart.mjs).

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import * as G from '../index.js';
import { measure } from './measure.mjs';
import { machine, recordResults, writeChart } from './chart.mjs';
import * as H from './higher-models.mjs';

const argv = process.argv.slice(2);
const quick = argv.includes('--quick');
const child = argv.includes('--child');
const filters = argv.filter((a) => !a.startsWith('--'));
const opts = quick ? { batches: 5, batchMs: 10, warmupMs: 50 } : { batches: 15, batchMs: 20, warmupMs: 200 };

/** µs per call: JAX jit, and the JavaScript version's way (issue "Every derivative a statistician needs"). */
const BARS = {
  gp50: { jax: 489, js: 5451, target: 245 },
  gp200: { jax: 13252, js: 204754, target: 6600 },
  regression: { jax: 36.9, js: 1497, target: 18 },
  mlp: { jax: 38.5, js: 575, target: 38 },
  rd30: { jax: 11.2, js: 146, target: 5.6 },
  rd100: { jax: 63.7, js: 3094, target: 64 },
};

const flatOf = (v) => (typeof v === 'number' ? [v] : Array.isArray(v) ? v.flat(Infinity) : v.data ? Array.from(v.data) : Object.values(v).flatMap(flatOf));
const relErr = (got, want) => {
  const g = flatOf(got);
  const w = flatOf(want);
  const scale = Math.max(...w.map(Math.abs), 1e-300);
  return Math.max(...g.map((x, i) => Math.abs(x - w[i]))) / scale;
};

/** Each workload: make() → { kind, run(c), first(), gradient(c)?, forward(c)?, error(result) }. */
const WORKLOADS = {
  gp50: () => gpWorkload(50),
  gp200: () => gpWorkload(200),
  regression() {
    const d = H.regressionData();
    const f = H.regression(G, d);
    const q = H.regressionParams();
    const exact = H.regressionHessian(d, q);
    return { kind: 'Hessian 15×15', f, args: [q], call: (c) => c.hessian(q), error: (r) => relErr(r.hessian, exact), q: 15 };
  },
  mlp() {
    const { params, batch } = H.mlpSetup(G);
    const v = H.mlpDirection(G);
    const f = H.mlp(G);
    const exact = H.mlpHVP(params, batch, v);
    return { kind: 'H·v, 321 parameters', f, args: [params, batch], call: (c) => c.hvp(params, v, batch), error: (r) => relErr(H.mlpKeys.flatMap((k) => Array.from(r.hvp[k].data)), exact), hvp: true };
  },
  rd30: () => rdWorkload(30),
  rd100: () => rdWorkload(100),
};

function gpWorkload(n) {
  const d = H.gpData(n);
  const f = H.gp(G, d);
  const q = H.gpParams();
  const exact = H.gpExact(d, q);
  return { kind: 'Hessian 2×2', f, args: [q], call: (c) => c.hessian(q), error: (r) => relErr(r.hessian, exact.hessian), q: 2 };
}

function rdWorkload(n) {
  const d = H.rdData(n);
  const f = H.rd(G, d);
  const exact = H.rdJacobian(d, d.u);
  return {
    kind: `Jacobian ${n}×${n}`,
    f,
    args: null,
    call: (c) => c.jacobian(d.u),
    error: (r) => relErr(r, exact),
    // Forward differences of our own compiled value: n + 1 replays.
    differences(c) {
      const u = Float64Array.from(d.u);
      const f0 = c.value(u);
      const J = Array.from({ length: n }, () => new Array(n));
      for (let j = 0; j < n; j++) {
        const h = 1e-7 * Math.max(1, Math.abs(u[j]));
        const keep = u[j];
        u[j] = keep + h;
        const fj = c.value(u);
        u[j] = keep;
        for (let i = 0; i < n; i++) J[i][j] = (fj[i] - f0[i]) / h;
      }
      return J;
    },
  };
}

function run() {
  const rows = [];
  for (const [name, make] of Object.entries(WORKLOADS)) {
    if (filters.length > 0 && !filters.includes(name)) continue;
    const w = make();
    const t0 = performance.now();
    const c = G.compile(w.f);
    const result = w.call(c);
    const first = (performance.now() - t0) * 1000;
    const error = w.error(result);
    const t = measure(() => w.call(c), opts);
    const row = { name, kind: w.kind, median: t.median, first, error };
    if (w.args !== null) {
      const g = measure(() => c(...w.args), opts);
      row.gradient = g.median;
      if (w.q) row.gradientCalls = t.median / g.median;
    }
    if (w.differences) row.differences = measure(() => w.differences(c), opts).median;
    rows.push(row);
  }
  return rows;
}

const rows = run();
if (child) {
  process.stdout.write(JSON.stringify(rows));
  process.exit(0);
}

let wasm = [];
if (!argv.includes('--no-wasm')) {
  const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--child', ...argv], {
    env: { ...process.env, TANGENT_GRAD_WASM: '1' },
    encoding: 'utf8',
    maxBuffer: 1 << 24,
  });
  if (r.status !== 0) throw new Error(`the WebAssembly run failed:\n${r.stderr}`);
  wasm = JSON.parse(r.stdout);
}

const fmt = (us) => (us >= 1000 ? `${(us / 1000).toFixed(2)} ms` : `${us.toFixed(us < 10 ? 2 : 1)} µs`);
console.log(`bench/higher.mjs, ${new Date().toISOString().slice(0, 10)}, median µs per call (${opts.batches} batches)\n`);
console.log('workload     | what                | native     | vs JAX jit | vs JS version | target      | WebAssembly | first call | error vs exact | cost');
console.log('-------------|---------------------|-----------:|-----------:|--------------:|-------------|------------:|-----------:|---------------:|-----');
for (const r of rows) {
  const bar = BARS[r.name];
  const w = wasm.find((x) => x.name === r.name);
  const met = r.median <= bar.target ? 'met' : 'NOT met';
  let cost = '';
  if (r.gradient !== undefined) cost = `${(r.median / r.gradient).toFixed(2)}× a gradient call (${fmt(r.gradient)})`;
  if (r.differences !== undefined) cost = `forward differences of our value: ${fmt(r.differences)} (${(r.differences / r.median).toFixed(2)}×)`;
  console.log(
    `${r.name.padEnd(12)} | ${r.kind.padEnd(19)} | ${fmt(r.median).padStart(10)} | ${(bar.jax / r.median).toFixed(2).padStart(9)}× | ${(bar.js / r.median)
      .toFixed(1)
      .padStart(12)}× | ≤ ${fmt(bar.target).padEnd(8)} ${met} | ${w ? fmt(w.median).padStart(11) : '—'.padStart(11)} | ${fmt(r.first).padStart(10)} | ${r.error
      .toExponential(1)
      .padStart(14)} | ${cost}`,
  );
}

if (!quick && filters.length === 0) {
  recordResults('higher', {
    date: new Date().toISOString().slice(0, 10),
    command: `node bench/higher.mjs${argv.includes('--no-wasm') ? ' --no-wasm' : ''}`,
    machine: machine(),
    unit: 'µs per call, median of batch means; first: µs of the first call (trace and plan); error: largest relative error against the exact reference',
    rows: rows.map((r) => ({
      name: r.name,
      kind: r.kind,
      native: r.median,
      wasm: wasm.find((x) => x.name === r.name)?.median ?? null,
      first: r.first,
      error: r.error,
      ...(r.gradient !== undefined ? { gradient: r.gradient } : {}),
      ...(r.differences !== undefined ? { differences: r.differences } : {}),
    })),
  });
  console.log(`\nRecorded in bench/results.json; drew ${writeChart()}.`);
}
