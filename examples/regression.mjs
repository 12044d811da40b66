// The Bayesian linear regression the samplers in this folder run on
// (bench/models.mjs's data: n = 340 observations, 13 covariates), with its
// 15 parameters as one vector θ = [intercept, beta_1..beta_13, log sigma].

import { add, div, exp, matmul, mul, reshape, slice, square, sub, sum } from '../index.js';
import { regressionData } from '../bench/models.mjs';

export const data = regressionData();
const { X, y, n, p } = data;
export const dim = p + 2;

/** log p(θ | y): Gaussian likelihood, N(0, 10²) priors on the coefficients, N(0, 1) on log sigma. */
export function logPosterior(theta) {
  const intercept = reshape(slice(theta, [0], [1]), []);
  const beta = slice(theta, [1], [p]);
  const logSigma = reshape(slice(theta, [p + 1], [1]), []);
  const z = div(sub(y, add(matmul(X, beta), intercept)), exp(logSigma));
  const logLik = sub(mul(-0.5, sum(square(z))), mul(n, logSigma));
  const logPrior = add(mul(-0.005, add(square(intercept), sum(square(beta)))), mul(-0.5, square(logSigma)));
  return add(logLik, logPrior);
}
