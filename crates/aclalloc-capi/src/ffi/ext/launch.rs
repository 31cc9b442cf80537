//! The launch extension: operator launches that consume the stream's
//! registered allocator as CANN's executor does.
#![allow(non_snake_case)]

use crate::ffi::cann::types::*;
use crate::ffi::wiring::args;
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;
use std::ffi::c_void;

/// Launches `kernel(workspace, workspaceSize, userData)` on `stream` (NULL:
/// the current context's default stream) with a workspace taken as CANN's
/// executor takes one: from the allocator registered for `stream` at this
/// call, `alloc` then `getAddrFromBlock`, and `free` right after enqueuing, so
/// blocks go back in stream order. Without a registered allocator the
/// default allocator serves it and gets it back once the kernel has run.
/// `workspaceSize` 0: the kernel gets NULL.
///
/// Errors (nothing enqueued): no workspace (`alloc` or `getAddrFromBlock`
/// returned NULL, or the device is full): `ACL_ERROR_RT_MEMORY_ALLOCATION`;
/// NULL `kernel` or a stream not from `aclrtCreateStream`:
/// `ACL_ERROR_INVALID_PARAM`.
///
/// # Safety
/// `kernel` must be safe to call on another thread with these arguments;
/// `userData` must stay valid until the kernel has run.
#[no_mangle]
pub unsafe extern "C" fn aclallocLaunchKernel(
    stream: aclrtStream,
    workspaceSize: usize,
    kernel: aclallocKernelFunc,
    userData: *mut c_void,
) -> aclError {
    real_or_host!(aclallocLaunchKernel(
        stream: aclrtStream,
        workspaceSize: usize,
        kernel: aclallocKernelFunc,
        userData: *mut c_void
    ) {
        let kernel = args::required(kernel, "kernel")?;
        host().launch(args::optional_stream(stream), workspaceSize, kernel, userData)
    })
}
