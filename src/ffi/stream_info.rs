//! CANN's stream queries: status, priority, flags, id, the priority range,
//! and the failure mode.
#![allow(non_snake_case, non_camel_case_types)]

use super::args;
use super::forward::real_or_host;
use super::process::host;
use super::types::*;

/// Whether a stream's work has all run (`aclrtStreamQuery`).
pub type aclrtStreamStatus = i32;
/// Everything enqueued has run.
pub const ACL_STREAM_STATUS_COMPLETE: aclrtStreamStatus = 0;
/// Some enqueued work has not run.
pub const ACL_STREAM_STATUS_NOT_READY: aclrtStreamStatus = 1;
/// Reserved.
pub const ACL_STREAM_STATUS_RESERVED: aclrtStreamStatus = 0xFFFF;

/// `aclrtSetStreamFailureMode`: the stream goes on after a failed task.
pub const ACL_CONTINUE_ON_FAILURE: u32 = 0x0000_0000;
/// `aclrtSetStreamFailureMode`: the stream stops at a failed task.
pub const ACL_STOP_ON_FAILURE: u32 = 0x0000_0001;

/// `ACL_STREAM_STATUS_COMPLETE` once everything enqueued on `stream` (NULL:
/// the default stream) has run, else `_NOT_READY`.
///
/// # Safety
/// `status` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamQuery(
    stream: aclrtStream,
    status: *mut aclrtStreamStatus,
) -> aclError {
    real_or_host!(aclrtStreamQuery(stream: aclrtStream, status: *mut aclrtStreamStatus) {
        // SAFETY: the caller's contract.
        let out = unsafe { args::Out::required(status, "status") }?;
        let idle = host().stream_idle(args::optional_stream(stream))?;
        out.write(if idle { ACL_STREAM_STATUS_COMPLETE } else { ACL_STREAM_STATUS_NOT_READY });
        Ok(())
    })
}

/// The priority `stream` was created with (0 for `aclrtCreateStream`).
///
/// # Safety
/// `priority` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamGetPriority(
    stream: aclrtStream,
    priority: *mut u32,
) -> aclError {
    real_or_host!(aclrtStreamGetPriority(stream: aclrtStream, priority: *mut u32) {
        // SAFETY: the caller's contract.
        unsafe { args::write_out(priority, "priority", || host().stream_priority(args::optional_stream(stream))) }
    })
}

/// The `ACL_STREAM_*` flags `stream` was created with.
///
/// # Safety
/// `flags` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamGetFlags(stream: aclrtStream, flags: *mut u32) -> aclError {
    real_or_host!(aclrtStreamGetFlags(stream: aclrtStream, flags: *mut u32) {
        // SAFETY: the caller's contract.
        unsafe { args::write_out(flags, "flags", || host().stream_flags(args::optional_stream(stream))) }
    })
}

/// A number that tells `stream` apart from the other live streams.
///
/// # Safety
/// `streamId` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamGetId(stream: aclrtStream, streamId: *mut i32) -> aclError {
    real_or_host!(aclrtStreamGetId(stream: aclrtStream, streamId: *mut i32) {
        // SAFETY: the caller's contract.
        unsafe { args::write_out(streamId, "streamId", || host().stream_id(args::optional_stream(stream))) }
    })
}

/// The priorities streams may have on the current device: least 7,
/// greatest 0 (a lower number is a higher priority).
///
/// # Safety
/// Both pointers are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtDeviceGetStreamPriorityRange(
    leastPriority: *mut i32,
    greatestPriority: *mut i32,
) -> aclError {
    real_or_host!(aclrtDeviceGetStreamPriorityRange(leastPriority: *mut i32, greatestPriority: *mut i32) {
        // SAFETY: the caller's contract.
        let least = unsafe { args::Out::required(leastPriority, "leastPriority") }?;
        // SAFETY: the caller's contract.
        let greatest = unsafe { args::Out::required(greatestPriority, "greatestPriority") }?;
        let (l, g) = host().stream_priority_range()?;
        least.write(l);
        greatest.write(g);
        Ok(())
    })
}

/// Sets what `stream` does after a failed task: `ACL_CONTINUE_ON_FAILURE` or
/// `ACL_STOP_ON_FAILURE` (other values: `ACL_ERROR_INVALID_PARAM`). The
/// host's kernels cannot fail, so both run the same.
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtSetStreamFailureMode(stream: aclrtStream, mode: u64) -> aclError {
    real_or_host!(aclrtSetStreamFailureMode(stream: aclrtStream, mode: u64) {
        host().set_stream_failure_mode(args::optional_stream(stream), mode)
    })
}
