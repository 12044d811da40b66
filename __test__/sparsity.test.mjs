// Sparse Jacobians (src/core/pattern.rs): forward mode takes one direction
// per color of the columns, from each op's `reads` rule. A rule that missed
// an operand value it reads would give a wrong entry with no error, so
// random programs over every op with such a rule are checked two ways:
// each row against a reverse sweep of that output alone, and the compiled
// Jacobian against the eager one, bit for bit. Each output ends with the
// parameters themselves, so it has at least as many entries as they do and
// forward mode is taken.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as G from '../index.js';
import { N } from '../src/js/binding.js';
import { makeRng } from './helpers.mjs';
import { sameBits } from './fixtures/bits.mjs';

const size = (s) => s.reduce((a, b) => a * b, 1);
const same = (a, b) => a.length === b.length && a.every((d, i) => d === b[i]);

/** A random program: steps over a list of values that starts with p (q values). */
function recipe(rng, q) {
  const int = (lo, hi) => lo + Math.floor(rng.uniform(0, hi - lo + 1));
  const pick = (xs) => xs[int(0, xs.length - 1)];
  const shapes = [[q]];
  const steps = [];
  const of = (pred) => shapes.map((s, i) => [s, i]).filter(([s]) => pred(s)).map(([, i]) => i);
  const sparse = (m, n) => Array.from({ length: m }, () => Array.from({ length: n }, () => (rng.uniform() < 0.25 ? rng.uniform(-1, 1) : 0)));
  const add = (step, shape) => {
    steps.push(step);
    shapes.push(shape);
  };
  for (let k = int(3, 9); k > 0; k--) {
    const choices = [];
    const any = of(() => true);
    choices.push(() => {
      const a = pick(any);
      add({ op: 'unary', a, kind: pick(['tanh', 'sigmoid', 'square', 'neg', 'relu', 'exp']) }, shapes[a]);
    });
    choices.push(() => {
      const a = pick(any);
      const s = shapes[a];
      const partners = of((t) => same(t, s) || t.length === 0 || (s.length === 2 && t.length === 1 && t[0] === s[1]));
      add({ op: 'binary', a, b: pick(partners), kind: pick(['add', 'sub', 'mul', 'div', 'maximum', 'minimum']) }, s);
    });
    const vectors = of((s) => s.length === 1 && s[0] > 1);
    const matrices = of((s) => s.length === 2);
    if (vectors.length) {
      choices.push(() => {
        const a = pick(vectors);
        const n = shapes[a][0];
        const len = int(1, n - 1);
        add({ op: 'slice', a, start: [int(0, n - len)], size: [len] }, [len]);
      });
      choices.push(() => {
        const a = pick(vectors);
        const b = pick(of((s) => s.length <= 1));
        add({ op: 'concat', parts: [a, b] }, [shapes[a][0] + size(shapes[b])]);
      });
      choices.push(() => {
        const a = pick(vectors);
        const n = shapes[a][0];
        const rows = [2, 3, 4, 5].filter((r) => n % r === 0 && n / r > 1);
        if (rows.length === 0) return;
        const r = pick(rows);
        add({ op: 'reshape', a, shape: [r, n / r] }, [r, n / r]);
      });
      choices.push(() => {
        const a = pick(vectors);
        const n = shapes[a][0];
        const m = int(2, 12);
        add({ op: 'constLeft', a, c: sparse(m, n) }, [m]);
      });
      choices.push(() => {
        const a = pick(vectors);
        const b = pick(of((s) => same(s, shapes[a])));
        add({ op: 'dot', a, b }, []);
      });
    }
    if (matrices.length) {
      choices.push(() => {
        const a = pick(matrices);
        const [m, n] = shapes[a];
        const [r, c] = [int(1, m), int(1, n)];
        add({ op: 'slice', a, start: [int(0, m - r), int(0, n - c)], size: [r, c] }, [r, c]);
      });
      choices.push(() => {
        const a = pick(matrices);
        add({ op: 'transpose', a }, [shapes[a][1], shapes[a][0]]);
      });
      choices.push(() => {
        const a = pick(matrices);
        add({ op: 'reshape', a, shape: [size(shapes[a])] }, [size(shapes[a])]);
      });
      choices.push(() => {
        const a = pick(matrices);
        const [m, n] = shapes[a];
        const axis = int(0, 1);
        const b = pick(of((s) => s.length === 2 && (axis === 0 ? s[1] === n : s[0] === m)));
        const [bm, bn] = shapes[b];
        add({ op: 'concat', parts: [a, b], axis }, axis === 0 ? [m + bm, n] : [m, n + bn]);
      });
      choices.push(() => {
        const a = pick(matrices);
        const [m, n] = shapes[a];
        const k = int(2, 8);
        if (rng.uniform() < 0.5) add({ op: 'constLeft', a, c: sparse(k, m) }, [k, n]);
        else add({ op: 'constRight', a, c: sparse(n, k) }, [m, k]);
      });
      choices.push(() => {
        const a = pick(matrices);
        const [, n] = shapes[a];
        const b = pick(of((s) => (s.length === 2 && s[0] === n) || (s.length === 1 && s[0] === n)));
        if (b === undefined) return;
        add({ op: 'matmul', a, b }, shapes[b].length === 2 ? [shapes[a][0], shapes[b][1]] : [shapes[a][0]]);
      });
      const square = of((s) => s.length === 2 && s[0] === s[1]);
      if (square.length) {
        choices.push(() => {
          const a = pick(square);
          add({ op: 'diagPart', a }, [shapes[a][0]]);
        });
        choices.push(() => {
          const a = pick(square);
          const n = shapes[a][0];
          const b = pick(of((s) => s.length === 0 || (s.length === 1 && s[0] === n)));
          if (b !== undefined) add({ op: 'addDiag', a, b }, [n, n]);
        });
      }
    }
    choices.push(() => add({ op: pick(['sum', 'mean']), a: pick(any) }, []));
    pick(choices)();
  }
  // The output: the last value and another, flattened, then p itself.
  const last = shapes.length - 1;
  return { steps, out: [last, int(0, last)], shapes };
}

/** The function a recipe describes. */
function program({ steps, out, shapes }) {
  const flatten = (v, s) => (s.length === 2 ? G.reshape(v, [size(s)]) : v);
  return (p) => {
    const vals = [p];
    for (const s of steps) {
      const a = vals[s.a];
      let v;
      switch (s.op) {
        case 'unary':
          v = s.kind === 'exp' ? G.exp(G.tanh(a)) : G[s.kind](a);
          break;
        case 'binary':
          v = s.kind === 'div' ? G.div(a, G.add(2, G.square(vals[s.b]))) : G[s.kind](a, vals[s.b]);
          break;
        case 'slice':
          v = G.slice(a, s.start, s.size);
          break;
        case 'concat':
          v = G.concat(s.parts.map((k) => vals[k]), s.axis === undefined ? undefined : { axis: s.axis });
          break;
        case 'reshape':
          v = G.reshape(a, s.shape);
          break;
        case 'transpose':
          v = G.transpose(a);
          break;
        case 'constLeft':
          v = G.matmul(s.c, a);
          break;
        case 'constRight':
          v = G.matmul(a, s.c);
          break;
        case 'matmul':
          v = G.matmul(a, vals[s.b]);
          break;
        case 'dot':
          v = G.dot(a, vals[s.b]);
          break;
        case 'diagPart':
          v = G.diagPart(a);
          break;
        case 'addDiag':
          v = G.addDiag(a, vals[s.b]);
          break;
        default:
          v = G[s.op](a);
      }
      vals.push(v);
    }
    return G.concat([...out.map((k) => flatten(vals[k], shapes[k])), p]);
  };
}

test('random sparse programs: every row as a reverse sweep gives it, and eager and compiled agree bit for bit', () => {
  const rng = makeRng(20261204);
  const colored = [];
  const ask = N.tapeColors;
  N.tapeColors = (...a) => {
    const c = ask(...a);
    colored.push(c !== null);
    return c;
  };
  try {
    let programs = 0;
    for (let trial = 0; trial < 160; trial++) {
      const q = 9 + Math.floor(rng.uniform(0, 16));
      const r = recipe(rng, q);
      const f = program(r);
      const u = rng.vector(q);
      const eager = G.jacobian(f)(u);
      const c = G.compile(f);
      const J = c.jacobian(u);
      sameBits(J, eager, `program ${trial}: compiled against eager`);
      for (let i = 0; i < J.length; i++) {
        const g = G.valueAndGrad((p) => G.sum(G.slice(f(p), [i], [1])))(u).gradient;
        for (let j = 0; j < q; j++) {
          const [x, y] = [J[i][j], g[j]];
          assert.ok(Object.is(x, y) || Math.abs(x - y) <= 1e-12 * (1 + Math.abs(y)), `program ${trial} (${JSON.stringify(r.steps.map((s) => s.op + (s.kind ? `:${s.kind}` : '')))}), q = ${q}: J[${i}][${j}] = ${x}, its row by reverse ${y}`);
        }
      }
      programs++;
    }
    assert.equal(programs, 160);
    // The check means something only where columns were colored.
    const share = colored.filter(Boolean).length / colored.length;
    assert.ok(share > 0.3, `only ${(100 * share).toFixed(0)}% of the Jacobians were colored`);
  } finally {
    N.tapeColors = ask;
  }
});
