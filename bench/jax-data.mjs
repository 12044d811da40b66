// `node bench/jax-data.mjs OUT.json`: the data, parameters and exact references of the six
// workloads of bench/higher.mjs, for bench/jax-higher.py. Flat orders as in higher-models.mjs.
import { writeFileSync } from 'node:fs';
import * as H from './higher-models.mjs';

const out = process.argv[2];
if (!out) throw new Error('usage: node bench/jax-data.mjs OUT.json');

// mlpSetup and mlpDirection only call G.tensor; a shim keeps the native module out of this.
const G = { tensor: (data, shape) => ({ data, shape }) };

const gp = (n) => {
  const d = H.gpData(n);
  return { D2: d.D2, y: d.y, params: H.gpKeys.map((k) => H.gpParams()[k]), exact: H.gpExact(d, H.gpParams()).hessian };
};
const rd = (n) => {
  const d = H.rdData(n);
  return { DL: d.DL, k: d.k, u: d.u, exact: H.rdJacobian(d, d.u) };
};
const regression = () => {
  const d = H.regressionData();
  const q = H.regressionParams();
  return { X: d.X, y: d.y, params: H.regressionFlat(q), exact: H.regressionHessian(d, q) };
};
const mlp = () => {
  const { params, batch } = H.mlpSetup(G);
  const v = H.mlpDirection(G);
  const tree = (q) => Object.fromEntries(H.mlpKeys.map((k) => [k, { data: Array.from(q[k].data), shape: q[k].shape }]));
  return { X: batch.X, y: batch.y, params: tree(params), direction: tree(v), exact: H.mlpHVP(params, batch, v) };
};

const data = { gp50: gp(50), gp200: gp(200), regression: regression(), rd30: rd(30), rd100: rd(100), mlp: mlp() };
writeFileSync(out, JSON.stringify(data));
console.log(`wrote ${out}: ${Object.keys(data).join(', ')}`);
