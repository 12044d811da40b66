// The threads large matrices take (setThreads, TANGENT_GRAD_THREADS), and
// that results do not depend on them, bit for bit: a compiled objective
// whose Cholesky, triangular solve, LU solve, product and their adjoints
// all run at n = 751 (past the orders where several threads start: 600 for
// solves and products, 725 for Cholesky and its adjoint), on one
// thread against the machine's, in this process and in a child started
// with TANGENT_GRAD_THREADS=1.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import os from 'node:os';
import { execFileSync } from 'node:child_process';
import * as G from '../index.js';
import { run as runWith } from './threads-model.mjs';

const WASM = process.env.TANGENT_GRAD_WASM === '1';
const CORES = os.availableParallelism?.() ?? os.cpus().length;
const N = 751;
const run = () => runWith(G, N);

function differing(a, b) {
  assert.equal(a.length, b.length);
  let count = 0;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) count++;
  return count;
}

test('setThreads reads and sets the cap, and refuses what is not a whole number', () => {
  const machine = WASM ? 1 : CORES;
  try {
    assert.equal(G.setThreads(0), machine);
    assert.equal(G.setThreads(), machine, 'no argument reads');
    assert.equal(G.setThreads(1), 1);
    assert.equal(G.setThreads(), 1);
    assert.equal(G.setThreads(10_000), machine, 'cut to the machine');
    for (const [bad, got] of [[-1, '-1'], [1.5, '1.5'], ['2', '"2"'], [null, 'null'], [NaN, 'NaN'], [2n, '2n'], [{}, 'object'], [Symbol('s'), 'a symbol'], [() => 3, 'a function']]) {
      assert.throws(() => G.setThreads(bad), { message: `setThreads: n must be a whole number (0 for the machine's cores), got ${got}` });
    }
  } finally {
    G.setThreads(0);
  }
});

test(`one thread and ${CORES} give the same bits (n = ${N}: Cholesky, solves, LU, product, adjoints)`, () => {
  try {
    G.setThreads(1);
    const one = run();
    G.setThreads(0);
    const all = run();
    assert.ok(one.every(Number.isFinite), 'finite results');
    assert.equal(differing(one, all), 0, `entries differ between 1 and ${G.setThreads()} threads`);
  } finally {
    G.setThreads(0);
  }
});

test('TANGENT_GRAD_THREADS=1 caps a fresh process at one thread, with the same bits', () => {
  const script = `
    import * as G from ${JSON.stringify(new URL('../index.js', import.meta.url).href)};
    import { run } from ${JSON.stringify(new URL('./threads-model.mjs', import.meta.url).href)};
    const out = run(G, ${N});
    process.stdout.write(JSON.stringify({ cap: G.setThreads(), bits: Buffer.from(out.buffer).toString('base64') }));`;
  const env = { ...process.env, TANGENT_GRAD_THREADS: '1' };
  const child = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { env, encoding: 'utf8', maxBuffer: 1 << 26 }));
  assert.equal(child.cap, 1);
  G.setThreads(0);
  const ours = run();
  const theirs = new Float64Array(new Uint8Array(Buffer.from(child.bits, 'base64')).buffer);
  assert.equal(differing(theirs, ours), 0, `a fresh process on one thread and this one on ${G.setThreads()} give the same bits`);
});
