// `npm run bench:workers`: four compiled plans evaluated at once in four
// worker_threads against the same work done by one thread, one plan after
// the other. Each plan crosses as data (toJSON → postMessage →
// compileFromJSON), and the single thread replays the same rebuilt plans.
//
//   node bench/workers.mjs            ~1 s of work per plan, 3 rounds
//   node bench/workers.mjs --quick    ~0.1 s per plan, 1 round (smoke test)
//
// The work per plan is sized so each takes about the same time on one
// thread; the ratio of wall times for the same evaluations is the speedup.

import os from 'node:os';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import * as G from '../index.js';
import { regressionData, regression, regressionParams, gpData, gp, mlpSetup, mlp } from './models.mjs';

// ---------------------------------------------------------------- worker side

if (!isMainThread) {
  const { plan, args } = workerData;
  const f = G.compileFromJSON(plan);
  const first = f(...args);
  for (let i = 0; i < 20; i++) f(...args); // warm up
  parentPort.postMessage({ type: 'ready', value: first.value });
  parentPort.on('message', ({ count }) => {
    const t0 = performance.now();
    for (let i = 0; i < count; i++) f(...args);
    parentPort.postMessage({ type: 'done', ms: performance.now() - t0 });
  });
}

// ---------------------------------------------------------------- main thread

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** The four workloads: name, objective and arguments (bench/models.mjs). */
function workloads() {
  const { params, batch } = mlpSetup(G);
  return [
    { name: 'regression', f: regression(G, regressionData()), args: [regressionParams()] },
    { name: 'gp50', f: gp(G, gpData(50)), args: [{ l: 1.2, v: 0.9 }] },
    { name: 'gp100', f: gp(G, gpData(100)), args: [{ l: 1.2, v: 0.9 }] },
    { name: 'mlp', f: mlp(G), args: [params, batch] },
  ];
}

const once = (w, type) => new Promise((resolve, reject) => {
  const onMessage = (m) => {
    if (m.type === type) {
      w.off('message', onMessage);
      resolve(m);
    }
  };
  w.on('message', onMessage);
  w.once('error', reject);
});

async function main() {
  const quick = process.argv.includes('--quick');
  const perPlanMs = quick ? 100 : 1000;
  const rounds = quick ? 1 : 3;

  // Trace each objective once and take its plan as data.
  const jobs = workloads().map((w) => {
    const c = G.compile(w.f);
    const expected = c(...w.args).value;
    return { ...w, plan: c.toJSON(), expected };
  });

  // One thread: the rebuilt plans, calibrated to ~perPlanMs each.
  for (const j of jobs) {
    j.rebuilt = G.compileFromJSON(j.plan);
    for (let i = 0; i < 20; i++) j.rebuilt(...j.args);
    let n = 1;
    let ms = 0;
    while (ms < 50) {
      n *= 2;
      const t0 = performance.now();
      for (let i = 0; i < n; i++) j.rebuilt(...j.args);
      ms = performance.now() - t0;
    }
    j.count = Math.max(1, Math.round((n * perPlanMs) / ms));
  }
  const total = jobs.reduce((a, j) => a + j.count, 0);

  // Four workers, one plan each, started and warmed up before timing.
  const workers = jobs.map((j) => new Worker(new URL(import.meta.url), { workerData: { plan: j.plan, args: j.args } }));
  const ready = await Promise.all(workers.map((w) => once(w, 'ready')));
  ready.forEach((r, i) => {
    if (!Object.is(r.value, jobs[i].expected)) throw new Error(`${jobs[i].name}: worker value ${r.value} != ${jobs[i].expected}`);
  });

  const single = [];
  const parallel = [];
  const singlePer = jobs.map(() => []);
  const workerPer = jobs.map(() => []);
  for (let r = 0; r < rounds; r++) {
    // One thread, the four plans one after the other.
    const s0 = performance.now();
    jobs.forEach((j, k) => {
      const t0 = performance.now();
      for (let i = 0; i < j.count; i++) j.rebuilt(...j.args);
      singlePer[k].push(performance.now() - t0);
    });
    single.push(performance.now() - s0);

    // Four workers at once.
    const p0 = performance.now();
    const done = workers.map((w) => once(w, 'done'));
    workers.forEach((w, k) => w.postMessage({ count: jobs[k].count }));
    const results = await Promise.all(done);
    parallel.push(performance.now() - p0);
    results.forEach((d, k) => workerPer[k].push(d.ms));
  }
  await Promise.all(workers.map((w) => w.terminate()));

  const t1 = median(single);
  const t4 = median(parallel);
  console.log(`# worker_threads: 4 plans in 4 workers at once vs one thread${quick ? ' (--quick: not meaningful)' : ''}`);
  console.log(`node ${process.version}, ${os.platform()} ${os.arch()}, ${os.cpus()[0]?.model ?? 'cpu'}, ` +
    `${os.availableParallelism?.() ?? os.cpus().length} cpus; median of ${rounds} round${rounds > 1 ? 's' : ''}\n`);
  console.log('| plan | evaluations | µs/call, one thread | µs/call, in its worker |');
  console.log('|---|---:|---:|---:|');
  jobs.forEach((j, k) => {
    const us = (ms) => ((ms * 1000) / j.count).toFixed(1);
    console.log(`| ${j.name} | ${j.count} | ${us(median(singlePer[k]))} | ${us(median(workerPer[k]))} |`);
  });
  const thr1 = total / (t1 / 1000);
  const thr4 = total / (t4 / 1000);
  console.log(`\none thread:  ${total} evaluations in ${t1.toFixed(0)} ms = ${thr1.toFixed(0)} evaluations/s`);
  console.log(`four workers: ${total} evaluations in ${t4.toFixed(0)} ms = ${thr4.toFixed(0)} evaluations/s`);
  console.log(`ratio (workers / one thread): ${(thr4 / thr1).toFixed(2)}×`);
}

if (isMainThread) await main();
