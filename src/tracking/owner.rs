//! The owner word that guards one allocator object's tracking record.
//!
//! One [`AllocState`] exists per user allocator object, shared by every
//! stream and registration that uses that object. It is guarded by a single
//! word that holds the stream currently inside the allocator: taking it is
//! one compare-exchange, and finding it taken by another stream *is* the
//! "two streams in one allocator at once" hazard, so the lock doubles as the
//! detector. The user's callback runs while the word is held, which is the
//! window in which CANN's allocator contract forbids a second stream.

use super::events::{record, Fault};
use super::state::Inner;
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The owner word of a state taken for something other than a stream's call
/// into the allocator (an address lookup, a report): it never counts as a
/// second stream.
pub(crate) const NOT_A_STREAM: usize = usize::MAX;

/// How long a report waits for an allocator that another thread is inside.
pub(crate) const REPORT_PATIENCE: std::time::Duration = std::time::Duration::from_millis(200);

/// The tracking record of one user allocator object.
pub(crate) struct AllocState {
    /// The user's allocator object.
    pub(crate) allocator: usize,
    owner: AtomicUsize,
    owner_thread: AtomicUsize,
    inner: UnsafeCell<Inner>,
}

// SAFETY: `inner` is only reached through a `Guard`, and at most one guard
// exists at a time (the owner word).
unsafe impl Sync for AllocState {}
unsafe impl Send for AllocState {}

/// Exclusive access to an allocator's record.
pub(crate) struct Guard<'a> {
    state: &'a AllocState,
}

impl Deref for Guard<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        // SAFETY: the guard holds the owner word.
        unsafe { &*self.state.inner.get() }
    }
}

impl DerefMut for Guard<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        // SAFETY: the guard holds the owner word.
        unsafe { &mut *self.state.inner.get() }
    }
}

impl Drop for Guard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.state.owner_thread.store(0, Ordering::Relaxed);
        self.state.owner.store(0, Ordering::Release);
    }
}

thread_local! {
    /// Its address identifies the thread: cheaper than `pthread_self`, which
    /// is a call into the C library.
    static THREAD_MARK: u8 = const { 0 };
}

#[inline]
fn this_thread() -> usize {
    THREAD_MARK.with(|mark| mark as *const u8 as usize)
}

impl AllocState {
    pub(crate) fn new(allocator: usize) -> Self {
        AllocState {
            allocator,
            owner: AtomicUsize::new(0),
            owner_thread: AtomicUsize::new(0),
            inner: UnsafeCell::new(Inner::default()),
        }
    }

    /// Takes the record for `stream` ([`NOT_A_STREAM`] for anything but a
    /// call into the allocator). Returns `None` when this thread already holds
    /// it: a user callback that calls back into the same allocator is passed
    /// through untracked rather than deadlocking.
    #[inline(always)]
    pub(crate) fn enter(&self, stream: usize) -> Option<Guard<'_>> {
        if self
            .owner
            .compare_exchange(0, stream, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            self.owner_thread.store(this_thread(), Ordering::Relaxed);
            return Some(Guard { state: self });
        }
        self.enter_contended(stream)
    }

    /// Takes the record for reading it out (reports, statistics), waiting
    /// at most `patience`: a report at exit must not hang on a thread that
    /// is stuck inside a user's allocator.
    pub(crate) fn enter_for_report(&self, patience: std::time::Duration) -> Option<Guard<'_>> {
        let me = this_thread();
        if self.owner_thread.load(Ordering::Relaxed) == me {
            return None;
        }
        let deadline = std::time::Instant::now() + patience;
        loop {
            if self
                .owner
                .compare_exchange(0, NOT_A_STREAM, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                self.owner_thread.store(me, Ordering::Relaxed);
                return Some(Guard { state: self });
            }
            if std::time::Instant::now() >= deadline {
                return None;
            }
            std::thread::yield_now();
        }
    }

    #[cold]
    #[inline(never)]
    fn enter_contended(&self, stream: usize) -> Option<Guard<'_>> {
        let me = this_thread();
        if self.owner_thread.load(Ordering::Relaxed) == me {
            return None;
        }
        let mut reported = false;
        let mut spins = 0u32;
        loop {
            let current = self.owner.load(Ordering::Relaxed);
            if current == 0 {
                if self
                    .owner
                    .compare_exchange(0, stream, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    self.owner_thread.store(me, Ordering::Relaxed);
                    return Some(Guard { state: self });
                }
                continue;
            }
            if !reported && current != stream && current != NOT_A_STREAM && stream != NOT_A_STREAM {
                reported = true;
                record(Fault::ConcurrentUse {
                    allocator: self.allocator,
                    stream,
                    other_stream: current,
                });
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}
