// The shape signature compiled plans are cached and matched by, and that
// messages print (SPEC §7).

import { isF64, isMapForm, isRow, isTensor, lengthOf, typedLength } from './forms.js';

/** A shape's part of a signature: `s`, `v<n>` or `<m>x<n>`. */
export function sigOfShape(s) {
  return s.length === 0 ? 's' : s.length === 1 ? `v${s[0]}` : `${s[0]}x${s[1]}`;
}

function sigOf(v) {
  if (typeof v === 'number') return 's';
  if (isF64(v)) return `v${typedLength(v)}`;
  if (Array.isArray(v)) return isRow(v[0]) ? `${v.length}x${lengthOf(v[0])}` : `v${v.length}`;
  if (isTensor(v)) return sigOfShape(v.shape);
  return '?';
}

/** Whether v, in any parameter form, has this shape (what a signature compares). */
export function sameShape(v, shape) {
  if (typeof v === 'number') return shape.length === 0;
  if (isF64(v)) return shape.length === 1 && typedLength(v) === shape[0];
  if (Array.isArray(v)) {
    if (isRow(v[0])) return shape.length === 2 && v.length === shape[0] && lengthOf(v[0]) === shape[1];
    return shape.length === 1 && v.length === shape[0];
  }
  if (isTensor(v)) {
    const s = v.shape;
    return s.length === shape.length && s[0] === shape[0] && s[1] === shape[1];
  }
  return false;
}

/** `key:sig` pairs in key order; keys quoted when `quote` (so no key can pose as another pair). */
function sigOfSlots(x, quote) {
  if (!isMapForm(x)) return sigOf(x);
  return Object.keys(x)
    .sort()
    .map((k) => `${quote ? JSON.stringify(k) : k}:${sigOf(x[k])}`)
    .join(',');
}

/** The shape signature as messages print it (SPEC §7). */
export function signature(x, inputs, quote = false) {
  return inputs === undefined ? sigOfSlots(x, quote) : `${sigOfSlots(x, quote)}|${sigOfSlots(inputs, quote)}`;
}

/**
 * The signature plans are cached and matched by: keys quoted, since
 * {a: 1, b: 2} and {'a:s,b': 1} both print as a:s,b:s.
 */
export function signatureKey(x, inputs) {
  return signature(x, inputs, true);
}
