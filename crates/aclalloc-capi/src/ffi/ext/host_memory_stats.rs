//! Statistics of `aclrtMallocHost` memory, with PyTorch's host-allocator
//! keys (`torch.npu.host_memory_stats()`). They count the host runtime's
//! `aclrtMallocHost`/`aclrtFreeHost`; in front of a real CANN runtime, whose
//! functions serve those calls, they stay zero.
#![allow(non_snake_case)]

use crate::base::boundary::ffi_boundary;
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args::Out;
use crate::ffi::wiring::host::host;
use crate::runtime::HostMemoryStats;

/// Reads the host-memory statistics.
///
/// # Safety
/// `stats` must be NULL (refused) or writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocHostMemoryGetStats(stats: *mut HostMemoryStats) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract; `Out::required` refuses NULL.
        let out = unsafe { Out::required(stats, "stats") }?;
        out.write(host().host_memory_stats());
        Ok(())
    })
}

/// Restarts every peak of the host-memory statistics from its current value.
#[no_mangle]
pub extern "C" fn aclallocHostMemoryResetPeakStats() -> aclError {
    ffi_boundary!(|| {
        host().reset_peak_host_memory_stats();
        Ok(())
    })
}

/// Zeroes the accumulated host-memory statistics (the totals allocated and
/// freed, the call counts, the timings); current values and peaks stay.
#[no_mangle]
pub extern "C" fn aclallocHostMemoryResetAccumulatedStats() -> aclError {
    ffi_boundary!(|| {
        host().reset_accumulated_host_memory_stats();
        Ok(())
    })
}

/// Gives cached host memory back. `aclrtFreeHost` gives a block back at
/// once, so nothing is ever cached: succeeds and does nothing (PyTorch's
/// `host_empty_cache` on an allocator without a cache).
#[no_mangle]
pub extern "C" fn aclallocHostMemoryEmptyCache() -> aclError {
    ffi_boundary!(|| Ok(()))
}
