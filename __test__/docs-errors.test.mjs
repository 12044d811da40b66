// The error tables of README.md and docs/API.md against what the package
// throws: every message they print is produced here, word for word, so a
// table cannot drift from the code, and a new row cannot go unchecked.
// (The messages the JavaScript version has are errors.test.mjs's.)

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as G from '../index.js';
import { throwsMsg } from './helpers.mjs';

const WASM = process.env.TANGENT_GRAD_WASM === '1';
const read = (rel) => readFileSync(fileURLToPath(new URL(rel, import.meta.url)), 'utf8');

/**
 * The messages in the last column of the first table after the line that
 * begins with `from`: backticked spans that start with `name: `, the way
 * every message does.
 */
function tableMessages(markdown, from) {
  const start = markdown.indexOf(`\n${from}`);
  assert.ok(start >= 0, `no line "${from}"`);
  const lines = markdown.slice(start + 1).split('\n');
  const first = lines.findIndex((l) => l.startsWith('|'));
  const end = lines.findIndex((l, i) => i > first && !l.startsWith('|'));
  const rows = lines.slice(first, end).filter((l) => !/^\|[-| ]+\|$/.test(l));
  const messages = [];
  for (const row of rows.slice(1)) {
    const last = row.slice(row.lastIndexOf(' | ') + 3);
    for (const [, span] of last.matchAll(/`([^`]+)`/g)) if (/^[A-Za-z][\w.]*: /.test(span)) messages.push(span);
  }
  return messages;
}

const sq = (p) => G.sum(G.square(p));
const twoOut = (p) => G.mul(p, 2);
/** A node a user built by hand: it has a gradient rule and no forward one. */
const handBuilt = (p) => G.sum(new G.Var({ data: p.data.map((v) => v * v), shape: [...p.shape] }, [p], (g) => [G.mul(g, G.mul(p, 2))]));
/** At p = [1], [[1, 2], [2, 1]]: the factor's pivot 1 is 1 − 2² = −3. */
const notPD = (p) => G.logdetPSD(G.add(G.tensor([0, 2, 2, 1], [2, 2]), G.mul(G.tensor([1, 0, 0, 0], [2, 2]), G.sum(p))));
const mapSq = (p) => G.add(G.square(p.a), G.sum(G.square(p.b)));
const twoPoints = G.compile((p) => G.add(G.sum(G.square(p.b)), G.square(p.w)));
const pdAt = G.compile((p) => G.logdetPSD(G.add(G.tensor([0, 2, 2, 1], [2, 2]), G.mul(G.tensor([1, 0, 0, 0], [2, 2]), p))));

/** Each documented message, and a call that throws it. */
const producers = [
  ['jvp: expected a function', () => G.jvp(5)],
  ['hvp: expected a function', () => G.hvp(5)],
  ['hessian: expected a function', () => G.hessian(5)],
  ['jacobian: expected a function', () => G.jacobian(5)],
  ['jvp: the tangent is shaped [3], unlike the parameter ([2])', () => G.jvp(sq)([1, 2], [1, 2, 3])],
  ['hvp: tangent "b" is shaped [3], unlike parameter "b" ([2])', () => G.hvp(mapSq)({ a: 1, b: [1, 2] }, { a: 1, b: [1, 2, 3] })],
  ['jvp: the tangent has no key "b"; it needs one per parameter', () => G.jvp(mapSq)({ a: 1, b: [1, 2] }, { a: 1 })],
  ['jvp: the tangent has key "z", which is not a parameter', () => G.jvp(mapSq)({ a: 1, b: [1, 2] }, { a: 1, b: [1, 2], z: 0 })],
  ["jvp: the tangent must be a {name: value} map with the parameters' keys", () => G.jvp(mapSq)({ a: 1, b: [1, 2] }, [1, 2, 3])],
  ['hvp: the tangent must be a number, a non-empty array, or a tensor', () => G.hvp(sq)([1, 2], 'v')],
  ['jvp: tangent "a" must be a number, a non-empty array, or a tensor', () => G.jvp(mapSq)({ a: 1, b: [1, 2] }, { a: 'v', b: [1, 2] })],
  ['hvp: the objective must return a scalar, got [2]. Reduce it with sum() or mean() first.', () => G.hvp(twoOut)([1, 2], [1, 1])],
  ['hessian: the objective must return a scalar, got [2]. Reduce it with sum() or mean() first.', () => G.hessian(twoOut)([1, 2])],
  ['hessian: 20000 parameters make a 20000×20000 Hessian of 400000000 entries, more than the 268435456 a value may hold', () => G.hessian(sq)(new Float64Array(20000))],
  ['jacobian: a 30000×10000 Jacobian holds 300000000 entries, more than the 268435456 a value may hold', () => G.jacobian((x) => G.concat([x, x, x]))(new Float64Array(10000))],
  ['jacobian: a 16777216×0 Jacobian has too many rows to return as nested arrays', () => G.jacobian((x) => G.add(G.zeros([2 ** 24]), G.sum(x)))(new Float64Array(0))],
  ["jvp: this objective holds a node built outside this package's ops, which has no forward rule.", () => G.jvp(handBuilt)([1, 2], [1, 1])],
  ["hvp: this objective holds a node built outside this package's ops, which has no forward rule.", () => G.hvp(handBuilt)([1, 2], [1, 1])],
  ["hessian: this objective holds a node built outside this package's ops, which has no forward rule.", () => G.hessian(handBuilt)([1, 2])],
  ['cholesky: matrix is not positive definite (pivot 1 is -3)', () => G.hessian(notPD)([1])],
  ['setThreads: n must be a whole number (0 for the machine\'s cores), got -1', () => G.setThreads(-1)],
  // batch, async, batchAsync
  ['batch: points must be an array of parameter values, or a [k, n] tensor for a plan with one vector parameter; got number', () => twoPoints.batch(3)],
  ['batch: 33554432 points are more than the 16777216 a batch takes', () => twoPoints.batch(new Array(2 ** 25))],
  ['batch: 20000 points of 20000 values are more than the 268435456 values a batch takes', () => G.compile(sq).batch(new Array(20000).fill(new Float64Array(20000)))],
  ['batch: options must be an object, got number', () => twoPoints.batch([{ b: [1, 2], w: 1 }], undefined, 5)],
  ['batch: options.threads must be a positive integer, got 1.5', () => twoPoints.batch([{ b: [1, 2], w: 1 }], undefined, { threads: 1.5 })],
  ['batch: options.threads is 1000, more than the 256 a batch may use', () => twoPoints.batch([{ b: [1, 2], w: 1 }], undefined, { threads: 1000 })],
  ['batch: point 3 is shaped b:v3,w:s, unlike point 0 (b:v2,w:s); a batch evaluates one shape signature', () => {
    twoPoints({ b: [1, 2], w: 1 });
    twoPoints({ b: [1, 2, 3], w: 1 });
    twoPoints.batch([0, 1, 2, 3].map((i) => ({ b: i === 3 ? [1, 2, 3] : [1, 2], w: 1 })));
  }],
  ['batch: point 3: compileFromJSON: this plan was built for arguments shaped b:v2,w:s, got b:v3,w:s. A rebuilt plan has no objective to re-trace, so it cannot adapt.', () => {
    twoPoints({ b: [1, 2], w: 1 });
    const rebuilt = G.compileFromJSON(JSON.stringify(twoPoints.toJSON()));
    rebuilt.batch([0, 1, 2, 3].map((i) => ({ b: i === 3 ? [1, 2, 3] : [1, 2], w: 1 })));
  }],
  ['batch: point 3: parameter "b" must be a number, an array of numbers, or an array of rows', () => {
    twoPoints({ b: [1, 2], w: 1 });
    twoPoints.batch([0, 1, 2, 3].map((i) => ({ b: i === 3 ? [true, 1] : [1, 2], w: 1 })));
  }],
  ['batch: point 5: cholesky: matrix is not positive definite (pivot 1 is -3)', () => {
    pdAt(5);
    pdAt.batch([5, 5, 5, 5, 5, 1, 5, 1]);
  }],
  ['batch: a tensor of points must be shaped [k, n] (k points of a [n] vector), got [3]', () => G.compile(sq).batch(G.tensor([1, 2, 3], [3]))],
  ['batch: data length 5 does not match shape [2×3]', () => G.compile(sq).batch({ data: new Float64Array(5), shape: [2, 3] })],
  ['batch: a [3×2] tensor of points needs a plan with one [2] parameter; this one takes [3]', () => {
    const c = G.compile(sq);
    c([1, 2, 3]);
    G.compileFromJSON(c.toJSON()).batch(G.tensor(new Float64Array(6), [3, 2]));
  }],
  ['compile: the objective must return a scalar, got [2]. Reduce it with sum() or mean() first.', () => G.compile(twoOut).batch([[1, 2]])],
  ['batch: 8388608 points of 4 values are more than a batch holds in the WebAssembly build (67108864 values); split it', () => {
    const c = G.compile(sq);
    c([1, 2, 3, 4]);
    c.batch(G.tensor(new Float64Array(8388608 * 4), [8388608, 4]));
  }, { wasmOnly: true }],
];

/** A documented span ending in … stands for every message it begins. */
const covers = (span, message) => (span.endsWith('…') ? message.startsWith(span.slice(0, -1)) : message === span);

test('every message of the docs\' error tables is produced by a call, word for word', () => {
  const spans = [
    ...tableMessages(read('../README.md'), '**Errors.**'),
    ...tableMessages(read('../docs/API.md'), '### `jvp`, `hvp`, `hessian`, `jacobian`'),
    ...tableMessages(read('../docs/API.md'), '### `batch`, `async`, `batchAsync`'),
  ];
  assert.ok(spans.length >= 40, `only ${spans.length} messages found in the tables`);
  const unchecked = spans.filter((s) => !producers.some(([m]) => covers(s, m)));
  assert.deepEqual(unchecked, [], 'documented messages this test does not produce');
});

// A message of the WebAssembly build alone is checked by `npm run test:wasm`.
for (const [message, call, { wasmOnly = false } = {}] of producers) {
  if (!wasmOnly || WASM) test(message, () => throwsMsg(call, message));
}
