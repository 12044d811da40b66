//! The queue's format: nodes JavaScript recorded into two typed arrays
//! (src/js/queue.js), recorded on a tape in one call, or, for an
//! evaluation made only of them, swept at its end without a graph.

use super::{coded, leaf_op, tape_finish, with_tape, POW};
use crate::core::error::Result;
use crate::core::graph::batched;
use crate::core::kernels::scalar::{self, Formula};
use crate::core::op::{Exponent, Op};
use crate::core::shape::Shape;
use crate::core::tape::ScalarNode;
use crate::fail;

/// Record a batch of nodes written by JavaScript (src/js/queue.js), three
/// entries in `ops` per node: a leaf as `[-1 - kind, at, len]`, holding
/// `nums[at..at + len]` as a vector, or `nums[at]` as a scalar when `len`
/// is negative; or a batched op (`graph::batched`) as `[code, a, b]`, `b`
/// negative for one operand, or pow as `[POW, a, at]`, its exponent at
/// `nums[at]`. JavaScript numbered the nodes in order from the tape's
/// length; each must get that id. Returns the new length.
pub fn tape_apply(t: u32, ops: &[i32], nums: &[f64]) -> Result<u32> {
    with_tape(t, |t| {
        let g = &mut t.graph;
        for entry in ops.chunks_exact(3) {
            let expected = g.nodes.len() as u32;
            let (code, a, b) = (entry[0], entry[1], entry[2]);
            let id = if code < 0 {
                let shape = if b < 0 { Shape::Scalar } else { Shape::Vector(b as usize) };
                let at = a.max(0) as usize;
                let Some(data) = at.checked_add(shape.size()).and_then(|end| nums.get(at..end)) else {
                    return fail!("queued values {a}..{a}+{b} do not exist");
                };
                g.leaf(leaf_op((-1 - code) as u32), shape, data)?
            } else {
                let (op, parents, n) = queued_op(entry, nums)?;
                let parents = &parents[..n];
                let scalar = |p: &u32| g.node(*p).is_ok_and(|n| n.shape == Shape::Scalar);
                if scalar::has_formula(op) && parents.iter().all(scalar) {
                    g.scalar_op(op, parents)?
                } else {
                    g.op(op, parents, true)?
                }
            };
            if id != expected {
                return fail!("queued node {expected} was recorded as {id}");
            }
        }
        Ok(g.nodes.len() as u32)
    })
}

/// An op entry's op, operands and how many of them there are.
fn queued_op(entry: &[i32], nums: &[f64]) -> Result<(Op, [u32; 2], usize)> {
    let (code, a, b) = (entry[0] as u32, entry[1] as u32, entry[2]);
    if code == POW {
        let Some(&k) = usize::try_from(b).ok().and_then(|at| nums.get(at)) else {
            return fail!("queued exponent {b} does not exist");
        };
        return Ok((Op::Pow(Exponent::new(k)), [a, a], 1));
    }
    let op = coded(code)?;
    if !batched(op) {
        return fail!("{} cannot be queued", op.name());
    }
    Ok((op, [a, b as u32], if b < 0 { 1 } else { 2 }))
}

/// The end of an evaluation whose last nodes JavaScript queued, in one
/// call: `ops` holds the queued entries (as `tape_apply` reads them) and
/// `nums` their first `m` numbers; the leaves' gradients (`total` values)
/// are written over `nums` from the start. An evaluation made only of
/// queued scalar nodes is swept without recording them (`tape::Scalars`);
/// any other is recorded, then finished by `tape_finish`.
#[allow(clippy::too_many_arguments)]
pub fn tape_finish_queued(t: u32, ops: &[i32], nums: &mut [f64], m: usize, root: u32, swept: bool, leaves: &[i32], total: usize) -> Result<f64> {
    let scalars = with_tape(t, |t| {
        if swept || !t.graph.nodes.is_empty() || !scalar_nodes(ops, nums.get(..m).unwrap_or(&[]), &mut t.scalars.nodes) {
            return Ok(None);
        }
        Ok(nums.get_mut(..total).and_then(|out| t.scalars.finish(root, leaves, out)))
    })?;
    if let Some(value) = scalars {
        return Ok(value);
    }
    let Some(queued) = nums.get(..m) else { return fail!("queue overflow") };
    tape_apply(t, ops, queued)?;
    let ids: Vec<u32> = leaves.iter().map(|&id| id as u32).collect();
    let Some(out) = nums.get_mut(..total) else { return fail!("queue overflow") };
    tape_finish(t, root, swept, &ids, out)
}

/// The queued entries as scalar nodes, into `nodes`; false unless each is
/// a scalar leaf or an op with a scalar formula on earlier nodes (any other
/// entry, valid or not, is left to `tape_apply`).
fn scalar_nodes(ops: &[i32], nums: &[f64], nodes: &mut Vec<ScalarNode>) -> bool {
    nodes.clear();
    for (i, entry) in ops.chunks_exact(3).enumerate() {
        let (code, a, b) = (entry[0], entry[1], entry[2]);
        let earlier = |p: u32| (p as usize) < i;
        let node = if code < 0 {
            match usize::try_from(a).ok().and_then(|a| nums.get(a)) {
                Some(&x) if b < 0 => ScalarNode::leaf(leaf_op((-1 - code) as u32) == Op::Leaf, x),
                _ => return false,
            }
        } else {
            let Ok((op, [a, b], n)) = queued_op(entry, nums) else { return false };
            let Some((f, k)) = Formula::of(op) else { return false };
            match (f.binary(), n) {
                (true, 2) if earlier(a) && earlier(b) => ScalarNode::op(f, k, a, b, nodes),
                (false, 1) if earlier(a) => ScalarNode::op(f, k, a, a, nodes),
                _ => return false,
            }
        };
        nodes.push(node);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{coded_ops, tape_free, tape_new};

    const CONST: i32 = -1;
    const PARAM: i32 = -2;
    const INPUT: i32 = -3;
    const FORMULAS: [&str; 15] =
        ["add", "sub", "mul", "div", "maximum", "minimum", "neg", "exp", "log", "sqrt", "square", "tanh", "sigmoid", "relu", "lgamma"];

    fn code(name: &str) -> i32 {
        coded_ops().iter().position(|n| *n == name).unwrap() as i32
    }

    /// A scalar program as JavaScript would queue it: five parameters (the
    /// last unused), two constants and an input, then `ops` ops whose
    /// operands are drawn from all earlier nodes, so that some nodes feed
    /// many others (the order their adjoints are summed in then shows).
    fn program(ops: usize, seed: u32) -> (Vec<i32>, Vec<f64>) {
        let mut s = seed;
        let mut next = |n: usize| {
            s = s.wrapping_mul(1664525).wrapping_add(1013904223);
            (s >> 8) as usize % n
        };
        let (mut entries, mut nums) = (Vec::new(), Vec::new());
        for (kind, x) in [(PARAM, 0.7), (PARAM, -1.3), (PARAM, 2.1), (PARAM, 0.4), (PARAM, 9.0), (CONST, 3.0), (CONST, -0.5), (INPUT, 1.5)] {
            entries.extend([kind, nums.len() as i32, -1]);
            nums.push(x);
        }
        let leaves = 8;
        for i in leaves..leaves + ops {
            // Operands among the leaves but the unused parameter, or any op.
            let pick = |r: usize| if r < 4 { r } else { 5 + r - 4 };
            let a = pick(next(i - 1)) as i32;
            let b = if next(5) == 0 { a } else { pick(next(i - 1)) as i32 };
            if next(FORMULAS.len() + 1) == FORMULAS.len() {
                // pow, its exponent among the numbers
                entries.extend([code("pow"), a, nums.len() as i32]);
                nums.push([2.0, -1.5, 0.5, 3.0][next(4)]);
                continue;
            }
            let f = FORMULAS[next(FORMULAS.len())];
            let binary = Formula::of(coded(code(f) as u32).unwrap()).unwrap().0.binary();
            entries.extend([code(f), a, if binary { b } else { -1 }]);
        }
        (entries, nums)
    }

    fn bits(xs: &[f64]) -> Vec<u64> {
        xs.iter().map(|x| x.to_bits()).collect()
    }

    /// Sweeping the queued nodes without a graph gives the graph's bits:
    /// values, every parameter's gradient (zero for the unused one), NaNs.
    #[test]
    fn scalar_evaluations_swept_without_a_graph_give_the_tape_bits() {
        let leaves: [i32; 5] = [0, 1, 2, 3, 4];
        for seed in 0..40 {
            let (ops, nums) = program(60, seed);
            let n = (ops.len() / 3) as u32;
            let mut nodes = Vec::new();
            assert!(scalar_nodes(&ops, &nums, &mut nodes), "seed {seed}: every entry is a scalar node");
            // The last op, an op in the middle, a parameter, a constant as the root.
            for root in [n - 1, n / 2 + 4, 2, 5] {
                let flat = tape_new();
                let mut buffer = nums.clone();
                let value = tape_finish_queued(flat, &ops, &mut buffer, nums.len(), root, false, &leaves, 5).unwrap();
                let graph = tape_new();
                tape_apply(graph, &ops, &nums).unwrap();
                let mut out = vec![f64::NAN; 5];
                let ids: Vec<u32> = leaves.iter().map(|&id| id as u32).collect();
                let expected = tape_finish(graph, root, false, &ids, &mut out).unwrap();
                assert_eq!(value.to_bits(), expected.to_bits(), "seed {seed}, root {root}: value");
                assert_eq!(bits(&buffer[..5]), bits(&out), "seed {seed}, root {root}: gradients {:?} vs {out:?}", &buffer[..5]);
                assert_eq!(out[4], 0.0, "the unused parameter");
                tape_free(flat);
                tape_free(graph);
            }
        }
    }

    /// Anything else is recorded as before: a vector leaf, an op on a later
    /// node, an unknown code, a tape already holding nodes.
    #[test]
    fn other_queues_are_left_to_the_graph() {
        let (ops, nums) = program(10, 1);
        let mut nodes = Vec::new();
        let mut vector = ops.clone();
        vector[2] = 2; // the first leaf holds nums[0..2]
        assert!(!scalar_nodes(&vector, &nums, &mut nodes));
        let mut later = ops.clone();
        later[3 * 9 + 1] = 12;
        assert!(!scalar_nodes(&later, &nums, &mut nodes));
        let mut exponent = ops.clone();
        exponent[3 * 9..3 * 9 + 3].copy_from_slice(&[code("pow"), 3, 99]); // no number 99
        assert!(!scalar_nodes(&exponent, &nums, &mut nodes));
        assert!(tape_apply(tape_new(), &exponent, &nums).unwrap_err().0.contains("queued exponent 99 does not exist"));
        let mut unknown = ops.clone();
        unknown[3 * 9] = 1000;
        assert!(!scalar_nodes(&unknown, &nums, &mut nodes));
        assert!(tape_finish_queued(tape_new(), &unknown, &mut nums.clone(), nums.len(), 17, false, &[0], 1)
            .unwrap_err()
            .0
            .contains("unknown op code 1000"));
        // With leaves recorded already (a flush), the rest goes on the graph,
        // with the bits of a whole evaluation recorded there.
        let (ops, nums) = program(30, 7);
        let whole = tape_new();
        tape_apply(whole, &ops, &nums).unwrap();
        let mut expected = vec![0.0; 4];
        let value = tape_finish(whole, 37, false, &[0, 1, 2, 3], &mut expected).unwrap();
        let t = tape_new();
        tape_apply(t, &ops[..24], &nums).unwrap();
        let mut buffer = nums.clone();
        let got = tape_finish_queued(t, &ops[24..], &mut buffer, nums.len(), 37, false, &[0, 1, 2, 3], 4).unwrap();
        assert_eq!((got.to_bits(), bits(&buffer[..4])), (value.to_bits(), bits(&expected)));
        assert!(with_tape(t, |t| Ok(t.scalars.nodes.is_empty())).unwrap(), "not swept as scalars");
    }
}
