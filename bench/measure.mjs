// Timing shared by the benchmarks: warm up, size a batch so it takes at
// least `batchMs`, time `batches` batches, report the median of the batch
// means and the min/max spread, in µs per call.

import { performance } from 'node:perf_hooks';

/** Median, min and max of µs/call over timed batches of `fn`. */
export function measure(fn, { batches = 15, batchMs = 20, warmupMs = 200 } = {}) {
  // Warm up (JIT, caches, the plan) for warmupMs or at least a few calls.
  let calls = 0;
  const w0 = performance.now();
  while (calls < 3 || performance.now() - w0 < warmupMs) {
    fn();
    calls++;
  }
  // Size a batch: double until it takes at least batchMs.
  let n = 1;
  for (;;) {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) fn();
    const dt = performance.now() - t0;
    if (dt >= batchMs) break;
    n = dt <= 0 ? n * 10 : Math.max(n * 2, Math.ceil((n * batchMs * 1.1) / dt));
  }
  const means = [];
  for (let b = 0; b < batches; b++) {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) fn();
    means.push(((performance.now() - t0) * 1000) / n);
  }
  means.sort((a, b) => a - b);
  const mid = means.length >> 1;
  const median = means.length % 2 ? means[mid] : (means[mid - 1] + means[mid]) / 2;
  return { median, min: means[0], max: means[means.length - 1], batches, perBatch: n };
}
