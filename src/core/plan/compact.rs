//! Compaction: the part of a graph that reaches a plan's roots, copied in
//! post-order, leaves given their roles, constants folded as asked.

use super::Passes;
use crate::core::error::Result;
use crate::core::graph::{post_order_all, Graph, Node};
use crate::core::op::Op;
use crate::fail;

/// Copy the part of `src` that reaches `root` into a new graph in post-order,
/// parameters as `Leaf`, inputs as `Input`, any other leaf as a constant,
/// folding constant-only op nodes and merging identical ones as `passes`
/// say. Returns the new graph and the new id of every old node (`u32::MAX`
/// where dropped).
pub(super) fn compact(src: &Graph, roots: &[u32], params: &[u32], inputs: &[u32], passes: Passes) -> Result<(Graph, Vec<u32>)> {
    let mut new_id = vec![u32::MAX; src.nodes.len()];
    // Each leaf's role in constant time: a plan may have 100 000s of parameters.
    let mut role = vec![Op::Const; src.nodes.len()];
    for &id in inputs {
        role[id as usize] = Op::Input;
    }
    for &id in params {
        role[id as usize] = Op::Leaf;
    }
    let order = post_order_all(&src.nodes, roots);
    // Every value and all scratch in untouched zeroed memory: what a replay
    // computes is written (and the pages made resident) by the replay, not here.
    let room = |size: fn(&Node) -> usize| order.iter().fold(0usize, |n, &id| n.saturating_add(size(&src.nodes[id as usize])));
    let mut g = Graph::over_zeroed(room(|n| n.shape.size()), room(|n| n.aux_len), passes.merge_identical);
    for old in order {
        let node = &src.nodes[old as usize];
        let id = match node.op {
            Op::External => {
                return fail!("this objective holds a node built outside this package's ops, which cannot be replayed or serialized.")
            }
            op if op.is_leaf() => match role[old as usize] {
                Op::Const => g.leaf(Op::Const, node.shape, src.value(old)?)?,
                fed => g.leaf(fed, node.shape, &[])?,
            },
            op => {
                let parents: Vec<u32> = node.parents.iter().map(|&p| new_id[p as usize]).collect();
                let fold = passes.fold_constants && parents.iter().all(|&p| g.nodes[p as usize].op == Op::Const);
                let id = g.op(op, &parents, fold)?;
                if fold {
                    g.freeze(id);
                }
                id
            }
        };
        new_id[old as usize] = id;
    }
    g.end_zeroed();
    Ok((g, new_id))
}
