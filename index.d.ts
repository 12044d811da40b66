// Type definitions for @tangent.to/grad (native).
//
// Every value is a scalar (shape []), a vector [n] or a matrix [m, n],
// row-major, f64. Ops take Vars or plain values (which become constants) and
// return Vars; the drivers turn an objective built from them into a value and
// a gradient in the form each parameter was given in.

// ---------------------------------------------------------------- values

/** A dense row-major array of f64 with its shape: [] scalar, [n] vector, [m, n] matrix. */
export interface Tensor {
  data: Float64Array;
  shape: number[];
}

/** A vector as a plain array or a Float64Array (in compiled calls, one of more than 1 024 values is read in place, not copied). */
export type VectorLike = ReadonlyArray<number> | Float64Array;

/** A matrix as an array of rows; rows may be plain arrays or Float64Arrays. */
export type MatrixLike = ReadonlyArray<ReadonlyArray<number> | Float64Array>;

/** Everything `asTensor` accepts: a number, a vector, a matrix or a tensor. */
export type Value = number | VectorLike | MatrixLike | Tensor;

/** What every op accepts: a Var, or a plain value that becomes a constant. */
export type Operand = Var | Value;

/** A value in nested form, as `toNested` and `.value(...)` return it. */
export type Nested = number | number[] | number[][];

/** The static shape arguments of `reshape`: zero, one or two positive integers. */
export type ShapeArg = readonly [] | readonly [number] | readonly [number, number];

/** One entry per axis of a vector or a matrix (`slice`'s start and size). */
export type IndexArg = readonly [number] | readonly [number, number];

// ---------------------------------------------------------------- the tape

/** What an op recorded about itself: its exported name and static arguments. */
export interface OpSpec {
  op: string;
  args?: unknown[];
  list?: boolean;
}

/** One parent's share of the adjoint, returned by a hand-built node's backward closure. */
export type Contribution = Operand | null | undefined;

/** A hand-built node's backward closure: the node's adjoint in, one contribution per parent out. */
export type BackwardFn = (adjoint: Float64Array) => ReadonlyArray<Contribution> | null | undefined | void;

/**
 * A node of the tape. Every op returns one. Built by hand with a backward
 * closure, it takes part in eager differentiation (compile falls back to
 * eager evaluation for it, and `toJSON` refuses it).
 *
 * A Var made during a `valueAndGrad`/`compile` evaluation can only be read
 * while that evaluation runs; afterwards reading it throws.
 */
export class Var implements Tensor {
  constructor(
    value: Value,
    parents?: ReadonlyArray<Operand>,
    backward?: BackwardFn | null,
    recompute?: ((...args: any[]) => unknown) | null,
    spec?: OpSpec | null,
  );
  /** The node's value as a tensor. */
  readonly value: Tensor;
  /** The value's Float64Array (row-major). */
  readonly data: Float64Array;
  readonly shape: number[];
  readonly isScalar: boolean;
  readonly parents: Var[];
  /** `{op, args?, list?}` for a node made by an op; null for leaves and hand-built nodes. */
  readonly spec: OpSpec | null;
  /** The adjoint after `backward()`, or null before any sweep (or if none reached this node). */
  readonly grad: Float64Array | null;
  /**
   * Reverse sweep from this node. The seed defaults to 1 for a scalar node; a
   * vector or matrix node needs a seed with as many elements as it holds.
   */
  backward(seed?: Operand): void;
}

/** A leaf Var holding `asTensor(x)`. */
export function variable(x: Operand, name?: string): Var;

// ---------------------------------------------------------------- tensor helpers

/** Wraps a Float64Array without copying (any other array-like is copied); copies `shape`. */
export function tensor(data: Float64Array | ArrayLike<number> | Iterable<number>, shape: ReadonlyArray<number>): Tensor;
/** Any non-null object whose `.data` is a Float64Array and whose `.shape` is an array (a Var passes). */
export function isTensor(x: unknown): x is Tensor;
/** The coercion every op applies: tensors and Float64Arrays are used in place, arrays are copied. */
export function asTensor(x: Operand, name?: string): Tensor;
/** A number, `number[]` or `number[][]` by rank, always fresh arrays. */
export function toNested(t: Tensor): Nested;
export function zeros(shape: ReadonlyArray<number>): Tensor;
export function eye(n: number): Tensor;

// ---------------------------------------------------------------- elementwise

/** Elementwise sum of two or more operands, folded left. */
export function add(a: Operand, b: Operand, ...more: Operand[]): Var;
/** Elementwise product of two or more operands, folded left. */
export function mul(a: Operand, b: Operand, ...more: Operand[]): Var;
export function sub(a: Operand, b: Operand): Var;
export function div(a: Operand, b: Operand): Var;
/** The adjoint goes to the left operand where a >= b. */
export function maximum(a: Operand, b: Operand): Var;
/** The adjoint goes to the left operand where a <= b. */
export function minimum(a: Operand, b: Operand): Var;
export function neg(a: Operand): Var;
export function exp(a: Operand): Var;
export function log(a: Operand): Var;
export function sqrt(a: Operand): Var;
export function square(a: Operand): Var;
/** a^k for a finite number k, which is not differentiated. */
export function pow(a: Operand, k: number): Var;
export function tanh(a: Operand): Var;
export function sigmoid(a: Operand): Var;
/** max(x, 0); relu'(0) = 0. */
export function relu(a: Operand): Var;
/** log Γ(x); its derivative is digamma(x). */
export function lgamma(a: Operand): Var;

// ---------------------------------------------------------------- reductions

export function sum(a: Operand): Var;
export function mean(a: Operand): Var;

// ---------------------------------------------------------------- shape and matrix ops

/** [m, k] × [k, n] → [m, n], or [m, k] × [k] → [m]. */
export function matmul(A: Operand, B: Operand): Var;
export function dot(u: Operand, v: Operand): Var;
export function transpose(A: Operand): Var;
export function diagPart(A: Operand): Var;
/** sum(diagPart(A)). */
export function trace(A: Operand): Var;
/** A + diag(alpha), alpha a scalar or a length-n vector; differentiable in both. */
export function addDiag(A: Operand, alpha: Operand): Var;
/** The same elements viewed as `shape` ([] turns one element into a scalar). */
export function reshape(a: Operand, shape: ShapeArg): Var;
/** The block [start, start + size) along each axis. */
export function slice(a: Operand, start: IndexArg, size: IndexArg): Var;

export interface ConcatOptions {
  /** Matrices only: 0 stacks rows (the default), 1 puts them side by side. */
  axis?: 0 | 1;
}
/** Scalars and vectors join into one vector; matrices join along `options.axis`. */
export function concat(parts: ReadonlyArray<Operand>, options?: ConcatOptions): Var;

// ---------------------------------------------------------------- linear algebra

export interface TriangularSolveOptions {
  /** Whether T is lower triangular (the default) or upper. */
  lower?: boolean;
}
/** Lower Cholesky factor of a symmetric positive definite matrix. */
export function cholesky(A: Operand): Var;
/** Solves T X = B for triangular T; B is [n] or [n, k]. */
export function triangularSolve(T: Operand, B: Operand, options?: TriangularSolveOptions): Var;
/** log det A for symmetric positive definite A. */
export function logdetPSD(A: Operand): Var;
/** A⁻¹ B for symmetric positive definite A (two triangular solves). */
export function solvePSD(A: Operand, B: Operand): Var;
/** A⁻¹ B for a general square A (LU with partial pivoting). */
export function solveGeneral(A: Operand, B: Operand): Var;
export function inv(A: Operand): Var;

// ---------------------------------------------------------------- parameters and gradients

/** One parameter: a number, a vector, a matrix (rows may be Float64Arrays) or a tensor. */
export type Param = number | VectorLike | MatrixLike | Tensor;

/** The parameters of a call: one parameter, or a `{name: parameter}` map. */
export type Params = Param | { [name: string]: Param };

/** Inputs: data fed to the objective as leaves that get no gradient. Always a map. */
export type Inputs = { [name: string]: Value };

/**
 * The gradient of a parameter in the form it was given: number → number,
 * `number[]` or Float64Array → `number[]`, rows → `number[][]`, tensor → a new
 * tensor, and a map → a map with the same keys.
 */
export type GradientOf<X> = X extends number
  ? number
  : X extends Float64Array
    ? number[]
    : X extends ReadonlyArray<infer R>
      ? [R] extends [number]
        ? number[]
        : number[][]
      : X extends Tensor
        ? Tensor
        : X extends object
          ? { -readonly [K in keyof X]: GradientOf<X[K]> }
          : never;

/** What a call accepts for an objective declared over P (Vars, or values standing for them). */
export type ArgFor<P> = unknown extends P
  ? Params
  : [P] extends [Param]
    ? Param
    : { [K in keyof P]: Param };

/** What a call accepts as inputs for an objective declared over inputs I. */
export type InputsFor<I> = unknown extends I ? Inputs : { [K in keyof I]: Value };

/** A value and its gradient. */
export interface ValueAndGradient<G> {
  value: number;
  gradient: G;
}

/**
 * An objective: builds a Var from its parameters (and inputs) with this
 * package's ops. It receives a Var for a single parameter, or a map of Vars.
 */
export type Objective<P = any, I = any> = (params: P, inputs: I) => Var;

/** `valueAndGrad(f)`: value and gradient; `.value` evaluates f alone (any rank). */
export interface ValueAndGradFn<P = any, I = any> {
  <X extends ArgFor<P>>(params: X, inputs?: InputsFor<I>): ValueAndGradient<GradientOf<X>>;
  /** The forward pass alone; the root may be a scalar, vector or matrix. */
  value(params: ArgFor<P>, inputs?: InputsFor<I>): Nested;
}

/** `grad(f)`: the gradient alone. */
export interface GradFn<P = any, I = any> {
  <X extends ArgFor<P>>(params: X, inputs?: InputsFor<I>): GradientOf<X>;
  value(params: ArgFor<P>, inputs?: InputsFor<I>): Nested;
}

// ---------------------------------------------------------------- forward mode and second order

/** `jvp(f)(x, v)`: f's value and its directional derivative along v (forward mode), both in the value's nested form. */
export interface ValueAndTangent {
  value: Nested;
  tangent: Nested;
}

/** `hvp(f)(x, v)`: value, gradient and H·v, the last two in x's form. */
export interface ValueGradientHvp<G> {
  value: number;
  gradient: G;
  hvp: G;
}

/**
 * `hessian(f)(x)`: value, gradient in x's form, and the q×q Hessian over x
 * flattened: a map in its keys' order, each parameter row-major. Symmetric
 * exactly ((H + Hᵀ)/2 of the computed products).
 */
export interface ValueGradientHessian<G> {
  value: number;
  gradient: G;
  hessian: number[][];
}

/** The forward-mode and second-order calls of an objective. */
export interface DerivativeMethods<P = any, I = any> {
  /**
   * Forward mode: value and tangent along `v` (x's form and shapes; a map
   * needs every key). Throws `jvp: the tangent is shaped .., unlike the parameter (..)`.
   */
  jvp(params: ArgFor<P>, v: ArgFor<P>, inputs?: InputsFor<I>): ValueAndTangent;
  /** A Hessian-vector product: f scalar; gradient and H·v in x's form. */
  hvp<X extends ArgFor<P>>(params: X, v: ArgFor<P>, inputs?: InputsFor<I>): ValueGradientHvp<GradientOf<X>>;
  /** The full Hessian; q² entries above the cap on values (2^28) throw before anything is allocated. */
  hessian<X extends ArgFor<P>>(params: X, inputs?: InputsFor<I>): ValueGradientHessian<GradientOf<X>>;
  /**
   * The Jacobian of f (any rank, flattened row-major) over x flattened:
   * rows are outputs. Forward mode when x has fewer entries than the
   * output, reverse otherwise; the same values either way.
   */
  jacobian(params: ArgFor<P>, inputs?: InputsFor<I>): number[][];
}

/** `jvp(f)`: forward mode, `(x, v, inputs?) => { value, tangent }`. Throws `jvp: expected a function`. */
export function jvp<P = any, I = any>(f: Objective<P, I>): DerivativeMethods<P, I>['jvp'];
/** `hvp(f)`: `(x, v, inputs?) => { value, gradient, hvp }`, f scalar. Throws `hvp: expected a function`. */
export function hvp<P = any, I = any>(f: Objective<P, I>): DerivativeMethods<P, I>['hvp'];
/** `hessian(f)`: `(x, inputs?) => { value, gradient, hessian }`, f scalar. Throws `hessian: expected a function`. */
export function hessian<P = any, I = any>(f: Objective<P, I>): DerivativeMethods<P, I>['hessian'];

/** Options of `batch` and `batchAsync`. */
export interface BatchOptions {
  /**
   * The most OS threads the batch is spread over: a positive integer, at most
   * 256. Default: the machine's available parallelism; 1 is the calling thread
   * only (for `batchAsync`, the one async thread it runs on). Results do not depend on it.
   */
  threads?: number;
}

/** The result of a batch given as a packed `[k, n]` tensor: no per-point objects. */
export interface PackedBatch {
  /** The k values. */
  values: Float64Array;
  /** The k gradients, row after row: `{ data: Float64Array(k·n), shape: [k, n] }`. */
  gradients: Tensor;
}

/** Many points per call, on every plan from `compile` and `compileFromJSON`. */
export interface BatchMethods<P = any, I = any> {
  /**
   * Value and gradient at every point (all at one shape signature), spread
   * over OS threads; element i is bit-identical to `f(points[i], inputs)`.
   */
  batch<X extends ArgFor<P>>(
    points: ReadonlyArray<X>,
    inputs?: InputsFor<I>,
    options?: BatchOptions,
  ): ValueAndGradient<GradientOf<X>>[];
  /** The packed form, for a plan with a single `[n]` parameter: points as a `[k, n]` tensor. */
  batch(points: Tensor, inputs?: InputsFor<I>, options?: BatchOptions): PackedBatch;
  /** One evaluation off the main thread (the package's own threads); the arguments are copied at the call. */
  async<X extends ArgFor<P>>(params: X, inputs?: InputsFor<I>): Promise<ValueAndGradient<GradientOf<X>>>;
  /** `batch` off the main thread (the package's own threads); the arguments are copied at the call. */
  batchAsync<X extends ArgFor<P>>(
    points: ReadonlyArray<X>,
    inputs?: InputsFor<I>,
    options?: BatchOptions,
  ): Promise<ValueAndGradient<GradientOf<X>>[]>;
  batchAsync(points: Tensor, inputs?: InputsFor<I>, options?: BatchOptions): Promise<PackedBatch>;
}

/** `compile(f)`: traced once per shape signature, replayed natively afterwards. */
export interface CompiledFn<P = any, I = any> extends ValueAndGradFn<P, I>, BatchMethods<P, I>, DerivativeMethods<P, I> {
  /** The most recently used plan as plain, structured-clonable data. */
  toJSON(): Plan;
}

/** `compileFromJSON(plan)`: a plan rebuilt from data; only the shapes it was built for. */
export type RebuiltFn = ValueAndGradFn<unknown, unknown> & BatchMethods<unknown, unknown> & DerivativeMethods<unknown, unknown>;

/** The `(value, gradient)` pair an MCMC potential takes; one evaluation serves both. */
export interface ValueGradPair<P = any, I = any> {
  value(params: ArgFor<P>, inputs?: InputsFor<I>): number;
  gradient<X extends ArgFor<P>>(params: X, inputs?: InputsFor<I>): GradientOf<X>;
}

export interface ValueAndGradFnsOptions {
  /** Evaluate through `compile` (a static graph) instead of re-tracing each call. */
  compile?: boolean;
}

export function valueAndGrad<P = any, I = any>(f: Objective<P, I>): ValueAndGradFn<P, I>;
export function grad<P = any, I = any>(f: Objective<P, I>): GradFn<P, I>;
export function compile<P = any, I = any>(f: Objective<P, I>): CompiledFn<P, I>;
/** Also takes the plan's JSON text (`JSON.stringify(vg.toJSON())`), which skips parsing it in JavaScript. */
export function compileFromJSON(json: Plan | PlanV1 | string): RebuiltFn;

export function valueAndGradFns<P = any, I = any>(
  f: Objective<P, I>,
  options: ValueAndGradFnsOptions & { compile: true },
): ValueGradPair<P, I> & { compiled: CompiledFn<P, I> };
export function valueAndGradFns<P = any, I = any>(
  f: Objective<P, I>,
  options?: ValueAndGradFnsOptions,
): ValueGradPair<P, I> & { compiled?: CompiledFn<P, I> };

export function splitValueAndGrad(vg: RebuiltFn): ValueGradPair<unknown, unknown>;
export function splitValueAndGrad<P, I>(vg: CompiledFn<P, I>): ValueGradPair<P, I>;
export function splitValueAndGrad<P, I>(vg: ValueAndGradFn<P, I>): ValueGradPair<P, I>;
export function splitValueAndGrad<X, G>(
  vg: (params: X, inputs?: Inputs) => ValueAndGradient<G>,
): { value(params: X, inputs?: Inputs): number; gradient(params: X, inputs?: Inputs): G };

/**
 * The Jacobian of a scalar- or vector-valued f at x: m×n, x flattened
 * row-major; by forward mode when x has fewer entries than f's value.
 */
export function jacobian(f: (x: Var) => Var): (x: Operand) => number[][];

// ---------------------------------------------------------------- plans as data

/** A parameter slot: first in `nodes`, one per map key (used or not). */
export interface PlanParamNode {
  kind: 'param';
  name?: string;
  shape: number[];
}

/** An input slot, after the parameters; its data is supplied on every call. */
export interface PlanInputNode {
  kind: 'input';
  name: string;
  shape: number[];
}

/** A constant; NaN and ±Infinity become null through JSON.stringify. */
export interface PlanConstNode {
  kind: 'const';
  shape: number[];
  data: Array<number | null>;
}

/** Ops recorded with no static arguments. */
export type PlainOpName =
  | 'add' | 'sub' | 'mul' | 'div' | 'maximum' | 'minimum'
  | 'neg' | 'exp' | 'log' | 'sqrt' | 'square' | 'tanh' | 'sigmoid' | 'relu' | 'lgamma'
  | 'sum' | 'mean' | 'matmul' | 'dot' | 'transpose' | 'diagPart' | 'addDiag'
  | 'cholesky' | 'solveGeneral';

/** An op node: the exported name of the function that made it, parents by index. */
export type PlanOpNode =
  | { kind: 'op'; op: PlainOpName; parents: number[] }
  | { kind: 'op'; op: 'pow'; parents: number[]; args: [number] }
  | { kind: 'op'; op: 'reshape'; parents: number[]; args: [number[]] }
  | { kind: 'op'; op: 'slice'; parents: number[]; args: [number[], number[]] }
  | { kind: 'op'; op: 'triangularSolve'; parents: number[]; args: [{ lower: boolean }] }
  | { kind: 'op'; op: 'concat'; parents: number[]; list: true; args?: [{ axis: 0 | 1 }] };

export type PlanNode = PlanParamNode | PlanInputNode | PlanConstNode | PlanOpNode;

/** A compiled graph as data (schema version 2), portable to and from the JavaScript version. */
export interface Plan {
  version: 2;
  input: 'map' | 'single';
  nodes: PlanNode[];
  root: number;
}

/** Version 1 plans (no input nodes) are still readable. */
export interface PlanV1 {
  version: 1;
  input?: 'map' | 'single';
  nodes: Array<PlanParamNode | PlanConstNode | PlanOpNode>;
  root: number;
}
