// Plans across worker_threads (SPEC §1, §8; DESIGN "Threads and safety"):
// toJSON() sent by postMessage and rebuilt in a Worker gives the main
// thread's results bit for bit; the addon loads in 8 workers at once, with
// and without the main thread having loaded it; workers terminated in the
// middle of long evaluations, or while loading the addon, leave the process
// working.

import { describe, test, after } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { spawnSync } from 'node:child_process';
import v8 from 'node:v8';
import * as G from '../index.js';
import { sameBits } from './fixtures/bits.mjs';
import { regressionData, regression, regressionParams, gpData, gp, mlpSetup, mlp } from '../bench/models.mjs';

const { compile, sum, square, sub, mul, add, logdetPSD, solvePSD, dot, concat, slice, reshape } = G;

const fixture = (name) => new URL(`./fixtures/${name}`, import.meta.url);

const specObjective = (p, d) => sum(square(sub(mul(p.w, d.x), add(d.y, p.b))));
const specArgs = () => ({ x: { w: 2, b: [0.5, 0.5] }, ins: { x: [1, 2], y: [2, 5] } });

/** One long-lived worker answering requests by id. */
function planWorker() {
  const w = new Worker(fixture('plan-worker.mjs'));
  let seq = 0;
  const pending = new Map();
  w.on('message', (m) => {
    const p = pending.get(m.id);
    pending.delete(m.id);
    if (m.error) p.reject(new Error(m.error));
    else p.resolve(m);
  });
  w.on('error', (e) => {
    for (const p of pending.values()) p.reject(e);
  });
  const ask = (msg) =>
    new Promise((resolve, reject) => {
      const id = ++seq;
      pending.set(id, { resolve, reject });
      w.postMessage({ ...msg, id });
    });
  return { ask, terminate: () => w.terminate() };
}

describe('plans sent to a Worker by postMessage', () => {
  const worker = planWorker();
  after(() => worker.terminate());

  const cases = [
    ['SPEC §8 example (inputs)', specObjective, () => specArgs()],
    ['BENCH regression', regression(G, regressionData()), () => ({ x: regressionParams() })],
    ['BENCH gp, n = 20', gp(G, gpData(20)), () => ({ x: { l: 1.2, v: 0.9 } })],
    [
      'BENCH mlp (tensor parameters, inputs)',
      mlp(G),
      () => {
        const { params, batch } = mlpSetup(G);
        return { x: params, ins: batch };
      },
    ],
    [
      'linear algebra on raw parameters, static arguments, NaN constants',
      (p) =>
        add(
          logdetPSD(p.A),
          dot(p.b, solvePSD(p.A, p.b)),
          sum(mul(concat([slice(p.b, [1], [1]), 0.5, p.b]), [1, NaN, 2, 3])),
          sum(reshape(p.A, [4])),
        ),
      () => ({ x: { A: [[4, 1], [1, 3]], b: Float64Array.from([1, -2, 0.5]).subarray(0, 2) } }),
    ],
  ];

  for (const [name, f, args] of cases) {
    test(name, async () => {
      const { x, ins } = args();
      const c = compile(f);
      const expected = c(x, ins);
      const expectedValue = c.value(x, ins);
      const json = c.toJSON();
      for (const msg of [{ json }, { text: JSON.stringify(json) }, { json: structuredClone(json) }]) {
        const got = await worker.ask({ ...msg, x, ins });
        const how = msg.text ? 'JSON text' : 'structured clone';
        // (NaN survives the trip as data, and as text: null reads as NaN.)
        sameBits(got.result, expected, how);
        sameBits(got.again, expected, `${how}, replayed again`);
        sameBits(got.value, expectedValue, `${how}, .value`);
      }
    });
  }

  test('a rebuilt plan refuses other shapes inside a worker too', async () => {
    const c = compile(specObjective);
    const { x, ins } = specArgs();
    c(x, ins);
    await assert.rejects(worker.ask({ json: c.toJSON(), x: { w: 2 }, ins }), /compileFromJSON: this plan was built for arguments shaped b:v2,w:s\|x:v2,y:v2, got w:s\|x:v2,y:v2/);
    // And goes on answering.
    sameBits((await worker.ask({ json: c.toJSON(), x, ins })).result, c(x, ins));
  });
});

describe('the addon in 8 workers at once', () => {
  const { x, ins } = specArgs();
  const c = compile(specObjective);
  const expected = c(x, ins);
  const json = c.toJSON();

  const check = (results) => {
    assert.equal(results.length, 8);
    results.forEach((r, i) => {
      assert.equal(r.index, i);
      sameBits(r.own, expected, `worker ${i}, its own compile`);
      sameBits(r.rebuilt, expected, `worker ${i}, the rebuilt plan`);
      assert.deepEqual(r.json, json, `worker ${i}, its own toJSON`);
    });
  };

  test('while the main thread has loaded it', async () => {
    const runs = Array.from({ length: 8 }, (_, index) =>
      new Promise((resolve, reject) => {
        const w = new Worker(fixture('load-worker.mjs'), { workerData: { json, x, ins, index } });
        w.once('message', (m) => {
          resolve(m);
          w.terminate();
        });
        w.once('error', reject);
      }),
    );
    check(await Promise.all(runs));
    // The main thread is unaffected.
    sameBits(c(x, ins), expected);
  });

  test('in a process whose main thread never loads it', () => {
    const r = spawnSync(process.execPath, [fixture('fresh-main.mjs').pathname], {
      input: v8.serialize({ json, x, ins }).toString('base64'),
      encoding: 'utf8',
      timeout: 30000,
    });
    assert.equal(r.error, undefined, String(r.error));
    assert.equal(r.signal, null, `killed by ${r.signal}: ${r.stderr}`);
    assert.equal(r.status, 0, r.stderr);
    check(v8.deserialize(Buffer.from(r.stdout, 'base64')));
  });
});

describe('workers terminated mid-evaluation', () => {
  test('here: the parent keeps working, bit for bit', async () => {
    const c = compile(gp(G, gpData(400)));
    const x = { l: 1.2, v: 0.9 };
    const expected = c(x);
    const json = c.toJSON();
    const workers = Array.from({ length: 3 }, () => new Worker(fixture('loop-worker.mjs'), { workerData: { json, x } }));
    await Promise.all(
      workers.map((w) => new Promise((resolve, reject) => {
        w.once('message', resolve);
        w.once('error', reject);
      })),
    );
    const codes = await Promise.all(workers.map((w, i) => new Promise((resolve) => setTimeout(() => resolve(w.terminate()), 5 * i))));
    assert.deepEqual(codes, [1, 1, 1]);
    sameBits(c(x), expected);
    sameBits(G.compileFromJSON(json)(x), expected);
  });

  test('in a fresh process, also while workers load the addon: it exits 0', () => {
    const r = spawnSync(process.execPath, [fixture('terminate-main.mjs').pathname], { encoding: 'utf8', timeout: 60000 });
    assert.equal(r.error, undefined, String(r.error));
    assert.equal(r.signal, null, `killed by ${r.signal}: ${r.stderr}`);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^ok -?\d/);
  });
});
