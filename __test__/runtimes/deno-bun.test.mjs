// Deno and Bun, both from npm (devDependencies), run examples/gp.mjs and the
// smoke suite (fixtures/smoke.mjs: a gradient against central differences,
// compile + toJSON/compileFromJSON bit for bit, the cholesky error, tensor
// parameters) against the package: once with the native addon, once forced
// to the WebAssembly build with TANGENT_GRAD_WASM=1.
//
// The binaries are called directly. npm 11 may skip the `deno` and `bun`
// packages' postinstall scripts, and bun's bin is then a stub that only
// prints an error; the real binary is in the platform package
// (@deno/<platform>/deno, @oven/bun-<platform>/bin/bun), or where the
// postinstall moved it.

import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { consumerProject, root } from './helpers.mjs';
import { checkGP, checkGPAgainst, checkPlans, checkTensor, checkCholesky, checkHigher, checkHigherAgainst } from './expect.mjs';
import { runChecks } from './fixtures/checks.mjs';

const modules = join(root, 'node_modules');

/** Binaries in node_modules/<scope>/<any package>/<relative>. */
const inScope = (scope, relative) =>
  existsSync(join(modules, scope)) ? readdirSync(join(modules, scope)).map((p) => join(modules, scope, p, relative)) : [];

/** The first candidate that exists and answers --version; fails with a pointer otherwise. */
function binary(name, candidates) {
  for (const file of candidates) {
    if (existsSync(file) && spawnSync(file, ['--version'], { encoding: 'utf8', timeout: 30_000 }).status === 0) return file;
  }
  assert.fail(`no working ${name} binary (tried ${candidates.join(', ')}): run \`npm install\` (${name} is a devDependency)`);
}

const RUNTIMES = {
  deno: {
    find: () => binary('deno', [join(modules, 'deno', 'deno'), ...inScope('@deno', 'deno')]),
    // --allow-ffi to load a napi addon; --allow-read and --allow-env for the
    // napi-rs loader (binding.cjs), which reads files and the environment.
    args: (script) => ['run', '--allow-ffi', '--allow-read', '--allow-env', script],
  },
  bun: {
    find: () => binary('bun', [...inScope('@oven', 'bin/bun'), join(modules, 'bun', 'bin', 'bun.exe')]),
    args: (script) => [script],
  },
};

const BUILDS = { native: undefined, wasm: '1' };

let project;
let reference; // the smoke report of this Node process

before(() => {
  project = consumerProject('deno-bun', ['smoke.mjs', 'checks.mjs', 'gp.mjs']);
  reference = runChecks();
});

after(() => project?.remove());

/** Run a script with a runtime; returns { stdout, stderr } after asserting exit 0. */
function run(runtime, build, script, cwd) {
  const env = { ...process.env, DENO_NO_UPDATE_CHECK: '1', DENO_NO_PROMPT: '1', DO_NOT_TRACK: '1' };
  delete env.TANGENT_GRAD_WASM;
  if (BUILDS[build]) env.TANGENT_GRAD_WASM = BUILDS[build];
  const bin = RUNTIMES[runtime].find();
  const r = spawnSync(bin, RUNTIMES[runtime].args(script), { cwd, env, encoding: 'utf8', timeout: 120_000 });
  const what = `${runtime} (${build}) ${script}`;
  assert.equal(r.error, undefined, `${what}: ${r.error}`);
  assert.equal(r.status, 0, `${what} exited with ${r.status ?? r.signal}\n${r.stdout}\n${r.stderr}`);
  if (build === 'native') {
    assert.doesNotMatch(r.stderr, /WebAssembly/, `${what}: the native addon did not load\n${r.stderr}`);
  }
  return r;
}

for (const runtime of Object.keys(RUNTIMES)) {
  for (const build of Object.keys(BUILDS)) {
    describe(`${runtime}, ${build} build`, () => {
      test('examples/gp.mjs: gradient agrees with central differences, compile is bit-identical', () => {
        const { stdout } = run(runtime, build, 'examples/gp.mjs', root);
        const worst = Number(stdout.match(/largest difference from central differences: (\S+)/)?.[1]);
        assert.ok(worst < 1e-5, stdout);
        assert.match(stdout, /bit for bit: yes/);
      });

      test('the smoke suite', async (t) => {
        const { stdout } = run(runtime, build, 'smoke.mjs', project.dir);
        const report = JSON.parse(stdout);
        await t.test('GP value and gradient against central differences', () => checkGP(report));
        await t.test('GP numbers as in Node, to 1e-10', () => checkGPAgainst(report, reference));
        await t.test('compile, toJSON and compileFromJSON bit for bit', () => checkPlans(report));
        await t.test('tensor parameters', () => checkTensor(report));
        await t.test('cholesky error', () => checkCholesky(report));
        await t.test('forward mode and second order', () => checkHigher(report));
        await t.test('the GP Hessian as in Node, to 1e-10', () => checkHigherAgainst(report, reference));
      });
    });
  }
}

test('deno with no permissions: import still works, on the WebAssembly build, said in one line', () => {
  const env = { ...process.env, DENO_NO_UPDATE_CHECK: '1', DENO_NO_PROMPT: '1' };
  delete env.TANGENT_GRAD_WASM;
  const r = spawnSync(RUNTIMES.deno.find(), ['run', 'smoke.mjs'], { cwd: project.dir, env, encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  const lines = r.stderr.split('\n').filter((l) => l.trim() !== '');
  assert.equal(lines.length, 1, r.stderr);
  assert.match(lines[0], /WebAssembly/);
  const report = JSON.parse(r.stdout);
  checkGP(report);
  checkPlans(report);
});

test('deno with no permissions on a terminal: no prompt, the WebAssembly build, said in one line', () => {
  // A terminal is where Deno prompts and waits (reading TANGENT_GRAD_WASM,
  // then napi-rs's loader's files and variables, prompted one by one);
  // `script` gives the run one, and a prompt answered by the closed input.
  const env = { ...process.env, DENO_NO_UPDATE_CHECK: '1' };
  delete env.TANGENT_GRAD_WASM;
  delete env.DENO_NO_PROMPT;
  const command = `${RUNTIMES.deno.find()} run smoke.mjs`;
  const r = spawnSync('script', ['-qec', command, '/dev/null'], { cwd: project.dir, env, encoding: 'utf8', timeout: 120_000, stdio: ['ignore', 'pipe', 'pipe'] });
  assert.equal(r.error, undefined, `script (util-linux) runs the command on a terminal: ${r.error}`);
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  assert.doesNotMatch(r.stdout, /requests|Allow\?/, r.stdout);
  // Through the terminal, stderr's line comes first on stdout, then the report.
  const [line, ...rest] = r.stdout.split(/\r?\n/).filter((l) => l.trim() !== '');
  assert.match(line, /using the WebAssembly build \(under Deno, allow it with --allow-ffi --allow-read --allow-env\)/);
  const report = JSON.parse(rest.join(''));
  checkGP(report);
  checkPlans(report);
});

test('deno with permissions scoped to the project: the native addon, nothing on stderr', () => {
  // Each permission asked as narrowly as the loader uses it: the package's
  // folder (read, ffi), the loader's variables, /usr/bin/ldd.
  const env = { ...process.env, DENO_NO_UPDATE_CHECK: '1', DENO_NO_PROMPT: '1' };
  delete env.TANGENT_GRAD_WASM;
  const args = ['run', `--allow-ffi=${root}`, `--allow-read=${project.dir},${root},/usr/bin/ldd`, '--allow-env', 'smoke.mjs'];
  const r = spawnSync(RUNTIMES.deno.find(), args, { cwd: project.dir, env, encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  assert.equal(r.stderr.trim(), '', 'the native addon loads, said nothing');
  const report = JSON.parse(r.stdout);
  checkGP(report);
  checkGPAgainst(report, reference);
});
