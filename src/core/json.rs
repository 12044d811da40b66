//! Plans as data (SPEC §8).
use super::error::Result;
use super::plan::Plan;
use crate::fail;

pub fn plan_from_json(_text: &str) -> Result<Plan> {
    fail!("compileFromJSON: not a serialized plan")
}
