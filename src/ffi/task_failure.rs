//! `aclallocFailCurrentTask`: how a host kernel reports that it failed, as
//! a device kernel's exception does on CANN.

use super::boundary::boundary;
use super::types::*;

/// Called from a kernel (`aclallocLaunchKernel`) or a host function
/// (`aclrtLaunchHostFunc`) running on a stream: the task counts as failed
/// with `code`. The stream's next `aclrtSynchronizeStream` returns `code`
/// (once); with `ACL_STOP_ON_FAILURE` the stream drops its work until
/// then. `ACL_ERROR_INVALID_PARAM` for `ACL_SUCCESS` or outside a
/// stream's task.
#[no_mangle]
pub extern "C" fn aclallocFailCurrentTask(code: aclError) -> aclError {
    boundary("aclallocFailCurrentTask", || {
        crate::runtime::stream_worker::fail_current_task(code)
    })
}
