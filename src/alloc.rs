//! The Node addon's allocator on Linux: the system's, except that a large
//! block asked for zeroed (a plan's arenas, a replica's) is mapped from the
//! kernel when made and unmapped when freed.
//!
//! Why: glibc raises its own mapping threshold each time a mapped block is
//! freed (up to 32 MB), and then serves large blocks from its heap, where
//! `calloc` must clear them. In a process that had made and dropped a few
//! plans, a GP's first Hessian at n = 200 (a tangent plan, its pool and two
//! replicas: zeroed arenas of ~9 MB) took 24 ms against 14 in a fresh
//! one, whose new mappings arrive zeroed and are faulted in as they are
//! written. Blocks not asked for zeroed stay glibc's, which reuses them
//! warm (a plan built from a trace, copied, not cleared). Only this
//! addon's Rust code allocates here: Node's own blocks keep glibc's policy.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::{c_int, c_long, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Zeroed blocks from this size are mapped.
const LARGE: usize = 4 << 20;
/// A mapped block shrunk to this size or more stays mapped, shrunk in
/// place: a plan's arena, made with room to spare and shrunk when built,
/// was copied whole into glibc's heap when it fell below `LARGE` (a GP's
/// tangent plan at n = 200: 0.8 ms of its 2.5).
const KEPT_FROM: usize = 256 << 10;
/// What a mapping is aligned to at least (a page).
const PAGE: usize = 4096;

const PROT_READ_WRITE: c_int = 0x1 | 0x2;
const MAP_PRIVATE_ANONYMOUS: c_int = 0x02 | 0x20;
const MREMAP_MAYMOVE: c_int = 1;

extern "C" {
    fn mmap(addr: *mut c_void, len: usize, prot: c_int, flags: c_int, fd: c_int, offset: c_long) -> *mut c_void;
    fn munmap(addr: *mut c_void, len: usize) -> c_int;
    fn mremap(old: *mut c_void, old_len: usize, new_len: usize, flags: c_int, ...) -> *mut c_void;
}

/// The addresses of the mapped blocks alive (0: a free entry). A block
/// that finds no free entry is glibc's, zeroed by `calloc`.
static MAPPED: [AtomicUsize; 512] = [const { AtomicUsize::new(0) }; 512];

/// The entry that holds `ptr`, if it is a mapped block (of `size` bytes:
/// a smaller block is never looked for, so most frees scan nothing).
fn entry(ptr: *mut u8, size: usize) -> Option<&'static AtomicUsize> {
    if size < KEPT_FROM {
        return None;
    }
    MAPPED.iter().find(|e| e.load(Ordering::Acquire) == ptr as usize)
}

pub struct Allocator;

// SAFETY: a block is freed, grown or shrunk by the side that made it:
// mapped blocks are exactly those `MAPPED` lists (an entry is claimed
// before its block is handed out, and no entry names an address while it
// is unmapped), and every other block is glibc's. Mappings are page-aligned, enough for any
// alignment a mapped block is made with.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() < LARGE || layout.align() > PAGE {
            return System.alloc_zeroed(layout);
        }
        let Some(free) = MAPPED.iter().find(|e| e.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed).is_ok()) else {
            return System.alloc_zeroed(layout);
        };
        let p = mmap(std::ptr::null_mut(), layout.size(), PROT_READ_WRITE, MAP_PRIVATE_ANONYMOUS, -1, 0);
        if p as isize == -1 {
            free.store(0, Ordering::Release);
            return std::ptr::null_mut();
        }
        free.store(p as usize, Ordering::Release);
        p.cast()
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match entry(ptr, layout.size()) {
            Some(e) => {
                // Unlisted first: once unmapped, the address may be mapped anew.
                e.store(0, Ordering::Release);
                munmap(ptr.cast(), layout.size());
            }
            None => System.dealloc(ptr, layout),
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Some(e) = entry(ptr, layout.size()) else {
            return System.realloc(ptr, layout, new_size);
        };
        if new_size >= KEPT_FROM {
            // Held (1, no address) while it moves: the old address may be mapped anew.
            e.store(1, Ordering::Release);
            let p = mremap(ptr.cast(), layout.size(), new_size, MREMAP_MAYMOVE);
            if p as isize == -1 {
                e.store(ptr as usize, Ordering::Release); // where it was, still mapped
                return std::ptr::null_mut();
            }
            e.store(p as usize, Ordering::Release);
            return p.cast();
        }
        // Shrunk below the threshold: glibc's block from here on.
        let to = System.alloc(Layout::from_size_align_unchecked(new_size, layout.align()));
        if !to.is_null() {
            std::ptr::copy_nonoverlapping(ptr, to, new_size);
            e.store(0, Ordering::Release);
            munmap(ptr.cast(), layout.size());
        }
        to
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_zeroed_blocks_are_mapped_listed_and_keep_their_contents_when_resized() {
        let a = Allocator;
        let big = Layout::from_size_align(LARGE + 8, 8).unwrap();
        unsafe {
            let p = a.alloc_zeroed(big);
            assert!(!p.is_null() && p as usize % PAGE == 0 && entry(p, big.size()).is_some(), "mapped and listed");
            let words = std::slice::from_raw_parts_mut(p.cast::<u64>(), big.size() / 8);
            assert!(words.iter().all(|&w| w == 0));
            words.iter_mut().enumerate().for_each(|(i, w)| *w = i as u64);
            // Grown: moved or not, the contents stay and the entry follows.
            let q = a.realloc(p, big, 2 * LARGE);
            assert!(entry(q, 2 * LARGE).is_some() && (q == p || entry(p, LARGE).is_none()));
            let words = std::slice::from_raw_parts(q.cast::<u64>(), big.size() / 8);
            assert!(words.iter().enumerate().all(|(i, &w)| w == i as u64));
            // Shrunk, but not far: in place, still listed.
            let grown = Layout::from_size_align(2 * LARGE, 8).unwrap();
            let q2 = a.realloc(q, grown, KEPT_FROM);
            assert!(q2 == q && entry(q, KEPT_FROM).is_some());
            // Shrunk below the threshold: glibc's block, unlisted, the head kept.
            let kept = Layout::from_size_align(KEPT_FROM, 8).unwrap();
            let r = a.realloc(q, kept, 64);
            assert!(entry(r, KEPT_FROM).is_none() && entry(q, KEPT_FROM).is_none());
            assert!(std::slice::from_raw_parts(r.cast::<u64>(), 8).iter().enumerate().all(|(i, &w)| w == i as u64));
            a.dealloc(r, Layout::from_size_align(64, 8).unwrap());
        }
    }

    #[test]
    fn other_blocks_are_the_system_allocators() {
        let a = Allocator;
        unsafe {
            // Large but not zeroed, and zeroed but small: neither is listed.
            let big = Layout::from_size_align(LARGE, 8).unwrap();
            let p = a.alloc(big);
            assert!(!p.is_null() && entry(p, LARGE).is_none());
            a.dealloc(p, big);
            let small = Layout::from_size_align(LARGE - 8, 8).unwrap();
            let q = a.alloc_zeroed(small);
            assert!(!q.is_null() && entry(q, LARGE).is_none());
            a.dealloc(q, small);
        }
    }
}
