//! Timestamps for block records and events.
//!
//! The coarse monotonic clock is read from the vDSO in a few nanoseconds,
//! where the precise one costs about as much as the whole tracking budget of
//! an alloc+free pair. Its resolution (a few milliseconds) is plenty for the
//! age of a leaked block.

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
}
