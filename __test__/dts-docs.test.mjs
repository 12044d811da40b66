// index.d.ts is what an editor shows a user hovering over an export: every
// exported declaration must carry a doc comment that says something. Read
// with the TypeScript compiler's own parser (a devDependency), so a comment
// counts only where the compiler attaches it. Checked: each exported
// function (the first signature of its overloads), class, interface, type
// alias and variable; each public member of an exported class; each method
// and call signature of an exported interface (what a user calls on a
// result: `.batch`, `.hessian`, ...). Every name the package exports at run
// time must be declared, and the main entry points carry an `@example`.
// Works the same whichever core (native or WebAssembly) loads.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const DTS = fileURLToPath(new URL('../index.d.ts', import.meta.url));

/** The shortest description that says something: four words and 20 characters. */
const MIN_WORDS = 4;
const MIN_CHARS = 20;

/** The text of a node's JSDoc (its description, then its tags' text), or null without one. */
function docOf(node) {
  const docs = ts.getJSDocCommentsAndTags(node).filter(ts.isJSDoc);
  if (docs.length === 0) return null;
  const doc = docs[docs.length - 1];
  const description = ts.getTextOfJSDocComment(doc.comment) ?? '';
  const tags = (doc.tags ?? []).map((t) => ({ tag: t.tagName.text, text: ts.getTextOfJSDocComment(t.comment) ?? '' }));
  return { description: description.trim(), tags };
}

/** Why `doc` does not document `name`, or null if it does. */
function fault(name, doc) {
  if (doc === null) return 'has no doc comment';
  const text = doc.description;
  const words = text.split(/\s+/).filter((w) => /\w/.test(w));
  if (text.length === 0) return 'has a doc comment with no description (tags alone)';
  if (words.length < MIN_WORDS || text.length < MIN_CHARS) return `has a doc comment too short to say anything: "${text}"`;
  // A description that only repeats the name (`sum: sum.`) says nothing either.
  const bare = text.replace(/[`.:()\s]/g, '').toLowerCase();
  if (bare === name.replace(/^.*\./, '').toLowerCase()) return `has a doc comment that only repeats its name: "${text}"`;
  return null;
}

const isExported = (node) => (ts.getCombinedModifierFlags(node) & ts.ModifierFlags.Export) !== 0;
const isPublic = (member) =>
  !(ts.getCombinedModifierFlags(member) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) &&
  !(member.name && ts.isPrivateIdentifier(member.name));
const nameOf = (node, sf) => (node.name ? node.name.getText(sf) : undefined);

/**
 * Every declaration of `source` (a .d.ts text) that must be documented, as
 * `{ name, kind, line, doc }`: only the first of a run of overloads.
 */
function documentable(source, file = 'index.d.ts') {
  const sf = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const out = [];
  const add = (name, kind, node) => {
    const line = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1;
    out.push({ name, kind, line, doc: docOf(node) });
  };
  // Members of a class or interface: the first signature of each name, and the first call signature.
  const members = (owner, list, callable) => {
    const seen = new Set();
    for (const m of list) {
      let key;
      if (ts.isCallSignatureDeclaration(m)) key = '(call)';
      else if (ts.isConstructorDeclaration(m)) key = 'constructor';
      else if (callable && (ts.isMethodSignature(m) || ts.isMethodDeclaration(m))) key = nameOf(m, sf);
      else if (!callable && isPublic(m) && m.name) key = nameOf(m, sf);
      if (key === undefined || seen.has(key)) continue;
      seen.add(key);
      add(`${owner}.${key}`, ts.SyntaxKind[m.kind], m);
    }
  };
  const seen = new Set();
  for (const st of sf.statements) {
    if (!isExported(st)) continue;
    if (ts.isVariableStatement(st)) {
      for (const d of st.declarationList.declarations) add(nameOf(d, sf), 'variable', st);
      continue;
    }
    const name = nameOf(st, sf);
    if (name === undefined) continue;
    const kind = ts.SyntaxKind[st.kind];
    // Overloads: the first signature is the one that must speak for them all.
    if (seen.has(`${kind} ${name}`)) continue;
    seen.add(`${kind} ${name}`);
    add(name, kind, st);
    if (ts.isClassDeclaration(st)) members(name, st.members.filter(isPublic), false);
    if (ts.isInterfaceDeclaration(st)) members(name, st.members, true);
  }
  return out;
}

/** Each undocumented declaration of `source`, named with its line. */
function undocumented(source, file) {
  return documentable(source, file)
    .map((d) => ({ ...d, why: fault(d.name, d.doc) }))
    .filter((d) => d.why !== null)
    .map((d) => `${file ?? 'index.d.ts'}:${d.line}: ${d.name} (${d.kind}) ${d.why}`);
}

const source = readFileSync(DTS, 'utf8');
const found = documentable(source);
const byName = new Map(found.map((d) => [d.name, d]));

test('every export of index.d.ts, every public member of its classes and every method of its interfaces has a doc comment', () => {
  // The parse saw the file: the main entry points and the methods users call are among what was checked.
  for (const name of ['Var', 'Var.backward', 'Var.constructor', 'valueAndGrad', 'compile', 'hessian', 'solvePSD',
    'BatchMethods.batch', 'DerivativeMethods.hessian', 'ValueAndGradFn.(call)', 'CompiledFn.toJSON', 'Tensor', 'Plan']) {
    assert.ok(byName.has(name), `index.d.ts: ${name} was not found among the exported declarations`);
  }
  assert.ok(found.length >= 100, `only ${found.length} declarations found`);
  const missing = undocumented(source);
  assert.deepEqual(missing, [], `undocumented:\n${missing.join('\n')}`);
});

test('every name the package exports is declared in index.d.ts', async () => {
  const pkg = await import('../index.js');
  const declared = new Set(found.filter((d) => !d.name.includes('.')).map((d) => d.name));
  const missing = Object.keys(pkg).filter((k) => !declared.has(k));
  assert.deepEqual(missing, [], `exported at run time, not declared in index.d.ts: ${missing.join(', ')}`);
});

test('the main entry points carry an @example, and the derivative functions name their errors', () => {
  for (const name of ['valueAndGrad', 'compile', 'hessian']) {
    const doc = byName.get(name).doc;
    const example = doc.tags.find((t) => t.tag === 'example');
    assert.ok(example && example.text.includes(`${name}(`), `${name}: no @example that calls it`);
  }
  // The messages of README's (docs/API.md's) error section, word for word.
  const messages = {
    jvp: ['jvp: expected a function'],
    hvp: ['hvp: expected a function'],
    hessian: ['hessian: expected a function', 'hessian: the objective must return a scalar'],
    jacobian: ['jacobian: expected a function', 'jacobian: the function must return a scalar or a vector', 'jacobian: a 30000×10000 Jacobian holds 300000000 entries'],
    'DerivativeMethods.jvp': ['jvp: the tangent is shaped [3], unlike the parameter ([2])', `jvp: this objective holds a node built outside this package's ops, which has no forward rule.`],
    'DerivativeMethods.hessian': ['more than the 268435456 a value may hold'],
    'DerivativeMethods.jacobian': ['jacobian: a 30000×10000 Jacobian holds 300000000 entries'],
    'BatchMethods.batch': ['batch: options.threads must be a positive integer', 'a batch evaluates one shape signature'],
    'CompiledFn.toJSON': ['toJSON: call the compiled function once first, so the graph is built.'],
    solvePSD: ['cholesky: matrix is not positive definite'],
    compileFromJSON: ['compileFromJSON: not a serialized plan', 'compileFromJSON: unknown op'],
  };
  for (const [name, wanted] of Object.entries(messages)) {
    const doc = byName.get(name).doc;
    const text = [doc.description, ...doc.tags.map((t) => t.text)].join('\n').replace(/\s+/g, ' ');
    for (const m of wanted) assert.ok(text.includes(m), `${name}: its doc does not give the message "${m}"`);
  }
});

test('the check names what is undocumented, too short, or documented by tags alone', () => {
  const sample = [
    '/** A documented function that says what it computes. */',
    'export function good(x: number): number;',
    'export function bare(x: number): number;',
    '/** Too short. */',
    'export function terse(): void;',
    '/** @throws `tags: alone`, with no description */',
    'export function tagged(): void;',
    '/** An overloaded function, documented on its first signature. */',
    'export function over(x: number): number;',
    'export function over(x: string): string;',
    'export function underDoc(x: number): number;',
    '/** The second overload is documented, but the first speaks for them. */',
    'export function underDoc(x: string): string;',
    '/** A class whose members are not all documented. */',
    'export class Thing {',
    '  /** Builds a thing from nothing at all. */',
    '  constructor();',
    '  readonly size: number;',
    '  private hidden: number;',
    '}',
    '/** An interface with a method nobody documented. */',
    'export interface Calls {',
    '  (x: number): number;',
    '  run(): void;',
    '  field: number;',
    '}',
    'export type Alias = number;',
    '/** sum */',
    'export function sum(): void;',
    'function internal(): void;',
  ].join('\n');
  const faults = undocumented(sample, 'sample.d.ts');
  const named = faults.map((f) => f.replace(/^sample\.d\.ts:\d+: (\S+) .*$/, '$1'));
  assert.deepEqual(named.sort(), ['Alias', 'Calls.(call)', 'Calls.run', 'Thing.size', 'bare', 'sum', 'tagged', 'terse', 'underDoc'].sort(), faults.join('\n'));
  assert.match(faults.find((f) => f.includes(' bare ')), /^sample\.d\.ts:3: bare \(FunctionDeclaration\) has no doc comment$/);
  assert.match(faults.find((f) => f.includes(' tagged ')), /tags alone/);
  assert.match(faults.find((f) => f.includes(' terse ')), /too short/);
});
