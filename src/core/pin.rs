//! Per-thread pins: "this thread is using object N", set and cleared with
//! plain stores, so that a hot path can use an object found in a lock-free
//! table without a reference count, and whoever retires the object can wait
//! until no thread still uses it.
//!
//! The two sides form a Dekker pair: the user stores its pin, then looks the
//! object up; the retirer removes the object from the table, then reads every
//! pin. Each side needs a full fence between its store and its load. The
//! retirer is rare (destroying an allocator) and the user is every call, so
//! the fence is asymmetric: the user side is a compiler fence only, and the
//! retirer issues `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, which runs
//! a full fence on every core running a thread of this process (the scheme
//! of Linux's RCU and of folly's `asymmetricThreadFenceHeavy`). Where the
//! kernel refuses membarrier (old kernels, seccomp), both sides use a full
//! fence: correct, a few nanoseconds dearer per call.

use std::cell::Cell;
use std::sync::atomic::{compiler_fence, fence, AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

/// One thread's pin; leaked, reused by a later thread once its owner exits.
struct PinSlot {
    value: AtomicUsize,
    taken: AtomicBool,
}

/// Every slot ever made (grows to the most threads that pinned at once).
static SLOTS: Mutex<Vec<&'static PinSlot>> = Mutex::new(Vec::new());

/// 0 not decided, 1 membarrier registered (asymmetric), 2 full fences.
static MODE: AtomicU8 = AtomicU8::new(0);
const ASYMMETRIC: u8 = 1;
const SYMMETRIC: u8 = 2;

const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

/// Gives the slot back when the thread exits.
struct Owned(&'static PinSlot);

impl Drop for Owned {
    fn drop(&mut self) {
        // A later thread-local destructor that pins finds no slot (and gets
        // a fresh one or none) rather than this one, which another thread
        // may take from now on.
        let _ = MINE.try_with(|m| m.set(None));
        self.0.value.store(0, Ordering::Release);
        self.0.taken.store(false, Ordering::Release);
    }
}

thread_local! {
    static MINE: Cell<Option<&'static PinSlot>> = const { Cell::new(None) };
    static OWNED: Cell<Option<Owned>> = const { Cell::new(None) };
}

fn decide_mode() -> u8 {
    let mode = MODE.load(Ordering::Acquire);
    if mode != 0 {
        return mode;
    }
    // SAFETY: the membarrier system call takes two integers; registering is
    // harmless if it was done already.
    let registered = unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
            0,
        )
    } == 0;
    let mode = if registered { ASYMMETRIC } else { SYMMETRIC };
    // A racing thread decides the same; the first store wins either way.
    let _ = MODE.compare_exchange(0, mode, Ordering::AcqRel, Ordering::Acquire);
    MODE.load(Ordering::Acquire)
}

#[cold]
#[inline(never)]
fn my_slot_slow() -> Option<&'static PinSlot> {
    decide_mode();
    let mut slots = SLOTS.lock().unwrap_or_else(|p| p.into_inner());
    let slot = match slots.iter().find(|s| {
        s.taken
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }) {
        Some(&s) => s,
        None => {
            let s: &'static PinSlot = Box::leak(Box::new(PinSlot {
                value: AtomicUsize::new(0),
                taken: AtomicBool::new(true),
            }));
            slots.push(s);
            s
        }
    };
    drop(slots);
    // A thread being torn down has no thread-locals left: it gets no slot,
    // and the caller falls back to not pinning (see `pinned`).
    OWNED.try_with(|o| o.set(Some(Owned(slot)))).ok()?;
    MINE.try_with(|m| m.set(Some(slot))).ok()?;
    Some(slot)
}

#[inline(always)]
fn my_slot() -> Option<&'static PinSlot> {
    match MINE.try_with(Cell::get) {
        Ok(Some(slot)) => Some(slot),
        Ok(None) => my_slot_slow(),
        Err(_) => None,
    }
}

/// Runs `f` with this thread's pin set to `value` (non-zero): a
/// [`wait_unpinned`]`(value)` that starts after `f` has looked up its object
/// waits for `f` to return. A thread that has no pin (it is being torn
/// down) runs `unpinned` instead, which must not use retirable objects.
#[inline(always)]
pub fn pinned_or<R>(value: usize, f: impl FnOnce() -> R, unpinned: impl FnOnce() -> R) -> R {
    struct Restore(&'static PinSlot, usize);
    impl Drop for Restore {
        #[inline(always)]
        fn drop(&mut self) {
            self.0.value.store(self.1, Ordering::Release);
        }
    }
    let Some(slot) = my_slot() else {
        return unpinned();
    };
    let _restore = Restore(slot, slot.value.load(Ordering::Relaxed));
    slot.value.store(value, Ordering::Relaxed);
    if MODE.load(Ordering::Relaxed) == ASYMMETRIC {
        compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
    f()
}

/// [`pinned_or`] with `None` for a thread that has no pin.
#[inline(always)]
pub fn pinned<R>(value: usize, f: impl FnOnce() -> R) -> Option<R> {
    pinned_or(value, || Some(f()), || None)
}

/// True when the calling thread is inside [`pinned`]`(value, ..)` (its
/// innermost pin): waiting for `value` from here would wait for itself.
pub fn held_here(value: usize) -> bool {
    MINE.try_with(Cell::get)
        .ok()
        .flatten()
        .is_some_and(|slot| slot.value.load(Ordering::Relaxed) == value)
}

/// Waits until no thread is inside a [`pinned`]`(value, ..)` that may have
/// seen the object before the caller made it unreachable. Call it after
/// removing the object from every table the pinned code looks in.
pub fn wait_unpinned(value: usize) {
    let heavy = decide_mode() == ASYMMETRIC
        // SAFETY: the membarrier system call takes two integers.
        && unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) } == 0;
    if !heavy {
        // Full fences on both sides (the users took them: membarrier was
        // refused at registration). A registered process's membarrier does
        // not fail; if it ever did, users switch to full fences from now on
        // and this waits a scheduling period for pins set under the old mode.
        if MODE.swap(SYMMETRIC, Ordering::AcqRel) == ASYMMETRIC {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        fence(Ordering::SeqCst);
    }
    let slots: Vec<&'static PinSlot> = SLOTS.lock().unwrap_or_else(|p| p.into_inner()).clone();
    for slot in slots {
        let mut spins = 0u32;
        while slot.value.load(Ordering::Acquire) == value {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize as Counter;
    use std::sync::Arc;

    #[test]
    fn retiring_waits_for_the_pinned_user() {
        let entered = Arc::new(Counter::new(0));
        let release = Arc::new(AtomicBool::new(false));
        let user = {
            let (entered, release) = (entered.clone(), release.clone());
            std::thread::spawn(move || {
                pinned(0xACA6_0001, || {
                    entered.store(1, Ordering::SeqCst);
                    while !release.load(Ordering::SeqCst) {
                        std::thread::yield_now();
                    }
                })
                .unwrap()
            })
        };
        while entered.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        let done = Arc::new(AtomicBool::new(false));
        let retirer = {
            let done = done.clone();
            std::thread::spawn(move || {
                wait_unpinned(0xACA6_0001);
                done.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!done.load(Ordering::SeqCst), "it waits while pinned");
        release.store(true, Ordering::SeqCst);
        user.join().unwrap();
        retirer.join().unwrap();
        assert!(done.load(Ordering::SeqCst));
        wait_unpinned(0xACA6_0002); // nothing pinned: returns at once
    }

    #[test]
    fn nested_pins_restore_the_outer_one() {
        pinned(7, || {
            pinned(8, || {}).unwrap();
            let slot = my_slot().unwrap();
            assert_eq!(slot.value.load(Ordering::SeqCst), 7);
        })
        .unwrap();
        assert_eq!(my_slot().unwrap().value.load(Ordering::SeqCst), 0);
    }
}
