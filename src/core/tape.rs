//! The eager tape: a graph recorded as ops are called, with values computed
//! on the spot, and a reverse sweep that pauses at hand-built nodes so their
//! JavaScript closures can run.

use super::error::Result;
use super::plan::Plan;
use super::graph::{grow, post_order_with, propagate, Graph, Walk};
use super::kernels::matrix::axpy;
use super::kernels::FreshAdjoints;
use super::op::Op;
use crate::fail;

/// Adjoints this large or larger are not zeroed when a sweep starts: the
/// step that writes one first assigns it (`kernels::FirstWrites`), as a
/// plan's large adjoints are. The eager GP at n = 200 spent 8% of a call
/// zeroing its n×n adjoints.
const FIRST_WRITES_FROM: usize = 64;

/// Values a reset tape keeps room for (8 MiB): enough that a model's data
/// loads without a page fault per 4 KiB on every evaluation, too little to
/// keep a large trace's arenas alive.
const KEPT_CAPACITY: usize = 1 << 20;

#[derive(Default)]
pub struct Tape {
    pub graph: Graph,
    adj: Vec<f64>,
    order: Vec<u32>,
    needs: Vec<bool>,
    /// Adjoints this sweep has neither written nor zeroed yet (large ones:
    /// `FIRST_WRITES_FROM`): the first step to reach one writes it fresh.
    unwritten: Vec<bool>,
    walk: Walk,
    /// How many nodes of `order`, from the front, the sweep has still to visit.
    pending: usize,
    /// The last few evaluations, most recent first, should the next
    /// repeat one of them.
    pub repeats: Vec<Repeat>,
}

impl Tape {
    /// Forget every node, keeping the arenas' capacity up to
    /// `KEPT_CAPACITY` values: a spare tape that once traced a large
    /// objective would otherwise hold its arenas for the process's life.
    pub fn reset(&mut self) {
        self.graph.clear();
        self.order.clear();
        self.needs.clear();
        self.unwritten.clear();
        self.pending = 0;
        if self.graph.values.capacity() + self.graph.aux.capacity() + self.adj.capacity() > KEPT_CAPACITY {
            self.graph.release_arenas();
            self.adj = Vec::new();
        }
    }

    /// Start a reverse sweep from `root`, seeded with `seed` (1 for a scalar
    /// when `None`). Returns the first hand-built node met, whose closure the
    /// caller runs before calling `resume`; `None` when the sweep is done.
    pub fn backward(&mut self, root: u32, seed: Option<&[f64]>) -> Result<Option<u32>> {
        let shape = self.graph.node(root)?.shape;
        let seed_len = seed.map_or(1, <[f64]>::len);
        match seed {
            None if shape.size() != 1 || shape.rank() != 0 => {
                return fail!("backward() needs an explicit seed for a {shape} node; only a scalar objective can seed itself with 1.")
            }
            Some(_) if seed_len != shape.size() => {
                return fail!("seed has {seed_len} elements but this node holds {}", shape.size())
            }
            _ => {}
        }
        let nodes = &self.graph.nodes;
        // Forget the last sweep's marks, then visit only what reaches the root:
        // a sweep costs what it visits, however large the tape has grown.
        for &id in &self.order {
            self.needs[id as usize] = false;
        }
        if self.needs.len() < nodes.len() {
            self.needs.resize(nodes.len(), false);
            self.unwritten.resize(nodes.len(), false);
        }
        let (values, held) = (self.graph.values.len(), self.adj.len());
        if held < values {
            grow(&mut self.adj, values - held)?;
        }
        // One pass marks what carries an adjoint (a parameter, or anything
        // computed from one) and clears those adjoints, and only those: the
        // arena also holds the (often large) constants, which carry none.
        // Large ones are left for their first writer (`resume`).
        let (needs, unwritten, adj) = (&mut self.needs, &mut self.unwritten, &mut self.adj);
        post_order_with(nodes, root, &mut self.walk, &mut self.order, |id| {
            let node = &nodes[id as usize];
            let need = node.op == Op::Leaf || node.parents.iter().any(|&p| needs[p as usize]);
            needs[id as usize] = need;
            let r = node.range();
            unwritten[id as usize] = need && r.len() >= FIRST_WRITES_FROM;
            match r {
                _ if !need || r.len() >= FIRST_WRITES_FROM => {}
                r if r.len() == 1 => adj[r.start] = 0.0, // most nodes of a small model: no memset call
                r => adj[r].fill(0.0),
            }
        });
        // The root always does; its adjoint is the seed, written whole below.
        self.needs[root as usize] = true;
        self.unwritten[root as usize] = false;
        let r = nodes[root as usize].range();
        match seed {
            Some(s) => self.adj[r].copy_from_slice(s),
            None => self.adj[r.start] = 1.0,
        }
        self.pending = self.order.len();
        Ok(self.resume())
    }

    /// Continue the sweep after a hand-built node's contributions are in.
    pub fn resume(&mut self) -> Option<u32> {
        let nodes = &self.graph.nodes;
        while self.pending > 0 {
            self.pending -= 1;
            let id = self.order[self.pending];
            if !self.needs[id as usize] {
                continue;
            }
            let node = &nodes[id as usize];
            if node.op.is_leaf() {
                continue;
            }
            // The parents' adjoints this step reaches first.
            let mut fresh = FreshAdjoints::new();
            for &p in &node.parents {
                if self.needs[p as usize] && std::mem::take(&mut self.unwritten[p as usize]) {
                    fresh.push((p, nodes[p as usize].range()));
                }
            }
            if node.op == Op::External {
                // Its closure adds into them (`accumulate`).
                for (_, r) in fresh {
                    self.adj[r].fill(0.0);
                }
                return Some(id);
            }
            propagate(nodes, id as usize, &self.graph.values, &mut self.adj, &mut self.graph.aux, &self.needs, fresh);
        }
        None
    }

    /// The adjoint of `id` after the last sweep, if it carries one (or so
    /// far, read from a hand-built node's backward: one no step has
    /// reached yet is zeroed then, and its writers add to the zeros).
    pub fn adjoint(&mut self, id: u32) -> Option<&[f64]> {
        let r = self.graph.nodes.get(id as usize)?.range();
        if !*self.needs.get(id as usize)? {
            return None;
        }
        if self.unwritten.get_mut(id as usize).is_some_and(std::mem::take) {
            self.adj[r.clone()].fill(0.0);
        }
        Some(&self.adj[r])
    }

    /// Add a hand-built node's contribution to a parent's adjoint.
    pub fn accumulate(&mut self, id: u32, contribution: &[f64]) -> Result<()> {
        let node = self.graph.node(id)?;
        if contribution.len() != node.shape.size() {
            return fail!(
                "a hand-built node's backward returned {} values for a parent of shape {}",
                contribution.len(),
                node.shape
            );
        }
        if self.needs.get(id as usize).copied().unwrap_or(false) {
            axpy(1.0, contribution, &mut self.adj[node.range()]);
        }
        Ok(())
    }
}

/// An evaluation recorded the same way as one of the last few on a tape (a
/// sampler's potential, called again and again) runs as a plan built from
/// it, as `compile` would build one: the recording and the walk are done
/// once, and what repeats costs about a compiled call. Plans agree with the
/// tape bit for bit, so this changes nothing but the time. Its recorder
/// (the queue, api/queue.rs) says what counts as the same: `key`.
#[derive(Default)]
pub struct Repeat {
    /// The last evaluation, as its recorder describes it.
    pub key: Vec<i32>,
    /// Numbers the plan holds rather than reads (pow's exponents, matrices'
    /// dimensions): where they sit among the recorder's numbers, and their bits.
    pub baked: Vec<(usize, u64)>,
    /// Built when the key is seen again.
    pub plan: Option<Plan>,
    /// Where each argument of the plan (parameters, then inputs) sits among
    /// the recorder's numbers.
    pub slots: Vec<std::ops::Range<usize>>,
    /// The plan parameter of each leaf whose gradient is asked for.
    pub grads: Vec<usize>,
}

impl Repeat {
    /// Whether `baked` holds in `nums`.
    pub fn baked_in(&self, nums: &[f64]) -> bool {
        self.baked.iter().all(|&(at, bits)| nums.get(at).is_some_and(|x| x.to_bits() == bits))
    }

    /// Run the plan on the arguments in `nums`, and write the gradients
    /// asked for over `nums` from the start, one after another; the root's value.
    pub fn replay(&mut self, nums: &mut [f64]) -> Result<f64> {
        let Some(plan) = self.plan.as_mut() else { return fail!("no plan to replay") };
        for (i, r) in self.slots.iter().enumerate() {
            let Some(data) = nums.get(r.clone()) else { return fail!("queue overflow") };
            plan.set(i, data)?;
        }
        let value = plan.forward()?[0];
        plan.backward();
        let mut at = 0;
        for &p in &self.grads {
            let n = plan.slot_size(p);
            let Some(out) = nums.get_mut(at..at + n) else { return fail!("gradient buffer too small") };
            plan.gradient(p, out)?;
            at += n;
        }
        Ok(value)
    }
}
