// Every error message in SPEC.md, asserted exactly, thrown as an Error at the
// call that causes it; plus robustness against malformed and hostile values.
//
// Shapes print as `scalar`, `[3]`, `[2×3]` (× is U+00D7); numbers as String(x).

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as G from '../index.js';
import { throwsMsg } from './helpers.mjs';

const A23 = [[1, 2, 3], [4, 5, 6]];
const A33 = [[4, 1, 0], [1, 3, 1], [0, 1, 2]];
const v3 = [1, 2, 3];

const MSG_FORM = 'must be a number, a non-empty array, or a tensor';
const MSG_COLS = 'must have at least one column';
const MSG_ELEMS = 'must be a number, an array of numbers, or an array of rows';

// ---------------------------------------------------------------------------
// §2 coercion
// ---------------------------------------------------------------------------

describe('asTensor and tensor errors', () => {
  test('asTensor with the default name', () => {
    for (const bad of [[], 'abc', undefined, null, {}, true, () => 1, Symbol('s'), 10n]) {
      throwsMsg(() => G.asTensor(bad), `value ${MSG_FORM}`);
    }
    throwsMsg(() => G.asTensor([[]]), `value ${MSG_COLS}`);
    throwsMsg(() => G.asTensor([[], []]), `value ${MSG_COLS}`);
    throwsMsg(() => G.asTensor([[1, 2], [3]]), 'value is not rectangular (row 1 has length 1, expected 2)');
    throwsMsg(() => G.asTensor([[1], [2], [3, 4, 5]]), 'value is not rectangular (row 2 has length 3, expected 1)');
    throwsMsg(() => G.asTensor([new Float64Array(2), new Float64Array(3)]), 'value is not rectangular (row 1 has length 3, expected 2)');
    throwsMsg(() => G.asTensor(['a', 'b']), `value ${MSG_ELEMS}`);
    throwsMsg(() => G.asTensor([1, 'b']), `value ${MSG_ELEMS}`);
    throwsMsg(() => G.asTensor([{}, {}]), `value ${MSG_ELEMS}`);
  });

  test('asTensor with a name', () => {
    throwsMsg(() => G.asTensor([], 'theta'), `theta ${MSG_FORM}`);
    throwsMsg(() => G.asTensor('x', 'theta'), `theta ${MSG_FORM}`);
    throwsMsg(() => G.asTensor([[]], 'theta'), `theta ${MSG_COLS}`);
    throwsMsg(() => G.asTensor([[1, 2], [3]], 'theta'), 'theta is not rectangular (row 1 has length 1, expected 2)');
    throwsMsg(() => G.asTensor([null], 'theta'), `theta ${MSG_ELEMS}`);
  });

  test('variable names its argument the same way', () => {
    throwsMsg(() => G.variable([]), `value ${MSG_FORM}`);
    throwsMsg(() => G.variable([], 'w'), `w ${MSG_FORM}`);
    throwsMsg(() => G.variable([[1], [2, 3]], 'w'), 'w is not rectangular (row 1 has length 2, expected 1)');
  });

  test('ops coerce their arguments and throw the coercion errors', () => {
    assert.throws(() => G.exp([]), (e) => e instanceof Error && e.message.endsWith(MSG_FORM));
    assert.throws(() => G.add([[1, 2], [3]], 1), (e) => e instanceof Error && /is not rectangular \(row 1 has length 1, expected 2\)$/.test(e.message));
    assert.throws(() => G.mul(['x'], 1), (e) => e instanceof Error && e.message.endsWith(MSG_ELEMS));
    assert.throws(() => G.sum([[]]), (e) => e instanceof Error && e.message.endsWith(MSG_COLS));
  });

  test('tensor length mismatch', () => {
    throwsMsg(() => G.tensor([1, 2, 3], [2, 2]), 'data length 3 does not match shape [2×2]');
    throwsMsg(() => G.tensor(new Float64Array(5), [4]), 'data length 5 does not match shape [4]');
    throwsMsg(() => G.tensor(new Float64Array(4), [1e6, 1e6]), 'data length 4 does not match shape [1000000×1000000]');
    throwsMsg(() => G.tensor([1, 2], []), /^data length 2 does not match shape /);
  });
});

describe('valueAndGrad coercion errors name the parameter', () => {
  const f = (p) => G.sum(p);
  const fm = (p) => G.sum(p.a);
  test('single parameter', () => {
    throwsMsg(() => G.valueAndGrad(f)([]), `parameter ${MSG_FORM}`);
    throwsMsg(() => G.valueAndGrad(f)('abc'), `parameter ${MSG_FORM}`);
    throwsMsg(() => G.valueAndGrad(f)([[]]), `parameter ${MSG_COLS}`);
    throwsMsg(() => G.valueAndGrad(f)([[1, 2], [3]]), 'parameter is not rectangular (row 1 has length 1, expected 2)');
    throwsMsg(() => G.valueAndGrad(f)(['a']), `parameter ${MSG_ELEMS}`);
    throwsMsg(() => G.grad(f)([]), `parameter ${MSG_FORM}`);
    throwsMsg(() => G.valueAndGrad(f).value([]), `parameter ${MSG_FORM}`);
  });
  test('map entries', () => {
    throwsMsg(() => G.valueAndGrad(fm)({ a: [] }), `parameter "a" ${MSG_FORM}`);
    throwsMsg(() => G.valueAndGrad(fm)({ a: 'x' }), `parameter "a" ${MSG_FORM}`);
    throwsMsg(() => G.valueAndGrad(fm)({ a: [[]] }), `parameter "a" ${MSG_COLS}`);
    throwsMsg(() => G.valueAndGrad(fm)({ a: [[1], [2, 3]] }), 'parameter "a" is not rectangular (row 1 has length 2, expected 1)');
    throwsMsg(() => G.valueAndGrad(fm)({ a: [true] }), `parameter "a" ${MSG_ELEMS}`);
    throwsMsg(() => G.valueAndGrad(fm)({ a: 1, b: null }), `parameter "b" ${MSG_FORM}`);
  });
  test('inputs', () => {
    const g = (p, d) => G.add(p, G.sum(d.k));
    throwsMsg(() => G.valueAndGrad(g)(1, { k: [] }), `input "k" ${MSG_FORM}`);
    throwsMsg(() => G.valueAndGrad(g)(1, { k: 'x' }), `input "k" ${MSG_FORM}`);
    throwsMsg(() => G.valueAndGrad(g)(1, { k: [[]] }), `input "k" ${MSG_COLS}`);
    throwsMsg(() => G.valueAndGrad(g)(1, { k: [[1, 2], [3]] }), 'input "k" is not rectangular (row 1 has length 1, expected 2)');
    throwsMsg(() => G.valueAndGrad(g)(1, { k: ['q'] }), `input "k" ${MSG_ELEMS}`);
  });
});

// ---------------------------------------------------------------------------
// §3 elementwise
// ---------------------------------------------------------------------------

describe('elementwise errors', () => {
  test('binary shape mismatch', () => {
    for (const op of ['add', 'sub', 'mul', 'div', 'maximum', 'minimum']) {
      throwsMsg(() => G[op]([1, 2, 3], [1, 2]), `${op}: shapes [3] and [2] do not match`);
      throwsMsg(() => G[op](A23, [[1, 2], [3, 4]]), `${op}: shapes [2×3] and [2×2] do not match`);
      // column broadcasting is refused: a [2] vector against a [2×3] matrix
      throwsMsg(() => G[op](A23, [1, 2]), `${op}: shapes [2×3] and [2] do not match`);
      throwsMsg(() => G[op]([1, 2], A23), `${op}: shapes [2] and [2×3] do not match`);
      // [1] is not a scalar
      throwsMsg(() => G[op]([5], [1, 2, 3]), `${op}: shapes [1] and [3] do not match`);
      throwsMsg(() => G[op](A23, [7]), `${op}: shapes [2×3] and [1] do not match`);
    }
  });

  test('variadic add/mul with a mismatch further along', () => {
    throwsMsg(() => G.add(1, [1, 2], [1, 2, 3]), 'add: shapes [2] and [3] do not match');
    throwsMsg(() => G.mul(A23, v3, [1, 2]), 'mul: shapes [2×3] and [2] do not match');
  });

  test('operand counts', () => {
    throwsMsg(() => G.add(1), 'add: needs at least two operands, got 1');
    throwsMsg(() => G.add(), 'add: needs at least two operands, got 0');
    throwsMsg(() => G.mul([1, 2]), 'mul: needs at least two operands, got 1');
    throwsMsg(() => G.mul(), 'mul: needs at least two operands, got 0');
    for (const op of ['sub', 'div', 'maximum', 'minimum']) {
      throwsMsg(() => G[op](1, 2, 3), `${op}: takes exactly two operands, got 3. add and mul are the variadic ones.`);
      throwsMsg(() => G[op](1), `${op}: takes exactly two operands, got 1. add and mul are the variadic ones.`);
    }
    for (const op of ['neg', 'exp', 'log', 'sqrt', 'square', 'tanh', 'sigmoid', 'relu', 'lgamma']) {
      throwsMsg(() => G[op](1, 2), `${op}: takes exactly one operand, got 2`);
      throwsMsg(() => G[op](), `${op}: takes exactly one operand, got 0`);
    }
  });

  test('pow exponent', () => {
    throwsMsg(() => G.pow([1, 2], NaN), 'pow: exponent must be a finite number; got NaN');
    throwsMsg(() => G.pow(2, Infinity), 'pow: exponent must be a finite number; got Infinity');
    throwsMsg(() => G.pow(2, -Infinity), 'pow: exponent must be a finite number; got -Infinity');
    throwsMsg(() => G.pow(2), 'pow: exponent must be a finite number; got undefined');
    throwsMsg(() => G.pow(2, [2]), 'pow: exponent must be a finite number; got 2');
    throwsMsg(() => G.pow(2, 'x'), 'pow: exponent must be a finite number; got x');
  });
});

// ---------------------------------------------------------------------------
// §4 shape and matrix ops
// ---------------------------------------------------------------------------

describe('shape and matrix op errors', () => {
  test('matmul', () => {
    throwsMsg(() => G.matmul(v3, A33), 'matmul: left operand must be a matrix, got [3]');
    throwsMsg(() => G.matmul(2, A33), 'matmul: left operand must be a matrix, got scalar');
    throwsMsg(() => G.matmul(A23, 2), 'matmul: right operand must be a matrix or vector, got scalar');
    throwsMsg(() => G.matmul(A23, [[1, 2], [3, 4]]), 'matmul: inner dimensions disagree — [2×3] against [2×2]');
    throwsMsg(() => G.matmul(A23, [1, 2]), 'matmul: inner dimensions disagree — [2×3] against [2]');
  });

  test('dot', () => {
    throwsMsg(() => G.dot([1, 2, 3], [1, 2]), 'dot: needs two vectors of equal length, got [3] and [2]');
    throwsMsg(() => G.dot(A23, v3), 'dot: needs two vectors of equal length, got [2×3] and [3]');
    throwsMsg(() => G.dot(2, v3), 'dot: needs two vectors of equal length, got scalar and [3]');
    throwsMsg(() => G.dot(v3, 2), 'dot: needs two vectors of equal length, got [3] and scalar');
  });

  test('transpose, diagPart, trace', () => {
    throwsMsg(() => G.transpose(v3), 'transpose: needs a matrix, got [3]');
    throwsMsg(() => G.transpose(1), 'transpose: needs a matrix, got scalar');
    throwsMsg(() => G.diagPart(A23), 'diagPart: needs a square matrix, got [2×3]');
    throwsMsg(() => G.diagPart(v3), 'diagPart: needs a square matrix, got [3]');
    throwsMsg(() => G.diagPart(1), 'diagPart: needs a square matrix, got scalar');
    throwsMsg(() => G.trace(A23), 'diagPart: needs a square matrix, got [2×3]');
  });

  test('addDiag', () => {
    throwsMsg(() => G.addDiag(A23, 1), 'addDiag: needs a square matrix, got [2×3]');
    throwsMsg(() => G.addDiag(v3, 1), 'addDiag: needs a square matrix, got [3]');
    throwsMsg(() => G.addDiag(A33, [1, 2]), 'addDiag: diagonal has 2 entries for a 3×3 matrix');
    throwsMsg(() => G.addDiag(A33, [1, 2, 3, 4]), 'addDiag: diagonal has 4 entries for a 3×3 matrix');
    throwsMsg(() => G.addDiag(A33, A33), 'addDiag: diagonal must be a scalar or a vector, got [3×3]');
  });

  test('reshape', () => {
    const x = [1, 2, 3, 4, 5, 6];
    const bad = [[0], [-1], [2.5], [1, 2, 3], [NaN], [Infinity], [2, 0], ['6'], [6, null]];
    for (const s of bad) throwsMsg(() => G.reshape(x, s), 'reshape: shape must be up to two positive integers');
    throwsMsg(() => G.reshape(x, 6), 'reshape: shape must be up to two positive integers');
    throwsMsg(() => G.reshape(x, 'ab'), 'reshape: shape must be up to two positive integers');
    throwsMsg(() => G.reshape(x, [4]), 'reshape: cannot view 6 elements as [4]');
    throwsMsg(() => G.reshape(x, [2, 2]), 'reshape: cannot view 6 elements as [2×2]');
    throwsMsg(() => G.reshape(x, []), /^reshape: cannot view 6 elements as /);
    throwsMsg(() => G.reshape(2, [2]), 'reshape: cannot view 1 elements as [2]');
  });

  test('reshape to a huge shape is a count mismatch', () => {
    throwsMsg(() => G.reshape([1, 2, 3, 4, 5, 6], [1e6, 1e6]), 'reshape: cannot view 6 elements as [1000000×1000000]');
    throwsMsg(() => G.reshape([1, 2], [2 ** 32, 2 ** 32]), 'reshape: cannot view 2 elements as [4294967296×4294967296]');
  });

  test('slice', () => {
    throwsMsg(() => G.slice(3, [0], [1]), 'slice: cannot slice a scalar');
    throwsMsg(() => G.slice(v3, [0, 0], [1, 1]), 'slice: start and size need 1 entry for a [3] operand');
    throwsMsg(() => G.slice(v3, [], []), 'slice: start and size need 1 entry for a [3] operand');
    throwsMsg(() => G.slice(v3, [0], [1, 1]), 'slice: start and size need 1 entry for a [3] operand');
    throwsMsg(() => G.slice(A23, [0], [1]), 'slice: start and size need 2 entries for a [2×3] operand');
    throwsMsg(() => G.slice(A23, [0, 0, 0], [1, 1, 1]), 'slice: start and size need 2 entries for a [2×3] operand');
    const nonInt = 'slice: start must be a non-negative integer and size a positive integer';
    throwsMsg(() => G.slice(v3, [-1], [1]), nonInt);
    throwsMsg(() => G.slice(v3, [0.5], [1]), nonInt);
    throwsMsg(() => G.slice(v3, [0], [0]), nonInt);
    throwsMsg(() => G.slice(v3, [0], [1.5]), nonInt);
    throwsMsg(() => G.slice(v3, [NaN], [1]), nonInt);
    throwsMsg(() => G.slice(A23, [0, 0], [1, -2]), nonInt);
    throwsMsg(() => G.slice([1, 2, 3, 4], [2], [3]), 'slice: [2, 5) exceeds axis 0 of [4]');
    throwsMsg(() => G.slice(v3, [3], [1]), 'slice: [3, 4) exceeds axis 0 of [3]');
    throwsMsg(() => G.slice(A23, [1, 0], [2, 1]), 'slice: [1, 3) exceeds axis 0 of [2×3]');
    throwsMsg(() => G.slice(A23, [0, 2], [1, 3]), 'slice: [2, 5) exceeds axis 1 of [2×3]');
    throwsMsg(() => G.slice(v3, [2 ** 53], [1]), /^slice: /);
  });

  test('concat', () => {
    throwsMsg(() => G.concat([]), 'concat: needs a non-empty array of parts');
    throwsMsg(() => G.concat(), 'concat: needs a non-empty array of parts');
    throwsMsg(() => G.concat('ab'), 'concat: needs a non-empty array of parts');
    throwsMsg(() => G.concat([v3, [[1, 2]]]), 'concat: parts must all be scalars and vectors, or all matrices; got [1×2]');
    throwsMsg(() => G.concat([1, A23]), 'concat: parts must all be scalars and vectors, or all matrices; got [2×3]');
    throwsMsg(() => G.concat([A23, v3]), 'concat: parts must all be matrices, got [3]');
    throwsMsg(() => G.concat([A23, A23, [1, 2]]), 'concat: parts must all be matrices, got [2]');
    throwsMsg(() => G.concat([A23, A23], { axis: 2 }), 'concat: axis must be 0 or 1');
    throwsMsg(() => G.concat([A23, A23], { axis: -1 }), 'concat: axis must be 0 or 1');
    throwsMsg(() => G.concat([A23, A23], { axis: '1' }), 'concat: axis must be 0 or 1');
    // axis 0 stacks rows: the parts must agree on axis 1 (columns), and vice versa
    throwsMsg(() => G.concat([A23, [[1, 2], [3, 4]]]), 'concat: parts must agree on axis 1, got [2×3] and [2×2]');
    throwsMsg(() => G.concat([A23, A33], { axis: 1 }), 'concat: parts must agree on axis 0, got [2×3] and [3×3]');
  });
});

// ---------------------------------------------------------------------------
// §5 linear algebra
// ---------------------------------------------------------------------------

describe('linear algebra errors', () => {
  test('cholesky', () => {
    throwsMsg(() => G.cholesky(A23), 'cholesky: needs a square matrix, got [2×3]');
    throwsMsg(() => G.cholesky(v3), 'cholesky: needs a square matrix, got [3]');
    throwsMsg(() => G.cholesky(4), 'cholesky: needs a square matrix, got scalar');
    // one asymmetric pair; the indices name it (either order of the pair)
    throwsMsg(() => G.cholesky([[4, 1, 0.5], [1, 3, 1], [0.6, 1, 2]]),
      /^cholesky: matrix is not symmetric \((A\[0\]\[2\] != A\[2\]\[0\]|A\[2\]\[0\] != A\[0\]\[2\])\)$/);
    throwsMsg(() => G.cholesky([[1, 2], [2.1, 5]]),
      /^cholesky: matrix is not symmetric \((A\[0\]\[1\] != A\[1\]\[0\]|A\[1\]\[0\] != A\[0\]\[1\])\)$/);
    // pivots (0-based): [[1,2],[2,1]] -> 1 - 4 = -3 at pivot 1
    throwsMsg(() => G.cholesky([[1, 2], [2, 1]]), 'cholesky: matrix is not positive definite (pivot 1 is -3)');
    throwsMsg(() => G.cholesky([[1, 1], [1, 1]]), 'cholesky: matrix is not positive definite (pivot 1 is 0)');
    throwsMsg(() => G.cholesky([[-2, 0], [0, 1]]), 'cholesky: matrix is not positive definite (pivot 0 is -2)');
    throwsMsg(() => G.cholesky([[4, 2, 0], [2, 2, 3], [0, 3, 1]]), 'cholesky: matrix is not positive definite (pivot 2 is -8)');
  });

  test('cholesky symmetry tolerance is relative 1e-10', () => {
    // a relative asymmetry of 1e-13 is accepted
    const L = G.cholesky([[1e6, 1e5 * (1 + 1e-13)], [1e5, 1e6]]);
    assert.ok(L.data[0] > 0);
    throwsMsg(() => G.cholesky([[1e6, 1e5 * (1 + 1e-6)], [1e5, 1e6]]), /^cholesky: matrix is not symmetric /);
  });

  test('composites surface the cholesky errors', () => {
    throwsMsg(() => G.logdetPSD([[1, 2], [2, 1]]), 'cholesky: matrix is not positive definite (pivot 1 is -3)');
    throwsMsg(() => G.solvePSD([[1, 2], [2, 1]], [1, 1]), 'cholesky: matrix is not positive definite (pivot 1 is -3)');
    throwsMsg(() => G.valueAndGrad((p) => G.logdetPSD(p))([[1, 2], [2, 1]]),
      'cholesky: matrix is not positive definite (pivot 1 is -3)');
  });

  test('triangularSolve', () => {
    throwsMsg(() => G.triangularSolve(A23, [1, 2]), 'triangularSolve: needs a square matrix, got [2×3]');
    throwsMsg(() => G.triangularSolve(v3, v3), 'triangularSolve: needs a square matrix, got [3]');
    throwsMsg(() => G.triangularSolve(A33, 1), 'triangularSolve: right-hand side must be a matrix or vector, got scalar');
    throwsMsg(() => G.triangularSolve(A33, [1, 2]), 'triangularSolve: [3×3] cannot be applied to [2]');
    throwsMsg(() => G.triangularSolve(A33, [[1], [2]], { lower: false }), 'triangularSolve: [3×3] cannot be applied to [2×1]');
  });

  test('triangularSolve with a zero pivot gives non-finite values, no error', () => {
    const out = G.triangularSolve([[0, 0], [1, 1]], [1, 0]);
    assert.ok(!Number.isFinite(out.data[0]));
    assert.ok(!Number.isFinite(out.data[1]));
  });

  test('solveGeneral', () => {
    throwsMsg(() => G.solveGeneral(A23, [1, 2]), 'solveGeneral: needs a square matrix, got [2×3]');
    throwsMsg(() => G.solveGeneral(2, [1, 2]), 'solveGeneral: needs a square matrix, got scalar');
    throwsMsg(() => G.solveGeneral(A33, 1), 'solveGeneral: right-hand side must be a matrix or vector, got scalar');
    throwsMsg(() => G.solveGeneral(A33, [1, 2]), 'solveGeneral: [3×3] cannot be applied to [2]');
    throwsMsg(() => G.solveGeneral(A33, A23), 'solveGeneral: [3×3] cannot be applied to [2×3]');
    throwsMsg(() => G.solveGeneral([[1, 2], [2, 4]], [1, 1]), 'solve: matrix is singular (pivot below tolerance)');
    throwsMsg(() => G.solveGeneral([[0, 0], [0, 0]], [[1, 0], [0, 1]]), 'solve: matrix is singular (pivot below tolerance)');
  });

  test('inv', () => {
    throwsMsg(() => G.inv(A23), 'inv: needs a square matrix, got [2×3]');
    throwsMsg(() => G.inv(v3), 'inv: needs a square matrix, got [3]');
    throwsMsg(() => G.inv(5), 'inv: needs a square matrix, got scalar');
    throwsMsg(() => G.inv([[1, 2, 3], [2, 4, 6], [1, 1, 1]]), 'solve: matrix is singular (pivot below tolerance)');
  });
});

// ---------------------------------------------------------------------------
// §6 drivers
// ---------------------------------------------------------------------------

describe('driver errors', () => {
  test('expected a function', () => {
    throwsMsg(() => G.valueAndGrad(5), 'valueAndGrad: expected a function');
    throwsMsg(() => G.valueAndGrad(), 'valueAndGrad: expected a function');
    throwsMsg(() => G.valueAndGrad({}), 'valueAndGrad: expected a function');
    throwsMsg(() => G.jacobian(5), 'jacobian: expected a function');
    throwsMsg(() => G.jacobian(null), 'jacobian: expected a function');
    assert.throws(() => G.grad(5), Error);
  });

  test('the objective must return a Var', () => {
    const msg = "valueAndGrad: the objective must return a Var built from this package's ops; got number. A plain number means the ops were bypassed somewhere, which breaks the chain.";
    throwsMsg(() => G.valueAndGrad(() => 3)(1), msg);
    throwsMsg(() => G.valueAndGrad((x) => x.data[0] * 2)(1), msg);
    throwsMsg(() => G.grad(() => 3)({ a: 1 }), msg);
    throwsMsg(() => G.valueAndGrad(() => undefined)(1),
      /^valueAndGrad: the objective must return a Var built from this package's ops; got undefined\./);
    throwsMsg(() => G.valueAndGrad(() => ({ data: new Float64Array(1), shape: [] }))(1),
      /^valueAndGrad: the objective must return a Var built from this package's ops; got /);
  });

  test('the gradient path needs a scalar', () => {
    throwsMsg(() => G.valueAndGrad((x) => G.mul(x, 2))([1, 2]),
      'valueAndGrad: the objective must return a scalar, got [2]. Reduce it with sum() or mean() first.');
    throwsMsg(() => G.valueAndGrad((x) => G.exp(x))([[1, 2], [3, 4]]),
      'valueAndGrad: the objective must return a scalar, got [2×2]. Reduce it with sum() or mean() first.');
    throwsMsg(() => G.valueAndGrad((x) => G.reshape(x, [1]))(3),
      'valueAndGrad: the objective must return a scalar, got [1]. Reduce it with sum() or mean() first.');
  });

  test('inputs must be a map', () => {
    const f = (p, d) => G.add(p, d.k);
    throwsMsg(() => G.valueAndGrad(f)(1, 5), 'valueAndGrad: inputs must be a {name: value} map, got number');
    throwsMsg(() => G.valueAndGrad(f)(1, 'k'), 'valueAndGrad: inputs must be a {name: value} map, got string');
    throwsMsg(() => G.valueAndGrad(f)(1, true), 'valueAndGrad: inputs must be a {name: value} map, got boolean');
    assert.throws(() => G.valueAndGrad(f)(1, null), Error);
    assert.throws(() => G.grad(f)(1, 5), (e) => e instanceof Error && /inputs must be a \{name: value\} map, got number$/.test(e.message));
  });

  test('errors thrown by the objective itself pass through', () => {
    throwsMsg(() => G.valueAndGrad((p) => G.add(p, [1, 2, 3]))([1, 2]), 'add: shapes [2] and [3] do not match');
    throwsMsg(() => G.valueAndGrad(() => { throw new Error('user error'); })(1), 'user error');
  });

  test('jacobian', () => {
    throwsMsg(() => G.jacobian(() => 3)([1, 2]), "jacobian: the function must return a Var built from this package's ops");
    throwsMsg(() => G.jacobian(() => [1, 2])([1, 2]), "jacobian: the function must return a Var built from this package's ops");
    throwsMsg(() => G.jacobian((x) => G.exp(x))([[1, 2], [3, 4]]), 'jacobian: the function must return a scalar or a vector, got [2×2]');
    throwsMsg(() => G.jacobian((x) => G.reshape(x, [2, 1]))([1, 2]), 'jacobian: the function must return a scalar or a vector, got [2×1]');
  });

  test('backward seeds', () => {
    const y = G.exp(G.variable([1, 2]));
    throwsMsg(() => y.backward(), 'backward() needs an explicit seed for a [2] node; only a scalar objective can seed itself with 1.');
    throwsMsg(() => y.backward(new Float64Array(3)), 'seed has 3 elements but this node holds 2');
    throwsMsg(() => G.sum(G.variable([1, 2])).backward(new Float64Array(2)), 'seed has 2 elements but this node holds 1');
  });
});

// ---------------------------------------------------------------------------
// Robustness: malformed and hostile values throw an Error, never crash or hang
// ---------------------------------------------------------------------------

const isError = (e) => e instanceof Error;
const fmt = (v) => (typeof v === 'string' ? JSON.stringify(v) : Array.isArray(v) ? `[${v.map(fmt).join(', ')}]` : String(v));

describe('robustness (in process)', () => {
  const junk = ['abc', undefined, null, {}, [], [[]], [[1, 2], [3]], [1, [2]], [[1], 2], [null], ['1'], [undefined],
    [{}], [[1, 'a']], [[null, 1]], { data: [1], shape: [1] }, { data: new Float64Array(2) }, Symbol('x'), 5n, () => 1,
    new Map(), new Date(0), new Float32Array(2), [new Float32Array(2)]];

  test('unary ops reject junk', () => {
    for (const op of ['neg', 'exp', 'log', 'sqrt', 'square', 'tanh', 'sigmoid', 'relu', 'lgamma', 'sum', 'mean', 'transpose', 'diagPart', 'cholesky', 'inv']) {
      for (const j of junk) assert.throws(() => G[op](j), isError, `${op}(${String(j?.toString?.() ?? j)})`);
    }
  });

  test('binary ops reject junk on either side', () => {
    for (const op of ['add', 'sub', 'mul', 'div', 'maximum', 'minimum', 'matmul', 'dot', 'solveGeneral', 'triangularSolve', 'solvePSD']) {
      for (const j of junk) {
        assert.throws(() => G[op](j, [[1, 0], [0, 1]]), isError);
        assert.throws(() => G[op]([[1, 0], [0, 1]], j), isError);
      }
    }
  });

  test('a tensor whose data does not fit its shape is refused, not read out of bounds', () => {
    const short = { data: new Float64Array(2), shape: [3, 3] };
    for (const op of ['exp', 'sum', 'transpose', 'cholesky', 'inv', 'neg']) assert.throws(() => G[op](short), isError, op);
    assert.throws(() => G.matmul(short, [[1], [2], [3]]), isError);
    assert.throws(() => G.add(short, 1), isError);
    assert.throws(() => G.valueAndGrad((x) => G.sum(x))(short), isError);
    const bigShape = { data: new Float64Array(4), shape: [2 ** 32, 2 ** 32] };
    assert.throws(() => G.sum(bigShape), isError);
  });

  test('a tensor of rank 3 or with a junk shape is refused', () => {
    for (const shape of [[2, 2, 2], [-1], [2.5], ['2'], [NaN], [Infinity]]) {
      const t = { data: new Float64Array(8), shape };
      assert.throws(() => G.exp(t), isError, JSON.stringify(shape));
    }
  });

  test('slice/reshape/concat with junk arguments', () => {
    for (const s of [undefined, null, 'x', {}, [[1]], [1, 2, 3]]) {
      assert.throws(() => G.reshape([1, 2], s), isError);
      assert.throws(() => G.slice([1, 2], s, [1]), isError);
      assert.throws(() => G.slice([1, 2], [0], s), isError);
    }
    for (const parts of [undefined, null, 'x', {}, [undefined], [null], [[]], ['a']]) {
      assert.throws(() => G.concat(parts), isError);
    }
  });

  for (const s of [[-1], [1.5], ['x'], [2, 2, 2], [NaN], [Infinity], 'ab', null]) {
    test(`zeros(${fmt(s)}) throws`, () => {
      assert.throws(() => G.zeros(s), isError);
    });
  }
  for (const n of [-1, 1.5, NaN, Infinity, 'x']) {
    test(`eye(${fmt(n)}) throws`, () => {
      assert.throws(() => G.eye(n), isError);
    });
  }

  test('valueAndGrad rejects junk parameters', () => {
    const vg = G.valueAndGrad((p) => G.sum(p));
    for (const j of ['abc', undefined, null, [], [[]], [[1, 2], [3]], [null], [[1, 'a']], Symbol('x'), 5n]) {
      assert.throws(() => vg(j), isError);
    }
    const vm = G.valueAndGrad((p) => G.sum(p.a));
    assert.throws(() => vm({ a: [1], b: 'x' }), isError);
  });
});

// Huge allocations run in a child process, so that an abort (out of memory) or
// a hang is seen as a failure of this test and not of the whole file.
const INDEX_URL = new URL('../index.js', import.meta.url).href;

function runIsolated(expr) {
  const code = `import * as G from ${JSON.stringify(INDEX_URL)};
try { ${expr}; console.log('NO-THROW'); }
catch (e) { console.log(e instanceof Error ? 'ERROR ' + e.message : 'NON-ERROR ' + String(e)); }`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { timeout: 15000, encoding: 'utf8' });
  return r;
}

describe('robustness (huge sizes, isolated processes)', () => {
  const cases = [
    'G.zeros([1e6, 1e6])',
    'G.zeros([2 ** 32, 2 ** 32])',
    'G.zeros([1e300])',
    'G.zeros([2 ** 53])',
    'G.eye(1e7)',
    'G.eye(2 ** 32)',
    'G.tensor(new Float64Array(0), [2 ** 32, 2 ** 32])',
    'G.tensor(new Float64Array(1), [2 ** 32 + 1, 2 ** 32 - 1])',
    'G.reshape([1, 2, 3, 4], [2 ** 53, 2 ** 53])',
    'G.reshape([1, 2, 3, 4], [2 ** 32, 2 ** 32])',
    'G.reshape([1], [2 ** 32 + 1, 2 ** 32 - 1])',
    // products that wrap around in 32- or 64-bit integer arithmetic
    'G.tensor(new Float64Array(65536), [65536, 65537])',
    'G.sum({ data: new Float64Array(65536), shape: [65536, 65537] })',
    'G.reshape(new Float64Array(65536), [65536, 65537])',
    'G.reshape(new Float64Array(0), [2 ** 32, 2 ** 32])',
    'G.sum({ data: new Float64Array(0), shape: [2 ** 32, 2 ** 32] })',
    'G.slice([1, 2, 3], [2 ** 53], [2 ** 53])',
    'G.matmul({ data: new Float64Array(4), shape: [2 ** 31, 2 ** 31] }, [1, 2])',
    'G.addDiag({ data: new Float64Array(1), shape: [2 ** 32, 2 ** 32] }, 1)',
  ];
  for (const expr of cases) {
    test(`${expr} throws an Error`, () => {
      const r = runIsolated(expr);
      assert.equal(r.error, undefined, `child failed to run or timed out: ${r.error}`);
      assert.equal(r.signal, null, `child was killed by ${r.signal}; stderr: ${r.stderr}`);
      assert.equal(r.status, 0, `child exited with ${r.status}; stderr: ${r.stderr}`);
      assert.match(r.stdout, /^ERROR /, `expected an Error, got: ${r.stdout.trim()}`);
    });
  }
});
