//! The library's one clock, monotonic (since boot), so that events of
//! different pools and tracking records order on one axis.
//!
//! - [`now_us`]: history event times, microseconds.
//! - [`coarse_ns`]: tracking reports and events, on the cheaper coarse clock.
//! - [`stamp`]: a tracked alloc's time (only for a leak's age): a word a clock
//!   thread stores once per tick, never ahead of the clock and behind by at
//!   most [`STAMP_BOUND`] plus the wake-up delay. Without a clock thread
//!   (not started, or after `fork`) the word is 0 and the clock is read.

use crate::base::sync::statics::{AtomicU64, AtomicU8};

use crate::base::sync::Ordering;
use std::time::Duration;

/// Nanoseconds on `clock`.
#[inline]
fn read_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; the call cannot fail for the
    // monotonic clocks.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Microseconds on `CLOCK_MONOTONIC`.
#[inline]
pub fn now_us() -> u64 {
    read_ns(libc::CLOCK_MONOTONIC) / 1_000
}

/// Nanoseconds on `CLOCK_MONOTONIC_COARSE`, never 0 (0 means "no clock thread" in the stamp word).
#[inline]
pub fn coarse_ns() -> u64 {
    read_ns(libc::CLOCK_MONOTONIC_COARSE).max(1)
}

/// The coarse time as the clock thread last stored it, or 0 when no clock
/// thread runs. On a cache line of its own: every tracked alloc reads it.
#[repr(align(64))]
struct Now(AtomicU64);
static NOW: Now = Now(AtomicU64::new(0));

/// The clock thread's state.
static TICKER: AtomicU8 = AtomicU8::new(NOT_STARTED);
const NOT_STARTED: u8 = 0;
const RUNNING: u8 = 1;
/// It could not be started: stamps read the clock.
const UNAVAILABLE: u8 = 2;

/// How far a stamp may be behind its alloc, the wake-up delay aside: one
/// coarse tick and one clock-thread period (at most 10 ms each).
pub const STAMP_BOUND: Duration = Duration::from_millis(20);

/// The time to record for a block allocated now: one load while the clock thread runs.
#[inline]
pub fn stamp() -> u64 {
    match NOW.0.load(Ordering::Relaxed) {
        0 => stamp_without_ticker(),
        t => t,
    }
}

#[cold]
#[inline(never)]
fn stamp_without_ticker() -> u64 {
    coarse_ns()
}

/// The clock thread's period: the coarse clock's resolution, kept between 1
/// and 10 ms (a finer one would wake the thread for nothing a report shows).
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

/// Starts the clock thread once (a forked child starts its own).
pub fn ensure_ticker() {
    if TICKER.load(Ordering::Acquire) != NOT_STARTED
        || TICKER
            .compare_exchange(NOT_STARTED, RUNNING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
    {
        return;
    }
    register_fork_handler();
    let period = period();
    NOW.0.store(coarse_ns(), Ordering::Relaxed);
    let started = crate::base::threads::spawn("aclalloc-clock".into(), move || loop {
        std::thread::sleep(period);
        if TICKER.load(Ordering::Relaxed) != RUNNING {
            return;
        }
        NOW.0.store(coarse_ns(), Ordering::Relaxed);
    });
    if started.is_err() {
        NOW.0.store(0, Ordering::Relaxed);
        TICKER.store(UNAVAILABLE, Ordering::Release);
    }
}

/// Registers [`forked_child`] once per process (children inherit it).
fn register_fork_handler() {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        // SAFETY: registers a function pointer that stays valid for the
        // life of the process; no pointer of ours is kept by libc.
        unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
    });
}

/// In a forked child: stamps read the clock until the child starts its own
/// thread. Atomic stores only: async-signal-safe.
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
    fn both_readings_are_one_monotonic_axis() {
        let us = now_us();
        let coarse = coarse_ns();
        // The coarse clock lags the fine one by at most a tick (10 ms).
        assert!(coarse / 1_000 <= now_us());
        assert!(us.saturating_sub(coarse / 1_000) <= 10_000 + 200_000);
    }

    #[test]
    fn a_stamp_is_never_ahead_of_the_clock_and_at_most_the_bound_behind() {
        ensure_ticker();
        for _ in 0..50 {
            let before = coarse_ns();
            let s = stamp();
            let after = coarse_ns();
            assert!(s <= after, "stamp {s} after the clock {after}");
            // The bound leaves out the clock thread's wake-up delay; on a
            // loaded test machine allow it 200 ms.
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
