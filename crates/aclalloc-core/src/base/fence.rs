//! An asymmetric fence for Dekker pairs whose one side runs on every call
//! and whose other side is rare: the owner of a pool's thread cache against
//! a slow path that stops it (`aclalloc-pool`'s `thread_cache`), and a call
//! into a pluggable allocator against a destroy waiting for the calls
//! inside (`aclalloc-plugin`'s `inside`). Each side stores its flag, fences,
//! then loads the other's. The frequent side takes a compiler fence
//! ([`light`]); the rare side `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`
//! ([`heavy`]), which makes every running thread of the process pass a full
//! fence. Where the kernel refuses membarrier, both sides take a full fence.
//! No lock is taken, so a forked child can use both sides.

use crate::base::sync::statics::AtomicU8;

use crate::base::sync::{compiler_fence, fence, Ordering};

/// [`UNDECIDED`] until [`init`]; then whether membarrier is registered.
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
/// process is (now) registered for it; registering again is harmless.
fn register() -> bool {
    let needed = MEMBARRIER_CMD_PRIVATE_EXPEDITED | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED;
    let supported = membarrier(MEMBARRIER_CMD_QUERY);
    supported >= 0
        && supported & needed == needed
        && membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0
}

/// Decides once per process whether [`heavy`] can use membarrier; until
/// then [`light`] is a full fence (always correct).
pub fn init() {
    if MODE.load(Ordering::Acquire) == UNDECIDED {
        let mode = if register() { ASYMMETRIC } else { SYMMETRIC };
        let _ = MODE.compare_exchange(UNDECIDED, mode, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// The frequent side.
#[inline]
pub fn light() {
    if MODE.load(Ordering::Relaxed) == ASYMMETRIC {
        compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
}

/// The rare side. If membarrier fails (a child whose kernel dropped the
/// registration) it registers again; failing that it aborts, since the light
/// sides took compiler fences only.
pub fn heavy() {
    init();
    if MODE.load(Ordering::Acquire) != ASYMMETRIC {
        fence(Ordering::SeqCst);
    } else if membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0
        && !(register() && membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
    {
        refused();
    }
}

#[cold]
#[inline(never)]
fn refused() -> ! {
    const LINE: &[u8] = b"aclalloc: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) failed after this process registered for it: the pool's thread caches cannot be stopped, nor the calls inside a pluggable allocator waited for, safely. Aborting the process\n";
    // SAFETY: writes a static buffer to stderr.
    unsafe { libc::write(2, LINE.as_ptr().cast(), LINE.len()) };
    std::process::abort();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::sync::statics::AtomicUsize;

    #[test]
    fn init_decides_once_and_prefers_membarrier() {
        init();
        let mode = MODE.load(Ordering::SeqCst);
        assert!(mode == ASYMMETRIC || mode == SYMMETRIC, "mode {mode}");
        init();
        assert_eq!(MODE.load(Ordering::SeqCst), mode, "decided once");
        if membarrier(MEMBARRIER_CMD_QUERY) & MEMBARRIER_CMD_PRIVATE_EXPEDITED != 0 {
            assert_eq!(mode, ASYMMETRIC);
        }
    }

    /// Each side stores its round, fences, then reads the other's: in no
    /// round may both miss the other.
    #[test]
    fn a_light_and_a_heavy_side_never_both_miss_each_other() {
        init();
        const ROUNDS: usize = 2_000;
        let (light_flag, heavy_flag) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let (go, done, light_saw) = (
            AtomicUsize::new(0),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
        );
        std::thread::scope(|s| {
            s.spawn(|| {
                for round in 1..=ROUNDS {
                    while go.load(Ordering::Acquire) < round {
                        std::hint::spin_loop();
                    }
                    light_flag.store(round, Ordering::Relaxed);
                    light();
                    light_saw.store(heavy_flag.load(Ordering::Relaxed), Ordering::Relaxed);
                    done.store(round, Ordering::Release);
                }
            });
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
                    "round {round}: heavy saw {heavy_saw}, light saw {light_saw}"
                );
            }
        });
    }
}
