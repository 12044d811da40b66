//! The kernels of a lane replay (lanes.rs): each op of kernels/mod.rs that a
//! batch replays `LANES` points at a time, on values laid out lane by lane
//! (element `e` of a node for point `l` at `(val + e) * LANES + l`).
//!
//! Each one computes, for every lane, exactly the expression its kernel
//! computes for one point: the same formulas, the same order of sums
//! (`sum_by`'s four partial sums, `dot`'s and `matvec`'s left-to-right
//! folds, `matvec_t_acc`'s blocks of four rows). So every point's results
//! are bit-identical to a single replay; the lanes only run side by side.
//!
//! Native only: a WebAssembly batch runs on one thread with no wide vector
//! registers to gain, and these kernels would add ~110 KiB to its module.

use super::super::graph::Node;
use super::super::kernels::scalar::{self, with_constant_formula, Formula};
use super::super::op::{broadcast, Broadcast, Op};
use super::lanes::{lane, lane_mut, widest, Lane, LANES};

#[inline(always)]
fn add_to(to: &mut Lane, x: &Lane) {
    for l in 0..LANES {
        to[l] += x[l];
    }
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
    let mut total: Lane = std::array::from_fn(|l| (s[0][l] + s[1][l]) + (s[2][l] + s[3][l]));
    while i < n {
        add_to(&mut total, &f(i));
        i += 1;
    }
    total
}

/// Whether a node that differs from point to point can be replayed in
/// lanes: a scalar or vector made by an elementwise op, a sum or mean, a
/// dot, a slice, reshape or concatenation of scalars and vectors, or a
/// constant matrix times a vector. (`varying` says which nodes
/// differ from point to point; the others are read once, from the plan.)
pub fn laned(nodes: &[Node], id: usize, varying: &[bool]) -> bool {
    let node = &nodes[id];
    let parent = |k: usize| &nodes[node.parents[k] as usize];
    let small = (0..node.parents.len()).all(|k| parent(k).shape.rank() <= 1);
    node.shape.rank() <= 1
        && match node.op {
            op if Formula::of(op).is_some() => small,
            Op::Sum | Op::Mean | Op::Dot | Op::Slice { .. } | Op::Reshape(_) | Op::Concat { .. } => small,
            Op::Matmul => !varying[node.parents[0] as usize] && parent(0).shape.rank() == 2 && parent(1).shape.rank() == 1,
            _ => false,
        }
}

/// The two operands of an elementwise node (a unary one's twice), each as
/// its offset and its step from one output element to the next (0 for a
/// broadcast scalar), and how they broadcast.
fn operands(nodes: &[Node], node: &Node) -> ([(usize, usize); 2], Broadcast) {
    let (a, b) = (&nodes[node.parents[0] as usize], &nodes[node.parents[node.parents.len() - 1] as usize]);
    let bc = broadcast(node.op.name(), a.shape, b.shape).map_or(Broadcast::Same, |(_, bc)| bc);
    let n = node.shape.size();
    let step = |p: &Node| (p.shape.size() == n) as usize;
    ([(a.val, step(a)), (b.val, step(b))], bc)
}

/// A laned node's value, for every lane. `uniform` is the plan's own arena,
/// holding what does not differ from point to point (a matvec's matrix).
#[inline(always)]
pub fn forward(nodes: &[Node], id: usize, uniform: &[f64], v: &mut [f64]) {
    let node = &nodes[id];
    let n = node.shape.size();
    let (lower, upper) = v.split_at_mut(node.val * LANES);
    let out = |e: usize| e * LANES..(e + 1) * LANES;
    let parent = |k: usize| &nodes[node.parents[k] as usize];
    match node.op {
        Op::Sum | Op::Mean => {
            let x = parent(0);
            let len = x.shape.size();
            let mut s = sum_by(len, |i| *lane(lower, x.val + i));
            if node.op == Op::Mean {
                s.iter_mut().for_each(|s| *s /= len as f64);
            }
            upper[out(0)].copy_from_slice(&s);
        }
        Op::Dot => {
            let (x, y) = (parent(0), parent(1));
            let mut s = [0.0; LANES];
            for j in 0..x.shape.size() {
                let (a, b) = (lane(lower, x.val + j), lane(lower, y.val + j));
                for l in 0..LANES {
                    s[l] += a[l] * b[l];
                }
            }
            upper[out(0)].copy_from_slice(&s);
        }
        Op::Matmul => {
            let (m, k) = parent(0).shape.rows_cols();
            let a = &uniform[parent(0).range()];
            matvec(m, k, a, &lower[parent(1).val * LANES..], &mut upper[..m * LANES]);
        }
        // Copies: a vector's block, the same values reshaped, the parts one after another.
        Op::Slice { start, .. } => {
            let from = (parent(0).val + start[0]) * LANES;
            upper[..n * LANES].copy_from_slice(&lower[from..from + n * LANES]);
        }
        Op::Reshape(_) => upper[..n * LANES].copy_from_slice(&lower[parent(0).val * LANES..(parent(0).val + n) * LANES]),
        Op::Concat { .. } => {
            let mut at = 0;
            for k in 0..node.parents.len() {
                let (from, len) = (parent(k).val * LANES, parent(k).shape.size() * LANES);
                upper[at..at + len].copy_from_slice(&lower[from..from + len]);
                at += len;
            }
        }
        op => {
            let Some((f, k)) = Formula::of(op) else { unreachable!("a laned node's op has a lane kernel") };
            let [(xa, sa), (xb, sb)] = operands(nodes, node).0;
            with_constant_formula!(f, |c| {
                for e in 0..n {
                    let (x, y, o) = (lane(lower, xa + e * sa), lane(lower, xb + e * sb), lane_mut(upper, e));
                    for l in 0..LANES {
                        o[l] = scalar::value(c, k, x[l], y[l]);
                    }
                }
            })
        }
    }
}

/// `matrix::matvec` for every lane: out[i] = Σ_j a[i][j] x[j], left to
/// right from 0. Four rows at a time, so their sums do not wait on each other.
#[inline(always)]
fn matvec(m: usize, k: usize, a: &[f64], x: &[f64], out: &mut [f64]) {
    const ROWS: usize = 4;
    let mut i = 0;
    while i + ROWS <= m {
        let mut s = [[0.0; LANES]; ROWS];
        for j in 0..k {
            let xj = lane(x, j);
            for (r, sr) in s.iter_mut().enumerate() {
                let aij = a[(i + r) * k + j];
                for l in 0..LANES {
                    sr[l] += aij * xj[l];
                }
            }
        }
        out[i * LANES..(i + ROWS) * LANES].copy_from_slice(s.as_flattened());
        i += ROWS;
    }
    for i in i..m {
        let mut s = [0.0; LANES];
        for j in 0..k {
            let (aij, xj) = (a[i * k + j], lane(x, j));
            for l in 0..LANES {
                s[l] += aij * xj[l];
            }
        }
        *lane_mut(out, i) = s;
    }
}

/// A laned node's adjoint (at its offset in `adj`) accumulated into each
/// parent that `takes` one, in the order and by the expressions of
/// `kernels::adjoint`.
#[inline(always)]
pub fn adjoint(nodes: &[Node], id: usize, uniform: &[f64], v: &[f64], adj: &mut [f64], takes: impl Fn(u32) -> bool) {
    let node = &nodes[id];
    let n = node.shape.size();
    let (lower, upper) = adj.split_at_mut(node.val * LANES);
    // The node's adjoint, when it is a scalar (a sum's, a mean's, a dot's).
    let g0 = if n > 0 { *lane(upper, 0) } else { [0.0; LANES] };
    for (k, &p) in node.parents.iter().enumerate() {
        if !takes(p) {
            continue;
        }
        let d = &nodes[p as usize];
        match node.op {
            Op::Sum => (0..d.shape.size()).for_each(|e| add_to(lane_mut(lower, d.val + e), &g0)),
            Op::Mean => {
                let s: Lane = std::array::from_fn(|l| g0[l] / d.shape.size() as f64);
                (0..d.shape.size()).for_each(|e| add_to(lane_mut(lower, d.val + e), &s))
            }
            Op::Dot => {
                let other = &nodes[node.parents[1 - k] as usize];
                for e in 0..d.shape.size() {
                    let (x, to) = (lane(v, other.val + e), lane_mut(lower, d.val + e));
                    for l in 0..LANES {
                        to[l] += g0[l] * x[l];
                    }
                }
            }
            // `axpy(1.0, g, d)` in the kernels: 1.0 · g is g, so d += g.
            Op::Slice { start, .. } => (0..n).for_each(|e| add_to(lane_mut(lower, d.val + start[0] + e), lane(upper, e))),
            Op::Reshape(_) => (0..n).for_each(|e| add_to(lane_mut(lower, d.val + e), lane(upper, e))),
            Op::Concat { .. } => {
                let at: usize = node.parents[..k].iter().map(|&q| nodes[q as usize].shape.size()).sum();
                (0..d.shape.size()).for_each(|e| add_to(lane_mut(lower, d.val + e), lane(upper, at + e)))
            }
            Op::Matmul => {
                let (m, kk) = nodes[node.parents[0] as usize].shape.rows_cols();
                let a = &uniform[nodes[node.parents[0] as usize].range()];
                matvec_t_acc(m, kk, a, &upper[..m * LANES], &mut lower[d.val * LANES..(d.val + kk) * LANES]);
            }
            op => {
                let Some((f, kexp)) = Formula::of(op) else { unreachable!("a laned node's op has a lane kernel") };
                let ([(xa, sa), (xb, sb)], bc) = operands(nodes, node);
                let summed = matches!((bc, k), (Broadcast::ScalarLeft, 0) | (Broadcast::ScalarRight, 1));
                let at = Terms { x: (xa, sa), y: (xb, sb), out: node.val, n, summed };
                // Each formula and operand a constant, so each loop is straight vector code.
                with_constant_formula!(f, |c| match k {
                    0 => at.add::<0>(c, kexp, v, upper, lower, d.val),
                    _ => at.add::<1>(c, kexp, v, upper, lower, d.val),
                })
            }
        }
    }
}

/// Where an elementwise node's adjoint terms come from: its operands
/// (offset, step per element), its value, its length, and whether the
/// operand taking them is a broadcast scalar (which takes their sum).
#[derive(Clone, Copy)]
struct Terms {
    x: (usize, usize),
    y: (usize, usize),
    out: usize,
    n: usize,
    summed: bool,
}

impl Terms {
    /// Operand `I`'s terms of formula `f`'s adjoint (`g` at the node's
    /// offset in `adj`) added to its adjoint at `to`, as `binary_adjoint`
    /// and `unary_adjoint` add them.
    #[inline(always)]
    fn add<const I: usize>(&self, f: Formula, k: f64, v: &[f64], g: &[f64], adj: &mut [f64], to: usize) {
        if self.summed {
            // `sum_by`, written out: a closure here is not inlined, and
            // without it the formula is no longer a constant.
            let mut s = [[0.0; LANES]; 4];
            let body = self.n - self.n % 4;
            let mut e = 0;
            while e < body {
                for (j, sj) in s.iter_mut().enumerate() {
                    add_to(sj, &self.term::<I>(f, k, v, g, e + j));
                }
                e += 4;
            }
            let mut total: Lane = std::array::from_fn(|l| (s[0][l] + s[1][l]) + (s[2][l] + s[3][l]));
            while e < self.n {
                add_to(&mut total, &self.term::<I>(f, k, v, g, e));
                e += 1;
            }
            add_to(lane_mut(adj, to), &total);
        } else {
            for e in 0..self.n {
                let t = self.term::<I>(f, k, v, g, e);
                add_to(lane_mut(adj, to + e), &t);
            }
        }
    }

    /// Output element `e`'s term for operand `I`, lane by lane.
    #[inline(always)]
    fn term<const I: usize>(&self, f: Formula, k: f64, v: &[f64], g: &[f64], e: usize) -> Lane {
        let Terms { x: (xa, sa), y: (xb, sb), out, .. } = *self;
        let (x, y, o, g) = (lane(v, xa + e * sa), lane(v, xb + e * sb), lane(v, out + e), lane(g, e));
        let mut t = [0.0; LANES];
        for l in 0..LANES {
            t[l] = scalar::partial(f, k, I, x[l], y[l], o[l], g[l]);
        }
        t
    }
}

widest! {
/// `matrix::matvec_t_acc` for every lane: d += Aᵀ g, in blocks of four rows
/// summed as that kernel sums them, then the rows left one at a time.
/// Compiled on its own (`widest!`), not inlined into the whole replay:
/// there its loop was vector code or not depending on what else the replay
/// held, and three more ops made the 13-vector regression's batch 37%
/// slower. (The other kernels stay inlined: out of line, they measured slower.)
fn matvec_t_acc(m: usize, k: usize, a: &[f64], g: &[f64], d: &mut [f64]) {
    let mut i = 0;
    while i + 4 <= m {
        let gs: [&Lane; 4] = std::array::from_fn(|r| lane(g, i + r));
        for j in 0..k {
            let r: [f64; 4] = std::array::from_fn(|r| a[(i + r) * k + j]);
            let to = lane_mut(d, j);
            for l in 0..LANES {
                to[l] += ((gs[0][l] * r[0] + gs[1][l] * r[1]) + gs[2][l] * r[2]) + gs[3][l] * r[3];
            }
        }
        i += 4;
    }
    for i in i..m {
        let gi = lane(g, i);
        for j in 0..k {
            let (aij, to) = (a[i * k + j], lane_mut(d, j));
            for l in 0..LANES {
                to[l] += gi[l] * aij;
            }
        }
    }
}
}
