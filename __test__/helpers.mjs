// Shared utilities for the @tangent.to/grad test suites.
//
// Everything here except `checkGrad` is plain JavaScript with no dependency on
// the package under test: random numbers, finite differences, error measures
// and the reference linear algebra the suites compare against.

import assert from 'node:assert/strict';
import * as G from '../index.js';

// ---------------------------------------------------------------------------
// Random numbers: a fixed-seed 32-bit linear congruential generator
// (Numerical Recipes constants). Deterministic across runs and platforms.
// ---------------------------------------------------------------------------

export function makeRng(seed = 20240601) {
  let s = seed >>> 0;
  const next = () => {
    s = (Math.imul(1664525, s) + 1013904223) >>> 0;
    return s / 4294967296;
  };
  const uniform = (lo = 0, hi = 1) => lo + (hi - lo) * next();
  const normal = () => {
    // Box-Muller; 1 - next() is in (0, 1] so the log is finite.
    const u = 1 - next();
    const v = next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  };
  const vector = (n, lo = -1, hi = 1) => Array.from({ length: n }, () => uniform(lo, hi));
  const matrix = (m, n, lo = -1, hi = 1) => Array.from({ length: m }, () => vector(n, lo, hi));
  // Values whose magnitude lies in [lo, hi] with a random sign: safe divisors.
  const awayFromZero = (lo = 0.5, hi = 1.5) => (next() < 0.5 ? -1 : 1) * uniform(lo, hi);
  return { next, uniform, normal, vector, matrix, awayFromZero };
}

// ---------------------------------------------------------------------------
// Finite differences and error measures
// ---------------------------------------------------------------------------

/**
 * Central finite differences of a scalar function of a flat parameter vector.
 * Step for coordinate i: h_i = h * max(1, |x_i|). The quotient divides by the
 * step actually taken ((x_i + h_i) - (x_i - h_i) in floating point).
 */
export function fdGrad(f, x, h = 1e-6) {
  const x0 = Float64Array.from(x);
  const g = new Float64Array(x0.length);
  for (let i = 0; i < x0.length; i++) {
    const hi = h * Math.max(1, Math.abs(x0[i]));
    const xp = Float64Array.from(x0);
    const xm = Float64Array.from(x0);
    xp[i] = x0[i] + hi;
    xm[i] = x0[i] - hi;
    g[i] = (f(xp) - f(xm)) / (xp[i] - xm[i]);
  }
  return g;
}

/** Flattens a number, (typed) array, nested array or tensor into number[]. */
export function flat(v) {
  if (typeof v === 'number') return [v];
  if (v && typeof v === 'object' && v.data instanceof Float64Array && Array.isArray(v.shape)) {
    return Array.from(v.data);
  }
  if (ArrayBuffer.isView(v)) return Array.from(v);
  if (Array.isArray(v)) return v.flatMap((e) => flat(e));
  throw new Error(`flat: cannot flatten ${typeof v}`);
}

/**
 * Relative error used throughout the suites:
 *
 *   relErr(a, b) = max_i |a_i - b_i| / max(1, max_i |b_i|)
 *
 * where `b` is the reference. Absolute for small references, relative for
 * large ones. Returns Infinity on a length mismatch and NaN if any entry of
 * either side is NaN (so `relErr(...) <= tol` fails).
 */
export function relErr(a, b) {
  const fa = flat(a);
  const fb = flat(b);
  if (fa.length !== fb.length) return Infinity;
  let num = 0;
  let den = 1;
  for (let i = 0; i < fa.length; i++) {
    const d = Math.abs(fa[i] - fb[i]);
    if (Number.isNaN(d)) return NaN;
    if (d > num) num = d;
    if (Math.abs(fb[i]) > den) den = Math.abs(fb[i]);
  }
  return num / den;
}

/**
 * Element-wise closeness: |a - e| <= tol * max(1, |e|) for every entry.
 * Non-finite expected entries must match exactly (NaN with NaN, ±Infinity).
 */
export function assertClose(actual, expected, tol = 1e-13, msg = '') {
  const fa = flat(actual);
  const fe = flat(expected);
  assert.equal(fa.length, fe.length, `${msg} length ${fa.length} vs ${fe.length}`);
  for (let i = 0; i < fe.length; i++) {
    const a = fa[i];
    const e = fe[i];
    if (!Number.isFinite(e)) {
      assert.ok(Object.is(a, e) || (Number.isNaN(a) && Number.isNaN(e)),
        `${msg} entry ${i}: got ${a}, expected ${e}`);
      continue;
    }
    assert.ok(Math.abs(a - e) <= tol * Math.max(1, Math.abs(e)),
      `${msg} entry ${i}: got ${a}, expected ${e} (diff ${Math.abs(a - e)})`);
  }
}

// ---------------------------------------------------------------------------
// Plain-JS reference linear algebra (nested number[][])
// ---------------------------------------------------------------------------

export const zerosJS = (m, n) => Array.from({ length: m }, () => new Array(n).fill(0));
export const eyeJS = (n) => Array.from({ length: n }, (_, i) => Array.from({ length: n }, (_, j) => (i === j ? 1 : 0)));
export const transposeJS = (A) => A[0].map((_, j) => A.map((row) => row[j]));
export const copyJS = (A) => A.map((row) => Array.from(row));

export function matmulJS(A, B) {
  const m = A.length;
  const k = A[0].length;
  if (!Array.isArray(B[0])) {
    return A.map((row) => row.reduce((s, a, j) => s + a * B[j], 0));
  }
  const n = B[0].length;
  const C = zerosJS(m, n);
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let p = 0; p < k; p++) s += A[i][p] * B[p][j];
      C[i][j] = s;
    }
  }
  return C;
}

/** A = M M^T + n I for a random M: symmetric positive definite, well conditioned. */
export function randomSPD(rng, n) {
  const M = rng.matrix(n, n);
  const A = matmulJS(M, transposeJS(M));
  for (let i = 0; i < n; i++) A[i][i] += n;
  // exact symmetry
  for (let i = 0; i < n; i++) for (let j = 0; j < i; j++) A[i][j] = A[j][i];
  return A;
}

/** Lower Cholesky factor, textbook Cholesky-Banachiewicz. */
export function choleskyJS(A) {
  const n = A.length;
  const L = zerosJS(n, n);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j <= i; j++) {
      let s = A[i][j];
      for (let k = 0; k < j; k++) s -= L[i][k] * L[j][k];
      if (i === j) {
        if (!(s > 0)) throw new Error('choleskyJS: not positive definite');
        L[i][i] = Math.sqrt(s);
      } else {
        L[i][j] = s / L[j][j];
      }
    }
  }
  return L;
}

/** Inverse by Gauss-Jordan elimination with partial pivoting. */
export function invJS(A) {
  const n = A.length;
  const M = A.map((row, i) => [...Array.from(row), ...eyeJS(n)[i]]);
  for (let c = 0; c < n; c++) {
    let p = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(M[r][c]) > Math.abs(M[p][c])) p = r;
    [M[c], M[p]] = [M[p], M[c]];
    const piv = M[c][c];
    for (let j = 0; j < 2 * n; j++) M[c][j] /= piv;
    for (let r = 0; r < n; r++) {
      if (r === c) continue;
      const f = M[r][c];
      if (f === 0) continue;
      for (let j = 0; j < 2 * n; j++) M[r][j] -= f * M[c][j];
    }
  }
  return M.map((row) => row.slice(n));
}

/** Solves T X = B using only T's lower (lower = true) or upper triangle. */
export function triSolveJS(T, B, lower = true) {
  const n = T.length;
  const vec = !Array.isArray(B[0]);
  const Bm = vec ? B.map((b) => [b]) : copyJS(B);
  const k = Bm[0].length;
  const X = zerosJS(n, k);
  for (let c = 0; c < k; c++) {
    if (lower) {
      for (let i = 0; i < n; i++) {
        let s = Bm[i][c];
        for (let j = 0; j < i; j++) s -= T[i][j] * X[j][c];
        X[i][c] = s / T[i][i];
      }
    } else {
      for (let i = n - 1; i >= 0; i--) {
        let s = Bm[i][c];
        for (let j = i + 1; j < n; j++) s -= T[i][j] * X[j][c];
        X[i][c] = s / T[i][i];
      }
    }
  }
  return vec ? X.map((r) => r[0]) : X;
}

export function logdetSPDJS(A) {
  const L = choleskyJS(A);
  let s = 0;
  for (let i = 0; i < L.length; i++) s += Math.log(L[i][i]);
  return 2 * s;
}

export const traceJS = (A) => A.reduce((s, row, i) => s + row[i], 0);

/** Frobenius inner product / weighted sum of two equally shaped nested arrays. */
export function dotAll(a, b) {
  const fa = flat(a);
  const fb = flat(b);
  let s = 0;
  for (let i = 0; i < fa.length; i++) s += fa[i] * fb[i];
  return s;
}

// ---------------------------------------------------------------------------
// Special functions, written independently of the implementation
// ---------------------------------------------------------------------------

/** log|Γ(x)| for x > 0: shift to x >= 15, then Stirling's series. */
export function lgammaJS(x) {
  if (!(x > 0)) throw new Error('lgammaJS: only x > 0');
  let shift = 0;
  let z = x;
  while (z < 15) {
    shift += Math.log(z);
    z += 1;
  }
  const z2 = z * z;
  const series = 1 / (12 * z) - 1 / (360 * z * z2) + 1 / (1260 * z * z2 * z2)
    - 1 / (1680 * z * z2 * z2 * z2) + 1 / (1188 * z * z2 * z2 * z2 * z2);
  return (z - 0.5) * Math.log(z) - z + 0.5 * Math.log(2 * Math.PI) + series - shift;
}

/** ψ(x) for x > 0: shift to x >= 15, then the asymptotic series. */
export function digammaJS(x) {
  if (!(x > 0)) throw new Error('digammaJS: only x > 0');
  let acc = 0;
  let z = x;
  while (z < 15) {
    acc -= 1 / z;
    z += 1;
  }
  const z2 = 1 / (z * z);
  return acc + Math.log(z) - 0.5 / z
    - z2 * (1 / 12 - z2 * (1 / 120 - z2 * (1 / 252 - z2 * (1 / 240 - z2 * (1 / 132)))));
}

// ---------------------------------------------------------------------------
// Parameter packing: {name: value} maps <-> flat Float64Array
// ---------------------------------------------------------------------------

const isTensorLike = (v) => v !== null && typeof v === 'object' && v.data instanceof Float64Array && Array.isArray(v.shape);

function describe(v) {
  if (typeof v === 'number') return { kind: 'number', size: 1 };
  if (isTensorLike(v)) return { kind: 'tensor', size: v.data.length, shape: v.shape.slice() };
  if (ArrayBuffer.isView(v) || (Array.isArray(v) && typeof v[0] === 'number')) return { kind: 'vector', size: v.length };
  if (Array.isArray(v)) return { kind: 'matrix', size: v.length * v[0].length, m: v.length, n: v[0].length };
  throw new Error('describe: unsupported parameter form');
}

function rebuild(d, flatArr, off) {
  switch (d.kind) {
    case 'number': return flatArr[off];
    case 'tensor': return { data: Float64Array.from(flatArr.subarray(off, off + d.size)), shape: d.shape.slice() };
    case 'vector': return Array.from(flatArr.subarray(off, off + d.size));
    default: return Array.from({ length: d.m }, (_, i) => Array.from(flatArr.subarray(off + i * d.n, off + (i + 1) * d.n)));
  }
}

/**
 * packParams(params) for a single value or a {name: value} map returns
 *   x:         the flat Float64Array of all entries (map keys in order),
 *   unpack(f): the same structure rebuilt from a flat array (fresh arrays),
 *   flatGrad(g): a gradient of the same structure flattened the same way.
 */
export function packParams(params) {
  const isMap = params !== null && typeof params === 'object' && !Array.isArray(params)
    && !ArrayBuffer.isView(params) && !isTensorLike(params);
  const keys = isMap ? Object.keys(params) : [null];
  const descs = keys.map((k) => describe(isMap ? params[k] : params));
  const offs = [];
  let n = 0;
  for (const d of descs) { offs.push(n); n += d.size; }
  const x = new Float64Array(n);
  keys.forEach((k, i) => x.set(flat(isMap ? params[k] : params), offs[i]));
  const unpack = (f) => {
    const fa = Float64Array.from(f);
    if (!isMap) return rebuild(descs[0], fa, 0);
    const out = {};
    keys.forEach((k, i) => { out[k] = rebuild(descs[i], fa, offs[i]); });
    return out;
  };
  const flatGrad = (g) => {
    if (!isMap) return flat(g);
    return keys.flatMap((k) => {
      assert.ok(k in g, `gradient is missing key ${k}`);
      return flat(g[k]);
    });
  };
  return { x, unpack, flatGrad, keys };
}

// ---------------------------------------------------------------------------
// The one helper that calls the package: gradient vs finite differences
// ---------------------------------------------------------------------------

/**
 * Differentiates `objective` at `params` with valueAndGrad and compares the
 * gradient with central finite differences of the objective's own forward
 * pass (the objective is called with plain numbers/arrays, so every operand is
 * a constant there). Asserts relErr(gradient, fd) <= tol and that the value
 * matches the plain forward evaluation. Returns { value, gradient, fd, err }.
 */
export function checkGrad(objective, params, { tol = 1e-7, h = 1e-6, label = '' } = {}) {
  const { value, gradient } = G.valueAndGrad(objective)(params);
  const P = packParams(params);
  const f = (fl) => {
    const out = objective(P.unpack(fl));
    assert.ok(out instanceof G.Var, `${label}: objective must return a Var`);
    return out.data[0];
  };
  const direct = f(P.x);
  assert.ok(typeof value === 'number', `${label}: value must be a number`);
  assertClose(value, direct, 1e-13, `${label} value`);
  const fd = fdGrad(f, P.x, h);
  const g = P.flatGrad(gradient);
  const err = relErr(g, fd);
  assert.ok(err <= tol, `${label}: gradient relErr ${err} > ${tol}\n  autodiff ${g.join(', ')}\n  finite d ${Array.from(fd).join(', ')}`);
  return { value, gradient, fd, err, flatGradient: g };
}

/** assert.throws with an exact message (string) or a regexp, requiring an Error. */
export function throwsMsg(fn, expected) {
  assert.throws(fn, (e) => {
    assert.ok(e instanceof Error, `expected an Error, got ${Object.prototype.toString.call(e)}: ${e}`);
    if (typeof expected === 'string') assert.equal(e.message, expected);
    else if (expected instanceof RegExp) assert.match(e.message, expected);
    return true;
  });
}
