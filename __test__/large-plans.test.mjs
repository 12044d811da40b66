// A plan too large for lanes lays out its values by liveness: the GP's
// values that no backward step reads take turns in blocks, and the
// adjoints' blocks lie over them (src/core/plan/values.rs). Whatever the
// road to the plan (the trace adopted with its values, a later call, a
// rebuild from JSON, a batch on one thread or several), the numbers are the
// eager tape's, bit for bit.

import { test } from 'node:test';
import * as G from '../index.js';
import { sameBits } from './fixtures/bits.mjs';
import { gpData, gp } from '../bench/models.mjs';

const { compile, compileFromJSON, valueAndGrad } = G;

test('a GP with 200 points (40 000 values a matrix) gives the eager bits compiled, rebuilt and batched', () => {
  const f = gp(G, gpData(200));
  const points = [{ l: 1.3, v: 0.9 }, { l: 0.7, v: 1.6 }, { l: 1.3, v: 0.9 }, { l: 2.1, v: 0.4 }];
  const eager = points.map((p) => valueAndGrad(f)(p));
  const c = compile(f);
  for (const [i, p] of points.entries()) sameBits(c(p), eager[i], `compiled, point ${i}`);
  const rebuilt = compileFromJSON(JSON.parse(JSON.stringify(c.toJSON())));
  for (const [i, p] of points.entries()) sameBits(rebuilt(p), eager[i], `rebuilt, point ${i}`);
  sameBits(c.batch(points, undefined, { threads: 1 }), eager, 'batch, one thread');
  sameBits(c.batch(points, undefined, { threads: 2 }), eager, 'batch, two threads');
  sameBits(rebuilt.batch(points), eager, 'rebuilt batch');
});
