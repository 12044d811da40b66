//! The queue's format: nodes JavaScript recorded into two typed arrays
//! (src/js/queue.js), recorded on a tape in one call, or, for an
//! evaluation made only of them that repeats an earlier one, replayed as
//! that one's plan.

use super::{coded, leaf_op, tape_finish, with_tape, POW};
use crate::core::error::Result;
use crate::core::graph::{batched, Graph};
use crate::core::kernels::scalar;
use crate::core::op::{Exponent, Op};
use crate::core::plan::Plan;
use crate::core::shape::Shape;
use crate::core::tape::{Repeat, Tape};
use crate::fail;
use std::ops::Range;

/// Record a batch of nodes written by JavaScript (src/js/queue.js), three
/// entries in `ops` per node: a leaf as `[-1 - kind, at, len]`, its values
/// among `nums` as `leaf_values` reads them; or a batched op
/// (`graph::batched`) as `[code, a, b]`, `b` negative for one operand, or
/// pow as `[POW, a, at]`, its exponent at `nums[at]`. JavaScript numbered the nodes in order from the tape's
/// length; each must get that id. Returns the new length.
pub fn tape_apply(t: u32, ops: &[i32], nums: &[f64]) -> Result<u32> {
    with_tape(t, |t| {
        for entry in ops.chunks_exact(3) {
            record(&mut t.graph, entry, nums)?;
        }
        Ok(t.graph.nodes.len() as u32)
    })
}

/// Record one entry on `g` (see `tape_apply`).
fn record(g: &mut Graph, entry: &[i32], nums: &[f64]) -> Result<()> {
    let expected = g.nodes.len() as u32;
    let (code, a, b) = (entry[0], entry[1], entry[2]);
    let id = if code < 0 {
        let (shape, values) = leaf_values(a, b, nums)?;
        g.leaf(leaf_op((-1 - code) as u32), shape, &nums[values])?
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
    Ok(())
}

/// A leaf entry's `len` for a matrix.
const MATRIX: i32 = -2;

/// A leaf entry's shape, and where its values sit among the numbers: a
/// scalar at `at` (`len` negative, but `MATRIX`), a vector of `len` values
/// from `at`, or a matrix whose rows and columns are the numbers at `at`
/// and `at + 1`, its values from `at + 2`.
fn leaf_values(at: i32, len: i32, nums: &[f64]) -> Result<(Shape, Range<usize>)> {
    let from = at.max(0) as usize;
    let (shape, start) = match len {
        MATRIX => {
            let dim = |i: usize| nums.get(from + i).copied().filter(|&d| d >= 0.0 && d.fract() == 0.0 && d <= nums.len() as f64);
            let (Some(m), Some(n)) = (dim(0), dim(1)) else { return fail!("queued matrix at {at} has no dimensions") };
            (Shape::Matrix(m as usize, n as usize), from + 2)
        }
        len if len < 0 => (Shape::Scalar, from),
        len => (Shape::Vector(len as usize), from),
    };
    match start.checked_add(shape.size()).filter(|&end| end <= nums.len()) {
        Some(end) => Ok((shape, start..end)),
        None => fail!("queued values {at}..{at}+{len} do not exist"),
    }
}

/// The numbers of an entry that its node holds rather than reads (pow's
/// exponent, a matrix leaf's dimensions), where they sit among `nums`.
fn held_numbers(entry: &[i32]) -> Range<usize> {
    match (entry[0], entry[2]) {
        (code, at) if code as u32 == POW => at.max(0) as usize..at.max(0) as usize + 1,
        (code, MATRIX) if code < 0 => entry[1].max(0) as usize..entry[1].max(0) as usize + 2,
        _ => 0..0,
    }
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

/// How many evaluations a tape remembers (`tape::Repeat`): a sampler may
/// alternate a few objectives, each evaluated on the tape the one before
/// it left.
const REPEATS: usize = 4;

/// The end of an evaluation whose last nodes JavaScript queued, in one
/// call: `ops` holds the queued entries (as `tape_apply` reads them) and
/// `nums` their first `m` numbers; the leaves' gradients (`total` values)
/// are written over `nums` from the start. An evaluation made only of
/// queued nodes runs as a plan when it repeats one of the last few on this
/// tape (`tape::Repeat`); any other is recorded, then finished by
/// `tape_finish`.
#[allow(clippy::too_many_arguments)]
pub fn tape_finish_queued(t: u32, ops: &[i32], nums: &mut [f64], m: usize, root: u32, swept: bool, leaves: &[i32], total: usize) -> Result<f64> {
    let done = with_tape(t, |t| {
        if swept || !t.graph.nodes.is_empty() || m.max(total) > nums.len() {
            return Ok(None);
        }
        let Some(i) = t.repeats.iter().position(|r| same(r, ops, root, leaves, nums)) else {
            if t.repeats.len() < REPEATS {
                t.repeats.push(Repeat::default());
            }
            // The oldest makes way, and the newest goes first.
            t.repeats.rotate_right(1);
            remember(&mut t.repeats[0], ops, &nums[..m], root, leaves);
            return Ok(None);
        };
        t.repeats[..=i].rotate_right(1);
        if t.repeats[0].plan.is_none() && !plan_repeat(t, ops, &nums[..m], root, leaves)? {
            return Ok(None);
        }
        t.repeats[0].replay(nums).map(Some)
    })?;
    if let Some(value) = done {
        return Ok(value);
    }
    let Some(queued) = nums.get(..m) else { return fail!("queue overflow") };
    tape_apply(t, ops, queued)?;
    let ids: Vec<u32> = leaves.iter().map(|&id| id as u32).collect();
    let Some(out) = nums.get_mut(..total) else { return fail!("queue overflow") };
    tape_finish(t, root, swept, &ids, out)
}

/// Whether this evaluation is the one `repeat` describes (`remember`).
fn same(repeat: &Repeat, ops: &[i32], root: u32, leaves: &[i32], nums: &[f64]) -> bool {
    let key = &repeat.key;
    key.len() == ops.len() + 1 + leaves.len()
        && key[..ops.len()] == *ops
        && key[ops.len()] == root as i32
        && key[ops.len() + 1..] == *leaves
        && repeat.baked_in(nums)
}

/// Describe this evaluation in `repeat`, so that the next can be told the
/// same: its entries, root and leaves, pow's exponents and matrices'
/// dimensions (which its plan would hold; every other number is an
/// argument of the plan).
fn remember(repeat: &mut Repeat, ops: &[i32], nums: &[f64], root: u32, leaves: &[i32]) {
    repeat.plan = None;
    repeat.key.clear();
    repeat.key.extend_from_slice(ops);
    repeat.key.push(root as i32);
    repeat.key.extend_from_slice(leaves);
    repeat.baked.clear();
    for at in ops.chunks_exact(3).flat_map(held_numbers) {
        if let Some(x) = nums.get(at) {
            repeat.baked.push((at, x.to_bits()));
        }
    }
}

/// Build the plan of an evaluation seen again into `t.repeats[0]`:
/// recorded on the graph as the tape would record it, its parameter
/// leaves the plan's parameters and every other leaf an input, so that each
/// replay reads all its numbers afresh. False, leaving it to be recorded
/// as before, when a gradient is asked of a node that is not a parameter
/// leaf or the root is not a scalar (the graph's path reports why).
fn plan_repeat(t: &mut Tape, ops: &[i32], nums: &[f64], root: u32, leaves: &[i32]) -> Result<bool> {
    let (mut params, mut inputs, mut fed, mut fed_inputs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (id, entry) in ops.chunks_exact(3).enumerate() {
        let code = entry[0];
        if code < 0 {
            let (_, range) = leaf_values(entry[1], entry[2], nums)?;
            if leaf_op((-1 - code) as u32) == Op::Leaf {
                params.push(id as u32);
                fed.push(range);
            } else {
                inputs.push(id as u32);
                fed_inputs.push(range);
            }
        }
    }
    let grads: Option<Vec<usize>> = leaves.iter().map(|&id| params.iter().position(|&p| p as i32 == id)).collect();
    let Some(grads) = grads else {
        t.repeats[0].key.clear();
        return Ok(false);
    };
    let g = &mut t.graph;
    for entry in ops.chunks_exact(3) {
        record(g, entry, nums)?;
    }
    let plan = Plan::build(g, root, &params, &inputs);
    t.reset();
    let Some(plan) = plan.ok().filter(|p| p.root_shape() == Shape::Scalar) else {
        t.repeats[0].key.clear();
        return Ok(false);
    };
    fed.extend(fed_inputs);
    let repeat = &mut t.repeats[0];
    repeat.plan = Some(plan);
    repeat.slots = fed;
    repeat.grads = grads;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{coded_ops, tape_free, tape_new};
    use crate::core::kernels::scalar::Formula;

    const CONST: i32 = -1;
    const PARAM: i32 = -2;
    const INPUT: i32 = -3;
    const FORMULAS: [&str; 15] =
        ["add", "sub", "mul", "div", "maximum", "minimum", "neg", "exp", "log", "sqrt", "square", "tanh", "sigmoid", "relu", "lgamma"];
    /// The parameter leaves of every program, whose gradients are asked for.
    const PARAMS: [i32; 6] = [0, 1, 2, 3, 4, 8];

    fn code(name: &str) -> i32 {
        coded_ops().iter().position(|n| *n == name).unwrap() as i32
    }

    /// A program as JavaScript would queue it: five scalar parameters (the
    /// last unused), two constants, an input, and with `vectors` a vector
    /// parameter and a vector constant of three values (else scalars); then
    /// `ops` ops whose operands are drawn from all earlier nodes, so that
    /// some nodes feed many others (the order their adjoints are summed in
    /// then shows), vectors broadcast against scalars and summed. Returns
    /// the entries, the numbers and the scalar nodes (roots to sweep from).
    fn program(ops: usize, seed: u32, vectors: bool) -> (Vec<i32>, Vec<f64>, Vec<u32>) {
        let mut s = seed;
        let mut next = |n: usize| {
            s = s.wrapping_mul(1664525).wrapping_add(1013904223);
            (s >> 8) as usize % n
        };
        let (mut entries, mut nums, mut len) = (Vec::new(), Vec::new(), Vec::new());
        let len3 = if vectors { 3 } else { 1 };
        let leaves = [(PARAM, 0.7), (PARAM, -1.3), (PARAM, 2.1), (PARAM, 0.4), (PARAM, 9.0), (CONST, 3.0), (CONST, -0.5), (INPUT, 1.5)];
        for (kind, x) in leaves.into_iter().chain([(PARAM, 0.3), (CONST, -2.0)]) {
            let n = if entries.len() / 3 >= 8 { len3 } else { 1 };
            entries.extend([kind, nums.len() as i32, if n == 1 { -1 } else { n as i32 }]);
            nums.extend((0..n).map(|i| x + 0.25 * i as f64));
            len.push(n);
        }
        let first = len.len();
        for i in first..first + ops {
            // Operands among the leaves but the unused parameter, or any op.
            let pick = |r: usize| if r < 4 { r } else { 5 + r - 4 };
            let a = pick(next(i - 1));
            // A second operand of the first's length, or a scalar.
            let mut b = if next(5) == 0 { a } else { pick(next(i - 1)) };
            if len[a] > 1 && len[b] > 1 && len[a] != len[b] {
                b = a;
            }
            let r = next(FORMULAS.len() + 3);
            let (entry, n) = if r == FORMULAS.len() {
                // pow, its exponent among the numbers
                nums.push([2.0, -1.5, 0.5, 3.0][next(4)]);
                ([code("pow"), a as i32, nums.len() as i32 - 1], len[a])
            } else if r > FORMULAS.len() {
                ([code(if r % 2 == 0 { "sum" } else { "mean" }), a as i32, -1], 1)
            } else {
                let f = FORMULAS[r];
                let binary = Formula::of(coded(code(f) as u32).unwrap()).unwrap().0.binary();
                if binary {
                    ([code(f), a as i32, b as i32], len[a].max(len[b]))
                } else {
                    ([code(f), a as i32, -1], len[a])
                }
            };
            entries.extend(entry);
            len.push(n);
        }
        let scalars = (0..len.len() as u32).filter(|&i| len[i as usize] == 1).collect();
        (entries, nums, scalars)
    }

    fn bits(xs: &[f64]) -> Vec<u64> {
        xs.iter().map(|x| x.to_bits()).collect()
    }

    /// The value and gradients of the parameters that recording the
    /// entries on a graph and sweeping it give.
    fn on_the_graph(ops: &[i32], nums: &[f64], root: u32) -> (u64, Vec<u64>) {
        let graph = tape_new();
        tape_apply(graph, ops, nums).unwrap();
        let ids: Vec<u32> = PARAMS.iter().map(|&id| id as u32).collect();
        let total = with_tape(graph, |t| Ok(ids.iter().map(|&id| t.graph.nodes[id as usize].shape.size()).sum())).unwrap();
        let mut out = vec![f64::NAN; total];
        let value = tape_finish(graph, root, false, &ids, &mut out).unwrap();
        tape_free(graph);
        (value.to_bits(), bits(&out))
    }

    /// The same through `tape_finish_queued` on tape `t`.
    fn queued(t: u32, ops: &[i32], nums: &[f64], root: u32, total: usize) -> (u64, Vec<u64>) {
        let mut buffer = nums.to_vec();
        let value = tape_finish_queued(t, ops, &mut buffer, nums.len(), root, false, &PARAMS, total).unwrap();
        (value.to_bits(), bits(&buffer[..total]))
    }

    /// Recording the queued nodes, building the plan of a repeat and
    /// replaying it give the graph's bits: values, every parameter's
    /// gradient (zero for the unused one), NaNs; a replay reads the numbers
    /// of its own call.
    #[test]
    fn queued_evaluations_give_the_tape_bits_recorded_or_replayed() {
        for vectors in [false, true] {
            for seed in 0..40 {
                let (ops, nums, scalars) = program(60, seed, vectors);
                let total = if vectors { 8 } else { 6 };
                // The last scalar op, one in the middle, a parameter, a constant as the root.
                let mid = scalars[scalars.len() / 2 + 2];
                for root in [*scalars.last().unwrap(), mid, 2, 5] {
                    let t = tape_new();
                    let mut moved = nums.clone();
                    moved[0] += 0.125;
                    moved[9] -= 1.0; // a vector parameter's first value, or a scalar one
                    for (call, nums) in [&nums, &nums, &nums, &moved].into_iter().enumerate() {
                        let expected = on_the_graph(&ops, nums, root);
                        let got = queued(t, &ops, nums, root, total);
                        assert_eq!(got, expected, "vectors {vectors}, seed {seed}, root {root}, call {call}");
                        let planned = with_tape(t, |t| Ok(t.repeats[0].plan.is_some())).unwrap();
                        assert_eq!(planned, call > 0, "a plan from the second call on");
                    }
                    assert_eq!(on_the_graph(&ops, &nums, root).1[4], 0, "the unused parameter");
                    tape_free(t);
                }
            }
        }
    }

    /// A call that differs from the one before in anything but the values of
    /// its leaves is not replayed: its structure, its root, the leaves asked
    /// for, or a pow exponent, which its plan holds.
    #[test]
    fn only_a_repeat_is_replayed() {
        let (ops, nums, scalars) = program(40, 3, true);
        let root = *scalars.last().unwrap();
        let pow = ops.chunks_exact(3).position(|e| e[0] == code("pow")).expect("a pow in the program");
        let at = ops[3 * pow + 2] as usize;
        let t = tape_new();
        queued(t, &ops, &nums, root, 8);
        queued(t, &ops, &nums, root, 8);
        let mut exponent = nums.clone();
        exponent[at] += 1.0;
        assert_eq!(queued(t, &ops, &exponent, root, 8), on_the_graph(&ops, &exponent, root));
        assert!(with_tape(t, |t| Ok(t.repeats[0].plan.is_none())).unwrap(), "another exponent, another plan");
        queued(t, &ops, &nums, root, 8);
        queued(t, &ops, &nums, root, 8);
        let other = scalars[scalars.len() - 2];
        assert_eq!(queued(t, &ops, &nums, other, 8), on_the_graph(&ops, &nums, other));
        assert!(with_tape(t, |t| Ok(t.repeats[0].plan.is_none())).unwrap(), "another root");
        // A gradient asked of a constant: never planned, still answered as the graph does.
        let mut asked = nums.clone();
        let constant_too = [0, 1, 2, 3, 4, 5];
        for _ in 0..3 {
            let value = tape_finish_queued(t, &ops, &mut asked, nums.len(), root, false, &constant_too, 6).unwrap();
            assert_eq!(value.to_bits(), on_the_graph(&ops, &nums, root).0);
            assert_eq!(asked[5], 0.0, "a constant's gradient is zero");
            asked.copy_from_slice(&nums);
        }
        assert!(with_tape(t, |t| Ok(t.repeats[0].plan.is_none())).unwrap());
        tape_free(t);
    }

    /// Evaluations that alternate on one tape each keep their plan, up to
    /// `REPEATS` of them; one more pushes the oldest out.
    #[test]
    fn alternating_evaluations_each_keep_their_plan() {
        let programs: Vec<_> = (0..=REPEATS as u32).map(|seed| program(30, 100 + seed, seed % 2 == 1)).collect();
        let t = tape_new();
        for round in 0..3 {
            for (k, (ops, nums, scalars)) in programs[..REPEATS].iter().enumerate() {
                let root = *scalars.last().unwrap();
                let total = if k % 2 == 1 { 8 } else { 6 };
                assert_eq!(queued(t, ops, nums, root, total), on_the_graph(ops, nums, root), "round {round}, program {k}");
                assert_eq!(with_tape(t, |t| Ok(t.repeats[0].plan.is_some())).unwrap(), round > 0);
            }
        }
        let (ops, nums, scalars) = &programs[REPEATS];
        queued(t, ops, nums, *scalars.last().unwrap(), 8);
        let planned = with_tape(t, |t| Ok(t.repeats.iter().filter(|r| r.plan.is_some()).count())).unwrap();
        assert_eq!(planned, REPEATS - 1, "the oldest was pushed out");
        tape_free(t);
    }

    /// A matrix leaf's dimensions go first among its numbers: they are part
    /// of the evaluation, so a repeat with other dimensions is not replayed
    /// with the plan of the first. Its values too must exist.
    #[test]
    fn matrix_leaves_carry_their_dimensions() {
        let matmul = code("matmul");
        // x: a parameter [3] at 0..3; M: a constant 2×3 at 3, values 5..11; M·x; sum.
        let ops = [PARAM, 0, 3, CONST, 3, MATRIX, matmul, 1, 0, code("sum"), 2, -1];
        let nums = [0.5, -1.0, 2.0, 2.0, 3.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let t = tape_new();
        let run = |nums: &[f64]| {
            let mut buffer = nums.to_vec();
            let value = tape_finish_queued(t, &ops, &mut buffer, nums.len(), 3, false, &[0], 3).map(f64::to_bits);
            (value, bits(&buffer[..3]))
        };
        let graph = |nums: &[f64]| {
            let g = tape_new();
            tape_apply(g, &ops, nums).unwrap();
            let mut out = vec![0.0; 3];
            let value = tape_finish(g, 3, false, &[0], &mut out).map(f64::to_bits);
            tape_free(g);
            (value, bits(&out))
        };
        for _ in 0..3 {
            assert_eq!(run(&nums), graph(&nums));
        }
        // The same six values as 3×2: M·x no longer fits, and the error is the graph's.
        let mut swapped = nums;
        swapped[3..5].copy_from_slice(&[3.0, 2.0]);
        let error = run(&swapped).0.unwrap_err().0;
        assert!(error.contains("matmul"), "{error}");
        assert!(with_tape(t, |t| Ok(t.repeats[0].plan.is_none())).unwrap());
        with_tape(t, |t| Ok(t.reset())).unwrap(); // as JavaScript retires a tape whose evaluation failed
        assert_eq!(run(&nums), graph(&nums), "the first shape still replays");
        // Dimensions that are not counts, or values past the numbers.
        for bad in [[-1.0, 3.0], [2.5, 3.0], [2.0, 4.0]] {
            let mut nums = nums;
            nums[3..5].copy_from_slice(&bad);
            assert!(tape_apply(tape_new(), &ops, &nums).is_err(), "{bad:?}");
        }
        tape_free(t);
    }

    /// Anything else is recorded as before: an unknown code, a tape already
    /// holding nodes.
    #[test]
    fn other_queues_are_left_to_the_graph() {
        let (ops, nums, _) = program(10, 1, false);
        let mut unknown = ops.clone();
        unknown[3 * 11] = 1000;
        let t = tape_new();
        for _ in 0..3 {
            let error = tape_finish_queued(t, &unknown, &mut nums.clone(), nums.len(), 17, false, &[0], 1).unwrap_err();
            assert!(error.0.contains("unknown op code 1000"), "{}", error.0);
            with_tape(t, |t| Ok(t.reset())).unwrap();
        }
        assert!(with_tape(t, |t| Ok(t.repeats.iter().all(|r| r.plan.is_none()))).unwrap());
        let mut exponent = ops.clone();
        exponent[3 * 11..3 * 11 + 3].copy_from_slice(&[code("pow"), 3, 99]); // no number 99
        assert!(tape_apply(tape_new(), &exponent, &nums).unwrap_err().0.contains("queued exponent 99 does not exist"));
        // With leaves recorded already (a flush), the rest goes on the graph,
        // with the bits of a whole evaluation recorded there.
        let (ops, nums, _) = program(30, 7, false);
        let expected = on_the_graph(&ops, &nums, 37);
        let t = tape_new();
        tape_apply(t, &ops[..27], &nums).unwrap();
        let mut buffer = nums.clone();
        let got = tape_finish_queued(t, &ops[27..], &mut buffer, nums.len(), 37, false, &PARAMS, 6).unwrap();
        assert_eq!((got.to_bits(), bits(&buffer[..6])), expected);
        assert!(with_tape(t, |t| Ok(t.repeats.is_empty())).unwrap(), "not remembered");
    }
}
