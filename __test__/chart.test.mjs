// docs/speed.svg: bench/chart.mjs redraws it from the committed data
// (bench/results.json, bench/published.json) into a temporary file; the
// file must be well-formed XML (checked by the strict parser below, not by
// a browser's forgiving one), hold one bar per system per workload, and
// draw each number of the data: the bar's length on the log axis its
// labelled decades define, and its label. The committed chart must be the
// one the committed data draw. Independent of the package's core.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const results = JSON.parse(readFileSync(join(root, 'bench/results.json'), 'utf8'));
const published = JSON.parse(readFileSync(join(root, 'bench/published.json'), 'utf8'));

// ---------------------------------------------------------------- a strict XML reader

const NAME = /^[A-Za-z_][\w.:-]*/;

/** Throw unless `text` is entity-clean character data. */
function checkText(text, where) {
  if (text.includes('<')) throw new Error(`raw '<' in text at ${where}`);
  const amp = /&(?!(?:amp|lt|gt|quot|apos|#\d+|#x[0-9a-fA-F]+);)/.exec(text);
  if (amp) throw new Error(`bare '&' at ${where + amp.index}`);
}

/**
 * Parse an XML document into { name, attrs, children, text } elements.
 * Accepts an XML declaration, comments, elements, attributes in double or
 * single quotes and character data; rejects anything else (unclosed or
 * mismatched tags, duplicate attributes, a bare & or <, text outside the
 * root, a second root).
 */
function parseXml(src) {
  let i = 0;
  if (src.startsWith('<?xml')) {
    const end = src.indexOf('?>');
    if (end < 0) throw new Error('unterminated XML declaration');
    i = end + 2;
  }
  const stack = [];
  let root = null;
  while (i < src.length) {
    if (src.startsWith('<!--', i)) {
      const end = src.indexOf('-->', i + 4);
      if (end < 0) throw new Error(`unterminated comment at ${i}`);
      i = end + 3;
      continue;
    }
    if (src.startsWith('</', i)) {
      const m = NAME.exec(src.slice(i + 2));
      if (!m) throw new Error(`bad end tag at ${i}`);
      const rest = src.slice(i + 2 + m[0].length);
      const close = /^\s*>/.exec(rest);
      if (!close) throw new Error(`bad end tag </${m[0]} at ${i}`);
      const open = stack.pop();
      if (!open || open.name !== m[0]) throw new Error(`</${m[0]}> at ${i} closes <${open ? open.name : 'nothing'}>`);
      i += 2 + m[0].length + close[0].length;
      continue;
    }
    if (src[i] === '<') {
      const m = NAME.exec(src.slice(i + 1));
      if (!m) throw new Error(`bad start tag at ${i}`);
      const el = { name: m[0], attrs: {}, children: [], text: '' };
      let j = i + 1 + m[0].length;
      for (;;) {
        const ws = /^\s*/.exec(src.slice(j))[0].length;
        j += ws;
        if (src.startsWith('/>', j) || src[j] === '>') break;
        if (ws === 0) throw new Error(`no space before an attribute at ${j}`);
        const a = /^([A-Za-z_][\w.:-]*)\s*=\s*("([^"<]*)"|'([^'<]*)')/.exec(src.slice(j));
        if (!a) throw new Error(`bad attribute at ${j}: ${src.slice(j, j + 30)}`);
        if (Object.hasOwn(el.attrs, a[1])) throw new Error(`duplicate attribute ${a[1]} at ${j}`);
        const value = a[3] ?? a[4];
        checkText(value, j);
        el.attrs[a[1]] = value;
        j += a[0].length;
      }
      const selfClosing = src.startsWith('/>', j);
      i = j + (selfClosing ? 2 : 1);
      if (stack.length > 0) stack[stack.length - 1].children.push(el);
      else if (root) throw new Error(`a second root <${el.name}> at ${i}`);
      else root = el;
      if (!selfClosing) stack.push(el);
      continue;
    }
    const next = src.indexOf('<', i);
    const text = src.slice(i, next < 0 ? src.length : next);
    checkText(text, i);
    if (stack.length === 0) {
      if (text.trim() !== '') throw new Error(`text outside the root at ${i}`);
    } else {
      stack[stack.length - 1].text += text;
    }
    i += text.length;
  }
  if (stack.length > 0) throw new Error(`<${stack[stack.length - 1].name}> is never closed`);
  if (!root) throw new Error('no root element');
  return root;
}

/** Every element under `el` (itself included), depth first. */
const walk = (el) => [el, ...el.children.flatMap(walk)];

const decode = (s) => s.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&amp;/g, '&');

/** "3.20 µs", "1.15 ms", "85–125 µs" -> [µs, µs] (fastest, slowest). */
function readLabel(text) {
  const m = /^([\d.]+)(?: (µs|ms))?(?:–([\d.]+))? (µs|ms)$/.exec(text);
  assert.ok(m, `label "${text}"`);
  const scale = (u) => (u === 'ms' ? 1000 : 1);
  const lo = Number(m[1]) * scale(m[2] ?? m[4]);
  const hi = m[3] === undefined ? lo : Number(m[3]) * scale(m[4]);
  return [lo, hi];
}

// ---------------------------------------------------------------- the chart

/** Redraw the chart into a temp file by the script's command line; its text. */
function redraw() {
  const dir = mkdtempSync(join(tmpdir(), 'chart-'));
  try {
    const out = join(dir, 'speed.svg');
    const r = spawnSync(process.execPath, [join(root, 'bench/chart.mjs'), '--out', out], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    return readFileSync(out, 'utf8');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const svgText = redraw();

test('the strict reader rejects what is not well-formed', () => {
  const bad = [
    '<svg><rect></svg>',
    '<svg><rect/></rect></svg>',
    '<svg a="1" a="2"/>',
    '<svg a=1/>',
    '<svg>a & b</svg>',
    '<svg>a < b</svg>',
    '<svg/><svg/>',
    'text<svg/>',
    '<svg><!-- open </svg>',
    '<svg',
    '',
  ];
  for (const b of bad) assert.throws(() => parseXml(b), undefined, b);
  const ok = parseXml('<?xml version="1.0"?>\n<svg a="1" b=\'x &amp; y\'><!-- c --><g><t>a &lt; b</t></g></svg>\n');
  assert.equal(ok.name, 'svg');
  assert.equal(walk(ok).length, 3);
});

test('the chart is well-formed SVG with a title, a background and a dark scheme', () => {
  const svg = parseXml(svgText);
  assert.equal(svg.name, 'svg');
  assert.equal(svg.attrs.xmlns, 'http://www.w3.org/2000/svg');
  const [, , w, h] = svg.attrs.viewBox.split(' ').map(Number);
  assert.equal(Number(svg.attrs.width), w);
  assert.equal(Number(svg.attrs.height), h);
  const els = walk(svg);
  assert.ok(els.some((e) => e.name === 'title' && e.text.includes('JAX')));
  const style = els.find((e) => e.name === 'style').text;
  assert.match(style, /@media \(prefers-color-scheme: dark\)/);
  assert.ok(els.some((e) => e.name === 'rect' && e.attrs.class === 'bg'));
  // Everything drawn lies inside the picture.
  for (const e of els) {
    for (const k of ['x', 'x1', 'x2']) if (e.attrs[k] !== undefined) assert.ok(Number(e.attrs[k]) >= 0 && Number(e.attrs[k]) <= w, `${e.name} ${k}=${e.attrs[k]}`);
    for (const k of ['y', 'y1', 'y2']) if (e.attrs[k] !== undefined) assert.ok(Number(e.attrs[k]) >= 0 && Number(e.attrs[k]) <= h, `${e.name} ${k}=${e.attrs[k]}`);
  }
});

test('three bars per workload, each as long as its number on the labelled log axis', () => {
  const els = walk(parseXml(svgText));
  // The axis, from its labelled decades alone.
  const ticks = els.filter((e) => e.name === 'text' && /\btick\b/.test(e.attrs.class ?? ''));
  assert.ok(ticks.length >= 2);
  const unit = { µs: 1, ms: 1e3, s: 1e6 };
  const decades = ticks.map((t) => {
    const [n, u] = decode(t.text).split(' ');
    return { log: Math.log10(Number(n) * unit[u]), x: Number(t.attrs.x) };
  });
  const perDecade = (decades.at(-1).x - decades[0].x) / (decades.at(-1).log - decades[0].log);
  for (let k = 1; k < decades.length; k++) {
    assert.ok(Math.abs(decades[k].x - decades[k - 1].x - perDecade * (decades[k].log - decades[k - 1].log)) < 0.05, 'evenly spaced decades');
  }
  const xOf = (us) => decades[0].x + (Math.log10(us) - decades[0].log) * perDecade;

  // The numbers the data hold: ours from the results, the others published.
  const expected = [];
  for (const r of results.valueAndGrad.rows) if (r.name !== 'chain200') expected.push(['valueAndGrad', r.name, 'ours', r.compiled.median, [r.compiled.median, r.compiled.median]]);
  for (const r of results.higher.rows) expected.push(['higher', r.name, 'ours', r.native, [r.native, r.native]]);
  for (const [section, s] of Object.entries(published.sections)) {
    for (const system of ['js', 'jax']) {
      for (const [name, range] of Object.entries(s[system].figures)) expected.push([section, name, system, range[0], range]);
    }
  }
  assert.equal(expected.length, 30);

  const bars = els.filter((e) => e.name === 'rect' && /\bbar\b/.test(e.attrs.class ?? ''));
  const labels = els.filter((e) => e.name === 'text' && /\bvalue\b/.test(e.attrs.class ?? ''));
  assert.equal(bars.length, expected.length);
  assert.equal(labels.length, expected.length);
  const key = (e) => `${e.attrs['data-section']}/${e.attrs['data-workload']}/${e.attrs['data-system']}`;
  for (const [section, name, system, value, range] of expected) {
    const id = `${section}/${name}/${system}`;
    const bar = bars.find((b) => key(b) === id);
    assert.ok(bar, `a bar for ${id}`);
    assert.equal(Number(bar.attrs['data-value']), value, id);
    assert.match(bar.attrs.class, new RegExp(`\\b${system}\\b`), `${id}: coloured as its system`);
    const end = Number(bar.attrs.x) + Number(bar.attrs.width);
    assert.ok(Math.abs(Number(bar.attrs.x) - decades[0].x) < 0.05, `${id} starts at the axis`);
    assert.ok(Math.abs(end - xOf(value)) < 0.05, `${id}: ends at ${end}, ${value} µs is at ${xOf(value)}`);
    const label = labels.find((l) => key(l) === id);
    assert.ok(label, `a label for ${id}`);
    const [lo, hi] = readLabel(decode(label.text));
    assert.ok(Math.abs(lo - range[0]) <= 0.005 * range[0], `${id}: label ${label.text} against ${range[0]}`);
    assert.ok(Math.abs(hi - range[1]) <= 0.005 * range[1], `${id}: label ${label.text} against ${range[1]}`);
    assert.ok(Math.abs(Number(label.attrs.x) - end) < 10, `${id}: the label sits at the bar's end`);
  }
  // A group's three bars stand together, ours first.
  for (const section of Object.keys(published.sections)) {
    for (const name of Object.keys(published.sections[section].js.figures)) {
      const ys = ['ours', 'jax', 'js'].map((s) => Number(bars.find((b) => key(b) === `${section}/${name}/${s}`).attrs.y));
      assert.ok(ys[0] < ys[1] && ys[1] < ys[2] && ys[2] - ys[0] < 40, `${section}/${name}: ${ys}`);
    }
  }
});

test('the caption dates the run and names the machine', () => {
  const captions = walk(parseXml(svgText))
    .filter((e) => e.name === 'text' && /\bcaption\b/.test(e.attrs.class ?? ''))
    .map((e) => decode(e.text))
    .join(' ');
  assert.ok(captions.includes(results.valueAndGrad.date), captions);
  assert.ok(captions.includes(results.higher.date), captions);
  assert.ok(captions.includes(results.valueAndGrad.machine.cpu), captions);
  assert.ok(captions.includes(`${results.valueAndGrad.machine.cores} cores`), captions);
  for (const s of Object.values(published.sections)) assert.ok(captions.includes(s.jax.date), captions);
});

test('the committed docs/speed.svg is the one the committed data draw', () => {
  assert.equal(readFileSync(join(root, 'docs/speed.svg'), 'utf8'), svgText, 'run npm run bench:chart and commit docs/speed.svg');
});

test('every published figure says where and when it comes from', () => {
  for (const [section, s] of Object.entries(published.sections)) {
    for (const system of ['js', 'jax']) {
      assert.ok(s[system].source.length > 20, `${section}.${system}.source`);
      assert.match(s[system].date, /20\d\d-\d\d-\d\d/, `${section}.${system}.date`);
      for (const [name, [lo, hi]] of Object.entries(s[system].figures)) {
        assert.ok(lo > 0 && hi >= lo, `${section}.${system}.${name}`);
      }
    }
  }
  for (const section of ['valueAndGrad', 'higher']) {
    assert.match(results[section].date, /^20\d\d-\d\d-\d\d$/);
    assert.ok(results[section].machine.cpu && results[section].machine.cores > 0, `${section}.machine`);
  }
});
