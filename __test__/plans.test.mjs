// Plans as data (SPEC §8): toJSON's schema, compileFromJSON's round trips
// (bit for bit, through JSON.stringify and structuredClone), version 1
// plans, plans the JavaScript version cannot rebuild, the documented errors,
// and a battery of hostile plans, each read in a child process of its own so
// that a crash fails that case alone.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as G from '../index.js';
import { makeRng, randomSPD } from './helpers.mjs';
import { sameBits } from './fixtures/bits.mjs';
import { regressionData, regression, regressionParams, gpData, gp, mlpSetup, mlp } from '../bench/models.mjs';

const {
  compile, compileFromJSON, valueAndGrad, tensor,
  add, sub, mul, div, maximum, minimum, neg, exp, log, sqrt, square, pow, tanh, sigmoid, relu, lgamma,
  sum, mean, matmul, dot, transpose, diagPart, trace, addDiag, reshape, slice, concat,
  cholesky, triangularSolve, logdetPSD, solvePSD, solveGeneral, inv,
} = G;

/** The three ways a plan travels: as is, through JSON text, through structuredClone. */
const travels = (json) => [
  ['as is', json],
  ['JSON.stringify', JSON.parse(JSON.stringify(json))],
  ['structuredClone', structuredClone(json)],
];

/**
 * Compile `f`, evaluate at (x, ins), and check that the compiled closure,
 * valueAndGrad and every rebuilt plan agree bit for bit (twice each, so a
 * replay reusing its buffers is checked too). With `valueOnly`, `.value`.
 */
function roundTrip(f, x, ins, { valueOnly = false } = {}) {
  const c = compile(f);
  if (valueOnly) {
    const expected = c.value(x, ins);
    for (const [how, json] of travels(c.toJSON())) {
      const r = compileFromJSON(json);
      sameBits(r.value(x, ins), expected, `${how} value`);
      sameBits(r.value(x, ins), expected, `${how} value, again`);
    }
    return expected;
  }
  const expected = c(x, ins);
  sameBits(valueAndGrad(f)(x, ins), expected, 'valueAndGrad');
  sameBits(c.value(x, ins), expected.value, 'compiled value');
  for (const [how, json] of travels(c.toJSON())) {
    const r = compileFromJSON(json);
    sameBits(r(x, ins), expected, how);
    sameBits(r(x, ins), expected, `${how}, again`);
    sameBits(r.value(x, ins), expected.value, `${how} .value`);
  }
  return expected;
}

// ---------------------------------------------------------------- SPEC §8's worked example

const SPEC_EXAMPLE = JSON.parse(`{"version":2,"input":"map","nodes":[
 {"kind":"param","name":"w","shape":[]},
 {"kind":"param","name":"b","shape":[2]},
 {"kind":"input","name":"x","shape":[2]},
 {"kind":"input","name":"y","shape":[2]},
 {"kind":"op","op":"add","parents":[3,1]},
 {"kind":"op","op":"mul","parents":[0,2]},
 {"kind":"op","op":"sub","parents":[5,4]},
 {"kind":"op","op":"square","parents":[6]},
 {"kind":"op","op":"sum","parents":[7]}],"root":8}`);

const specObjective = (p, d) => sum(square(sub(mul(p.w, d.x), add(d.y, p.b))));
const specParams = () => ({ w: 2, b: [0.5, 0.5] });
const specInputs = () => ({ x: [1, 2], y: [2, 5] });

describe('toJSON', () => {
  test("SPEC §8's worked example, exactly", () => {
    const c = compile(specObjective);
    assert.deepEqual(c(specParams(), specInputs()), { value: 2.5, gradient: { w: -7, b: [1, 3] } });
    assert.deepEqual(c.toJSON(), SPEC_EXAMPLE);
    // Plain data: it survives JSON text and structuredClone unchanged.
    assert.deepEqual(JSON.parse(JSON.stringify(c.toJSON())), SPEC_EXAMPLE);
    assert.deepEqual(structuredClone(c.toJSON()), SPEC_EXAMPLE);
  });

  test('the rebuilt example gives the documented value and gradient', () => {
    const r = compileFromJSON(SPEC_EXAMPLE);
    assert.deepEqual(r(specParams(), specInputs()), { value: 2.5, gradient: { w: -7, b: [1, 3] } });
    assert.equal(r.value(specParams(), specInputs()), 2.5);
    assert.equal(r.toJSON, undefined);
  });

  test('a plan that takes no inputs accepts an empty inputs map, as compile does', () => {
    const c = compile((p) => logdetPSD(p.A));
    const x = { A: [[4, 1], [1, 3]] };
    const expected = c(x, {});
    const r = compileFromJSON(c.toJSON());
    assert.deepEqual(r(x, {}), expected);
    assert.deepEqual(r.hessian(x, {}), c.hessian(x, {}));
    assert.throws(() => r(x, { y: 1 }), /built for arguments shaped A:2x2, got A:2x2\|y:s/);
  });

  const A = [[4, 1], [1, 3]];
  const json = (f, x, ins) => {
    const c = compile(f);
    c.value(x, ins);
    return c.toJSON();
  };

  test('trace is sum(diagPart)', () => {
    assert.deepEqual(json((a) => trace(a), A), {
      version: 2, input: 'single',
      nodes: [
        { kind: 'param', shape: [2, 2] },
        { kind: 'op', op: 'diagPart', parents: [0] },
        { kind: 'op', op: 'sum', parents: [1] },
      ],
      root: 2,
    });
  });

  test('logdetPSD is mul(2, sum(log(diagPart(cholesky)))) with a constant 2', () => {
    assert.deepEqual(json((a) => logdetPSD(a), A), {
      version: 2, input: 'single',
      nodes: [
        { kind: 'param', shape: [2, 2] },
        { kind: 'op', op: 'cholesky', parents: [0] },
        { kind: 'op', op: 'diagPart', parents: [1] },
        { kind: 'op', op: 'log', parents: [2] },
        { kind: 'op', op: 'sum', parents: [3] },
        { kind: 'const', shape: [], data: [2] },
        { kind: 'op', op: 'mul', parents: [5, 4] },
      ],
      root: 6,
    });
  });

  test('solvePSD is cholesky, triangularSolve lower, transpose, triangularSolve upper', () => {
    assert.deepEqual(json((p) => solvePSD(p.A, p.b), { A, b: [1, 2] }), {
      version: 2, input: 'map',
      nodes: [
        { kind: 'param', name: 'A', shape: [2, 2] },
        { kind: 'param', name: 'b', shape: [2] },
        { kind: 'op', op: 'cholesky', parents: [0] },
        { kind: 'op', op: 'triangularSolve', parents: [2, 1], args: [{ lower: true }] },
        { kind: 'op', op: 'transpose', parents: [2] },
        { kind: 'op', op: 'triangularSolve', parents: [4, 3], args: [{ lower: false }] },
      ],
      root: 5,
    });
  });

  test('inv is solveGeneral against a constant identity', () => {
    assert.deepEqual(json((a) => inv(a), A), {
      version: 2, input: 'single',
      nodes: [
        { kind: 'param', shape: [2, 2] },
        { kind: 'const', shape: [2, 2], data: [1, 0, 0, 1] },
        { kind: 'op', op: 'solveGeneral', parents: [0, 1] },
      ],
      root: 2,
    });
  });

  test('variadic add and mul are chains of binary nodes', () => {
    for (const [name, f] of [['add', add], ['mul', mul]]) {
      assert.deepEqual(json((p) => f(p.a, p.b, p.c, p.d), { a: 1, b: 2, c: 3, d: 4 }), {
        version: 2, input: 'map',
        nodes: [
          { kind: 'param', name: 'a', shape: [] },
          { kind: 'param', name: 'b', shape: [] },
          { kind: 'param', name: 'c', shape: [] },
          { kind: 'param', name: 'd', shape: [] },
          { kind: 'op', op: name, parents: [0, 1] },
          { kind: 'op', op: name, parents: [4, 2] },
          { kind: 'op', op: name, parents: [5, 3] },
        ],
        root: 6,
      });
    }
  });

  test('static arguments of pow, reshape, slice, triangularSolve and concat', () => {
    assert.deepEqual(json((x) => slice(reshape(pow(x, 3), [2, 3]), [0, 1], [2, 2]), [1, 2, 3, 4, 5, 6]).nodes, [
      { kind: 'param', shape: [6] },
      { kind: 'op', op: 'pow', parents: [0], args: [3] },
      { kind: 'op', op: 'reshape', parents: [1], args: [[2, 3]] },
      { kind: 'op', op: 'slice', parents: [2], args: [[0, 1], [2, 2]] },
    ]);
    // triangularSolve's default is written out.
    assert.deepEqual(json((t) => triangularSolve(t, [1, 2]), A).nodes, [
      { kind: 'param', shape: [2, 2] },
      { kind: 'const', shape: [2], data: [1, 2] },
      { kind: 'op', op: 'triangularSolve', parents: [0, 1], args: [{ lower: true }] },
    ]);
    // Scalars and vectors: list, no axis. Matrices: list and an axis, 0 by default.
    assert.deepEqual(json((x) => concat([x, 1, x]), [1, 2]).nodes, [
      { kind: 'param', shape: [2] },
      { kind: 'const', shape: [], data: [1] },
      { kind: 'op', op: 'concat', parents: [0, 1, 0], list: true },
    ]);
    assert.deepEqual(json((x) => concat([x, x], { axis: 1 }), A).nodes[1], {
      kind: 'op', op: 'concat', parents: [0, 0], args: [{ axis: 1 }], list: true,
    });
    assert.deepEqual(json((x) => concat([x, x]), A).nodes[1], {
      kind: 'op', op: 'concat', parents: [0, 0], args: [{ axis: 0 }], list: true,
    });
    assert.deepEqual(json((x) => reshape(x, []), [5]).nodes[1], { kind: 'op', op: 'reshape', parents: [0], args: [[]] });
  });

  test('parameters first (every key, even unused), then inputs, then constants and ops', () => {
    const j = json((p, d) => mul(sum(mul(p.b, d.x)), 3), { a: 1, b: [1, 2], c: [[1]] }, { x: [3, 4], unused: 5 });
    assert.deepEqual(j.nodes.slice(0, 5), [
      { kind: 'param', name: 'a', shape: [] },
      { kind: 'param', name: 'b', shape: [2] },
      { kind: 'param', name: 'c', shape: [1, 1] },
      { kind: 'input', name: 'x', shape: [2] },
      { kind: 'input', name: 'unused', shape: [] },
    ]);
    assert.ok(j.nodes.slice(5).every((n) => n.kind === 'const' || n.kind === 'op'));
    const r = compileFromJSON(j);
    const got = r({ a: 1, b: [1, 2], c: [[1]] }, { x: [3, 4], unused: 5 });
    assert.deepEqual(got, { value: 33, gradient: { a: 0, b: [9, 12], c: [[0]] } });
  });

  test('NaN, ±Infinity and -0 constants survive structuredClone and JSON text, bit for bit', () => {
    const f = (x) => sum(mul(x, [NaN, Infinity, -Infinity]));
    const c = compile(f);
    const x = [1, 2, 3];
    const expected = c(x);
    const j = c.toJSON();
    const data = j.nodes.find((n) => n.kind === 'const').data;
    // The object holds numbers (SPEC's schema), with no enumerable trace of the spelling.
    sameBits(data, [NaN, Infinity, -Infinity]);
    assert.deepEqual(Object.keys(data), ['0', '1', '2']);
    sameBits(structuredClone(j).nodes[1].data, [NaN, Infinity, -Infinity]);
    // JSON.stringify would write null (and 0 for -0): the text spells them out.
    assert.deepEqual(JSON.parse(JSON.stringify(j)).nodes[1].data, ['NaN', 'Infinity', '-Infinity']);
    sameBits(compileFromJSON(j)(x), expected);
    sameBits(compileFromJSON(structuredClone(j))(x), expected);
    sameBits(compileFromJSON(JSON.stringify(j))(x), expected);
    sameBits(compileFromJSON(JSON.parse(JSON.stringify(j)))(x), expected);
    // A plan of the JavaScript version's, whose text has null there: NaN, what null stands for.
    const withNulls = JSON.parse(JSON.stringify(j));
    withNulls.nodes[1].data = [null, null, null];
    sameBits(compileFromJSON(withNulls)(x), { value: NaN, gradient: [NaN, NaN, NaN] });
    // A NaN-only constant survives all three ways.
    roundTrip((v) => sum(mul(v, [NaN, 1, 2])), [1, 2, 3]);
  });

  test('a captured bound of ±Infinity or a -0 gives the same gradient rebuilt from JSON text', () => {
    // Read back as NaN, the bound made this gradient 2 where it is 6.
    const cases = [
      [(x) => sum(minimum(mul(x, [1, 2, 3]), [Infinity, 5, Infinity])), 2, { value: 12, gradient: 6 }],
      [(x) => maximum(x, -Infinity), 2, { value: 2, gradient: 1 }],
      [(x) => div(x, -0), 2, { value: -Infinity, gradient: -Infinity }],
      [(x) => mul(x, -0), 3, { value: -0 }],
    ];
    for (const [f, x, closedForm] of cases) {
      const c = compile(f);
      const want = c(x);
      for (const k of Object.keys(closedForm)) assert.ok(Object.is(want[k], closedForm[k]), `${k}: ${want[k]}`);
      sameBits(compileFromJSON(c.toJSON())(x), want, 'as is');
      sameBits(compileFromJSON(structuredClone(c.toJSON()))(x), want, 'structuredClone');
      const text = JSON.stringify(c.toJSON());
      sameBits(compileFromJSON(text)(x), want, text);
      sameBits(compileFromJSON(JSON.parse(text))(x), want, text);
      // Only constants that need it are spelled: a plain one stays a number.
      assert.ok(!/"data":\[[^\]]*"[0-9]/.test(text), text);
    }
  });

  test("a -0 in an op's arguments is read as a number, beside special constants or not", () => {
    // The object is written as JSON text for the core: plainly when it holds
    // no special number, else with -0, NaN and ±Infinity spelled out; an
    // exponent of -0 was once spelled "-0" and refused.
    const cases = [
      ['pow(x, -0)', (x) => sum(pow(x, -0)), [2, 3]],
      ['pow(x, -0) beside an Infinity constant', (x) => sum(mul(pow(x, -0), [Infinity, 1])), [2, 3]],
      ['slice from -0', (x) => sum(slice(x, [-0], [1])), [2, 3]],
      ['a -0 constant beside a NaN one', (x) => add(sum(mul(x, [-0, 1])), sum(mul(x, [NaN, 0]))), [2, 3]],
    ];
    for (const [what, f, x] of cases) {
      const c = compile(f);
      const expected = c(x);
      for (const [how, plan] of [['as is', c.toJSON()], ['structuredClone', structuredClone(c.toJSON())]]) {
        sameBits(compileFromJSON(plan)(x), expected, `${what}, ${how}`);
      }
    }
  });
});

// ---------------------------------------------------------------- round trips, bit for bit

describe('round trips are bit-identical to the compiled closure and valueAndGrad', () => {
  const rng = makeRng(8);
  const v = (n, lo, hi) => rng.vector(n, lo, hi);
  const M = (m, n) => rng.matrix(m, n);
  const S = (n) => randomSPD(rng, n);

  const unary = { neg, exp, log, sqrt, square, tanh, sigmoid, relu, lgamma };
  for (const [name, op] of Object.entries(unary)) {
    test(`${name}`, () => {
      const positive = ['log', 'sqrt', 'lgamma'].includes(name);
      const x = positive ? v(4, 0.2, 3) : [...v(3), 0];
      roundTrip((a) => sum(op(a)), x);
      roundTrip((a) => op(a), x, undefined, { valueOnly: true });
    });
  }

  const binaries = { add, sub, mul, div, maximum, minimum };
  for (const [name, op] of Object.entries(binaries)) {
    test(`${name}, same shapes and broadcasting either side`, () => {
      const A = M(3, 2);
      A[1][0] = 0.25; // a tie for maximum/minimum
      const p = { A, B: M(3, 2), r: [0.25, -0.5], s: 0.7 };
      roundTrip((q) => sum(op(q.A, q.B)), p);
      roundTrip((q) => sum(op(q.A, q.r)), p);
      roundTrip((q) => sum(op(q.r, q.A)), p);
      roundTrip((q) => sum(op(q.s, q.A)), p);
      roundTrip((q) => sum(op(q.A, q.s)), p);
      roundTrip((q) => sum(op(q.A, 0.25)), p);
    });
  }

  test('variadic add and mul, pow, mean', () => {
    const p = { a: 0.3, b: [1, 2, 3], c: [[1, 2, 3]] };
    roundTrip((q) => sum(add(q.a, q.b, q.c, 2)), p);
    roundTrip((q) => sum(mul(q.a, q.b, q.c, 2)), p);
    roundTrip((x) => sum(pow(x, 2.5)), v(3, 0.5, 2));
    roundTrip((x) => sum(pow(x, -1)), v(3, 0.5, 2));
    roundTrip((x) => mean(square(x)), M(2, 3));
  });

  test('matmul, dot, transpose, diagPart, trace, addDiag', () => {
    const p = { A: M(3, 2), B: M(2, 4), C: M(2, 3), u: v(2), w: v(3), Q: M(3, 3), d: v(3) };
    roundTrip((q) => sum(matmul(q.A, q.B)), p);
    roundTrip((q) => dot(matmul(q.A, q.u), q.w), p);
    roundTrip((q) => sum(mul(transpose(q.A), q.C)), p);
    roundTrip((q) => dot(diagPart(q.Q), q.d), p);
    roundTrip((q) => trace(matmul(q.Q, q.Q)), p);
    roundTrip((q) => sum(addDiag(q.Q, q.d)), p);
    roundTrip((q) => sum(square(addDiag(q.Q, mul(q.d, q.d)))), p);
    roundTrip((q) => sum(addDiag(q.Q, 0.5)), p);
  });

  test('reshape, slice, concat', () => {
    const x = v(6);
    const w9 = v(9);
    roundTrip((a) => sum(mul(reshape(a, [2, 3]), [[1, 2, 3], [4, 5, 6]])), x);
    roundTrip((a) => reshape(slice(a, [2], [1]), []), x);
    roundTrip((a) => sum(square(slice(a, [1], [4]))), x);
    roundTrip((a) => sum(square(slice(reshape(a, [3, 2]), [1, 0], [2, 1]))), x);
    roundTrip((a) => dot(concat([a, 2, slice(a, [0], [2])]), w9), x);
    const A = M(2, 3);
    roundTrip((a) => sum(square(concat([a, a], { axis: 1 }))), A);
    roundTrip((a) => sum(square(concat([a, [[1, 2, 3]]]))), A);
    roundTrip((a) => concat([a, a], { axis: 1 }), A, undefined, { valueOnly: true });
  });

  test('cholesky, triangularSolve, logdetPSD, solvePSD, solveGeneral, inv', () => {
    const p = { A: S(4), B: M(4, 2), b: v(4), T: M(4, 4) };
    for (let i = 0; i < 4; i++) p.T[i][i] += 3;
    roundTrip((q) => sum(cholesky(q.A)), p);
    roundTrip((q) => sum(triangularSolve(q.T, q.B)), p);
    roundTrip((q) => sum(triangularSolve(q.T, q.b, { lower: false })), p);
    roundTrip((q) => logdetPSD(q.A), p);
    roundTrip((q) => dot(q.b, solvePSD(q.A, q.b)), p);
    roundTrip((q) => sum(solvePSD(q.A, q.B)), p);
    roundTrip((q) => sum(solveGeneral(q.T, q.B)), p);
    roundTrip((q) => sum(square(inv(q.T))), p);
    roundTrip((q) => add(logdetPSD(q.A), dot(q.b, solvePSD(q.A, q.b))), p);
  });

  test('captured constants, inputs, tensor and Float64Array parameters', () => {
    const C = M(3, 3);
    roundTrip((q, d) => sum(square(sub(matmul(d.X, q.beta), d.y))), { beta: v(3) }, { X: C, y: v(3) });
    roundTrip((x) => sum(mul(matmul(C, x), x)), Float64Array.from(v(3)));
    roundTrip((x) => sum(exp(x)), tensor(Float64Array.from(v(6)), [2, 3]));
    roundTrip((x) => sum(exp(x)), tensor(Float64Array.from([0.5]), []));
    roundTrip((q) => sum(mul(q.W, C)), { W: tensor(Float64Array.from(v(9)), [3, 3]), unused: [1, 2] });
    roundTrip(specObjective, specParams(), specInputs());
  });

  test('non-finite values propagate through rebuilt plans', () => {
    roundTrip((x) => sum(log(x)), [-1, 0, 2]);
    roundTrip((x) => sum(lgamma(x)), [0, -2, 3.5]);
    roundTrip((x) => sum(mul(x, x)), [NaN, Infinity, 1]);
  });

  test('BENCH regression', () => {
    const G2 = G;
    roundTrip(regression(G2, regressionData()), regressionParams());
  });

  test('BENCH gp, n = 20', () => {
    roundTrip(gp(G, gpData(20)), { l: 1.2, v: 0.9 });
  });

  test('BENCH mlp (tensor parameters, inputs)', () => {
    const { params, batch } = mlpSetup(G);
    roundTrip(mlp(G), params, batch);
  });

  test('a rebuilt plan is reusable across values, and a failing replay does not poison it', () => {
    const f = (A) => logdetPSD(A);
    const c = compile(f);
    const A1 = S(3);
    c(A1);
    const r = compileFromJSON(JSON.parse(JSON.stringify(c.toJSON())));
    for (let k = 0; k < 3; k++) {
      const A = S(3);
      sameBits(r(A), c(A));
    }
    assert.throws(() => r([[1, 2, 0], [2, 1, 0], [0, 0, 1]]), /cholesky: matrix is not positive definite/);
    sameBits(r(A1), c(A1));
  });
});

// ---------------------------------------------------------------- version 1, and what the JS version cannot rebuild

describe('version 1 plans and plans only a static reader can rebuild', () => {
  // SPEC §8's example in version 1: no input kind, so the data are constants.
  const V1 = {
    version: 1,
    nodes: [
      { kind: 'param', name: 'w', shape: [] },
      { kind: 'param', name: 'b', shape: [2] },
      { kind: 'const', shape: [2], data: [1, 2] },
      { kind: 'const', shape: [2], data: [2, 5] },
      { kind: 'op', op: 'add', parents: [3, 1] },
      { kind: 'op', op: 'mul', parents: [0, 2] },
      { kind: 'op', op: 'sub', parents: [5, 4] },
      { kind: 'op', op: 'square', parents: [6] },
      { kind: 'op', op: 'sum', parents: [7] },
    ],
    root: 8,
  };

  test('a version 1 plan with named parameters is read as a map plan', () => {
    const r = compileFromJSON(V1);
    assert.deepEqual(r(specParams()), { value: 2.5, gradient: { w: -7, b: [1, 3] } });
    // Bit for bit with the same objective compiled here.
    const c = compile((p) => sum(square(sub(mul(p.w, [1, 2]), add([2, 5], p.b)))));
    sameBits(r({ w: 1.7, b: [0.1, -0.3] }), c({ w: 1.7, b: [0.1, -0.3] }));
    assert.throws(() => r(specParams(), specInputs()), {
      message:
        'compileFromJSON: this plan was built for arguments shaped b:v2,w:s, got b:v2,w:s|x:v2,y:v2. ' +
        'A rebuilt plan has no objective to re-trace, so it cannot adapt.',
    });
  });

  test('a version 1 plan with one unnamed parameter takes it bare', () => {
    const r = compileFromJSON({
      version: 1,
      nodes: [{ kind: 'param', shape: [2] }, { kind: 'op', op: 'square', parents: [0] }, { kind: 'op', op: 'sum', parents: [1] }],
      root: 2,
    });
    assert.deepEqual(r([3, 4]), { value: 25, gradient: [6, 8] });
  });

  test('a version 1 plan may not hold inputs', () => {
    const bad = structuredClone(V1);
    bad.nodes[2] = { kind: 'input', name: 'x', shape: [2] };
    assert.throws(() => compileFromJSON(bad), { message: 'compileFromJSON: node 2 (input): a version 1 plan has no inputs' });
  });

  test('a raw parameter feeding cholesky rebuilds (the JavaScript version evaluates at zeros and cannot)', () => {
    const plan = {
      version: 2, input: 'single',
      nodes: [
        { kind: 'param', shape: [3, 3] },
        { kind: 'op', op: 'cholesky', parents: [0] },
        { kind: 'op', op: 'diagPart', parents: [1] },
        { kind: 'op', op: 'log', parents: [2] },
        { kind: 'op', op: 'sum', parents: [3] },
      ],
      root: 4,
    };
    const r = compileFromJSON(plan);
    const A = [[4, 2, 0], [2, 5, 1], [0, 1, 3]];
    const c = compile((a) => sum(log(diagPart(cholesky(a)))));
    sameBits(r(A), c(A));
    // And the composite round trip with a raw parameter.
    roundTrip((a) => logdetPSD(a), A);
  });

  test('a raw parameter feeding solveGeneral rebuilds', () => {
    const plan = {
      version: 2, input: 'map',
      nodes: [
        { kind: 'param', name: 'A', shape: [2, 2] },
        { kind: 'param', name: 'b', shape: [2] },
        { kind: 'op', op: 'solveGeneral', parents: [0, 1] },
        { kind: 'op', op: 'sum', parents: [2] },
      ],
      root: 3,
    };
    const r = compileFromJSON(plan);
    const p = { A: [[2, 1], [1, 3]], b: [1, 2] };
    sameBits(r(p), compile((q) => sum(solveGeneral(q.A, q.b)))(p));
    roundTrip((q) => sum(solveGeneral(q.A, q.b)), p);
    roundTrip((a) => sum(inv(a)), p.A);
  });
});

// ---------------------------------------------------------------- the errors of SPEC §8

describe('errors of SPEC §8, exactly', () => {
  const NOT_A_PLAN = { message: 'compileFromJSON: not a serialized plan' };

  test('not a serialized plan', () => {
    for (const bad of [null, undefined, 5, 'plan', [], {}, { nodes: 5 }, { nodes: {} }, { version: 3, nodes: [], root: 0 },
      { version: '2', nodes: [], root: 0 }, { nodes: [{ kind: 'param', shape: [] }], root: 0 }]) {
      assert.throws(() => compileFromJSON(bad), NOT_A_PLAN, JSON.stringify(bad));
    }
  });

  test('unknown op, including the composites (expanded by toJSON, never in a plan)', () => {
    for (const name of ['trace', 'logdetPSD', 'solvePSD', 'inv', 'eval', 'Add']) {
      const plan = structuredClone(SPEC_EXAMPLE);
      plan.nodes[7].op = name;
      assert.throws(() => compileFromJSON(plan), { message: `compileFromJSON: unknown op "${name}"` });
    }
  });

  test('inputs must be a {name: value} map', () => {
    const r = compileFromJSON(SPEC_EXAMPLE);
    assert.throws(() => r(specParams(), 5), { message: 'compileFromJSON: inputs must be a {name: value} map, got number' });
    assert.throws(() => r.value(specParams(), 'x'), { message: 'compileFromJSON: inputs must be a {name: value} map, got string' });
  });

  test("the shape-signature message, SPEC's own example", () => {
    const c = compile((p, d) => sum(mul(p.w, add(d.x, d.y))));
    c({ w: 2 }, { x: [1, 2], y: [3, 4] });
    const r = compileFromJSON(c.toJSON());
    assert.throws(() => r({ w: 2 }, { x: [1, 2] }), {
      message:
        'compileFromJSON: this plan was built for arguments shaped w:s|x:v2,y:v2, got w:s|x:v2. ' +
        'A rebuilt plan has no objective to re-trace, so it cannot adapt.',
    });
  });

  test('any other shape, a missing or an extra parameter or input', () => {
    const r = compileFromJSON(SPEC_EXAMPLE);
    const msg = (got) => ({
      message:
        `compileFromJSON: this plan was built for arguments shaped b:v2,w:s|x:v2,y:v2, got ${got}. ` +
        'A rebuilt plan has no objective to re-trace, so it cannot adapt.',
    });
    assert.throws(() => r({ w: 2, b: [1, 2, 3] }, specInputs()), msg('b:v3,w:s|x:v2,y:v2'));
    assert.throws(() => r({ w: 2 }, specInputs()), msg('w:s|x:v2,y:v2'));
    assert.throws(() => r({ w: 2, b: [1, 2], c: 1 }, specInputs()), msg('b:v2,c:s,w:s|x:v2,y:v2'));
    assert.throws(() => r({ w: 2, b: [1, 2] }, { x: [1, 2], y: [2, 5], z: 0 }), msg('b:v2,w:s|x:v2,y:v2,z:s'));
    assert.throws(() => r({ w: [[2]], b: [1, 2] }, specInputs()), msg('b:v2,w:1x1|x:v2,y:v2'));
    assert.throws(() => r({ w: 2, b: [1, 2] }), msg('b:v2,w:s'));
    // The plan still works after every refusal.
    assert.deepEqual(r(specParams(), specInputs()), { value: 2.5, gradient: { w: -7, b: [1, 3] } });
  });
});

// ---------------------------------------------------------------- hostile plans, one child process each

const INDEX_URL = new URL('../index.js', import.meta.url).href;

// The child revives markers JSON cannot hold: non-finite numbers, and holes.
const CHILD = `
import { compileFromJSON } from ${JSON.stringify(INDEX_URL)};
import { readFileSync } from 'node:fs';
const special = { '§NaN': NaN, '§Infinity': Infinity, '§-Infinity': -Infinity, '§-0': -0 };
const text = readFileSync(0, 'utf8');
const revive = (k, v) => (v === '§hole' ? undefined : typeof v === 'string' && v in special ? special[v] : v);
const plan = text.includes('§') ? JSON.parse(text, revive) : JSON.parse(text);
let out;
try {
  compileFromJSON(plan);
  out = { ok: true };
} catch (e) {
  out = { ok: false, isError: e instanceof Error, message: String(e && e.message) };
}
process.stdout.write(JSON.stringify(out));
`;

/** Read `plan` in a fresh process; the process must exit normally, in time. */
function readInChild(plan, timeout = 20000) {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', CHILD], {
    input: typeof plan === 'string' ? plan : JSON.stringify(plan),
    encoding: 'utf8',
    timeout,
    maxBuffer: 1 << 24,
  });
  assert.equal(r.error, undefined, `child failed to run or timed out: ${r.error}`);
  assert.equal(r.signal, null, `child killed by ${r.signal}: ${r.stderr}`);
  assert.equal(r.status, 0, `child exited with ${r.status}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

const spec = () => structuredClone(SPEC_EXAMPLE);
const edit = (f) => {
  const p = spec();
  f(p);
  return p;
};
/** The example with node 7 (square of a [2] vector) replaced by `node`. */
const at7 = (node) => edit((p) => (p.nodes[7] = node));
const op7 = (op, extra = {}) => at7({ kind: 'op', op, parents: [6], ...extra });
const SIG = (s) => `compileFromJSON: ${s}`;

const HOSTILE = [
  // Indices: out of range, negative, forward, cycles, fractions, strings, huge.
  ['parent out of range', edit((p) => (p.nodes[4].parents = [3, 99])), SIG('node 4 (add): parent 99 is not an earlier node')],
  ['negative parent', edit((p) => (p.nodes[4].parents = [-1, 1])), SIG('node 4 (add): parent -1 is not an earlier node')],
  ['forward reference', edit((p) => (p.nodes[4].parents = [5, 1])), SIG('node 4 (add): parent 5 is not an earlier node')],
  ['a node its own parent', edit((p) => (p.nodes[7].parents = [7])), SIG('node 7 (square): parent 7 is not an earlier node')],
  ['a two-node cycle', edit((p) => (p.nodes[5].parents = [6, 2])), SIG('node 5 (mul): parent 6 is not an earlier node')],
  ['fractional parent', edit((p) => (p.nodes[4].parents = [3.5, 1])), SIG('node 4 (add): parent 3.5 is not a node index')],
  ['string parent', edit((p) => (p.nodes[4].parents = ['3', 1])), SIG('node 4 (add): parent "3" is not a node index')],
  ['NaN parent', edit((p) => (p.nodes[4].parents = ['§NaN', 1])), SIG('node 4 (add): parent "NaN" is not a node index')],
  ['astronomical parent', edit((p) => (p.nodes[4].parents = [2 ** 64, 1])), SIG('node 4 (add): parent 18446744073709552000 is not an earlier node')],
  ['parents not an array', edit((p) => (p.nodes[4].parents = 3)), SIG('node 4 (add): parents must be an array of node indices, got 3')],
  ['parents missing', edit((p) => delete p.nodes[4].parents), SIG('node 4 (add): parents must be an array of node indices, got undefined')],
  ['too few operands', edit((p) => (p.nodes[4].parents = [3])), SIG('node 4 (add): add: takes 2 operands, got 1')],
  ['too many operands', edit((p) => (p.nodes[4].parents = [3, 1, 0])), SIG('node 4 (add): add: takes 2 operands, got 3')],
  ['root out of range', edit((p) => (p.root = 9)), SIG("root must be the index of one of the plan's 9 nodes, got 9")],
  ['negative root', edit((p) => (p.root = -1)), SIG("root must be the index of one of the plan's 9 nodes, got -1")],
  ['string root', edit((p) => (p.root = '8')), SIG(`root must be the index of one of the plan's 9 nodes, got "8"`)],
  ['fractional root', edit((p) => (p.root = 7.5)), SIG("root must be the index of one of the plan's 9 nodes, got 7.5")],
  // Shapes: negative, fractional, non-finite, astronomical, rank 3, wrong types, over the budget.
  ['negative shape', edit((p) => (p.nodes[1].shape = [-2])), SIG('node 1 (param): shape must be up to two non-negative integers, got [-2]')],
  ['fractional shape', edit((p) => (p.nodes[2].shape = [2.5])), SIG('node 2 (input): shape must be up to two non-negative integers, got [2.5]')],
  ['NaN shape', edit((p) => (p.nodes[1].shape = ['§NaN'])), SIG('node 1 (param): shape must be up to two non-negative integers, got ["NaN"]')],
  ['infinite shape', edit((p) => (p.nodes[1].shape = ['§Infinity'])), SIG('node 1 (param): shape must be up to two non-negative integers, got ["Infinity"]')],
  ['astronomical shape', edit((p) => (p.nodes[1].shape = [1e12, 1e12])), /^compileFromJSON: node 1 \(param\): shape \[1000000000000, 1000000000000\] holds more than \d+ values$/],
  ['astronomical vector', edit((p) => (p.nodes[3].shape = [1e300])), /^compileFromJSON: node 3 \(input\): shape \[1e\+300\] holds more than \d+ values$/],
  ['rank 3 shape', edit((p) => (p.nodes[1].shape = [1, 2, 2])), SIG('node 1 (param): shape must be up to two non-negative integers, got [1, 2, 2]')],
  ['shape a string', edit((p) => (p.nodes[1].shape = '2')), SIG('node 1 (param): shape must be up to two non-negative integers, got "2"')],
  ['shape missing', edit((p) => delete p.nodes[0].shape), SIG('node 0 (param): shape must be up to two non-negative integers, got undefined')],
  ['a hole in a shape', edit((p) => (p.nodes[1].shape = ['§hole', 2])), SIG('node 1 (param): shape must be up to two non-negative integers, got [null, 2]')],
  [
    'shapes over the plan budget together',
    edit((p) => {
      p.nodes[0].shape = [16384, 16384];
      p.nodes[1].shape = [16384, 16384];
    }),
    /^compileFromJSON: node 1 \(param\): the plan would hold more than \d+ values$/,
  ],
  [
    'an outer product over the plan budget',
    {
      version: 2, input: 'map', root: 2,
      nodes: [
        { kind: 'param', name: 'a', shape: [46340, 1] },
        { kind: 'param', name: 'b', shape: [1, 46340] },
        { kind: 'op', op: 'matmul', parents: [0, 1] },
      ],
    },
    /^compileFromJSON: node 2 \(matmul\): the plan would hold more than \d+ values$/,
  ],
  // Constant data.
  ['const data too short', edit((p) => (p.nodes[3] = { kind: 'const', shape: [2], data: [2] })), SIG('node 3 (const): data length 1 does not match shape [2]')],
  ['const data too long', edit((p) => (p.nodes[3] = { kind: 'const', shape: [2], data: [2, 5, 7] })), SIG('node 3 (const): data length 3 does not match shape [2]')],
  ['const data for a huge shape', edit((p) => (p.nodes[3] = { kind: 'const', shape: [16384, 16384], data: [1] })), SIG('node 3 (const): data length 1 does not match shape [16384×16384]')],
  ['const data a string', edit((p) => (p.nodes[3] = { kind: 'const', shape: [2], data: 'ab' })), SIG('node 3 (const): data must be an array of numbers, got "ab"')],
  ['const data holding a string', edit((p) => (p.nodes[3] = { kind: 'const', shape: [2], data: [1, 'x'] })), SIG('node 3 (const): data[1] must be a number, got "x"')],
  ['const data nested', edit((p) => (p.nodes[3] = { kind: 'const', shape: [2], data: [[1], [2]] })), SIG('node 3 (const): data[0] must be a number, got [1]')],
  ['const data missing', edit((p) => (p.nodes[3] = { kind: 'const', shape: [2] })), SIG('node 3 (const): data must be an array of numbers, got undefined')],
  // Static arguments of the wrong type or out of range.
  ['pow exponent a string', op7('pow', { args: ['2'] }), SIG('node 7 (pow): pow: exponent must be a finite number; got 2')],
  ['pow exponent NaN', op7('pow', { args: ['§NaN'] }), SIG('node 7 (pow): pow: exponent must be a finite number; got NaN')],
  ['pow exponent infinite', op7('pow', { args: ['§-Infinity'] }), SIG('node 7 (pow): pow: exponent must be a finite number; got -Infinity')],
  ['pow exponent missing', op7('pow'), SIG('node 7 (pow): pow: exponent must be a finite number; got undefined')],
  ['pow with two exponents', op7('pow', { args: [2, 3] }), SIG('node 7 (pow): pow takes one static argument')],
  ['reshape to a negative shape', op7('reshape', { args: [[-1]] }), SIG('node 7 (reshape): reshape: shape must be up to two positive integers')],
  ['reshape to a fractional shape', op7('reshape', { args: [[0.5, 4]] }), SIG('node 7 (reshape): reshape: shape must be up to two positive integers')],
  ['reshape shape not nested', op7('reshape', { args: [2] }), SIG('node 7 (reshape): reshape: shape must be up to two positive integers')],
  ['reshape to the wrong count', op7('reshape', { args: [[3]] }), SIG('node 7 (reshape): reshape: cannot view 2 elements as [3]')],
  ['reshape to an astronomical shape', op7('reshape', { args: [[1e300, 1e300]] }), SIG('node 7 (reshape): reshape: cannot view 2 elements as [1e+300×1e+300]')],
  ['slice outside the operand', op7('slice', { args: [[1], [3]] }), SIG('node 7 (slice): slice: [1, 4) exceeds axis 0 of [2]')],
  ['slice far outside the operand', op7('slice', { args: [[1e300], [1]] }), SIG('node 7 (slice): slice: [1e+300, 1e+300) exceeds axis 0 of [2]')],
  ['slice with a negative start', op7('slice', { args: [[-1], [1]] }), SIG('node 7 (slice): slice: start must be a non-negative integer and size a positive integer')],
  ['slice with a zero size', op7('slice', { args: [[0], [0]] }), SIG('node 7 (slice): slice: start must be a non-negative integer and size a positive integer')],
  ['slice with too many entries', op7('slice', { args: [[0, 0], [1, 1]] }), SIG('node 7 (slice): slice: start and size need 1 entry for a [2] operand')],
  ['slice args a string', op7('slice', { args: 'abc' }), SIG('node 7 (slice): args must be an array, got "abc"')],
  ['slice of a scalar', at7({ kind: 'op', op: 'slice', parents: [0], args: [[0], [1]] }), SIG('node 7 (slice): slice: cannot slice a scalar')],
  [
    'slice outside a matrix',
    {
      version: 2, input: 'single', root: 1,
      nodes: [{ kind: 'param', shape: [3, 2] }, { kind: 'op', op: 'slice', parents: [0], args: [[0, 1], [3, 2]] }],
    },
    SIG('node 1 (slice): slice: [1, 3) exceeds axis 1 of [3×2]'),
  ],
  [
    'triangularSolve lower not a boolean',
    {
      version: 2, input: 'map', root: 2,
      nodes: [
        { kind: 'param', name: 'T', shape: [2, 2] },
        { kind: 'param', name: 'b', shape: [2] },
        { kind: 'op', op: 'triangularSolve', parents: [0, 1], args: [{ lower: 'yes' }] },
      ],
    },
    SIG('node 2 (triangularSolve): triangularSolve: lower must be true or false, got "yes"'),
  ],
  [
    'triangularSolve options not an object',
    {
      version: 2, input: 'map', root: 2,
      nodes: [
        { kind: 'param', name: 'T', shape: [2, 2] },
        { kind: 'param', name: 'b', shape: [2] },
        { kind: 'op', op: 'triangularSolve', parents: [0, 1], args: [true] },
      ],
    },
    SIG('node 2 (triangularSolve): triangularSolve: options must be an object like {lower: true}, got true'),
  ],
  [
    'concat along axis 2',
    {
      version: 2, input: 'single', root: 1,
      nodes: [{ kind: 'param', shape: [2, 2] }, { kind: 'op', op: 'concat', parents: [0, 0], list: true, args: [{ axis: 2 }] }],
    },
    SIG('node 1 (concat): concat: axis must be 0 or 1'),
  ],
  [
    'concat of mismatched matrices',
    {
      version: 2, input: 'map', root: 2,
      nodes: [
        { kind: 'param', name: 'a', shape: [2, 2] },
        { kind: 'param', name: 'b', shape: [3, 3] },
        { kind: 'op', op: 'concat', parents: [0, 1], list: true, args: [{ axis: 1 }] },
      ],
    },
    SIG('node 2 (concat): concat: parts must agree on axis 0, got [2×2] and [3×3]'),
  ],
  ['concat of nothing', op7('concat', { parents: [], list: true }), SIG('node 7 (concat): concat: needs a non-empty array of parts')],
  ['list on an op that takes none', op7('square', { list: true }), SIG('node 7 (square): list: true is for concat only')],
  ['list not a boolean', op7('concat', { list: 'yes' }), SIG('node 7 (concat): list must be true or absent, got "yes"')],
  ['static arguments to an op without any', edit((p) => (p.nodes[4].args = [5])), SIG('node 4 (add): add takes no static arguments')],
  // Node and parent shapes that disagree.
  ['an elementwise mismatch', edit((p) => (p.nodes[2].shape = [3])), SIG('node 6 (sub): sub: shapes [3] and [2] do not match')],
  ['matmul of vectors', edit((p) => (p.nodes[5] = { kind: 'op', op: 'matmul', parents: [1, 2] })), SIG('node 5 (matmul): matmul: left operand must be a matrix, got [2]')],
  ['cholesky of a vector', op7('cholesky'), SIG('node 7 (cholesky): cholesky: needs a square matrix, got [2]')],
  ['dot of a vector and a scalar', at7({ kind: 'op', op: 'dot', parents: [6, 0] }), SIG('node 7 (dot): dot: needs two vectors of equal length, got [2] and scalar')],
  ['solveGeneral of vectors', at7({ kind: 'op', op: 'solveGeneral', parents: [6, 1] }), SIG('node 7 (solveGeneral): solveGeneral: needs a square matrix, got [2]')],
  ['addDiag of a vector', at7({ kind: 'op', op: 'addDiag', parents: [6, 0] }), SIG('node 7 (addDiag): addDiag: needs a square matrix, got [2]')],
  [
    'a constant that is not positive definite',
    edit((p) => {
      p.nodes[7] = { kind: 'const', shape: [2, 2], data: [1, 2, 2, 1] };
      p.nodes[8] = { kind: 'op', op: 'cholesky', parents: [7] };
    }),
    /^compileFromJSON: node 8 \(cholesky\): cholesky: matrix is not positive definite/,
  ],
  // Kinds and ops.
  ['unknown kind', edit((p) => (p.nodes[4].kind = 'lambda')), SIG('node 4: kind must be "param", "input", "const" or "op", got "lambda"')],
  ['kind missing', edit((p) => delete p.nodes[4].kind), SIG('node 4: kind must be "param", "input", "const" or "op", got undefined')],
  ['a node that is a number', edit((p) => (p.nodes[4] = 5)), SIG('node 4: expected an object, got 5')],
  ['a node that is an array', edit((p) => (p.nodes[4] = [3, 1])), SIG('node 4: expected an object, got [3, 1]')],
  ['a hole among the nodes', edit((p) => (p.nodes[4] = '§hole')), SIG('node 4: expected an object, got null')],
  ['an unknown op', edit((p) => (p.nodes[7].op = 'eval')), SIG('unknown op "eval"')],
  ['an op that is not a string', edit((p) => (p.nodes[7].op = 5)), SIG('node 7 (op): op must be the name of an op, got 5')],
  // Names and modes.
  ['a parameter name used twice', edit((p) => (p.nodes[1].name = 'w')), SIG('node 1 (param): name "w" is used twice')],
  ['an input name used twice', edit((p) => (p.nodes[3].name = 'x')), SIG('node 3 (input): name "x" is used twice')],
  ['an input without a name', edit((p) => delete p.nodes[2].name), SIG('node 2 (input): an input needs a string name, got undefined')],
  ['a map parameter without a name', edit((p) => delete p.nodes[1].name), SIG('node 1 (param): a parameter of a map plan needs a string name, got undefined')],
  ['a single plan with two parameters', edit((p) => (p.input = 'single')), SIG('node 1 (param): a plan with input "single" has exactly one param node')],
  ['an unknown input form', edit((p) => (p.input = 'list')), SIG('input must be "map" or "single", got "list"')],
  // Deep nesting and versions.
  [
    'deeply nested arguments',
    op7('pow', { args: JSON.parse('['.repeat(1000) + '2' + ']'.repeat(1000)) }),
    /^compileFromJSON: not a serialized plan \(invalid JSON at byte \d+: nested too deeply\)$/,
  ],
  ['version 3', edit((p) => (p.version = 3)), SIG('not a serialized plan')],
  ['version missing', edit((p) => delete p.version), SIG('not a serialized plan')],
  ['nodes not an array', edit((p) => (p.nodes = { 0: p.nodes[0] })), SIG('not a serialized plan')],
];

describe('hostile plans: a clear Error naming the node, in a child process each', () => {
  for (const [name, plan, expected] of HOSTILE) {
    test(name, () => {
      const out = readInChild(plan);
      assert.equal(out.ok, false, 'the plan was accepted');
      assert.equal(out.isError, true, 'what was thrown is not an Error');
      if (expected instanceof RegExp) assert.match(out.message, expected);
      else assert.equal(out.message, expected);
    });
  }

  test('every hostile plan above is refused in this process too, with the same message', () => {
    for (const [name, plan, expected] of HOSTILE) {
      const text = JSON.stringify(plan);
      const revived = !text.includes('§') ? JSON.parse(text) : JSON.parse(text, (k, v) =>
        v === '§hole' ? undefined : v === '§NaN' ? NaN : v === '§Infinity' ? Infinity : v === '§-Infinity' ? -Infinity : v);
      assert.throws(() => compileFromJSON(revived), { message: expected }, name);
    }
  });

  test('a 200 000-node plan reads in bounded time', () => {
    const nodes = [{ kind: 'param', name: 'x', shape: [] }];
    for (let i = 1; i < 200000; i++) nodes.push({ kind: 'op', op: i % 2 ? 'tanh' : 'neg', parents: [i - 1] });
    const t0 = Date.now();
    const out = readInChild({ version: 2, input: 'map', nodes, root: nodes.length - 1 }, 30000);
    assert.equal(out.ok, true, out.message);
    assert.ok(Date.now() - t0 < 20000);
  });

  test('a 100 000-parameter plan reads in bounded time', () => {
    const n = 100000;
    const nodes = [];
    for (let i = 0; i < n; i++) nodes.push({ kind: 'param', name: `p${i}`, shape: [] });
    nodes.push({ kind: 'op', op: 'add', parents: [0, 1] });
    for (let i = 2; i < n; i++) nodes.push({ kind: 'op', op: 'add', parents: [nodes.length - 1, i] });
    const t0 = Date.now();
    const out = readInChild({ version: 2, input: 'map', nodes, root: nodes.length - 1 }, 30000);
    assert.equal(out.ok, true, out.message);
    const took = Date.now() - t0;
    assert.ok(took < 5000, `took ${took} ms`);
  });

  test('nesting deeper than JSON.stringify can follow gives an Error, not a crash', () => {
    const deep = '['.repeat(100000) + '2' + ']'.repeat(100000);
    const text = JSON.stringify(op7('pow')).replace('"parents":[6]', `"parents":[6],"args":${deep}`);
    const out = readInChild(text);
    assert.equal(out.ok, false);
    assert.equal(out.isError, true);
  });

  test('JavaScript values JSON cannot hold give an Error, not a crash', () => {
    const cyclic = spec();
    cyclic.nodes[4].self = cyclic.nodes[4];
    assert.throws(() => compileFromJSON(cyclic), Error);
    const big = spec();
    big.nodes[4].parents = [3n, 1n];
    assert.throws(() => compileFromJSON(big), Error);
  });
});

describe('compileFromJSON of the JSON text itself', () => {
  const names = ['a"b', 'c\\d', 'e\nf', '__proto__', 'ü😀'];
  const f = (p, ins) => G.mul(G.add(...names.map((k, i) => G.mul(p[k], i + 1))), G.sum(G.mul(ins.w, ins.w)));
  const point = () => {
    const x = JSON.parse('{}');
    names.forEach((k, i) => Object.defineProperty(x, k, { value: 0.5 * i - 0.3, enumerable: true, writable: true, configurable: true }));
    return x;
  };
  const inputs = { w: [0.5, -1.5] };

  test('rebuilds what the object does, bit for bit, names and inputs included', () => {
    const c = G.compile(f);
    const expected = c(point(), inputs);
    const text = JSON.stringify(c.toJSON());
    const fromText = G.compileFromJSON(text);
    assert.deepEqual(fromText(point(), inputs), expected);
    assert.deepEqual(G.compileFromJSON(JSON.parse(text))(point(), inputs), expected);
    assert.deepEqual(Object.keys(fromText(point(), inputs).gradient), names);
    assert.deepEqual(fromText.value(point(), inputs), c.value(point(), inputs));
  });

  test('its errors are the object form\'s; text that is not a JSON object is not a plan', () => {
    const c = G.compile((x) => G.sum(G.mul(x, x)));
    c([1, 2]);
    const plan = c.toJSON();
    plan.nodes[plan.nodes.length - 1].op = 'nope';
    assert.throws(() => G.compileFromJSON(JSON.stringify(plan)), { message: 'compileFromJSON: unknown op "nope"' });
    assert.throws(() => G.compileFromJSON(plan), { message: 'compileFromJSON: unknown op "nope"' });
    for (const bad of ['', 'plan', '[]', '5', 'null']) {
      assert.throws(() => G.compileFromJSON(bad), { message: 'compileFromJSON: not a serialized plan' }, JSON.stringify(bad));
    }
    assert.throws(() => G.compileFromJSON('{bad'), { message: /^compileFromJSON: not a serialized plan \(invalid JSON at byte 1/ });
    const wrong = G.compileFromJSON(JSON.stringify((c([1, 2]), c.toJSON())));
    assert.throws(() => wrong([1, 2, 3]), { message: /this plan was built for arguments shaped v2, got v3/ });
  });
});
