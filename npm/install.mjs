// The package's `install` script.
//
// In a development checkout (this directory is not inside node_modules) it
// always builds the addon from source in release mode with `npm run build`
// (napi build, which also writes the loader binding.cjs and binding.d.ts),
// and the WebAssembly core with `npm run build:wasm`.
//
// Installed as a dependency, it first asks the generated loader whether a
// prebuilt binary loads here: `grad.<platform>.node` beside binding.cjs (the
// tarball carries the one of the machine that packed it) or the optional
// package `@tangent.to/grad-<platform>`. If one loads, it does nothing.
// Otherwise it builds from source with cargo and copies the library to
// `grad.<platform>.node`, where the shipped loader looks first. It calls cargo
// directly rather than `napi build`, so consumers never download @napi-rs/cli
// (~80 MB with its dependencies) only to rebuild a loader the tarball ships.
// None of this is required: where it fails, the package runs on the
// WebAssembly build the tarball carries, and the install still succeeds.
//
// Environment:
//   TANGENT_GRAD_BUILD_FROM_SOURCE=1   build from source even if a binary loads
//   CARGO_TARGET_DIR                   where cargo builds (default: a temporary
//                                      directory, removed afterwards)

import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const say = (msg) => console.error(`@tangent.to/grad: ${msg}`);
const fail = (msg) => {
  say(msg);
  process.exit(1);
};

/** Run a command with inherited output; on failure, `onFail` with the reason. */
function run(cmd, args, options = {}, onFail = fail) {
  const r = spawnSync(cmd, args, { stdio: 'inherit', cwd: root, ...options });
  if (r.error) onFail(`could not run ${cmd}: ${r.error.message}`);
  if (r.status !== 0) onFail(`${[cmd, ...args].join(' ')} failed (exit ${r.status ?? r.signal})`);
}

// ---------------------------------------------------------------- development checkout

const insideNodeModules = root.split(sep).includes('node_modules');

if (!insideNodeModules) {
  if (!existsSync(join(root, 'node_modules', '@napi-rs', 'cli'))) {
    fail('this is a development checkout without its devDependencies; run `npm install` (not --omit=dev).');
  }
  say('development checkout: building the addon and the WebAssembly core from source (release)');
  const npm = process.env.npm_execpath;
  for (const script of ['build', 'build:wasm']) {
    if (npm && /\.(c|m)?js$/.test(npm)) run(process.execPath, [npm, 'run', script]);
    else run('npm', ['run', script], { shell: process.platform === 'win32' });
  }
  process.exit(0);
}

// ---------------------------------------------------------------- installed as a dependency
//
// From here on the script is an optional speed-up: without a native addon
// the package runs on its WebAssembly build, so nothing here fails the
// install. It says what happened and exits 0.

const consumerFail = (msg) => {
  say(`${msg}\nThe package will use its WebAssembly build, which needs no install step.`);
  process.exit(0);
};

function isMusl() {
  if (process.platform !== 'linux') return false;
  try {
    return readFileSync('/usr/bin/ldd', 'utf8').includes('musl');
  } catch {
    const header = process.report?.getReport?.()?.header;
    return header ? !header.glibcVersionRuntime : false;
  }
}

/** The suffix napi-rs names this platform's binary with, as the loader does. */
function platformName() {
  const { platform, arch } = process;
  if (platform === 'linux') {
    const musl = isMusl();
    if (arch === 'arm') return `linux-arm-${musl ? 'musleabihf' : 'gnueabihf'}`;
    if (['ppc64', 's390x'].includes(arch)) return `linux-${arch}-gnu`;
    return `linux-${arch}-${musl ? 'musl' : 'gnu'}`;
  }
  if (platform === 'darwin' || platform === 'freebsd') return `${platform}-${arch}`;
  if (platform === 'win32') {
    const v = process.config?.variables ?? {};
    const gnu = v.shlib_suffix === 'dll.a' || v.node_target_type === 'shared_library';
    return `win32-${arch}-${gnu && arch === 'x64' ? 'gnu' : 'msvc'}`;
  }
  if (platform === 'android') return arch === 'arm' ? 'android-arm-eabi' : `android-${arch}`;
  return `${platform}-${arch}`;
}

const loader = join(root, 'binding.cjs');
if (!existsSync(loader)) consumerFail('binding.cjs is missing from this package; it is generated at pack time. Reinstall the package.');

/** Whether the loader finds a working binary, checked in a fresh process: { ok, why }. */
function bindingLoads() {
  const code = `const b = require(${JSON.stringify(loader)}); if (typeof b.opCodes !== 'function') process.exit(3);`;
  const r = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8' });
  return { ok: r.status === 0, why: (r.stderr || '').trim().split('\n').slice(0, 4).join('\n') };
}

const forced = /^(1|true|yes)$/i.test(process.env.TANGENT_GRAD_BUILD_FROM_SOURCE ?? '');
const name = platformName();
if (!forced && bindingLoads().ok) process.exit(0);

say(
  forced
    ? `TANGENT_GRAD_BUILD_FROM_SOURCE is set: building the native addon from source for ${name} (two to four minutes)`
    : `no prebuilt binary for ${name} loads here: building the native addon from source with cargo (two to four minutes)`,
);

const cargo = process.env.CARGO ?? 'cargo';
const probe = spawnSync(cargo, ['--version'], { encoding: 'utf8' });
if (probe.error || probe.status !== 0) {
  consumerFail(
    `building from source needs Rust's cargo, which was not found. ` +
      `Install Rust from https://rustup.rs (then open a new shell) and reinstall @tangent.to/grad.`,
  );
}

const ownTarget = process.env.CARGO_TARGET_DIR ? null : mkdtempSync(join(tmpdir(), 'tangent-grad-build-'));
const targetDir = ownTarget ?? resolve(process.env.CARGO_TARGET_DIR);
const env = { ...process.env, CARGO_TARGET_DIR: targetDir };
// A cdylib on musl must link the C runtime dynamically (napi build does the same).
if (name.includes('musl')) env.RUSTFLAGS = `${env.RUSTFLAGS ?? ''} -C target-feature=-crt-static`.trim();

try {
  run(cargo, ['build', '--release', '--lib', '--features', 'node', '--locked'], { env }, consumerFail);
  const lib =
    process.platform === 'win32'
      ? 'tangent_grad.dll'
      : process.platform === 'darwin'
        ? 'libtangent_grad.dylib'
        : 'libtangent_grad.so';
  const built = join(targetDir, 'release', lib);
  if (!existsSync(built)) consumerFail(`cargo finished but ${built} is not there`);
  const dest = join(root, `grad.${name}.node`);
  copyFileSync(built, dest);
  const check = bindingLoads();
  if (!check.ok) consumerFail(`built ${dest}, but it does not load:\n${check.why}`);
  say(`built ${dest}`);
} finally {
  if (ownTarget) rmSync(ownTarget, { recursive: true, force: true });
}
