// The JavaScript rooms (src/js/) as ARCHITECTURE.md draws them: no import
// runs in a circle, index.js only wires a core and re-exports, the browser
// entry reaches nothing of Node's, and no file outgrows a sitting. (The Rust
// core's direction is checked by tests/layering.rs.)

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const rooms = join(root, 'src', 'js');
const files = readdirSync(rooms).filter((f) => f.endsWith('.js') && f !== 'grad.wasm.js');

/** The relative modules a file imports, as file names in src/js. */
function imports(file) {
  const text = readFileSync(join(rooms, file), 'utf8');
  return [...text.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+'\.\/([\w.-]+)'/gm)].map((m) => m[1]);
}

test('the rooms import each other without a circle', () => {
  const graph = new Map(files.map((f) => [f, imports(f)]));
  const state = new Map(); // 1: on the current path, 2: done
  const visit = (f, path) => {
    if (state.get(f) === 2) return;
    assert.notEqual(state.get(f), 1, `import cycle: ${[...path, f].join(' -> ')}`);
    state.set(f, 1);
    for (const g of graph.get(f) ?? []) visit(g, [...path, f]);
    state.set(f, 2);
  };
  for (const f of files) visit(f, []);
  assert.deepEqual(graph.get('api.js').sort(), ['compile.js', 'drivers.js', 'forms.js', 'higher.js', 'ops.js', 'plans.js', 'split.js', 'tape.js', 'threads.js']);
});

test('index.js only installs a core and re-exports the surface', () => {
  const lines = readFileSync(join(root, 'index.js'), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith('//'));
  assert.deepEqual(lines, [
    "import { install } from './src/js/binding.js';",
    "import { nativeOrWasm } from './src/js/load.js';",
    'install(nativeOrWasm());',
    "export * from './src/js/api.js';",
  ]);
});

test("the browser entry reaches nothing of Node's", () => {
  const seen = new Set();
  const walk = (f) => {
    if (seen.has(f)) return;
    seen.add(f);
    const text = readFileSync(join(rooms, f), 'utf8');
    assert.doesNotMatch(text, /from\s+'node:|\brequire\(|\bprocess\.\w/, `${f} uses Node`);
    for (const g of imports(f)) if (g !== 'grad.wasm.js') walk(g);
  };
  walk('browser.js');
  assert.ok(!seen.has('load.js'));
});

test('no file outgrows a sitting (about 500 lines)', () => {
  const walk = (dir, out = []) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p, out);
      else if (/\.(rs|js)$/.test(e.name) && e.name !== 'grad.wasm.js') out.push(p);
    }
    return out;
  };
  for (const p of walk(join(root, 'src'))) {
    const rel = p.slice(root.length);
    const lines = readFileSync(p, 'utf8').split('\n').length;
    assert.ok(lines <= 520, `${rel} has ${lines} lines`);
  }
});
