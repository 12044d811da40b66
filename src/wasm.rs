//! The WebAssembly binding: the same `api` calls as `binding/mod.rs`, exported
//! with the C ABI over linear memory, for `src/js/wasm.js` to adapt.
//!
//! Why not napi through emnapi: every napi call there runs through a
//! JavaScript emulation of the napi C API (a compiled call on a 10-scalar
//! model took 63–67 µs), and Rust's writes into JavaScript-allocated arrays
//! were lost. A plain export costs about as much as a JavaScript function
//! call, and JavaScript writes arguments straight into wasm memory.
//!
//! Conventions, so a call needs no second crossing to learn whether it failed:
//! - arrays and strings travel through four scratch buffers in wasm memory
//!   (`scratch(slot, bytes)` returns one's address; JavaScript fills it);
//! - a node or plan id comes back as an `i32`, -1 on failure;
//! - a status comes back as an `i32`, -1 on failure;
//! - a number comes back as an `f64`, NaN on failure (then `failed()` tells
//!   a failure from a NaN result);
//! - after a failure, `text_ptr()`/`text_len()` hold the message (UTF-8).

use crate::api;
use crate::core::error::Result;
use crate::core::plan::Plan;
use std::cell::{Cell, RefCell};

mod higher;
mod many;

thread_local! {
    static SCRATCH: RefCell<[Vec<u64>; 4]> = const { RefCell::new([Vec::new(), Vec::new(), Vec::new(), Vec::new()]) };
    /// The last failure's message, or text a call returns (op names, plan JSON).
    static TEXT: RefCell<String> = const { RefCell::new(String::new()) };
    static FAILED: Cell<bool> = const { Cell::new(false) };
    /// Plans by id; JavaScript frees them from a FinalizationRegistry.
    static PLANS: RefCell<Vec<Option<Plan>>> = const { RefCell::new(Vec::new()) };
}

/// Install the panic hook: a panic cannot unwind here (it traps), so its
/// message is kept for JavaScript to report with the trap. `epoch` counts
/// the instances JavaScript made before this one: tape ids carry it.
#[no_mangle]
pub extern "C" fn init(epoch: u32) {
    api::set_epoch(epoch);
    std::panic::set_hook(Box::new(|info| {
        let message = format!("internal error: {info}");
        let _ = TEXT.try_with(|t| t.try_borrow_mut().map(|mut t| *t = message));
    }));
}

/// The address of scratch buffer `slot` (0..4), grown to hold `bytes`. It
/// stays valid until the next `scratch` call for the same slot. Null where
/// memory cannot hold it (the buffer is left as it was): a Vec would trap.
#[no_mangle]
pub extern "C" fn scratch(slot: u32, bytes: u32) -> *mut u8 {
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        let buffer = &mut s[slot as usize & 3];
        let words = (bytes as usize).div_ceil(8);
        if buffer.len() < words {
            if buffer.try_reserve_exact(words - buffer.len()).is_err() {
                return std::ptr::null_mut();
            }
            buffer.resize(words, 0);
        }
        buffer.as_mut_ptr().cast()
    })
}

#[no_mangle]
pub extern "C" fn text_ptr() -> *const u8 {
    TEXT.with(|t| t.borrow().as_ptr())
}

#[no_mangle]
pub extern "C" fn text_len() -> u32 {
    TEXT.with(|t| t.borrow().len() as u32)
}

/// Whether the last call failed; clears the flag.
#[no_mangle]
pub extern "C" fn failed() -> bool {
    FAILED.with(|f| f.replace(false))
}

fn say(text: &str) {
    TEXT.with(|t| {
        let mut t = t.borrow_mut();
        t.clear();
        t.push_str(text);
    });
}

fn fail(message: &str) {
    say(message);
    FAILED.with(|f| f.set(true));
}

fn id(r: Result<u32>) -> i32 {
    match r {
        Ok(id) if id <= i32::MAX as u32 => id as i32,
        Ok(_) => {
            fail("too many nodes");
            -1
        }
        Err(e) => {
            fail(&e.0);
            -1
        }
    }
}

fn status(r: Result<()>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => {
            fail(&e.0);
            -1
        }
    }
}

/// 1 or 0 for a yes or a no, −1 for an error (its message kept).
fn flag(r: Result<bool>) -> i32 {
    match r {
        Ok(yes) => i32::from(yes),
        Err(e) => {
            fail(&e.0);
            -1
        }
    }
}

fn number(r: Result<f64>) -> f64 {
    r.unwrap_or_else(|e| {
        fail(&e.0);
        f64::NAN
    })
}

/// Scratch buffer `slot` as `len` values of `T`, for the length of a call.
/// JavaScript wrote them there through `scratch`; no other borrow of the
/// slot is alive while an export runs.
fn buffer<T: Copy>(slot: usize, len: u32) -> &'static mut [T] {
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        let buffer = &mut s[slot];
        let words = (len as usize * std::mem::size_of::<T>()).div_ceil(8);
        if buffer.len() < words {
            buffer.resize(words, 0);
        }
        // SAFETY: the buffer holds at least `len` values of `T` (size 4 or 8,
        // alignment at most 8), lives in a thread-local that is never dropped
        // while the module runs, and is resized only by `scratch` or here,
        // never while a slice of it is in use (each export takes each slot once).
        unsafe { std::slice::from_raw_parts_mut(buffer.as_mut_ptr().cast::<T>(), len as usize) }
    })
}

fn text_arg(slot: usize, len: u32) -> Result<&'static str> {
    std::str::from_utf8(buffer::<u8>(slot, len)).map_err(|_| crate::core::error::Error("text is not UTF-8".into()))
}

#[no_mangle]
pub extern "C" fn op_codes() -> u32 {
    say(&api::coded_ops().join(","));
    text_len()
}

#[no_mangle]
pub extern "C" fn tape_new() -> u32 {
    api::tape_new()
}

#[no_mangle]
pub extern "C" fn tape_free(t: u32) {
    api::tape_free(t)
}

/// The leaf's values are scratch 0.
#[no_mangle]
pub extern "C" fn tape_leaf(t: u32, kind: u32, len: u32, rank: u32, d0: f64, d1: f64) -> i32 {
    id(api::tape_leaf(t, kind, buffer(0, len), rank, d0, d1))
}

#[no_mangle]
pub extern "C" fn tape_length(t: u32) -> i32 {
    id(api::tape_length(t))
}

/// Queued scalar nodes (src/js/queue.js): `3n` entries in scratch 0, `m`
/// numbers in scratch 1. Returns the tape's new length.
#[no_mangle]
pub extern "C" fn tape_apply(t: u32, n: u32, m: u32) -> i32 {
    id(api::tape_apply(t, buffer(0, n.saturating_mul(3)), buffer(1, m)))
}

/// `api::tape_finish_queued`: `3n` queued entries then the leaves' ids in
/// scratch 0, `m` numbers in scratch 1, where the gradients (`total`
/// values) are written over them.
#[no_mangle]
pub extern "C" fn tape_finish_queued(t: u32, n: u32, m: u32, root: u32, swept: bool, leaves: u32, total: u32) -> f64 {
    let ops = buffer::<i32>(0, n.saturating_mul(3).saturating_add(leaves));
    let (queued, ids) = ops.split_at(3 * n as usize);
    let nums = buffer::<f64>(1, m.max(total));
    number(api::tape_finish_queued(t, queued, nums, m as usize, root, swept, ids, total as usize))
}

#[no_mangle]
pub extern "C" fn tape_number(t: u32, kind: u32, x: f64) -> i32 {
    id(api::tape_number(t, kind, x))
}

#[no_mangle]
pub extern "C" fn tape_op1(t: u32, code: u32, a: u32) -> i32 {
    id(api::tape_op1(t, code, a))
}

#[no_mangle]
pub extern "C" fn tape_op2(t: u32, code: u32, a: u32, b: u32) -> i32 {
    id(api::tape_op2(t, code, a, b))
}

#[no_mangle]
pub extern "C" fn tape_op2_number(t: u32, code: u32, a: u32, x: f64, number_left: bool) -> i32 {
    id(api::tape_op2_number(t, code, a, x, number_left))
}

#[no_mangle]
pub extern "C" fn tape_reset(t: u32) -> i32 {
    status(api::tape_reset(t))
}

#[no_mangle]
pub extern "C" fn tape_pow(t: u32, a: u32, k: f64) -> i32 {
    id(api::tape_pow(t, a, k))
}

#[no_mangle]
pub extern "C" fn tape_reshape(t: u32, a: u32, rank: u32, d0: f64, d1: f64) -> i32 {
    id(api::tape_reshape(t, a, rank, d0, d1))
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "C" fn tape_slice(t: u32, a: u32, start_len: i32, s0: f64, s1: f64, size_len: i32, z0: f64, z1: f64) -> i32 {
    id(api::tape_slice(t, a, start_len, s0, s1, size_len, z0, z1))
}

/// The parts' ids are scratch 0.
#[no_mangle]
pub extern "C" fn tape_concat(t: u32, len: u32, axis: u32) -> i32 {
    id(api::tape_concat(t, buffer(0, len), axis))
}

#[no_mangle]
pub extern "C" fn tape_triangular_solve(t: u32, a: u32, b: u32, lower: bool) -> i32 {
    id(api::tape_triangular_solve(t, a, b, lower))
}

/// The node's values are scratch 0, its parents' ids scratch 1.
#[no_mangle]
pub extern "C" fn tape_external(t: u32, len: u32, rank: u32, d0: f64, d1: f64, parents: u32) -> i32 {
    id(api::tape_external(t, buffer(0, len), rank, d0, d1, buffer(1, parents)))
}

#[no_mangle]
pub extern "C" fn tape_size(t: u32) -> f64 {
    number(api::tape_size(t))
}

/// The node's dimensions go to scratch 0 as f64s; returns the rank.
#[no_mangle]
pub extern "C" fn tape_shape(t: u32, node: u32) -> i32 {
    match api::tape_shape(t, node) {
        Ok(shape) => write_dims(shape.dims()),
        Err(e) => {
            fail(&e.0);
            -1
        }
    }
}

fn write_dims(dims: Vec<usize>) -> i32 {
    let out = buffer::<f64>(0, dims.len() as u32);
    for (o, d) in out.iter_mut().zip(&dims) {
        *o = *d as f64;
    }
    dims.len() as i32
}

/// The value goes to scratch 0, `len` values.
#[no_mangle]
pub extern "C" fn tape_value(t: u32, node: u32, len: u32) -> i32 {
    status(api::tape_value(t, node, buffer(0, len)))
}

/// The seed, if `seeded`, is scratch 0. Returns a hand-built node's id, -1
/// when the sweep is complete, NaN on failure.
#[no_mangle]
pub extern "C" fn tape_backward(t: u32, root: u32, seeded: bool, len: u32) -> f64 {
    let seed = seeded.then(|| &*buffer::<f64>(0, len));
    number(api::tape_backward(t, root, seed).map(|r| r as f64))
}

#[no_mangle]
pub extern "C" fn tape_resume(t: u32) -> f64 {
    number(api::tape_resume(t).map(|r| r as f64))
}

/// The adjoint goes to scratch 0; returns 1, or 0 when the node has none.
#[no_mangle]
pub extern "C" fn tape_adjoint(t: u32, node: u32, len: u32) -> i32 {
    match api::tape_adjoint(t, node, buffer(0, len)) {
        Ok(has) => has as i32,
        Err(e) => {
            fail(&e.0);
            -1
        }
    }
}

/// The contribution is scratch 0.
#[no_mangle]
pub extern "C" fn tape_accumulate(t: u32, node: u32, len: u32) -> i32 {
    status(api::tape_accumulate(t, node, buffer(0, len)))
}

/// The leaves' ids are scratch 1; the gradients go to scratch 2, `out_len` values.
#[no_mangle]
pub extern "C" fn tape_finish(t: u32, root: u32, swept: bool, leaves: u32, out_len: u32) -> f64 {
    number(api::tape_finish(t, root, swept, buffer(1, leaves), buffer(2, out_len)))
}

fn new_plan(plan: Result<Plan>) -> i32 {
    let plan = match plan {
        Ok(plan) => plan,
        Err(e) => {
            fail(&e.0);
            return -1;
        }
    };
    PLANS.with(|plans| {
        let mut plans = plans.borrow_mut();
        let free = plans.iter().position(Option::is_none).unwrap_or_else(|| {
            plans.push(None);
            plans.len() - 1
        });
        plans[free] = Some(plan);
        free as i32
    })
}

fn with_plan<R>(p: u32, f: impl FnOnce(&mut Plan) -> Result<R>) -> Result<R> {
    PLANS.with(|plans| match plans.borrow_mut().get_mut(p as usize).and_then(Option::as_mut) {
        Some(plan) => f(plan),
        None => crate::fail!("plan {p} does not exist"),
    })
}

/// The parameters' ids are scratch 0, the inputs' scratch 1.
#[no_mangle]
pub extern "C" fn plan_build(t: u32, root: u32, params: u32, inputs: u32) -> i32 {
    new_plan(api::plan_build(t, root, buffer(0, params), buffer(1, inputs)))
}

/// The plan document is scratch 0 (UTF-8 JSON).
#[no_mangle]
pub extern "C" fn plan_from_json(len: u32) -> i32 {
    reserve_heap(READ_BYTES_PER_TEXT_BYTE * len as usize);
    new_plan(text_arg(0, len).and_then(api::plan_from_json))
}

/// A plan object as src/js/parts.js encodes it: its numbers in scratch 1,
/// its strings (a JSON array) in scratch 0.
#[no_mangle]
pub extern "C" fn plan_from_parts(numbers: u32, len: u32) -> i32 {
    reserve_heap(READ_BYTES_PER_STREAM_NUMBER * numbers as usize);
    new_plan(text_arg(0, len).and_then(|strings| api::plan_from_parts(buffer::<f64>(1, numbers), strings)))
}

/// Reading an encoded plan takes about this many bytes of heap per number.
const READ_BYTES_PER_STREAM_NUMBER: usize = 64;

/// Reading a plan takes about this many bytes of heap per byte of text (a
/// 100 000-parameter plan peaked at ~10×).
const READ_BYTES_PER_TEXT_BYTE: usize = 24;

/// Grow the heap by `bytes` in one step, if it must grow at all: the
/// allocator otherwise grows wasm memory a few pages at a time, and V8 runs
/// a full garbage collection on each growth (a 100 000-node plan read in
/// 3.5 s instead of 0.8). The block is freed at once and reused.
fn reserve_heap(bytes: usize) {
    let mut block: Vec<u8> = Vec::new();
    let _ = block.try_reserve_exact(bytes);
}

/// Bytes the plan holds, as the napi binding reports them.
#[no_mangle]
pub extern "C" fn plan_bytes(p: u32) -> f64 {
    number(with_plan(p, |p| Ok(p.bytes() as f64)))
}

#[no_mangle]
pub extern "C" fn plan_free(p: u32) {
    PLANS.with(|plans| {
        if let Some(slot) = plans.borrow_mut().get_mut(p as usize) {
            *slot = None;
        }
    })
}

/// Feed slot `i` from `flat` at the offset `layout[i]`, one per slot
/// (wasm.js writes every view into `flat` too).
fn feed(p: &mut Plan, flat: &[f64], layout: &[i32]) -> Result<()> {
    if layout.len() != p.slot_count() {
        return crate::fail!("layout does not match the plan");
    }
    for (i, &at) in layout.iter().enumerate() {
        p.set(i, &flat[api::flat_range(flat.len(), offset(at)?, p.slot_size(i), "argument")?])?;
    }
    Ok(())
}

/// An offset into a flat buffer, as a layout holds it: here never a
/// view's negative index.
fn offset(at: i32) -> Result<usize> {
    usize::try_from(at).or_else(|_| crate::fail!("offset {at} is not in the buffer"))
}

/// One replay: arguments from scratch 0 at the offsets in scratch 1 (one per
/// slot), gradients into scratch 2 at the offsets in scratch 3 (one per
/// parameter). Returns the root's value.
#[no_mangle]
pub extern "C" fn plan_run(p: u32, flat: u32, slots: u32, grad: u32, params: u32) -> f64 {
    number(with_plan(p, |p| {
        let (layout, grad_layout) = (buffer::<i32>(1, slots), buffer::<i32>(3, params));
        api::check_layout(p, layout, grad_layout)?;
        feed(p, buffer(0, flat), layout)?;
        let value = api::plan_evaluate(p)?;
        let out = buffer::<f64>(2, grad);
        for (i, &at) in grad_layout.iter().enumerate() {
            let r = api::flat_range(out.len(), offset(at)?, p.slot_size(i), "gradient")?;
            p.gradient(i, &mut out[r])?;
        }
        Ok(value)
    }))
}

/// `plan_run` with every argument in scratch 0 and every gradient to
/// scratch 2, slot after slot at the plan's own offsets.
#[no_mangle]
pub extern "C" fn plan_run_flat(p: u32, flat: u32, grad: u32) -> f64 {
    number(with_plan(p, |p| api::plan_run_flat(p, buffer(0, flat), buffer(2, grad))))
}

/// `plan_run_flat` forward only, for a scalar root: its value.
#[no_mangle]
pub extern "C" fn plan_value_flat(p: u32, flat: u32) -> f64 {
    number(with_plan(p, |p| api::plan_value_flat(p, buffer(0, flat))))
}

/// A forward replay alone, fed as for `plan_run`; the root's value goes to
/// scratch 2, `len` values.
#[no_mangle]
pub extern "C" fn plan_forward(p: u32, flat: u32, slots: u32, len: u32) -> i32 {
    status(with_plan(p, |p| {
        feed(p, buffer(0, flat), buffer(1, slots))?;
        api::plan_forward_into(p, buffer(2, len))
    }))
}

/// `api::plan_slots` as the text to read; -1 on failure.
#[no_mangle]
pub extern "C" fn plan_slots(p: u32) -> i32 {
    match with_plan(p, |p| api::plan_slots(p)) {
        Ok(text) => {
            say(&text);
            0
        }
        Err(e) => {
            fail(&e.0);
            -1
        }
    }
}

/// The root's dimensions go to scratch 0 as f64s; returns the rank.
#[no_mangle]
pub extern "C" fn plan_root_shape(p: u32) -> i32 {
    match with_plan(p, |p| Ok(p.root_shape().dims())) {
        Ok(dims) => write_dims(dims),
        Err(e) => {
            fail(&e.0);
            -1
        }
    }
}
