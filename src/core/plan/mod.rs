//! A compiled plan: the graph that reaches the root, compacted into
//! post-order, optimized once, with every value, adjoint and scratch at a
//! fixed offset in arenas sized at build time. A replay allocates nothing.
//!
//! Optimizations, each done once when the plan is built:
//! - dead nodes (not reaching the root) are dropped;
//! - identical nodes are already merged by the graph that is compacted;
//! - nodes computed from constants only are folded into constants;
//! - adjoints are computed only for nodes that depend on a parameter, so
//!   nothing flows into constants or inputs;
//! - an elementwise op on scalars becomes a `ScalarStep`, an instruction
//!   over arena offsets: no shapes, slices or dispatch through the kernels,
//!   which is most of a scalar node's cost. Its formulas are the kernels'
//!   own (kernels/scalar.rs), so results stay bit-identical.

use super::error::Result;
use adjoints::{arena_ranges, share_adjoints, sweep, AdjointArena, SharedAdjoints};
use compact::compact;
use current::Current;
use super::graph::{eval, eval_factored, grow, mark_needs, post_order, post_order_all, zeros, Graph, Node};
use super::kernels::scalar::{self, Formula};
use super::op::Op;
use super::shape::Shape;
use crate::fail;

#[cfg(not(target_arch = "wasm32"))]
mod lane_kernels;
#[cfg(not(target_arch = "wasm32"))]
mod lane_products;
mod adjoints;
mod adopt;
mod compact;
mod current;
mod derived;
mod lane_base;
mod lane_layout;
mod lanes;
mod lane_uniform;
mod values;
pub use lane_base::LANES;
pub use lanes::Lanes;

/// A parameter or input of the plan, in the caller's order.
#[derive(Debug, Clone)]
pub struct Slot {
    pub shape: Shape,
    /// The plan node it feeds, or `None` when the objective never reads it.
    pub node: Option<u32>,
}

/// How a plan read from JSON is called: with a `{name: value}` map or a
/// single value, its parameters' names (none for a single one), and its
/// inputs' names, each in slot order.
#[derive(Debug, Clone)]
pub struct SlotNames {
    pub map: bool,
    pub params: Vec<Option<String>>,
    pub inputs: Vec<String>,
}

/// Which of the build-time optimizations to run; all on in production, each
/// switched off alone in tests to check results do not change.
#[derive(Debug, Clone, Copy)]
pub struct Passes {
    pub fold_constants: bool,
    pub skip_constant_adjoints: bool,
    /// Merge identical nodes (the eager tape always does, so that eager and
    /// compiled results agree bit for bit).
    pub merge_identical: bool,
    /// Adjoints of at least this many values share blocks of the adjoint
    /// arena with adjoints never live at the same time (`share_adjoints`);
    /// `usize::MAX`: none do.
    pub share_adjoints_from: usize,
    /// A plan with more values than this that depend on a parameter
    /// (`lanes::values_on_params`) lays out its values of at least
    /// `share_adjoints_from` that no sweep step reads in shared blocks
    /// (`values::share_values`). By default, plans too large to replay in
    /// lanes, whose layout reads the arena's (`lanes::MAX_LANE_VALUES`).
    pub share_values_past: usize,
}

/// Adjoints this large or larger share blocks: 4 KiB. A shared block is
/// written first by its node's rule where the rule can (`FirstWrites`),
/// not zeroed before every sweep as a private adjoint is: from 4096
/// values, the mlp's H·v (64×32 matrices) took 36.3–37.9 µs and gp50's
/// gradient (50×50) 37.3–37.9; from 512, 35.6–35.8 and 35.3–36.2. From
/// 128, vectors of 340 shared too, and the regression's Hessian went
/// 17.5 → 20.2–20.4 µs (2026-12-06).
pub const SHARE_ADJOINTS_FROM: usize = 512;

impl Default for Passes {
    fn default() -> Self {
        let share_values_past = lanes::MAX_LANE_VALUES;
        Passes { fold_constants: true, skip_constant_adjoints: true, merge_identical: true, share_adjoints_from: SHARE_ADJOINTS_FROM, share_values_past }
    }
}

/// An elementwise op on scalar operands: its formula (and pow's exponent),
/// the arena offsets of its value and its operands' (for a unary op, `b`
/// repeats `a`), and whether each operand takes an adjoint. 32 bytes, so a
/// plan's steps stay in cache.
#[derive(Debug, Clone, Copy)]
struct ScalarStep {
    formula: Formula,
    needs: [bool; 2],
    /// In a forward step, which operands (bit 0 `a`, bit 1 `b`) are the
    /// step before's value, which `Plan::forward` then has in a register
    /// (`carry_chains`); 0 in a backward step.
    carried: u8,
    out: u32,
    a: u32,
    b: u32,
    k: f64,
}

impl ScalarStep {
    fn at(&self) -> [usize; 3] {
        [self.a as usize, self.b as usize, self.out as usize]
    }
}

/// One node of a replay: through the kernels, or as a scalar step.
#[derive(Debug, Clone, Copy)]
enum Step {
    Node(u32),
    Scalar(ScalarStep),
}

impl Step {
    fn of(nodes: &[Node], id: u32, needs: &[bool]) -> Step {
        let node = &nodes[id as usize];
        let Some((formula, k)) = Formula::of(node.op) else { return Step::Node(id) };
        let arity = if formula.binary() { 2 } else { 1 };
        let scalar = |p: &u32| nodes[*p as usize].shape == Shape::Scalar;
        let (a, b) = (node.parents[0], node.parents[node.parents.len() - 1]);
        let offset = |i: u32| u32::try_from(nodes[i as usize].val).ok();
        let (Some(out), Some(va), Some(vb)) = (u32::try_from(node.val).ok(), offset(a), offset(b)) else {
            return Step::Node(id); // an arena past 2^32 values: the general path
        };
        if node.shape != Shape::Scalar || node.parents.len() != arity || !node.parents.iter().all(scalar) {
            return Step::Node(id);
        }
        Step::Scalar(ScalarStep { formula, needs: [needs[a as usize], needs[b as usize]], carried: 0, out, a: va, b: vb, k })
    }
}

/// Runs of scalar steps shorter than this keep their operands in the arena.
const CHAIN: usize = 8;

/// Mark the operands each forward scalar step takes from the step before
/// (`ScalarStep::carried`), in runs of more than `CHAIN` such steps: a
/// chain of dependent ops, where reading back the value just stored is a
/// wait on every op. In shorter runs the ops of several chains overlap
/// anyway, and the test cost more than the wait it saved (the ten-scalar
/// model's compiled call, 3.5% slower with every run marked).
fn carry_chains(forward: &mut [Step]) {
    let carried = |before: &Step, s: &Step| match (before, s) {
        (Step::Scalar(before), Step::Scalar(s)) => (s.a == before.out) as u8 | ((s.b == before.out) as u8) << 1,
        _ => 0,
    };
    let mut start = 0;
    for i in 1..=forward.len() {
        if i < forward.len() && carried(&forward[i - 1], &forward[i]) != 0 {
            continue;
        }
        // Steps start + 1 .. i each take an operand from the step before.
        if i - start > CHAIN {
            for j in start + 1..i {
                let c = carried(&forward[j - 1], &forward[j]);
                if let Step::Scalar(s) = &mut forward[j] {
                    s.carried = c;
                }
            }
        }
        start = i;
    }
}

/// `Clone` gives each thread of a batch its own arenas (derived.rs).
pub struct Plan {
    graph: Graph,
    adj: AdjointArena,
    /// Where large adjoints lie when they share blocks (`share_adjoints`).
    shared: Option<SharedAdjoints>,
    /// Where values share blocks too, the region of the value arena both
    /// kinds of blocks lie in (`values::Region`).
    region: Option<values::Region>,
    root: u32,
    params: Vec<Slot>,
    inputs: Vec<Slot>,
    /// Op nodes evaluated on every replay, in order.
    forward: Vec<Step>,
    /// Op nodes whose adjoint is propagated, in sweep order (reverse).
    backward: Vec<Step>,
    needs: Vec<bool>,
    /// Whether a forward step carries an operand (`carry_chains`).
    chains: bool,
    /// Adjoint ranges cleared before each sweep.
    clear: Vec<(usize, usize)>,
    /// Nodes kept beside the root, whose values a replay also gives.
    outputs: Vec<u32>,
    /// In a tangent plan (`tangent_plan`), the forward steps that depend on
    /// the tangents: all a replay must redo when only they change.
    varying: Vec<Step>,
    /// Per node, whether it is one of those steps that solves by a matrix
    /// that does not depend on the tangents (a solveGeneral's tangent,
    /// A⁻¹(Ḃ − ȦX)): its LU factors from the last replay stand.
    factored: Vec<bool>,
    /// In a tangent plan, the sweep from its primal root, where kept (`PrimalSweep`).
    primal: Option<derived::PrimalSweep>,
    /// For a plan read from JSON, the names its slots are called by.
    pub names: Option<SlotNames>,
    current: Current,
    /// Whether the steps come in the order of the ids (else the plan is a
    /// large trace adopted as recorded, `adopt_current`) and each value has
    /// its own offset (else values share blocks): what lanes' layout reads.
    plain_layout: bool,
    /// A tangent plan's Jacobian columns by color (`column_colors`), once asked for.
    colors: std::sync::OnceLock<Option<std::sync::Arc<crate::core::pattern::Colors>>>,
    /// The `(fixed, sweep)` lanes were last refused for by the plan's
    /// structure (`lanes`): a batch asks every call, and finding out again
    /// took a small plan 3–4 µs a thread (a SEM's Hessian, 5% of it).
    lanes_refused: Option<(usize, bool)>,
}

impl Plan {
    /// Compact the part of `src` that reaches `root`. `params` and `inputs`
    /// are node ids of `src` (leaves); any other leaf becomes a constant
    /// holding its value in `src`. Fails on a hand-built node.
    pub fn build(src: &Graph, root: u32, params: &[u32], inputs: &[u32]) -> Result<Plan> {
        Plan::build_with(src, root, params, inputs, Passes::default())
    }

    pub fn build_with(src: &Graph, root: u32, params: &[u32], inputs: &[u32], passes: Passes) -> Result<Plan> {
        Plan::build_outputs(src, &[root], params, inputs, params.len(), passes)
    }

    /// `build_with` of a plan that also keeps `roots[1..]`, whose values
    /// `output` gives after a replay; `roots[0]` is the root swept back from.
    /// The parameters from `params[moving..]` on (a tangent plan's
    /// tangents) may change alone: what depends on them is the plan's
    /// `varying` steps, which `forward_tangent` replays alone.
    fn build_outputs(src: &Graph, roots: &[u32], params: &[u32], inputs: &[u32], moving: usize, passes: Passes) -> Result<Plan> {
        for &root in roots {
            src.node(root)?;
        }
        for &id in params.iter().chain(inputs) {
            if !src.node(id)?.op.is_leaf() {
                return fail!("node {id} is not a leaf and cannot be a parameter or input");
            }
        }
        let (mut g, mut new_id) = compact(src, roots, params, inputs, passes)?;
        // Folding cuts a constant node off from its parents; drop those too.
        let remap = |new_id: &[u32], ids: &[u32]| -> Vec<u32> { ids.iter().map(|&i| new_id[i as usize]).filter(|&i| i != u32::MAX).collect() };
        let live = post_order_all(&g.nodes, &remap(&new_id, roots)).len();
        if live < g.nodes.len() {
            let (p, i) = (remap(&new_id, params), remap(&new_id, inputs));
            let again = Passes { fold_constants: false, ..passes };
            let (g2, second) = compact(&g, &remap(&new_id, roots), &p, &i, again)?;
            for id in new_id.iter_mut().filter(|id| **id != u32::MAX) {
                *id = second[*id as usize];
            }
            g = g2;
        }
        let slot = |&id: &u32| Slot {
            shape: src.nodes[id as usize].shape,
            node: (new_id[id as usize] != u32::MAX).then(|| new_id[id as usize]),
        };
        let params: Vec<Slot> = params.iter().map(slot).collect();
        let inputs: Vec<Slot> = inputs.iter().map(slot).collect();
        let roots = remap(&new_id, roots);
        Plan::of_compact(g, roots[0], &roots[1..], params, inputs, moving, passes, false)
    }

    /// A plan of a compacted graph `g`, whose slots are given, and whose
    /// parameters from `params[moving..]` on may change alone
    /// (`build_outputs`). With `current`, `g`'s values are those of a
    /// replay at the values its leaves hold, and so are the plan's
    /// (`adopt_current`); else its first replay computes them.
    #[allow(clippy::too_many_arguments)]
    fn of_compact(mut g: Graph, root: u32, outputs: &[u32], params: Vec<Slot>, inputs: Vec<Slot>, moving: usize, passes: Passes, current: bool) -> Result<Plan> {
        let all: Vec<u32> = (0..g.nodes.len() as u32).collect();
        let mut needs = if passes.skip_constant_adjoints {
            let mut needs = Vec::new();
            mark_needs(&g.nodes, &all, |n| n.op == Op::Leaf, &mut needs);
            needs
        } else {
            vec![true; g.nodes.len()]
        };
        needs[root as usize] = true;
        if !outputs.is_empty() {
            // Only what reaches the root is swept back.
            let mut reaches = vec![false; g.nodes.len()];
            for id in post_order(&g.nodes, root) {
                reaches[id as usize] = true;
            }
            needs.iter_mut().zip(&reaches).for_each(|(n, &r)| *n &= r);
        }
        // Steps in the walk's order, the one every path sweeps back in
        // reverse (for a compacted graph, the order of the ids).
        let roots: Vec<u32> = std::iter::once(root).chain(outputs.iter().copied()).collect();
        let pure: Vec<u32> = post_order_all(&g.nodes, &roots).into_iter().filter(|&i| g.nodes[i as usize].op.is_pure()).collect();
        let swept: Vec<u32> = pure.iter().rev().copied().filter(|&i| needs[i as usize]).collect();
        let varies = derived::varying(&g.nodes, params[moving..].iter().filter_map(|s| s.node));
        let from = passes.share_adjoints_from;
        let blocks = if lanes::values_on_params(&g.nodes, params.iter().filter_map(|s| s.node)) > passes.share_values_past {
            // A tangent plan's values are read by two sweeps: from its
            // root, and from its primal root (`PrimalSweep`).
            let primal = outputs.first().map(|&r| derived::primal_walk(&g.nodes, r));
            let mut sweeps = vec![(&swept[..], &needs[..])];
            sweeps.extend(primal.as_ref().map(|p| (&p.swept[..], &p.needs[..])));
            values::share_values(&mut g.nodes, &mut g.values, &pure, &sweeps, &roots, from, &varies, current)
        } else {
            None
        };
        let kept = blocks.map(|b| b.0);
        let plain_layout = pure.windows(2).all(|w| w[0] < w[1]) && kept.is_none();
        let mut forward: Vec<Step> = pure.iter().map(|&i| Step::of(&g.nodes, i, &needs)).collect();
        carry_chains(&mut forward);
        let backward = swept.iter().map(|&i| Step::of(&g.nodes, i, &needs)).collect();
        let base = kept.unwrap_or(g.values.len());
        let mut shared = share_adjoints(&g.nodes, &swept, &needs, root, base, passes.share_adjoints_from);
        let in_block = |i: usize| shared.as_ref().is_some_and(|s| s.at[i] >= base);
        let clear = arena_ranges(&g.nodes, |i| needs[i] && !in_block(i));
        // The adjoints' blocks may not lie over a tangent plan's values:
        // `forward_tangent` replays on those a sweep would overwrite.
        let region = match (blocks, &mut shared) {
            (Some((kept, end)), Some(s)) if outputs.is_empty() => {
                // The adjoints' blocks take turns with the values' (`values::Region`),
                // over the pages the values held (an adopted trace's, resident).
                let len = end.max(s.len);
                match len.checked_sub(g.values.len()) {
                    Some(more) => _ = grow(&mut g.values, more)?,
                    None => g.values.truncate(len),
                }
                s.used -= s.len - kept;
                Some(values::Region::new(kept, g.values.len() - kept)?)
            }
            (blocks, _) => {
                g.values.truncate(blocks.map_or(usize::MAX, |b| b.1));
                None
            }
        };
        // Zeroed lazily by the system: a large adjoint that lies in a shared
        // block leaves its own range untouched, so never resident.
        let adj = AdjointArena(zeros(if region.is_some() { base } else { shared.as_ref().map_or(g.values.len(), |s| s.len) })?);
        g.values.shrink_to_fit();
        g.aux.shrink_to_fit();
        let chains = forward.iter().any(|s| matches!(s, Step::Scalar(s) if s.carried != 0));
        let mut varying: Vec<Step> = pure.iter().filter(|&&i| varies[i as usize]).map(|&i| Step::of(&g.nodes, i, &needs)).collect();
        carry_chains(&mut varying);
        let factored = derived::factored(&g.nodes, &varies);
        let outputs = outputs.to_vec();
        let current = Current { values: current, inputs: false };
        Ok(Plan { graph: g, adj, shared, region, root, params, inputs, forward, backward, needs, chains, clear, outputs, varying, factored, primal: None, names: None, current, plain_layout, colors: Default::default(), lanes_refused: None })
    }

    pub fn params(&self) -> &[Slot] {
        &self.params
    }

    pub fn inputs(&self) -> &[Slot] {
        &self.inputs
    }

    pub fn root_shape(&self) -> Shape {
        self.graph.nodes[self.root as usize].shape
    }

    /// Number of values argument `i` (parameters first) takes, 0 past the end.
    pub fn slot_size(&self, i: usize) -> usize {
        self.slot(i).map_or(0, |s| s.shape.size())
    }

    /// Parameters then inputs, in the order `set` numbers them.
    fn slot(&self, i: usize) -> Option<&Slot> {
        if i < self.params.len() {
            self.params.get(i)
        } else {
            self.inputs.get(i - self.params.len())
        }
    }

    pub fn slot_count(&self) -> usize {
        self.params.len() + self.inputs.len()
    }

    /// Feed parameter or input `i` (parameters first).
    pub fn set(&mut self, i: usize, data: &[f64]) -> Result<()> {
        let Some(slot) = self.slot(i) else {
            return fail!("plan has no argument {i}");
        };
        if data.len() != slot.shape.size() {
            return fail!("argument {i} has {} values, the plan expects {}", data.len(), slot.shape.size());
        }
        if let Some(node) = slot.node {
            let r = self.graph.nodes[node as usize].range();
            self.current.feed(i >= self.params.len(), &self.graph.values[r.clone()], data);
            match data {
                // A scalar by hand: copy_from_slice called memmove even for one value.
                [x] => self.graph.values[r.start] = *x,
                _ => self.graph.values[r].copy_from_slice(data),
            }
        }
        Ok(())
    }

    /// Evaluate every non-constant node; the root's value after.
    pub fn forward(&mut self) -> Result<&[f64]> {
        if std::mem::take(&mut self.current.values) {
            let g = &self.graph;
            return Ok(&g.values[g.nodes[self.root as usize].range()]);
        }
        if self.chains {
            self.forward_with::<true>()
        } else {
            self.forward_with::<false>()
        }
    }

    /// `forward`, with `CARRY` the steps that take the step before's value
    /// (a chain of scalar ops) take it from a register, not back from the
    /// arena it was just stored to (a wait of several cycles on every op).
    /// Without, no step pays for the test.
    fn forward_with<const CARRY: bool>(&mut self) -> Result<&[f64]> {
        run_steps::<CARRY>(&mut self.graph, &self.forward, &[])?;
        let g = &self.graph;
        Ok(&g.values[g.nodes[self.root as usize].range()])
    }
}

/// Evaluate `steps` in order; with `CARRY`, as `Plan::forward_with` says;
/// a solve marked in `factored` with the factors it holds.
fn run_steps<const CARRY: bool>(g: &mut Graph, steps: &[Step], factored: &[bool]) -> Result<()> {
    let mut last = 0.0;
    for step in steps {
        match *step {
            Step::Scalar(s) => {
                let x = if CARRY && s.carried & 1 != 0 { last } else { g.values[s.a as usize] };
                let y = if CARRY && s.carried & 2 != 0 { last } else { g.values[s.b as usize] };
                last = scalar::value(s.formula, s.k, x, y);
                g.values[s.out as usize] = last;
            }
            Step::Node(id) if factored.get(id as usize) == Some(&true) => eval_factored(&g.nodes, id as usize, &mut g.values, &g.aux),
            Step::Node(id) => eval(&g.nodes, id as usize, &mut g.values, &mut g.aux)?,
        }
    }
    Ok(())
}

impl Plan {
    /// Sweep adjoints back from a scalar root seeded with 1.
    pub fn backward(&mut self) {
        if self.region.is_some() {
            return self.backward_in_region();
        }
        sweep(&self.backward, &self.clear, self.shared.as_ref(), self.root, &mut self.graph, &mut self.adj.0, &self.needs);
    }

    /// Parameter `i`'s gradient after `backward`, written into `out`
    /// (zeros for a parameter the objective never reads).
    pub fn gradient(&self, i: usize, out: &mut [f64]) -> Result<()> {
        let Some(slot) = self.params.get(i) else {
            return fail!("plan has no parameter {i}");
        };
        if out.len() != slot.shape.size() {
            return fail!("gradient buffer {i} has {} values, the plan needs {}", out.len(), slot.shape.size());
        }
        match slot.node {
            Some(node) if self.needs[node as usize] => {
                let r = self.graph.nodes[node as usize].range();
                match out {
                    [x] => *x = self.adj.0[r.start],
                    _ => out.copy_from_slice(&self.adj.0[r]),
                }
            }
            _ => out.fill(0.0),
        }
        Ok(())
    }

    /// Op nodes evaluated on every replay (what constant folding reduces).
    pub fn evaluated(&self) -> usize {
        self.forward.len()
    }

    /// Bytes the plan's arenas hold, roughly: values, scratch, and the
    /// adjoints a sweep writes (the rest of that arena is never touched).
    pub fn bytes(&self) -> usize {
        let adjoints = match &self.shared {
            Some(s) => s.used,
            None => self.clear.iter().map(|&(a, b)| b - a).sum::<usize>(),
        };
        8 * (self.graph.values.capacity() + self.graph.aux.capacity() + adjoints)
            + self.graph.nodes.capacity() * std::mem::size_of::<super::graph::Node>()
    }

    /// Values the plan holds: every node's value and scratch.
    pub fn held(&self) -> usize {
        self.graph.values.len() + self.graph.aux.len()
    }

    /// Number of nodes kept, for tests of the optimizer.
    pub fn len(&self) -> usize {
        self.graph.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.graph.nodes.is_empty()
    }
}

#[cfg(test)]
mod tests;
