// Runs every example in examples/ at its small size, in a child process, and
// checks that it exits cleanly and that its output makes sense.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

/** Run examples/<name> with --small; returns its stdout after asserting exit 0. */
function runExample(name) {
  const r = spawnSync(process.execPath, [`examples/${name}`, '--small'], {
    cwd: root,
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.equal(r.error, undefined, `${name} could not run: ${r.error}`);
  assert.equal(r.status, 0, `${name} exited with ${r.status ?? r.signal}\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/** The number after `label` in the output. */
function numberAfter(out, label) {
  const m = out.match(new RegExp(`${label}\\s*(-?[0-9.]+(?:e[-+]?[0-9]+)?)`));
  assert.ok(m, `no "${label}" in the output:\n${out}`);
  return Number(m[1]);
}

test('gp.mjs (npm run demo): gradient agrees with central differences, compile is bit-identical', () => {
  const out = runExample('gp.mjs');
  assert.ok(numberAfter(out, 'largest difference from central differences:') < 1e-5, out);
  assert.match(out, /bit for bit: yes/);
  // Three hyperparameter settings printed, each with a finite value.
  const rows = out.split('\n').filter((l) => /^\s*\d+\.\d{4}\s+\d+\.\d{4}\s+-?\d/.test(l));
  assert.equal(rows.length, 3, out);
});

test('gp-fit.mjs: gradient ascent increases the log marginal likelihood', () => {
  const out = runExample('gp-fit.mjs');
  const m = out.match(/log likelihood: (-?[0-9.]+) -> (-?[0-9.]+)/);
  assert.ok(m, out);
  const [before, after] = [Number(m[1]), Number(m[2])];
  assert.ok(after > before + 1, `no clear increase: ${before} -> ${after}`);
  const l = numberAfter(out, 'fitted l =');
  assert.ok(l > 0.2 && l < 10, `fitted length scale ${l}`);
});

test('hmc.mjs: acceptance rate in (0.3, 1) and a sensible posterior', () => {
  const out = runExample('hmc.mjs');
  const rate = numberAfter(out, 'acceptance rate:');
  assert.ok(rate > 0.3 && rate < 1, `acceptance rate ${rate}`);
  const sigma = Math.exp(numberAfter(out, 'log sigma'));
  assert.ok(sigma > 0.55 && sigma < 0.85, `exp of the posterior mean of log sigma ${sigma} (simulated with 0.7)`);
  const intercept = numberAfter(out, 'intercept');
  assert.ok(Math.abs(intercept - 1) < 0.2, `posterior mean of the intercept ${intercept} (simulated with 1)`);
});

test('workers.mjs: plans rebuilt in worker_threads give bit-identical results', () => {
  const out = runExample('workers.mjs');
  assert.match(out, /bit-identical to the main thread: yes/);
  assert.match(out, /36 evaluations in 2 workers/);
});

test('nuts.mjs: eager and compiled chains agree bit for bit, and the posterior is the eight schools\'', () => {
  const out = runExample('nuts.mjs');
  assert.match(out, /same draws both ways: yes/);
  // Published posterior means (Gelman et al., BDA3 §5.5): mu about 4.4, tau about 3.6.
  const mu = numberAfter(out, 'posterior mean of mu');
  assert.ok(mu > 2.5 && mu < 6.5, `posterior mean of mu ${mu}`);
  const tau = numberAfter(out, 'posterior mean of tau');
  assert.ok(tau > 1.5 && tau < 6, `posterior mean of tau ${tau}`);
});

test('sem-se.mjs: Newton converges, and the two informations and their finite differences agree', () => {
  const out = runExample('sem-se.mjs');
  assert.ok(numberAfter(out, 'largest \\|gradient\\|') < 1e-8, `Newton did not converge:\n${out}`);
  // Expected and observed information differ by O(1/√N) at the MLE: a few percent at N = 500.
  const se = numberAfter(out, 'largest SE difference, expected vs observed information:');
  assert.ok(se > 0 && se < 0.05, `SEs from the two informations differ by ${se}`);
  assert.ok(numberAfter(out, 'exact Jacobian vs central differences:') < 1e-5, out);
  assert.ok(numberAfter(out, 'exact Hessian vs central differences:') < 1e-5, out);
  assert.ok(numberAfter(out, 'largest \\|estimate - true\\| / SE:') < 4, out);
  // One row per parameter: name, true value, estimate, then an SE from each information.
  const rows = out.split('\n').filter((l) => /^(lambda|phi|psi)\d*\s+-?\d+\.\d{4}\s+-?\d+\.\d{4}\s+± \d+\.\d{4}\s+± \d+\.\d{4}$/.test(l));
  assert.equal(rows.length, 13, out);
  for (const row of rows) {
    const [seExpected, seObserved] = [...row.matchAll(/± (\d+\.\d{4})/g)].map((m) => Number(m[1]));
    assert.ok(seExpected > 0.01 && seExpected < 0.2 && seObserved > 0.01 && seObserved < 0.2, row);
  }
});

test('newton-ode.mjs: Newton with the exact Jacobian reaches the steady state, and the Jacobians agree', () => {
  const out = runExample('newton-ode.mjs');
  const exactIters = numberAfter(out, 'exact Jacobian:');
  const fdIters = numberAfter(out, 'finite-difference Jacobian:');
  assert.ok(exactIters >= 1 && exactIters <= 12, `exact Newton took ${exactIters} iterations`);
  assert.ok(fdIters >= 1 && fdIters <= 15, `finite-difference Newton took ${fdIters} iterations`);
  assert.ok(numberAfter(out, 'residual after exact Newton:') < 1e-9, out);
  assert.ok(numberAfter(out, 'residual after finite-difference Newton:') < 1e-9, out);
  assert.ok(numberAfter(out, 'largest difference between the two solutions:') < 1e-9, out);
  // At the start point and at the steady state: compiled = eager (bit for bit in principle),
  // = forward mode column by column (to rounding), = forward differences (to ~1e-8).
  const fdDiffs = [...out.matchAll(/exact vs forward-difference Jacobian at [^:]+: (\S+)/g)].map((m) => Number(m[1]));
  assert.equal(fdDiffs.length, 2, out);
  for (const d of fdDiffs) assert.ok(d < 1e-5, `exact vs forward differences: ${d}\n${out}`);
  const modes = [...out.matchAll(/vs eager jacobian\(rhs\) (\S+), vs columns of f\.jvp (\S+)/g)];
  assert.equal(modes.length, 2, out);
  for (const [, eager, fwd] of modes) {
    assert.ok(Number(eager) < 1e-9 && Number(fwd) < 1e-9, `compiled jacobian against eager ${eager}, against jvp ${fwd}`);
  }
  // The steady state is the upper (ignited) branch, not u = 0.
  const top = numberAfter(out, 'max u =');
  assert.ok(top > 0.9 && top < 1.1, `max u = ${top}`);
});

test('laplace.mjs: Newton reaches the mode at every length scale, and the Hessian agrees with its closed form', () => {
  const out = runExample('laplace.mjs');
  // One row per length scale of the grid: l, Newton steps, |∇Ψ| at the mode, a finite log evidence.
  const rows = out.split('\n').filter((l) => /^\s+\d+\.\d{2}\s+\d+\s+\S+\s+-\d+\.\d{4}$/.test(l));
  assert.equal(rows.length, 5, out);
  for (const row of rows) {
    const [, steps, grad] = row.trim().split(/\s+/).map(Number);
    assert.ok(steps >= 1 && steps <= 20 && grad < 1e-8, `Newton did not converge: ${row}`);
  }
  // Ψ is concave and K is well conditioned (jitter 1e-3): the closed form is good to ~1e-12.
  assert.ok(numberAfter(out, 'closed form −K⁻¹ − diag\\(π\\(1 − π\\)\\):') < 1e-10, out);
  assert.ok(numberAfter(out, 'central differences of the gradient:') < 1e-6, out);
  assert.ok(numberAfter(out, 'hvp vs hessian·v:') < 1e-12, out);
  // The chosen length scale is the grid's highest evidence.
  const best = rows.map((r) => r.trim().split(/\s+/).map(Number)).reduce((a, b) => (b[3] > a[3] ? b : a));
  assert.equal(numberAfter(out, 'chosen length scale:'), best[0], out);
});
