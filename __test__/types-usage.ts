// Type-level checks of index.d.ts: every export used as a user would, and a
// few misuses that must not compile (each `@ts-expect-error` fails the check
// if the line below it is accepted). Checked by `tsc --noEmit -p
// __test__/tsconfig.json`; never run. It imports the package by its own name,
// so the "exports" map's "types" entry is exercised too.

import {
  Var, variable,
  tensor, isTensor, asTensor, toNested, zeros, eye,
  add, sub, mul, div, neg, exp, log, sqrt, square, pow, tanh, sigmoid, maximum, minimum, relu, lgamma,
  sum, mean,
  matmul, dot, transpose, diagPart, trace, addDiag, reshape, slice, concat,
  cholesky, triangularSolve, logdetPSD, solvePSD, solveGeneral, inv,
  grad, valueAndGrad, valueAndGradFns, splitValueAndGrad, compile, compileFromJSON, jacobian,
  jvp, hvp, hessian,
} from '@tangent.to/grad';
import type {
  Tensor, Operand, Value, Nested, Plan, PlanNode, PlanOpNode, GradientOf, CompiledFn, RebuiltFn, ValueGradPair,
  BatchOptions, PackedBatch,
} from '@tangent.to/grad';

/** Compile-time equality: `expectType<T>()(x)` accepts x only if its type is exactly T. */
type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function assertType<A, B>(_: Equals<A, B>): void {}

// ---------------------------------------------------------------- tensors and Vars

const t: Tensor = tensor(new Float64Array([1, 2, 3, 4]), [2, 2]);
const t2: Tensor = tensor([1, 2, 3], [3]);
const z: Tensor = zeros([2, 3]);
const I: Tensor = eye(3);
const ok: boolean = isTensor(t);
const unknownThing: unknown = { data: new Float64Array(1), shape: [] };
if (isTensor(unknownThing)) {
  const d: Float64Array = unknownThing.data;
  void d;
}
const at: Tensor = asTensor([[1, 2], [3, 4]], 'A');
const atRows: Tensor = asTensor([new Float64Array(2), new Float64Array(2)]);
const nested: Nested = toNested(at);
void [t2, z, I, ok, atRows, nested];

const x: Var = variable([1, 2, 3]);
const xs: Var = variable(2.5, 'x');
const v: Tensor = x.value;
const data: Float64Array = x.data;
const shape: number[] = x.shape;
const scalar: boolean = x.isScalar;
const parents: Var[] = x.parents;
const spec = x.spec;
if (spec !== null) {
  const opName: string = spec.op;
  void opName;
}
x.backward([1, 1, 1]);
xs.backward();
const g: Float64Array | null = x.grad;
// @ts-expect-error the adjoint may be null before a sweep
const gStrict: Float64Array = x.grad;
// @ts-expect-error a Var's value is read-only
x.value = t;
void [v, data, shape, scalar, parents, g, gStrict];

// A Var is a tensor, and hand-built nodes take a backward closure.
const asT: Tensor = x;
const hand = new Var({ data: Float64Array.of(4), shape: [] }, [xs], (adj) => [mul(adj[0], 2)]);
const leaf = new Var(3);
const full = new Var([1, 2], [], null, null, { op: 'custom' });
void [asT, hand, leaf, full];

// ---------------------------------------------------------------- ops

const A = [[4, 1], [1, 3]];
const b = new Float64Array([1, 2]);
const ops: Var[] = [
  add(x, 1), add(x, x, x, 2), mul([[1, 2], [3, 4]], A), mul(x, x, x), sub(x, 1), div(1, x),
  neg(x), exp(x), log(x), sqrt(x), square(x), pow(x, 3), tanh(x), sigmoid(x),
  maximum(x, 0), minimum(x, 0), relu(x), lgamma(x),
  sum(x), mean(x),
  matmul(A, b), matmul(A, A), dot(b, b), transpose(A), diagPart(A), trace(A), addDiag(A, 0.5), addDiag(A, [1, 2]),
  reshape(x, [3, 1]), reshape(sum(x), []), slice(x, [1], [2]), slice(A, [0, 0], [1, 2]),
  concat([x, 1, [2, 3]]), concat([A, A], { axis: 1 }), concat([A, t]),
  cholesky(A), triangularSolve(cholesky(A), b), triangularSolve(A, b, { lower: false }),
  logdetPSD(A), solvePSD(A, b), solveGeneral(A, b), inv(A),
];
void ops;

// @ts-expect-error add needs at least two operands
add(x);
// @ts-expect-error unary ops take exactly one operand
exp(x, x);
// @ts-expect-error sub is strictly binary
sub(x, x, x);
// @ts-expect-error the exponent is a number, not a Var
pow(x, xs);
// @ts-expect-error concat's axis is 0 or 1
concat([A, A], { axis: 2 });
// @ts-expect-error triangularSolve's option is `lower`
triangularSolve(A, b, { upper: true });
// @ts-expect-error rank is capped at 2
reshape(x, [1, 1, 3]);
// @ts-expect-error strings are not operands
log('1');

// Lists of unknown length (another Var's shape, a computed start) are checked when the op runs.
const V = variable([[1, 2], [3, 4]]);
const viewed: Var[] = [reshape(x, V.shape), slice(V, V.shape.map(() => 0), V.shape), concat([A, A], { axis: [0, 1][1] })];
void viewed;
// @ts-expect-error slice's start has one entry per axis, at most two
slice(A, [0, 0, 0], [1, 1, 1]);

// ---------------------------------------------------------------- valueAndGrad and grad

// An objective written over the parameters' values, as in the JavaScript version.
const vgMap = valueAndGrad((p: { a: number; b: number[] }) => add(square(p.a), sum(square(p.b))));
const rMap = vgMap({ a: 1, b: [1, 2] });
assertType<typeof rMap, { value: number; gradient: { a: number; b: number[] } }>(true);
const ga: number = rMap.gradient.a;
const gb: number[] = rMap.gradient.b;
// @ts-expect-error b's gradient is a number[], not a number
const gbWrong: number = rMap.gradient.b;
// @ts-expect-error a parameter the objective declares is missing
vgMap({ a: 1 });
void [ga, gb, gbWrong];

// An objective written over Vars; the gradient follows each argument's form.
const vgVars = valueAndGrad((p: { W: Var; b: Var; s: Var; rows: Var }) => add(sum(p.W), sum(p.b), p.s, sum(p.rows)));
const rVars = vgVars({ W: tensor(new Float64Array(4), [2, 2]), b: new Float64Array(3), s: 2, rows: [new Float64Array(2), [1, 2]] });
assertType<typeof rVars.gradient, { W: Tensor; b: number[]; s: number; rows: number[][] }>(true);

// A single parameter.
const vgOne = valueAndGrad((q: Var) => sum(square(q)));
const r1 = vgOne([1, 2, 3]);
assertType<typeof r1.gradient, number[]>(true);
const r2 = vgOne(3);
assertType<typeof r2.gradient, number>(true);
const r3 = vgOne([[1, 2], [3, 4]]);
assertType<typeof r3.gradient, number[][]>(true);
const r4 = vgOne(t);
assertType<typeof r4.gradient, Tensor>(true);
const fwd: Nested = vgOne.value([1, 2]);
void fwd;

// Inputs: a {name: value} map fed as leaves.
const vgIn = valueAndGrad((p: { w: Var }, d: { x: Var; y: Var }) => sum(square(sub(mul(p.w, d.x), d.y))));
const rIn = vgIn({ w: 2 }, { x: [1, 2], y: new Float64Array([2, 5]) });
const gw: number = rIn.gradient.w;
// @ts-expect-error input y is missing
vgIn({ w: 2 }, { x: [1, 2] });
void gw;

// No annotation: parameters are `any` inside, the gradient still follows the argument.
const vgLoose = valueAndGrad((p) => add(square(p.mu), square(p.sigma)));
const rLoose = vgLoose({ mu: 3, sigma: 4 });
assertType<typeof rLoose.gradient, { mu: number; sigma: number }>(true);

const gOnly = grad((p: { a: Var }) => square(p.a));
const gOnlyR: { a: number } = gOnly({ a: 2 });
const gOnlyV: Nested = gOnly.value({ a: 2 });
void [gOnlyR, gOnlyV];

// @ts-expect-error valueAndGrad needs a function
valueAndGrad(5);
// @ts-expect-error the objective must return a Var, not a number
valueAndGrad((p: Var) => 3);

// ---------------------------------------------------------------- compile and plans

const c: CompiledFn<{ w: Var; b: Var }, { x: Var; y: Var }> = compile((p: { w: Var; b: Var }, d: { x: Var; y: Var }) =>
  sum(square(sub(mul(p.w, d.x), add(d.y, p.b)))),
);
const rc = c({ w: 2, b: [0.5, 0.5] }, { x: [1, 2], y: [2, 5] });
assertType<typeof rc, { value: number; gradient: { w: number; b: number[] } }>(true);
const cv: Nested = c.value({ w: 2, b: [0.5, 0.5] }, { x: [1, 2], y: [2, 5] });
const plan: Plan = c.toJSON();
const version: 2 = plan.version;
const input: 'map' | 'single' = plan.input;
const root: number = plan.root;
for (const node of plan.nodes) {
  switch (node.kind) {
    case 'param': {
      const name: string | undefined = node.name;
      void name;
      break;
    }
    case 'input': {
      const name: string = node.name;
      void name;
      break;
    }
    case 'const': {
      const d: Array<number | null> = node.data;
      void d;
      break;
    }
    case 'op': {
      const parentsIdx: number[] = node.parents;
      if (node.op === 'pow') {
        const k: number = node.args[0];
        void k;
      }
      if (node.op === 'triangularSolve') {
        const lower: boolean = node.args[0].lower;
        void lower;
      }
      void parentsIdx;
      break;
    }
  }
}
void [cv, version, input, root];

const rebuilt: RebuiltFn = compileFromJSON(plan);
const rb = rebuilt({ w: 2, b: [0.5, 0.5] }, { x: [1, 2], y: [2, 5] });
const rbw = rb.gradient;
const rbv: Nested = rebuilt.value({ w: 2, b: [0.5, 0.5] }, { x: [1, 2], y: [2, 5] });
const fromText = compileFromJSON(JSON.parse(JSON.stringify(plan)));
const fromString: RebuiltFn = compileFromJSON(JSON.stringify(plan));
const split3 = splitValueAndGrad(rebuilt);
const s3g = split3.gradient({ w: 1, b: [0, 0] }, { x: [1, 2], y: [2, 5] });
const vgSplit = splitValueAndGrad(vgMap);
const vgSplitG: { a: number; b: number[] } = vgSplit.gradient({ a: 1, b: [2] });
void [rbw, rbv, fromText, s3g, vgSplitG];
// @ts-expect-error a rebuilt plan has no objective, so no toJSON
rebuilt.toJSON();

// ---------------------------------------------------------------- many points per call

const ins = { x: [1, 2], y: [2, 5] };
const many = c.batch([{ w: 2, b: [0.5, 0.5] }, { w: 1, b: [0, 1] }], ins, { threads: 2 });
assertType<typeof many, { value: number; gradient: { w: number; b: number[] } }[]>(true);
const manyDefault = c.batch([{ w: 2, b: new Float64Array(2) }], ins);
const manyB: number[] = manyDefault[0].gradient.b;
const one = c.async({ w: 2, b: [0.5, 0.5] }, ins);
assertType<typeof one, Promise<{ value: number; gradient: { w: number; b: number[] } }>>(true);
const later = c.batchAsync([{ w: 2, b: [0.5, 0.5] }], ins, { threads: 1 });
assertType<typeof later, Promise<{ value: number; gradient: { w: number; b: number[] } }[]>>(true);
const rebuiltMany = rebuilt.batch([{ w: 2, b: [0.5, 0.5] }], ins);
const rebuiltOne = rebuilt.async({ w: 2, b: [0.5, 0.5] }, ins);
const rebuiltLater = rebuilt.batchAsync([{ w: 2, b: [0.5, 0.5] }], ins, {});
void [manyB, rebuiltMany, rebuiltOne, rebuiltLater];

const vec = compile((q: Var) => sum(square(q)));
const packedPoints = tensor(new Float64Array(6), [2, 3]);
const packed: PackedBatch = vec.batch(packedPoints);
const packedValues: Float64Array = packed.values;
const packedGradients: Tensor = packed.gradients;
const packedLater: Promise<PackedBatch> = vec.batchAsync(packedPoints, undefined, { threads: 2 });
const rows: number[][] = vec.batch([[1, 2, 3], [4, 5, 6]]).map((r) => r.gradient);
const tensors: Tensor[] = vec.batch([packedPoints, packedPoints]).map((r) => r.gradient);
const scalars: number[] = compile((x: Var) => square(x)).batch([1, 2, 3]).map((r) => r.gradient);
const opts: BatchOptions = { threads: 4 };
void [packedValues, packedGradients, packedLater, rows, tensors, scalars, opts];
// @ts-expect-error threads is a number
vec.batch([[1]], undefined, { threads: '2' });
// @ts-expect-error points are an array of parameter values or a tensor
vec.batch(5);
// @ts-expect-error async takes one point, not an array of maps
c.async([{ w: 2, b: [0.5, 0.5] }], ins);
// @ts-expect-error not a plan
compileFromJSON({ version: 3, nodes: [], root: 0 });
// @ts-expect-error compile needs a function
compile(42);

// A plan written by hand (the schema of SPEC §8).
const handPlan: Plan = {
  version: 2,
  input: 'map',
  nodes: [
    { kind: 'param', name: 'a', shape: [2] },
    { kind: 'input', name: 'k', shape: [] },
    { kind: 'const', shape: [2], data: [1, null] },
    { kind: 'op', op: 'mul', parents: [0, 1] },
    { kind: 'op', op: 'pow', parents: [3], args: [2] },
    { kind: 'op', op: 'concat', parents: [4, 2], list: true },
    { kind: 'op', op: 'reshape', parents: [5], args: [[2, 2]] },
    { kind: 'op', op: 'slice', parents: [6], args: [[0, 0], [1, 2]] },
    { kind: 'op', op: 'sum', parents: [7] },
  ],
  root: 8,
};
const badNode: PlanNode = {
  kind: 'op',
  // @ts-expect-error trace is a composite, never a node of its own
  op: 'trace',
  parents: [0],
};
const opNode: PlanOpNode = { kind: 'op', op: 'triangularSolve', parents: [0, 1], args: [{ lower: true }] };
void [handPlan, badNode, opNode];

// ---------------------------------------------------------------- the mc pair

const pair = valueAndGradFns((p: { mu: Var; sigma: Var }) => add(square(p.mu), square(p.sigma)));
const pv: number = pair.value({ mu: 3, sigma: 4 });
const pg: { mu: number; sigma: number } = pair.gradient({ mu: 3, sigma: 4 });
const maybe: CompiledFn | undefined = pair.compiled;
void [pv, pg, maybe];

const cpair = valueAndGradFns((q: Var) => sum(square(q)), { compile: true });
const compiledFn: CompiledFn<Var> = cpair.compiled;
const cpg: number[] = cpair.gradient([1, 2]);
void [compiledFn, cpg];

const split: ValueGradPair<Var> = splitValueAndGrad(compile((q: Var) => sum(exp(q))));
const splitG: number[] = split.gradient([0, 1]);
const handVg = (q: number[]) => ({ value: q[0] * q[0], gradient: [2 * q[0]] });
const split2 = splitValueAndGrad(handVg);
const s2v: number = split2.value([3]);
const s2g: number[] = split2.gradient([3]);
void [splitG, s2v, s2g];

// ---------------------------------------------------------------- jacobian

const J: number[][] = jacobian((u) => mul(u, u))([1, 2, 3]);
const J2: number[][] = jacobian((u) => sum(u))(new Float64Array(3));
// @ts-expect-error the function must return a Var
jacobian((u: number) => u);
// Annotated in the call's form, as the other drivers take it.
const J3: number[][] = jacobian((u: number[]) => exp(u))([1, 2]);
// Parameters annotated as the Vars the objective receives (docs/API.md):
// shapes read, and the gradient in the call's forms.
const shaped = valueAndGrad((p: { a: Var; b: Var }) => add(square(p.a), sum(square(slice(p.b, [1], [p.b.shape[0] - 1])))));
const shapedG: { a: number; b: number[] } = shaped({ a: 1, b: [1, 2, 3] }).gradient;
void [J, J2, J3, shapedG];

// ---------------------------------------------------------------- forward mode and second order

const jv = jvp((p: { a: Var; b: Var }) => mul(p.a, p.b))({ a: 1, b: [1, 2] }, { a: 1, b: [0, 1] });
const tangent: Nested = jv.tangent;
const hv = hvp((p: { a: Var; b: Var }) => sum(mul(p.a, p.b)))({ a: 1, b: [1, 2] }, { a: 0, b: [1, 0] });
const hvB: number[] = hv.hvp.b;
const hvA: number = hv.gradient.a;
const he = hessian((q: Var) => sum(square(q)))([1, 2]);
const H: number[][] = he.hessian;
const heG: number[] = he.gradient;
const cq = compile((q: Var) => sum(exp(q)));
const cH: number[][] = cq.hessian(new Float64Array(2)).hessian;
const cJ: number[][] = cq.jacobian([1, 2]);
const cT: Nested = cq.jvp([1, 2], [0, 1]).tangent;
const rH: number[][] = compileFromJSON(cq.toJSON()).hessian([1, 2]).hessian;
// @ts-expect-error hvp takes a direction
cq.hvp([1, 2]);
// @ts-expect-error jvp needs an objective
jvp(3);
// Tangents follow the parameters passed, even where the objective leaves them untyped.
const untyped = (p: any) => add(square(p.a), sum(square(p.b)));
const jvUntyped: Nested = jvp(untyped)({ a: 1, b: [1, 2] }, { a: 0, b: new Float64Array(2) }).tangent;
void jvUntyped;
// @ts-expect-error a map's tangent needs every key
jvp(untyped)({ a: 1, b: [1, 2] }, { a: 1 });
// @ts-expect-error a map's tangent is a map
hvp(untyped)({ a: 1, b: [1, 2] }, 5);
// @ts-expect-error a map's tangent is a map, not one vector
compile(untyped).jvp({ a: 1, b: [1, 2] }, [1, 2, 3]);
// @ts-expect-error the tangent has no key z
compile(untyped).hvp({ a: 1, b: [1, 2] }, { a: 1, b: [1, 2], z: 3 });
// @ts-expect-error a packed tensor of points needs one vector parameter, not a map
compile((p: { a: Var; b: Var }) => add(square(p.a), sum(p.b))).batch(tensor(new Float64Array(4), [2, 2]));
// @ts-expect-error the same for batchAsync
compile((p: { a: Var; b: Var }) => add(square(p.a), sum(p.b))).batchAsync(tensor(new Float64Array(4), [2, 2]));
void [tangent, hvB, hvA, H, heG, cH, cJ, cT, rH];

// ---------------------------------------------------------------- type helpers

assertType<GradientOf<{ a: Float64Array; b: Tensor; c: Float64Array[] }>, { a: number[]; b: Tensor; c: number[][] }>(true);
const operand: Operand = [new Float64Array(2), [1, 2]];
const value: Value = 1;
void [operand, value];
