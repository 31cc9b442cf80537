//! Event times: microseconds on the monotonic clock (since boot), so that
//! events of different pools, and of the tracking layer, order on one axis.

/// Microseconds on `CLOCK_MONOTONIC`.
#[inline]
pub fn now_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; the call cannot fail for this clock.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000)
        .wrapping_add(ts.tv_nsec as u64 / 1_000)
}
