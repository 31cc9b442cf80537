//! The launch extension: operator launches that consume the stream's
//! registered allocator as CANN's executor does.
#![allow(non_snake_case)]

use super::dispatch::call_active;
use super::types::*;
use std::ffi::c_void;

/// Launches the host kernel `kernel(workspace, workspaceSize, userData)` on
/// `stream` (NULL: the current context's default stream), with a workspace
/// taken the way CANN's executor takes one for an operator:
///
/// 1. the allocator registered for `stream` at the time of this call is used
///    (a later `aclrtAllocatorRegister` does not affect this launch);
/// 2. `alloc(obj, workspaceSize)`, then `getAddrFromBlock(block)`;
/// 3. the kernel is enqueued on the stream with that address;
/// 4. `free(obj, block)` is called on this thread as soon as the launch is
///    enqueued: blocks go back in stream order, so an allocator may give the
///    block to later work on the same stream, never to work that runs
///    concurrently with this kernel on another stream.
///
/// A stream without a registered allocator takes the workspace from the
/// default allocator (the caching pool unless `ACLALLOC_DEFAULT_ALLOCATOR` or
/// `aclallocSetDefaultAllocator` chose another), which gets it back when the
/// kernel has run. `workspaceSize` 0 takes nothing: the kernel gets NULL.
///
/// alloc returning NULL, or getAddrFromBlock returning NULL (the block is
/// freed), or the device allocator running out: `ACL_ERROR_RT_MEMORY_ALLOCATION`
/// with a message naming the stream and the size; nothing is enqueued.
/// NULL `kernel`: `ACL_ERROR_INVALID_PARAM`. A stream that was not created by
/// `aclrtCreateStream`: `ACL_ERROR_INVALID_PARAM`.
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
    call_active!(aclallocLaunchKernel(
        stream,
        workspaceSize,
        kernel,
        userData
    ))
}

/// The host backend's implementation.
pub(crate) mod host {
    use super::super::args;
    use super::super::boundary::boundary;
    use super::*;
    use crate::ffi::process::host;

    pub(crate) unsafe extern "C" fn aclallocLaunchKernel(
        stream: aclrtStream,
        workspaceSize: usize,
        kernel: aclallocKernelFunc,
        userData: *mut c_void,
    ) -> aclError {
        boundary("aclallocLaunchKernel", || {
            let kernel = args::required(kernel, "kernel")?;
            host().launch(
                args::optional_stream(stream),
                workspaceSize,
                kernel,
                userData,
            )
        })
    }
}
