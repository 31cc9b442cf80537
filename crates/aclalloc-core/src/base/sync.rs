//! Every atomic and lock of the library comes from here: std's and
//! parking_lot's in normal builds, loom's under `--cfg loom` so that the loom
//! models check the very code that ships.

#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize};
#[cfg(not(loom))]
pub use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize};

pub use std::sync::atomic::{compiler_fence, Ordering};

/// Keeps a lock, or hot data, off the cache lines of its neighbours: a
/// write to it then takes no line another thread keeps writing (128
/// bytes: adjacent lines are fetched in pairs).
#[repr(align(128))]
pub struct Padded<T>(pub T);

/// Atomics of process-wide statics: std's under every cfg. Loom creates its
/// atomics inside a model at run time, so a `static` cannot hold one; the
/// statics are the process's switches, clocks and counters, which no model
/// builds.
pub mod statics {
    pub use std::sync::atomic::{
        AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
    };
}

#[cfg(loom)]
pub struct Mutex<T>(loom::sync::Mutex<T>);
#[cfg(loom)]
impl<T> Mutex<T> {
    pub fn new(value: T) -> Self {
        Mutex(loom::sync::Mutex::new(value))
    }
    pub fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
    pub fn try_lock(&self) -> Option<loom::sync::MutexGuard<'_, T>> {
        self.0.try_lock().ok()
    }
}
#[cfg(loom)]
impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}
#[cfg(loom)]
pub use loom::sync::MutexGuard;
#[cfg(not(loom))]
pub use parking_lot::{Mutex, MutexGuard};

/// A load by the thread holding the writer lock, the only thread that ever
/// stores to the table's atomics: it races with no store, so it needs no
/// ordering.
///
/// Under loom it is an `unsync_load`, which also checks that claim. A plain
/// load would hide races from the model: loom remembers only the last access
/// to each atomic, so a writer's own load just before its store would replace
/// the concurrent reader's load, and the interleavings between the two would
/// never be explored.
#[inline]
pub fn owned_load(atomic: &AtomicUsize) -> usize {
    #[cfg(loom)]
    {
        // SAFETY: every store to the table's atomics happens under the writer
        // lock, which the caller holds; loom panics if that is ever not so.
        unsafe { atomic.unsync_load() }
    }
    #[cfg(not(loom))]
    {
        atomic.load(Ordering::Relaxed)
    }
}

/// Backs off while waiting for a thread that may be running the user's
/// code (a callback, a plugin function) and take long: as [`back_off`] at
/// first, then asleep 50 µs per round.
pub fn wait_out(attempt: &mut u32) {
    if *attempt < 128 {
        back_off(attempt);
    } else {
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
}

/// Backs off while a writer holds a slot or the layout.
#[inline]
pub fn back_off(attempt: &mut u32) {
    #[cfg(loom)]
    {
        let _ = attempt;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    {
        // A writer holds a slot for a few stores; if it was preempted there,
        // stop burning the core it needs.
        *attempt += 1;
        if *attempt < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}
