// `node bench/memory.mjs`: a large plan's memory and first call (issue 25).
// The GP log likelihood of models.mjs, compiled, at n = 1000 and 2000, each
// run in a fresh process (`node --expose-gc`, collected before the
// baseline): the peak RSS growth from `compile` through ten calls, in n×n
// matrices of f64 (`process.resourceUsage().maxRSS` against the RSS after
// the data are made), and the first call ÷ the median of the ten replays.
//
//   node bench/memory.mjs                 3 runs of n = 1000, 2000; medians
//   node bench/memory.mjs --runs 5 --sizes 1000

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const argv = process.argv.slice(2);
const option = (name, dflt) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : dflt;
};
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

if (argv.includes('--child')) {
  const G = await import('../index.js');
  const { gp, gpData } = await import('./models.mjs');
  const n = Number(option('--n'));
  const f = gp(G, gpData(n));
  globalThis.gc();
  const base = Math.max(process.resourceUsage().maxRSS * 1024, process.memoryUsage().rss);
  const c = G.compile(f);
  let t = performance.now();
  c({ l: 1.3, v: 0.9 });
  const first = performance.now() - t;
  const ms = [];
  for (let i = 0; i < 10; i++) {
    t = performance.now();
    c({ l: 1.3 + 0.01 * i, v: 0.9 });
    ms.push(performance.now() - t);
  }
  const peak = (process.resourceUsage().maxRSS * 1024 - base) / (8 * n * n);
  process.stdout.write(JSON.stringify({ peak, first, replay: median(ms) }));
  process.exit(0);
}

const here = fileURLToPath(import.meta.url);
const runs = Number(option('--runs', 3));
for (const n of option('--sizes', '1000,2000').split(',').map(Number)) {
  const out = [];
  for (let r = 0; r < runs; r++) {
    const child = spawnSync(process.execPath, ['--expose-gc', here, '--child', '--n', String(n)], { encoding: 'utf8' });
    if (child.status !== 0) throw new Error(child.stderr);
    out.push(JSON.parse(child.stdout));
  }
  const m = (k) => median(out.map((o) => o[k]));
  const ratio = median(out.map((o) => o.first / o.replay));
  console.log(
    `n = ${n}: peak growth ${m('peak').toFixed(2)} n×n (${((m('peak') * 8 * n * n) / 2 ** 20).toFixed(0)} MiB), ` +
      `first call ${m('first').toFixed(0)} ms, replay ${m('replay').toFixed(0)} ms, first ÷ replay ${ratio.toFixed(2)} ` +
      `(medians of ${runs}; load ${(await import('node:os')).loadavg()[0].toFixed(1)})`,
  );
}
