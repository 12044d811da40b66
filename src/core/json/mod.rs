//! Plans as data (SPEC §8): reading a serialized plan back into a [`Plan`].
//!
//! A plan is untrusted input. Every malformed or hostile plan gets an
//! [`Error`] naming the node at fault, never a panic, and the work done is
//! bounded by the size of the text plus the values the plan declares:
//!
//! - the text is read by serde_json straight into the typed document of
//!   [`schema`], with its `float_roundtrip` feature on so that every number
//!   is correctly rounded (the default parser is off by an ulp for about one
//!   number in five, which would break bit-identical round trips), and with
//!   its recursion limit: arrays and objects nested more than 127 deep, text
//!   that is not JSON, and a number too large for an `f64` are refused as
//!   invalid JSON, at the byte where reading stopped ([`messages`]);
//! - a first pass ([`check`]) checks every node in order and infers every
//!   shape statically, allocating none of the plan's values, and the whole
//!   plan may hold at most [`MAX_PLAN_VALUES`] values; only then does a
//!   second pass build the graph, so a refused plan costs O(text);
//! - subgraphs of constants only are evaluated as they are read, so an
//!   error there (the Cholesky factor of a constant matrix that is not
//!   positive definite) names its node too.
//!
//! Unlike the JavaScript version, which rebuilt a plan by evaluating it at
//! zeros, nothing here depends on parameter values: every valid plan is
//! rebuilt, including one whose raw parameter feeds `cholesky`.

mod check;
mod messages;
mod parts;
pub mod schema;

use super::error::{Error, Result};
use super::graph::Graph;
use super::op::Op;
use super::plan::{Passes, Plan, SlotNames};
use crate::fail;
use check::{check, Checked};
use messages::{invalid_json, show};
use schema::{Field, Node, PlanDoc};

/// At most this many values (every node's value plus kernel scratch) in a
/// plan read from JSON: 2 GiB of f64. A few bytes of JSON can describe many
/// nodes each at the core's per-value cap, or the outer product of two long
/// vectors, so that cap alone does not bound memory; this does, and it is
/// checked for the whole plan before any value is allocated.
pub const MAX_PLAN_VALUES: usize = 1 << 28;

fn not_a_plan<T>() -> Result<T> {
    fail!("compileFromJSON: not a serialized plan")
}

/// Rebuild a plan from its JSON text (SPEC §8), optimized as `compile` would.
/// Parameters come in the order their nodes appear, then inputs likewise.
///
/// Two passes: the first checks every node and infers every shape, counting
/// the values the plan will hold, without allocating any of them; only a
/// plan that passes is built, by the second.
pub fn plan_from_json(text: &str) -> Result<Plan> {
    plan_from_json_with(text, Passes::default())
}

/// Rebuild a plan optimized by `passes` only (to test that the passes change
/// no result); without merging, no two nodes of the text are merged.
pub fn plan_from_json_with(text: &str, passes: Passes) -> Result<Plan> {
    let doc: Field<PlanDoc> = serde_json::from_str(text).map_err(|e| invalid_json(text, &e))?;
    let Field::Is(doc) = doc else { return not_a_plan() };
    plan_from_doc(doc, passes)
}

/// Rebuild a plan from a plan object as JavaScript encoded it (`parts`),
/// optimized as `compile` would; what the same object's JSON text gives.
pub fn plan_from_parts(stream: &[f64], strings: &str) -> Result<Plan> {
    plan_from_doc(parts::document(stream, strings)?, Passes::default())
}

/// Check a plan document and build it (SPEC §8).
fn plan_from_doc(doc: PlanDoc, passes: Passes) -> Result<Plan> {
    let Field::Is(nodes) = doc.nodes else { return not_a_plan() };
    let version = match doc.version {
        Field::Is(1.0) => 1,
        Field::Is(2.0) => 2,
        _ => return not_a_plan(),
    };
    let n = nodes.len();
    let root = match doc.root {
        Field::Is(r) if r >= 0.0 && r < n as f64 && r.fract() == 0.0 => r as usize,
        _ => {
            let root = doc.root.value();
            return fail!("compileFromJSON: root must be the index of one of the plan's {n} nodes, got {}", show(root.as_ref()));
        }
    };
    // Parameters are read from a {name: value} map when the plan says so, or,
    // lacking an `input` field (version 1), when they have names.
    let map = match &doc.input {
        Field::Is(s) if s == "map" => true,
        Field::Is(s) if s == "single" => false,
        Field::Absent => nodes.iter().any(|node| matches!(node, Field::Is(Node::Param { name: Field::Is(_), .. }))),
        other => return fail!("compileFromJSON: input must be \"map\" or \"single\", got {}", show(other.value().as_ref())),
    };
    // The typed nodes are consumed by the check: what pass 2 needs is owned
    // by `checked`, and the rest is freed before any value is allocated.
    let (checked, values) = check(nodes, version, map, passes)?;
    build(checked, values, root, map, passes)
}

/// Pass 2: build the graph and compact it into a plan. Only evaluating
/// constants can still fail.
fn build(checked: Vec<Checked>, values: usize, root: usize, map: bool, passes: Passes) -> Result<Plan> {
    let mut names = SlotNames { map, params: Vec::new(), inputs: Vec::new() };
    let n = checked.len();
    // Every value in zeroed memory a replay writes first (graph/arena.rs):
    // what the plan lays out elsewhere, or a later compaction drops, is never touched.
    let mut graph = Graph::over_zeroed(values, 0, passes.merge_identical);
    // Graph id of each JSON node.
    let mut ids: Vec<u32> = vec![u32::MAX; n];
    // Whether a JSON node is computed from constants only (then it is
    // evaluated now, so that a failure names it).
    let mut constant: Vec<bool> = vec![false; n];
    let mut params: Vec<u32> = Vec::new();
    let mut inputs: Vec<u32> = Vec::new();
    let mut graph_parents: Vec<u32> = Vec::new();
    for (i, c) in checked.into_iter().enumerate() {
        let label = match &c {
            Checked::Param(..) => "param",
            Checked::Input(..) => "input",
            Checked::Const(..) => "const",
            Checked::Op(op, _) => op.name(),
            Checked::Merged(_) => "",
        };
        let in_node = |e: Error| Error(format!("compileFromJSON: node {i} ({label}): {e}"));
        let id = match c {
            Checked::Merged(same) => {
                constant[i] = constant[same as usize];
                ids[same as usize]
            }
            Checked::Param(shape, name) => {
                let id = graph.leaf(Op::Leaf, shape, &[]).map_err(in_node)?;
                params.push(id);
                names.params.push(name);
                id
            }
            Checked::Input(shape, name) => {
                let id = graph.leaf(Op::Input, shape, &[]).map_err(in_node)?;
                inputs.push(id);
                names.inputs.push(name);
                id
            }
            Checked::Const(shape, data) => {
                constant[i] = true;
                graph.leaf(Op::Const, shape, &data).map_err(in_node)?
            }
            Checked::Op(op, parents) => {
                graph_parents.clear();
                graph_parents.extend(parents.iter().map(|&p| ids[p as usize]));
                let evaluate = parents.iter().all(|&p| constant[p as usize]);
                constant[i] = evaluate;
                graph.op(op, &graph_parents, evaluate).map_err(in_node)?
            }
        };
        ids[i] = id;
    }
    graph.end_zeroed();
    let mut plan = Plan::adopt(graph, ids[root], &params, &inputs, passes).map_err(|e| Error(format!("compileFromJSON: {e}")))?;
    plan.names = Some(names);
    Ok(plan)
}

#[cfg(test)]
mod tests;
