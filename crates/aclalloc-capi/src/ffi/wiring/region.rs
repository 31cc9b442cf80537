//! The CANN exports' side of tagged regions (`crate::pool::region`): the
//! check that keeps copies and sets off sleeping memory in front of a real
//! runtime too (the host runtime's own checks would also refuse it, but a
//! real runtime would fault or fail without naming the tag), and the
//! region's answers to the memory calls, written to the caller's
//! out-parameters.

use crate::base::asleep;
use crate::base::error::{Error, Result};
use crate::ffi::wiring::args;
use crate::pool::region;
use std::ffi::c_void;
use std::sync::Arc;

/// Refuses a copy or set of `count` bytes touching sleeping memory (of a
/// tagged pool or region) at any of `ranges` (address, parameter name).
/// One load per address while nothing sleeps.
#[inline]
pub(crate) fn refuse_sleeping(
    ranges: &[(*const c_void, &'static str)],
    count: usize,
) -> Result<()> {
    for &(ptr, param) in ranges {
        let addr = ptr as usize;
        let last = addr.saturating_add(count.saturating_sub(1));
        if let Some(reason) = asleep::find(addr).or_else(|| asleep::find(last)) {
            return Err(Error::InvalidAddress {
                param,
                addr,
                len: count,
                reason,
            });
        }
    }
    Ok(())
}

/// `aclrtMalloc` (and its variants) inside the region tagged `tag`.
///
/// # Safety
/// `out` is NULL or writable.
pub(crate) unsafe fn malloc(out: *mut *mut c_void, size: usize, tag: Arc<str>) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe {
        args::write_out(out, "devPtr", || {
            let va = region::malloc(tag, size)? as *mut c_void;
            crate::ffi::wiring::ordered_tracking::reissued(va, size);
            Ok(va)
        })
    }
}

/// What `aclrtFree` of region memory says when another thread freed it first.
pub(crate) const NOT_ALLOCATED: Error = Error::InvalidParam {
    param: "devPtr",
    reason: "It is not the start of live device memory (it was already freed)",
};
