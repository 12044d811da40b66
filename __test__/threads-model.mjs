// The objective of threads.test.mjs, shared with the child process it
// starts: every large kernel the package parallelizes, with its adjoint.

/** A fixed LCG in [-1, 1). */
function lcg(seed) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (2 * s) / 4294967296 - 1;
  };
}

/** Value and every gradient entry of the objective, as one Float64Array. */
export function run(G, n) {
  const r = lcg(601);
  const M = G.tensor(Float64Array.from({ length: n * n }, r), [n, n]);
  const B = Float64Array.from({ length: n * n }, r);
  const C = Float64Array.from({ length: n * n }, (_, i) => r() + (i % (n + 1) === 0 ? 3 : 0));
  const y = Float64Array.from({ length: n }, r);
  const Bt = G.tensor(B, [n, n]);
  const Ct = G.tensor(C, [n, n]);
  const f = (p) => {
    const K = G.addDiag(G.div(G.matmul(p.M, G.transpose(p.M)), n), 1); // a product and its adjoint
    const L = G.cholesky(K);
    const X = G.triangularSolve(L, Bt); // n×n right-hand side
    const Z = G.solveGeneral(G.add(Ct, G.mul(p.s, K)), Bt); // LU, its solves and adjoint
    return G.add(
      G.add(G.mul(1e-3, G.sum(G.square(X))), G.mul(1e-3, G.sum(Z))),
      G.sub(G.logdetPSD(K), G.dot(y, G.solvePSD(K, y))),
    );
  };
  const c = G.compile(f);
  const { value, gradient } = c({ M, s: 0.25 });
  return Float64Array.from([value, gradient.s, ...gradient.M.data]);
}

