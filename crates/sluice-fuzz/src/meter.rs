//! The global allocator of every binary that links this crate: the broker's own
//! [`WireSafeAlloc`], plus a per-thread meter of the bytes a piece of code holds at its peak.
//!
//! Allocations the broker's allocator serves from `MAP_NORESERVE` mappings (a hostile length
//! prefix asking for gigabytes: see `sluice_protocol::alloc`) commit no memory until
//! touched; they are counted apart, as reservations, not as bytes held.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;

use sluice_protocol::alloc::{WireSafeAlloc, HUGE_BYTES};

pub struct Meter;

#[global_allocator]
static METER: Meter = Meter;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
    static RESERVED: Cell<usize> = const { Cell::new(0) };
}

fn note(delta: isize, size: usize) {
    let _ = ON.try_with(|on| {
        if !on.get() {
            return;
        }
        if size >= HUGE_BYTES {
            if delta > 0 {
                let _ = RESERVED.try_with(|r| r.set(r.get().saturating_add(size)));
            }
            return;
        }
        let _ = LIVE.try_with(|live| {
            let now = live.get() + delta;
            live.set(now);
            let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
        });
    });
}

// SAFETY: every call is forwarded unchanged to `WireSafeAlloc`; the meter only counts.
unsafe impl GlobalAlloc for Meter {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { WireSafeAlloc.alloc(layout) };
        if !p.is_null() {
            note(layout.size() as isize, layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { WireSafeAlloc.alloc_zeroed(layout) };
        if !p.is_null() {
            note(layout.size() as isize, layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        note(-(layout.size() as isize), layout.size());
        // SAFETY: `p` came from `alloc`/`realloc` above with this layout.
        unsafe { WireSafeAlloc.dealloc(p, layout) }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds realloc's contract.
        let q = unsafe { WireSafeAlloc.realloc(p, layout, new_size) };
        if !q.is_null() {
            note(-(layout.size() as isize), layout.size());
            note(new_size as isize, new_size);
        }
        q
    }
}

/// What `f` held at its peak on this thread (bytes above what was live when it started),
/// and the bytes it reserved without committing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    pub peak_bytes: usize,
    pub reserved_bytes: usize,
}

pub fn measure<R>(f: impl FnOnce() -> R) -> (R, Usage) {
    LIVE.with(|l| l.set(0));
    PEAK.with(|p| p.set(0));
    RESERVED.with(|r| r.set(0));
    ON.with(|on| on.set(true));
    let out = f();
    ON.with(|on| on.set(false));
    let usage = Usage {
        peak_bytes: PEAK.with(Cell::get).max(0) as usize,
        reserved_bytes: RESERVED.with(Cell::get),
    };
    (out, usage)
}

#[cfg(test)]
mod tests {
    use super::measure;

    #[test]
    fn the_peak_is_what_was_held_at_once() {
        let ((), usage) = measure(|| {
            let a = vec![0u8; 1000];
            drop(a);
            let b = vec![0u8; 600];
            drop(b);
        });
        assert!((1000..1100).contains(&usage.peak_bytes), "{usage:?}");
    }
}
