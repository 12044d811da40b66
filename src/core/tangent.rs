//! Forward mode: each op's tangent rule, written as ops on the graph (as
//! JAX writes its jvp rules in primitives). `jvp` records, beside the nodes
//! that reach a root, the nodes of the root's tangent along given leaf
//! tangents. What it records is plain graph: evaluated on the spot on an
//! eager tape, compiled into a plan like any objective, and swept back by
//! the adjoint kernels. So a Hessian-vector product is the gradient of the
//! scalar tangent ∇f·v (reverse over forward), with no second set of rules.
//!
//! The rules, with ẋ the tangent of x and y the node's value:
//! - elementwise: ẏ = Σᵢ ∂y/∂xᵢ · ẋᵢ, each partial the one `partial` gives
//!   (kernels/scalar.rs), so `maximum`, `minimum` and `relu` follow the
//!   side their adjoint takes, ties and NaN included;
//! - linear ops (sums, shapes, slices, concat, transpose, diagPart,
//!   addDiag): the op on the tangents;
//! - products: the product rule;
//! - cholesky: L̇ = L Φ(L⁻¹ sym(Ȧ) L⁻ᵀ), Φ the lower triangle with half its
//!   diagonal; sym(Ȧ) = (Ȧ + Ȧᵀ)/2, the direction the symmetrized adjoint
//!   (SPEC §5) is the gradient along;
//! - triangularSolve: Ẋ = T⁻¹(Ḃ − tri(Ṫ) X), tri the triangle T's solve reads;
//! - solveGeneral: Ẋ = A⁻¹(Ḃ − Ȧ X).

use super::error::Result;
use super::graph::{post_order, Graph};
use super::kernels::scalar;
use super::op::{Exponent, Op};
use super::shape::Shape;
use crate::fail;
use std::collections::HashMap;

/// The rules' constants, each recorded once per `jvp`.
#[derive(Hash, PartialEq, Eq, Clone, Copy)]
enum Constant {
    Number(u64),
    Zeros(Shape),
    /// n×n: 1 on and below the diagonal (`lower`) or on and above it.
    Triangle { n: usize, lower: bool },
    /// n×n: 1 below the diagonal, 1/2 on it, 0 above (Φ).
    HalfLower(usize),
}

struct Recorder<'a> {
    g: &'a mut Graph,
    evaluate: bool,
    constants: HashMap<Constant, u32>,
    /// `symmetric`'s answers so far.
    symmetric: HashMap<u32, bool>,
}

impl Recorder<'_> {
    fn op(&mut self, op: Op, parents: &[u32]) -> Result<u32> {
        self.g.op(op, parents, self.evaluate)
    }

    fn shape(&self, id: u32) -> Shape {
        self.g.nodes[id as usize].shape
    }

    fn constant(&mut self, c: Constant) -> Result<u32> {
        if let Some(&id) = self.constants.get(&c) {
            return Ok(id);
        }
        let id = match c {
            Constant::Number(bits) => self.g.leaf(Op::Const, Shape::Scalar, &[f64::from_bits(bits)])?,
            Constant::Zeros(s) => self.g.leaf(Op::Const, s, &[])?,
            Constant::Triangle { n, lower } => self.mask(n, |i, j| ((i >= j) == lower || i == j) as u8 as f64)?,
            Constant::HalfLower(n) => self.mask(n, |i, j| if i > j { 1.0 } else if i == j { 0.5 } else { 0.0 })?,
        };
        self.constants.insert(c, id);
        Ok(id)
    }

    /// An n×n constant of entries `entry(i, j)`, written in place in the
    /// arena (which refuses what it cannot hold, where a Vec would abort).
    fn mask(&mut self, n: usize, entry: impl Fn(usize, usize) -> f64) -> Result<u32> {
        let id = self.g.leaf(Op::Const, Shape::Matrix(n, n), &[])?;
        let r = self.g.nodes[id as usize].range();
        for (k, x) in self.g.values[r].iter_mut().enumerate() {
            *x = entry(k / n, k % n);
        }
        Ok(id)
    }

    fn number(&mut self, x: f64) -> Result<u32> {
        self.constant(Constant::Number(x.to_bits()))
    }

    /// `t` spread to `shape` by the broadcasting rules (a scalar or a row
    /// under a matrix), as the op whose tangent it is spread its operand.
    fn spread(&mut self, t: u32, shape: Shape) -> Result<u32> {
        if self.shape(t) == shape {
            return Ok(t);
        }
        let zeros = self.constant(Constant::Zeros(shape))?;
        self.op(Op::Add, &[zeros, t])
    }

    /// `a + b` of two optional tangents, spread to `shape` when one is missing.
    fn sum(&mut self, a: Option<u32>, b: Option<u32>, shape: Shape) -> Result<Option<u32>> {
        Ok(Some(match (a, b) {
            (Some(a), Some(b)) => self.op(Op::Add, &[a, b])?,
            (Some(t), None) | (None, Some(t)) => self.spread(t, shape)?,
            (None, None) => return Ok(None),
        }))
    }
}

impl Recorder<'_> {
    /// Whether node `id` is a symmetric matrix whatever the leaves hold (a
    /// scalar counts, as an operand spread over one): made by elementwise
    /// ops, `addDiag` and transposes from symmetric constants, so entries
    /// (i, j) and (j, i) go through the same formulas from the same numbers.
    fn symmetric(&mut self, id: u32) -> bool {
        let mut stack = vec![id];
        while let Some(&top) = stack.last() {
            if self.symmetric.contains_key(&top) {
                stack.pop();
                continue;
            }
            let node = &self.g.nodes[top as usize];
            let operands: &[u32] = match node.op {
                _ if node.shape == Shape::Scalar => &[],
                _ if node.shape.square().is_none() => &[],
                Op::Const => &[],
                Op::AddDiag | Op::Transpose => &node.parents[..1],
                op if scalar::has_formula(op) => &node.parents,
                _ => &[],
            };
            let pending: Vec<u32> = operands.iter().copied().filter(|p| !self.symmetric.contains_key(p)).collect();
            if !pending.is_empty() {
                stack.extend(pending);
                continue;
            }
            let answer = match node.op {
                _ if node.shape == Shape::Scalar => true,
                _ if node.shape.square().is_none() => false,
                Op::Const => {
                    let (n, v) = (node.shape.rows_cols().0, &self.g.values[node.range()]);
                    (0..n).all(|i| (0..i).all(|j| v[i * n + j] == v[j * n + i]))
                }
                _ => !operands.is_empty() && operands.iter().all(|p| self.symmetric[p]),
            };
            self.symmetric.insert(top, answer);
            stack.pop();
        }
        self.symmetric[&id]
    }
}

/// Record on `g` the tangent of `root` when each leaf of `seeds` moves
/// along its tangent node: `(leaf, tangent)` pairs, the tangent shaped like
/// the leaf. `None` when the root does not depend on any seed (its tangent
/// is zero). With `evaluate` the new nodes are computed as they are made.
pub fn jvp(g: &mut Graph, root: u32, seeds: &[(u32, u32)], evaluate: bool) -> Result<Option<u32>> {
    g.node(root)?;
    let order = post_order(&g.nodes, root);
    let mut tangent: HashMap<u32, u32> = HashMap::with_capacity(order.len());
    for &(leaf, t) in seeds {
        if g.node(leaf)?.shape != g.node(t)?.shape {
            return fail!("a tangent of {} for a leaf of {}", g.nodes[t as usize].shape, g.nodes[leaf as usize].shape);
        }
        tangent.insert(leaf, t);
    }
    let mut r = Recorder { g, evaluate, constants: HashMap::new(), symmetric: HashMap::new() };
    for id in order {
        let node = &r.g.nodes[id as usize];
        if node.parents.is_empty() {
            continue;
        }
        let (op, parents) = (node.op, node.parents.clone());
        let ts: Vec<Option<u32>> = parents.iter().map(|p| tangent.get(p).copied()).collect();
        if ts.iter().all(Option::is_none) {
            continue;
        }
        if let Some(t) = rule(&mut r, op, id, &parents, &ts)? {
            tangent.insert(id, t);
        }
    }
    Ok(tangent.get(&root).copied())
}

/// The tangent of node `y = op(parents)`, given its parents' tangents `ts`
/// (at least one present).
fn rule(r: &mut Recorder, op: Op, y: u32, p: &[u32], ts: &[Option<u32>]) -> Result<Option<u32>> {
    let shape = r.shape(y);
    let t0 = ts[0];
    let t = |k: usize| ts[k];
    let one = |r: &mut Recorder, op: Op, parents: &[u32]| r.op(op, parents).map(Some);
    match op {
        Op::Leaf | Op::Input | Op::Const => Ok(None),
        Op::External => fail!("this objective holds a node built outside this package's ops, which has no forward rule."),
        // Piecewise constant: zero tangent.
        Op::Ge | Op::Gt => Ok(None),
        Op::Digamma => fail!("digamma has no forward rule (a third derivative of lgamma)"),
        Op::Add => r.sum(t(0), t(1), shape),
        Op::Sub => {
            let b = match t(1) {
                Some(b) => Some(r.op(Op::Neg, &[b])?),
                None => None,
            };
            match (t(0), t(1)) {
                (Some(a), Some(b)) => one(r, Op::Sub, &[a, b]),
                _ => r.sum(t(0), b, shape),
            }
        }
        Op::Mul => {
            let a = match t(0) {
                Some(ta) => Some(r.op(Op::Mul, &[ta, p[1]])?),
                None => None,
            };
            let b = match t(1) {
                Some(tb) => Some(r.op(Op::Mul, &[p[0], tb])?),
                None => None,
            };
            r.sum(a, b, shape)
        }
        Op::Div => match (t(0), t(1)) {
            // (ȧ − y ḃ) / b
            (Some(ta), Some(tb)) => {
                let yb = r.op(Op::Mul, &[y, tb])?;
                let num = r.op(Op::Sub, &[ta, yb])?;
                one(r, Op::Div, &[num, p[1]])
            }
            (Some(ta), None) => one(r, Op::Div, &[ta, p[1]]),
            (None, Some(tb)) => {
                let yb = r.op(Op::Mul, &[y, tb])?;
                let q = r.op(Op::Div, &[yb, p[1]])?;
                one(r, Op::Neg, &[q])
            }
            (None, None) => Ok(None),
        },
        Op::Maximum | Op::Minimum => {
            // The left side when a >= b (maximum) or a <= b (minimum); a
            // NaN fails the comparison and takes the right, as the adjoint.
            let left = if op == Op::Maximum { r.op(Op::Ge, &[p[0], p[1]])? } else { r.op(Op::Ge, &[p[1], p[0]])? };
            let a = match t(0) {
                Some(ta) => Some(r.op(Op::Mul, &[ta, left])?),
                None => None,
            };
            let b = match t(1) {
                Some(tb) => {
                    let one = r.number(1.0)?;
                    let right = r.op(Op::Sub, &[one, left])?;
                    Some(r.op(Op::Mul, &[tb, right])?)
                }
                None => None,
            };
            r.sum(a, b, shape)
        }
        Op::Neg | Op::Exp | Op::Log | Op::Sqrt | Op::Square | Op::Tanh | Op::Sigmoid | Op::Relu | Op::Lgamma | Op::Pow(_) => {
            let tx = t0.expect("a unary op's tangent comes from its operand");
            let x = p[0];
            let d = match op {
                Op::Neg => return one(r, Op::Neg, &[tx]),
                Op::Exp => y,
                Op::Log => return one(r, Op::Div, &[tx, x]),
                Op::Sqrt => {
                    let two = r.number(2.0)?;
                    let twice = r.op(Op::Mul, &[two, y])?;
                    return one(r, Op::Div, &[tx, twice]);
                }
                Op::Square => {
                    let two = r.number(2.0)?;
                    r.op(Op::Mul, &[two, x])?
                }
                Op::Tanh => {
                    let (c, y2) = (r.number(1.0)?, r.op(Op::Square, &[y])?);
                    r.op(Op::Sub, &[c, y2])?
                }
                Op::Sigmoid => {
                    let c = r.number(1.0)?;
                    let rest = r.op(Op::Sub, &[c, y])?;
                    r.op(Op::Mul, &[y, rest])?
                }
                Op::Relu => {
                    let zero = r.number(0.0)?;
                    r.op(Op::Gt, &[x, zero])?
                }
                Op::Lgamma => r.op(Op::Digamma, &[x])?,
                Op::Pow(k) => {
                    let (kc, less) = (r.number(k.get())?, r.op(Op::Pow(Exponent::new(k.get() - 1.0)), &[x])?);
                    r.op(Op::Mul, &[kc, less])?
                }
                _ => unreachable!(),
            };
            one(r, Op::Mul, &[tx, d])
        }
        Op::Sum | Op::Mean | Op::Transpose | Op::DiagPart | Op::Reshape(_) | Op::Slice { .. } => one(r, op, &[t0.expect("one operand")]),
        Op::Matmul | Op::Dot | Op::LowerMatmul => {
            let a = match t(0) {
                Some(ta) => Some(r.op(op, &[ta, p[1]])?),
                None => None,
            };
            let b = match t(1) {
                Some(tb) => Some(r.op(op, &[p[0], tb])?),
                None => None,
            };
            r.sum(a, b, shape)
        }
        Op::AddDiag => match (t(0), t(1)) {
            (Some(ta), Some(tb)) => one(r, Op::AddDiag, &[ta, tb]),
            (Some(ta), None) => Ok(Some(ta)),
            (None, Some(tb)) => {
                let zeros = r.constant(Constant::Zeros(shape))?;
                one(r, Op::AddDiag, &[zeros, tb])
            }
            (None, None) => Ok(None),
        },
        Op::Concat { .. } => {
            let mut parts = Vec::with_capacity(p.len());
            for (k, &part) in p.iter().enumerate() {
                parts.push(match t(k) {
                    Some(tk) => tk,
                    None => {
                        let s = r.shape(part);
                        r.constant(Constant::Zeros(s))?
                    }
                });
            }
            one(r, op, &parts)
        }
        Op::Cholesky => {
            let ta = t0.expect("one operand");
            let n = shape.rows_cols().0;
            // A tangent symmetric by construction is its own symmetric part.
            let sym = if r.symmetric(ta) {
                ta
            } else {
                let (half, at) = (r.number(0.5)?, r.op(Op::Transpose, &[ta])?);
                let both = r.op(Op::Add, &[ta, at])?;
                r.op(Op::Mul, &[both, half])?
            };
            let lower = Op::TriangularSolve { lower: true };
            let w = r.op(lower, &[y, sym])?;
            let wt = r.op(Op::Transpose, &[w])?;
            let z = r.op(lower, &[y, wt])?;
            let phi = r.constant(Constant::HalfLower(n))?;
            let zl = r.op(Op::Mul, &[z, phi])?;
            one(r, Op::LowerMatmul, &[y, zl])
        }
        Op::TriangularSolve { lower } => {
            let n = r.shape(p[0]).rows_cols().0;
            let moved = match t(0) {
                Some(tt) => {
                    let mask = r.constant(Constant::Triangle { n, lower })?;
                    let tri = r.op(Op::Mul, &[tt, mask])?;
                    Some(r.op(Op::Matmul, &[tri, y])?)
                }
                None => None,
            };
            solve_tangent(r, op, p[0], t(1), moved)
        }
        Op::SolveGeneral => {
            let moved = match t(0) {
                Some(ta) => Some(r.op(Op::Matmul, &[ta, y])?),
                None => None,
            };
            solve_tangent(r, op, p[0], t(1), moved)
        }
    }
}

/// `solve(a, ḃ − moved)`, the tangent of a solve's result, where `moved`
/// is what the matrix's own tangent takes off the right-hand side.
fn solve_tangent(r: &mut Recorder, solve: Op, a: u32, tb: Option<u32>, moved: Option<u32>) -> Result<Option<u32>> {
    let rhs = match (tb, moved) {
        (Some(tb), Some(m)) => r.op(Op::Sub, &[tb, m])?,
        (Some(tb), None) => tb,
        (None, Some(m)) => {
            let x = r.op(solve, &[a, m])?;
            return r.op(Op::Neg, &[x]).map(Some);
        }
        (None, None) => return Ok(None),
    };
    r.op(solve, &[a, rhs]).map(Some)
}

