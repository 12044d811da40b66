// compileFromJSON(object) encodes a plan object for the core without JSON
// text (src/js/parts.js) when each of its fields has the schema's type, and
// sends anything else as text. Either way the core must read the same
// plan: for valid plans of every op and for thousands of mutants, whenever
// the encoded form is taken, the result (or the error, word for word) is
// that of the plan's JSON text.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as G from '../index.js';
import { N } from '../src/js/binding.js';
import { planParts } from '../src/js/parts.js';
import { planText } from '../src/js/plans.js';
import { makeRng, randomSPD } from './helpers.mjs';
import { sameBits } from './fixtures/bits.mjs';

const { compile, compileFromJSON } = G;

/** Plans of every op that has static arguments, constants holding every special number, names and inputs. */
function plans() {
  const A = randomSPD(makeRng(5), 3);
  const traced = (f, x, ins) => {
    const c = compile(f);
    c.value(x, ins);
    return c.toJSON();
  };
  return {
    scalars: traced((p) => G.add(G.mul(p.a, G.exp(p.b)), G.pow(p.a, -0)), { a: 0.3, b: -1.2 }),
    named: traced((p) => G.mul(p['a"b'], p['ü😀']), { 'a"b': 2, 'ü😀': 3 }),
    single: traced((x) => G.sum(G.square(G.slice(x, [1], [2]))), [1, 2, 3]),
    constants: traced((x) => G.sum(G.mul(x, [NaN, Infinity, -Infinity, -0, 1.5])), [1, 2, 3, 4, 5]),
    matrices: traced(
      (p) => G.sum(G.triangularSolve(G.cholesky(G.add(A, G.mul(p.s, G.eye(3)))), G.reshape(p.v, [3, 1]), { lower: true })),
      { s: 0.5, v: [1, 2, 3] },
    ),
    concat: traced((p) => G.sum(G.concat([G.reshape(p.x, [1, 2]), G.reshape(p.x, [1, 2])], { axis: 0 })), { x: [1, 2] }),
    inputs: traced((p, d) => G.sum(G.square(G.sub(G.mul(p.w, d.x), d.y))), { w: 2 }, { x: [1, 2], y: [2, 5] }),
  };
}

/** Arguments at the plan's slots, from the core's reading of it. */
function argsFor(slotsText, rng) {
  const slots = JSON.parse(slotsText);
  const value = (shape) => {
    if (shape.length === 0) return rng() - 0.5;
    const n = shape.reduce((a, b) => a * b, 1);
    const data = Array.from({ length: n }, () => rng() - 0.5);
    return shape.length === 1 ? data : G.tensor(data, shape);
  };
  const x = slots.map ? Object.fromEntries(slots.params.map((p) => [p.name, value(p.shape)])) : value(slots.params[0]?.shape ?? []);
  const ins = slots.inputs.length > 0 ? Object.fromEntries(slots.inputs.map((p) => [p.name, value(p.shape)])) : undefined;
  return [x, ins];
}

const outcome = (f) => {
  try {
    return { ok: true, value: f() };
  } catch (e) {
    return { ok: false, error: e instanceof Error ? e.message : `not an Error: ${String(e)}` };
  }
};

/**
 * Whether the object `m`, if encoded, is read as its text is: both refused
 * with the same message, or both rebuilt into plans that agree bit for bit
 * (or fail alike) at a few points. Returns whether it was encoded.
 */
function readsAsText(m, label, rng) {
  const parts = planParts(m);
  if (parts === null) return false;
  const text = outcome(() => planText(m));
  const fromText = text.ok ? outcome(() => compileFromJSON(text.value)) : text;
  const fromObject = outcome(() => compileFromJSON(m));
  assert.equal(fromObject.ok, fromText.ok, `${label}: ${fromObject.error ?? ''} / ${fromText.error ?? ''}`);
  if (!fromText.ok) {
    assert.equal(fromObject.error, fromText.error, label);
    return true;
  }
  // As the core read them: names and shapes.
  const slots = N.planSlots(N.planFromJson(text.value));
  assert.equal(N.planSlots(N.planFromParts(parts.stream, parts.strings)), slots, `${label}: slots`);
  for (let k = 0; k < 2; k++) {
    const [x, ins] = argsFor(slots, rng);
    const a = outcome(() => fromObject.value(x, ins));
    const b = outcome(() => fromText.value(x, ins));
    if (!b.ok) assert.equal(a.error, b.error, `${label}: evaluation`);
    else sameBits(a.value, b.value, `${label}: evaluation`);
  }
  return true;
}

describe('compileFromJSON(object), encoded without JSON text', () => {
  test('valid plans of every kind are encoded, and rebuild as their text does', () => {
    const rng = makeRng(11).next;
    for (const [name, plan] of Object.entries(plans())) {
      assert.ok(readsAsText(plan, name, rng), `${name} is encoded`);
    }
  });

  test('mutants are read as their text is, or go as text', () => {
    const rng = makeRng(12).next;
    const values = [
      undefined, null, true, 'x', '-0', 0, -0, 1, -1, 1.5, 2 ** 40, NaN, Infinity, -Infinity,
      [], [0], [-0], [1.5], [2, 2], [3, 1], [NaN], ['a'], [[1]], {}, { lower: false }, { axis: 1 }, { axis: -0 },
      { lower: 1 }, 'op', 'param', 'const', 'input', 'nope', 'toString', '\ud800', 'ü😀', 'map', 'single',
    ];
    let encoded = 0;
    let total = 0;
    for (const [name, plan] of Object.entries(plans())) {
      const fields = ['version', 'root', 'input', 'nodes', 'extra'];
      for (const field of fields) {
        for (const v of values) {
          const m = structuredClone(plan);
          if (v === undefined) delete m[field];
          else m[field] = structuredClone(v);
          total++;
          if (readsAsText(m, `${name}.${field} = ${String(v)}`, rng)) encoded++;
        }
      }
      for (let i = 0; i < plan.nodes.length; i++) {
        for (const field of ['kind', 'name', 'shape', 'data', 'op', 'parents', 'args', 'list', 'extra']) {
          for (const v of values) {
            const m = structuredClone(plan);
            if (v === undefined) delete m.nodes[i][field];
            else m.nodes[i][field] = structuredClone(v);
            total++;
            if (readsAsText(m, `${name}.nodes[${i}].${field} = ${String(v)}`, rng)) encoded++;
          }
        }
        if (plan.nodes[i].args) {
          for (let k = 0; k < plan.nodes[i].args.length; k++) {
            for (const v of values) {
              const m = structuredClone(plan);
              m.nodes[i].args[k] = structuredClone(v);
              total++;
              if (readsAsText(m, `${name}.nodes[${i}].args[${k}] = ${String(v)}`, rng)) encoded++;
            }
          }
        }
      }
    }
    // Many mutants keep their fields' types (a parent out of range, a
    // shape that does not fit, an unknown op) and are encoded; the rest
    // (another type, a key the schema lacks) go as text.
    assert.ok(encoded > total / 20, `${encoded} of ${total} mutants encoded`);
  });

  test('each field of an encoded object is read once', () => {
    const { named } = plans();
    const reads = {};
    const counted = structuredClone(named);
    for (const [i, node] of counted.nodes.entries()) {
      for (const key of Object.keys(node)) {
        const value = node[key];
        Object.defineProperty(node, key, {
          enumerable: true,
          get: () => {
            reads[`${i}.${key}`] = (reads[`${i}.${key}`] ?? 0) + 1;
            return value;
          },
        });
      }
    }
    assert.notEqual(planParts(counted), null, 'encoded');
    assert.ok(Object.keys(reads).length > 0);
    for (const [field, n] of Object.entries(reads)) assert.equal(n, 1, `${field} read ${n} times`);
  });

  test('objects JSON text would see differently go as text', () => {
    const { scalars } = plans();
    const withProto = structuredClone(scalars);
    withProto.nodes[0] = Object.create({ extra: 1 }, { kind: { value: 'param', enumerable: true }, name: { value: 'a', enumerable: true }, shape: { value: [], enumerable: true } });
    const hidden = structuredClone(scalars);
    Object.defineProperty(hidden.nodes[0], 'shape', { value: [], enumerable: false });
    const custom = structuredClone(scalars);
    custom.nodes[1].toJSON = () => ({ kind: 'const', shape: [], data: [1] });
    const cyclic = structuredClone(scalars);
    cyclic.nodes[2].self = cyclic.nodes[2];
    const undefinedName = structuredClone(scalars);
    undefinedName.nodes[0].name = undefined;
    for (const [label, m] of Object.entries({ withProto, hidden, custom, cyclic, undefinedName })) {
      assert.equal(planParts(m), null, label);
    }
    assert.throws(() => compileFromJSON(cyclic), /compileFromJSON: not a serialized plan \(.*circular/);
    assert.notEqual(planParts(scalars), null);
  });
});
