// The No-U-Turn Sampler (Hoffman & Gelman 2014: the efficient NUTS of their
// Algorithm 3, with the dual-averaging step size of Algorithm 6, whose
// acceptance statistic is averaged over every doubling, as Stan does) on the
// eight schools, non-centred: ten scalar parameters and about a hundred
// scalar ops, the kind of potential a sampler calls thousands of times.
// The log density is written as a user writes it, with scalar ops on a
// {name: value} map, and differentiated two ways: eagerly (valueAndGrad)
// and compiled. Both chains start from the same random numbers and must
// give the same draws, bit for bit; the timings say what the gradient
// costs end to end.
//
//   node examples/nuts.mjs            1 000 warm-up + 2 000 draws
//   node examples/nuts.mjs --small    150 warm-up + 200 draws (also EXAMPLE_SIZE=small)

import { add, compile, div, exp, mul, square, sub, valueAndGrad } from '../index.js';
import { lcg, normal } from '../bench/models.mjs';

const small = process.argv.includes('--small') || process.env.EXAMPLE_SIZE === 'small';
const warmup = small ? 150 : 1000;
const draws = small ? 200 : 2000;
const MAX_DEPTH = 10;

// Rubin (1981): estimated effects of coaching in eight schools, and their standard errors.
const Y = [28, 8, -3, 7, -1, 1, 18, 12];
const SIGMA = [15, 10, 16, 11, 9, 11, 10, 18];
const KEYS = ['mu', 'logTau', ...Y.map((_, j) => `eta${j}`)];
const dim = KEYS.length;

/** log p(mu, log tau, eta | y) up to a constant: mu ~ N(0, 5), tau ~ half-N(0, 5) sampled as log tau (its Jacobian included), eta ~ N(0, 1). */
function logDensity(p) {
  const tau = exp(p.logTau);
  let lp = add(mul(-0.5, square(div(p.mu, 5))), sub(p.logTau, mul(0.5, square(div(tau, 5)))));
  for (let j = 0; j < 8; j++) {
    const eta = p[`eta${j}`];
    const r = div(sub(Y[j], add(p.mu, mul(tau, eta))), SIGMA[j]);
    lp = sub(lp, add(mul(0.5, square(eta)), mul(0.5, square(r))));
  }
  return lp;
}

/** A sampler over flat vectors, with its log density and gradient from `vg`. */
function sampler(vg) {
  const point = {};
  let evaluations = 0;
  let ms = 0;
  /** A state: position, momentum, log density, gradient. */
  const state = (q, r) => {
    for (let i = 0; i < dim; i++) point[KEYS[i]] = q[i];
    const t0 = performance.now();
    const { value, gradient } = vg(point);
    ms += performance.now() - t0;
    evaluations++;
    return { q, r, lp: value, g: Float64Array.from(KEYS, (k) => gradient[k]) };
  };
  const leapfrog = (s, eps) => {
    const r = s.r.map((ri, i) => ri + 0.5 * eps * s.g[i]);
    const next = state(
      s.q.map((qi, i) => qi + eps * r[i]),
      r,
    );
    for (let i = 0; i < dim; i++) next.r[i] += 0.5 * eps * next.g[i];
    return next;
  };
  const joint = (s) => s.lp - 0.5 * s.r.reduce((a, b) => a + b * b, 0);
  const dot = (a, b) => a.reduce((acc, x, i) => acc + x * b[i], 0);
  const noUTurn = (minus, plus) => {
    const span = plus.q.map((x, i) => x - minus.q[i]);
    return dot(span, minus.r) >= 0 && dot(span, plus.r) >= 0;
  };

  /** Algorithm 3's BuildTree: the subtree of 2^depth leapfrog steps from s in direction v. */
  function build(s, logu, v, depth, eps, joint0, rand) {
    if (depth === 0) {
      const next = leapfrog(s, v * eps);
      const h = joint(next);
      return {
        minus: next, plus: next, pick: next,
        n: logu <= h ? 1 : 0,
        ok: logu < 1000 + h,
        alpha: Number.isNaN(h) ? 0 : Math.min(1, Math.exp(h - joint0)),
        steps: 1,
      };
    }
    const t = build(s, logu, v, depth - 1, eps, joint0, rand);
    if (!t.ok) return t;
    const u = build(v < 0 ? t.minus : t.plus, logu, v, depth - 1, eps, joint0, rand);
    if (v < 0) t.minus = u.minus;
    else t.plus = u.plus;
    if (u.n > 0 && rand() < u.n / (t.n + u.n)) t.pick = u.pick;
    t.alpha += u.alpha;
    t.steps += u.steps;
    t.n += u.n;
    t.ok = u.ok && noUTurn(t.minus, t.plus);
    return t;
  }

  /** One NUTS transition from s: the next state and the mean acceptance statistic. */
  function transition(s, eps, rand) {
    const start = { ...s, r: Float64Array.from({ length: dim }, () => normal(rand)) };
    const joint0 = joint(start);
    const logu = joint0 + Math.log(1 - rand());
    let minus = start;
    let plus = start;
    let pick = start;
    let n = 1;
    let alpha = 0;
    let steps = 0;
    for (let depth = 0; depth < MAX_DEPTH; depth++) {
      const v = rand() < 0.5 ? -1 : 1;
      const t = build(v < 0 ? minus : plus, logu, v, depth, eps, joint0, rand);
      if (v < 0) minus = t.minus;
      else plus = t.plus;
      alpha += t.alpha;
      steps += t.steps;
      if (!t.ok) break;
      if (rand() < t.n / n) pick = t.pick;
      n += t.n;
      if (!noUTurn(minus, plus)) break;
    }
    return { s: pick, accept: alpha / steps };
  }

  function run(seed) {
    const rand = lcg(seed);
    let s = state(new Float64Array(dim), new Float64Array(dim));
    // Dual averaging toward a mean acceptance statistic of 0.8.
    let logEps = Math.log(0.5);
    const mu = Math.log(10 * 0.5);
    let hBar = 0;
    let logEpsBar = 0;
    const sums = new Float64Array(dim);
    let tauSum = 0;
    const t0 = performance.now();
    for (let m = 1; m <= warmup + draws; m++) {
      const eps = m <= warmup ? Math.exp(logEps) : Math.exp(logEpsBar);
      const { s: next, accept } = transition(s, eps, rand);
      s = next;
      if (m <= warmup) {
        hBar = (1 - 1 / (m + 10)) * hBar + (0.8 - accept) / (m + 10);
        logEps = mu - (Math.sqrt(m) / 0.05) * hBar;
        const w = m ** -0.75;
        logEpsBar = w * logEps + (1 - w) * logEpsBar;
      } else {
        for (let i = 0; i < dim; i++) sums[i] += s.q[i];
        tauSum += Math.exp(s.q[1]);
      }
    }
    const total = performance.now() - t0;
    return { last: s.q, mean: Array.from(sums, (x) => x / draws), tau: tauSum / draws, eps: Math.exp(logEpsBar), total, ms, evaluations };
  }
  return run;
}

const runs = {
  'valueAndGrad (eager)': sampler(valueAndGrad(logDensity))(7),
  compile: sampler(compile(logDensity))(7),
};
const [eager, compiled] = Object.values(runs);
const same = eager.last.every((x, i) => Object.is(x, compiled.last[i])) && eager.evaluations === compiled.evaluations;

console.log(`NUTS on the eight schools (non-centred, ${dim} scalar parameters): ${warmup} warm-up + ${draws} draws`);
console.log(`step size after warm-up: ${eager.eps.toFixed(3)}; ${eager.evaluations} gradient evaluations\n`);
console.log('posterior mean of mu  ' + eager.mean[0].toFixed(2));
console.log('posterior mean of tau ' + eager.tau.toFixed(2));
console.log(`same draws both ways: ${same ? 'yes' : 'NO'}\n`);
for (const [name, r] of Object.entries(runs)) {
  const share = (100 * r.ms) / r.total;
  console.log(
    `${name.padEnd(21)} ${r.total.toFixed(0).padStart(6)} ms in all, ${r.ms.toFixed(0).padStart(5)} ms in the gradient ` +
      `(${share.toFixed(0)}%, ${((1000 * r.ms) / r.evaluations).toFixed(2)} µs a call)`,
  );
}
if (!same) process.exit(1);
