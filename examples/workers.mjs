// Plans as data: compile an objective once on the main thread, ship its plan
// (toJSON → postMessage) to a pool of worker_threads, rebuild it there
// (compileFromJSON) and evaluate a grid of parameters in parallel. Workers
// never see the objective's source, only the plan; their results are
// bit-identical to the main thread's.
//
//   node examples/workers.mjs            GP with 100 points, 24×24 grid, a worker per core (up to 4)
//   node examples/workers.mjs --small    20 points, 6×6 grid, 2 workers (also EXAMPLE_SIZE=small)

import { availableParallelism } from 'node:os';
import { Worker, isMainThread, parentPort } from 'node:worker_threads';
import {
  addDiag, compile, compileFromJSON, div, dot, exp, logdetPSD, mul, neg, solvePSD, square, sub,
} from '../index.js';

// ---------------------------------------------------------------- worker side

if (!isMainThread) {
  const plans = new Map();
  parentPort.on('message', (msg) => {
    if (msg.type === 'plan') {
      plans.set(msg.name, compileFromJSON(msg.plan));
      return;
    }
    // { type: 'task', id, name, points }: value and gradient at each point, in one
    // call on this worker's thread alone (the pool already has a worker per core).
    const f = plans.get(msg.name);
    const results = f.batch(msg.points, undefined, { threads: 1 });
    parentPort.postMessage({ id: msg.id, results });
  });
}

/** A fixed pool of workers; `run(name, points)` evaluates a plan on one of them. */
class Pool {
  constructor(size) {
    this.workers = Array.from({ length: size }, () => new Worker(new URL(import.meta.url)));
    this.pending = new Map();
    this.next = 0;
    this.ids = 0;
    for (const w of this.workers) {
      w.on('message', ({ id, results }) => {
        this.pending.get(id)(results);
        this.pending.delete(id);
      });
      w.on('error', (e) => {
        console.error('worker failed:', e);
        process.exit(1);
      });
    }
  }

  /** Send a plan to every worker, which rebuilds it once. */
  publish(name, plan) {
    for (const w of this.workers) w.postMessage({ type: 'plan', name, plan });
  }

  run(name, points) {
    const id = this.ids++;
    const w = this.workers[this.next++ % this.workers.length];
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      w.postMessage({ type: 'task', id, name, points });
    });
  }

  close() {
    return Promise.all(this.workers.map((w) => w.terminate()));
  }
}

async function main() {
  const small = process.argv.includes('--small') || process.env.EXAMPLE_SIZE === 'small';
  const n = small ? 20 : 100;
  const side = small ? 6 : 24;
  const poolSize = small ? 2 : Math.min(4, availableParallelism());

  let seed = 5;
  const rand = () => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 4294967296;
  const xs = Array.from({ length: n }, () => 10 * rand()).sort((a, b) => a - b);
  const y = xs.map((x) => Math.sin(x) + 0.2 * (rand() - 0.5));
  const D2 = xs.map((a) => xs.map((b) => (a - b) ** 2));

  const logML = compile((p) => {
    const K = addDiag(mul(p.v, exp(neg(div(D2, mul(2, square(p.l)))))), 0.05);
    return sub(mul(-0.5, dot(y, solvePSD(K, y))), mul(0.5, logdetPSD(K)));
  });
  logML({ l: 1, v: 1 }); // trace once, at the shapes every call will have
  const plan = logML.toJSON(); // plain data: the data D2 and y travel inside it as constants

  // A grid over l in [0.3, 3] and v in [0.2, 2], split into one task per row.
  const grid = [];
  for (let i = 0; i < side; i++) {
    const row = [];
    for (let j = 0; j < side; j++) row.push({ l: 0.3 + (2.7 * i) / (side - 1), v: 0.2 + (1.8 * j) / (side - 1) });
    grid.push(row);
  }

  const pool = new Pool(poolSize);
  pool.publish('gp', plan);
  const t0 = performance.now();
  const rows = await Promise.all(grid.map((row) => pool.run('gp', row)));
  const ms = performance.now() - t0;
  await pool.close();

  // Compare every result with the main thread's compiled closure, bit for bit.
  let identical = true;
  let best = null;
  grid.forEach((row, i) =>
    row.forEach((p, j) => {
      const w = rows[i][j];
      const m = logML(p);
      identical &&= Object.is(w.value, m.value) && Object.is(w.gradient.l, m.gradient.l) && Object.is(w.gradient.v, m.gradient.v);
      if (best === null || w.value > best.value) best = { p, value: w.value, gradient: w.gradient };
    }),
  );

  const count = side * side;
  console.log(`GP log marginal likelihood (n = ${n}) on a ${side}×${side} grid of (l, v)`);
  console.log(`plan: ${plan.nodes.length} nodes, ${JSON.stringify(plan).length} bytes of JSON`);
  console.log(`${count} evaluations in ${poolSize} workers in ${ms.toFixed(1)} ms (including worker start-up and the rebuild in each)`);
  console.log(`best grid point: l = ${best.p.l.toFixed(3)}, v = ${best.p.v.toFixed(3)}, log p(y) = ${best.value.toFixed(4)}, ` +
    `gradient (${best.gradient.l.toFixed(3)}, ${best.gradient.v.toFixed(3)})`);
  console.log(`bit-identical to the main thread: ${identical ? 'yes' : 'NO'}`);
  if (!identical) process.exitCode = 1;
}

if (isMainThread) await main();
