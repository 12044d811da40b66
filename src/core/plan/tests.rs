use super::*;

/// y ← tanh(0.9·y + x), 30 times, summed with x·y at the end: a chain
/// long enough to be carried, beside short runs that are not.
fn chain() -> (Graph, u32, u32) {
    let mut g = Graph::default();
    let x = g.leaf(Op::Leaf, Shape::Scalar, &[0.3]).unwrap();
    let c = g.leaf(Op::Const, Shape::Scalar, &[0.9]).unwrap();
    let mut y = x;
    for _ in 0..30 {
        let m = g.op(Op::Mul, &[y, c], true).unwrap();
        let s = g.op(Op::Add, &[m, x], true).unwrap();
        y = g.op(Op::Tanh, &[s], true).unwrap();
    }
    let xy = g.op(Op::Mul, &[x, y], true).unwrap();
    let root = g.op(Op::Add, &[xy, y], true).unwrap();
    (g, x, root)
}

fn replay(p: &mut Plan, x: f64) -> (u64, u64) {
    p.set(0, &[x]).unwrap();
    let value = p.forward().unwrap()[0];
    p.backward();
    let mut grad = [0.0];
    p.gradient(0, &mut grad).unwrap();
    (value.to_bits(), grad[0].to_bits())
}

#[test]
fn carried_operands_change_no_bit() {
    let (g, x, root) = chain();
    let mut carried = Plan::build(&g, root, &[x], &[]).unwrap();
    let marked = carried.forward.iter().filter(|s| matches!(s, Step::Scalar(s) if s.carried != 0)).count();
    assert!(marked >= 80, "the chain's steps are carried: {marked}");
    assert!(carried.chains);
    let mut plain = carried.clone();
    plain.chains = false;
    for s in plain.forward.iter_mut() {
        if let Step::Scalar(s) = s {
            s.carried = 0;
        }
    }
    for x in [0.3, -1.7, 0.01, 4.0] {
        assert_eq!(replay(&mut carried, x), replay(&mut plain, x), "at {x}");
    }
    // And a chain shorter than CHAIN is not marked.
    let mut g = Graph::default();
    let x = g.leaf(Op::Leaf, Shape::Scalar, &[0.3]).unwrap();
    let mut y = x;
    for _ in 0..CHAIN - 1 {
        y = g.op(Op::Tanh, &[y], true).unwrap();
    }
    let short = Plan::build(&g, y, &[x], &[]).unwrap();
    assert!(!short.chains && short.forward.iter().all(|s| !matches!(s, Step::Scalar(s) if s.carried != 0)));
}

/// A replica (`Clone`) copies the leaves' values, not what a replay
/// computes, and replays to the same bits as the plan it was made from,
/// with an input and a constant vector beside the parameter.
#[test]
fn a_replica_copies_leaves_and_replays_alike() {
    let mut g = Graph::default();
    let x = g.leaf(Op::Leaf, Shape::Vector(3), &[0.3, -0.2, 0.9]).unwrap();
    let w = g.leaf(Op::Input, Shape::Vector(3), &[1.5, 0.5, -1.0]).unwrap();
    let c = g.leaf(Op::Const, Shape::Vector(3), &[0.25, 2.0, -3.0]).unwrap();
    let xw = g.op(Op::Mul, &[x, w], true).unwrap();
    let t = g.op(Op::Tanh, &[xw], true).unwrap();
    let root = g.op(Op::Dot, &[t, c], true).unwrap();
    let mut plan = Plan::build(&g, root, &[x], &[w]).unwrap();
    plan.set(1, &[0.7, -1.1, 2.0]).unwrap();
    let run = |p: &mut Plan| {
        p.set(0, &[0.1, 0.4, -0.6]).unwrap();
        let value = p.forward().unwrap()[0].to_bits();
        p.backward();
        let mut grad = [0.0; 3];
        p.gradient(0, &mut grad).unwrap();
        (value, grad.map(f64::to_bits))
    };
    let original = run(&mut plan);
    let replica = plan.clone();
    for (id, node) in replica.graph.nodes.iter().enumerate() {
        let (mine, theirs) = (&replica.graph.values[node.range()], &plan.graph.values[node.range()]);
        if node.op.is_leaf() {
            assert_eq!(mine, theirs, "leaf {id} copied");
        } else {
            assert!(mine.iter().all(|&v| v == 0.0) && theirs.iter().any(|&v| v != 0.0), "node {id} left to the replay");
        }
    }
    let mut replica = replica;
    assert_eq!(run(&mut replica), original);
}

/// In a tangent plan, a value that does not depend on the tangents but that
/// a step depending on them reads keeps a range of its own even where no
/// sweep reads it: `forward_tangent` replays that step alone, on the value
/// the full replay left, after a later value would have taken its block.
#[test]
fn a_value_that_a_varying_step_reads_keeps_its_own_range() {
    let shape = Shape::Matrix(4, 4);
    let mut g = Graph::default();
    let x = g.leaf(Op::Leaf, shape, &[0.5; 16]).unwrap();
    let v = g.leaf(Op::Leaf, shape, &[1.0; 16]).unwrap();
    let a = g.op(Op::Exp, &[x], true).unwrap();
    let b = g.op(Op::Mul, &[a, v], true).unwrap();
    let c = g.op(Op::Neg, &[b], true).unwrap();
    let root = g.op(Op::Sum, &[c], true).unwrap();
    let forward = [a, b, c, root];
    let varying: Vec<bool> = (0..g.nodes.len() as u32).map(|i| [v, b, c, root].contains(&i)).collect();
    let layout = |varying: &[bool]| {
        let (mut nodes, mut values) = (g.nodes.clone(), g.values.clone());
        values::share_values(&mut nodes, &mut values, &forward, &[], &[root], 2, varying, false).unwrap();
        nodes.iter().map(|n| n.val).collect::<Vec<_>>()
    };
    // Nothing moves: a's block passes to c once b has read a.
    let still = layout(&vec![false; g.nodes.len()]);
    assert_eq!(still[a as usize], still[c as usize]);
    // v moves: b reads a in every replay of the tangent alone.
    let moving = layout(&varying);
    assert_ne!(moving[a as usize], moving[c as usize]);
    assert!(moving[a as usize] < moving[b as usize].min(moving[c as usize]), "a is laid out below the blocks");
}
