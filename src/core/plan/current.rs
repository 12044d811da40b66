//! What a plan's arena holds beyond the arguments it was fed.

/// Whether values a plan holds are those a replay at its arguments would
/// compute: all of them (`values`: a plan that took its trace's graph,
/// `adopt_current`, holds the trace's until an argument is fed other
/// bits), or those of the nodes that depend on inputs alone (`inputs`:
/// true once lanes computed them, `Plan::lanes`, in a plain layout where
/// only their own steps write them, until an input is fed other bits;
/// meanwhile lanes need not compute them again). A copy (a batch's
/// replica) holds neither. Only a plan that holds one compares what it is
/// fed with what it holds.
#[derive(Debug, Default)]
pub(super) struct Current {
    pub(super) values: bool,
    pub(super) inputs: bool,
}

impl Clone for Current {
    fn clone(&self) -> Self {
        Current::default()
    }
}

impl Current {
    /// Note an argument (an input if `input`) fed `data` where the arena held `held`.
    pub(super) fn feed(&mut self, input: bool, held: &[f64], data: &[f64]) {
        if (self.values || (input && self.inputs)) && !held.iter().zip(data).all(|(a, b)| a.to_bits() == b.to_bits()) {
            self.values = false;
            self.inputs &= !input;
        }
    }
}
