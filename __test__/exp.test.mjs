// `exp` gives Math.exp's bits in this build (src/core/math/host_exp.rs): on a
// scalar, along a tensor at any offset and length (the slice loop, and the
// pass that computes its rare inputs again one by one), compiled, and inside
// `sigmoid` and the gradient. The references are this engine's Math.exp.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as G from '../index.js';

let s = 0x2545f491;
const rand = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296;

/** Inputs of every range the method tells apart, the rare ones among common ones. */
function inputs() {
  const xs = [1, -1, 0, -0, 0.5 * Math.LN2, -0.5 * Math.LN2, 1.5 * Math.LN2, -1.5 * Math.LN2, 2 ** -28, -(2 ** -28), 2 ** -29, 5e-324, -5e-324];
  xs.push(709.78, 709.782712893384, 709.8, -708.3, -708.4, -720, -745.1332191019411, -746, Infinity, -Infinity, NaN, 1 + 2 ** -52, 1 - 2 ** -53);
  for (let i = 0; i < 100_000; i++) {
    const u = rand();
    xs.push([-750 + 1460 * u, -3 + 6 * u, (u - 0.5) * 1e-7, (u - 0.5) * 60, -30 * u, 0][i % 6]);
  }
  return xs;
}

/** The first index where `got` is not Math.exp of `xs`, or -1. */
const firstDiffering = (xs, got) => xs.findIndex((x, i) => !Object.is(got[i], Math.exp(x)));

test('exp of a tensor is Math.exp bit for bit, at every offset and length', () => {
  const xs = inputs();
  const all = G.exp(G.tensor(Float64Array.from(xs), [xs.length])).value.data;
  const at = firstDiffering(xs, all);
  assert.equal(at, -1, `exp(${xs[at]}) = ${all[at]}, Math.exp gives ${Math.exp(xs[at])}`);
  // Slices that start and end inside the loop's blocks, rare inputs at their edges.
  for (const from of [0, 1, 7, 255, 256, 300]) {
    for (const len of [1, 2, 9, 255, 256, 257, 600]) {
      const part = xs.slice(from, from + len);
      const got = G.exp(G.tensor(Float64Array.from(part), [part.length])).value.data;
      const i = firstDiffering(part, got);
      assert.equal(i, -1, `from ${from}, length ${len}: exp(${part[i]}) = ${got[i]}`);
    }
  }
});

test('exp of a number, and the gradient of Σ exp eager and compiled, are Math.exp bit for bit', () => {
  const xs = inputs().filter(Number.isFinite).slice(0, 2000);
  for (const x of xs) {
    assert.ok(Object.is(G.exp(x).value.data[0], Math.exp(x)), `exp(${x})`);
  }
  const g = G.valueAndGrad((p) => G.sum(G.exp(p)))(G.tensor(Float64Array.from(xs), [xs.length]));
  const i = firstDiffering(xs, g.gradient.data);
  assert.equal(i, -1, `d exp(x)/dx at ${xs[i]}: ${g.gradient.data[i]}`);
  const ci = G.compile((p) => G.sum(G.exp(p)))(G.tensor(Float64Array.from(xs), [xs.length]));
  assert.equal(firstDiffering(xs, ci.gradient.data), -1, 'compiled gradient');
});

test('sigmoid is 1 / (1 + Math.exp(−x)) bit for bit', () => {
  const xs = inputs().filter((x) => Math.abs(x) < 700).slice(0, 5000);
  const got = G.sigmoid(G.tensor(Float64Array.from(xs), [xs.length])).value.data;
  const i = xs.findIndex((x, j) => !Object.is(got[j], 1 / (1 + Math.exp(-x))));
  assert.equal(i, -1, `sigmoid(${xs[i]}) = ${got[i]}`);
});
