//! A global allocator that keeps a hostile length prefix from killing the process.
//!
//! `kafka-protocol` (0.18) decodes arrays with `Vec::with_capacity(n)` where `n` is read
//! straight off the wire (up to 2^31, or 2^32 for compact arrays), before checking that the
//! elements exist. A 10-byte frame can therefore ask for hundreds of gigabytes; when the
//! kernel refuses, Rust aborts the process. Upstream fixes are open but unreleased
//! (kafka-protocol-rs PRs #152, #161, #200).
//!
//! [`WireSafeAlloc`] serves every allocation of at least [`HUGE_BYTES`] from an anonymous
//! `MAP_NORESERVE` mapping instead of the system allocator. Such a reservation costs no memory
//! until touched, so the decoder gets its (never filled) capacity, fails a few bytes later with
//! a clean "not enough bytes" error, and the mapping is released. Nothing on the broker's
//! legitimate paths allocates that much in one piece. (Under `vm.overcommit_memory=2` the kernel
//! refuses even these mappings and the original abort returns; this is documented in the
//! README.)
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr;

/// Allocations at or above this size are served by `mmap(MAP_NORESERVE)`.
pub const HUGE_BYTES: usize = 1 << 30;
const PAGE_BYTES: usize = 4096;

pub struct WireSafeAlloc;

fn is_huge(layout: &Layout) -> bool {
    layout.size() >= HUGE_BYTES && layout.align() <= PAGE_BYTES
}

// SAFETY: every pointer handed out is either from `System` (and returned to it) or from a
// fresh anonymous mapping of exactly `layout.size()` bytes (and unmapped with that size);
// `is_huge` is a pure function of the layout, so alloc and dealloc always agree on the path.
unsafe impl GlobalAlloc for WireSafeAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !is_huge(&layout) {
            // SAFETY: forwarded with the caller's layout.
            return unsafe { System.alloc(layout) };
        }
        // SAFETY: a new private anonymous mapping aliases nothing.
        let mapped = unsafe {
            rustix::mm::mmap_anonymous(
                ptr::null_mut(),
                layout.size(),
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE | rustix::mm::MapFlags::NORESERVE,
            )
        };
        match mapped {
            Ok(p) => p.cast(),
            Err(_) => ptr::null_mut(),
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !is_huge(&layout) {
            // SAFETY: forwarded with the caller's layout.
            return unsafe { System.alloc_zeroed(layout) };
        }
        // Anonymous mappings are zero-filled by the kernel.
        // SAFETY: same contract as `alloc`.
        unsafe { self.alloc(layout) }
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        if !is_huge(&layout) {
            // SAFETY: `p` came from `System` with this layout.
            return unsafe { System.dealloc(p, layout) };
        }
        // SAFETY: `p` is the start of a mapping of exactly `layout.size()` bytes.
        let _ = unsafe { rustix::mm::munmap(p.cast(), layout.size()) };
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size` with `layout.align()` is a valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if !is_huge(&layout) && !is_huge(&new_layout) {
            // SAFETY: both sides stay with `System`.
            return unsafe { System.realloc(p, layout, new_size) };
        }
        // SAFETY: allocate, copy the overlap, release the old block: the default strategy.
        unsafe {
            let fresh = self.alloc(new_layout);
            if !fresh.is_null() {
                ptr::copy_nonoverlapping(p, fresh, layout.size().min(new_size));
                self.dealloc(p, layout);
            }
            fresh
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_reservations_are_cheap_and_usable() {
        let a = WireSafeAlloc;
        let layout = Layout::from_size_align(64 << 30, 8).unwrap();
        // SAFETY: layout is non-zero; the pointer is used within bounds and freed once.
        unsafe {
            let p = a.alloc(layout);
            assert!(!p.is_null(), "a 64 GiB NORESERVE mapping should succeed");
            *p = 7;
            *p.add((64 << 30) - 1) = 9;
            assert_eq!(*p, 7);
            let q = a.realloc(p, layout, 4096);
            assert_eq!(*q, 7);
            a.dealloc(q, Layout::from_size_align(4096, 8).unwrap());
        }
    }
}
