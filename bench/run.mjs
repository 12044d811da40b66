// `npm run bench`: median microseconds per call, eager valueAndGrad against
// compile, on the fixed workloads of bench/models.mjs (BENCH.md), plus a
// chain of 200 small scalar ops.
//
//   node bench/run.mjs                 every workload
//   node bench/run.mjs --quick         a few short batches (smoke test)
//   node bench/run.mjs gp mlp          only workloads whose name contains a filter
//   node bench/run.mjs --no-wasm       the native addon only
//
// A full run (no --quick, no filter) records its medians in
// bench/results.json and redraws docs/speed.svg (bench/chart.mjs).
//
// The WebAssembly column comes from a second process (the same script with
// TANGENT_GRAD_WASM=1 and --child), since one process holds one core.
//
// Method: warm up, size a batch so it takes at least ~20 ms, time >= 15
// batches (gp200: fewer, it is slow), report the median of the batch means
// and the min/max spread. Before timing, the eager, compiled and (for the
// regression) hand-derived results must agree to 1e-9 relative.

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import os from 'node:os';
import * as G from '../index.js';
import { measure } from './measure.mjs';
import { machine, recordResults, writeChart } from './chart.mjs';
import {
  regressionData, regression, regressionParams, regressionHand, gpData, gp, mlpSetup, mlp,
} from './models.mjs';

const argv = process.argv.slice(2);
const quick = argv.includes('--quick');
const child = argv.includes('--child');
const withWasm = !child && !argv.includes('--no-wasm');
const filters = argv.filter((a) => !a.startsWith('--'));
const unknown = argv.filter((a) => a.startsWith('--') && !['--quick', '--child', '--no-wasm'].includes(a));
if (unknown.length > 0) {
  console.error(`unknown option ${unknown.join(' ')}; usage: node bench/run.mjs [--quick] [--no-wasm] [workload ...]`);
  process.exit(2);
}

// ---------------------------------------------------------------- timing

/** The timing options of a run: `--quick` makes a few short batches. */
const timing = (batches) => (quick ? { batches: 3, batchMs: 2, warmupMs: 10 } : { batches });

// ---------------------------------------------------------------- agreement

/** Every number of a value or gradient (any form), with its path. */
function numbers(x, path, out = []) {
  if (typeof x === 'number') out.push([path, x]);
  else if (x instanceof Float64Array || Array.isArray(x)) x.forEach((v, i) => numbers(v, `${path}[${i}]`, out));
  else if (G.isTensor(x)) numbers(x.data, path, out);
  else if (x !== null && typeof x === 'object') for (const k of Object.keys(x).sort()) numbers(x[k], `${path}.${k}`, out);
  else throw new Error(`${path}: unexpected ${typeof x}`);
  return out;
}

/** Throw unless a and b agree to `tol` relative, entry by entry. */
function agree(name, what, a, b, tol = 1e-9) {
  const xs = numbers(a, 'result');
  const ys = numbers(b, 'result');
  if (xs.length !== ys.length || xs.some(([p], i) => p !== ys[i][0])) {
    throw new Error(`${name}: ${what} differ in structure:\n${xs.map(([p]) => p).join(' ')}\n${ys.map(([p]) => p).join(' ')}`);
  }
  for (let i = 0; i < xs.length; i++) {
    const [p, x] = xs[i];
    const y = ys[i][1];
    const scale = Math.max(Math.abs(x), Math.abs(y));
    if (!(Math.abs(x - y) <= tol * scale) && !(x === y)) {
      throw new Error(`${name}: ${what} disagree at ${p}: ${x} vs ${y} (relative ${Math.abs(x - y) / scale})`);
    }
  }
}

// ---------------------------------------------------------------- workloads

/** ~200 small scalar ops on three scalar parameters, numbers mixed in. */
function chain200(G) {
  const { add, mul, sub, tanh, exp, square } = G;
  return (p) => {
    let x = p.a;
    let y = p.b;
    for (let i = 0; i < 28; i++) {
      x = tanh(add(mul(x, 0.9), y)); // 3 ops
      y = sub(y, mul(p.c, exp(mul(x, -0.5)))); // 4 ops
    }
    return sub(add(mul(x, y), square(p.c)), 1); // 4 ops: 28 * 7 + 4 = 200
  };
}

// BENCH.md: targets (from the issues) and the JavaScript version's figures.
const workloads = [
  {
    name: 'regression',
    setup() {
      const d = regressionData();
      const f = regression(G, d);
      const q = regressionParams();
      return { f, args: [q], hand: regressionHand(d), handArgs: [q] };
    },
    target: { eager: 30, compiled: 8 },
    js: { eager: '140–165', compiled: '85–125', hand: '18' },
  },
  {
    name: 'gp50',
    setup() {
      return { f: gp(G, gpData(50)), args: [{ l: 1.2, v: 0.9 }] };
    },
    target: { compiled: 200 },
    js: { eager: '1 500–2 200', compiled: '1 150' },
  },
  {
    name: 'gp200',
    setup() {
      return { f: gp(G, gpData(200)), args: [{ l: 1.2, v: 0.9 }] };
    },
    batches: 7,
    target: { eager: 5000, compiled: 4000 },
    js: { eager: '50 000–55 000', compiled: '49 500' },
  },
  {
    name: 'mlp',
    setup() {
      const { params, batch } = mlpSetup(G);
      return { f: mlp(G), args: [params, batch] };
    },
    target: { compiled: 40 },
    js: { eager: '320–470', compiled: '250–410' },
  },
  {
    name: 'chain200',
    setup() {
      return { f: chain200(G), args: [{ a: 0.3, b: -0.2, c: 0.1 }] };
    },
    target: { eager: 200 },
    js: {},
  },
];

// ---------------------------------------------------------------- run

const selected = workloads.filter((w) => filters.length === 0 || filters.some((f) => w.name.includes(f)));
if (selected.length === 0) {
  console.error(`no workload matches ${filters.join(' ')}; workloads: ${workloads.map((w) => w.name).join(', ')}`);
  process.exit(2);
}

const cpu = os.cpus()[0]?.model ?? 'unknown cpu';
if (child) console.log = () => {};
console.log(`# @tangent.to/grad benchmarks${quick ? ' (--quick: smoke test, numbers are not meaningful)' : ''}`);
console.log(`node ${process.version}, ${os.platform()} ${os.arch()}, ${cpu}, ${os.cpus().length} cpus\n`);

const rows = [];
for (const w of selected) {
  const s = w.setup();
  const eager = G.valueAndGrad(s.f);
  const compiled = G.compile(s.f);
  // Agreement first: a fast wrong answer is no answer.
  const e = eager(...s.args);
  const c = compiled(...s.args);
  agree(w.name, 'eager and compiled results', c, e);
  if (!Number.isFinite(e.value)) throw new Error(`${w.name}: value is ${e.value}`);
  if (s.hand) agree(w.name, 'hand-derived and eager results', s.hand(...s.handArgs), e);
  const opts = timing(w.batches ?? 15);
  const te = measure(() => eager(...s.args), opts);
  const tc = measure(() => compiled(...s.args), opts);
  const th = s.hand ? measure(() => s.hand(...s.handArgs), opts) : null;
  rows.push({ w, te, tc, th });
  const fmtT = (t) => `${t.median.toFixed(1)} µs [${t.min.toFixed(1)}–${t.max.toFixed(1)}]`;
  console.log(
    `${w.name.padEnd(11)} eager ${fmtT(te).padEnd(30)} compiled ${fmtT(tc).padEnd(30)}` +
      (th ? ` hand ${fmtT(th)}` : '') +
      `  (${te.batches} batches of ${te.perBatch} / ${tc.perBatch} calls)`,
  );
}

if (child) {
  process.stdout.write(JSON.stringify(rows.map(({ w, te, tc }) => ({ name: w.name, te, tc }))));
  process.exit(0);
}

/** The same workloads on the WebAssembly build, in a child process: name -> { te, tc }. */
function wasmRows() {
  const args = [fileURLToPath(import.meta.url), '--child', ...argv.filter((a) => a !== '--no-wasm')];
  const r = spawnSync(process.execPath, args, {
    env: { ...process.env, TANGENT_GRAD_WASM: '1' },
    encoding: 'utf8',
    maxBuffer: 1 << 24,
  });
  if (r.status !== 0) throw new Error(`the WebAssembly run failed:\n${r.stderr}`);
  return new Map(JSON.parse(r.stdout).map((x) => [x.name, x]));
}

const wasm = withWasm ? wasmRows() : null;
const num = (x) => (x >= 100 ? x.toFixed(0) : x.toFixed(1));
const cell = (t) => `${num(t.median)} (${num(t.min)}–${num(t.max)})`;
const mark = (t, target) => (target === undefined ? '' : t.median <= target ? ' ✓' : ' ✗');
const tgt = (x) => (x === undefined ? '—' : `≤ ${x}`);

console.log('\nMedian µs per call (value and gradient), min–max of batch means in parentheses.\n');
const wasmHead = wasm ? ' wasm eager | wasm compiled |' : '';
console.log(`| workload | eager | compiled |${wasmHead} target eager | target compiled | JS eager | JS compiled |`);
console.log(`|---|---:|---:|${wasm ? '---:|---:|' : ''}---:|---:|---:|---:|`);
const misses = [];
for (const { w, te, tc, th } of rows) {
  const x = wasm?.get(w.name);
  const wasmCells = wasm ? ` ${cell(x.te)} | ${cell(x.tc)} |` : '';
  console.log(
    `| ${w.name} | ${cell(te)}${mark(te, w.target.eager)} | ${cell(tc)}${mark(tc, w.target.compiled)} |${wasmCells} ` +
      `${tgt(w.target.eager)} | ${tgt(w.target.compiled)} | ${w.js.eager ?? '—'} | ${w.js.compiled ?? '—'} |`,
  );
  if (th) console.log(`| ${w.name}, hand-derived plain JS | ${cell(th)} | |${wasm ? ' | |' : ''} | | ${w.js.hand ?? '—'} | |`);
  if (w.target.eager !== undefined && te.median > w.target.eager) misses.push(`${w.name} eager`);
  if (w.target.compiled !== undefined && tc.median > w.target.compiled) misses.push(`${w.name} compiled`);
}
if (wasm) {
  const wasmFile = new URL('../src/js/grad.wasm.js', import.meta.url);
  const bytes = Buffer.from(readFileSync(wasmFile, 'utf8').match(/'([^']+)'/)[1], 'base64');
  console.log(`\nThe WebAssembly core: ${(bytes.length / 1024).toFixed(0)} KiB, ${(gzipSync(bytes).length / 1024).toFixed(0)} KiB gzipped.`);
}
console.log(
  `\nTargets missed: ${misses.length === 0 ? 'none' : misses.join(', ')}` +
    (quick ? ' (--quick timings are not meaningful)' : ''),
);

if (!quick && filters.length === 0) {
  const pick = ({ median, min, max }) => ({ median, min, max });
  recordResults('valueAndGrad', {
    date: new Date().toISOString().slice(0, 10),
    command: `node bench/run.mjs${withWasm ? '' : ' --no-wasm'}`,
    machine: machine(),
    unit: 'µs per call, median of batch means (min, max)',
    rows: rows.map(({ w, te, tc, th }) => ({
      name: w.name,
      eager: pick(te),
      compiled: pick(tc),
      ...(th ? { hand: pick(th) } : {}),
      ...(wasm ? { wasm: { eager: pick(wasm.get(w.name).te), compiled: pick(wasm.get(w.name).tc) } } : {}),
    })),
  });
  console.log(`\nRecorded in bench/results.json; drew ${writeChart()}.`);
}
