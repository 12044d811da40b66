//! A batch's replay of a plan `LANES` points at a time (src/batch.rs).
//!
//! Every value and adjoint of the plan is held once per point, side by side
//! (element `i` of the plan's arena for point `l` at `lanes[i][l]`), and
//! each step runs across the points at once: its dispatch is paid once per
//! `LANES` points, the points' dependency chains overlap, and the loops over
//! the lanes are vector instructions. What does not depend on a parameter
//! (or only on the leading `fixed` slots, which every point holds alike: a
//! Hessian's x) is the same at every point: it is computed once, by the
//! ordinary kernels, when the lanes are made.

use super::lane_base::{lanewise, widest, Arena, Lane, Layout, Term, LANES};
use super::lane_uniform::Uniform;
use super::{Plan, Step};
use crate::core::graph::{eval, post_order_all, Node};
use crate::core::op::Op;
use crate::core::kernels::scalar::{self, with_constant_formula, Formula};
use std::cell::{Cell, OnceCell};

/// The most values that depend on a parameter (`values_on_params`) of a
/// plan replayed in lanes: what its lanes hold then, 2·LANES times as
/// many, stays within a core's cache.
pub(super) const MAX_LANE_VALUES: usize = 1 << 15;

/// The most values of a plan replayed in lanes, constants and inputs
/// included. The lane arenas keep the plan's offsets, so they span
/// 2·LANES times this, though the pages of the constants' lanes are never
/// touched: 32 MiB of address space at most. Under WebAssembly, whose
/// memory is committed as it grows and never shrinks, 4 MiB as before.
#[cfg(not(target_arch = "wasm32"))]
const MAX_LANE_ARENA: usize = 1 << 18;
#[cfg(target_arch = "wasm32")]
const MAX_LANE_ARENA: usize = MAX_LANE_VALUES;

/// Lanes in a page of memory (4 KiB).
const LANES_PER_PAGE: usize = 4096 / (LANES * 8);

/// The values of the nodes that depend on a parameter: at most what a lane
/// replay holds per lane. Constants, inputs and what depends on them alone
/// are read from the plan's arena, so a model's data do not count: a
/// logistic regression on 1 000 × 20 covariates (20 000 values) replays
/// its Hessian's directions in lanes.
pub(super) fn values_on_params(nodes: &[Node], params: impl Iterator<Item = u32>) -> usize {
    let on = super::derived::varying(nodes, params);
    nodes.iter().zip(on).filter(|&(_, on)| on).map(|(n, _)| n.shape.size()).sum()
}

#[cfg(not(target_arch = "wasm32"))]
use super::lane_kernels as vectors;

/// Under WebAssembly only scalar steps run in lanes (lane_kernels.rs says why).
#[cfg(target_arch = "wasm32")]
mod vectors {
    use super::{Lane, Layout, Term};
    use crate::core::graph::Node;
    use std::cell::{Cell, OnceCell};

    pub fn laned(_: &[Node], _: usize, _: &[bool]) -> bool {
        false
    }
    pub fn forward(_: &[Node], _: usize, _: &Layout, _: &[f64], _: &[Cell<Lane>], _: &[OnceCell<bool>]) {}
    pub fn adjoint(_: &[Node], _: usize, _: &Layout, _: &[f64], _: &[f64], _: &[Cell<Lane>], _: impl Fn(u32) -> bool, _: &[Term]) {}
}

/// The arenas of a lane replay, and which nodes differ from point to point.
pub struct Lanes {
    arena: Arena,
    /// How many lanes of the arena lie in pages this replay writes: the
    /// rest (a constant's lanes) is never touched, so never resident.
    resident: usize,
    layout: Layout,
    varying: Vec<bool>,
    /// Which nodes depend on the fixed slots. One that neither varies nor
    /// does depends on inputs and constants alone, and `lanes` computes it
    /// again only when an input has changed (`Current::inputs`).
    on_fixed: Vec<bool>,
    /// The forward steps a replay runs in lanes: those that vary and whose
    /// values the replay reads (`Plan::lane_steps`).
    steps: Vec<Step>,
    /// Which nodes' adjoints the backward sweep computes in lanes: those
    /// that lead to a parameter from one that depends on a parameter; with
    /// fixed slots, those that lead to a fixed slot, whose adjoints alone
    /// the sweep gives (a fixed slot's adjoint differs from point to point
    /// when the others do). None in lanes made for `replay_lanes_forward`.
    swept: Vec<bool>,
    /// Which swept adjoints are the same in every lane: swept once, when
    /// the lanes are made, and never in lanes (lane_uniform.rs).
    uniform: Uniform,
    /// Whether these lanes were made for `replay_lanes`, with a backward sweep.
    sweep: bool,
    /// The nodes that do not vary whose values lane steps read: `lanes`
    /// writes them into every lane.
    shown: Vec<u32>,
    /// The matrices of the solves that run in lanes, whose pivots `lanes`
    /// checks each time (nalgebra's substitution stops at a zero one).
    solved: Vec<u32>,
    /// How many leading parameter slots are the same at every point (a
    /// forward Jacobian's, a Hessian's or a reverse Jacobian's x), their
    /// values read from the plan when the lanes are made. 0 for a batch's lanes.
    fixed: usize,
    /// Per node, the term that comes first to its adjoint, when a lane
    /// kernel writes it whole: (the node it comes from, which operand).
    /// That term is written, not added, so the adjoint is not cleared.
    first: Vec<Term>,
    /// The adjoints cleared before each sweep: the others' first terms write them.
    clear: Vec<(usize, usize)>,
    /// Per node, once a lane kernel asks, whether every entry of its value
    /// is finite (a matrix that multiplies unit directions); forgotten when
    /// the lanes are made again, for values that may have changed (a
    /// constant's is kept).
    finite: Vec<OnceCell<bool>>,
}

/// `f`'s value, lane by lane. Each arm names its formula as a constant, so
/// the match inside `scalar::value` folds away and the loop is straight.
#[inline(always)]
fn lane_values(f: Formula, k: f64, x: Lane, y: Lane) -> Lane {
    #[inline(always)]
    fn each(f: Formula, k: f64, x: Lane, y: Lane) -> Lane {
        lanewise!(|l| scalar::value(f, k, x[l], y[l]))
    }
    with_constant_formula!(f, |c| each(c, k, x, y))
}

/// Operand `i`'s share of `f`'s adjoint, lane by lane, added to `to`.
#[inline(always)]
fn lane_partials(f: Formula, k: f64, i: usize, [x, y, v, g]: [Lane; 4], to: &Cell<Lane>) {
    #[inline(always)]
    fn each(f: Formula, k: f64, i: usize, [x, y, v, g]: [Lane; 4], to: &Cell<Lane>) {
        let a = to.get();
        to.set(lanewise!(|l| a[l] + scalar::partial(f, k, i, x[l], y[l], v[l], g[l])));
    }
    with_constant_formula!(f, |c| each(c, k, i, [x, y, v, g], to))
}

impl Lanes {
    /// Bytes the lane arenas take in memory: the lanes written, not the
    /// untouched pages of the lanes no step writes.
    pub fn bytes(&self) -> usize {
        self.arena.bytes().min(self.resident * LANES * 8)
    }
}

impl Plan {
    /// Arenas to replay this plan `LANES` points at a time (`reuse`'s, if
    /// they were made for it), with what does not depend on a parameter
    /// past the first `fixed` slots computed from the constants, inputs
    /// and those slots as they are now; `None` unless every node that
    /// depends on one, or whose adjoint is swept in lanes (`Lanes::swept`),
    /// is a scalar or vector made by an op with a lane kernel (nothing that
    /// can fail), and the plan is small. With `sweep`, for `replay_lanes`;
    /// without, for `replay_lanes_forward`.
    pub fn lanes(&mut self, reuse: Option<Lanes>, fixed: usize, sweep: bool) -> Option<Lanes> {
        let size = self.graph.values.len();
        let mut lanes = match reuse {
            Some(l) if l.arena.len() == 2 * size && l.varying.len() == self.graph.nodes.len() && l.fixed == fixed && l.sweep == sweep => l,
            // A plan's values only grow, so a refusal stands.
            _ if self.lanes_refused == Some((fixed, sweep)) => return None,
            _ => match self.new_lanes(fixed, sweep) {
                Some(l) => l,
                None => {
                    self.lanes_refused = Some((fixed, sweep));
                    return None;
                }
            },
        };
        let nodes = &self.graph.nodes;
        lanes.finite.iter_mut().zip(nodes).filter(|(_, n)| n.op != Op::Const).for_each(|(f, _)| _ = f.take());
        // The steps that differ from point to point run in lanes; the
        // others once, here (a scalar step of either kind is cheap to run),
        // but for those of the inputs alone while the inputs are the same
        // (a Laplace approximation's prior: the factor of K).
        let (g, varying, again) = (&mut self.graph, &lanes.varying, |id: u32| lanes.on_fixed[id as usize] || !self.current.inputs);
        for step in &self.forward {
            match *step {
                Step::Scalar(s) => g.values[s.out as usize] = scalar::value(s.formula, s.k, g.values[s.a as usize], g.values[s.b as usize]),
                Step::Node(id) if !varying[id as usize] && again(id) => eval(&g.nodes, id as usize, &mut g.values, &mut g.aux).ok()?,
                Step::Node(_) => {}
            }
        }
        // A plan in lanes has a plain layout, where nothing else writes them.
        self.current.inputs = true;
        // A solve in lanes follows nalgebra's substitution, which a zero
        // pivot hands to another kernel: then each point goes alone.
        for t in lanes.solved.iter().map(|&t| &g.nodes[t as usize]) {
            let (n, t) = (t.shape.rows_cols().0, &g.values[t.range()]);
            if (0..n).any(|i| t[i * n + i] == 0.0) {
                return None;
            }
        }
        // Into every lane, where the plan's arena has them (`layout` moves
        // only nodes that vary); matrices are read from the plan's arena instead.
        let v = lanes.arena.cells();
        for &id in &lanes.shown {
            for i in g.nodes[id as usize].range() {
                v[i].set([g.values[i]; LANES]);
            }
        }
        self.sweep_uniform(&lanes.uniform, &lanes.layout.adjoint, v);
        Some(lanes)
    }

    /// Whether a batch may replay this plan in lanes (`lanes` can still
    /// refuse, when what does not depend on a parameter fails to compute).
    pub fn replays_in_lanes(&self) -> bool {
        self.lane_varying(0, true).is_some()
    }

    /// `Lanes::varying`, `Lanes::swept` and `Lanes::on_fixed`, if the plan
    /// is small and each node that varies or is swept has a lane kernel.
    /// Varying: what depends on a parameter past the first `fixed` slots
    /// (outputs included, which the forward steps compute too).
    pub(super) fn lane_varying(&self, fixed: usize, sweep: bool) -> Option<(Vec<bool>, Vec<bool>, Vec<bool>)> {
        let nodes = &self.graph.nodes;
        let on_params = || values_on_params(nodes, self.params.iter().filter_map(|s| s.node));
        if !self.plain_layout || self.graph.values.len() > MAX_LANE_ARENA || on_params() > MAX_LANE_VALUES {
            return None;
        }
        let roots: Vec<u32> = std::iter::once(self.root).chain(self.outputs.iter().copied()).collect();
        let order = post_order_all(nodes, &roots);
        let depends = |slots: std::ops::Range<usize>| {
            let mut marks = vec![false; nodes.len()];
            for node in self.params[slots].iter().filter_map(|s| s.node) {
                marks[node as usize] = true;
            }
            for &id in &order {
                marks[id as usize] |= nodes[id as usize].parents.iter().any(|&p| marks[p as usize]);
            }
            marks
        };
        let (np, fixed) = (self.params.len(), fixed.min(self.params.len()));
        let (varying, on_fixed) = (depends(fixed..np), depends(0..fixed));
        // With fixed slots, no other slot's adjoint is read: theirs are a
        // Hessian's or a reverse Jacobian's rows, the others' ∇f at every
        // point. Nothing that leads only to those is swept, here or once
        // for all lanes (`Uniform`: a regression's Xᵀ product for ∇f).
        let swept = match (sweep, fixed) {
            (false, _) => vec![false; nodes.len()],
            (true, 0) => (0..nodes.len()).map(|i| varying[i] && self.needs[i]).collect(),
            (true, _) => (0..nodes.len()).map(|i| on_fixed[i] && self.needs[i]).collect(),
        };
        let fits = (0..nodes.len()).all(|id| !(varying[id] || swept[id]) || node_fits(nodes, id, &varying));
        fits.then_some((varying, swept, on_fixed))
    }

    fn new_lanes(&self, fixed: usize, sweep: bool) -> Option<Lanes> {
        let (varying, swept, on_fixed) = self.lane_varying(fixed, sweep)?;
        let uniform = self.uniform_adjoints(fixed, &varying, &swept);
        let (first, clear) = self.first_terms(&swept, &uniform);
        let read_back = self.read_back(&swept, &uniform);
        let (run, steps) = self.lane_steps(&varying, &read_back, &uniform, !(sweep && fixed > 0));
        let (layout, shown) = self.layout(&varying, &run, &swept, &uniform, &first, &read_back);
        let size = self.graph.values.len();
        let clear = clear.into_iter().map(|(a, b)| (size + a, size + b)).collect();
        let finite = vec![OnceCell::new(); self.graph.nodes.len()];
        let nodes = &self.graph.nodes;
        let in_lanes = |id: usize| matches!(nodes[id].op, Op::TriangularSolve { .. }) && (varying[id] || swept[id]);
        let solved = (0..nodes.len()).filter(|&id| in_lanes(id)).map(|id| nodes[id].parents[0]).collect();
        // The pages the lanes write, values and adjoints at the plan's
        // offsets (`layout` moves a node only into lanes counted here): the
        // nodes that vary or are swept, those that depend on the fixed
        // slots, and those written into every lane. A page is resident
        // whole, and the arena starts anywhere in one: a node's span marks
        // the page after it too.
        let mut touched = vec![false; 2 * size / LANES_PER_PAGE + 2];
        let held = (0..nodes.len()).filter(|&id| varying[id] || swept[id] || on_fixed[id]).chain(shown.iter().map(|&id| id as usize));
        for r in held.map(|id| nodes[id].range()) {
            for start in [r.start, size + r.start] {
                let pages = start / LANES_PER_PAGE..=(start + r.len()) / LANES_PER_PAGE + 1;
                touched[pages].iter_mut().for_each(|t| *t = true);
            }
        }
        let resident = touched.iter().filter(|&&t| t).count() * LANES_PER_PAGE;
        Some(Lanes { arena: Arena::new(2 * size), resident, layout, varying, on_fixed, steps, swept, uniform, sweep, fixed, shown, solved, first, clear, finite })
    }

    /// How many of the steps that vary a lane replay with `fixed` slots
    /// leaves out (`lane_steps`): what tests check that with.
    #[doc(hidden)]
    pub fn lanes_left_out(&self, fixed: usize) -> Option<usize> {
        let lanes = self.new_lanes(fixed, true)?;
        let runs = |s: &Step| matches!(*s, Step::Node(id) if lanes.varying[id as usize]);
        Some(self.forward.iter().filter(|s| runs(s)).count() - lanes.steps.iter().filter(|s| matches!(s, Step::Node(_))).count())
    }

    /// Whether the values of the nodes of the inputs alone are those of
    /// the inputs held (`Current::inputs`): what tests check that with.
    #[doc(hidden)]
    pub fn inputs_current(&self) -> bool {
        self.current.inputs
    }

    /// How many nodes' values and adjoints sit in the lanes of another node
    /// (`layout`): what tests check the shared lanes with.
    #[doc(hidden)]
    pub fn lanes_shared(&self) -> Option<usize> {
        let lanes = self.new_lanes(0, true)?;
        let moved = |at: &[usize], from: usize| self.graph.nodes.iter().zip(at).filter(|(n, &at)| from + n.val != at).count();
        Some(moved(&lanes.layout.value, 0) + moved(&lanes.layout.adjoint, self.graph.values.len()))
    }

    /// How many nodes' values and adjoints the lane kernels read from the
    /// plan's arenas (`Layout::flat`, `Layout::flat_adjoint`), with `fixed`
    /// slots and a sweep: what tests check that path is taken with.
    #[doc(hidden)]
    pub fn lanes_flat(&self, fixed: usize) -> Option<(usize, usize)> {
        let lanes = self.new_lanes(fixed, true)?;
        let count = |v: &[bool]| v.iter().filter(|&&f| f).count();
        Some((count(&lanes.layout.flat), count(&lanes.layout.flat_adjoint)))
    }

    /// Replay `n` points (1 ≤ n ≤ LANES) in lanes: `params` holds them one
    /// after another, `width` values each, slot after slot (the fixed slots
    /// too, unread); their values go to `values` and their gradients, laid
    /// out like `params`, to `grads`. Every lane computes what `forward` and
    /// `backward` do, in the same order, so each point's results are
    /// bit-identical to a single replay. With fixed slots (a Hessian's or a
    /// reverse Jacobian's x, `batch::units`), what depends on them alone
    /// was computed once, when the lanes were made; the sweep goes to their
    /// adjoints alone (`Lanes::swept`); the other slots' gradients, and
    /// `values` (the root's value is not computed), are left as they were.
    pub fn replay_lanes(&self, lanes: &mut Lanes, params: &[f64], width: usize, values: &mut [f64], grads: &mut [f64]) {
        replay(self, lanes, params, width, values, grads)
    }

    /// Replay `n` points (1 ≤ n ≤ LANES) forward only, in lanes made with
    /// `fixed` slots: `params` holds the other slots' values, point after
    /// point, `width` values each; element e of point l's root goes to
    /// `out[e * stride + l]` (stride ≥ n). (A forward Jacobian's columns,
    /// written into its rows: `api::plan_columns`.)
    pub fn replay_lanes_forward(&self, lanes: &mut Lanes, params: &[f64], width: usize, out: &mut [f64], stride: usize) {
        replay_forward(self, lanes, params, width, out, stride)
    }

    /// Set the lanes of the parameters past `lanes.fixed` to the `n`
    /// points in `params`, where each point's values start at `skip`, and
    /// run the forward steps that vary.
    #[inline(always)]
    fn forward_lanes(&self, lanes: &mut Lanes, params: &[f64], width: usize, n: usize, skip: usize) {
        let Lanes { arena, layout, steps, fixed, finite, .. } = lanes;
        let v = arena.cells();
        let (nodes, uniform) = (&self.graph.nodes, &self.graph.values);
        let mut at = skip;
        for slot in &self.params[*fixed..] {
            let size = slot.shape.size();
            if let Some(node) = slot.node {
                for (e, to) in v[layout.value[node as usize]..][..size].iter().enumerate() {
                    let mut lane = to.get();
                    for l in 0..n {
                        lane[l] = params[l * width + at + e];
                    }
                    to.set(lane);
                }
            }
            at += size;
        }
        for step in steps.iter() {
            match *step {
                Step::Scalar(s) => {
                    let [a, b, out] = s.at();
                    v[out].set(lane_values(s.formula, s.k, v[a].get(), v[b].get()));
                }
                Step::Node(id) => vectors::forward(nodes, id as usize, layout, uniform, v, finite),
            }
        }
    }

    #[inline(always)]
    fn replay_lanes_forward_with(&self, lanes: &mut Lanes, params: &[f64], width: usize, out: &mut [f64], stride: usize) {
        let n = params.len() / width.max(1);
        let root = &self.graph.nodes[self.root as usize];
        let size = root.shape.size();
        debug_assert!((1..=LANES).contains(&n) && stride >= n && out.len() >= size.saturating_sub(1) * stride + n);
        self.forward_lanes(lanes, params, width, n, 0);
        let rows = out.chunks_mut(stride).take(size);
        if !lanes.varying[self.root as usize] {
            rows.zip(&self.graph.values[root.range()]).for_each(|(o, &x)| o[..n].fill(x));
            return;
        }
        let at = lanes.layout.value[self.root as usize];
        for (o, lane) in rows.zip(&lanes.arena.cells()[at..at + size]) {
            // Moved in registers, not by a call to memcpy per row (a tall
            // Jacobian's 300 rows of 6 spent 9% of its time in those calls).
            let lane = lane.get();
            match o.first_chunk_mut::<LANES>() {
                Some(o) if n == LANES => *o = lane,
                _ => o.iter_mut().zip(lane).take(n).for_each(|(o, x)| *o = x),
            }
        }
    }

    #[inline(always)]
    fn replay_lanes_with(&self, lanes: &mut Lanes, params: &[f64], width: usize, values: &mut [f64], grads: &mut [f64]) {
        let n = values.len();
        debug_assert!((1..=LANES).contains(&n) && params.len() == n * width && grads.len() == n * width && lanes.sweep);
        // Each point holds the fixed slots too (the same values in each).
        let skip = (0..lanes.fixed).map(|i| self.slot_size(i)).sum();
        self.forward_lanes(lanes, params, width, n, skip);
        let Lanes { arena, layout, swept, uniform: alike, first, clear, fixed, .. } = lanes;
        // Values and adjoints are one arena, which `layout` indexes;
        // scalar steps name an adjoint by the place of its value.
        let v = arena.cells();
        let scalar_adj = &v[self.graph.values.len()..];
        let (nodes, uniform) = (&self.graph.nodes, &self.graph.values);
        for &(a, b) in clear.iter() {
            v[a..b].iter().for_each(|a| a.set([0.0; LANES]));
        }
        let root = self.root as usize;
        v[layout.adjoint[root]].set([1.0; LANES]);
        let takes = |p: u32| swept[p as usize] && !alike.same[p as usize];
        for step in &self.backward {
            match *step {
                Step::Scalar(s) => {
                    let [a, b, out] = s.at();
                    let operands = [v[a].get(), v[b].get(), v[out].get(), scalar_adj[out].get()];
                    if s.needs[0] && !alike.same_at[a] {
                        lane_partials(s.formula, s.k, 0, operands, &scalar_adj[a]);
                    }
                    if s.needs[1] && s.formula.binary() && !alike.same_at[b] {
                        lane_partials(s.formula, s.k, 1, operands, &scalar_adj[b]);
                    }
                }
                Step::Node(id) if swept[id as usize] => vectors::adjoint(nodes, id as usize, layout, uniform, &self.adj.0, v, takes, first),
                Step::Node(_) => {}
            }
        }
        if *fixed == 0 {
            values.copy_from_slice(&v[layout.value[root]].get()[..n]);
        }
        let mut at = 0;
        let slots = if *fixed == 0 { self.params.len() } else { *fixed };
        for slot in &self.params[..slots] {
            let size = slot.shape.size();
            match slot.node {
                Some(node) if self.needs[node as usize] => {
                    for (e, from) in v[layout.adjoint[node as usize]..][..size].iter().enumerate() {
                        let from = from.get();
                        for l in 0..n {
                            grads[l * width + at + e] = from[l];
                        }
                    }
                }
                _ => {
                    for l in 0..n {
                        grads[l * width + at..l * width + at + size].fill(0.0);
                    }
                }
            }
            at += size;
        }
    }
}

widest! {
fn replay(plan: &Plan, lanes: &mut Lanes, params: &[f64], width: usize, values: &mut [f64], grads: &mut [f64]) {
    plan.replay_lanes_with(lanes, params, width, values, grads)
}
}

widest! {
fn replay_forward(plan: &Plan, lanes: &mut Lanes, params: &[f64], width: usize, out: &mut [f64], stride: usize) {
    plan.replay_lanes_forward_with(lanes, params, width, out, stride)
}
}

/// Whether node `id`, which depends on a parameter, can be replayed in
/// lanes: a parameter that is a scalar or vector, a scalar step, or an op
/// with a lane kernel.
fn node_fits(nodes: &[crate::core::graph::Node], id: usize, varying: &[bool]) -> bool {
    let node = &nodes[id];
    if node.op.is_leaf() {
        node.shape.rank() <= 1
    } else {
        vectors::laned(nodes, id, varying)
    }
}
