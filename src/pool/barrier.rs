//! An asymmetric fence for the thread caches (`src/pool/thread_cache.rs`):
//! the owner's fast path, which runs on every allocation and free, pays only
//! a compiler barrier ([`light`]); the rare slow path that must exclude it
//! pays a `membarrier(2)` system call ([`heavy`]), which makes every running
//! thread of the process execute a full memory barrier. Together they order
//! "store my flag, then load yours" on both sides, as two full fences would
//! (Dekker's protocol; folly's `asymmetricLightBarrier` /
//! `asymmetricHeavyBarrier` are the same pair). Where the kernel lacks the
//! expedited private command, both sides use a full fence.

use std::sync::atomic::{compiler_fence, fence, AtomicU8, Ordering};

const UNKNOWN: u8 = 0;
const EXPEDITED: u8 = 1;
const FENCES: u8 = 2;

static MODE: AtomicU8 = AtomicU8::new(UNKNOWN);

/// Registers the process for expedited private membarriers (once). Called
/// when a pool is made, before any cache of it exists, so both sides see the
/// same mode from the first fast path on.
pub(crate) fn init() {
    if MODE.load(Ordering::Acquire) != UNKNOWN {
        return;
    }
    MODE.store(
        if register() { EXPEDITED } else { FENCES },
        Ordering::Release,
    );
}

#[cfg(target_os = "linux")]
fn register() -> bool {
    const MEMBARRIER_CMD_QUERY: libc::c_long = 0;
    const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;
    // SAFETY: membarrier takes integer arguments and touches no memory of
    // ours.
    unsafe {
        let supported = libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
        supported >= 0
            && supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED != 0
            && libc::syscall(
                libc::SYS_membarrier,
                MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
                0,
                0,
            ) == 0
    }
}

#[cfg(not(target_os = "linux"))]
fn register() -> bool {
    false
}

/// The fast side: between the owner's flag store and its load of the
/// other side's flag.
#[inline(always)]
pub(crate) fn light() {
    if MODE.load(Ordering::Relaxed) == EXPEDITED {
        compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
}

/// The slow side: between its flag store and its loads of the owners'
/// flags.
pub(crate) fn heavy() {
    fence(Ordering::SeqCst);
    if MODE.load(Ordering::Relaxed) == EXPEDITED {
        heavy_syscall();
    }
}

#[cfg(target_os = "linux")]
fn heavy_syscall() {
    const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    // SAFETY: as in `register`. It cannot fail once registered; if it did,
    // the owners' compiler barriers would not be enough, so abort rather
    // than run on unsynchronised state.
    let r = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) };
    if r != 0 {
        std::process::abort();
    }
}

#[cfg(not(target_os = "linux"))]
fn heavy_syscall() {}
