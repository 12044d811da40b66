//! Forward mode and second order under WebAssembly: the tape's tangents,
//! a plan's tangent and row plans, and what a tangent plan's replay gives.
//! (A Hessian's and a reverse Jacobian's units: `many.rs`.)

use super::{buffer, flag, id, new_plan, status, with_plan};
use crate::api;

/// The leaves are scratch 0, their tangents scratch 1.
#[no_mangle]
pub extern "C" fn tape_jvp(t: u32, root: u32, n: u32) -> i32 {
    id(api::tape_jvp(t, root, buffer(0, n), buffer(1, n)))
}

/// The colors (`api::tape_colors`) to scratch 2, which holds `cap` u32
/// values: how many were written, 0 where there are none, −1 an error;
/// where they need more than `cap`, how many, and nothing written (the
/// caller reserves that much and asks again).
#[no_mangle]
pub extern "C" fn tape_colors(t: u32, root: u32, leaf: u32, cap: u32) -> i32 {
    let colors = api::tape_colors(t, root, leaf).map(|c| match c {
        Some(c) => {
            if c.len() <= cap as usize {
                buffer::<u32>(2, c.len() as u32).copy_from_slice(&c);
            }
            c.len() as u32
        }
        None => 0,
    });
    id(colors)
}

#[no_mangle]
pub extern "C" fn plan_tangent(p: u32) -> i32 {
    // The plan is made before `new_plan` takes the table again.
    let plan = with_plan(p, |p| p.tangent_plan());
    new_plan(plan)
}

#[no_mangle]
pub extern "C" fn plan_rows(p: u32) -> i32 {
    let plan = with_plan(p, |p| p.row_plan());
    new_plan(plan)
}

/// Output `i`'s value goes to scratch 2, `len` values.
#[no_mangle]
pub extern "C" fn plan_output(p: u32, i: u32, len: u32) -> i32 {
    status(with_plan(p, |p| api::plan_output_into(p, i as usize, buffer(2, len))))
}

/// After `plan_run` of a tangent plan, its primal gradient to scratch 2,
/// `len` values: 1, or 0 where the plan keeps no such sweep
/// (`Plan::primal_gradient`), −1 an error.
#[no_mangle]
pub extern "C" fn plan_primal_gradient(p: u32, len: u32) -> i32 {
    flag(with_plan(p, |p| p.primal_gradient(buffer(2, len))))
}

/// Arguments in scratch 0; the Jacobian to scratch 2, `len` values.
#[no_mangle]
pub extern "C" fn plan_columns(p: u32, flat: u32, len: u32) -> i32 {
    // 1: every entry finite, 0: not (`api::plan_columns`), −1: an error.
    flag(with_plan(p, |p| api::plan_columns(p, buffer(0, flat), buffer(2, len), None)))
}
