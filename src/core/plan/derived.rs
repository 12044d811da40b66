//! Plans derived from a plan: its tangent plan (forward mode, and with a
//! scalar root Hessian-vector products), and the replays and sweeps the
//! Jacobians and Hessians of `api::higher` run on them.

use super::adjoints::{share_adjoints, sweep, SharedAdjoints};
use super::{arena_ranges, run_steps, Passes, Plan, Slot, Step};
use crate::core::error::Result;
use crate::core::graph::zeros;
use crate::core::graph::{mark_needs, post_order, Graph, Node};
use crate::core::op::Op;
use crate::core::pattern::{self, Colors};
use crate::core::shape::Shape;
use crate::core::tangent;
use crate::fail;
use std::sync::Arc;

/// A replica, for another thread of a batch (src/batch.rs) or an async
/// call: its steps and its leaves' values (parameters, inputs, constants)
/// copied, its other values, scratch and adjoints left zeroed, since its
/// first replay computes them all (`current` is false). The system's zero
/// pages cost nothing until that replay writes them: a pool of a GP's
/// tangent plan at n = 200 copied ~20 MB per replica.
impl Clone for Plan {
    fn clone(&self) -> Plan {
        Plan {
            graph: self.graph.replica(),
            adj: self.adj.clone(),
            shared: self.shared.clone(),
            region: self.region.clone(),
            root: self.root,
            params: self.params.clone(),
            inputs: self.inputs.clone(),
            forward: self.forward.clone(),
            backward: self.backward.clone(),
            needs: self.needs.clone(),
            chains: self.chains,
            clear: self.clear.clone(),
            outputs: self.outputs.clone(),
            varying: self.varying.clone(),
            factored: self.factored.clone(),
            primal: self.primal.clone(),
            names: self.names.clone(),
            current: self.current.clone(),
            plain_layout: self.plain_layout,
            colors: self.colors.clone(),
            lanes_refused: self.lanes_refused,
        }
    }
}

/// A tangent plan's sweep from its primal root (output 0) with the
/// ordinary adjoint rules: valueAndGrad's gradient, bit for bit, from the
/// forward replay the tangent's sweep ran on. The steps are those of the
/// plan it was derived from, in the same order (the walk from the primal
/// root visits the nodes as that plan's did), so each adjoint sums the
/// same terms in the same order. The tangent's sweep is over before this
/// one clears and writes its adjoints; where large ones share blocks, this
/// sweep lays out blocks of its own by when its adjoints are live (the
/// arena grown to hold them, if need be).
#[derive(Clone)]
pub(super) struct PrimalSweep {
    root: u32,
    steps: Vec<Step>,
    needs: Vec<bool>,
    clear: Vec<(usize, usize)>,
    shared: Option<SharedAdjoints>,
}

/// The walk of a sweep from a tangent plan's primal root: its nodes in
/// post-order, which need an adjoint (those that depend on a parameter),
/// and the steps it sweeps, in sweep order.
pub(super) struct PrimalWalk {
    pub(super) order: Vec<u32>,
    pub(super) needs: Vec<bool>,
    pub(super) swept: Vec<u32>,
}

pub(super) fn primal_walk(nodes: &[Node], root: u32) -> PrimalWalk {
    let order = post_order(nodes, root);
    let mut needs = Vec::new();
    mark_needs(nodes, &order, |n| n.op == Op::Leaf, &mut needs);
    needs[root as usize] = true;
    let swept = order.iter().rev().copied().filter(|&i| nodes[i as usize].op.is_pure() && needs[i as usize]).collect();
    PrimalWalk { order, needs, swept }
}

/// `Plan::factored`: which of the nodes that vary are solves by a matrix
/// that does not; empty where none is.
pub(super) fn factored(nodes: &[Node], varies: &[bool]) -> Vec<bool> {
    let kept = |i: usize| varies[i] && nodes[i].op == Op::SolveGeneral && !varies[nodes[i].parents[0] as usize];
    if (0..nodes.len()).any(kept) {
        (0..nodes.len()).map(kept).collect()
    } else {
        Vec::new()
    }
}

/// Which nodes depend on the `moving` leaves (a tangent plan's tangents):
/// those leaves, and the ops with such an operand.
pub(super) fn varying(nodes: &[Node], moving: impl Iterator<Item = u32>) -> Vec<bool> {
    let mut varies = vec![false; nodes.len()];
    moving.for_each(|v| varies[v as usize] = true);
    for (id, node) in nodes.iter().enumerate() {
        if node.op.is_pure() && node.parents.iter().any(|&p| varies[p as usize]) {
            varies[id] = true;
        }
    }
    varies
}

impl PrimalSweep {
    /// Its adjoints of at least `from` values share blocks (`share_adjoints`).
    fn of(plan: &Plan, from: usize) -> Option<PrimalSweep> {
        let &root = plan.outputs.first()?;
        if plan.region.is_some() {
            return None;
        }
        let nodes = &plan.graph.nodes;
        let PrimalWalk { order, needs, swept } = primal_walk(nodes, root);
        let mut walked = vec![false; nodes.len()];
        for &id in &order {
            walked[id as usize] = true;
        }
        let steps = swept.iter().map(|&i| Step::of(nodes, i, &needs)).collect();
        let values = plan.graph.values.len();
        // (Also where the plan's own sweep shares none: a value laid out in
        // a shared block has no adjoint of its own below `values`.)
        let shared = share_adjoints(nodes, &swept, &needs, root, values, from);
        let in_block = |i: usize| shared.as_ref().is_some_and(|s| s.at[i] >= values);
        let clear = arena_ranges(nodes, |i| walked[i] && needs[i] && !in_block(i));
        Some(PrimalSweep { root, steps, needs, clear, shared })
    }

    /// Node `id`'s adjoint's offset in the arena.
    fn at(&self, nodes: &[Node], id: u32) -> usize {
        self.shared.as_ref().map_or(nodes[id as usize].val, |s| s.at[id as usize])
    }
}

impl Plan {
    /// The plan of wᵀ·y, y this plan's root flattened and w a new last
    /// parameter of y's size: its gradient at w = eᵢ is row i of the
    /// Jacobian (and y itself for w), so a batch over rows replays a
    /// Jacobian on every core and in lanes where the ops allow.
    pub fn row_plan(&self) -> Result<Plan> {
        let mut g = self.graph.skeleton()?;
        let slot_node = |s: &Slot, op: Op, g: &mut Graph| match s.node {
            Some(id) => Ok(id),
            None => g.leaf(op, s.shape, &[]),
        };
        let mut params = Vec::with_capacity(self.params.len() + 1);
        for s in &self.params {
            params.push(slot_node(s, Op::Leaf, &mut g)?);
        }
        let mut inputs = Vec::with_capacity(self.inputs.len());
        for s in &self.inputs {
            inputs.push(slot_node(s, Op::Input, &mut g)?);
        }
        let m = self.root_shape().size();
        let w = g.leaf(Op::Leaf, Shape::Vector(m), &[])?;
        params.push(w);
        let flat = match self.root_shape() {
            Shape::Vector(_) => self.root,
            _ => g.op(Op::Reshape(Shape::Vector(m)), &[self.root], false)?,
        };
        let root = g.op(Op::Dot, &[w, flat], false)?;
        Plan::build_with(&g, root, &params, &inputs, Passes::default())
    }

    /// The plan of this one's tangent (forward mode, `core::tangent`): its
    /// root is the root's tangent and its one output the root. It takes the
    /// parameters, then one tangent per parameter (shaped alike), then the
    /// inputs. With a scalar root, its gradient is H·v for the parameters
    /// and ∇f for the tangents: a Hessian-vector product.
    pub fn tangent_plan(&self) -> Result<Plan> {
        self.tangent_plan_with(Passes::default())
    }

    /// `tangent_plan` built with `passes` (tests switch each off).
    pub fn tangent_plan_with(&self, passes: Passes) -> Result<Plan> {
        let mut g = self.graph.skeleton()?;
        let leaf = |s: &Slot, op: Op, g: &mut Graph| match s.node {
            Some(id) => Ok(id),
            None => g.leaf(op, s.shape, &[]),
        };
        let mut params = Vec::with_capacity(2 * self.params.len());
        for s in &self.params {
            params.push(leaf(s, Op::Leaf, &mut g)?);
        }
        let mut seeds = Vec::new();
        for (s, &x) in self.params.iter().zip(&params.clone()) {
            let v = g.leaf(Op::Leaf, s.shape, &[])?;
            params.push(v);
            if s.node.is_some() {
                seeds.push((x, v));
            }
        }
        let mut inputs = Vec::with_capacity(self.inputs.len());
        for s in &self.inputs {
            inputs.push(leaf(s, Op::Input, &mut g)?);
        }
        let t = match tangent::jvp(&mut g, self.root, &seeds, false)? {
            Some(t) => t,
            None => g.leaf(Op::Const, self.root_shape(), &[])?,
        };
        let mut plan = Plan::build_outputs(&g, &[t, self.root], &params, &inputs, self.params.len(), passes)?;
        plan.primal = PrimalSweep::of(&plan, passes.share_adjoints_from);
        if let Some(len) = plan.primal.as_ref().and_then(|p| p.shared.as_ref()).map(|s| s.len) {
            if plan.adj.0.len() < len {
                // No sweep has run: all zeros, so a larger zeroed arena,
                // untouched until a sweep writes it, rather than zeros
                // written past the old one (pages faulted in at build).
                plan.adj.0 = zeros(len)?;
            }
        }
        Ok(plan)
    }

    /// After a replay of a tangent plan and the sweep from its tangent, the
    /// sweep from its primal root (`PrimalSweep`), and the gradient of the
    /// primal parameters (the first half) into `out`, one after another;
    /// false (and nothing written) where the plan keeps no such sweep.
    pub fn primal_gradient(&mut self, out: &mut [f64]) -> Result<bool> {
        let Some(p) = &self.primal else { return Ok(false) };
        let primal = &self.params[..self.params.len() / 2];
        if out.len() != primal.iter().map(|s| s.shape.size()).sum::<usize>() {
            return fail!("gradient buffer does not match the plan's parameters");
        }
        let adj = &mut self.adj.0;
        sweep(&p.steps, &p.clear, p.shared.as_ref(), p.root, &mut self.graph, adj, &p.needs);
        let mut at = 0;
        for slot in primal {
            let to = &mut out[at..at + slot.shape.size()];
            match slot.node {
                Some(node) if p.needs[node as usize] => {
                    let from = p.at(&self.graph.nodes, node);
                    to.copy_from_slice(&adj[from..from + to.len()]);
                }
                _ => to.fill(0.0),
            }
            at += to.len();
        }
        Ok(true)
    }

    /// Whether this is a tangent plan with steps that depend on the
    /// tangents: `forward_tangent` replays those alone.
    pub fn replays_tangents_alone(&self) -> bool {
        !self.varying.is_empty()
    }

    /// How many of the solves `forward_tangent` replays keep their factors
    /// (`Plan::factored`): what tests check that with.
    #[doc(hidden)]
    pub fn solves_kept(&self) -> usize {
        self.factored.iter().filter(|&&f| f).count()
    }

    /// In a tangent plan replayed once already at these parameters and
    /// inputs, replay only what depends on the tangents (fed anew), each
    /// solve by an unchanged matrix with the factors it holds; the root's
    /// value (the tangent) after.
    pub fn forward_tangent(&mut self) -> Result<&[f64]> {
        run_steps::<true>(&mut self.graph, &self.varying, &self.factored)?;
        let g = &self.graph;
        Ok(&g.values[g.nodes[self.root as usize].range()])
    }

    /// The colors of a tangent plan's forward Jacobian columns: of its
    /// primal root (output 0) over its primal parameters
    /// (`core::pattern`), made at the first call; `None` where they take as
    /// many groups of lanes as the columns do.
    pub fn column_colors(&self) -> Option<Arc<Colors>> {
        let made = self.colors.get_or_init(|| {
            let &root = self.outputs.first()?;
            let (mut sources, mut q) = (Vec::new(), 0);
            for s in &self.params[..self.params.len() / 2] {
                if let Some(node) = s.node {
                    sources.push((node, q));
                }
                q += s.shape.size();
            }
            pattern::colors(&self.graph, root, &sources, q, super::LANES).map(Arc::new)
        });
        made.clone()
    }

    /// Output `i`'s value after a replay (`build_outputs`).
    pub fn output(&self, i: usize) -> Result<&[f64]> {
        match self.outputs.get(i) {
            Some(&id) => Ok(&self.graph.values[self.graph.nodes[id as usize].range()]),
            None => fail!("plan has no output {i}"),
        }
    }
}
