//! The tapes of a thread, by id: ops name their tape by a number, since
//! unwrapping an external on every call cost more than the op itself. An
//! id is a slot, and above it the epoch of the core that made it.

use crate::core::error::Result;
use crate::core::tape::Tape;
use crate::fail;
use std::cell::RefCell;

thread_local! {
    /// Each Node environment runs on its own thread.
    static TAPES: RefCell<Vec<Option<Tape>>> = const { RefCell::new(Vec::new()) };
}

/// A tape id is its slot in TAPES below this many bits, and above them the
/// epoch of the core that made it (below bit 31: ids stay positive in
/// JavaScript).
const SLOT_BITS: u32 = 24;
/// The slot bits of an id.
const SLOT: u32 = (1 << SLOT_BITS) - 1;
/// The most epochs: a WebAssembly core is not replaced more often (src/js/wasm.js).
#[cfg(any(target_arch = "wasm32", test))]
const EPOCHS: u32 = 1 << 7;
/// The id `tape_new` gives when every slot is taken: it names no tape.
const NO_TAPE: u32 = u32::MAX;

#[cfg(any(target_arch = "wasm32", test))]
thread_local! {
    /// Which instance of the core this is. A WebAssembly core replaced
    /// after a trap starts the next epoch, so an id from before names no
    /// tape in it rather than another one.
    static EPOCH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Start epoch `e` (below `EPOCHS`): ids of tapes made before name none after.
#[cfg(any(target_arch = "wasm32", test))]
pub fn set_epoch(e: u32) {
    EPOCH.with(|c| c.set(e % EPOCHS));
}

#[cfg(any(target_arch = "wasm32", test))]
fn epoch() -> u32 {
    EPOCH.with(std::cell::Cell::get)
}

/// Natively the core is never replaced.
#[cfg(not(any(target_arch = "wasm32", test)))]
fn epoch() -> u32 {
    0
}

pub(super) fn with_tape<R>(id: u32, f: impl FnOnce(&mut Tape) -> Result<R>) -> Result<R> {
    TAPES.with(|tapes| match tapes.borrow_mut().get_mut(slot(id)?).and_then(Option::as_mut) {
        Some(tape) if id != NO_TAPE => f(tape),
        _ => fail!("tape {id} does not exist"),
    })
}

/// The slot of a tape id made by this instance of the core.
#[cfg(any(target_arch = "wasm32", test))]
fn slot(id: u32) -> Result<usize> {
    if id >> SLOT_BITS != epoch() && id != NO_TAPE {
        return fail!("tape {id} was made before the WebAssembly core was reset; make its Vars again");
    }
    Ok((id & SLOT) as usize)
}

/// Natively every id has epoch 0, so it is its slot, and ids past the
/// slots (NO_TAPE among them) name none: this is on every eager op's path.
#[cfg(not(any(target_arch = "wasm32", test)))]
fn slot(id: u32) -> Result<usize> {
    Ok(id as usize)
}

pub fn tape_new() -> u32 {
    TAPES.with(|tapes| {
        let mut tapes = tapes.borrow_mut();
        let free = match tapes.iter().position(Option::is_none) {
            Some(free) => free,
            None if tapes.len() < 1 << SLOT_BITS => {
                tapes.push(None);
                tapes.len() - 1
            }
            None => return NO_TAPE,
        };
        tapes[free] = Some(Tape::default());
        free as u32 | epoch() << SLOT_BITS
    })
}

pub fn tape_free(id: u32) {
    if id >> SLOT_BITS != epoch() {
        return;
    }
    let freed = TAPES.with(|tapes| tapes.borrow_mut().get_mut((id & SLOT) as usize).and_then(Option::take));
    drop(freed); // outside the borrow
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::error::Error;

    #[test]
    fn a_tape_of_an_earlier_epoch_names_no_tape_in_a_later_one() {
        let old = tape_new();
        // A new instance: no tapes, the next epoch.
        TAPES.with(|tapes| tapes.borrow_mut().clear());
        set_epoch(1);
        let new = tape_new();
        assert_eq!((old & SLOT, new & SLOT), (0, 0), "the same slot");
        assert_ne!(old, new);
        assert_eq!(
            length(old),
            Err(Error(format!("tape {old} was made before the WebAssembly core was reset; make its Vars again")))
        );
        tape_free(old); // frees nothing
        assert_eq!(length(new), Ok(0));
        tape_free(new);
        assert_eq!(length(new), Err(Error(format!("tape {new} does not exist"))));
    }

    fn length(id: u32) -> Result<usize> {
        with_tape(id, |t| Ok(t.graph.nodes.len()))
    }
}
