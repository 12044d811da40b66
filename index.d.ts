// Type definitions for @tangent.to/grad (native).
//
// Every value is a scalar (shape []), a vector [n] or a matrix [m, n],
// row-major, f64. Ops take Vars or plain values (which become constants) and
// return Vars; the drivers turn an objective built from them into a value and
// a gradient in the form each parameter was given in.
//
// Every export carries a doc comment (what it computes, its forms, its main
// errors, word for word); __test__/dts-docs.test.mjs fails when one lacks it.
// Shapes print as `scalar`, `[3]`, `[2×3]` in error messages; `..` below
// stands for the shape or number the message names.

// ---------------------------------------------------------------- values

/**
 * A dense row-major array of f64 with its shape: `[]` a scalar, `[n]` a
 * vector, `[m, n]` a matrix. A plain object; `tensor`, `zeros` and `eye`
 * make one, and a `Var` is one too.
 */
export interface Tensor {
  /** The elements, row after row; `data.length` is the product of `shape`. */
  data: Float64Array;
  /** `[]`, `[n]` or `[m, n]`. */
  shape: number[];
}

/** A vector as a plain array or a Float64Array (in compiled calls, one of more than 1 024 values is read in place, not copied). */
export type VectorLike = ReadonlyArray<number> | Float64Array;

/** A matrix as an array of rows; rows may be plain arrays or Float64Arrays, all of one length. */
export type MatrixLike = ReadonlyArray<ReadonlyArray<number> | Float64Array>;

/** Everything `asTensor` accepts: a number, a vector, a matrix or a tensor. */
export type Value = number | VectorLike | MatrixLike | Tensor;

/** What every op accepts: a Var, or a plain value that becomes a constant. */
export type Operand = Var | Value;

/** A value in nested form, as `toNested` and `.value(...)` return it: a number, `number[]` or `number[][]` by rank. */
export type Nested = number | number[] | number[][];

/** The static shape argument of `reshape`: zero, one or two positive integers (`[]` is a scalar). */
export type ShapeArg = readonly [] | readonly [number] | readonly [number, number];

/** One entry per axis of a vector or a matrix (`slice`'s start and size). */
export type IndexArg = readonly [number] | readonly [number, number];

/**
 * A literal list must have the form R (a rank past 2 is a type error); a
 * list of unknown length, such as another Var's `shape`, is checked when the
 * op runs.
 */
export type LengthFits<S extends readonly number[], R> = number extends S['length'] ? unknown : R;

/** A literal axis must be 0 or 1; a `number` is checked when the op runs. */
export type AxisFits<A extends number> = number extends A ? unknown : 0 | 1;

// ---------------------------------------------------------------- the tape

/** What an op recorded about itself (`Var.spec`, a plan's op node): its exported name and static arguments. */
export interface OpSpec {
  /** The exported name of the function that made the node (`'add'`, `'slice'`, ...). */
  op: string;
  /** Static arguments: `pow`'s `[k]`, `reshape`'s `[shape]`, `slice`'s `[start, size]`, ... */
  args?: unknown[];
  /** True for `concat`, whose parents are one array. */
  list?: boolean;
}

/** One parent's share of the adjoint, returned by a hand-built node's backward closure (null or undefined: nothing for that parent). */
export type Contribution = Operand | null | undefined;

/** A hand-built node's backward closure: the node's adjoint in, one contribution per parent out (in `parents`' order). */
export type BackwardFn = (adjoint: Float64Array) => ReadonlyArray<Contribution> | null | undefined | void;

/**
 * A node of the tape. Every op returns one. Built by hand with a backward
 * closure, it takes part in eager differentiation (compile falls back to
 * eager evaluation for it, and `toJSON` refuses it).
 *
 * A Var made during a `valueAndGrad`/`compile` evaluation can only be read
 * while that evaluation runs; afterwards reading it throws
 * `this Var belongs to an evaluation that has finished; read its value inside the objective`.
 */
export class Var implements Tensor {
  /**
   * A node holding `asTensor(value)`: a leaf with no `parents`, or a
   * hand-built node whose `backward(adjoint)` returns one contribution per
   * parent. `recompute` and `spec` are what the package's own ops pass;
   * leave them out.
   *
   * @throws `value must be a number, a non-empty array, or a tensor` (and
   *   `asTensor`'s other messages) for a value it cannot read.
   */
  constructor(
    value: Value,
    parents?: ReadonlyArray<Operand>,
    backward?: BackwardFn | null,
    recompute?: ((...args: any[]) => unknown) | null,
    spec?: OpSpec | null,
  );
  /** The node's value as a tensor `{ data, shape }`. */
  readonly value: Tensor;
  /** The value's Float64Array (row-major). */
  readonly data: Float64Array;
  /** The value's shape: `[]`, `[n]` or `[m, n]`. */
  readonly shape: number[];
  /** Whether the shape is `[]`: only a scalar node can seed `backward()` with 1. */
  readonly isScalar: boolean;
  /** The nodes this one was computed from, in the op's argument order; empty for a leaf. */
  readonly parents: Var[];
  /** `{op, args?, list?}` for a node made by an op; null for leaves and hand-built nodes. */
  readonly spec: OpSpec | null;
  /** The adjoint after `backward()`, or null before any sweep (or if none reached this node). */
  readonly grad: Float64Array | null;
  /**
   * Reverse sweep from this node: fills `.grad` of every node it reaches.
   * The seed defaults to 1 for a scalar node; a vector or matrix node needs
   * a seed with as many elements as it holds.
   *
   * @throws `backward() needs an explicit seed for a [..] node; only a scalar objective can seed itself with 1.`
   * @throws `seed has K elements but this node holds N`
   */
  backward(seed?: Operand): void;
}

/**
 * A leaf Var holding `asTensor(x)`, for building a graph by hand and
 * sweeping it with `.backward()`.
 *
 * @param name - what the coercion's messages call the value (default `'value'`).
 * @throws `${name} must be a number, a non-empty array, or a tensor`, and
 *   `asTensor`'s other messages.
 */
export function variable(x: Operand, name?: string): Var;

// ---------------------------------------------------------------- tensor helpers

/**
 * A tensor `{ data, shape }`: wraps a Float64Array without copying (any other
 * array-like or iterable is copied into a new one); copies `shape`.
 *
 * @throws `data length N does not match shape [..]`
 * @throws `tensor: shape must be up to two non-negative integers`
 */
export function tensor(data: Float64Array | ArrayLike<number> | Iterable<number>, shape: ReadonlyArray<number>): Tensor;
/** Whether `x` is a tensor: any non-null object whose `.data` is a Float64Array and whose `.shape` is an array (a Var passes). */
export function isTensor(x: unknown): x is Tensor;
/**
 * The coercion every op applies to its non-Var arguments: a tensor is used
 * as is, a Float64Array is a `[n]` vector aliased (not copied), a number
 * (NaN and ±Infinity allowed) a scalar, an array of numbers a `[n]` vector
 * and an array of rows a `[m, n]` matrix (both copied).
 *
 * @param name - what the messages call the value (default `'value'`).
 * @throws `${name} must be a number, a non-empty array, or a tensor`
 * @throws `${name} must have at least one column`
 * @throws `${name} is not rectangular (row i has length L, expected n)`
 * @throws `${name} must be a number, an array of numbers, or an array of rows`
 */
export function asTensor(x: Operand, name?: string): Tensor;
/** A tensor in nested form: a number for rank 0, `number[]` for rank 1, `number[][]` for rank 2; always fresh arrays. */
export function toNested(t: Tensor): Nested;
/**
 * A new tensor of `shape` (`[]`, `[n]` or `[m, n]`) filled with zeros.
 *
 * @throws `zeros: shape must be up to two non-negative integers`
 */
export function zeros(shape: ReadonlyArray<number>): Tensor;
/**
 * A new `[n, n]` identity matrix as a tensor.
 *
 * @throws `eye: n must be a non-negative integer, got ..`
 */
export function eye(n: number): Tensor;

// ---------------------------------------------------------------- elementwise

/**
 * Elementwise sum of two or more operands, folded left: `add(a, b, c)` is
 * `add(add(a, b), c)`. Shapes must be equal, or one a scalar, or a vector
 * `[d]` against a matrix `[n, d]` (added to every row).
 *
 * @throws `add: needs at least two operands, got N`
 * @throws `add: shapes [..] and [..] do not match`
 */
export function add(a: Operand, b: Operand, ...more: Operand[]): Var;
/**
 * Elementwise product of two or more operands, folded left; broadcasting
 * as in `add` (a scalar against anything, a `[d]` vector against the rows of `[n, d]`).
 *
 * @throws `mul: needs at least two operands, got N`
 * @throws `mul: shapes [..] and [..] do not match`
 */
export function mul(a: Operand, b: Operand, ...more: Operand[]): Var;
/**
 * Elementwise `a - b`, broadcasting as in `add`; strictly binary.
 *
 * @throws `sub: takes exactly two operands, got 3. add and mul are the variadic ones.`
 * @throws `sub: shapes [..] and [..] do not match`
 */
export function sub(a: Operand, b: Operand): Var;
/**
 * Elementwise `a / b`, broadcasting as in `add`; strictly binary. Division
 * by zero gives ±Infinity or NaN, never an error.
 *
 * @throws `div: takes exactly two operands, got 3. add and mul are the variadic ones.`
 * @throws `div: shapes [..] and [..] do not match`
 */
export function div(a: Operand, b: Operand): Var;
/**
 * Elementwise larger of `a` and `b`, broadcasting as in `add`. The adjoint
 * goes to the left operand where a >= b (ties included), else to the right;
 * with a NaN operand the value is NaN and the adjoint goes right.
 *
 * @throws `maximum: shapes [..] and [..] do not match`
 */
export function maximum(a: Operand, b: Operand): Var;
/**
 * Elementwise smaller of `a` and `b`, broadcasting as in `add`. The adjoint
 * goes to the left operand where a <= b (ties included), else to the right.
 *
 * @throws `minimum: shapes [..] and [..] do not match`
 */
export function minimum(a: Operand, b: Operand): Var;
/**
 * Elementwise negation `-a`; its derivative is -1.
 *
 * @throws `neg: takes exactly one operand, got 2`
 */
export function neg(a: Operand): Var;
/**
 * Elementwise `e^a`; its derivative is its value.
 *
 * @throws `exp: takes exactly one operand, got 2`
 */
export function exp(a: Operand): Var;
/**
 * Elementwise natural logarithm; derivative 1/a. `log(0)` is -Infinity and
 * `log(-1)` NaN, never an error.
 *
 * @throws `log: takes exactly one operand, got 2`
 */
export function log(a: Operand): Var;
/**
 * Elementwise square root; derivative 1/(2·sqrt(a)). Negative entries give NaN.
 *
 * @throws `sqrt: takes exactly one operand, got 2`
 */
export function sqrt(a: Operand): Var;
/**
 * Elementwise `a²`; derivative 2a.
 *
 * @throws `square: takes exactly one operand, got 2`
 */
export function square(a: Operand): Var;
/**
 * Elementwise `a^k` for a finite number `k`, which is a constant (not
 * differentiated); derivative k·a^(k−1).
 *
 * @throws `pow: exponent must be a finite number; got ..`
 */
export function pow(a: Operand, k: number): Var;
/**
 * Elementwise hyperbolic tangent; derivative 1 − tanh(a)².
 *
 * @throws `tanh: takes exactly one operand, got 2`
 */
export function tanh(a: Operand): Var;
/**
 * Elementwise logistic function 1/(1 + e^−a); derivative σ(a)(1 − σ(a)).
 *
 * @throws `sigmoid: takes exactly one operand, got 2`
 */
export function sigmoid(a: Operand): Var;
/**
 * Elementwise `max(a, 0)`, keeping NaN; its derivative is 1 only where
 * a > 0, so relu'(0) = 0.
 *
 * @throws `relu: takes exactly one operand, got 2`
 */
export function relu(a: Operand): Var;
/**
 * Elementwise log Γ(a); its derivative is digamma(a). At non-positive
 * integers the value is +Infinity and the derivative NaN.
 *
 * @throws `lgamma: takes exactly one operand, got 2`
 */
export function lgamma(a: Operand): Var;

// ---------------------------------------------------------------- reductions

/** The sum of all of `a`'s elements, as a scalar Var (any rank in). */
export function sum(a: Operand): Var;
/** The mean of all of `a`'s elements, as a scalar Var (any rank in). */
export function mean(a: Operand): Var;

// ---------------------------------------------------------------- shape and matrix ops

/**
 * Matrix product: `[m, k] × [k, n] → [m, n]`, or matrix times vector
 * `[m, k] × [k] → [m]`.
 *
 * @throws `matmul: left operand must be a matrix, got ..`
 * @throws `matmul: right operand must be a matrix or vector, got ..`
 * @throws `matmul: inner dimensions disagree — [..] against [..]`
 */
export function matmul(A: Operand, B: Operand): Var;
/**
 * The inner product of two vectors of equal length, as a scalar Var.
 *
 * @throws `dot: needs two vectors of equal length, got .. and ..`
 */
export function dot(u: Operand, v: Operand): Var;
/**
 * The transpose of a matrix: `[m, n] → [n, m]`.
 *
 * @throws `transpose: needs a matrix, got ..`
 */
export function transpose(A: Operand): Var;
/**
 * The diagonal of a square `[n, n]` matrix, as a `[n]` vector.
 *
 * @throws `diagPart: needs a square matrix, got ..`
 */
export function diagPart(A: Operand): Var;
/**
 * The trace of a square matrix: `sum(diagPart(A))` (no node of its own), a scalar Var.
 *
 * @throws `diagPart: needs a square matrix, got ..`
 */
export function trace(A: Operand): Var;
/**
 * `A + diag(alpha)` for a square `A`, `alpha` a scalar or a length-n
 * vector; differentiable in both.
 *
 * @throws `addDiag: needs a square matrix, got ..`
 * @throws `addDiag: diagonal has K entries for a n×n matrix`
 * @throws `addDiag: diagonal must be a scalar or a vector, got ..`
 */
export function addDiag(A: Operand, alpha: Operand): Var;
/**
 * The same elements, row-major, viewed as `shape`: 0, 1 or 2 positive
 * integers with the same element count (`[]` turns one element into a scalar).
 *
 * @throws `reshape: shape must be up to two positive integers`
 * @throws `reshape: cannot view N elements as [..]`
 */
export function reshape<const S extends readonly number[]>(a: Operand, shape: S & LengthFits<S, ShapeArg>): Var;
/**
 * The block `[start, start + size)` along each axis of a vector or matrix
 * (one entry per axis); the gradient is scattered back into place.
 *
 * @throws `slice: cannot slice a scalar`
 * @throws `slice: start and size need 1 entry for a [3] operand` (`2 entries` for a matrix)
 * @throws `slice: start must be a non-negative integer and size a positive integer`
 * @throws `slice: [s, e) exceeds axis d of [..]`
 */
export function slice<const S extends readonly number[], const Z extends readonly number[]>(
  a: Operand,
  start: S & LengthFits<S, IndexArg>,
  size: Z & LengthFits<Z, IndexArg>,
): Var;

/** Options of `concat`: how matrices are joined. */
export interface ConcatOptions<A extends number = 0 | 1> {
  /** Matrices only: 0 stacks rows (the default), 1 puts them side by side. */
  axis?: A & AxisFits<A>;
}
/**
 * Joins `parts` into one Var; the first part's rank decides. Scalars and
 * vectors join into one flat vector (`axis` is ignored); matrices join
 * along `options.axis` (0, the default, stacks rows; 1 puts them side by
 * side). Parts may mix numbers, arrays and Vars.
 *
 * @throws `concat: needs a non-empty array of parts`
 * @throws `concat: parts must all be scalars and vectors, or all matrices; got [..]`
 * @throws `concat: parts must all be matrices, got [..]`
 * @throws `concat: axis must be 0 or 1`
 * @throws `concat: parts must agree on axis A, got [..] and [..]`
 */
export function concat<A extends number = 0>(parts: ReadonlyArray<Operand>, options?: ConcatOptions<A>): Var;

// ---------------------------------------------------------------- linear algebra

/** Options of `triangularSolve`: which triangle T holds. */
export interface TriangularSolveOptions {
  /** Whether T is lower triangular (the default) or upper. */
  lower?: boolean;
}
/**
 * The lower Cholesky factor L (A = L Lᵀ) of a symmetric positive definite
 * matrix; its adjoint is symmetrized. A NaN entry does not throw: it propagates.
 *
 * @throws `cholesky: needs a square matrix, got ..`
 * @throws `cholesky: matrix is not symmetric (A[i][j] != A[j][i])` (relative tolerance 1e-10)
 * @throws `cholesky: matrix is not positive definite (pivot j is d)`
 */
export function cholesky(A: Operand): Var;
/**
 * Solves T X = B for a triangular `[n, n]` T (lower unless
 * `{ lower: false }`), B `[n]` or `[n, k]`; the result is shaped like B.
 * Only T's own triangle is read, and T's gradient is zero on the other.
 * Zero pivots give ±Infinity or NaN, no error.
 *
 * @throws `triangularSolve: needs a square matrix, got ..`
 * @throws `triangularSolve: right-hand side must be a matrix or vector, got ..`
 * @throws `triangularSolve: [n×n] cannot be applied to [..]`
 */
export function triangularSolve(T: Operand, B: Operand, options?: TriangularSolveOptions): Var;
/**
 * log det A for a symmetric positive definite A, as a scalar Var:
 * `2·sum(log(diagPart(cholesky(A))))`; its gradient is A⁻¹.
 *
 * @throws `cholesky`'s messages, e.g. `cholesky: matrix is not positive definite (pivot j is d)`
 */
export function logdetPSD(A: Operand): Var;
/**
 * A⁻¹ B for a symmetric positive definite A, B `[n]` or `[n, k]`: two
 * triangular solves with `cholesky(A)`. The result is shaped like B.
 *
 * @throws `cholesky`'s and `triangularSolve`'s messages, e.g. `cholesky: matrix is not positive definite (pivot j is d)`
 */
export function solvePSD(A: Operand, B: Operand): Var;
/**
 * A⁻¹ B for a general square A (LU with partial pivoting), B `[n]` or
 * `[n, k]`; the result is shaped like B.
 *
 * @throws `solve: matrix is singular (pivot below tolerance)`
 * @throws `solveGeneral: needs a square matrix, got ..` (and the other
 *   `triangularSolve` messages with the `solveGeneral:` prefix)
 */
export function solveGeneral(A: Operand, B: Operand): Var;
/**
 * The inverse of a square matrix: `solveGeneral(A, I)`.
 *
 * @throws `inv: needs a square matrix, got ..`
 * @throws `solve: matrix is singular (pivot below tolerance)`
 */
export function inv(A: Operand): Var;

// ---------------------------------------------------------------- parameters and gradients

/** One parameter: a number, a vector, a matrix (rows may be Float64Arrays) or a tensor. */
export type Param = number | VectorLike | MatrixLike | Tensor;

/** The parameters of a call: one parameter, or a `{name: parameter}` map. */
export type Params = Param | { [name: string]: Param };

/** Inputs: data fed to the objective as leaves that get no gradient. Always a `{name: value}` map. */
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

/**
 * A tangent for the parameters X of a call: any parameter form for a single
 * parameter, and for a map the same keys, each any form (shapes are checked
 * when the call runs).
 */
export type TangentFor<X> = X extends Param ? Param : { [K in keyof X]: Param };

/** What a call accepts as inputs for an objective declared over inputs I. */
export type InputsFor<I> = unknown extends I ? Inputs : { [K in keyof I]: Value };

/** A value and its gradient, as `valueAndGrad(f)(x)` and `compile(f)(x)` return them. */
export interface ValueAndGradient<G> {
  /** The objective's value at the parameters. */
  value: number;
  /** The gradient, in the parameters' forms (`GradientOf`). */
  gradient: G;
}

/**
 * An objective: builds a Var from its parameters (and inputs) with this
 * package's ops. It receives a Var for a single parameter, or a map of Vars.
 */
export type Objective<P = any, I = any> = (params: P, inputs: I) => Var;

/**
 * `valueAndGrad(f)`: `(params, inputs?) => { value, gradient }` for a scalar
 * objective; `.value` evaluates f alone (any rank).
 */
export interface ValueAndGradFn<P = any, I = any> {
  /**
   * f's value and gradient at `params` (gradient in `params`' forms, a map's
   * keys in the caller's order; a parameter f never reads gets zeros).
   *
   * @throws `valueAndGrad: the objective must return a scalar, got [..]. Reduce it with sum() or mean() first.`
   *   (`compile:` for a compiled function)
   * @throws `valueAndGrad: inputs must be a {name: value} map, got ..`
   * @throws `parameter "a" must be a number, a non-empty array, or a tensor` (and the other coercion messages)
   */
  <X extends ArgFor<P>>(params: X, inputs?: InputsFor<I>): ValueAndGradient<GradientOf<X>>;
  /**
   * The forward pass alone; the root may be a scalar, vector or matrix,
   * returned in nested form (number, `number[]` or `number[][]`).
   *
   * @throws `valueAndGrad: the objective must return a Var built from this package's ops; got number. A plain number means the ops were bypassed somewhere, which breaks the chain.`
   */
  value(params: ArgFor<P>, inputs?: InputsFor<I>): Nested;
}

/** `grad(f)`: `(params, inputs?) => gradient` alone; `.value` evaluates f alone (any rank). */
export interface GradFn<P = any, I = any> {
  /**
   * The gradient of f at `params`, in `params`' forms. The errors are
   * `valueAndGrad`'s, e.g. `valueAndGrad: the objective must return a scalar, got [..]. Reduce it with sum() or mean() first.`
   */
  <X extends ArgFor<P>>(params: X, inputs?: InputsFor<I>): GradientOf<X>;
  /** The forward pass alone; the root may be a scalar, vector or matrix, returned in nested form. */
  value(params: ArgFor<P>, inputs?: InputsFor<I>): Nested;
}

// ---------------------------------------------------------------- forward mode and second order

/** `jvp(f)(x, v)`: f's value and its directional derivative along v (forward mode), both in the value's nested form. */
export interface ValueAndTangent {
  /** f's value, any rank, in nested form. */
  value: Nested;
  /** The derivative of f along v, shaped like `value`. */
  tangent: Nested;
}

/** `hvp(f)(x, v)`: value, gradient and H·v, the last two in x's form. */
export interface ValueGradientHvp<G> {
  /** f's value (a scalar). */
  value: number;
  /** The gradient, in x's form. */
  gradient: G;
  /** The Hessian times v, in x's form like the gradient (no Hessian is formed). */
  hvp: G;
}

/**
 * `hessian(f)(x)`: value, gradient in x's form, and the q×q Hessian over x
 * flattened: a map in its keys' order, each parameter row-major. Symmetric
 * exactly ((H + Hᵀ)/2 of the computed products).
 */
export interface ValueGradientHessian<G> {
  /** f's value (a scalar). */
  value: number;
  /** The gradient, in x's form. */
  gradient: G;
  /** q rows of q entries, q the number of parameter values. */
  hessian: number[][];
}

/**
 * The forward-mode and second-order calls of an objective: the shapes of
 * `jvp(f)`, `hvp(f)` and `hessian(f)`, and the methods `.jvp`, `.hvp`,
 * `.hessian` and `.jacobian` of every compiled function (traced once per
 * shape signature, replayed natively, bit-identical to the eager ones).
 */
export interface DerivativeMethods<P = any, I = any> {
  /**
   * Forward mode: f's value (any rank) and its derivative along `v`, both in
   * the value's nested form. `v` has `params`' shapes (a map needs every key).
   *
   * @throws `jvp: the tangent is shaped [3], unlike the parameter ([2])`
   * @throws `jvp: the tangent has no key "b"; it needs one per parameter`
   * @throws `jvp: the tangent has key "z", which is not a parameter`
   * @throws `jvp: the tangent must be a {name: value} map with the parameters' keys`
   * @throws `jvp: this objective holds a node built outside this package's ops, which has no forward rule.`
   */
  jvp<X extends ArgFor<P>>(params: X, v: TangentFor<X>, inputs?: InputsFor<I>): ValueAndTangent;
  /**
   * A Hessian-vector product for a scalar f: value, gradient and H·v (the
   * gradient of ∇f·v), the last two in `params`' form. No Hessian is formed.
   *
   * @throws `hvp: the objective must return a scalar, got [2]. Reduce it with sum() or mean() first.`
   * @throws `hvp: tangent "b" is shaped [3], unlike parameter "b" ([2])` (and `jvp`'s other tangent messages, prefixed `hvp:`)
   */
  hvp<X extends ArgFor<P>>(params: X, v: TangentFor<X>, inputs?: InputsFor<I>): ValueGradientHvp<GradientOf<X>>;
  /**
   * The full Hessian of a scalar f, q×q over the parameters flattened (a
   * map in its keys' order, each row-major), with the value and gradient.
   *
   * @throws `hessian: the objective must return a scalar, got [2]. Reduce it with sum() or mean() first.`
   * @throws `hessian: 20000 parameters make a 20000×20000 Hessian of 400000000 entries, more than the 268435456 a value may hold`
   *   (before anything is allocated)
   */
  hessian<X extends ArgFor<P>>(params: X, inputs?: InputsFor<I>): ValueGradientHessian<GradientOf<X>>;
  /**
   * The Jacobian of f (any rank, flattened row-major) over x flattened:
   * rows are outputs. Forward mode when x has no more entries than the
   * output, reverse otherwise; the same values either way.
   *
   * @throws `jacobian: a 30000×10000 Jacobian holds 300000000 entries, more than the 268435456 a value may hold`
   */
  jacobian(params: ArgFor<P>, inputs?: InputsFor<I>): number[][];
}

/**
 * `jvp(f)`: forward mode, `(x, v, inputs?) => { value, tangent }`: f's
 * value (any rank) and its directional derivative along `v`, which has
 * x's form and shapes.
 *
 * @throws `jvp: expected a function`; the returned function throws the
 *   messages of `DerivativeMethods.jvp`, e.g. `jvp: the tangent is shaped [3], unlike the parameter ([2])`.
 */
export function jvp<P = any, I = any>(f: Objective<P, I>): DerivativeMethods<P, I>['jvp'];
/**
 * `hvp(f)`: `(x, v, inputs?) => { value, gradient, hvp }` for a scalar f:
 * the Hessian times `v` (x's form and shapes) without forming the Hessian;
 * `value` and `gradient` are `valueAndGrad`'s, bit for bit.
 *
 * @throws `hvp: expected a function`; the returned function throws
 *   `hvp: the objective must return a scalar, got [2]. Reduce it with sum() or mean() first.`
 *   and the tangent messages of `DerivativeMethods.hvp`.
 */
export function hvp<P = any, I = any>(f: Objective<P, I>): DerivativeMethods<P, I>['hvp'];
/**
 * `hessian(f)`: `(x, inputs?) => { value, gradient, hessian }` for a
 * scalar f; `hessian` is q×q `number[][]` over the parameters flattened
 * (a map in its keys' order, each parameter row-major), symmetric;
 * `value` and `gradient` are `valueAndGrad`'s, bit for bit.
 *
 * @example
 * ```js
 * import { add, exp, hessian, mul } from '@tangent.to/grad';
 * const h = hessian((p) => add(mul(p.a, p.a, p.b), exp(p.b)));   // a²b + eᵇ
 * h({ a: 1, b: 0 });
 * // { value: 1, gradient: { a: 0, b: 2 }, hessian: [[0, 2], [2, 1]] }
 * ```
 *
 * @throws `hessian: expected a function`; the returned function throws
 *   `hessian: the objective must return a scalar, got [2]. Reduce it with sum() or mean() first.`
 *   and `hessian: 20000 parameters make a 20000×20000 Hessian of 400000000 entries, more than the 268435456 a value may hold`.
 */
export function hessian<P = any, I = any>(f: Objective<P, I>): DerivativeMethods<P, I>['hessian'];

/** Options of `batch` and `batchAsync`. */
export interface BatchOptions {
  /**
   * The most OS threads the batch is spread over: a positive integer, at most
   * 256. Default: the package's thread cap (`setThreads`: the machine's
   * available parallelism unless `TANGENT_GRAD_THREADS` or `setThreads(n)`
   * lowered it); 1 is the calling thread
   * only (for `batchAsync`, the one async thread it runs on). Results do not depend on it.
   */
  threads?: number;
}

/** A packed `[k, n]` tensor of points, for a plan whose objective takes one parameter (never a map). */
export type PackedPoints<P> = unknown extends P ? Tensor : [P] extends [Param] ? Tensor : never;

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
   * A failing point throws for the lowest failing index; the plan keeps working.
   *
   * @throws `batch: points must be an array of parameter values, or a [k, n] tensor for a plan with one vector parameter; got number`
   * @throws `batch: point 3 is shaped b:v3,w:s, unlike point 0 (b:v2,w:s); a batch evaluates one shape signature`
   * @throws `batch: point 5: cholesky: matrix is not positive definite (pivot 1 is -3)` (the call's own message, after the index)
   * @throws `batch: options.threads must be a positive integer, got 1.5`
   * @throws `batch: options.threads is 1000, more than the 256 a batch may use`
   */
  batch<X extends ArgFor<P>>(
    points: ReadonlyArray<X>,
    inputs?: InputsFor<I>,
    options?: BatchOptions,
  ): ValueAndGradient<GradientOf<X>>[];
  /**
   * The packed form, for a plan with a single `[n]` parameter: points as a
   * `[k, n]` tensor, values and gradients as `{ values, gradients }`.
   *
   * @throws `batch: a tensor of points must be shaped [k, n] (k points of a [n] vector), got [3]`
   * @throws `batch: a [3×2] tensor of points needs a plan with one [2] parameter; this one takes [3]`
   * (a rebuilt plan only: `compile` traces its objective at `[n]`)
   */
  batch(points: PackedPoints<P>, inputs?: InputsFor<I>, options?: BatchOptions): PackedBatch;
  /**
   * One evaluation off the main thread (the package's own threads); the
   * arguments are copied at the call. Resolves to what `f(params, inputs)`
   * returns, bit for bit; rejects with exactly what the call would throw.
   */
  async<X extends ArgFor<P>>(params: X, inputs?: InputsFor<I>): Promise<ValueAndGradient<GradientOf<X>>>;
  /**
   * `batch` off the main thread (the package's own threads); the arguments
   * are copied at the call. Rejects (never throws) with `batch`'s messages
   * prefixed `batchAsync:`, e.g. `batchAsync: points must be an array of parameter values, or a [k, n] tensor for a plan with one vector parameter; got number`.
   */
  batchAsync<X extends ArgFor<P>>(
    points: ReadonlyArray<X>,
    inputs?: InputsFor<I>,
    options?: BatchOptions,
  ): Promise<ValueAndGradient<GradientOf<X>>[]>;
  /** The packed form of `batchAsync`: a `[k, n]` tensor of points in, a Promise of `{ values, gradients }` out. */
  batchAsync(points: PackedPoints<P>, inputs?: InputsFor<I>, options?: BatchOptions): Promise<PackedBatch>;
}

/**
 * `compile(f)`: `valueAndGrad`'s call, traced once per shape signature and
 * replayed natively afterwards, with `.value`, `.toJSON()`, the batch
 * methods and the derivative methods.
 */
export interface CompiledFn<P = any, I = any> extends ValueAndGradFn<P, I>, BatchMethods<P, I>, DerivativeMethods<P, I> {
  /**
   * The most recently used plan as plain, structured-clonable data (schema
   * version 2), for `compileFromJSON` here, in a worker or in the JavaScript version.
   *
   * @throws `toJSON: call the compiled function once first, so the graph is built.`
   * @throws `toJSON: this objective holds a node built outside this package's ops, which cannot be replayed or serialized.`
   */
  toJSON(): Plan;
}

/**
 * `compileFromJSON(plan)`: a plan rebuilt from data, with the call, `.value`,
 * the batch methods and the derivative methods, at only the shapes it was
 * built for (another shape throws `compileFromJSON: this plan was built for arguments shaped ..`).
 */
export type RebuiltFn = ValueAndGradFn<unknown, unknown> & BatchMethods<unknown, unknown> & DerivativeMethods<unknown, unknown>;

/** The `(value, gradient)` pair an MCMC potential takes; one evaluation serves both. */
export interface ValueGradPair<P = any, I = any> {
  /** f's value at `params`; a following `gradient` call at equal parameters reuses the evaluation. */
  value(params: ArgFor<P>, inputs?: InputsFor<I>): number;
  /** f's gradient at `params`, in their forms; a following `value` call at equal parameters reuses the evaluation. */
  gradient<X extends ArgFor<P>>(params: X, inputs?: InputsFor<I>): GradientOf<X>;
}

/** Options of `valueAndGradFns`: whether it evaluates through `compile`. */
export interface ValueAndGradFnsOptions {
  /** Evaluate through `compile` (a static graph) instead of re-tracing each call. */
  compile?: boolean;
}

/**
 * `valueAndGrad(f)`: `(params, inputs?) => { value, gradient }` for a scalar
 * objective f, re-traced on every call (so f may branch on `.data`), with
 * `.value(params, inputs?)` for the forward pass alone (any rank).
 * `f(params)` is called when `inputs` is undefined, else `f(params, inputs)`.
 * The gradient comes back in each parameter's form (`GradientOf`).
 *
 * @example
 * ```js
 * import { add, square, sum, valueAndGrad } from '@tangent.to/grad';
 * const vg = valueAndGrad((p) => add(square(p.a), sum(square(p.b))));
 * vg({ a: 3, b: [1, 2] });        // { value: 14, gradient: { a: 6, b: [2, 4] } }
 * vg.value({ a: 3, b: [1, 2] });  // 14
 * ```
 *
 * @throws `valueAndGrad: expected a function`; the returned function throws
 *   `valueAndGrad: the objective must return a scalar, got [2]. Reduce it with sum() or mean() first.`,
 *   `valueAndGrad: the objective must return a Var built from this package's ops; got number. A plain number means the ops were bypassed somewhere, which breaks the chain.`
 *   and `valueAndGrad: inputs must be a {name: value} map, got number`.
 */
export function valueAndGrad<P = any, I = any>(f: Objective<P, I>): ValueAndGradFn<P, I>;
/**
 * `grad(f)`: `(params, inputs?) => gradient`, the gradient alone, in each
 * parameter's form; `.value` is the forward pass alone.
 *
 * @throws `grad: expected a function`; the returned function throws
 *   `valueAndGrad`'s messages, e.g. `valueAndGrad: the objective must return a scalar, got [2]. Reduce it with sum() or mean() first.`
 */
export function grad<P = any, I = any>(f: Objective<P, I>): GradFn<P, I>;
/**
 * `compile(f)`: the same call as `valueAndGrad(f)`, bit for bit, but f is
 * traced once per shape signature and the plan replayed natively after
 * that (at most 8 plans kept). Data f captures is frozen as constants at
 * trace time; data that changes goes in as inputs. Also `.value`,
 * `.toJSON()`, `.batch`, `.async`, `.batchAsync`, `.jvp`, `.hvp`,
 * `.hessian` and `.jacobian`.
 *
 * @example
 * ```js
 * import { compile, mul, square, sub, sum } from '@tangent.to/grad';
 * const loss = compile((p, d) => sum(square(sub(d.y, mul(p.w, d.x)))));
 * const data = { x: [1, 2, 3], y: [1, 2, 3.5] };
 * loss({ w: 1 }, data);               // { value: 0.25, gradient: { w: -3 } }
 * loss.batch([{ w: 1 }, { w: 2 }], data);  // many points, one call, on OS threads
 * const plan = loss.toJSON();          // plain data: compileFromJSON(plan) rebuilds it anywhere
 * ```
 *
 * @throws `compile: expected a function`; the call throws
 *   `compile: the objective must return a scalar, got [2]. Reduce it with sum() or mean() first.`
 *   (`.value` accepts any rank) and the messages of f's ops.
 */
export function compile<P = any, I = any>(f: Objective<P, I>): CompiledFn<P, I>;
/**
 * A plan rebuilt from `toJSON()`'s data (version 1 or 2, from this package
 * or the JavaScript version) or its JSON text (`JSON.stringify(vg.toJSON())`,
 * read without a `JSON.parse`): the call, `.value`, the batch and derivative
 * methods, bit-identical to the original. No objective, so it evaluates
 * only at the shapes it was built for. The plan is untrusted input:
 * malformed plans throw, never crash.
 *
 * @throws `compileFromJSON: not a serialized plan`
 * @throws `compileFromJSON: unknown op "name"`
 * @throws `compileFromJSON: inputs must be a {name: value} map, got ..`
 * @throws `compileFromJSON: this plan was built for arguments shaped w:s|x:v2,y:v2, got w:s|x:v2. A rebuilt plan has no objective to re-trace, so it cannot adapt.`
 */
export function compileFromJSON(json: Plan | PlanV1 | string): RebuiltFn;

/**
 * `{ value(x, inputs?), gradient(x, inputs?) }` for f, the pair an MCMC
 * potential takes, sharing a one-entry cache: `value(p)` then
 * `gradient(p)` at equal parameters evaluates once (calls with inputs skip
 * the cache). With `{ compile: true }` it evaluates through `compile(f)`,
 * returned as `compiled`.
 *
 * @throws `compile: expected a function` (`valueAndGrad: expected a function` without `compile`)
 */
export function valueAndGradFns<P = any, I = any>(
  f: Objective<P, I>,
  options: ValueAndGradFnsOptions & { compile: true },
): ValueGradPair<P, I> & { compiled: CompiledFn<P, I> };
/** `valueAndGradFns(f)` without `compile`: re-traced each call; `compiled` is undefined. Throws `valueAndGrad: expected a function`. */
export function valueAndGradFns<P = any, I = any>(
  f: Objective<P, I>,
  options?: ValueAndGradFnsOptions,
): ValueGradPair<P, I> & { compiled?: CompiledFn<P, I> };

/**
 * Splits any `(x, inputs?) => { value, gradient }` (from `valueAndGrad`,
 * `compile` or `compileFromJSON`) into the `{ value, gradient }` pair an
 * MCMC potential takes, sharing one evaluation at equal parameters as
 * `valueAndGradFns` does. Errors are those of `vg` itself, at the calls.
 */
export function splitValueAndGrad(vg: RebuiltFn): ValueGradPair<unknown, unknown>;
/** `splitValueAndGrad` of a compiled function: the pair keeps its parameter and input types. */
export function splitValueAndGrad<P, I>(vg: CompiledFn<P, I>): ValueGradPair<P, I>;
/** `splitValueAndGrad` of a `valueAndGrad` function: the pair keeps its parameter and input types. */
export function splitValueAndGrad<P, I>(vg: ValueAndGradFn<P, I>): ValueGradPair<P, I>;
/** `splitValueAndGrad` of any function returning `{ value, gradient }`. */
export function splitValueAndGrad<X, G>(
  vg: (params: X, inputs?: Inputs) => ValueAndGradient<G>,
): { value(params: X, inputs?: Inputs): number; gradient(params: X, inputs?: Inputs): G };

/**
 * The Jacobian of a scalar- or vector-valued f at x (anything `variable`
 * accepts): m×n `number[][]`, one row per output, x flattened row-major;
 * by forward mode when x has no more entries than f's value.
 *
 * @throws `jacobian: expected a function`
 * @throws `jacobian: the function must return a Var built from this package's ops`
 * @throws `jacobian: the function must return a scalar or a vector, got [..]`
 * @throws `jacobian: a 30000×10000 Jacobian holds 300000000 entries, more than the 268435456 a value may hold`
 */
export function jacobian<P = Var>(f: (x: P) => Var): (x: Operand) => number[][];

// ---------------------------------------------------------------- plans as data

/** A parameter slot of a plan: first in `nodes`, one per map key (used or not). */
export interface PlanParamNode {
  kind: 'param';
  name?: string;
  shape: number[];
}

/** An input slot of a plan, after the parameters; its data is supplied on every call. */
export interface PlanInputNode {
  kind: 'input';
  name: string;
  shape: number[];
}

/**
 * A constant of a plan. Its data holds numbers; through JSON.stringify,
 * NaN, ±Infinity and -0 are written as the strings "NaN", "Infinity",
 * "-Infinity" and "-0" (JSON has no such numbers), which compileFromJSON
 * reads back exactly. A null there (the JavaScript version's text) is NaN.
 */
export interface PlanConstNode {
  kind: 'const';
  shape: number[];
  data: Array<number | null>;
}

/** The names of the ops a plan records with no static arguments. */
export type PlainOpName =
  | 'add' | 'sub' | 'mul' | 'div' | 'maximum' | 'minimum'
  | 'neg' | 'exp' | 'log' | 'sqrt' | 'square' | 'tanh' | 'sigmoid' | 'relu' | 'lgamma'
  | 'sum' | 'mean' | 'matmul' | 'dot' | 'transpose' | 'diagPart' | 'addDiag'
  | 'cholesky' | 'solveGeneral';

/** An op node of a plan: the exported name of the function that made it, parents by index, static arguments. */
export type PlanOpNode =
  | { kind: 'op'; op: PlainOpName; parents: number[] }
  | { kind: 'op'; op: 'pow'; parents: number[]; args: [number] }
  | { kind: 'op'; op: 'reshape'; parents: number[]; args: [number[]] }
  | { kind: 'op'; op: 'slice'; parents: number[]; args: [number[], number[]] }
  | { kind: 'op'; op: 'triangularSolve'; parents: number[]; args: [{ lower: boolean }] }
  | { kind: 'op'; op: 'concat'; parents: number[]; list: true; args?: [{ axis: 0 | 1 }] };

/** One node of a plan: a parameter, an input, a constant or an op. */
export type PlanNode = PlanParamNode | PlanInputNode | PlanConstNode | PlanOpNode;

/**
 * A compiled graph as data (schema version 2), what `toJSON()` returns and
 * `compileFromJSON` reads: portable to and from the JavaScript version,
 * through `JSON.stringify`, `structuredClone` and `postMessage`.
 */
export interface Plan {
  version: 2;
  input: 'map' | 'single';
  nodes: PlanNode[];
  root: number;
}

/** A version 1 plan (no input nodes), still readable by `compileFromJSON`. */
export interface PlanV1 {
  version: 1;
  input?: 'map' | 'single';
  nodes: Array<PlanParamNode | PlanConstNode | PlanOpNode>;
  root: number;
}

/**
 * The most threads one large factorization, triangular solve or product
 * (Cholesky from n = 725, LU from 1 200, products and solves from about
 * 600, and their adjoints) may use, and the threads a `batch`, a compiled
 * Hessian or a reverse-mode Jacobian spreads its points over by default.
 * The default is the machine's available parallelism, capped by the
 * environment variable `TANGENT_GRAD_THREADS`, read once, when the cap is
 * first needed (`1`: one thread). Evaluations running at once on the package's own
 * threads (`batch`, `async` calls) share the cap, and at most the cap's
 * `async` and `batchAsync` calls run at once (the others wait their turn).
 * Results do not depend on the thread count, bit for bit.
 * @param n A whole number; 0 for the machine's available parallelism; more
 *   than that is cut to it. Left out, nothing changes.
 * @returns The number now in effect: always 1 in the WebAssembly build,
 *   which runs on one thread.
 * @throws `setThreads: n must be a whole number (0 for the machine's cores), got -1`
 * @example
 * setThreads(1);            // one thread for every kernel from now on
 * const cap = setThreads(); // the number in effect, unchanged
 */
export function setThreads(n?: number): number;
