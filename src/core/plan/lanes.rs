//! A batch's replay of a plan made only of scalar steps, eight points at a
//! time (src/batch.rs).

use super::{Plan, Step};
use crate::core::kernels::scalar::{self, with_constant_formula, Formula};
use crate::core::shape::Shape;

/// How many points a batch replays at once on a plan of scalar steps only
/// (`Plan::lanes`): each step runs across the points side by side, so its
/// dispatch is paid once per `LANES` points and the points' dependency
/// chains overlap instead of waiting on one another.
pub const LANES: usize = 8;
/// The largest plan (in values) replayed in lanes: its lane arenas, 2·LANES
/// times its own, then stay within a core's cache.
const MAX_LANE_VALUES: usize = 1 << 15;

/// The arenas of a lane replay: the value at offset `i` of the plan's arena
/// (node `i`'s, as every node holds one value) for point `l` of a group at
/// `values[i * LANES + l]`, its adjoint likewise in `adj`.
pub struct Lanes {
    values: Vec<f64>,
    adj: Vec<f64>,
}

type Lane = [f64; LANES];

/// `f`'s value, lane by lane. Each arm names its formula as a constant, so
/// the match inside `scalar::value` folds away and the loop is straight.
#[inline(always)]
fn lane_values(f: Formula, k: f64, x: &Lane, y: &Lane, out: &mut Lane) {
    #[inline(always)]
    fn each(f: Formula, k: f64, x: &Lane, y: &Lane, out: &mut Lane) {
        for l in 0..LANES {
            out[l] = scalar::value(f, k, x[l], y[l]);
        }
    }
    with_constant_formula!(f, |c| each(c, k, x, y, out))
}

/// Operand `i`'s share of `f`'s adjoint, lane by lane, added to `to`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn lane_partials(f: Formula, k: f64, i: usize, x: &Lane, y: &Lane, v: &Lane, g: &Lane, to: &mut Lane) {
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn each(f: Formula, k: f64, i: usize, x: &Lane, y: &Lane, v: &Lane, g: &Lane, to: &mut Lane) {
        for l in 0..LANES {
            to[l] += scalar::partial(f, k, i, x[l], y[l], v[l], g[l]);
        }
    }
    with_constant_formula!(f, |c| each(c, k, i, x, y, v, g, to))
}

fn lane(arena: &[f64], at: u32) -> &Lane {
    let at = at as usize * LANES;
    arena[at..at + LANES].try_into().expect("a lane is LANES values")
}

fn lane_mut(arena: &mut [f64], at: u32) -> &mut Lane {
    let at = at as usize * LANES;
    (&mut arena[at..at + LANES]).try_into().expect("a lane is LANES values")
}

impl Plan {
    /// Arenas to replay this plan `LANES` points at a time, holding its
    /// constants and inputs as they are now; `None` unless every op is a
    /// scalar step (nothing that can fail, no kernels) and the plan is small.
    pub fn lanes(&self) -> Option<Lanes> {
        let g = &self.graph;
        let scalar = g.nodes.iter().all(|n| n.shape == Shape::Scalar) && self.forward.iter().all(|s| matches!(s, Step::Scalar(_)));
        if !scalar || g.values.len() > MAX_LANE_VALUES {
            return None;
        }
        let values = g.values.iter().flat_map(|&v| [v; LANES]).collect::<Vec<f64>>();
        Some(Lanes { adj: vec![0.0; values.len()], values })
    }

    /// Replay `n` points (1 ≤ n ≤ LANES) in lanes: `params` holds them one
    /// after another, `width` values each, slot after slot; their values go
    /// to `values` and their gradients, laid out like `params`, to `grads`.
    /// Every lane computes what `forward` and `backward` do, in the same
    /// order, so each point's results are bit-identical to a single replay.
    pub fn replay_lanes(&self, lanes: &mut Lanes, params: &[f64], width: usize, values: &mut [f64], grads: &mut [f64]) {
        let n = values.len();
        debug_assert!((1..=LANES).contains(&n) && params.len() == n * width && grads.len() == n * width);
        let Lanes { values: v, adj } = lanes;
        let offset = |node: u32| self.graph.nodes[node as usize].val as u32;
        let mut at = 0;
        for slot in &self.params {
            if let Some(node) = slot.node {
                let to = lane_mut(v, offset(node));
                for l in 0..n {
                    to[l] = params[l * width + at];
                }
            }
            at += slot.shape.size();
        }
        for step in &self.forward {
            let Step::Scalar(s) = *step else { unreachable!("a lane plan has scalar steps only") };
            let (lower, upper) = v.split_at_mut(s.out as usize * LANES);
            lane_values(s.formula, s.k, lane(lower, s.a), lane(lower, s.b), lane_mut(upper, 0));
        }
        for &(a, b) in &self.clear {
            adj[a * LANES..b * LANES].fill(0.0);
        }
        let root = offset(self.root);
        *lane_mut(adj, root) = [1.0; LANES];
        for step in &self.backward {
            let Step::Scalar(s) = *step else { unreachable!("a lane plan has scalar steps only") };
            let (lower, upper) = adj.split_at_mut(s.out as usize * LANES);
            let g = lane(upper, 0);
            let (x, y, out) = (lane(v, s.a), lane(v, s.b), lane(v, s.out));
            if s.needs[0] {
                lane_partials(s.formula, s.k, 0, x, y, out, g, lane_mut(lower, s.a));
            }
            if s.needs[1] && s.formula.binary() {
                lane_partials(s.formula, s.k, 1, x, y, out, g, lane_mut(lower, s.b));
            }
        }
        let value = lane(v, root);
        values.copy_from_slice(&value[..n]);
        let mut at = 0;
        for slot in &self.params {
            match slot.node {
                Some(node) if self.needs[node as usize] => {
                    let from = lane(adj, offset(node));
                    for l in 0..n {
                        grads[l * width + at] = from[l];
                    }
                }
                _ => {
                    for l in 0..n {
                        grads[l * width + at..l * width + at + slot.shape.size()].fill(0.0);
                    }
                }
            }
            at += slot.shape.size();
        }
    }
}

