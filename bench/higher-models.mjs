// The workloads of shared/bench/higher.mjs (BENCH.md), kept here like models.mjs so a clone runs without ../shared.
// Workloads for second-order and forward-mode derivatives. Like models.mjs, each is a function of `G` (the grad
// module's exports) and its data come from models.mjs's fixed LCG. Next to each, a plain-JS exact reference.
//   gp50, gp200   Hessian of the GP log marginal likelihood w.r.t. {l, v}          (2×2)
//   regression    Hessian w.r.t. {intercept, beta[13], logSigma}                    (15×15)
//   rd30, rd100   Jacobian ∂f/∂u of a stiff reaction–diffusion right-hand side      (n×n)
//   mlp           Hessian-vector product w.r.t. all 321 parameters, fixed direction  (321)
// Flat order everywhere: a parameter map's keys in the order listed, each tensor row-major.
import { lcg, normal, regressionData, regression, regressionParams, gpData, gp, mlpSetup, mlp } from './models.mjs';

export { regressionData, regression, regressionParams, gpData, gp, mlpSetup, mlp };
export const HIGHER = ['gp50', 'gp200', 'regression', 'rd30', 'rd100', 'mlp'];

const zeros = (m, n) => Array.from({ length: m }, () => new Array(n).fill(0));

// ---- regression: 15×15 Hessian. With w = (intercept, beta), x̃ᵢ = (1, xᵢ), rᵢ = yᵢ − x̃ᵢ·w, σ = exp(logSigma):
//   ∂²/∂w∂w = −X̃ᵀX̃/σ²,  ∂²/∂w∂logSigma = −2 Σ rᵢx̃ᵢ/σ²,  ∂²/∂logSigma² = −2 Σ rᵢ²/σ².
export const regressionKeys = ['intercept', 'beta', 'logSigma'];
export const regressionFlat = (q) => [q.intercept, ...q.beta, q.logSigma];
export const regressionUnflat = (x) => ({ intercept: x[0], beta: x.slice(1, x.length - 1), logSigma: x[x.length - 1] });
export function regressionHessian(d, q) {
  const { X, y, n, p } = d; const s2 = Math.exp(2 * q.logSigma); const H = zeros(p + 2, p + 2); const ls = p + 1;
  for (let i = 0; i < n; i++) { const xt = [1, ...X[i]]; let r = y[i] - q.intercept; for (let j = 0; j < p; j++) r -= X[i][j] * q.beta[j];
    for (let a = 0; a <= p; a++) { for (let b = 0; b <= p; b++) H[a][b] -= (xt[a] * xt[b]) / s2; H[a][ls] -= (2 * r * xt[a]) / s2; }
    H[ls][ls] -= (2 * r * r) / s2; }
  for (let a = 0; a <= p; a++) H[ls][a] = H[a][ls];
  return H;
}

// ---- GP: 2×2 Hessian w.r.t. (l, v). K = v·E + 0.05 I, E = exp(−D2/(2l²)), α = K⁻¹y, L = −½yᵀα − ½log|K|:
//   ∂²L/∂θᵢ∂θⱼ = −(Kⱼα)ᵀK⁻¹(Kᵢα) + ½αᵀKᵢⱼα + ½tr(K⁻¹KⱼK⁻¹Kᵢ) − ½tr(K⁻¹Kᵢⱼ), with Kᵥ = E, Kₗ = vE∘D2/l³,
//   Kₗₗ = vE∘((D2/l³)² − 3D2/l⁴), Kₗᵥ = E∘D2/l³, Kᵥᵥ = 0.  Plain Cholesky, explicit inverse; fine to n = 200.
export const gpParams = () => ({ l: 1.3, v: 0.9 });
export const gpKeys = ['l', 'v'];
function spdInverse(K) { const n = K.length; const L = zeros(n, n);
  for (let j = 0; j < n; j++) { let s = K[j][j]; for (let k = 0; k < j; k++) s -= L[j][k] * L[j][k]; L[j][j] = Math.sqrt(s);
    for (let i = j + 1; i < n; i++) { let t = K[i][j]; for (let k = 0; k < j; k++) t -= L[i][k] * L[j][k]; L[i][j] = t / L[j][j]; } }
  const Li = zeros(n, n); // L⁻¹, lower
  for (let j = 0; j < n; j++) { Li[j][j] = 1 / L[j][j]; for (let i = j + 1; i < n; i++) { let s = 0; for (let k = j; k < i; k++) s -= L[i][k] * Li[k][j]; Li[i][j] = s / L[i][i]; } }
  const Ki = zeros(n, n); for (let i = 0; i < n; i++) for (let j = 0; j <= i; j++) { let s = 0; for (let k = i; k < n; k++) s += Li[k][i] * Li[k][j]; Ki[i][j] = Ki[j][i] = s; }
  let logdet = 0; for (let i = 0; i < n; i++) logdet += 2 * Math.log(L[i][i]);
  return { Ki, logdet };
}
const mv = (A, x) => A.map((r) => r.reduce((s, a, j) => s + a * x[j], 0));
const vdot = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);
const mm = (A, B) => { const n = A.length, k = B.length, m = B[0].length; const C = zeros(n, m);
  for (let i = 0; i < n; i++) for (let p = 0; p < k; p++) { const a = A[i][p]; if (a === 0) continue; for (let j = 0; j < m; j++) C[i][j] += a * B[p][j]; } return C; };
const trAB = (A, B) => { let s = 0; for (let i = 0; i < A.length; i++) for (let j = 0; j < A.length; j++) s += A[i][j] * B[j][i]; return s; };
export function gpExact(d, { l, v }) {
  const { D2, y, n } = d; const E = D2.map((r) => r.map((x) => Math.exp(-x / (2 * l * l))));
  const K = E.map((r, i) => r.map((e, j) => v * e + (i === j ? 0.05 : 0))); const { Ki, logdet } = spdInverse(K); const a = mv(Ki, y);
  const dK = [E.map((r, i) => r.map((e, j) => (v * e * D2[i][j]) / l ** 3)), E];
  const ddK = [[E.map((r, i) => r.map((e, j) => v * e * ((D2[i][j] / l ** 3) ** 2 - (3 * D2[i][j]) / l ** 4))), E.map((r, i) => r.map((e, j) => (e * D2[i][j]) / l ** 3))], [null, zeros(n, n)]];
  ddK[1][0] = ddK[0][1];
  const b = dK.map((Kd) => mv(Kd, a)), c = b.map((bi) => mv(Ki, bi)), M = dK.map((Kd) => mm(Ki, Kd));
  const H = [[0, 0], [0, 0]];
  for (let i = 0; i < 2; i++) for (let j = 0; j < 2; j++)
    H[i][j] = -vdot(b[j], c[i]) + 0.5 * vdot(a, mv(ddK[i][j], a)) + 0.5 * trAB(M[j], M[i]) - 0.5 * trAB(Ki, ddK[i][j]);
  const gradient = dK.map((Kd, i) => 0.5 * vdot(a, b[i]) - 0.5 * trAB(Ki, Kd));
  return { value: -0.5 * vdot(y, a) - 0.5 * logdet, gradient, hessian: H };
}

// ---- reaction–diffusion: f(u) = D·Δₕu + k·u²(1−u) on n interior points of [0, 1], u = 0 at both ends, h = 1/(n+1).
// Stiff: Δₕ's eigenvalues reach −4D/h² (−3.8e3 at n = 30, −4.1e4 at n = 100) against a reaction rate of order k.
// ∂f/∂u = (D/h²)·tridiag(1, −2, 1) + diag(k(2u − 3u²)), exactly.
export function rdData(n = 30, { D = 1, k = 20 } = {}) {
  const h = 1 / (n + 1), c = D / (h * h); const r = lcg(29);
  const x = Array.from({ length: n }, (_, i) => (i + 1) * h);
  const u = x.map((xi) => 1 / (1 + Math.exp((xi - 0.5) / 0.1)) + 0.05 * normal(r)); // a front, slightly rough
  const DL = Array.from({ length: n }, (_, i) => Array.from({ length: n }, (_, j) => (i === j ? -2 * c : Math.abs(i - j) === 1 ? c : 0)));
  return { n, D, k, h, c, DL, u };
}
export function rd(G, d) { const { add, matmul, mul, square, sub } = G;
  return (u) => add(matmul(d.DL, u), mul(d.k, square(u), sub(1, u))); }
export function rdValue(d, u) { const { n, c, k } = d;
  return u.map((ui, i) => c * ((i > 0 ? u[i - 1] : 0) - 2 * ui + (i < n - 1 ? u[i + 1] : 0)) + k * ui * ui * (1 - ui)); }
export function rdJacobian(d, u) { const { n, c, k } = d; const J = zeros(n, n);
  for (let i = 0; i < n; i++) { J[i][i] = -2 * c + k * (2 * u[i] - 3 * u[i] * u[i]); if (i > 0) J[i][i - 1] = c; if (i < n - 1) J[i][i + 1] = c; }
  return J; }

// ---- MLP: Hessian-vector product H·v w.r.t. {W1, b1, W2, b2} (321 numbers), v a fixed N(0,1) direction.
export const mlpKeys = ['W1', 'b1', 'W2', 'b2'];
export function mlpDirection(G) { const r = lcg(23); const { params } = mlpSetup(G);
  return Object.fromEntries(mlpKeys.map((k) => [k, G.tensor(Float64Array.from(params[k].data, () => normal(r)), params[k].shape)])); }
export const mlpFlat = (q) => mlpKeys.flatMap((k) => Array.from(q[k].data));
// Forward-over-reverse by hand. a = XW1 + b1, h = tanh a, o = hW2 + b2, e = o − y, loss = mean(e²); dots are tangents along v.
export function mlpHVP(q, batch, v) {
  const { X, y } = batch; const N = X.length, I = 8, H = 32;
  const W1 = q.W1.data, b1 = q.b1.data, W2 = q.W2.data, b2 = q.b2.data[0];
  const V1 = v.W1.data, c1 = v.b1.data, V2 = v.W2.data, c2 = v.b2.data[0];
  const out = { W1: new Float64Array(I * H), b1: new Float64Array(H), W2: new Float64Array(H), b2: new Float64Array(1) };
  for (let n = 0; n < N; n++) {
    const h = new Float64Array(H), hd = new Float64Array(H); let o = b2, od = c2;
    for (let j = 0; j < H; j++) { let a = b1[j], ad = c1[j];
      for (let i = 0; i < I; i++) { a += X[n][i] * W1[i * H + j]; ad += X[n][i] * V1[i * H + j]; }
      h[j] = Math.tanh(a); hd[j] = (1 - h[j] * h[j]) * ad; o += h[j] * W2[j]; od += hd[j] * W2[j] + h[j] * V2[j]; }
    const go = (2 / N) * (o - y[n][0]), god = (2 / N) * od;
    out.b2[0] += god;
    for (let j = 0; j < H; j++) { out.W2[j] += hd[j] * go + h[j] * god;
      const gh = go * W2[j], ghd = god * W2[j] + go * V2[j]; const gad = ghd * (1 - h[j] * h[j]) - 2 * gh * h[j] * hd[j];
      out.b1[j] += gad; for (let i = 0; i < I; i++) out.W1[i * H + j] += X[n][i] * gad; }
  }
  return mlpKeys.flatMap((k) => Array.from(out[k]));
}
