// Standard errors for a structural equation model, two ways. A confirmatory
// factor analysis (2 correlated factors, 6 indicators, 3 per factor) is fitted
// by maximum likelihood with Newton's method on the exact Hessian of the ML
// discrepancy F(θ) = log|Σ| + tr(SΣ⁻¹) − log|S| − p, where
// Σ(θ) = ΛΦΛᵀ + Ψ. Then the standard errors come from
//   (a) the expected information (N/2)·Jᵀ(Σ⁻¹⊗Σ⁻¹)J, J the exact forward-mode
//       Jacobian of vec Σ(θ) (compile(...).jacobian), and
//   (b) the observed information, the exact Hessian of (N/2)·F
//       (compile(F).hessian),
// each checked against central differences (of Σ, and of the gradient of F)
// and timed against them.
//
//   node examples/sem-se.mjs            N = 500, 21 timing runs
//   node examples/sem-se.mjs --small    N = 500, 5 timing runs (also EXAMPLE_SIZE=small)

import { addDiag, add, compile, exp, inv, logdetPSD, matmul, mul, reshape, slice, solvePSD, sub, trace, transpose, valueAndGrad } from '../index.js';

const small = process.argv.includes('--small') || process.env.EXAMPLE_SIZE === 'small';
const runs = small ? 5 : 21;
const N = 500;
const p = 6;

// θ = [λ1..λ6, φ, log ψ1..log ψ6]: factor variances fixed to 1, λ the loadings
// (indicators 1-3 on factor 1, 4-6 on factor 2), φ the factor correlation, ψ
// the residual variances (on the log scale, so they stay positive).
const names = ['lambda1', 'lambda2', 'lambda3', 'lambda4', 'lambda5', 'lambda6', 'phi', 'psi1', 'psi2', 'psi3', 'psi4', 'psi5', 'psi6'];
const q = names.length;
const trueLambda = [0.8, 0.7, 0.6, 0.9, 0.75, 0.65];
const truePhi = 0.4;
const truePsi = trueLambda.map((l) => 1 - l * l); // indicators of unit variance
const trueTheta = [...trueLambda, truePhi, ...truePsi.map(Math.log)];

// ---------------------------------------------------------------- data

let seed = 2024;
const rand = () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) + 0.5) / 4294967296;
const normal = () => Math.sqrt(-2 * Math.log(rand())) * Math.cos(2 * Math.PI * rand());

const X = [];
for (let r = 0; r < N; r++) {
  const z1 = normal();
  const eta = [z1, truePhi * z1 + Math.sqrt(1 - truePhi * truePhi) * normal()];
  X.push(trueLambda.map((l, i) => l * eta[i < 3 ? 0 : 1] + Math.sqrt(truePsi[i]) * normal()));
}
const means = Array.from({ length: p }, (_, j) => X.reduce((s, x) => s + x[j], 0) / N);
// The ML sample covariance (divisor N).
const S = Array.from({ length: p }, (_, a) =>
  Array.from({ length: p }, (_, b) => X.reduce((s, x) => s + (x[a] - means[a]) * (x[b] - means[b]), 0) / N));
const logdetS = logdetPSD(S).data[0];

// ---------------------------------------------------------------- model

// vec(Λ) (row-major, 6×2) = E·λ, E a constant 0/1 selection matrix.
const E = Array.from({ length: 2 * p }, (_, r) => Array.from({ length: p }, (_, i) => (r === 2 * i + (i < 3 ? 0 : 1) ? 1 : 0)));
const SWAP = [[0, 1], [1, 0]];
const I2 = [[1, 0], [0, 1]];

/** Σ(θ) = ΛΦΛᵀ + Ψ, a 6×6 Var. */
function sigma(theta) {
  const Lambda = reshape(matmul(E, slice(theta, [0], [p])), [p, 2]);
  const Phi = add(I2, mul(reshape(slice(theta, [p], [1]), []), SWAP));
  const psi = exp(slice(theta, [p + 1], [p]));
  return addDiag(matmul(matmul(Lambda, Phi), transpose(Lambda)), psi);
}

/** The ML discrepancy F(θ); the log likelihood is −(N/2)·F plus a constant. */
function discrepancy(theta) {
  const Sig = sigma(theta);
  return sub(add(logdetPSD(Sig), trace(solvePSD(Sig, S))), logdetS + p);
}

const F = compile(discrepancy);
const sigmaFlat = compile((theta) => reshape(sigma(theta), [p * p]));
const sigmaInverse = compile((theta) => inv(sigma(theta)));
const vg = valueAndGrad(discrepancy);

// ---------------------------------------------------------------- plain-JS linear algebra

/** Inverse of a small dense matrix (Gauss-Jordan, partial pivoting). */
function invert(A) {
  const n = A.length;
  const M = A.map((row, i) => [...row, ...Array.from({ length: n }, (_, j) => (i === j ? 1 : 0))]);
  for (let c = 0; c < n; c++) {
    let piv = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(M[r][c]) > Math.abs(M[piv][c])) piv = r;
    if (M[piv][c] === 0) throw new Error('invert: singular matrix');
    [M[c], M[piv]] = [M[piv], M[c]];
    const d = M[c][c];
    for (let k = 0; k < 2 * n; k++) M[c][k] /= d;
    for (let r = 0; r < n; r++) {
      if (r === c || M[r][c] === 0) continue;
      const f = M[r][c];
      for (let k = 0; k < 2 * n; k++) M[r][k] -= f * M[c][k];
    }
  }
  return M.map((row) => row.slice(n));
}

/** Solve (H + μI) d = b for SPD H + μI by Cholesky; null if it is not positive definite. */
function cholSolve(H, b, mu) {
  const n = b.length;
  const L = Array.from({ length: n }, () => new Array(n).fill(0));
  for (let i = 0; i < n; i++) {
    for (let j = 0; j <= i; j++) {
      let s = H[i][j] + (i === j ? mu : 0);
      for (let k = 0; k < j; k++) s -= L[i][k] * L[j][k];
      if (i === j) {
        if (!(s > 0)) return null;
        L[i][i] = Math.sqrt(s);
      } else L[i][j] = s / L[j][j];
    }
  }
  const y = new Array(n);
  for (let i = 0; i < n; i++) {
    let s = b[i];
    for (let k = 0; k < i; k++) s -= L[i][k] * y[k];
    y[i] = s / L[i][i];
  }
  const x = new Array(n);
  for (let i = n - 1; i >= 0; i--) {
    let s = y[i];
    for (let k = i + 1; k < n; k++) s -= L[k][i] * x[k];
    x[i] = s / L[i][i];
  }
  return x;
}

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

// ---------------------------------------------------------------- fit

// Start: λ = √(½ s_ii), φ = 0, ψ = ½ s_ii.
let theta = [...S.map((r, i) => Math.sqrt(0.5 * r[i])), 0, ...S.map((r, i) => Math.log(0.5 * r[i]))];
let fit = F.hessian(theta);
const F0 = fit.value;
let steps = 0;
for (; steps < 50 && maxAbs(fit.gradient) > 1e-10; steps++) {
  // Newton step on the Hessian, damped (Levenberg) where it is not positive definite.
  const minusG = fit.gradient.map((g) => -g);
  let d = null;
  for (let mu = 0; d === null; mu = mu === 0 ? 1e-6 : 10 * mu) d = cholSolve(fit.hessian, minusG, mu);
  // Step halving: accept the first step that lowers F (and keeps Σ positive definite).
  let t = 1;
  let next = null;
  for (; t > 1e-10; t /= 2) {
    const trial = theta.map((x, i) => x + t * d[i]);
    let v;
    try {
      v = F.value(trial);
    } catch {
      continue; // Σ not positive definite at the trial point
    }
    if (v <= fit.value) {
      next = trial;
      break;
    }
  }
  if (next === null) break;
  theta = next;
  fit = F.hessian(theta);
}
console.log(`CFA, 2 factors, ${p} indicators, N = ${N} simulated observations, ${q} parameters\n`);
console.log(`Newton on compile(F).hessian: F ${F0.toFixed(6)} -> ${fit.value.toFixed(8)} in ${steps} steps, largest |gradient| ${maxAbs(fit.gradient).toExponential(2)}`);
console.log(`chi-square (N·F) = ${(N * fit.value).toFixed(3)} on ${(p * (p + 1)) / 2 - q} degrees of freedom\n`);

// ---------------------------------------------------------------- information

/** (N/2)·tr(Σ⁻¹ ∂ᵢΣ Σ⁻¹ ∂ⱼΣ) from the columns of J = ∂vec Σ/∂θ. */
function expectedInformation(J, Sinv) {
  const A = [];
  for (let j = 0; j < q; j++) {
    const dS = Array.from({ length: p }, (_, a) => Array.from({ length: p }, (_, b) => J[a * p + b][j]));
    A.push(Sinv.map((row) => Array.from({ length: p }, (_, b) => row.reduce((s, x, k) => s + x * dS[k][b], 0))));
  }
  return Array.from({ length: q }, (_, i) => Array.from({ length: q }, (_, j) => {
    let s = 0;
    for (let a = 0; a < p; a++) for (let b = 0; b < p; b++) s += A[i][a][b] * A[j][b][a];
    return (N / 2) * s;
  }));
}

/** Central differences of vec Σ(θ), one column per parameter (2q evaluations). */
function fdJacobian(th, h = 1e-6) {
  const J = Array.from({ length: p * p }, () => new Array(q));
  for (let j = 0; j < q; j++) {
    const up = sigmaFlat.value(th.map((x, i) => (i === j ? x + h : x)));
    const down = sigmaFlat.value(th.map((x, i) => (i === j ? x - h : x)));
    for (let r = 0; r < p * p; r++) J[r][j] = (up[r] - down[r]) / (2 * h);
  }
  return J;
}

/** Central differences of ∇F (from `gradientOf`), symmetrized (2q gradient evaluations). */
function fdHessian(th, gradientOf, h = 1e-5) {
  const cols = [];
  for (let j = 0; j < q; j++) {
    const up = gradientOf(th.map((x, i) => (i === j ? x + h : x)));
    const down = gradientOf(th.map((x, i) => (i === j ? x - h : x)));
    cols.push(up.map((g, i) => (g - down[i]) / (2 * h)));
  }
  return Array.from({ length: q }, (_, i) => Array.from({ length: q }, (_, j) => 0.5 * (cols[j][i] + cols[i][j])));
}

const ses = (info) => invert(info).map((row, i) => Math.sqrt(row[i]));
const seRel = (a, b) => Math.max(...a.map((x, i) => Math.abs(x - b[i]) / b[i]));

const Sinv = sigmaInverse.value(theta);
const J = sigmaFlat.jacobian(theta);
const Jfd = fdJacobian(theta);
const H = F.hessian(theta).hessian;
const Hfd = fdHessian(theta, (th) => vg(th).gradient);

const half = (M) => M.map((row) => row.map((x) => (N / 2) * x));
const seExpected = ses(expectedInformation(J, Sinv));
const seObserved = ses(half(H));
const seExpectedFD = ses(expectedInformation(Jfd, Sinv));
const seObservedFD = ses(half(Hfd));

// ---------------------------------------------------------------- report

const f = (x, w = 9, d = 4) => x.toFixed(d).padStart(w);
console.log('parameter       true  estimate  SE (expected)  SE (observed)');
for (let i = 0; i < q; i++) {
  // ψ on the variance scale, its SEs by the delta method: SE(ψ) = ψ·SE(log ψ).
  const isPsi = i > p;
  const scale = isPsi ? Math.exp(theta[i]) : 1;
  const est = isPsi ? Math.exp(theta[i]) : theta[i];
  const truth = isPsi ? Math.exp(trueTheta[i]) : trueTheta[i];
  console.log(`${names[i].padEnd(10)} ${f(truth)} ${f(est)}       ± ${(scale * seExpected[i]).toFixed(4)}       ± ${(scale * seObserved[i]).toFixed(4)}`);
}
const zWorst = Math.max(...theta.map((x, i) => Math.abs(x - trueTheta[i]) / seExpected[i]));
console.log('(psi: residual variances, SEs by the delta method from the log scale)');
console.log(`\nlargest |estimate - true| / SE: ${zWorst.toFixed(2)}`);
console.log(`largest SE difference, expected vs observed information: ${seRel(seObserved, seExpected).toExponential(2)}`);

const tJ = time(() => sigmaFlat.jacobian(theta));
const tJfd = time(() => fdJacobian(theta));
const tH = time(() => F.hessian(theta));
const tHfd = time(() => fdHessian(theta, (th) => vg(th).gradient));
const tHfdc = time(() => fdHessian(theta, (th) => F(th).gradient));
console.log(`\n(a) Jacobian of vec Σ (${p * p}×${q}): sigmaFlat.jacobian takes forward mode (${q} parameters < ${p * p} outputs)`);
console.log(`exact Jacobian vs central differences: ${relDiff(J, Jfd).toExponential(2)} (SEs differ by ${seRel(seExpectedFD, seExpected).toExponential(2)})`);
console.log(`  time: exact ${tJ.toFixed(3)} ms, central differences (${2 * q} evaluations of sigmaFlat.value) ${tJfd.toFixed(3)} ms`);
console.log(`(b) Hessian of F (${q}×${q})`);
console.log(`exact Hessian vs central differences: ${relDiff(H, Hfd).toExponential(2)} (SEs differ by ${seRel(seObservedFD, seObserved).toExponential(2)})`);
console.log(`  time: exact ${tH.toFixed(3)} ms, central differences of the gradient (${2 * q} calls) ${tHfd.toFixed(3)} ms with valueAndGrad, ${tHfdc.toFixed(3)} ms compiled`);

const ok = maxAbs(fit.gradient) < 1e-8 && relDiff(J, Jfd) < 1e-6 && relDiff(H, Hfd) < 1e-6 && seRel(seObserved, seExpected) < 0.1;
if (!ok) process.exit(1);
