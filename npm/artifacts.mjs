// `npm run artifacts`: copy built binaries into their per-platform packages,
// grad.<platform>.node → npm/<platform>/grad.<platform>.node.
//
//   node npm/artifacts.mjs                 the binaries in the package root (what `npm run build` left)
//   node npm/artifacts.mjs --dir <path>    binaries gathered elsewhere (e.g. CI artifacts of every platform)
//   node npm/artifacts.mjs --all           fail unless every platform package got its binary (before a release)
//
// `napi artifacts` does the same for a release but insists on all six
// targets at once; this copies whichever are present, so one machine can
// populate its own platform's package. The copies are build output, ignored
// by git.

import { copyFileSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const at = args.indexOf('--dir');
const from = at >= 0 ? resolve(args[at + 1] ?? '.') : root;
const all = args.includes('--all');

const copied = [];
const missing = [];
for (const name of readdirSync(join(root, 'npm')).sort()) {
  const manifest = join(root, 'npm', name, 'package.json');
  if (!existsSync(manifest)) continue;
  const { main } = JSON.parse(readFileSync(manifest, 'utf8'));
  const src = join(from, main);
  if (existsSync(src)) {
    copyFileSync(src, join(root, 'npm', name, main));
    copied.push(`npm/${name}/${main}`);
  } else {
    missing.push(main);
  }
}
for (const c of copied) console.log(`copied ${c}`);
if (missing.length > 0) console.log(`not built here: ${missing.join(', ')}`);
if (copied.length === 0 || (all && missing.length > 0)) {
  console.error(copied.length === 0 ? `no grad.<platform>.node in ${from}: run \`npm run build\` first` : 'some platforms have no binary');
  process.exit(1);
}
