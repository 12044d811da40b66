//! Plans that take a graph as it is, without compacting a copy: a plan read
//! from JSON that `toJSON` wrote, and a large trace with its values.

use super::{lanes, Passes, Plan, Slot};
use crate::core::error::Result;
use crate::core::graph::{post_order, Graph};
use crate::core::op::Op;
use crate::fail;

impl Plan {
    /// `build_with`, taking the graph: when compacting it would change
    /// nothing but where leaves sit (every node reaches the root, the ops
    /// already stand in the order compaction gives them, and there is no
    /// constant to fold), the graph is the plan's as it is. A plan read
    /// from JSON written by `toJSON` is such a graph; skipping compaction
    /// halves the cost of building it. Same ops in the same order: the
    /// same steps, so the same results bit for bit.
    pub fn adopt(g: Graph, root: u32, params: &[u32], inputs: &[u32], passes: Passes) -> Result<Plan> {
        if !Plan::compact_already(&g, root, params, inputs, passes)? {
            return Plan::build_with(&g, root, params, inputs, passes);
        }
        let slot = |&id: &u32| Slot { shape: g.nodes[id as usize].shape, node: Some(id) };
        let params: Vec<Slot> = params.iter().map(slot).collect();
        let inputs: Vec<Slot> = inputs.iter().map(slot).collect();
        let moving = params.len();
        Plan::of_compact(g, root, &[], params, inputs, moving, passes, false)
    }

    /// `adopt` of a trace's graph, whose values are those of a replay at
    /// the traced arguments: the first forward replay, if fed the same
    /// bits, has nothing to compute.
    pub fn adopt_current(g: Graph, root: u32, params: &[u32], inputs: &[u32]) -> Result<Plan> {
        if !Plan::trace_adoptable(&g, root, params, inputs)? {
            return fail!("a trace adopted as a plan must be compact");
        }
        let slot = |&id: &u32| Slot { shape: g.nodes[id as usize].shape, node: Some(id) };
        let params: Vec<Slot> = params.iter().map(slot).collect();
        let inputs: Vec<Slot> = inputs.iter().map(slot).collect();
        let moving = params.len();
        Plan::of_compact(g, root, &[], params, inputs, moving, Passes::default(), true)
    }

    /// Whether `adopt` takes `g` as it is.
    pub fn compact_already(g: &Graph, root: u32, params: &[u32], inputs: &[u32], passes: Passes) -> Result<bool> {
        Plan::compact_in(g, root, params, inputs, passes, true)
    }

    /// Whether `adopt_current` takes a trace's graph `g`: compact, with its
    /// ops in the walk's order, or in any order past `lanes::MAX_LANE_VALUES`
    /// values that depend on a parameter (the steps then follow the walk,
    /// and such a plan never runs in lanes, whose layout reads the order of
    /// the ids).
    pub fn trace_adoptable(g: &Graph, root: u32, params: &[u32], inputs: &[u32]) -> Result<bool> {
        let in_order = lanes::values_on_params(&g.nodes, params.iter().copied()) <= lanes::MAX_LANE_VALUES;
        Plan::compact_in(g, root, params, inputs, Passes::default(), in_order)
    }

    fn compact_in(g: &Graph, root: u32, params: &[u32], inputs: &[u32], passes: Passes, in_order: bool) -> Result<bool> {
        g.node(root)?;
        let nodes = &g.nodes;
        // Each parameter and input once, and no other leaf fed (compaction
        // would make it a constant).
        let mut fed = vec![false; nodes.len()];
        for (ids, op) in [(params, Op::Leaf), (inputs, Op::Input)] {
            for &id in ids {
                if g.node(id)?.op != op || std::mem::replace(&mut fed[id as usize], true) {
                    return Ok(false);
                }
            }
        }
        for (node, &fed) in nodes.iter().zip(&fed) {
            let folds = passes.fold_constants && node.parents.iter().all(|&p| nodes[p as usize].op == Op::Const);
            let stays = match node.op {
                Op::Leaf | Op::Input => fed,
                Op::Const => true,
                Op::External => false,
                _ => !folds,
            };
            if !stays {
                return Ok(false);
            }
        }
        let order = post_order(nodes, root);
        // Leaves may sit anywhere; ops must come in the walk's order.
        let mut last_op = None;
        for &id in order.iter().filter(|_| in_order) {
            if !nodes[id as usize].op.is_leaf() {
                if last_op.is_some_and(|last| last > id) {
                    return Ok(false);
                }
                last_op = Some(id);
            }
        }
        Ok(order.len() == nodes.len())
    }
}
