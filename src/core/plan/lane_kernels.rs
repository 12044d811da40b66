//! The kernels of a lane replay (lanes.rs): each op of core/rules that a
//! batch replays `LANES` points at a time, on an arena of lanes (element
//! `e` of a node's value for point `l` at `arena[layout.value[id] + e][l]`).
//!
//! Each one computes, for every lane, exactly the expression its kernel
//! computes for one point: the same formulas, the same order of sums
//! (`sum_by`'s four partial sums, `dot`'s and `matvec`'s left-to-right
//! folds, `matvec_t_acc`'s blocks of four rows). So every point's results
//! are bit-identical to a single replay; the lanes only run side by side.
//!
//! Every loop runs over slices cut to its length first, so that it holds no
//! bounds check and compiles to vector code, one lane a register.
//!
//! Values and adjoints are one arena of cells, each where `Layout` puts
//! it: an elementwise step may write the very lanes it reads (lanes.rs).
//!
//! Native only. Built into the `simd128` WebAssembly module (2026-12-03)
//! they added 233 KB (39 KB gzipped, a sixth more to download) for a
//! regression Hessian 258 → 188 µs and a 256-point batch 2.63 → 2.35 ms,
//! with the reaction–diffusion Jacobian and the mlp's H·v unchanged.

use super::super::graph::Node;
use super::super::kernels::scalar::{self, with_constant_formula, Formula};
use super::super::op::{Broadcast, Op};
use super::super::shape::Shape;
use super::lane_base::{lanewise, Lane, Layout, Term, LANES};
use super::lane_products::{columns_of, every_finite, matvec, matvec_t_acc, one_per_lane, solve, solve_transposed};
use std::cell::{Cell, OnceCell};

/// `$body` for each `$e` in `0..$n`, by index, two at a time. By index,
/// not by iterator, and with `i + 1 < n` the loop's own test: then the
/// compiler sees that both elements are within every operand cut to `$n`,
/// and checks no bound in the loop. Two at a time: the loop's own
/// instructions are paid once per two elements (a packed regression batch
/// ran 7% faster with AVX-512, 3% slower with AVX2 alone, where a lane is
/// already two registers; four at a time was no faster still).
macro_rules! each_index {
    ($n:expr, |$e:ident| $body:expr) => {{
        let n = $n;
        let mut i = 0;
        while i + 1 < n {
            let $e = i;
            $body;
            let $e = i + 1;
            $body;
            i += 2;
        }
        if i < n {
            let $e = i;
            $body;
        }
    }};
}

/// `to += x`, lane by lane, for a sum held in registers.
#[inline(always)]
fn add_to(to: &mut Lane, x: &Lane) {
    let (a, b) = (*to, *x);
    *to = lanewise!(|l| a[l] + b[l]);
}

/// An adjoint's term added to it, or, for its `first` term, written as
/// `0 + x`: what adding it to the cleared adjoint gives (+0 for -0).
#[inline(always)]
fn take(to: &Cell<Lane>, x: &Lane, first: bool) {
    let (a, b) = (if first { [0.0; LANES] } else { to.get() }, *x);
    to.set(lanewise!(|l| a[l] + b[l]));
}

/// `matrix::sum_by`, lane by lane: four interleaved partial sums, then the rest.
#[inline(always)]
fn sum_by(n: usize, f: impl Fn(usize) -> Lane) -> Lane {
    let mut s = [[0.0; LANES]; 4];
    let body = n - n % 4;
    let mut i = 0;
    while i < body {
        for (j, sj) in s.iter_mut().enumerate() {
            add_to(sj, &f(i + j));
        }
        i += 4;
    }
    let mut total = lanewise!(|l| (s[0][l] + s[1][l]) + (s[2][l] + s[3][l]));
    while i < n {
        add_to(&mut total, &f(i));
        i += 1;
    }
    total
}

/// Whether a node that differs from point to point can be replayed in
/// lanes: a scalar or vector made by an elementwise op, a sum or mean, a
/// dot, a slice, reshape or concatenation of scalars and vectors, or a
/// constant matrix times a vector or triangular solve with one. (`varying`
/// says which nodes differ from point to point; the others are read once,
/// from the plan.)
pub fn laned(nodes: &[Node], id: usize, varying: &[bool]) -> bool {
    let node = &nodes[id];
    let parent = |k: usize| &nodes[node.parents[k] as usize];
    let small = (0..node.parents.len()).all(|k| parent(k).shape.rank() <= 1);
    node.shape.rank() <= 1
        && match node.op {
            op if Formula::of(op).is_some() => small,
            Op::Sum | Op::Mean | Op::Dot | Op::Slice { .. } | Op::Reshape(_) | Op::Concat { .. } => small,
            Op::Matmul | Op::TriangularSolve { .. } => !varying[node.parents[0] as usize] && parent(0).shape.rank() == 2 && parent(1).shape.rank() == 1,
            _ => false,
        }
}

/// An elementwise node's operands (a unary one's twice), each where its
/// lanes are, and how they broadcast: as `op::broadcast` pairs scalars
/// and vectors, written out so that it is inlined.
#[inline(always)]
fn operands(nodes: &[Node], node: &Node, at: &[usize]) -> (usize, usize, Broadcast) {
    let (a, b) = (node.parents[0] as usize, node.parents[node.parents.len() - 1] as usize);
    let bc = match (nodes[a].shape, nodes[b].shape) {
        (x, y) if x == y => Broadcast::Same,
        (Shape::Scalar, _) => Broadcast::ScalarLeft,
        _ => Broadcast::ScalarRight,
    };
    (at[a], at[b], bc)
}

/// `$body` with the consts `$x` and `$y` true where the left and right
/// operand have one element per output element, false for a broadcast
/// scalar, so that each loop indexes its operands with no choice inside.
macro_rules! with_constant_steps {
    ($bc:expr, <$x:ident, $y:ident> $body:expr) => {
        match $bc {
            Broadcast::ScalarLeft => {
                const $x: bool = false;
                const $y: bool = true;
                $body
            }
            Broadcast::ScalarRight => {
                const $x: bool = true;
                const $y: bool = false;
                $body
            }
            _ => {
                const $x: bool = true;
                const $y: bool = true;
                $body
            }
        }
    };
}

/// An operand's lanes, `n` of them, or the one lane of a broadcast scalar.
#[inline(always)]
fn operand<const EACH: bool>(arena: &[Cell<Lane>], at: usize, n: usize) -> &[Cell<Lane>] {
    &arena[at..at + if EACH { n } else { 1 }]
}

/// Element `e` of an operand cut by `operand`.
#[inline(always)]
fn nth<const EACH: bool>(x: &[Cell<Lane>], e: usize) -> Lane {
    x[if EACH { e } else { 0 }].get()
}

/// `to` set to `from`, lane by lane.
fn copy(to: &[Cell<Lane>], from: &[Cell<Lane>]) {
    to.iter().zip(from).for_each(|(to, from)| to.set(from.get()));
}

/// A laned node's value, for every lane. `uniform` is the plan's own arena,
/// holding what does not differ from point to point (a matvec's matrix).
#[inline(always)]
pub fn forward(nodes: &[Node], id: usize, layout: &Layout, uniform: &[f64], v: &[Cell<Lane>], finite: &[OnceCell<bool>]) {
    let node = &nodes[id];
    let n = node.shape.size();
    let out = &v[layout.value[id]..][..n];
    let parent = |k: usize| &nodes[node.parents[k] as usize];
    let lanes_of = |k: usize| &v[layout.value[node.parents[k] as usize]..][..parent(k).shape.size()];
    match node.op {
        Op::Sum | Op::Mean => {
            let x = lanes_of(0);
            let mut s = sum_by(x.len(), |i| x[i].get());
            if node.op == Op::Mean {
                s.iter_mut().for_each(|s| *s /= x.len() as f64);
            }
            out[0].set(s);
        }
        Op::Dot => {
            let mut s = [0.0; LANES];
            for (a, b) in lanes_of(0).iter().zip(lanes_of(1)) {
                let (a, b) = (a.get(), b.get());
                for l in 0..LANES {
                    s[l] += a[l] * b[l];
                }
            }
            out[0].set(s);
        }
        Op::Matmul => {
            let (m, k) = parent(0).shape.rows_cols();
            let (a, x) = (&uniform[parent(0).range()], lanes_of(1));
            // A Jacobian's or a Hessian's unit directions: a column of A per lane.
            let all_finite = || *finite[node.parents[0] as usize].get_or_init(|| every_finite(a));
            match one_per_lane(x) {
                // (A vector of none has no element to take: its product is zeros.)
                Some((at, c)) if k > 0 && all_finite() => columns_of(k, a, at, c, out),
                _ => matvec(m, k, a, x, out),
            }
        }
        Op::TriangularSolve { lower } => solve(&uniform[parent(0).range()], parent(0).shape.rows_cols().0, lower, lanes_of(1), out),
        // Copies: a vector's block, the same values reshaped, the parts one after another.
        Op::Slice { start, .. } => copy(out, &lanes_of(0)[start[0]..][..n]),
        Op::Reshape(_) => copy(out, lanes_of(0)),
        Op::Concat { .. } => {
            let mut at = 0;
            for k in 0..node.parents.len() {
                let part = lanes_of(k);
                copy(&out[at..at + part.len()], part);
                at += part.len();
            }
        }
        op => {
            let Some((f, k)) = Formula::of(op) else { unreachable!("a laned node's op has a lane kernel") };
            let (xa, xb, bc) = operands(nodes, node, &layout.value);
            // An operand that does not vary may be read from the plan's arena
            // (`Layout::flat`), a value an element for every lane.
            let flat = |p: u32| layout.flat[p as usize].then(|| &uniform[nodes[p as usize].range()]);
            let (fx, fy) = (flat(node.parents[0]), flat(node.parents[node.parents.len() - 1]));
            with_constant_steps!(bc, <X, Y> {
                let (x, y) = (operand::<X>(v, xa, n), operand::<Y>(v, xb, n));
                // (A flat operand has an element per output element: with `X`
                // or `Y` false the arm is never taken, and not compiled.)
                with_constant_formula!(f, |c| match (fx, fy) {
                    (Some(fx), _) if X => {
                        let fx = &fx[..n];
                        each_index!(n, |e| {
                            let (x, y) = (fx[e], nth::<Y>(y, e));
                            out[e].set(lanewise!(|l| scalar::value(c, k, x, y[l])));
                        })
                    }
                    (None, Some(fy)) if Y => {
                        let fy = &fy[..n];
                        each_index!(n, |e| {
                            let (x, y) = (nth::<X>(x, e), fy[e]);
                            out[e].set(lanewise!(|l| scalar::value(c, k, x[l], y)));
                        })
                    }
                    _ => each_index!(n, |e| {
                        let (x, y) = (nth::<X>(x, e), nth::<Y>(y, e));
                        out[e].set(lanewise!(|l| scalar::value(c, k, x[l], y[l])));
                    }),
                })
            })
        }
    }
}

/// A laned node's adjoint accumulated into each parent that `takes` one,
/// in the order and by the expressions of `rules::adjoint`; written,
/// where it is a parent's `first` term. `v` holds values and adjoints in
/// lanes; `uniform` and `adjoints` are the plan's own arenas.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn adjoint(nodes: &[Node], id: usize, layout: &Layout, uniform: &[f64], adjoints: &[f64], v: &[Cell<Lane>], takes: impl Fn(u32) -> bool, first: &[Term]) {
    let node = &nodes[id];
    let n = node.shape.size();
    let g = &v[layout.adjoint[id]..][..n];
    // The node's adjoint, when it is a scalar (a sum's, a mean's, a dot's).
    let g0 = g.first().map_or([0.0; LANES], Cell::get);
    for (k, &p) in node.parents.iter().enumerate() {
        if !takes(p) {
            continue;
        }
        let to = &v[layout.adjoint[p as usize]..][..nodes[p as usize].shape.size()];
        let write = first[p as usize] == (id as u32, k as u32);
        // A term that is the adjoint itself, written where the adjoint
        // already lies (`Layout`), would write each lane as 0 + itself: the
        // same bits, since no adjoint lane is ever -0 (each is 1, a sum
        // from +0, or 0 + a term).
        let identity = match Formula::of(node.op) {
            Some((Formula::Add, _)) => true,
            Some((Formula::Sub, _)) => k == 0,
            _ => matches!(node.op, Op::Reshape(_)),
        };
        if identity && write && layout.adjoint[p as usize] == layout.adjoint[id] {
            continue;
        }
        match node.op {
            Op::Sum => to.iter().for_each(|to| take(to, &g0, write)),
            Op::Mean => {
                let s = lanewise!(|l| g0[l] / to.len() as f64);
                to.iter().for_each(|to| take(to, &s, write))
            }
            Op::Dot => {
                let other = node.parents[1 - k] as usize;
                for (to, x) in to.iter().zip(&v[layout.value[other]..][..nodes[other].shape.size()]) {
                    let x = x.get();
                    take(to, &lanewise!(|l| g0[l] * x[l]), write);
                }
            }
            // `axpy(1.0, g, d)` in the kernels: 1.0 · g is g, so d += g. (Never a first term.)
            Op::Slice { start, .. } => to[start[0]..start[0] + n].iter().zip(g).for_each(|(to, g)| take(to, &g.get(), false)),
            Op::Reshape(_) => to.iter().zip(g).for_each(|(to, g)| take(to, &g.get(), write)),
            Op::Concat { .. } => {
                let at: usize = node.parents[..k].iter().map(|&q| nodes[q as usize].shape.size()).sum();
                to.iter().zip(&g[at..]).for_each(|(to, g)| take(to, &g.get(), write))
            }
            // (Only the vector takes a term: a matrix swept in lanes is refused.)
            Op::Matmul => {
                let (m, kk) = nodes[node.parents[0] as usize].shape.rows_cols();
                matvec_t_acc(m, kk, &uniform[nodes[node.parents[0] as usize].range()], g, to, write);
            }
            Op::TriangularSolve { lower } => {
                let t = &nodes[node.parents[0] as usize];
                solve_transposed(&uniform[t.range()], t.shape.rows_cols().0, lower, g, to, write);
            }
            op => {
                let Some((f, kexp)) = Formula::of(op) else { unreachable!("a laned node's op has a lane kernel") };
                let (xa, xb, bc) = operands(nodes, node, &layout.value);
                let o = &v[layout.value[id]..][..n];
                // An adjoint the same in every lane may be read from the plan's
                // adjoint arena (`Layout::flat_adjoint`), a value an element.
                let flat = if layout.flat_adjoint[id] { &adjoints[node.range()] } else { &[][..] };
                // Each formula, operand and broadcast a constant, so each loop is straight vector code.
                with_constant_steps!(bc, <X, Y> {
                    let (x, y) = (operand::<X>(v, xa, n), operand::<Y>(v, xb, n));
                    with_constant_formula!(f, |c| match (k, flat.is_empty()) {
                        (0, true) => terms::<0, X, Y, false>(c, kexp, [x, y, o, g], flat, to, write),
                        (0, false) => terms::<0, X, Y, true>(c, kexp, [x, y, o, g], flat, to, write),
                        (_, true) => terms::<1, X, Y, false>(c, kexp, [x, y, o, g], flat, to, write),
                        (_, false) => terms::<1, X, Y, true>(c, kexp, [x, y, o, g], flat, to, write),
                    })
                })
            }
        }
    }
}

/// Operand `I`'s terms of formula `f`'s adjoint added to its adjoint `to`,
/// as `binary_adjoint` and `unary_adjoint` add them: element by element, or
/// summed (`sum_by`) into a broadcast scalar. `[x, y, o, g]` are the
/// operands (cut by `operand`), the node's value and its adjoint; with
/// `G`, the adjoint is `flat` instead, one value an element for every lane.
#[inline(always)]
fn terms<const I: usize, const X: bool, const Y: bool, const G: bool>(f: Formula, k: f64, [x, y, o, g]: [&[Cell<Lane>]; 4], flat: &[f64], to: &[Cell<Lane>], write: bool) {
    let n = g.len();
    let flat = if G { &flat[..n] } else { flat };
    // A broadcast operand copied where the loop's writes to `to` cannot
    // reach it, so that what the formula computes from it alone (a
    // divisor's reciprocal) is computed once, before the loop.
    let held = |x: &[Cell<Lane>]| [Cell::new(x.first().map_or([0.0; LANES], Cell::get))];
    let (xs, ys) = (held(x), held(y));
    let (x, y) = (if X { x } else { &xs[..] }, if Y { y } else { &ys[..] });
    if (I == 0 && !X) || (I == 1 && !Y) {
        // `sum_by`, written out: a closure passed to it, or one calling
        // `term`, is not inlined, and then the formula is no longer a constant.
        let mut s = [[0.0; LANES]; 4];
        let body = n - n % 4;
        let mut e = 0;
        while e < body {
            for (j, sj) in s.iter_mut().enumerate() {
                add_to(sj, &term::<I, X, Y, G>(f, k, [x, y, o, g], flat, e + j));
            }
            e += 4;
        }
        let mut total = lanewise!(|l| (s[0][l] + s[1][l]) + (s[2][l] + s[3][l]));
        for e in body..n {
            add_to(&mut total, &term::<I, X, Y, G>(f, k, [x, y, o, g], flat, e));
        }
        take(&to[0], &total, write);
    } else {
        let to = &to[..n];
        each_index!(n, |e| take(&to[e], &term::<I, X, Y, G>(f, k, [x, y, o, g], flat, e), write));
    }
}

/// Output element `e`'s term of operand `I`, lane by lane.
#[inline(always)]
fn term<const I: usize, const X: bool, const Y: bool, const G: bool>(f: Formula, k: f64, [x, y, o, g]: [&[Cell<Lane>]; 4], flat: &[f64], e: usize) -> Lane {
    let g = if G { [flat[e]; LANES] } else { g[e].get() };
    let (x, y, o) = (nth::<X>(x, e), nth::<Y>(y, e), o[e].get());
    lanewise!(|l| scalar::partial(f, k, I, x[l], y[l], o[l], g[l]))
}
