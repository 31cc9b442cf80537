//! Loom model of the owner word's biased ownership ([`OwnerWord`]): every
//! interleaving, up to a preemption bound, of a biased thread's fast path
//! against other threads' slow path, including a revocation, the biased
//! thread seeing it, a re-bias to another thread and a re-entry while a
//! revoker waits.
//!
//! Run (`scripts/loom.sh` runs it with the registration table's model;
//! about ten seconds once built):
//!
//!     RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 \
//!         cargo test --release --test loom_owner_word
//!
//! Mutual exclusion is checked by a `loom::cell::UnsafeCell` counter that
//! every hold increments: loom fails the model on any two accesses not
//! ordered by happens-before (a hold that overlapped another, or one that
//! did not see the previous holder's write), and the final count must be
//! the number of holds.
//!
//! The fences. The word pairs `barrier::light` on the biased thread's side
//! with `barrier::heavy` (`membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`)
//! on the revoker's; loom cannot run a system call, so under `--cfg loom`
//! both are SeqCst fences (`src/core/owner_word.rs`). That is the faithful
//! abstraction because what membarrier guarantees is exactly what the
//! protocol uses: every thread running at the time executes a full barrier
//! at some point between the call's start and its return, so for each
//! light site either its earlier stores are visible to the loads after the
//! heavy call, or the heavy caller's earlier stores are visible to the
//! loads after the light site. SeqCst fences give that same either/or (they
//! are totally ordered). They give one thing more that membarrier does not:
//! order between two light sites. The protocol never relies on it: only
//! one thread's mark is in `bias` at a time, so two fast paths never race
//! each other, and slow paths order among themselves through the
//! compare-exchange of `word`.
#![cfg(loom)]

mod loom_support;

use aclalloc::core::owner_word::{OwnerWord, INSPECTOR};
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;
use std::sync::atomic::{AtomicUsize as Tally, Ordering};

/// The word and a counter only holders touch.
struct Shared {
    word: OwnerWord,
    count: UnsafeCell<usize>,
}

impl Shared {
    fn new(first_bias_after: usize) -> Arc<Self> {
        Arc::new(Shared {
            word: OwnerWord::with_first_bias_after(first_bias_after),
            count: UnsafeCell::new(0),
        })
    }

    /// One hold by `owner`: the counter read, then written (loom flags a
    /// hold that overlaps another). `reported` is what the detector said.
    fn hold(&self, owner: usize, brief: bool) -> Option<usize> {
        let mut reported = None;
        let report = |current: usize| {
            assert!(reported.is_none(), "reported twice in one entry");
            reported = Some(current);
        };
        let held = if brief {
            self.word.enter_brief(owner, report)
        } else {
            self.word.enter(owner, report)
        };
        let held = held.expect("no thread re-enters here");
        // SAFETY: loom checks the claim under test: no other access overlaps.
        self.count.with_mut(|c| unsafe { *c += 1 });
        drop(held);
        if let Some(current) = reported {
            assert_ne!(current, owner, "only another owner is reported");
            assert_ne!(current, INSPECTOR, "the inspector is never reported");
        }
        reported
    }

    fn count(&self) -> usize {
        // SAFETY: every thread has been joined.
        self.count.with(|c| unsafe { *c })
    }
}

/// Checks `f` under every interleaving with at most `most_preemptions`
/// preemptions (fewer if LOOM_MAX_PREEMPTIONS says so) and prints how many
/// it explored (a model that explores one has no concurrency).
fn model(name: &str, most_preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    // Builder::new reads LOOM_MAX_PREEMPTIONS; without it, stay bounded.
    builder.preemption_bound = Some(
        builder
            .preemption_bound
            .unwrap_or(most_preemptions)
            .min(most_preemptions),
    );
    // Spin loops (a slow path waiting for the word or for the biased
    // thread) take a branch per round while they wait.
    builder.max_branches = 10_000;
    loom_support::check(name, builder, f);
}

/// The main thread holds the bias and enters on the fast path while another
/// thread's slow path revokes it: the two holds exclude each other whoever
/// wins, and the detector names only the other owner.
#[test]
fn revocation_against_the_fast_path() {
    static FAST_SEEN: Tally = Tally::new(0);
    model("revocation_against_the_fast_path", 3, || {
        let s = Shared::new(1);
        s.hold(0x10, false);
        assert!(s.word.biased_to_caller(), "one entry grants the bias");
        let other = {
            let s = s.clone();
            thread::spawn(move || {
                s.hold(0x20, true);
            })
        };
        if s.word.biased_to_caller() {
            FAST_SEEN.fetch_add(1, Ordering::Relaxed);
        }
        s.hold(0x10, false);
        other.join().unwrap();
        assert_eq!(s.count(), 3);
    });
    assert!(
        FAST_SEEN.load(Ordering::Relaxed) > 0,
        "the model never raced a biased fast path"
    );
}

/// The bias revoked, seen by its thread, and granted to the other thread
/// (which then enters on the fast path), with the first thread coming back:
/// a second revocation. Three holds each.
#[test]
fn rebias_to_another_thread_and_back() {
    static REBIASED: Tally = Tally::new(0);
    model("rebias_to_another_thread_and_back", 3, || {
        let s = Shared::new(1);
        s.hold(0x10, false);
        let other = {
            let s = s.clone();
            thread::spawn(move || {
                let mut biased = false;
                for _ in 0..3 {
                    s.hold(0x20, false);
                    biased |= s.word.biased_to_caller();
                }
                if biased {
                    REBIASED.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        s.hold(0x10, true);
        s.hold(0x10, false);
        other.join().unwrap();
        assert_eq!(s.count(), 6);
    });
    assert!(
        REBIASED.load(Ordering::Relaxed) > 0,
        "the model never moved the bias to the other thread"
    );
}

/// Three threads: the biased one on the fast path, two others on the slow
/// path (one of them an inspector, which never counts as a second owner).
///
/// One preemption at most: with two, loom reaches schedules in which two
/// threads spin waiting for the third and its scheduler only alternates
/// between the two spinners (loom issue #53, "With two threads blocked on
/// a third one, the scheduler oscillates between the two blocked
/// threads"), which it reports as exceeding its branch limit. The
/// two-thread models above run with up to three.
#[test]
fn three_threads() {
    model("three_threads", 1, || {
        let s = Shared::new(1);
        s.hold(0x10, false);
        let threads: Vec<_> = [0x20, INSPECTOR]
            .into_iter()
            .map(|owner| {
                let s = s.clone();
                thread::spawn(move || {
                    s.hold(owner, owner == INSPECTOR);
                })
            })
            .collect();
        s.hold(0x10, true);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(s.count(), 4);
    });
}

/// The biased thread, inside on the fast path, asks again while another
/// thread revokes its bias and waits for it: `None`, not a deadlock (the
/// revoker waits for it, and it would wait for the revoker).
#[test]
fn reentry_while_a_revoker_waits() {
    model("reentry_while_a_revoker_waits", 3, || {
        let s = Shared::new(1);
        s.hold(0x10, false);
        let other = {
            let s = s.clone();
            thread::spawn(move || {
                s.hold(0x20, false);
            })
        };
        {
            let held = s.word.enter(0x10, |_| {});
            // Whether the fast path or the slow one let it in, a second
            // entry on this thread is refused.
            if let Some(held) = held {
                assert!(s.word.enter(0x10, |_| {}).is_none(), "re-entry refused");
                assert!(s.word.enter_brief(0x10, |_| {}).is_none());
                // SAFETY: checked by loom, as in `hold`.
                s.count.with_mut(|c| unsafe { *c += 1 });
                drop(held);
            } else {
                panic!("the first entry is not a re-entry");
            }
        }
        other.join().unwrap();
        assert_eq!(s.count(), 3);
    });
}
