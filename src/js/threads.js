// The cap on the threads of one large factorization, solve or product
// (src/core/linalg/threads.rs).

import { N } from './binding.js';
import { shownArgument } from './forms.js';

/**
 * The most threads one large factorization, solve or product may use: a
 * whole number, 0 for the machine's available parallelism, cut to it when
 * more; without an argument, nothing changes. Returns the number now in
 * effect; always 1 in the WebAssembly build, which runs on one thread.
 * Results do not depend on it, bit for bit.
 */
export function setThreads(n) {
  if (n !== undefined && (typeof n !== 'number' || !Number.isInteger(n) || n < 0)) {
    throw new Error(`setThreads: n must be a whole number (0 for the machine's cores), got ${shownArgument(n)}`);
  }
  if (typeof N.setThreads !== 'function') return 1;
  return n === undefined ? N.threads() : N.setThreads(Math.min(n, 0xffffffff));
}
