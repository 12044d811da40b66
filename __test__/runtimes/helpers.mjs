// Shared by the runtime tests: a consumer project that has this checkout
// installed as `@tangent.to/grad`, a static server on 127.0.0.1, and
// Debian's headless Chromium driven by playwright-core.

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = fileURLToPath(new URL('../..', import.meta.url));
export const fixtures = fileURLToPath(new URL('./fixtures/', import.meta.url));
export const CHROMIUM = '/usr/bin/chromium';
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
/** The file the "browser" export condition names (the WebAssembly entry). */
export const browserEntry = join(root, pkg.exports?.['.']?.browser ?? 'no "browser" condition in package.json exports');

/**
 * A temporary project whose node_modules/@tangent.to/grad links to this
 * checkout, as `npm install ../grad` (a `file:` dependency) leaves it, with
 * the given fixtures copied in. Returns its directory and a `remove()`.
 */
export function consumerProject(prefix, fixtureNames = []) {
  for (const f of [browserEntry, join(root, 'index.js')]) {
    assert.ok(existsSync(f), `${f} is missing: run \`npm run build:wasm\` (and \`npm run build\`) first`);
  }
  const dir = mkdtempSync(join(tmpdir(), `tangent-grad-${prefix}-`));
  writeFileSync(join(dir, 'package.json'), JSON.stringify({
    name: `${prefix}-consumer`, private: true, type: 'module', dependencies: { '@tangent.to/grad': `file:${root}` },
  }));
  mkdirSync(join(dir, 'node_modules', '@tangent.to'), { recursive: true });
  symlinkSync(root, join(dir, 'node_modules', '@tangent.to', 'grad'), 'dir');
  for (const f of fixtureNames) cpSync(join(fixtures, f), join(dir, f));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.css': 'text/css', '.wasm': 'application/wasm' };

/**
 * Serve `files` (a Map of URL path -> contents, or a function of the path
 * returning contents or undefined) on 127.0.0.1 at a free port, with a
 * Content-Type and nothing else: no COOP/COEP, so the page is not
 * cross-origin isolated. Returns { url, close() }.
 */
export async function serve(files) {
  const lookup = typeof files === 'function' ? files : (p) => files.get(p);
  const server = createServer((req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    const body = lookup(path === '/' ? '/index.html' : path);
    if (body === undefined) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'Content-Type': TYPES[extname(path)] ?? (path === '/' ? 'text/html' : 'application/octet-stream') });
    res.end(body);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/**
 * Debian's Chromium, headless, with a fresh profile; never a downloaded
 * browser. Fails (does not skip) when it is not installed.
 * Returns { context, close() }.
 */
export async function launchChromium() {
  assert.ok(
    existsSync(CHROMIUM),
    `${CHROMIUM} is missing: the browser tests need Debian's Chromium (apt-get install -y chromium)`,
  );
  const { chromium } = await import('playwright-core');
  const profile = mkdtempSync(join(tmpdir(), 'tangent-grad-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/**
 * Open url in a new page and wait for the page to set `window.report`;
 * returns it. Page errors and console errors are collected and shown if no
 * report arrives.
 */
export async function pageReport(context, url, timeout = 30_000) {
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(`console.${m.type()}: ${m.text()}`); });
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  page.on('response', (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()} for ${r.url()}`); });
  await page.goto(url);
  try {
    await page.waitForFunction(() => window.report !== undefined, null, { timeout });
  } catch (e) {
    assert.fail(`the page at ${url} reported nothing within ${timeout} ms:\n${problems.join('\n') || e.message}`);
  }
  const report = await page.evaluate(() => window.report);
  await page.close();
  return { report, problems };
}
