// Newton's method for the steady state of a stiff reaction-diffusion problem,
// f(u) = D·Δₕu + k·u²(1 − u) + s = 0 on (0, 1) with u = 0 at both ends, on n
// interior points (Δₕ = tridiag(1, −2, 1)/h², a constant matrix). The Newton
// Jacobian comes either exactly from the package (compile(f).jacobian; f maps
// n values to n, so it takes forward mode, and since the Jacobian is
// tridiagonal, three directions: columns no row shares go together) or from
// forward differences (n + 1 evaluations of compile(f).value). The linear systems are
// solved in plain JavaScript (dense LU with partial pivoting).
//
//   node examples/newton-ode.mjs            n = 100 interior points
//   node examples/newton-ode.mjs --small    n = 30 (also EXAMPLE_SIZE=small)

import { add, compile, jacobian, matmul, mul, square, sub } from '../index.js';

const small = process.argv.includes('--small') || process.env.EXAMPLE_SIZE === 'small';
const n = small ? 30 : 100;
const h = 1 / (n + 1);
const D = 0.05; // diffusion: D/h² up to ~500, against reaction rates of order k
const k = 20; // autocatalytic reaction k·u²(1 − u), pushes u towards 1
const s = 0.5; // a constant source, so the steady state is not u = 0

// Δₕ, dense, captured as a constant of the plan.
const DL = Array.from({ length: n }, (_, i) => Array.from({ length: n }, (_, j) => (i === j ? -2 : Math.abs(i - j) === 1 ? 1 : 0) / (h * h)));

const rhs = (u) => add(mul(D, matmul(DL, u)), mul(k, mul(square(u), sub(1, u))), s);
const f = compile(rhs);

// ---------------------------------------------------------------- plain-JS linear algebra

/** Solve A x = b by LU with partial pivoting (A and b are not modified). */
function luSolve(A, b) {
  const m = A.length;
  const M = A.map((row) => Float64Array.from(row));
  const x = Float64Array.from(b);
  for (let c = 0; c < m; c++) {
    let piv = c;
    for (let r = c + 1; r < m; r++) if (Math.abs(M[r][c]) > Math.abs(M[piv][c])) piv = r;
    if (M[piv][c] === 0) throw new Error('luSolve: singular matrix');
    if (piv !== c) {
      [M[c], M[piv]] = [M[piv], M[c]];
      [x[c], x[piv]] = [x[piv], x[c]];
    }
    const rowC = M[c];
    for (let r = c + 1; r < m; r++) {
      const l = M[r][c] / rowC[c];
      if (l === 0) continue;
      const row = M[r];
      for (let j = c; j < m; j++) row[j] -= l * rowC[j];
      x[r] -= l * x[c];
    }
  }
  for (let r = m - 1; r >= 0; r--) {
    let acc = x[r];
    for (let j = r + 1; j < m; j++) acc -= M[r][j] * x[j];
    x[r] = acc / M[r][r];
  }
  return Array.from(x);
}

const norm = (v) => v.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
/** Largest entrywise difference of two matrices (arrays of rows). */
const maxDiff = (A, B) => Math.max(...A.map((row, i) => norm(row.map((x, j) => x - B[i][j]))));

/** Forward differences: column j is (f(u + δⱼeⱼ) − f(u))/δⱼ, n + 1 evaluations of f.value. */
function fdJacobian(u, fu = f.value(u)) {
  const J = Array.from({ length: n }, () => new Array(n));
  for (let j = 0; j < n; j++) {
    const delta = Math.sqrt(Number.EPSILON) * Math.max(1, Math.abs(u[j]));
    const up = u.slice();
    up[j] += delta;
    const fj = f.value(up);
    for (let i = 0; i < n; i++) J[i][j] = (fj[i] - fu[i]) / delta;
  }
  return J;
}

/** Newton from u0 with the Jacobian from `jac(u, fu)`, to ‖f‖∞ < tol or maxIter steps. */
function newton(u0, jac, { tol = 1e-10, maxIter = 30 } = {}) {
  const t0 = performance.now();
  let u = u0.slice();
  let fu = f.value(u);
  const history = [norm(fu)];
  let best = { residual: history[0], u };
  let it = 0;
  while (it < maxIter && history[history.length - 1] >= tol) {
    const step = luSolve(jac(u, fu), fu);
    u = u.map((x, i) => x - step[i]);
    fu = f.value(u);
    it++;
    history.push(norm(fu));
    if (!(history[it] >= best.residual)) best = { residual: history[it], u };
  }
  return { iterations: it, residual: best.residual, u: best.u, history, ms: performance.now() - t0 };
}

// ---------------------------------------------------------------- run

const u0 = new Array(n).fill(0);
console.log(`steady state of D·u'' + k·u²(1-u) + s = 0, u(0) = u(1) = 0; D = ${D}, k = ${k}, s = ${s}, n = ${n}`);
console.log(`stiffness: diffusion eigenvalues down to ${(-4 * D / (h * h)).toFixed(0)}, reaction rates of order ${k}\n`);

/** Compare the Jacobian at u four ways; returns the exact-vs-FD difference relative to max |J|. */
function compareJacobians(u, where) {
  const Jc = f.jacobian(u);
  const Je = jacobian(rhs)(u);
  const Jfd = fdJacobian(u);
  // Forward mode, by hand: column j is the tangent of f along eⱼ (f.jvp).
  const Jf = Array.from({ length: n }, () => new Array(n));
  for (let j = 0; j < n; j++) {
    const e = new Array(n).fill(0);
    e[j] = 1;
    f.jvp(u, e).tangent.forEach((t, i) => (Jf[i][j] = t));
  }
  const rel = maxDiff(Jc, Jfd) / norm(Jfd.map(norm));
  console.log(`Jacobian at ${where}: compile(f).jacobian vs eager jacobian(rhs) ${maxDiff(Jc, Je).toExponential(2)}, vs columns of f.jvp ${maxDiff(Jc, Jf).toExponential(2)}`);
  console.log(`largest difference, exact vs forward-difference Jacobian at ${where} (relative to max |J|): ${rel.toExponential(2)}`);
  return rel;
}

// Each solve runs `reps` times (the first also warms up the plans); times are medians.
const reps = small ? 3 : 5;
/** `fn()`'s last result, its `ms` replaced by the median over `reps` runs. */
function timed(fn) {
  const runs = [];
  for (let r = 0; r < reps; r++) runs.push(fn());
  const ms = runs.map((r) => r.ms).sort((a, b) => a - b)[reps >> 1];
  return { ...runs[reps - 1], ms };
}
/** Median time of `fn()` in ms over `reps` runs. */
function medianMs(fn) {
  return timed(() => {
    const t0 = performance.now();
    fn();
    return { ms: performance.now() - t0 };
  }).ms;
}

const exact = timed(() => newton(u0, (u) => f.jacobian(u)));
const fd = timed(() => newton(u0, (u, fu) => fdJacobian(u, fu)));
const fmt = (r) => r.history.map((x) => x.toExponential(1)).join(' ');
console.log(`exact Jacobian: ${exact.iterations} iterations, ${exact.ms.toFixed(1)} ms (median of ${reps} solves)`);
console.log(`  ‖f‖∞ by iteration: ${fmt(exact)}`);
console.log(`finite-difference Jacobian: ${fd.iterations} iterations, ${fd.ms.toFixed(1)} ms (median of ${reps} solves)`);
console.log(`  ‖f‖∞ by iteration: ${fmt(fd)}`);
console.log(`residual after exact Newton: ${exact.residual.toExponential(2)}`);
console.log(`residual after finite-difference Newton: ${fd.residual.toExponential(2)}`);
console.log(`largest difference between the two solutions: ${maxDiff([exact.u], [fd.u]).toExponential(2)}`);
console.log(`steady state: max u = ${norm(exact.u).toFixed(6)}, min u = ${Math.min(...exact.u).toFixed(6)}`);
console.log(`one Jacobian: exact ${medianMs(() => f.jacobian(exact.u)).toFixed(2)} ms, forward differences ${medianMs(() => fdJacobian(exact.u)).toFixed(2)} ms\n`);

console.log(`compile(f).jacobian takes forward mode here (as many outputs as inputs), three directions for the ${n} columns: the Jacobian is tridiagonal.`);
const jacStart = compareJacobians(u0, 'the start point');
const jacEnd = compareJacobians(exact.u, 'the steady state');

if (!(exact.residual < 1e-9) || !(jacStart < 1e-5) || !(jacEnd < 1e-5)) process.exit(1);
