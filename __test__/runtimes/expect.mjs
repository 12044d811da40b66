// The node:test side of fixtures/checks.mjs: judges the report that a
// runtime (Chromium, a Vite build, Deno, Bun) sent back. One function per
// check, so each is its own test.

import assert from 'node:assert/strict';

/** SPEC §5's message for a matrix that is not positive definite. */
export const NOT_SPD = /^cholesky: matrix is not positive definite \(pivot \d+ is [^)]+\)$/;

const rel = (a, b) => Math.abs(a - b) / Math.max(1, Math.abs(b));

export function checkGP(report) {
  assert.equal(report.gp.length, 3);
  for (const { p, value, gradient, central } of report.gp) {
    assert.ok(Number.isFinite(value), `value at ${JSON.stringify(p)}: ${value}`);
    assert.deepEqual(Object.keys(gradient), ['l', 'v']);
    for (const k of ['l', 'v']) {
      assert.ok(rel(gradient[k], central[k]) < 1e-5, `∂/∂${k} at ${JSON.stringify(p)}: ${gradient[k]} vs central ${central[k]}`);
    }
  }
}

/** The same GP numbers as another build (Node's own), to 1e-10. */
export function checkGPAgainst(report, reference) {
  report.gp.forEach((row, i) => {
    const ref = reference.gp[i];
    assert.ok(rel(row.value, ref.value) < 1e-10, `value ${row.value} vs ${ref.value}`);
    for (const k of ['l', 'v']) assert.ok(rel(row.gradient[k], ref.gradient[k]) < 1e-10, `∂/∂${k} ${row.gradient[k]} vs ${ref.gradient[k]}`);
  });
}

export function checkPlans(report) {
  const plan = JSON.parse(report.planJSON);
  assert.ok(Array.isArray(plan.nodes) && plan.nodes.length > 0, 'toJSON gives a plan with nodes');
  for (const row of report.plans) {
    // deepStrictEqual compares numbers with Object.is: bit for bit.
    assert.deepStrictEqual(row.compiled, row.eager, 'compile vs valueAndGrad');
    assert.deepStrictEqual(row.rebuilt, row.eager, 'compileFromJSON(toJSON()) vs valueAndGrad');
    assert.ok(Object.is(row.compiledValue, row.eagerValue) && Object.is(row.rebuiltValue, row.eagerValue), '.value');
  }
}

export function checkTensor(report) {
  const { eager, compiled, eagerOfCompiled, callerW, callerX } = report.tensor;
  const W = [1, -2, 3, 0.5, 4, -1];
  const s = 0.75;
  assert.deepEqual(eager.keys, ['W', 's'], 'the caller\'s key order');
  assert.deepEqual([eager.W.isFloat64Array, eager.W.shape], [true, [2, 3]]);
  assert.deepEqual([eager.s.isFloat64Array, eager.s.shape], [true, []]);
  const sumW2 = W.reduce((a, w) => a + w * w, 0);
  assert.ok(rel(eager.value, s * s * sumW2) < 1e-14, `value ${eager.value}`);
  eager.W.data.forEach((g, i) => assert.ok(rel(g, 2 * s * s * W[i]) < 1e-14, `dW[${i}] = ${g}`));
  assert.ok(rel(eager.s.data[0], 2 * s * sumW2) < 1e-14, `ds = ${eager.s.data[0]}`);

  // sum((W X)²) with X = [[1,2],[3,4],[5,6]]: dW = 2 (W X) Xᵀ, in integers and halves, so exact.
  const X = [[1, 2], [3, 4], [5, 6]];
  const Wm = [W.slice(0, 3), W.slice(3)];
  const WX = Wm.map((row) => [0, 1].map((j) => row.reduce((a, w, k) => a + w * X[k][j], 0)));
  const dW = Wm.map((_, i) => X.map((xk) => 2 * (WX[i][0] * xk[0] + WX[i][1] * xk[1]))).flat();
  const value = WX.flat().reduce((a, v) => a + v * v, 0);
  for (const r of compiled) {
    assert.deepEqual([r.W.isFloat64Array, r.W.shape], [true, [2, 3]]);
    assert.equal(r.value, value);
    assert.deepEqual(r.W.data, dW);
    assert.deepStrictEqual(r, eagerOfCompiled, 'compiled vs eager, bit for bit');
  }
  assert.deepEqual(callerW, W, 'the caller\'s Float64Array is not written');
  assert.deepEqual(callerX, [1, 2, 3, 4, 5, 6]);
}

export function checkCholesky(report) {
  const { threw, isError, name, message } = report.cholesky;
  assert.ok(threw, 'cholesky of [[1,2],[2,1]] must throw');
  assert.ok(isError, `it throws an Error (got ${name})`);
  assert.match(message, NOT_SPD);
  assert.equal(message, 'cholesky: matrix is not positive definite (pivot 1 is -3)');
  const { bad, after } = report.choleskyCompiled;
  assert.ok(bad.threw && bad.isError, 'a compiled replay on a non-SPD matrix throws an Error');
  assert.match(bad.message, NOT_SPD);
  assert.ok(Number.isFinite(after), 'the plan still works after a failed replay');
}

/**
 * Forward mode and second order: eager, compiled and rebuilt agree bit for
 * bit, the value and gradient are valueAndGrad's, the Hessian is symmetric
 * and matches central differences of the gradient, H·v and the derivative
 * along v follow from it, and the tall Jacobian is [I; diag(exp x)].
 */
export function checkHigher(report) {
  const { keys, v, vg, hessian, columns, hvp, jvp, jacobian } = report.higher;
  assert.deepStrictEqual(hessian.compiled, hessian.eager, 'compiled Hessian vs eager, bit for bit');
  assert.deepStrictEqual(hessian.rebuilt, hessian.eager, 'rebuilt Hessian vs eager, bit for bit');
  assert.ok(Object.is(hessian.eager.value, vg.value), 'the value is valueAndGrad\'s');
  assert.deepStrictEqual(hessian.eager.gradient, vg.gradient, 'the gradient is valueAndGrad\'s');
  const H = hessian.eager.hessian;
  assert.equal(H.length, 2);
  assert.ok(Object.is(H[0][1], H[1][0]), `symmetric: ${H[0][1]} and ${H[1][0]}`);
  // Column j is ∂g/∂xⱼ: central differences of the gradient, to their own error.
  keys.forEach((_, j) => keys.forEach((_, i) => {
    assert.ok(Math.abs(H[i][j] - columns[j][i]) <= 1e-6 * Math.max(1, Math.abs(H[i][j])), `H[${i}][${j}] = ${H[i][j]}, central ${columns[j][i]}`);
  }));
  assert.deepStrictEqual(hvp.compiled, hvp.eager, 'compiled hvp vs eager, bit for bit');
  assert.deepStrictEqual(hvp.rebuilt, hvp.eager, 'rebuilt hvp vs eager, bit for bit');
  const vs = keys.map((k) => v[k]);
  keys.forEach((k, i) => {
    const want = H[i][0] * vs[0] + H[i][1] * vs[1];
    assert.ok(rel(hvp.eager.hvp[k], want) < 1e-12, `(H·v)_${k} = ${hvp.eager.hvp[k]}, H·v gives ${want}`);
  });
  assert.deepStrictEqual(jvp.compiled, jvp.eager, 'compiled jvp vs eager, bit for bit');
  const along = vg.gradient.l * v.l + vg.gradient.v * v.v;
  assert.ok(rel(jvp.eager.tangent, along) < 1e-12, `the derivative along v: ${jvp.eager.tangent}, ∇f·v ${along}`);
  assert.ok(Object.is(jvp.eager.value, vg.value), 'jvp\'s value is the value');
  const want = [...jacobian.x.map((_, i) => jacobian.x.map((_, j) => (i === j ? 1 : 0))), ...jacobian.x.map((xi, i) => jacobian.x.map((_, j) => (i === j ? Math.exp(xi) : 0)))];
  assert.deepStrictEqual(jacobian.compiled, jacobian.eager, 'compiled Jacobian vs eager, bit for bit');
  jacobian.eager.forEach((row, i) => row.forEach((e, j) => assert.ok(rel(e, want[i][j]) < 1e-15, `J[${i}][${j}] = ${e}, want ${want[i][j]}`)));
}

/** The same Hessian as another build (Node's own), to 1e-10. */
export function checkHigherAgainst(report, reference) {
  const [H, R] = [report.higher.hessian.eager.hessian, reference.higher.hessian.eager.hessian];
  H.forEach((row, i) => row.forEach((e, j) => assert.ok(rel(e, R[i][j]) < 1e-10, `H[${i}][${j}] = ${e} vs ${R[i][j]}`)));
}

