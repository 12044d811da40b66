// `node bench/large.mjs`: the GP log likelihood of models.mjs at n = 500,
// 1000 and 2000, compiled value and gradient, on one thread
// (TANGENT_GRAD_THREADS=1) against the machine's threads, each in a child
// process; and, in the same run, the machine's own two-thread scaling: two
// worker_threads each running a perfectly parallel compute loop against
// one (a busy second core shows there, and scales the target with it).
//
//   node bench/large.mjs            3 rounds of n = 500, 1000, 2000
//   node bench/large.mjs --quick    1 round of n = 500, 1000
//   node bench/large.mjs --rounds 5 --sizes 1000,2000
//
// Printed per n: median ms per call on 1 thread and on all, their ratio
// (the model's scaling), the loop's scaling, and model ÷ loop (issue 25's
// target: at least 0.8 at n = 2000). Set-up (the O(n²) data, compile, the
// first call) is outside the timing. Medians over rounds; the load average
// is printed with the figures, since other work on the machine moves them.

import os from 'node:os';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';

const here = fileURLToPath(import.meta.url);
const argv = process.argv.slice(2);
const flag = (name) => argv.includes(name);
const option = (name, dflt) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : dflt;
};

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

// ------------------------------------------------------------- child: the model

if (flag('--child')) {
  const G = await import('../index.js');
  const { gp, gpData } = await import('./models.mjs');
  const out = {};
  for (const n of option('--sizes').split(',').map(Number)) {
    const c = G.compile(gp(G, gpData(n)));
    const args = { l: 1.2, v: 0.9 };
    const first = c(args);
    c(args); // warm
    const calls = n <= 500 ? 31 : n <= 1000 ? 11 : 5;
    const ms = [];
    for (let i = 0; i < calls; i++) {
      const t0 = performance.now();
      c(args);
      ms.push(performance.now() - t0);
    }
    out[n] = { ms: median(ms), value: first.value };
  }
  process.stdout.write(JSON.stringify(out));
  process.exit(0);
}

// ------------------------------------------------ parent: the loop and the runs

/** ms for `workers` threads each running the same compute loop at once. */
async function loop(workers) {
  const src = `
    const { parentPort } = require('node:worker_threads');
    const x = new Float64Array(1 << 15); // 256 KB: in cache, so compute-bound
    for (let i = 0; i < x.length; i++) x[i] = (i % 97) * 1e-3;
    parentPort.on('message', (reps) => {
      const t0 = performance.now();
      let s = 0;
      for (let r = 0; r < reps; r++) for (let i = 0; i < x.length; i++) s += x[i] * x[i];
      parentPort.postMessage({ ms: performance.now() - t0, s });
    });`;
  const ws = Array.from({ length: workers }, () => new Worker(src, { eval: true }));
  const run = (reps) => Promise.all(ws.map((w) => new Promise((ok) => { w.once('message', ok); w.postMessage(reps); })));
  await run(200); // warm up the JIT
  const t0 = performance.now();
  await run(6000);
  const ms = performance.now() - t0;
  await Promise.all(ws.map((w) => w.terminate()));
  return ms;
}

/** The loop's two-thread scaling: twice the work in the time of one, ideally. */
async function loopScaling() {
  const one = await loop(1);
  const two = await loop(2);
  return (2 * one) / two;
}

function child(sizes, threads) {
  const env = { ...process.env };
  if (threads === 1) env.TANGENT_GRAD_THREADS = '1';
  else delete env.TANGENT_GRAD_THREADS;
  const r = spawnSync(process.execPath, [here, '--child', '--sizes', sizes.join(',')], { env, encoding: 'utf8', maxBuffer: 1 << 20 });
  if (r.status !== 0) throw new Error(`child (threads ${threads}) failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

const quick = flag('--quick');
const rounds = Number(option('--rounds', quick ? 1 : 3));
const sizes = option('--sizes', quick ? '500,1000' : '500,1000,2000').split(',').map(Number);
const cores = os.availableParallelism?.() ?? os.cpus().length;
console.log(`bench/large.mjs: GP value+grad, compiled; ${cores} cores; ${rounds} round(s); load ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);

const one = Object.fromEntries(sizes.map((n) => [n, []]));
const all = Object.fromEntries(sizes.map((n) => [n, []]));
const ref = [];
for (let r = 0; r < rounds; r++) {
  ref.push(await loopScaling());
  const a = child(sizes, 1);
  const b = child(sizes, 0);
  for (const n of sizes) {
    if (a[n].value !== b[n].value) throw new Error(`n = ${n}: value ${a[n].value} on one thread, ${b[n].value} on all`);
    one[n].push(a[n].ms);
    all[n].push(b[n].ms);
  }
  ref.push(await loopScaling());
  console.log(`  round ${r + 1}: ` + sizes.map((n) => `n=${n} ${a[n].ms.toFixed(1)} / ${b[n].ms.toFixed(1)} ms`).join(', ') +
    `; loop ×${ref.at(-2).toFixed(2)}, ×${ref.at(-1).toFixed(2)}; load ${os.loadavg()[0].toFixed(2)}`);
}
const loopX = median(ref);
console.log(`\n| n | 1 thread (ms) | ${cores} threads (ms) | model scaling | loop scaling | model ÷ loop |`);
console.log('|---:|---:|---:|---:|---:|---:|');
for (const n of sizes) {
  const t1 = median(one[n]);
  const tn = median(all[n]);
  console.log(`| ${n} | ${t1.toFixed(1)} | ${tn.toFixed(1)} | ${(t1 / tn).toFixed(2)} | ${loopX.toFixed(2)} | ${(t1 / tn / loopX).toFixed(2)} |`);
}
console.log(`(values identical on 1 and ${cores} threads at every n; load now ${os.loadavg().map((x) => x.toFixed(2)).join(' ')})`);
