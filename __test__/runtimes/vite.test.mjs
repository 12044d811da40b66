// A Vite production build of a tiny app that imports '@tangent.to/grad'
// (Vite picks the package's "browser" condition, the WebAssembly entry),
// loaded in Debian's headless Chromium from 127.0.0.1 without COOP/COEP.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join, normalize } from 'node:path';
import { build } from 'vite';
import { consumerProject, serve, launchChromium, pageReport } from './helpers.mjs';
import { checkGP, checkPlans, checkCholesky, checkHigher } from './expect.mjs';

let project;
let outDir;
let server;
let browser;
let report;
let problems;

before(async () => {
  project = consumerProject('vite', ['vite-main.mjs', 'checks.mjs', 'gp.mjs']);
  outDir = join(project.dir, 'dist');
  const html = '<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><script type="module" src="./vite-main.mjs"></script>';
  writeFileSync(join(project.dir, 'index.html'), html);
  await build({ root: project.dir, configFile: false, logLevel: 'warn', build: { outDir } });
  server = await serve((path) => {
    const file = join(outDir, normalize(path));
    return file.startsWith(outDir) && existsSync(file) ? readFileSync(file) : undefined;
  });
  browser = await launchChromium();
  ({ report, problems } = await pageReport(browser.context, server.url));
  assert.equal(report.fatal, undefined, `the built app failed: ${report.fatal}\n${problems.join('\n')}`);
});

after(async () => {
  await browser?.close();
  await server?.close();
  project?.remove();
});

test('vite build emits the page and its script, and the app loads without a console error', () => {
  const assets = readdirSync(join(outDir, 'assets'));
  assert.ok(existsSync(join(outDir, 'index.html')));
  assert.ok(assets.some((f) => f.endsWith('.js')), assets.join(', '));
  assert.deepEqual(problems, []);
});

test('the built app computes a correct gradient', () => {
  const x = [0, 0.5, -1];
  const close = (a, b) => Math.abs(a - b) <= 1e-15 * Math.abs(b);
  assert.ok(close(report.value, x.reduce((a, v) => a + Math.exp(2 * v), 0)), `value ${report.value}`);
  assert.equal(report.gradient.length, 3);
  report.gradient.forEach((g, i) => assert.ok(close(g, 2 * Math.exp(2 * x[i])), `gradient[${i}] = ${g}`));
});

test('the built app passes the GP, plan, cholesky and second-order checks', () => {
  checkGP(report);
  checkPlans(report);
  checkCholesky(report);
  checkHigher(report);
});
