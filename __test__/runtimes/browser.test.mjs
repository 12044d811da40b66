// The package in a real browser, as ds and sem ship it: a page script that
// imports '@tangent.to/grad' is bundled by esbuild with
// `bundle, platform: 'browser', format: 'esm'` and nothing else (the
// package's "browser" export condition picks its WebAssembly
// entry), served from 127.0.0.1 without COOP/COEP headers, and run in
// Debian's headless Chromium. A module worker, bundled the same way, rebuilds
// the page's compiled plan from its JSON.
//
// Needs /usr/bin/chromium (apt-get install chromium) and fails without it.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join, resolve } from 'node:path';
import * as esbuild from 'esbuild';
import { consumerProject, serve, launchChromium, pageReport, root, browserEntry } from './helpers.mjs';
import { checkGP, checkGPAgainst, checkPlans, checkTensor, checkCholesky, checkHigher, checkHigherAgainst } from './expect.mjs';
import { runChecks } from './fixtures/checks.mjs';

const OPTIONS = { bundle: true, platform: 'browser', format: 'esm' };

let project;
let server;
let browser;
let report;
let problems;
const bundles = new Map();

/** esbuild's output for one entry, as a consumer's build would make it. */
async function bundle(entry, extra = {}) {
  return esbuild.build({ entryPoints: [join(project.dir, entry)], write: false, logLevel: 'silent', ...OPTIONS, ...extra });
}

before(async () => {
  project = consumerProject('browser', ['page.mjs', 'worker.mjs', 'checks.mjs', 'gp.mjs']);
  bundles.set('/index.html', '<!doctype html><meta charset="utf-8"><title>grad</title><link rel="icon" href="data:,"><script type="module" src="./page.js"></script>');
  for (const [name, out] of [['page.mjs', '/page.js'], ['worker.mjs', '/worker.js']]) {
    let r;
    try {
      r = await bundle(name);
    } catch (e) {
      assert.fail(`esbuild could not bundle ${name}:\n${e.errors?.map((m) => `${m.location?.file}:${m.location?.line}: ${m.text}`).join('\n') ?? e.message}`);
    }
    assert.deepEqual(r.warnings.map((w) => w.text), [], `esbuild warned while bundling ${name}`);
    bundles.set(out, r.outputFiles[0].contents);
  }
  server = await serve(bundles);
  browser = await launchChromium();
  ({ report, problems } = await pageReport(browser.context, server.url));
  assert.equal(report.fatal, undefined, `the page failed: ${report.fatal}\n${problems.join('\n')}`);
});

after(async () => {
  await browser?.close();
  await server?.close();
  project?.remove();
});

test('the "browser" condition resolves the package to its browser entry, not the Node entry', async () => {
  const { metafile } = await bundle('page.mjs', { metafile: true });
  // Paths in the metafile are relative to esbuild's working directory, the cwd.
  const inputs = Object.keys(metafile.inputs).map((f) => resolve(f));
  const ours = inputs.filter((f) => f.startsWith(root) && !f.startsWith(project.dir));
  assert.ok(ours.includes(browserEntry), `${browserEntry} is not in the bundle:\n${ours.join('\n')}`);
  assert.ok(!ours.includes(join(root, 'index.js')) && !ours.includes(join(root, 'binding.cjs')), ours.join('\n'));
});

test('the page is not cross-origin isolated, and loads without a console error', () => {
  assert.equal(report.crossOriginIsolated, false);
  assert.deepEqual(problems, []);
});

test('the GP example: value and gradient agree with central differences', () => {
  checkGP(report);
});

test('the GP example gives the numbers Node gives, to 1e-10', () => {
  checkGPAgainst(report, runChecks());
});

test('forward mode and second order: eager, compiled and rebuilt alike, against central differences', () => {
  checkHigher(report);
});

test('the GP Hessian Node gives, to 1e-10', () => {
  checkHigherAgainst(report, runChecks());
});

test('compile, toJSON and compileFromJSON are bit-identical to valueAndGrad', () => {
  checkPlans(report);
});

test('tensor parameters {data: Float64Array, shape}: gradients come back as tensors', () => {
  checkTensor(report);
});

test('a non-SPD cholesky throws an Error with SPEC\'s message', () => {
  checkCholesky(report);
});

/** The worker's answer equals the page's compiled results, bit for bit. */
function checkWorker(answer) {
  assert.equal(answer.error, undefined, answer.error);
  assert.deepStrictEqual(answer.results, report.plans.map((r) => r.compiled));
  assert.deepStrictEqual(answer.values, report.plans.map((r) => r.compiledValue));
}

test('a plan from toJSON rebuilt in a module Web Worker gives the page\'s numbers bit for bit', () => {
  checkWorker(report.worker);
});

test('a plan posted right after new Worker() is not lost while the package loads in the worker', () => {
  checkWorker(report.workerEager);
});
