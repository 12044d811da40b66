// `npm run bench:small`: the small graphs of BENCH.md's last section, where
// the boundary costs the most: the call floor, a 10-scalar hierarchical
// model (~100 scalar ops), its twin with the 8 group effects as one vector,
// a chain of 200 scalar ops, and plan I/O (toJSON, compileFromJSON of the
// object and of its text; the JavaScript version takes the object only) at 10^4
// and 10^5 ops. Native and WebAssembly side by side (the WebAssembly column
// from a child process with TANGENT_GRAD_WASM=1: one process holds one
// core), with the JavaScript version's published figures.
//
//   node bench/small.mjs [--quick] [--no-wasm] [workload ...]

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as G from '../index.js';
import { measure } from './measure.mjs';

const argv = process.argv.slice(2);
const quick = argv.includes('--quick');
const child = argv.includes('--child');
const filters = argv.filter((a) => !a.startsWith('--'));

// ---------------------------------------------------------------- models

const Y = [28, 8, -3, 7, -1, 1, 18, 12];
const SIGMA = [15, 10, 16, 11, 9, 11, 10, 18];

/** Eight schools, non-centred, every parameter a scalar: ~100 scalar ops. */
function hierarchical(p) {
  const { add, mul, sub, div, exp, square } = G;
  const tau = exp(p.logTau);
  let lp = add(mul(-0.5, square(div(p.mu, 5))), sub(p.logTau, mul(0.5, square(div(tau, 5)))));
  for (let j = 0; j < 8; j++) {
    const eta = p[`eta${j}`];
    const theta = add(p.mu, mul(tau, eta));
    const r = div(sub(Y[j], theta), SIGMA[j]);
    lp = sub(lp, add(mul(0.5, square(eta)), mul(0.5, square(r))));
  }
  return lp;
}

/** The same model with the eight group effects as one vector. */
function hierarchicalVector(p) {
  const { add, mul, sub, div, exp, square, sum } = G;
  const tau = exp(p.logTau);
  const prior = add(mul(-0.5, square(div(p.mu, 5))), sub(p.logTau, mul(0.5, square(div(tau, 5)))));
  const theta = add(p.mu, mul(tau, p.eta));
  const r = div(sub(Y, theta), SIGMA);
  return sub(prior, mul(0.5, add(sum(square(p.eta)), sum(square(r)))));
}

const scalarPoint = { mu: 1.5, logTau: 0.7, ...Object.fromEntries(Y.map((_, j) => [`eta${j}`, 0.1 * (j - 3.5)])) };
const vectorPoint = { mu: 1.5, logTau: 0.7, eta: Y.map((_, j) => 0.1 * (j - 3.5)) };

/** 200 scalar ops (mul, add, tanh) on one parameter. */
function chain(x) {
  let y = x;
  for (let i = 0; i < 200; i++) {
    const k = i % 3;
    y = k === 0 ? G.mul(y, 0.999) : k === 1 ? G.add(y, 0.001) : G.tanh(y);
  }
  return y;
}

/**
 * A compiled chain of n ops, traced, for plan I/O. Its two constants are
 * recorded once each (n + 3 nodes); with `distinct`, each op has its own
 * constant (2n + 1 nodes), as every op did before constants were shared.
 */
function chainPlan(n, distinct) {
  const vg = G.compile((x) => {
    let y = x;
    for (let i = 0; i < n; i++) {
      const e = distinct ? i * 2 ** -40 : 0;
      y = i % 2 ? G.mul(y, 0.5 + e) : G.add(y, 1 + e);
    }
    return y;
  });
  vg(0.25);
  return vg;
}

// ---------------------------------------------------------------- workloads

const js = { floor: [0.5, 0.12], hier: [30, 7.4], vector: [7.9, 3.0], chain200: [66, 13.3] };
const workloads = [
  { name: 'floor', what: 'call floor (one op, one scalar)', f: (x) => G.square(x), x: 1.5 },
  { name: 'hier', what: '10 scalars, ~100 ops', f: hierarchical, x: scalarPoint },
  { name: 'vector', what: 'the same, 8-vector', f: hierarchicalVector, x: vectorPoint },
  { name: 'chain200', what: 'chain of 200 scalar ops', f: chain, x: 0.3 },
];
const io = [
  { name: 'io1e4', n: 1e4, distinct: true, js: { toJSON: 15000, fromJSON: 31000 } },
  { name: 'io1e5', n: 1e5, distinct: true, js: { toJSON: 200000, fromJSON: 670000 } },
  { name: 'io1e4-shared', n: 1e4, distinct: false, js: { toJSON: 15000, fromJSON: 31000 } },
  { name: 'io1e5-shared', n: 1e5, distinct: false, js: { toJSON: 200000, fromJSON: 670000 } },
];
const pick = (w) => filters.length === 0 || filters.some((f) => w.name.includes(f));
const opts = quick ? { batches: 3, batchMs: 2, warmupMs: 10 } : { batches: 15 };
const ioOpts = quick ? { batches: 2, batchMs: 1, warmupMs: 1 } : { batches: 7, batchMs: 50, warmupMs: 100 };

function run() {
  const rows = {};
  for (const w of workloads.filter(pick)) {
    const eager = G.valueAndGrad(w.f);
    const compiled = G.compile(w.f);
    const e = eager(w.x);
    const c = compiled(w.x);
    if (e.value !== c.value) throw new Error(`${w.name}: eager ${e.value} and compiled ${c.value} differ`);
    rows[w.name] = { eager: measure(() => eager(w.x), opts).median, compiled: measure(() => compiled(w.x), opts).median };
  }
  for (const w of io.filter(pick)) {
    const vg = chainPlan(w.n, w.distinct);
    const plan = vg.toJSON();
    const text = JSON.stringify(plan);
    rows[w.name] = {
      toJSON: measure(() => vg.toJSON(), ioOpts).median,
      fromJSON: measure(() => G.compileFromJSON(plan), ioOpts).median,
      fromText: measure(() => G.compileFromJSON(JSON.parse(text)), ioOpts).median,
      fromString: measure(() => G.compileFromJSON(text), ioOpts).median,
    };
  }
  return rows;
}

const rows = run();
if (child) {
  process.stdout.write(JSON.stringify(rows));
  process.exit(0);
}

let wasm = null;
if (!argv.includes('--no-wasm')) {
  const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--child', ...argv], {
    env: { ...process.env, TANGENT_GRAD_WASM: '1' },
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`the WebAssembly run failed:\n${r.stderr}`);
  wasm = JSON.parse(r.stdout);
}

const num = (x) => (x >= 1000 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
const ratio = (ref, x) => `${num(x)} (${(ref / x).toFixed(2)}×)`;
console.log(`# small graphs, median µs per call; (×) = the JavaScript version's time ÷ this one${quick ? ' (--quick: not meaningful)' : ''}\n`);
console.log('| workload | JS eager | native eager | wasm eager | JS compiled | native compiled | wasm compiled |');
console.log('|---|---:|---:|---:|---:|---:|---:|');
for (const w of workloads.filter(pick)) {
  const [je, jc] = js[w.name];
  const n = rows[w.name];
  const x = wasm?.[w.name];
  console.log(
    `| ${w.what} | ${je} | ${ratio(je, n.eager)} | ${x ? ratio(je, x.eager) : '—'} | ${jc} | ${ratio(jc, n.compiled)} | ${x ? ratio(jc, x.compiled) : '—'} |`,
  );
}
const ioRows = io.filter(pick);
if (ioRows.length > 0) {
  console.log('\n| plan I/O, chain of n ops | JS | native | wasm |');
  console.log('|---|---:|---:|---:|');
  for (const w of ioRows) {
    const n = rows[w.name];
    const x = wasm?.[w.name];
    const exp = `${Math.log10(w.n)}${w.distinct ? '' : ', two shared constants'}`;
    console.log(`| toJSON, n = 10^${exp} | ${w.js.toJSON} | ${ratio(w.js.toJSON, n.toJSON)} | ${x ? ratio(w.js.toJSON, x.toJSON) : '—'} |`);
    console.log(`| compileFromJSON(object), n = 10^${exp} | ${w.js.fromJSON} | ${ratio(w.js.fromJSON, n.fromJSON)} | ${x ? ratio(w.js.fromJSON, x.fromJSON) : '—'} |`);
    console.log(`| compileFromJSON(JSON.parse(text)), n = 10^${exp} | — | ${num(n.fromText)} | ${x ? num(x.fromText) : '—'} |`);
    console.log(`| compileFromJSON(text), n = 10^${exp} | ${w.js.fromJSON} | ${ratio(w.js.fromJSON, n.fromString)} | ${x ? ratio(w.js.fromJSON, x.fromString) : '—'} |`);
  }
}
