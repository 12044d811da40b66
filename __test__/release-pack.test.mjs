// Release dry runs that need no build: each per-platform package
// (npm/<platform>) packs, and its `os`, `cpu` and `libc` fields say what its
// name says, so npm installs it where its binary runs and nowhere else; and
// the release workflow (.github/workflows/release.yml) parses and builds,
// tests and publishes what package.json's `napi.targets` lists. The root
// package's tarball (its files and size budget) is checked by pack.test.mjs,
// which packs it for real.
//
// It loads no build of the package, so `npm run test:wasm` leaves it out, by
// the same `pack.test` name pattern as pack.test.mjs. It fails, never skips,
// when npm or the YAML parser (js-yaml, a devDependency) is missing.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { load as parseYaml } from 'js-yaml';

const root = fileURLToPath(new URL('..', import.meta.url));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

/** The environment for a nested npm: none of the outer `npm test`'s package and lifecycle variables. */
function cleanEnv() {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^npm_(package|lifecycle|config_local_prefix|command|node_execpath)/i.test(k) || k === 'INIT_CWD') continue;
    env[k] = v;
  }
  return env;
}

/** `npm pack --dry-run --json` in dir; returns npm's description of the tarball. */
function packDryRun(dir) {
  const cli = process.env.npm_execpath;
  const [cmd, argv] = cli && /\.(c|m)?js$/.test(cli) ? [process.execPath, [cli]] : ['npm', []];
  const r = spawnSync(cmd, [...argv, 'pack', '--dry-run', '--json', '--ignore-scripts'], {
    cwd: dir, env: cleanEnv(), encoding: 'utf8', timeout: 60_000, shell: cmd === 'npm' && process.platform === 'win32',
  });
  assert.equal(r.error, undefined, `npm pack in ${dir} (is npm installed?): ${r.error}`);
  assert.equal(r.status, 0, `npm pack --dry-run in ${dir}:\n${r.stdout}\n${r.stderr}`);
  const [info] = JSON.parse(r.stdout);
  return info;
}

// Rust's names for a target's parts, in Node's words (process.platform,
// process.arch) and napi-rs's ABI suffixes.
const OS = { linux: 'linux', darwin: 'darwin', windows: 'win32' };
const CPU = { x86_64: 'x64', aarch64: 'arm64' };

/** The npm/<platform> folder a Rust target triple's binary goes to, e.g. x86_64-unknown-linux-gnu -> linux-x64-gnu. */
function platformOf(triple) {
  const [arch, , sys, abi] = triple.split('-');
  assert.ok(OS[sys] && CPU[arch], `a target this test cannot name: ${triple}`);
  return [OS[sys], CPU[arch], abi].filter(Boolean).join('-');
}

/** What a platform package's name says its manifest must declare. */
function expectedFields(platform) {
  const [os, cpu, abi] = platform.split('-');
  const fields = { os: [os], cpu: [cpu] };
  if (os === 'linux') fields.libc = [{ gnu: 'glibc', musl: 'musl' }[abi]];
  return fields;
}

test('platformOf and expectedFields read names as npm and napi-rs write them', () => {
  assert.equal(platformOf('x86_64-unknown-linux-gnu'), 'linux-x64-gnu');
  assert.equal(platformOf('aarch64-apple-darwin'), 'darwin-arm64');
  assert.equal(platformOf('x86_64-pc-windows-msvc'), 'win32-x64-msvc');
  assert.deepEqual(expectedFields('linux-x64-musl'), { os: ['linux'], cpu: ['x64'], libc: ['musl'] });
  assert.deepEqual(expectedFields('darwin-x64'), { os: ['darwin'], cpu: ['x64'] });
});

const platforms = readdirSync(join(root, 'npm'), { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name);

test("there is one npm/<platform> package for each of package.json's napi.targets, and no other", () => {
  assert.ok(Array.isArray(pkg.napi?.targets) && pkg.napi.targets.length > 0, 'package.json napi.targets');
  assert.deepEqual([...platforms].sort(), pkg.napi.targets.map(platformOf).sort());
});

for (const platform of platforms) {
  test(`npm/${platform} packs, and its os, cpu and libc say what its name says`, () => {
    const dir = join(root, 'npm', platform);
    const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    const binary = `grad.${platform}.node`;
    assert.equal(manifest.name, `${pkg.name}-${platform}`);
    assert.equal(manifest.version, pkg.version, 'the same version as the root package');
    assert.equal(manifest.main, binary);
    assert.deepEqual(manifest.files, [binary]);
    assert.equal(manifest.license, pkg.license);
    assert.deepEqual(manifest.engines, pkg.engines);
    const want = expectedFields(platform);
    assert.deepEqual(manifest.os, want.os, 'os');
    assert.deepEqual(manifest.cpu, want.cpu, 'cpu');
    assert.deepEqual(manifest.libc, want.libc, want.libc ? 'libc' : 'libc only for linux');

    const info = packDryRun(dir);
    assert.equal(info.name, manifest.name);
    assert.equal(info.version, pkg.version);
    // The binary is there only once the release (or pack.test.mjs, for this
    // machine's platform) has copied it in; nothing but it and the two
    // files npm always adds may be.
    const files = info.files.map((f) => f.path).sort();
    const expected = ['README.md', 'package.json', ...(existsSync(join(dir, binary)) ? [binary] : [])].sort();
    assert.deepEqual(files, expected);
  });
}

test('the release workflow parses, and builds, tests and publishes every target', () => {
  const text = readFileSync(join(root, '.github', 'workflows', 'release.yml'), 'utf8');
  const wf = parseYaml(text);
  assert.equal(typeof wf, 'object');
  assert.deepEqual(Object.keys(wf.jobs).sort(), ['build', 'build-wasm', 'publish', 'test']);
  assert.deepEqual(wf.on.push.tags, ['v*'], 'runs on version tags');

  // Every napi target is built once, on a runner of its own OS (cross
  // builds for Linux only, with zig).
  const builds = wf.jobs.build.strategy.matrix.include;
  assert.deepEqual(builds.map((b) => b.target).sort(), [...pkg.napi.targets].sort());
  const RUNNER = { linux: 'ubuntu-', darwin: 'macos-', win32: 'windows-' };
  for (const { target, host } of builds) {
    assert.ok(host.startsWith(RUNNER[platformOf(target).split('-')[0]]), `${target} is built on ${host}`);
  }
  const buildRuns = wf.jobs.build.steps.map((s) => s.run ?? '').join('\n');
  assert.match(buildRuns, /napi build .*--target \$\{\{ matrix\.target \}\}/s);
  const upload = wf.jobs.build.steps.find((s) => s.uses?.startsWith('actions/upload-artifact'));
  assert.equal(upload?.with?.name, 'bindings-${{ matrix.target }}');

  // The WebAssembly core is built and tested on its own.
  const wasmRuns = wf.jobs['build-wasm'].steps.map((s) => s.run ?? '').join('\n');
  assert.match(wasmRuns, /npm run build:wasm/);
  assert.match(wasmRuns, /npm run test:wasm/);

  // Tests download binaries that the build job made.
  for (const { target } of wf.jobs.test.strategy.matrix.include) {
    assert.ok(pkg.napi.targets.includes(target), `the test job wants ${target}, which nothing builds`);
  }
  assert.equal(wf.jobs.test.needs, 'build');

  // Publishing waits for everything, runs on tags only, and publishes the
  // platform packages and the root one.
  const publish = wf.jobs.publish;
  assert.deepEqual([publish.needs].flat().sort(), ['build', 'build-wasm', 'test']);
  assert.match(publish.if, /refs\/tags\/v/);
  const publishRuns = publish.steps.map((s) => s.run ?? '').join('\n');
  assert.match(publishRuns, /node npm\/artifacts\.mjs .*--all/);
  assert.match(publishRuns, /napi pre-publish/);
  assert.match(publishRuns, /npm publish/);
});
