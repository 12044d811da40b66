// A Laplace approximation: Gaussian-process binary classification with a
// logistic likelihood. The latent values f at the n training inputs have the
// prior N(0, K); each label yᵢ ∈ {0, 1} is Bernoulli(σ(fᵢ)). The posterior of f
// has no closed form, so it is approximated by a Gaussian at its mode f̂, with
// covariance (−H)⁻¹, H the Hessian of
//
//   Ψ(f) = log p(y | f) − ½ fᵀK⁻¹f = Σ yᵢfᵢ − log(1 + e^fᵢ) − ½ fᵀK⁻¹f.
//
// The package gives Ψ's exact Hessian (compile(Ψ).hessian, K passed as an
// input, so a new kernel replays without tracing again), Newton's method finds
// f̂, and the Laplace estimate of the log evidence,
//
//   log p(y) ≈ Ψ(f̂) − ½ log|K| − ½ log|−H|,
//
// picks the kernel's length scale from a grid. The Hessian is checked against
// its closed form, −K⁻¹ − diag(πᵢ(1 − πᵢ)) with πᵢ = σ(f̂ᵢ), and against central
// differences of the gradient, which cost 2n gradient calls.
//
//   node examples/laplace.mjs            n = 60 labelled points
//   node examples/laplace.mjs --small    n = 40 (also EXAMPLE_SIZE=small)

import { add, compile, dot, exp, log, maximum, mul, neg, solvePSD, sub, sum } from '../index.js';

const small = process.argv.includes('--small') || process.env.EXAMPLE_SIZE === 'small';
const n = small ? 40 : 60;
const runs = small ? 5 : 21;

// ---------------------------------------------------------------- data

/** A small linear congruential generator, so every run sees the same data. */
function lcg(seed) {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}
const rand = lcg(7);
const xs = Array.from({ length: n }, () => -3 + 6 * rand()).sort((a, b) => a - b);
const latent = (x) => 2.5 * Math.sin(1.3 * x); // the true latent function
const y = xs.map((x) => (rand() < 1 / (1 + Math.exp(-latent(x))) ? 1 : 0));

/** The squared-exponential kernel at length scale `l`, variance `v`; the jitter 1e-3 keeps K's condition number near 1e5. */
const kernel = (l, v = 4) => xs.map((a, i) => xs.map((b, j) => v * Math.exp(-((a - b) ** 2) / (2 * l * l)) + (i === j ? 1e-3 : 0)));

// ---------------------------------------------------------------- the objective

/** log(1 + e^f), stably: max(f, 0) + log(1 + e^−|f|), finite where e^f overflows. */
const softplus = (f) => add(maximum(f, 0), log(add(1, exp(neg(maximum(f, neg(f)))))));

/** Ψ(f) for labels y and prior covariance K (an input: no gradient is taken with respect to it). */
const psi = (f, { K }) => sub(sub(dot(y, f), sum(softplus(f))), mul(0.5, dot(f, solvePSD(K, f))));
const Psi = compile(psi);

// ---------------------------------------------------------------- plain-JS linear algebra

/** Lower Cholesky factor of an SPD matrix. */
function cholesky(A) {
  const m = A.length;
  const L = Array.from({ length: m }, () => new Array(m).fill(0));
  for (let i = 0; i < m; i++) {
    for (let j = 0; j <= i; j++) {
      let s = A[i][j];
      for (let k = 0; k < j; k++) s -= L[i][k] * L[j][k];
      if (i === j) {
        if (!(s > 0)) throw new Error('cholesky: not positive definite');
        L[i][i] = Math.sqrt(s);
      } else L[i][j] = s / L[j][j];
    }
  }
  return L;
}
const logdet = (L) => 2 * L.reduce((s, row, i) => s + Math.log(row[i]), 0);
/** Solve (L Lᵀ) x = b. */
function cholSolve(L, b) {
  const m = b.length;
  const z = new Array(m);
  for (let i = 0; i < m; i++) {
    let s = b[i];
    for (let k = 0; k < i; k++) s -= L[i][k] * z[k];
    z[i] = s / L[i][i];
  }
  const x = new Array(m);
  for (let i = m - 1; i >= 0; i--) {
    let s = z[i];
    for (let k = i + 1; k < m; k++) s -= L[k][i] * x[k];
    x[i] = s / L[i][i];
  }
  return x;
}
const inverse = (L) => L.map((_, j) => cholSolve(L, L.map((__, i) => (i === j ? 1 : 0))));
const negate = (H) => H.map((row) => row.map((h) => -h));
const maxAbs = (v) => v.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
/** Largest entrywise difference of two matrices, relative to the largest entry of the second. */
const relDiff = (A, B) => Math.max(...A.map((row, i) => maxAbs(row.map((x, j) => x - B[i][j])))) / maxAbs(B.flat());
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
/** Median time of `fn()` in ms over `runs` runs, after one warm-up. */
function time(fn) {
  fn();
  const ts = [];
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    fn();
    ts.push(performance.now() - t0);
  }
  return median(ts);
}

// ---------------------------------------------------------------- Newton to the mode

/** The mode f̂ of Ψ for kernel K by Newton's method on the exact Hessian (−H is SPD: Ψ is concave). */
function mode(K) {
  let f = new Array(n).fill(0);
  for (let step = 1; step <= 50; step++) {
    const { value, gradient, hessian } = Psi.hessian(f, { K });
    const d = cholSolve(cholesky(negate(hessian)), gradient); // −H d = ∇Ψ
    let t = 1; // halve the step until Ψ rises (a full step nearly always does)
    let next = f.map((fi, i) => fi + d[i]);
    while (Psi.value(next, { K }) < value && t > 1e-8) {
      t /= 2;
      next = f.map((fi, i) => fi + t * d[i]);
    }
    f = next;
    if (maxAbs(d) * t < 1e-10) return { f, steps: step };
  }
  return { f, steps: 50 };
}

/** The Laplace estimate of log p(y) at kernel K, and what it is made of. */
function laplace(K) {
  const { f, steps } = mode(K);
  const { value, gradient, hessian } = Psi.hessian(f, { K });
  const negH = negate(hessian);
  const evidence = value - 0.5 * logdet(cholesky(K)) - 0.5 * logdet(cholesky(negH));
  return { f, steps, value, gradient, hessian, negH, evidence };
}

// ---------------------------------------------------------------- the length scale, by the evidence

console.log(`GP classification, logistic likelihood, n = ${n} labelled points (${y.filter((v) => v === 1).length} ones)\n`);
console.log('length scale  Newton steps  largest |∇Ψ| at the mode  Laplace log evidence');
const grid = [0.25, 0.5, 1, 2, 4];
let best = null;
for (const l of grid) {
  const K = kernel(l);
  const r = laplace(K);
  console.log(`${l.toFixed(2).padStart(12)}  ${String(r.steps).padStart(12)}  ${maxAbs(r.gradient).toExponential(2).padStart(24)}  ${r.evidence.toFixed(4).padStart(20)}`);
  if (best === null || r.evidence > best.evidence) best = { ...r, l, K };
}
console.log(`\nchosen length scale: ${best.l}, the highest evidence on the grid`);
console.log(`largest |gradient| at the chosen mode: ${maxAbs(best.gradient).toExponential(2)}`);

// ---------------------------------------------------------------- the Hessian, checked two ways

const { f, K, hessian } = best;
const pi = f.map((fi) => 1 / (1 + Math.exp(-fi)));
const Kinv = inverse(cholesky(K));
const closed = Kinv.map((row, i) => row.map((k, j) => -k - (i === j ? pi[i] * (1 - pi[i]) : 0)));
console.log(`exact Hessian vs closed form −K⁻¹ − diag(π(1 − π)): ${relDiff(hessian, closed).toExponential(2)}`);

/** Central differences of the compiled gradient: column j from f ± h·eⱼ. */
function differences(f) {
  const H = Array.from({ length: n }, () => new Array(n));
  const g = new Float64Array(n);
  const at = f.slice();
  for (let j = 0; j < n; j++) {
    const h = 1e-5 * Math.max(1, Math.abs(f[j]));
    at[j] = f[j] + h;
    const plus = Psi(at, { K }).gradient;
    at[j] = f[j] - h;
    const minus = Psi(at, { K }).gradient;
    at[j] = f[j];
    for (let i = 0; i < n; i++) g[i] = (plus[i] - minus[i]) / (2 * h);
    for (let i = 0; i < n; i++) H[i][j] = g[i];
  }
  return H;
}
console.log(`exact Hessian vs central differences of the gradient: ${relDiff(hessian, differences(f)).toExponential(2)}`);

// H·v without the matrix, as a Newton–CG or trust-region method would use it.
const v = f.map((_, i) => Math.cos(i));
const hv = Psi.hvp(f, v, { K }).hvp;
const Hv = hessian.map((row) => row.reduce((s, h, j) => s + h * v[j], 0));
console.log(`hvp vs hessian·v: ${(maxAbs(hv.map((x, i) => x - Hv[i])) / maxAbs(Hv)).toExponential(2)}`);

const tExact = time(() => Psi.hessian(f, { K }));
const tDiff = time(() => differences(f));
console.log(`  time: exact ${tExact.toFixed(3)} ms, central differences (${2 * n} gradient calls, compiled) ${tDiff.toFixed(3)} ms`);

// ---------------------------------------------------------------- the approximate posterior

const cov = inverse(cholesky(best.negH)); // (K⁻¹ + W)⁻¹
console.log('\n     x   true latent   posterior mean ± sd (Laplace)');
for (const i of [0, n >> 2, n >> 1, (3 * n) >> 2, n - 1]) {
  console.log(`${xs[i].toFixed(2).padStart(6)}  ${latent(xs[i]).toFixed(3).padStart(12)}   ${f[i].toFixed(3).padStart(8)} ± ${Math.sqrt(cov[i][i]).toFixed(3)}`);
}
