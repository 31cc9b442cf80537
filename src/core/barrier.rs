//! An asymmetric fence: a compiler fence on the hot side ([`light`]) and
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` on the rare side
//! ([`heavy`]), which runs a full fence on every core that runs a thread of
//! this process (the scheme of Linux's RCU and of folly's
//! `asymmetricThreadFenceHeavy`).
//!
//! It is for Dekker pairs where one side is every call and the other is
//! rare: each side stores, then loads what the other side stored, and needs
//! a full fence between the two. With `light` on the frequent side and
//! `heavy` on the rare one, either the heavy side sees the light side's
//! store, or the light side sees the heavy side's.
//!
//! Where the kernel refuses membarrier (old kernels, seccomp filters), both
//! sides take a full fence: correct, a few nanoseconds dearer per light
//! call. Before [`init`] has decided, `light` takes the full fence too.
//!
//! Fork: the registration belongs to the process, and no lock is taken
//! anywhere here, so a child can use both sides (a child whose heavy call is
//! refused registers again; see [`heavy`]).

use std::sync::atomic::{compiler_fence, fence, AtomicU8, Ordering};

/// 0 not decided, [`ASYMMETRIC`] membarrier registered, [`SYMMETRIC`] full
/// fences on both sides.
static MODE: AtomicU8 = AtomicU8::new(UNDECIDED);
const UNDECIDED: u8 = 0;
const ASYMMETRIC: u8 = 1;
const SYMMETRIC: u8 = 2;

const MEMBARRIER_CMD_QUERY: libc::c_long = 0;
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

fn membarrier(command: libc::c_long) -> libc::c_long {
    // SAFETY: the membarrier system call takes a command and flags (0); it
    // touches no memory of ours.
    unsafe { libc::syscall(libc::SYS_membarrier, command, 0) }
}

/// True when the kernel offers private expedited membarrier and this
/// process is registered for it.
fn register() -> bool {
    let supported = membarrier(MEMBARRIER_CMD_QUERY);
    let needed = MEMBARRIER_CMD_PRIVATE_EXPEDITED | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED;
    // Registering again is harmless (the kernel keeps one flag per process).
    supported >= 0
        && supported & needed == needed
        && membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0
}

/// Decides, once per process, whether [`heavy`] can use membarrier. Call it
/// before the first [`light`] that must be cheap (a light fence before it is
/// a full fence, which is always correct). Cheap after the first call.
pub(crate) fn init() {
    if MODE.load(Ordering::Acquire) != UNDECIDED {
        return;
    }
    let mode = if register() { ASYMMETRIC } else { SYMMETRIC };
    // Racing threads decide the same; the first store wins either way.
    let _ = MODE.compare_exchange(UNDECIDED, mode, Ordering::AcqRel, Ordering::Acquire);
}

/// The frequent side: a compiler fence once membarrier is registered, a full
/// fence otherwise.
#[inline(always)]
pub(crate) fn light() {
    if MODE.load(Ordering::Relaxed) == ASYMMETRIC {
        compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
}

/// The rare side: a full fence on every core running a thread of this
/// process (and on this one).
///
/// A registered process's membarrier does not fail; should it ever (a forked
/// child whose kernel does not carry the registration over), it registers
/// again and retries, and if that fails too the process is aborted with a
/// message: the light sides took compiler fences only, so going on could let
/// a retirer free what a user still reads.
pub(crate) fn heavy() {
    init();
    if MODE.load(Ordering::Acquire) != ASYMMETRIC {
        fence(Ordering::SeqCst);
        return;
    }
    if membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0 {
        return;
    }
    if register() && membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0 {
        return;
    }
    refused();
}

#[cold]
#[inline(never)]
fn refused() -> ! {
    const LINE: &[u8] = b"aclalloc: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) failed after this process registered for it (the kernel accepted the registration, then refused the barrier): aclalloc cannot tell when a destroyed allocator is no longer in use. Aborting the process\n";
    // SAFETY: writes a static buffer to stderr.
    unsafe { libc::write(2, LINE.as_ptr().cast(), LINE.len()) };
    std::process::abort();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    use std::sync::Arc;

    #[test]
    fn init_decides_once_and_both_sides_run() {
        init();
        let mode = MODE.load(Ordering::SeqCst);
        assert!(mode == ASYMMETRIC || mode == SYMMETRIC, "mode {mode}");
        init();
        assert_eq!(MODE.load(Ordering::SeqCst), mode, "decided once");
        // Where the kernel offers it, the asymmetric mode is the one chosen.
        if membarrier(MEMBARRIER_CMD_QUERY) & MEMBARRIER_CMD_PRIVATE_EXPEDITED != 0 {
            assert_eq!(mode, ASYMMETRIC);
        }
        light();
        heavy(); // returns (an abort would end the test binary)
    }

    /// The Dekker pair the fences exist for: each side stores its flag,
    /// fences, then reads the other's. With correct fences, both sides
    /// never read 0 in the same round.
    #[test]
    fn a_light_and_a_heavy_side_never_both_miss_each_other() {
        init();
        const ROUNDS: usize = 2_000;
        let light_flag = Arc::new(AtomicUsize::new(0));
        let heavy_flag = Arc::new(AtomicUsize::new(0));
        let light_saw = Arc::new(AtomicUsize::new(usize::MAX));
        let go = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let user = {
            let (lf, hf, saw, go, done, stop) = (
                light_flag.clone(),
                heavy_flag.clone(),
                light_saw.clone(),
                go.clone(),
                done.clone(),
                stop.clone(),
            );
            std::thread::spawn(move || {
                for round in 1..=ROUNDS {
                    while go.load(Ordering::Acquire) < round {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        std::hint::spin_loop();
                    }
                    lf.store(round, Ordering::Relaxed);
                    light();
                    saw.store(hf.load(Ordering::Relaxed), Ordering::Relaxed);
                    done.store(round, Ordering::Release);
                }
            })
        };
        for round in 1..=ROUNDS {
            go.store(round, Ordering::Release);
            heavy_flag.store(round, Ordering::Relaxed);
            heavy();
            let heavy_saw = light_flag.load(Ordering::Relaxed);
            while done.load(Ordering::Acquire) < round {
                std::hint::spin_loop();
            }
            let light_saw = light_saw.load(Ordering::Relaxed);
            assert!(
                heavy_saw == round || light_saw == round,
                "round {round}: neither side saw the other (heavy saw {heavy_saw}, light saw {light_saw})"
            );
        }
        stop.store(true, Ordering::Relaxed);
        user.join().unwrap();
    }
}
