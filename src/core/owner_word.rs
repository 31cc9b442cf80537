//! The owner word: exclusive access to one allocator's books for one caller
//! at a time, taken with one compare-exchange and given back with one store.
//!
//! The word holds who is inside (a stream for the tracking layer, a constant
//! for a pluggable allocator). Finding it held by another owner *is* the
//! "two streams in one allocator at once" hazard the tracking layer reports,
//! so the lock doubles as that detector: the caller passes what to do when
//! it sees another owner inside. A thread that already holds the word and
//! asks again (a user callback calling back into the same allocator) gets
//! `None` rather than a deadlock. A holder that runs none of the user's
//! code while inside cannot ask again, and takes the brief form
//! ([`OwnerWord::enter_brief`]), which does not note its thread.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The owner of a word taken for something other than a caller's use of the
/// allocator (an address lookup, a report): it never counts as a second
/// owner.
pub const INSPECTOR: usize = usize::MAX;

/// One owner word (see the module documentation).
#[derive(Default)]
pub struct OwnerWord {
    owner: AtomicUsize,
    owner_thread: AtomicUsize,
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

/// Proof that the caller holds an [`OwnerWord`]; dropping it gives the word
/// back.
pub struct Held<'a> {
    word: &'a OwnerWord,
    /// Taken by [`OwnerWord::enter_brief`]: the holder's thread was not
    /// written, so there is nothing to clear.
    brief: bool,
}

impl Drop for Held<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if !self.brief {
            self.word.owner_thread.store(0, Ordering::Relaxed);
        }
        self.word.owner.store(0, Ordering::Release);
    }
}

impl OwnerWord {
    /// A free word.
    pub const fn new() -> Self {
        OwnerWord {
            owner: AtomicUsize::new(0),
            owner_thread: AtomicUsize::new(0),
        }
    }

    /// Takes the word for `owner` (non-zero; [`INSPECTOR`] for anything but
    /// a use of the allocator), waiting while another caller holds it.
    /// `other_inside(current)` runs once if a different owner is found
    /// inside (neither being the inspector). `None` when this thread
    /// already holds the word.
    #[inline(always)]
    pub fn enter(&self, owner: usize, other_inside: impl FnOnce(usize)) -> Option<Held<'_>> {
        debug_assert_ne!(owner, 0);
        if self
            .owner
            .compare_exchange(0, owner, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            self.owner_thread.store(this_thread(), Ordering::Relaxed);
            return Some(Held {
                word: self,
                brief: false,
            });
        }
        self.enter_contended(owner, other_inside)
    }

    /// [`OwnerWord::enter`] for a holder that runs none of the user's code
    /// while it holds the word (a table update, an address record), so it
    /// can never ask for the word again while holding it: the holder's
    /// thread is not written, which saves two stores per hold that the next
    /// compare-exchange would wait for. It still waits for (and reports)
    /// other owners; the word it holds is told from a re-entry by other
    /// threads exactly as before (`owner_thread` stays 0, never theirs).
    #[inline(always)]
    pub fn enter_brief(&self, owner: usize, other_inside: impl FnOnce(usize)) -> Option<Held<'_>> {
        debug_assert_ne!(owner, 0);
        if self
            .owner
            .compare_exchange(0, owner, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return Some(Held {
                word: self,
                brief: true,
            });
        }
        let mut held = self.enter_contended(owner, other_inside)?;
        // Taken after a wait: the slow path wrote the thread; clear it now
        // so that the drop's brief form leaves nothing behind.
        self.owner_thread.store(0, Ordering::Relaxed);
        held.brief = true;
        Some(held)
    }

    #[cold]
    #[inline(never)]
    fn enter_contended(&self, owner: usize, other_inside: impl FnOnce(usize)) -> Option<Held<'_>> {
        let me = this_thread();
        if self.owner_thread.load(Ordering::Relaxed) == me {
            return None;
        }
        let mut report = Some(other_inside);
        let mut spins = 0u32;
        loop {
            let current = self.owner.load(Ordering::Relaxed);
            if current == 0 {
                if self
                    .owner
                    .compare_exchange(0, owner, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    self.owner_thread.store(me, Ordering::Relaxed);
                    return Some(Held {
                        word: self,
                        brief: false,
                    });
                }
                continue;
            }
            if current != owner && current != INSPECTOR && owner != INSPECTOR {
                if let Some(report) = report.take() {
                    report(current);
                }
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Takes the word as the inspector, waiting at most `patience`: a report
    /// at exit must not hang on a thread stuck inside a user's allocator.
    /// `None` when this thread holds it already or time ran out.
    pub fn enter_with_patience(&self, patience: Duration) -> Option<Held<'_>> {
        let me = this_thread();
        if self.owner_thread.load(Ordering::Relaxed) == me {
            return None;
        }
        let deadline = Instant::now() + patience;
        loop {
            if self
                .owner
                .compare_exchange(0, INSPECTOR, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                self.owner_thread.store(me, Ordering::Relaxed);
                return Some(Held {
                    word: self,
                    brief: false,
                });
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn a_second_owner_is_reported_once_and_waits() {
        let word = OwnerWord::new();
        let seen = AtomicUsize::new(0);
        let held = word.enter(0x10, |_| unreachable!()).unwrap();
        let entered = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let _h = word.enter(0x20, |current| {
                    seen.fetch_add(current, Ordering::SeqCst);
                });
                entered.store(true, Ordering::SeqCst);
            });
            while seen.load(Ordering::SeqCst) == 0 {
                std::thread::yield_now();
            }
            assert!(!entered.load(Ordering::SeqCst), "it waits");
            drop(held);
        });
        assert!(entered.load(Ordering::SeqCst));
        assert_eq!(seen.load(Ordering::SeqCst), 0x10, "reported once");
    }

    #[test]
    fn reentry_is_refused_and_patience_runs_out() {
        let word = OwnerWord::new();
        let held = word.enter(1, |_| {}).unwrap();
        assert!(word.enter(1, |_| {}).is_none(), "same thread");
        assert!(word.enter_with_patience(Duration::from_millis(1)).is_none());
        std::thread::scope(|s| {
            s.spawn(|| {
                assert!(word.enter_with_patience(Duration::from_millis(5)).is_none());
            });
        });
        drop(held);
        assert!(word.enter_with_patience(Duration::from_millis(5)).is_some());
    }
}
