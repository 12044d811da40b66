//! Where a lane replay (lanes.rs) puts each node's lanes, and which of
//! its steps it runs: decided once, when the lanes are made.

use super::lane_base::{Layout, Term};
use super::lane_uniform::Uniform;
use super::{arena_ranges, Plan, Step};
use crate::core::kernels::scalar::Formula;
use crate::core::op::Op;
use crate::core::shape::Shape;

/// No first term written whole.
const NO_TERM: Term = (u32::MAX, u32::MAX);

impl Plan {
    /// `Lanes::layout`. A vector computed elementwise from an operand of
    /// its shape takes over that operand's lanes, if the operand runs in
    /// lanes (`lane_steps`), no other step reads it, and the backward sweep
    /// never reads its value; a vector's adjoint passed on element by
    /// element to its one operand that takes one, written there first,
    /// becomes that operand's adjoint where it lies; and where such a chain
    /// of adjoints starts, it lies in the node's value lanes, if no
    /// backward step reads what the forward sweep left there. So a chain of elementwise steps works in
    /// one set of lanes, which stays in the cache, instead of each step
    /// writing lanes of its own. (Scalars keep their places: scalar steps
    /// name them.)
    pub(super) fn layout(&self, varying: &[bool], run: &[bool], swept: &[bool], uniform: &Uniform, first: &[Term], read_back: &[bool]) -> (Layout, Vec<u32>) {
        let nodes = &self.graph.nodes;
        let takes = |p: u32| swept[p as usize] && !uniform.same[p as usize];
        let node_steps = |steps: &[Step], run: &[bool]| -> Vec<usize> {
            steps.iter().filter_map(|s| match *s {
                Step::Node(id) if run[id as usize] => Some(id as usize),
                _ => None,
            }).collect()
        };
        let (forward, backward) = (node_steps(&self.forward, run), node_steps(&self.backward, swept));
        // Steps that read each value: vectors are read by node steps only.
        let mut readers = vec![0usize; nodes.len()];
        forward.iter().flat_map(|&id| &nodes[id].parents).for_each(|&p| readers[p as usize] += 1);
        let size = self.graph.values.len();
        let (flat, flat_adjoint) = (vec![false; nodes.len()], uniform.flat.clone());
        let mut layout = Layout { value: nodes.iter().map(|n| n.val).collect(), adjoint: nodes.iter().map(|n| size + n.val).collect(), flat, flat_adjoint };
        for &id in &forward {
            let node = &nodes[id];
            let mine = |p: &&u32| node.parents.iter().filter(|q| q == p).count();
            let free = |p: &&u32| {
                let q = **p as usize;
                run[q] && nodes[q].shape == node.shape && readers[q] == mine(p) && !read_back[q] && q != self.root as usize
            };
            if node.shape.size() > 1 && Formula::of(node.op).is_some() {
                if let Some(&p) = node.parents.iter().find(free) {
                    layout.value[id] = layout.value[p as usize];
                }
            }
        }
        // What the forward sweep leaves in each node's value lanes: the last
        // value computed there (none in a fixed node's, made once for all replays).
        let mut left = vec![usize::MAX; size];
        forward.iter().for_each(|&id| left[layout.value[id]] = id);
        let mut taken = vec![false; size];
        for &id in &backward {
            let node = &nodes[id];
            let at = layout.value[id];
            let starts = layout.adjoint[id] == size + node.val && first[id] != NO_TERM;
            if starts && node.shape.size() > 1 && left[at] != usize::MAX && !read_back[left[at]] && !taken[at] {
                taken[at] = true;
                layout.adjoint[id] = at;
            }
            let elementwise = Formula::of(node.op).is_some() || matches!(node.op, Op::Reshape(_));
            let mut taking = node.parents.iter().enumerate().filter(|&(_, &p)| takes(p));
            if let (Some((k, &p)), None) = (taking.next(), taking.next()) {
                let whole = nodes[p as usize].shape.size() == node.shape.size() && first[p as usize] == (id as u32, k as u32);
                if elementwise && whole && node.shape.size() > 1 && !uniform.same[id] {
                    layout.adjoint[p as usize] = layout.adjoint[id];
                }
            }
        }
        // The fixed values a lane step reads: scalars (scalar steps name
        // them) and the vectors read, but those that only elementwise forward
        // steps read, which read them from the plan's arena instead (a tall
        // Jacobian's 300-vectors were six of 64 bytes an element, each call).
        let mut whole = vec![false; nodes.len()];
        forward.iter().filter(|&&id| Formula::of(nodes[id].op).is_none()).flat_map(|&id| &nodes[id].parents).for_each(|&p| whole[p as usize] = true);
        for id in (0..nodes.len()).filter(|&id| !varying[id] && nodes[id].shape.rank() == 1 && nodes[id].shape.size() > 1) {
            layout.flat[id] = readers[id] > 0 && !whole[id] && !read_back[id];
        }
        let shown = (0..nodes.len()).filter(|&id| !varying[id] && nodes[id].shape.rank() <= 1 && !layout.flat[id]);
        let shown = shown.filter(|&id| nodes[id].shape == Shape::Scalar || readers[id] > 0 || read_back[id]);
        let shown = shown.map(|id| id as u32).collect();
        (layout, shown)
    }

    /// Which values the lane steps of the backward sweep read: each
    /// term a lane kernel computes (for an adjoint in `swept` and not the
    /// same in every lane) reads what its partial does.
    pub(super) fn read_back(&self, swept: &[bool], uniform: &Uniform) -> Vec<bool> {
        let nodes = &self.graph.nodes;
        let takes = |p: u32| swept[p as usize] && !uniform.same[p as usize];
        let mut read_back = vec![false; nodes.len()];
        let backward = self.backward.iter().filter_map(|s| match *s {
            Step::Node(id) if swept[id as usize] => Some(id as usize),
            _ => None,
        });
        for id in backward {
            let node = &nodes[id];
            for (k, _) in node.parents.iter().enumerate().filter(|&(_, &p)| takes(p)) {
                match Formula::of(node.op) {
                    Some((f, _)) => {
                        let [x, y, out] = f.reads(k);
                        read_back[node.parents[0] as usize] |= x;
                        read_back[node.parents[node.parents.len() - 1] as usize] |= y;
                        read_back[id] |= out;
                    }
                    None if node.op == Op::Dot => read_back[node.parents[1 - k] as usize] = true,
                    None => {} // the others read no value (a matvec or a solve, its matrix: the plan's)
                }
            }
        }
        read_back
    }

    /// The forward steps a lane replay runs, and per node whether it runs
    /// one: of the nodes that vary, those whose values are read, by a
    /// backward step (`read_back`, and a scalar step's partials) or by a
    /// forward step that runs, and the root if `root` (a Hessian's or a
    /// reverse Jacobian's lanes want only adjoints: the tangent's own
    /// value and what only it reads are left out). Scalars that do not
    /// vary are written into every lane when the lanes are made.
    pub(super) fn lane_steps(&self, varying: &[bool], read_back: &[bool], uniform: &Uniform, root: bool) -> (Vec<bool>, Vec<Step>) {
        let nodes = &self.graph.nodes;
        let node_at = self.scalar_nodes();
        let id_of = |step: &Step| match *step {
            Step::Node(id) => id as usize,
            Step::Scalar(s) => node_at[s.out as usize] as usize,
        };
        let mut read = read_back.to_vec();
        read[self.root as usize] |= root;
        for step in &self.backward {
            if let Step::Scalar(s) = *step {
                let [a, b, out] = s.at().map(|at| node_at[at] as usize);
                for k in 0..2 {
                    let operand = if k == 0 { s.a } else { s.b } as usize;
                    if s.needs[k] && (k == 0 || s.formula.binary()) && !uniform.same_at[operand] {
                        let [x, y, o] = s.formula.reads(k);
                        read[a] |= x;
                        read[b] |= y;
                        read[out] |= o;
                    }
                }
            }
        }
        // Backward through the forward steps: a step that runs reads its operands.
        for step in self.forward.iter().rev() {
            let id = id_of(step);
            if read[id] && varying[id] {
                for &p in &nodes[id].parents {
                    read[p as usize] = true;
                }
            }
        }
        let run: Vec<bool> = (0..nodes.len()).map(|id| read[id] && varying[id]).collect();
        let steps = self.forward.iter().filter(|s| run[id_of(s)]).copied().collect();
        (run, steps)
    }

    /// Per arena offset, the scalar node whose value lies there
    /// (`u32::MAX` elsewhere): scalar steps name their operands by offset.
    pub(super) fn scalar_nodes(&self) -> Vec<u32> {
        let mut node_at = vec![u32::MAX; self.graph.values.len()];
        for (id, node) in self.graph.nodes.iter().enumerate().filter(|(_, n)| n.shape == Shape::Scalar) {
            node_at[node.val] = id as u32;
        }
        node_at
    }

    /// `Lanes::first` and `Lanes::clear`: which term of the backward sweep
    /// comes first to each adjoint, and which adjoints must be cleared
    /// because theirs is added (a scalar step's, a slice's) or they take none.
    pub(super) fn first_terms(&self, swept: &[bool], uniform: &Uniform) -> (Vec<Term>, Vec<(usize, usize)>) {
        let (same, same_at) = (&uniform.same, &uniform.same_at);
        let nodes = &self.graph.nodes;
        let mut first = vec![NO_TERM; nodes.len()];
        // Which adjoints have taken a term, by where they start in the arena
        // (a scalar step names its operands so).
        let mut seen = vec![false; self.graph.values.len() + 1];
        for step in &self.backward {
            match *step {
                Step::Scalar(s) => {
                    seen[s.a as usize] |= s.needs[0] && !same_at[s.a as usize];
                    seen[s.b as usize] |= s.needs[1] && s.formula.binary() && !same_at[s.b as usize];
                }
                Step::Node(id) if swept[id as usize] => {
                    let whole = !matches!(nodes[id as usize].op, Op::Slice { .. });
                    for (k, &p) in nodes[id as usize].parents.iter().enumerate() {
                        let (p, at) = (p as usize, nodes[p as usize].val);
                        if swept[p] && !same[p] && !seen[at] {
                            seen[at] = true;
                            if whole {
                                first[p] = (id, k as u32);
                            }
                        }
                    }
                }
                Step::Node(_) => {}
            }
        }
        // A vector adjoint the sweep does not reach takes no term: only
        // scalar steps, which run whole, add to adjoints outside it.
        let taken = |id: usize| swept[id] || nodes[id].shape == Shape::Scalar;
        let clear = arena_ranges(nodes, |id| self.needs[id] && first[id] == NO_TERM && !same[id] && taken(id));
        (first, clear)
    }
}
