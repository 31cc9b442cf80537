//! Timestamps for block records and events.
//!
//! A block's time only serves the age a leak report shows (in milliseconds
//! in the text report, in nanoseconds in the JSON snapshot), read from the
//! coarse monotonic clock, whose resolution is one kernel tick (1 to 10 ms;
//! 4 ms on a common `HZ=250` kernel). Reading that clock is a call through
//! libc into the vDSO, about 3 ns per tracked alloc+free pair (measured:
//! docs/BENCHMARKS.md, "Row 5b, fifth session (trk16)"), a quarter of the
//! layer's budget for the pair, for a value that changes once per tick.
//!
//! So the alloc path reads a word instead ([`stamp`]): the coarse time as a
//! clock thread last stored it. The thread stores it once per tick, so the
//! word is never ahead of the clock and behind it by at most one tick plus
//! the thread's wake-up delay; with the clock's own tick, a block's stamp is
//! at most [`STAMP_BOUND`] plus that delay before the alloc, and the age a
//! report shows at most that much more than the block's real age (never
//! less, but for the report's own reading of the coarse clock, one tick). A
//! thread that allocates rarely gets the same bound as a busy one: the word
//! does not depend on the calling thread. `tests/tracking_leak_age.rs`
//! checks it for a thread that allocates once, sleeps and allocates again.
//!
//! Where there is no clock thread (not started yet, failed to start, or in
//! a child after `fork`, which has no copy of it), the word is 0 and the
//! clock is read directly: exact, at the old cost.
//!
//! Reports and events read the clock directly ([`now_ns`]).

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::Duration;

/// Nanoseconds on the coarse monotonic clock.
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; the call cannot fail for this clock.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
        // 0 means "no clock thread" in `NOW`; the clock counts from boot.
        .max(1)
}

/// The coarse time as the clock thread last stored it, or 0 when no clock
/// thread runs. On a cache line of its own: it is read by every tracked
/// alloc on every core and written once per tick, never beside anything
/// that is written more often.
#[repr(align(64))]
struct Now(AtomicU64);
static NOW: Now = Now(AtomicU64::new(0));

/// The clock thread's state: not started, running, or never again (it
/// could not be started; the alloc path reads the clock).
static TICKER: AtomicU8 = AtomicU8::new(NOT_STARTED);
const NOT_STARTED: u8 = 0;
const RUNNING: u8 = 1;
const UNAVAILABLE: u8 = 2;

/// How far a block's time may be behind its alloc, so how much more than
/// its real age a leak report may show, the clock thread's wake-up delay
/// aside: one tick of the coarse clock (its value is the time of the last
/// tick; at most 10 ms on Linux) and one period of the clock thread (the
/// word is the value at its last wake-up; the clock's resolution, capped at
/// 10 ms). The report's own reading of the coarse clock may make an age
/// up to one tick less than the real one.
pub const STAMP_BOUND: Duration = Duration::from_millis(20);

/// The time to record for a block allocated now (see the module
/// documentation): one load while the clock thread runs.
#[inline(always)]
pub fn stamp() -> u64 {
    match NOW.0.load(Ordering::Relaxed) {
        0 => stamp_without_ticker(),
        t => t,
    }
}

#[cold]
#[inline(never)]
fn stamp_without_ticker() -> u64 {
    now_ns()
}

/// The clock thread's period: the coarse clock's resolution, between 1 and
/// 10 ms (a finer clock would wake the thread for nothing a report shows).
fn period() -> Duration {
    let mut res = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `res` is a valid out-pointer.
    let ok = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut res) } == 0;
    let ns = if ok {
        (res.tv_sec as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(res.tv_nsec as u64)
    } else {
        4_000_000
    };
    Duration::from_nanos(ns.clamp(1_000_000, 10_000_000))
}

/// Starts the clock thread once (tracking objects are made on a cold path,
/// before any tracked alloc); idempotent and cheap once decided. In a
/// child after `fork` the thread is gone: [`forked_child`] puts the state
/// back to "not started", and the child's next tracking object starts its
/// own.
pub(crate) fn ensure_ticker() {
    if TICKER.load(Ordering::Acquire) != NOT_STARTED {
        return;
    }
    if TICKER
        .compare_exchange(NOT_STARTED, RUNNING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return;
    }
    register_fork_handler();
    let period = period();
    NOW.0.store(now_ns(), Ordering::Relaxed);
    let started = crate::core::threads::spawn("aclalloc-clock".into(), move || loop {
        std::thread::sleep(period);
        if TICKER.load(Ordering::Relaxed) != RUNNING {
            return;
        }
        NOW.0.store(now_ns(), Ordering::Relaxed);
    });
    if started.is_err() {
        // No thread: stamps read the clock, as before the clock thread.
        NOW.0.store(0, Ordering::Relaxed);
        TICKER.store(UNAVAILABLE, Ordering::Release);
    }
}

/// Registers [`forked_child`] with `pthread_atfork`, once per process (the
/// registration is inherited by children).
fn register_fork_handler() {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        // SAFETY: registers a function pointer that stays valid for the
        // life of the process; no pointer of ours is kept by libc.
        unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
    });
}

/// In the child after `fork`: only the forking thread exists, the clock
/// thread does not, so the word would stay at the time of the fork. Stamps
/// read the clock again until the child starts its own thread. Two atomic
/// stores: async-signal-safe, as a fork handler must be.
extern "C" fn forked_child() {
    NOW.0.store(0, Ordering::Relaxed);
    if TICKER.load(Ordering::Relaxed) == RUNNING {
        TICKER.store(NOT_STARTED, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_is_never_ahead_of_the_clock_and_at_most_the_bound_behind() {
        ensure_ticker();
        for _ in 0..50 {
            let before = now_ns();
            let s = stamp();
            let after = now_ns();
            assert!(s <= after, "stamp {s} after the clock {after}");
            // The wake-up delay of the clock thread is the part the bound
            // leaves out; on a loaded test machine allow it 200 ms.
            let slack = (STAMP_BOUND + Duration::from_millis(200)).as_nanos() as u64;
            assert!(
                before.saturating_sub(s) <= slack,
                "stamp {s} is {} ns behind the clock",
                before - s
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_forked_child_reads_the_clock_until_it_starts_its_own_thread() {
        ensure_ticker();
        assert_ne!(NOW.0.load(Ordering::Relaxed), 0, "the parent's thread runs");
        // SAFETY: the child only loads atomics and calls `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            let cleared =
                NOW.0.load(Ordering::Relaxed) == 0 && TICKER.load(Ordering::Relaxed) == NOT_STARTED;
            // SAFETY: ends the child without running the parent's atexit
            // handlers or the test harness.
            unsafe { libc::_exit(if cleared { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for the child just forked; `status` is a valid
        // out-pointer.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the child's word was not cleared (status {status})"
        );
    }

    #[test]
    fn the_period_is_between_one_and_ten_milliseconds() {
        let p = period();
        assert!(p >= Duration::from_millis(1) && p <= Duration::from_millis(10));
        assert!(STAMP_BOUND >= p * 2);
    }
}
