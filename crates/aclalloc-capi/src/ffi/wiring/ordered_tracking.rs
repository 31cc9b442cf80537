//! What the tracking layer hears of stream-ordered memory, from either path
//! of an export (forwarded to a real runtime, or the host runtime's): each
//! allocation and free of a pool, each copy or fill that touches device
//! memory, and each other allocation that may hand a freed range out again.
//! Nothing is done while tracking is off.

use crate::base::types::aclrtStream;
use crate::tracking;
use std::ffi::c_void;

/// The stream as the tracking layer orders it: the handle, 0 for a real
/// runtime's default stream (the host runtime's exports pass the stream
/// they resolved).
fn word(stream: aclrtStream) -> usize {
    stream as usize
}

/// `aclrtMemPoolMallocAsync` handed out `size` bytes at `address`.
pub(crate) fn allocated(pool: *mut c_void, address: *mut c_void, size: usize, stream: aclrtStream) {
    if tracking::enabled() && !address.is_null() {
        tracking::ordered_alloc(pool as usize, address as usize, size, word(stream));
    }
}

/// `aclrtMemPoolFreeAsync(address, stream)` succeeded.
pub(crate) fn freed(address: *mut c_void, stream: aclrtStream) {
    if tracking::enabled() {
        tracking::ordered_free(address as usize, word(stream));
    }
}

/// A copy or fill queued on `stream` (NULL for a synchronous call) touches
/// `len` bytes at each address of `addresses`.
pub(crate) fn used(stream: aclrtStream, addresses: &[*const c_void], len: usize) {
    if tracking::enabled() {
        for &a in addresses {
            tracking::ordered_use(word(stream), a as usize, len);
        }
    }
}

/// [`used`] on the host runtime: `stream` is resolved as the host runtime
/// orders streams (NULL: the current context's default stream), and only
/// while tracking is on.
pub(crate) fn used_on_host(stream: aclrtStream, addresses: &[*const c_void], len: usize) {
    if !tracking::enabled() {
        return;
    }
    let resolved = crate::ffi::wiring::host::host()
        .resolve_stream(crate::ffi::wiring::args::optional_stream(stream))
        .map_or(std::ptr::null_mut(), |(key, _)| {
            key.get().get() as aclrtStream
        });
    used(resolved, addresses, len);
}

/// Device memory (`aclrtMalloc`, a reserved range) was handed out at `address`.
pub(crate) fn reissued(address: *mut c_void, size: usize) {
    if tracking::enabled() && !address.is_null() {
        tracking::device_range_reissued(address as usize, size);
    }
}

/// A pool was trimmed, or destroyed.
pub(crate) fn released(pool: *mut c_void, destroyed: bool) {
    if tracking::enabled() {
        tracking::ordered_pool_released(pool as usize, destroyed);
    }
}
