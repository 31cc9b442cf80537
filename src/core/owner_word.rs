//! The owner word: exclusive access to one allocator's books for one caller
//! at a time. A thread that uses the word alone enters and leaves with plain
//! stores (biased ownership); any other use takes one compare-exchange to
//! enter and one store to leave.
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
//!
//! # Biased ownership
//!
//! A locked read-modify-write costs several nanoseconds (it waits for every
//! earlier access to finish), and a single-threaded user pays two per
//! alloc+free pair for nothing. So the word is *biased* to a thread that
//! keeps taking it: that thread enters on the fast path, the others (and
//! that thread, when the fast path fails) on the slow path.
//!
//! - `word` is the compare-exchange lock of the slow path (the owner inside,
//!   or 0) and `owner_thread` the thread of a full slow-path holder, for
//!   re-entry, as before biasing.
//! - `bias` is the biased thread's mark, 0 when none, or the mark with
//!   `REVOKED` set once another thread has revoked it.
//! - `fast_inside` is written only by the thread whose mark is in `bias`:
//!   its owner while it is inside on the fast path (or trying to enter), 0
//!   otherwise.
//!
//! Fast path, taken when `bias` is this thread's mark: `fast_inside` not 0
//! means this thread is inside already (`None`); otherwise store the owner
//! in `fast_inside`, a light fence, then load `word` and `bias`. With `word`
//! free and `bias` still this thread's the thread is inside; it leaves with
//! a release store of 0 to `fast_inside`. Otherwise it stores 0 back and
//! takes the slow path.
//!
//! Slow path: the compare-exchange of `word` (waiting, and reporting the
//! owner found inside, as before). Holding `word`, it reads `bias`, which
//! only holders of `word` change: if another thread's mark is there,
//! unrevoked, it sets `REVOKED`, runs the heavy fence and then, as for a
//! mark revoked earlier, waits until `fast_inside` is 0 (reporting the owner
//! found there, once). The two sides form an asymmetric Dekker pair (fast:
//! store `fast_inside`, light fence, load `word` and `bias`; slow:
//! compare-exchange `word` and store `bias`, heavy fence, load
//! `fast_inside`): either the slow side sees the biased thread's store and
//! waits for it to leave, or the biased thread sees the word held (or, once
//! the holder has left, the revoked bias) and backs out. Once the bias is
//! revoked no fast entry can succeed, so later slow entries need no fence;
//! they still read `fast_inside`, because a revoker that ran out of
//! patience ([`OwnerWord::enter_with_patience`]) leaves without waiting the
//! biased thread out.
//!
//! The fences are `core::barrier`'s: `light` is a compiler fence
//! once `barrier::init` has found membarrier (a full fence before that,
//! always correct), `heavy` is `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`,
//! a few microseconds. The slow path calls `init` before it first grants a
//! bias, so a biased thread's fences are cheap.
//!
//! **Who gets the bias.** A thread that takes `word` a number of times in a
//! row (no other thread in between) gets the bias; the number starts at
//! 8 (`FIRST_BIAS_AFTER`) and doubles at each revocation, up to 2^20
//! (`MOST_BIAS_AFTER`), so that threads taking turns, or a monitoring
//! thread reading statistics now and then, cannot make revocations (a
//! membarrier each) a steady cost. Inspector entries on another thread
//! (reports, statistics) revoke like any other. The counting fields are
//! changed only by the holder of `word`.
//!
//! **A bias moves to another thread only after its previous thread has seen
//! it revoked** (its next entry, on the slow path, clears the revoked mark).
//! The reason is the window between the biased thread's load of `bias` and
//! its store to `fast_inside`: preempted there, it can store long after it
//! was revoked. Its own later checks make it back out, but the store would
//! overwrite the `fast_inside` of a new biased thread that is inside, and
//! its backing out (a store of 0) would hide that thread from the next
//! revoker. Once the old thread has read the revoked mark, coherence keeps
//! it from reading its old bias again, so it cannot be in that window. The
//! price: a word whose biased thread stops calling after the revocation
//! stays unbiased (the compare-exchange, as before biasing).
//!
//! **Re-entry.** A thread inside on the fast path whose bias was revoked
//! meanwhile (the revoker waiting for it) and that asks again goes to the
//! slow path: it is told by the revoked mark being its own with
//! `fast_inside` not 0, and gets `None` there instead of waiting for the
//! revoker, which waits for it.
//!
//! **Thread marks** are the thread pointer (x86-64 `fs:0`, aarch64
//! `TPIDR_EL0`; elsewhere the address of a thread-local): unique among
//! live threads, not across time. A thread that exits leaves its mark in
//! `bias`; a new thread that gets the same thread control block (glibc
//! reuses the stacks of exited threads) inherits the bias, which is
//! harmless: the two never run at once, and the old one cannot have left
//! `fast_inside` set except by dying inside (see fork).
//!
//! **Fork.** The child has one thread, the forking one, with its parent's
//! mark. Parent threads that do not exist in the child may still be marked
//! in `bias`:
//! - the forking thread's own bias stays valid (it continues in the child,
//!   inside the word if it forked from inside it, and leaves normally);
//! - a dead thread's bias with `fast_inside` 0: the child's first slow
//!   entry revokes it as usual (`barrier::heavy` works in a child: it
//!   registers again if the kernel dropped the registration), and the bias
//!   never moves since that thread never acknowledges: the word stays on
//!   the slow path in the child (or, if a child thread reuses the dead
//!   thread's thread control block, which glibc does, that thread inherits
//!   the bias, harmless as above);
//! - a dead thread that was inside on the fast path at the fork, or in the
//!   few instructions of a fast attempt: `fast_inside` stays non-zero, and
//!   the child's threads wait on it forever (with patience: give up), as
//!   they waited on a `word` left held before biasing; a child thread that
//!   reuses that thread's control block gets `None` (taken for a re-entry),
//!   as one reusing a dead slow-path holder's did before.
//!
//! docs/HARDENING.md lists this with the other locks a child cannot rely on.

use crate::core::sync::{owned_load, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The owner of a word taken for something other than a caller's use of the
/// allocator (an address lookup, a report): it never counts as a second
/// owner.
pub const INSPECTOR: usize = usize::MAX;

/// Set in `bias` beside the mark of a thread whose bias was revoked and
/// that has not yet seen it (thread marks are even).
pub(crate) const REVOKED: usize = 1;

/// Entries in a row by one thread before it first gets the bias.
pub(crate) const FIRST_BIAS_AFTER: usize = 8;

/// The most entries in a row needed, however often the bias was revoked.
pub(crate) const MOST_BIAS_AFTER: usize = 1 << 20;

/// One owner word (see the module documentation).
pub struct OwnerWord {
    /// The slow path's lock: the owner inside, or 0.
    word: AtomicUsize,
    /// The thread of a full (not brief) slow-path holder, or 0.
    owner_thread: AtomicUsize,
    /// The biased thread's mark (with `REVOKED` once revoked), or 0.
    /// Changed only by a holder of `word`.
    bias: AtomicUsize,
    /// Written only by the thread marked in `bias`: its owner while inside
    /// on the fast path (or trying to enter), 0 otherwise.
    fast_inside: AtomicUsize,
    /// Changed only by a holder of `word`: the thread that took it last
    /// on the slow path, how many times in a row, and how many it needs to
    /// get the bias.
    streak_thread: AtomicUsize,
    streak: AtomicUsize,
    bias_after: AtomicUsize,
}

impl Default for OwnerWord {
    fn default() -> Self {
        OwnerWord::new()
    }
}

#[cfg(not(loom))]
use crate::core::barrier::{heavy, init as barrier_init, light};

/// Under loom, membarrier cannot be modelled; both sides are SeqCst fences
/// (see tests/loom_owner_word.rs for why that is the faithful abstraction).
#[cfg(loom)]
fn light() {
    crate::core::sync::fence(Ordering::SeqCst);
}
#[cfg(loom)]
fn heavy() {
    crate::core::sync::fence(Ordering::SeqCst);
}
#[cfg(loom)]
fn barrier_init() {}

/// This thread's mark: non-zero, even, unique among live threads.
#[cfg(all(not(loom), target_arch = "x86_64"))]
#[inline(always)]
fn this_thread() -> usize {
    let tp: usize;
    // SAFETY: the x86-64 ELF TLS ABI puts the thread pointer itself in the
    // first word of the thread control block, at `fs:0`; one load of it,
    // nothing written.
    unsafe {
        std::arch::asm!(
            "mov {}, qword ptr fs:[0]",
            out(reg) tp,
            options(nostack, preserves_flags, readonly, pure)
        )
    };
    tp
}

/// This thread's mark: non-zero, even, unique among live threads.
#[cfg(all(not(loom), target_arch = "aarch64"))]
#[inline(always)]
fn this_thread() -> usize {
    let tp: usize;
    // SAFETY: reads the thread pointer register (the thread control block's
    // address); no memory touched.
    unsafe {
        std::arch::asm!(
            "mrs {}, tpidr_el0",
            out(reg) tp,
            options(nomem, nostack, preserves_flags, pure)
        )
    };
    tp
}

/// This thread's mark: non-zero, even, unique among live threads.
#[cfg(all(not(loom), not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
#[inline]
fn this_thread() -> usize {
    thread_local! {
        /// Its address identifies the thread (a `u64`: the address is even).
        static THREAD_MARK: u64 = const { 0 };
    }
    THREAD_MARK.with(|mark| mark as *const u64 as usize)
}

/// Under loom, threads are the model's: a mark handed out per model thread.
#[cfg(loom)]
fn this_thread() -> usize {
    use std::sync::atomic::{AtomicUsize as Next, Ordering as O};
    static NEXT: Next = Next::new(0);
    loom::thread_local! {
        static THREAD_MARK: usize = (NEXT.fetch_add(1, O::Relaxed) + 1) * 8;
    }
    THREAD_MARK.with(|mark| *mark)
}

/// How a [`Held`] was taken, so its drop undoes exactly that.
#[derive(Clone, Copy, PartialEq, Eq)]
enum How {
    /// On the fast path: `fast_inside` holds the owner.
    Fast,
    /// On the slow path, noting the thread in `owner_thread`.
    Full,
    /// On the slow path without noting the thread.
    Brief,
}

/// Proof that the caller holds an [`OwnerWord`]; dropping it gives the word
/// back.
pub struct Held<'a> {
    word: &'a OwnerWord,
    how: How,
}

impl Drop for Held<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        match self.how {
            How::Fast => self.word.fast_inside.store(0, Ordering::Release),
            How::Full => {
                self.word.owner_thread.store(0, Ordering::Relaxed);
                self.word.word.store(0, Ordering::Release);
            }
            How::Brief => self.word.word.store(0, Ordering::Release),
        }
    }
}

/// What the fast path found.
enum Fast {
    /// Inside.
    In,
    /// This thread is inside already.
    Again,
    /// Not biased here, or the bias or word was taken: the slow path.
    No,
}

/// What settling a freshly taken `word` found.
enum Settled {
    Inside,
    /// This thread is inside on the fast path already (its bias revoked
    /// meanwhile); `word` given back.
    Again,
    /// The biased thread stayed inside past the deadline; `word` given back.
    TimedOut,
}

impl OwnerWord {
    /// A free word.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        OwnerWord {
            word: AtomicUsize::new(0),
            owner_thread: AtomicUsize::new(0),
            bias: AtomicUsize::new(0),
            fast_inside: AtomicUsize::new(0),
            streak_thread: AtomicUsize::new(0),
            streak: AtomicUsize::new(0),
            bias_after: AtomicUsize::new(FIRST_BIAS_AFTER),
        }
    }

    /// A free word.
    #[cfg(loom)]
    pub fn new() -> Self {
        OwnerWord::with_first_bias_after(FIRST_BIAS_AFTER)
    }

    /// A free word that grants its first bias after `entries` (at least 1)
    /// entries in a row by one thread instead of `FIRST_BIAS_AFTER`: for
    /// tests and models that must reach a bias in a few steps.
    pub fn with_first_bias_after(entries: usize) -> Self {
        OwnerWord {
            word: AtomicUsize::new(0),
            owner_thread: AtomicUsize::new(0),
            bias: AtomicUsize::new(0),
            fast_inside: AtomicUsize::new(0),
            streak_thread: AtomicUsize::new(0),
            streak: AtomicUsize::new(0),
            bias_after: AtomicUsize::new(entries.max(1)),
        }
    }

    /// True when the calling thread holds the bias (its entries take the
    /// fast path while no other thread comes): for tests and models.
    pub fn biased_to_caller(&self) -> bool {
        self.bias.load(Ordering::Relaxed) == this_thread()
    }

    /// Takes the word for `owner` (non-zero; [`INSPECTOR`] for anything but
    /// a use of the allocator), waiting while another caller holds it.
    /// `other_inside(current)` runs once if a different owner is found
    /// inside (neither being the inspector). `None` when this thread
    /// already holds the word.
    #[inline(always)]
    pub fn enter(&self, owner: usize, other_inside: impl FnOnce(usize)) -> Option<Held<'_>> {
        self.take(owner, other_inside, How::Full)
    }

    /// [`OwnerWord::enter`] for a holder that runs none of the user's code
    /// while it holds the word (a table update, an address record), so it
    /// can never ask for the word again while holding it: on the slow path
    /// the holder's thread is not written, which saves two stores per hold
    /// that the next compare-exchange would wait for. It still waits for
    /// (and reports) other owners; the word it holds is told from a
    /// re-entry by other threads exactly as before (`owner_thread` stays 0,
    /// never theirs). On the fast path both forms are the same.
    #[inline(always)]
    pub fn enter_brief(&self, owner: usize, other_inside: impl FnOnce(usize)) -> Option<Held<'_>> {
        self.take(owner, other_inside, How::Brief)
    }

    #[inline(always)]
    fn take(&self, owner: usize, other_inside: impl FnOnce(usize), how: How) -> Option<Held<'_>> {
        debug_assert_ne!(owner, 0);
        let me = this_thread();
        match self.try_fast(owner, me) {
            Fast::In => {
                return Some(Held {
                    word: self,
                    how: How::Fast,
                })
            }
            Fast::Again => return None,
            Fast::No => {}
        }
        // Not biased here: the compare-exchange, inline while uncontended.
        if self
            .word
            .compare_exchange(0, owner, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            let mut report = Some(other_inside);
            return self.settled(owner, me, &mut report, None, how);
        }
        self.enter_contended(owner, me, other_inside, how, None)
    }

    /// The biased thread's entry: plain stores and a light fence.
    #[inline(always)]
    fn try_fast(&self, owner: usize, me: usize) -> Fast {
        if self.bias.load(Ordering::Relaxed) != me {
            return Fast::No;
        }
        // Only this thread writes `fast_inside` while the bias is its own.
        if self.fast_inside.load(Ordering::Relaxed) != 0 {
            return Fast::Again;
        }
        self.fast_inside.store(owner, Ordering::Relaxed);
        light();
        // Acquire: a slow-path holder that left gave its books' changes
        // with its release of `word`.
        if self.word.load(Ordering::Acquire) == 0 && self.bias.load(Ordering::Relaxed) == me {
            return Fast::In;
        }
        self.fast_inside.store(0, Ordering::Release);
        Fast::No
    }

    /// True when this thread is inside already: a full slow-path hold, or a
    /// fast one whose bias was revoked meanwhile.
    #[inline]
    fn inside_here(&self, me: usize) -> bool {
        self.owner_thread.load(Ordering::Relaxed) == me
            || (self.bias.load(Ordering::Relaxed) & !REVOKED == me
                && self.fast_inside.load(Ordering::Relaxed) != 0)
    }

    #[cold]
    #[inline(never)]
    fn enter_contended(
        &self,
        owner: usize,
        me: usize,
        other_inside: impl FnOnce(usize),
        how: How,
        deadline: Option<Instant>,
    ) -> Option<Held<'_>> {
        if self.inside_here(me) {
            return None;
        }
        let mut report = Some(other_inside);
        let mut spins = 0u32;
        loop {
            let mut current = self.word.load(Ordering::Relaxed);
            if current == 0 {
                match self
                    .word
                    .compare_exchange(0, owner, Ordering::Acquire, Ordering::Relaxed)
                {
                    Ok(_) => return self.settled(owner, me, &mut report, deadline, how),
                    // Taken in between: wait like for any holder (a retry
                    // without backing off could spin on a stale 0).
                    Err(holder) => current = holder,
                }
            }
            if current != owner && current != INSPECTOR && owner != INSPECTOR {
                if let Some(report) = report.take() {
                    report(current);
                }
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return None;
            }
            crate::core::sync::back_off(&mut spins);
        }
    }

    /// Finishes a slow-path entry once `word` is taken: the bias (revoke,
    /// wait the biased thread out, acknowledge, grant) and the holder's
    /// thread.
    #[inline(always)]
    fn settled<F: FnOnce(usize)>(
        &self,
        owner: usize,
        me: usize,
        report: &mut Option<F>,
        deadline: Option<Instant>,
        how: How,
    ) -> Option<Held<'_>> {
        let bias = self.bias.load(Ordering::Relaxed);
        if bias != 0 && bias != me {
            match self.settle_bias(owner, me, bias, report, deadline) {
                Settled::Inside => {}
                Settled::Again | Settled::TimedOut => {
                    self.word.store(0, Ordering::Release);
                    return None;
                }
            }
        }
        self.count_entry(me);
        if how == How::Full {
            self.owner_thread.store(me, Ordering::Relaxed);
        }
        Some(Held { word: self, how })
    }

    /// `bias` is another thread's mark, or this thread's revoked one.
    #[cold]
    #[inline(never)]
    fn settle_bias<F: FnOnce(usize)>(
        &self,
        owner: usize,
        me: usize,
        bias: usize,
        report: &mut Option<F>,
        deadline: Option<Instant>,
    ) -> Settled {
        if bias & !REVOKED == me {
            // This thread's own bias, revoked. If it is inside on the fast
            // path, this is a re-entry; if not, it has now seen the
            // revocation and the bias may move on.
            if self.fast_inside.load(Ordering::Relaxed) != 0 {
                return Settled::Again;
            }
            self.bias.store(0, Ordering::Relaxed);
            return Settled::Inside;
        }
        if bias & REVOKED == 0 {
            self.bias.store(bias | REVOKED, Ordering::Relaxed);
            heavy();
            let after = owned_load(&self.bias_after);
            self.bias_after
                .store((after * 2).min(MOST_BIAS_AFTER), Ordering::Relaxed);
        }
        // Wait the biased thread out (acquire: its books' changes come with
        // its release of `fast_inside`).
        let mut spins = 0u32;
        loop {
            let current = self.fast_inside.load(Ordering::Acquire);
            if current == 0 {
                return Settled::Inside;
            }
            if current != owner && current != INSPECTOR && owner != INSPECTOR {
                if let Some(report) = report.take() {
                    report(current);
                }
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Settled::TimedOut;
            }
            crate::core::sync::back_off(&mut spins);
        }
    }

    /// Counts a slow-path entry by `me` and grants it the bias after enough
    /// in a row, if no other thread's mark is in `bias`.
    #[inline(always)]
    fn count_entry(&self, me: usize) {
        let streak = if owned_load(&self.streak_thread) == me {
            owned_load(&self.streak) + 1
        } else {
            self.streak_thread.store(me, Ordering::Relaxed);
            1
        };
        self.streak.store(streak, Ordering::Relaxed);
        if streak >= owned_load(&self.bias_after) && owned_load(&self.bias) == 0 {
            self.grant(me);
        }
    }

    #[cold]
    #[inline(never)]
    fn grant(&self, me: usize) {
        // The biased thread's light fences are compiler fences only once
        // the barrier has decided (full fences before: correct, dearer).
        barrier_init();
        self.bias.store(me, Ordering::Relaxed);
    }

    /// Takes the word as the inspector, waiting at most `patience`: a report
    /// at exit must not hang on a thread stuck inside a user's allocator
    /// (nor on a biased thread stuck there: the wait for it has the same
    /// deadline). `None` when this thread holds it already or time ran out.
    pub fn enter_with_patience(&self, patience: Duration) -> Option<Held<'_>> {
        let me = this_thread();
        match self.try_fast(INSPECTOR, me) {
            Fast::In => {
                return Some(Held {
                    word: self,
                    how: How::Fast,
                })
            }
            Fast::Again => return None,
            Fast::No => {}
        }
        let deadline = Instant::now() + patience;
        self.enter_contended(INSPECTOR, me, |_| {}, How::Full, Some(deadline))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::atomic::AtomicUsize;

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

    /// A word biased to the calling thread, checked.
    fn biased_word() -> OwnerWord {
        let word = OwnerWord::with_first_bias_after(1);
        drop(word.enter(0x10, |_| unreachable!()).unwrap());
        assert!(word.biased_to_caller());
        word
    }

    /// Holds the word on the fast path, checked.
    fn fast_hold(word: &OwnerWord, owner: usize) -> Held<'_> {
        let held = word.enter(owner, |_| unreachable!()).unwrap();
        assert!(held.how == How::Fast, "taken on the fast path");
        assert_eq!(word.fast_inside.load(Ordering::Relaxed), owner);
        held
    }

    #[test]
    fn the_biased_thread_enters_without_the_lock_and_is_told_reentering() {
        let word = OwnerWord::new();
        for i in 0..FIRST_BIAS_AFTER {
            assert!(!word.biased_to_caller(), "biased after {i} entries");
            drop(word.enter_brief(1, |_| {}).unwrap());
        }
        assert!(word.biased_to_caller());
        let held = fast_hold(&word, 1);
        assert_eq!(word.word.load(Ordering::Relaxed), 0, "the lock untouched");
        assert!(word.enter(1, |_| {}).is_none(), "re-entry");
        assert!(word.enter_brief(2, |_| {}).is_none(), "re-entry, brief");
        assert!(word.enter_with_patience(Duration::from_secs(60)).is_none());
        drop(held);
        assert_eq!(word.fast_inside.load(Ordering::Relaxed), 0);
    }

    /// Two threads hammer a word biased to one of them, over many fresh
    /// words (each race starts with a revocation against the fast path):
    /// a counter changed read-then-write under the word loses nothing.
    #[test]
    fn two_threads_hammering_a_biased_word_lose_no_update() {
        const ROUNDS: usize = 2000;
        const HOLDS: usize = 200;
        let round = AtomicUsize::new(0);
        let done = AtomicUsize::new(0);
        let words: Vec<OwnerWord> = (0..ROUNDS)
            .map(|_| OwnerWord::with_first_bias_after(1))
            .collect();
        let counts: Vec<AtomicUsize> = (0..ROUNDS).map(|_| AtomicUsize::new(0)).collect();
        let hammer = |word: &OwnerWord, count: &AtomicUsize, owner: usize| {
            let mut fast = 0;
            for i in 0..HOLDS {
                let h = if i % 2 == 0 {
                    word.enter(owner, |_| {})
                } else {
                    word.enter_brief(owner, |_| {})
                }
                .unwrap();
                fast += usize::from(h.how == How::Fast);
                let seen = count.load(Ordering::Relaxed);
                if i % 32 == 0 {
                    std::thread::yield_now();
                }
                count.store(seen + 1, Ordering::Relaxed);
                drop(h);
            }
            fast
        };
        let (mut fast, mut revoked) = (0, 0);
        std::thread::scope(|s| {
            s.spawn(|| {
                for r in 0..ROUNDS {
                    while round.load(Ordering::Acquire) <= r {
                        std::thread::yield_now();
                    }
                    hammer(&words[r], &counts[r], 0x20);
                    done.fetch_add(1, Ordering::Release);
                }
            });
            for r in 0..ROUNDS {
                drop(words[r].enter(0x10, |_| {}).unwrap());
                assert!(words[r].biased_to_caller());
                round.store(r + 1, Ordering::Release);
                fast += hammer(&words[r], &counts[r], 0x10);
                while done.load(Ordering::Acquire) <= r {
                    std::thread::yield_now();
                }
                revoked += usize::from(words[r].bias_after.load(Ordering::Relaxed) > 1);
            }
        });
        for (r, c) in counts.iter().enumerate() {
            assert_eq!(c.load(Ordering::Relaxed), 2 * HOLDS, "round {r}");
        }
        // Both sides of the race ran: holds on the fast path, revocations.
        println!("fast holds {fast}, rounds revoked {revoked}");
        assert!(
            fast > 0 && revoked > 0,
            "fast holds {fast}, revoked {revoked}"
        );
    }

    #[test]
    fn a_slow_entry_reports_the_biased_thread_inside_and_waits() {
        let word = biased_word();
        let held = fast_hold(&word, 0x10);
        let seen = AtomicUsize::new(0);
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
            assert_eq!(
                word.bias.load(Ordering::SeqCst),
                this_thread() | REVOKED,
                "revoked"
            );
            drop(held);
        });
        assert!(entered.load(Ordering::SeqCst));
        assert_eq!(seen.load(Ordering::SeqCst), 0x10, "reported once");
        assert!(!word.biased_to_caller());
    }

    #[test]
    fn patience_runs_out_behind_a_biased_holder_and_the_next_entry_still_waits() {
        let word = biased_word();
        let held = fast_hold(&word, 0x10);
        let entered = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let start = Instant::now();
                assert!(word
                    .enter_with_patience(Duration::from_millis(20))
                    .is_none());
                assert!(start.elapsed() >= Duration::from_millis(20));
                // The revoker left without waiting the biased thread out:
                // the next entry must still wait for it.
                let _h = word.enter(0x20, |_| {});
                entered.store(true, Ordering::SeqCst);
            });
            while word.bias.load(Ordering::SeqCst) & REVOKED == 0 {
                std::thread::yield_now();
            }
            std::thread::sleep(Duration::from_millis(100));
            assert!(!entered.load(Ordering::SeqCst), "the next entry waits");
            // Re-entry while the bias is revoked is still refused.
            assert!(word.enter(0x10, |_| {}).is_none());
            assert!(word.enter_brief(0x10, |_| {}).is_none());
            drop(held);
        });
        assert!(entered.load(Ordering::SeqCst));
        assert!(word.enter_with_patience(Duration::from_millis(5)).is_some());
    }

    #[test]
    fn reentry_while_a_revoker_waits_is_refused_not_a_deadlock() {
        let word = biased_word();
        let held = fast_hold(&word, 0x10);
        std::thread::scope(|s| {
            s.spawn(|| drop(word.enter(0x20, |_| {}).unwrap()));
            while word.bias.load(Ordering::SeqCst) & REVOKED == 0 {
                std::thread::yield_now();
            }
            // The revoker holds the lock and waits for this thread.
            assert_ne!(word.word.load(Ordering::SeqCst), 0);
            assert!(word.enter(0x10, |_| {}).is_none());
            assert!(word.enter_brief(0x10, |_| {}).is_none());
            assert!(word.enter_with_patience(Duration::from_secs(60)).is_none());
            drop(held);
        });
    }

    #[test]
    fn the_bias_moves_only_after_its_thread_saw_it_revoked() {
        let word = biased_word();
        let me = this_thread();
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..100 {
                    drop(word.enter(0x20, |_| {}).unwrap());
                }
                assert!(!word.biased_to_caller(), "not while revoked, unseen");
            });
        });
        assert_eq!(word.bias.load(Ordering::SeqCst), me | REVOKED);
        assert_eq!(word.bias_after.load(Ordering::SeqCst), 2, "doubled");
        drop(word.enter(0x10, |_| {}).unwrap()); // sees it
        assert_eq!(word.bias.load(Ordering::SeqCst), 0);
        std::thread::scope(|s| {
            s.spawn(|| {
                drop(word.enter(0x20, |_| {}).unwrap());
                assert!(!word.biased_to_caller(), "one of two in a row");
                drop(word.enter(0x20, |_| {}).unwrap());
                assert!(word.biased_to_caller(), "moved");
                let _fast = fast_hold(&word, 0x20);
            });
        });
    }

    #[test]
    fn revocations_double_the_entries_needed_up_to_the_cap() {
        let word = OwnerWord::with_first_bias_after(1);
        let mut after = 1;
        for _ in 0..25 {
            // This thread takes the bias back (acknowledging, then `after`
            // entries in a row), another thread revokes it.
            for _ in 0..after {
                drop(word.enter(1, |_| {}).unwrap());
            }
            assert!(word.biased_to_caller());
            std::thread::scope(|s| {
                s.spawn(|| drop(word.enter(2, |_| {}).unwrap()));
            });
            after = (after * 2).min(MOST_BIAS_AFTER);
            assert_eq!(word.bias_after.load(Ordering::SeqCst), after);
            drop(word.enter(1, |_| {}).unwrap()); // sees the revocation
        }
        assert_eq!(after, MOST_BIAS_AFTER);
    }
}
