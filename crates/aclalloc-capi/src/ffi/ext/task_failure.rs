//! `aclallocFailCurrentTask`: how a host kernel reports that it failed, as
//! a device kernel's exception does on CANN.

use crate::base::boundary::{ffi_boundary, ffi_passthrough};
use crate::ffi::cann::types::*;
use std::ffi::c_int;

/// Called from a kernel (`aclallocLaunchKernel`) or a host function
/// (`aclrtLaunchHostFunc`) running on a stream: the task counts as failed
/// with `code`. The stream's next `aclrtSynchronizeStream` returns `code`
/// (once); with `ACL_STOP_ON_FAILURE` the stream drops its work until
/// then. `ACL_ERROR_INVALID_PARAM` for `ACL_SUCCESS` or outside a
/// stream's task.
#[no_mangle]
pub extern "C" fn aclallocFailCurrentTask(code: aclError) -> aclError {
    ffi_boundary!(|| { crate::runtime::stream_worker::fail_current_task(code) })
}

/// 1 inside a kernel or host function whose stream was stopped
/// (`aclrtStreamStop`) or aborted (`aclrtStreamAbort`) while it ran, or
/// before it started; 0 otherwise, and outside a stream's task. A host
/// kernel that runs long polls it to end early, as the device ends a
/// stopped kernel: the task fails all the same (the next synchronize
/// reports `ACL_ERROR_RT_INTERNAL_ERROR` after a stop,
/// `ACL_ERROR_RT_VECTOR_CORE_EXCEPTION` after an abort).
#[no_mangle]
pub extern "C" fn aclallocCurrentTaskCancelled() -> c_int {
    ffi_passthrough!(|| { c_int::from(crate::runtime::stream_worker::current_task_cancelled()) })
}
