//! Per-thread pins: "this thread is using object N", set and cleared with
//! plain stores, so that a hot path can use an object found in a lock-free
//! table without a reference count, and whoever retires the object can wait
//! until no thread still uses it.
//!
//! The two sides form a Dekker pair: the user stores its pin, then looks the
//! object up; the retirer removes the object from the table, then reads every
//! pin. Each side needs a full fence between its store and its load. The
//! retirer is rare (destroying an allocator) and the user is every call, so
//! the fence is asymmetric (`core::barrier`): a compiler fence on the
//! user's side, `membarrier` on the retirer's.
//!
//! Fork safety: the slots are a lock-free list of leaked slots, claimed with
//! a compare-exchange, so no lock can be left held in a child by a thread
//! that was registering at the moment of `fork()` (a `Mutex` here once could:
//! the child's first pin then waited forever). A child inherits the slots of
//! the parent's threads as they were; the pins of threads that do not exist
//! in the child are never released (their thread-local destructors never
//! run), so a child must not retire an object one of those threads had
//! pinned at the moment of `fork()` (docs/HARDENING.md, "fork()").

use super::barrier;
use std::cell::Cell;
use std::ptr;
use std::sync::atomic::{compiler_fence, fence, AtomicBool, AtomicPtr, AtomicUsize, Ordering};

/// One thread's pin; leaked, reused by a later thread once its owner exits.
struct PinSlot {
    value: AtomicUsize,
    taken: AtomicBool,
    /// `barrier::light` is a compiler fence in this process (set by the
    /// owner when it claims the slot, after `barrier::init` decided; the
    /// decision never changes): kept beside `value`, which [`enter`] reads
    /// anyway, instead of a load of the barrier's mode through the GOT.
    light_is_compiler_fence: AtomicBool,
    /// The slot made before this one (set once, before the slot is
    /// published).
    next: *const PinSlot,
}

// SAFETY: `next` is written before the slot is published and never again,
// and points to another leaked (immortal) slot.
unsafe impl Sync for PinSlot {}

/// The newest slot; every slot ever made is reachable from it through
/// `next` (grows to the most threads that pinned at once). Only ever pushed
/// to: slots are never removed, so a reader needs no lock and no epoch.
static SLOTS: AtomicPtr<PinSlot> = AtomicPtr::new(ptr::null_mut());

/// Every slot ever made, newest first.
fn slots() -> impl Iterator<Item = &'static PinSlot> {
    let mut at = SLOTS.load(Ordering::Acquire).cast_const();
    std::iter::from_fn(move || {
        // SAFETY: slots are leaked, never freed; `next` was set before the
        // slot was published with a release store.
        let slot: &'static PinSlot = unsafe { at.as_ref()? };
        at = slot.next;
        Some(slot)
    })
}

/// A free slot, claimed, or a new one, pushed. Call after `barrier::init`.
fn claim() -> &'static PinSlot {
    #[cfg(test)]
    tests::registering();
    let compiler_fence_only = barrier::is_asymmetric();
    if let Some(slot) = slots().find(|s| {
        !s.taken.load(Ordering::Relaxed)
            && s.taken
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }) {
        slot.light_is_compiler_fence
            .store(compiler_fence_only, Ordering::Relaxed);
        return slot;
    }
    let slot: &'static mut PinSlot = Box::leak(Box::new(PinSlot {
        value: AtomicUsize::new(0),
        taken: AtomicBool::new(true),
        light_is_compiler_fence: AtomicBool::new(compiler_fence_only),
        next: ptr::null(),
    }));
    let mut head = SLOTS.load(Ordering::Acquire);
    loop {
        slot.next = head;
        match SLOTS.compare_exchange_weak(
            head,
            slot as *mut PinSlot,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => return slot,
            Err(now) => head = now,
        }
    }
}

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

#[cold]
#[inline(never)]
fn my_slot_slow() -> Option<&'static PinSlot> {
    barrier::init();
    // A thread being torn down has no thread-locals left: it gets no slot,
    // and the caller falls back to not pinning (see `pinned`). Checked
    // before claiming, so that such a thread does not take a slot it could
    // never give back.
    OWNED.try_with(|_| ()).ok()?;
    let slot = claim();
    if OWNED.try_with(|o| o.set(Some(Owned(slot)))).is_err() {
        slot.taken.store(false, Ordering::Release);
        return None;
    }
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

/// This thread's pin, set to a value until dropped (then the value it had
/// before comes back: pins nest). See [`enter`].
#[must_use = "the pin is cleared when this is dropped"]
pub struct Pin {
    slot: &'static PinSlot,
    outer: usize,
}

impl Drop for Pin {
    #[inline(always)]
    fn drop(&mut self) {
        self.slot.value.store(self.outer, Ordering::Release);
    }
}

/// Sets this thread's pin to `value` (non-zero) until the returned [`Pin`]
/// drops: a [`wait_unpinned`]`(value)` that starts after the caller has
/// looked up its object waits for the drop. `None` for a thread that has no
/// pin (it is being torn down), which must then not use retirable objects.
///
/// The hot path: one thread-local load (this thread's slot), two loads and
/// one store of the slot, the light half of the fence (a compiler fence
/// once membarrier is registered, as the slot says; a full fence where the
/// kernel refused it).
#[inline(always)]
pub fn enter(value: usize) -> Option<Pin> {
    Some(enter_slot(my_slot()?, value))
}

/// [`enter`] for a thread that has its slot already (every call after its
/// first pin): `None`, having set nothing, for one that has not, without
/// claiming a slot. For a hot path that must make no call (nothing in it
/// may unwind): its slow path calls [`enter`], which claims the slot.
#[inline(always)]
pub fn enter_claimed(value: usize) -> Option<Pin> {
    let slot = MINE.try_with(Cell::get).ok().flatten()?;
    Some(enter_slot(slot, value))
}

#[inline(always)]
fn enter_slot(slot: &'static PinSlot, value: usize) -> Pin {
    let outer = slot.value.load(Ordering::Relaxed);
    slot.value.store(value, Ordering::Relaxed);
    if !slot.light_is_compiler_fence.load(Ordering::Relaxed) {
        // Out of line, so that the usual case falls through (no taken jump
        // over the fence on every pin).
        full_fence();
    }
    compiler_fence(Ordering::SeqCst);
    Pin { slot, outer }
}

/// The full fence of a process whose kernel refused membarrier. `extern
/// "C"`: a call that cannot unwind, so it adds no landing pad to the hot
/// paths that pin.
#[cold]
#[inline(never)]
extern "C" fn full_fence() {
    fence(Ordering::SeqCst);
}

/// Runs `f` with this thread's pin set to `value` (non-zero), as [`enter`];
/// a thread that has no pin runs `unpinned` instead.
#[inline(always)]
pub fn pinned_or<R>(value: usize, f: impl FnOnce() -> R, unpinned: impl FnOnce() -> R) -> R {
    match enter(value) {
        Some(_pin) => f(),
        None => unpinned(),
    }
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
    barrier::heavy();
    for slot in slots() {
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

    /// While armed, a thread that starts registering (`claim`) says so and
    /// stays there until disarmed: a fork can then happen mid-registration.
    static PAUSE_REGISTERING: AtomicBool = AtomicBool::new(false);
    static REGISTERING: AtomicBool = AtomicBool::new(false);

    pub(super) fn registering() {
        if PAUSE_REGISTERING.load(Ordering::SeqCst) {
            REGISTERING.store(true, Ordering::SeqCst);
            while PAUSE_REGISTERING.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
        }
    }

    /// Forks from a fresh thread (one that never pinned); the child pins
    /// (its first pin registers), retires and must exit 0 within a 10 s
    /// alarm (a hang is killed by SIGALRM). Returns the child's status.
    fn fork_a_child_that_pins() -> i32 {
        std::thread::spawn(|| {
            // SAFETY: the child only pins, retires and _exits (no lock of
            // the test harness; a slot allocation at most).
            match unsafe { libc::fork() } {
                0 => {
                    PAUSE_REGISTERING.store(false, Ordering::SeqCst);
                    // SAFETY: alarm and _exit are async-signal-safe.
                    unsafe { libc::alarm(10) };
                    let ok = pinned(0xACA6_0F01, || held_here(0xACA6_0F01)) == Some(true);
                    wait_unpinned(0xACA6_0F01);
                    // SAFETY: the forked child ends here without running the parent's atexit
                    // handlers; `_exit` is async-signal-safe.
                    unsafe { libc::_exit(if ok { 0 } else { 3 }) }
                }
                pid => {
                    assert!(pid > 0, "fork failed");
                    let mut status = 0;
                    // SAFETY: waits for our own child.
                    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
                    status
                }
            }
        })
        .join()
        .unwrap()
    }

    fn assert_exited_0(status: i32, what: &str) {
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "{what}: the child did not exit 0 (status {status:#x}; signal {} is the alarm: it hung)",
            if libc::WIFSIGNALED(status) {
                libc::WTERMSIG(status)
            } else {
                0
            }
        );
    }

    /// fork() while another thread is registering its first pin: the
    /// child's first pin must not wait for a thread that does not exist in
    /// it. First with a thread held in the middle of registering, then
    /// while two threads keep starting threads that pin once.
    #[test]
    fn a_child_forked_while_threads_register_can_pin() {
        PAUSE_REGISTERING.store(true, Ordering::SeqCst);
        let registering = std::thread::spawn(|| pinned(0xACA6_0F00, || ()).unwrap());
        while !REGISTERING.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        let status = fork_a_child_that_pins();
        PAUSE_REGISTERING.store(false, Ordering::SeqCst);
        registering.join().unwrap();
        assert_exited_0(status, "forked mid-registration");

        let stop = Arc::new(AtomicBool::new(false));
        let churners: Vec<_> = (0..2)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::spawn(|| pinned(0xACA6_0F00, || ()).unwrap())
                            .join()
                            .unwrap();
                    }
                })
            })
            .collect();
        for round in 0..50 {
            assert_exited_0(fork_a_child_that_pins(), &format!("round {round}"));
        }
        stop.store(true, Ordering::SeqCst);
        for c in churners {
            c.join().unwrap();
        }
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
