// `npm run bench:chart`: draws docs/speed.svg, a log-scale bar chart of the
// time per call of this package (compiled, native), the JavaScript version
// and JAX's `jit`, per workload, from
//
//   bench/results.json    this package's medians, written by a full run of
//                         bench/run.mjs (section valueAndGrad) and of
//                         bench/higher.mjs (section higher), with the date,
//                         the machine and the command of each run;
//   bench/published.json  the other systems' published figures, with their
//                         source and date.
//
//   node bench/chart.mjs [--out path]     (default docs/speed.svg)
//   node bench/chart.mjs --table          the same numbers as a Markdown table
//
// The SVG is written as text: no dependency. It carries its own background,
// light or dark after the reader's colour scheme, so it reads on GitHub in
// either theme. Each bar has data-* attributes (section, workload, system,
// value) that __test__/chart.test.mjs checks against the data and the axis.
// Nothing here loads the package itself.

import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import os from 'node:os';

export const RESULTS = fileURLToPath(new URL('./results.json', import.meta.url));
export const PUBLISHED = fileURLToPath(new URL('./published.json', import.meta.url));
export const SVG = fileURLToPath(new URL('../docs/speed.svg', import.meta.url));

/** The sections drawn, in order, with the workloads' labels. */
export const SECTIONS = [
  {
    key: 'valueAndGrad',
    title: 'Value and gradient, compiled',
    workloads: {
      regression: 'regression: n = 340, 15 parameters',
      gp50: 'gp50: GP log likelihood, 50 points',
      gp200: 'gp200: the same, 200 points',
      mlp: 'mlp: 8 → 32 → 1, batch of 64',
    },
  },
  {
    key: 'higher',
    title: 'Second order and Jacobians, compiled',
    workloads: {
      gp50: 'gp50: 2×2 Hessian',
      gp200: 'gp200: 2×2 Hessian',
      regression: 'regression: 15×15 Hessian',
      mlp: 'mlp: H·v, 321 parameters',
      rd30: 'rd30: 30×30 Jacobian',
      rd100: 'rd100: 100×100 Jacobian',
    },
  },
];

/** The bars of a group, top to bottom: [system key, legend label, CSS class]. */
export const SYSTEMS = [
  ['ours', 'this package (native)', 'ours'],
  ['jax', 'JAX jit, CPU, float64 (same VM, same minutes)', 'jax'],
  ['js', 'JavaScript version (published)', 'js'],
];

// ---------------------------------------------------------------- results file

/** The machine a run is on, as the results file records it. */
export function machine() {
  return {
    cpu: os.cpus()[0]?.model ?? 'unknown cpu',
    cores: os.cpus().length,
    node: process.version,
    os: `${os.platform()} ${os.arch()}`,
  };
}

/** Replace one section of bench/results.json (the other is kept). */
export function recordResults(section, record, file = RESULTS) {
  let all = {};
  try {
    all = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    if (e.code !== 'ENOENT') throw e;
  }
  all[section] = record;
  writeFileSync(file, `${JSON.stringify(all, null, 2)}\n`);
}

/** This package's median µs per call: section -> workload -> number. */
export function ours(results) {
  const out = {};
  if (results.valueAndGrad) {
    out.valueAndGrad = Object.fromEntries(results.valueAndGrad.rows.map((r) => [r.name, r.compiled.median]));
  }
  if (results.higher) {
    out.higher = Object.fromEntries(results.higher.rows.map((r) => [r.name, r.native]));
  }
  return out;
}

// ---------------------------------------------------------------- formatting

/** µs as text with three significant figures: 3.20 µs, 42.5 µs, 1.15 ms, 205 ms. */
export function formatTime(us) {
  const [v, unit] = us >= 999.5 ? [us / 1000, 'ms'] : [us, 'µs'];
  const digits = v >= 99.95 ? 0 : v >= 9.995 ? 1 : 2;
  return `${v.toFixed(digits)} ${unit}`;
}

/** A figure as text, its trailing zeros dropped: 85 µs, 3.2 µs, 1.15 ms, 13.3 ms. */
export const formatGiven = (us) => formatTime(us).replace(/\.(\d*?)0+ /, (_, d) => (d ? `.${d} ` : ' '));

/** A published range [fastest, slowest] as text: "85–125 µs", or one figure. */
export function formatRange([lo, hi]) {
  if (lo === hi) return formatGiven(lo);
  const a = formatGiven(lo).split(' ');
  const b = formatGiven(hi).split(' ');
  return a[1] === b[1] ? `${a[0]}–${b[0]} ${a[1]}` : `${a.join(' ')}–${b.join(' ')}`;
}

const escape = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const px = (x) => Number(x.toFixed(2));

// ---------------------------------------------------------------- drawing

const WIDTH = 880;
const PLOT_X0 = 270; // where the axis starts
const PLOT_W = 470; // the axis' length
const BAR_H = 12;
const BAR_GAP = 3;
const GROUP_GAP = 14;

/**
 * The SVG text of the chart. `results`: bench/results.json's object;
 * `published`: bench/published.json's. A section missing from `results` is
 * left out.
 */
export function drawChart(results, published) {
  const mine = ours(results);
  const sections = SECTIONS.filter((s) => mine[s.key]).map((s) => {
    const other = published.sections[s.key];
    const groups = Object.entries(s.workloads)
      .filter(([name]) => mine[s.key][name] !== undefined)
      .map(([name, label]) => {
        const js = other.js.figures[name];
        const jax = other.jax.figures[name];
        if (!js || !jax) throw new Error(`bench/published.json: no figures for ${s.key}.${name}`);
        return {
          name,
          label,
          bars: {
            ours: { value: mine[s.key][name], text: formatGiven(mine[s.key][name]) },
            jax: { value: jax[0], text: formatRange(jax) },
            js: { value: js[0], text: formatRange(js) },
          },
        };
      });
    return { ...s, groups };
  });
  if (sections.length === 0) throw new Error('bench/results.json has no section to draw');

  // The axis: whole decades around every value.
  const values = sections.flatMap((s) => s.groups.flatMap((g) => Object.values(g.bars).map((b) => b.value)));
  const lo = Math.floor(Math.log10(Math.min(...values)));
  const hi = Math.max(lo + 1, Math.ceil(Math.log10(Math.max(...values))));
  const xOf = (us) => PLOT_X0 + ((Math.log10(us) - lo) / (hi - lo)) * PLOT_W;

  const head = [];
  let y = 30;
  head.push(`<text class="fg title" x="20" y="${y}">Time per call, median, log scale: shorter is faster</text>`);
  y += 22;
  let lx = 20;
  for (const [, label, cls] of SYSTEMS) {
    head.push(`<rect class="${cls}" x="${lx}" y="${y - 10}" width="12" height="12" rx="2"/>`);
    head.push(`<text class="fg" x="${lx + 18}" y="${y}">${escape(label)}</text>`);
    lx += 34 + label.length * 7;
  }
  y += 16;
  const plotTop = y;
  const body = [];
  for (const s of sections) {
    y += 20;
    body.push(`<text class="fg section" x="20" y="${y}">${escape(s.title)}</text>`);
    y += 10;
    for (const g of s.groups) {
      const h = SYSTEMS.length * BAR_H + (SYSTEMS.length - 1) * BAR_GAP;
      body.push(`<text class="fg" x="20" y="${px(y + h / 2 + 4)}">${escape(g.label)}</text>`);
      SYSTEMS.forEach(([key, label, cls], i) => {
        const bar = g.bars[key];
        const top = y + i * (BAR_H + BAR_GAP);
        const end = xOf(bar.value);
        body.push(
          `<rect class="bar ${cls}" x="${PLOT_X0}" y="${top}" width="${px(end - PLOT_X0)}" height="${BAR_H}" rx="2" ` +
            `data-section="${s.key}" data-workload="${g.name}" data-system="${key}" data-value="${bar.value}">` +
            `<title>${escape(`${g.label}, ${label}: ${bar.text}`)}</title></rect>`,
        );
        body.push(
          `<text class="value ${key === 'ours' ? 'fg strong' : 'muted'}" x="${px(end + 5)}" y="${top + BAR_H - 2}" ` +
            `data-section="${s.key}" data-workload="${g.name}" data-system="${key}">${escape(bar.text)}</text>`,
        );
      });
      y += h + GROUP_GAP;
    }
  }
  const plotBottom = y;
  // Grid lines and the decades' labels, drawn under the bars.
  const grid = [];
  const names = ['1 µs', '10 µs', '100 µs', '1 ms', '10 ms', '100 ms', '1 s', '10 s', '100 s'];
  for (let k = lo; k <= hi; k++) {
    const x = px(xOf(10 ** k));
    grid.push(`<line class="grid" x1="${x}" y1="${plotTop}" x2="${x}" y2="${plotBottom}"/>`);
    const label = k >= 0 && k < names.length ? names[k] : `1e${k} µs`;
    grid.push(`<text class="muted tick" x="${x}" y="${plotBottom + 16}" text-anchor="middle" data-us="${10 ** k}">${label}</text>`);
  }
  y = plotBottom + 40;

  // The caption: when, where and what.
  const caption = [];
  const foot = [];
  const run = (r, cmd) => `${cmd} on ${r.date}`;
  const m = (results.valueAndGrad ?? results.higher).machine;
  const runs = [];
  if (results.valueAndGrad) runs.push(run(results.valueAndGrad, 'node bench/run.mjs'));
  if (results.higher) runs.push(run(results.higher, 'node bench/higher.mjs'));
  caption.push(`This package: compiled calls on the native addon, ${runs.join(' and ')};`);
  const where = (x) => `${x.cpu}, ${x.cores} cores (a shared VM), Node ${x.node.replace(/^v/, '')}`;
  const m2 = results.higher?.machine;
  const second = m2 && (m2.cpu !== m.cpu || m2.cores !== m.cores) ? `; the second order on ${where(m2)}` : '';
  caption.push(`${where(m)}${second}.`);
  const p = published.sections;
  const dates = [...new Set(Object.values(p).flatMap((x) => [x.jax.date]))].join(', ');
  caption.push(`JAX 0.10 jit on CPU in float64, synchronous dispatch: the faster of two runs on the same VM, before and after ours (${dates}).`);
  caption.push('The JavaScript version: its fastest published run on the same kind of 2-core VM, which swings up to 2× between days.');
  caption.push('Second order, JavaScript version: finite differences of its gradient (Jacobians: forward differences of its value).');
  for (const line of caption) {
    foot.push(`<text class="muted caption" x="20" y="${y}">${escape(line)}</text>`);
    y += 15;
  }
  const height = y + 6;

  const style = [
    'text { font-family: -apple-system, BlinkMacSystemFont, "Segoe UI", Helvetica, Arial, sans-serif; font-size: 12px; }',
    '.title { font-size: 15px; font-weight: 600; }',
    '.section { font-size: 13px; font-weight: 600; }',
    '.strong { font-weight: 600; }',
    '.caption { font-size: 11px; }',
    '.bg { fill: #ffffff; stroke: #d1d9e0; }',
    '.fg { fill: #1f2328; }',
    '.muted { fill: #59636e; }',
    '.grid { stroke: #d1d9e0; stroke-width: 1; }',
    '.ours { fill: #0969da; }',
    '.jax { fill: #d4760b; }',
    '.js { fill: #8c959f; }',
    '@media (prefers-color-scheme: dark) {',
    '  .bg { fill: #0d1117; stroke: #3d444d; }',
    '  .fg { fill: #f0f6fc; }',
    '  .muted { fill: #9198a1; }',
    '  .grid { stroke: #3d444d; }',
    '  .ours { fill: #4493f8; }',
    '  .jax { fill: #f0883e; }',
    '  .js { fill: #9198a1; }',
    '}',
  ];
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" role="img" aria-labelledby="speed-title">`,
    '<title id="speed-title">Time per call of @tangent.to/grad (native, compiled), JAX jit and the JavaScript version, per workload, log scale</title>',
    `<style>\n${style.join('\n')}\n</style>`,
    `<rect class="bg" x="0.5" y="0.5" width="${WIDTH - 1}" height="${height - 1}" rx="6"/>`,
    ...grid,
    ...head,
    ...body,
    ...foot,
    '</svg>',
    '',
  ].join('\n');
}

/**
 * The chart's numbers as a Markdown table (`--table`): per workload, this
 * package native and WebAssembly, JAX and the JavaScript version with
 * their time ÷ ours.
 */
export function speedTable(results, published) {
  const mine = ours(results);
  const us = formatGiven;
  const times = (lo, hi, me) => {
    const r = (x) => x / me;
    const f = (x) => x.toFixed(x >= 10 ? 0 : x >= 1 ? 1 : 2);
    const [a, b] = [f(r(lo)), f(r(hi))];
    return a === b ? `${a}×` : `${a}–${b}×`;
  };
  const lines = [
    '| workload | this package | WebAssembly | JAX `jit` | JavaScript version |',
    '|---|---:|---:|---:|---:|',
  ];
  for (const s of SECTIONS) {
    if (!mine[s.key]) continue;
    lines.push(`| **${s.title}** | | | | |`);
    const rows = s.key === 'valueAndGrad' ? results.valueAndGrad.rows : results.higher.rows;
    for (const [name, label] of Object.entries(s.workloads)) {
      const me = mine[s.key][name];
      if (me === undefined) continue;
      const row = rows.find((r) => r.name === name);
      const wasm = s.key === 'valueAndGrad' ? row.wasm?.compiled.median : row.wasm;
      const jax = published.sections[s.key].jax.figures[name];
      const js = published.sections[s.key].js.figures[name];
      const other = ([lo, hi]) => `${formatRange([lo, hi])} (${times(lo, hi, me)})`;
      lines.push(`| ${label} | ${us(me)} | ${wasm ? us(wasm) : '—'} | ${other(jax)} | ${other(js)} |`);
    }
  }
  return lines.join('\n');
}

/** Read the two data files and write the chart to `file`. */
export function writeChart(file = SVG, { results = RESULTS, published = PUBLISHED } = {}) {
  const svg = drawChart(JSON.parse(readFileSync(results, 'utf8')), JSON.parse(readFileSync(published, 'utf8')));
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, svg);
  return file;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const argv = process.argv.slice(2);
  const usage = 'usage: node bench/chart.mjs [--out path] | --table';
  if (argv.length === 1 && argv[0] === '--table') {
    const read = (f) => JSON.parse(readFileSync(f, 'utf8'));
    console.log(speedTable(read(RESULTS), read(PUBLISHED)));
  } else if (argv.length === 0 || (argv.length === 2 && argv[0] === '--out' && argv[1])) {
    console.log(`wrote ${writeChart(argv.length === 2 ? argv[1] : SVG)}`);
  } else {
    console.error(usage);
    process.exit(2);
  }
}
