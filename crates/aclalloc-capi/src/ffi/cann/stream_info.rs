//! CANN's stream queries: status, priority, flags, id, the priority range,
//! and the failure mode.
#![allow(non_snake_case, non_camel_case_types)]

use crate::ffi::cann::types::*;
use crate::ffi::wiring::args;
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;
use std::ffi::c_void;

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
/// `ACL_STOP_ON_FAILURE` (other values: `ACL_ERROR_INVALID_PARAM`). A host
/// kernel fails with `aclallocFailCurrentTask`; the next synchronize
/// returns its code, and stop-on-failure drops the stream's work until then.
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtSetStreamFailureMode(stream: aclrtStream, mode: u64) -> aclError {
    real_or_host!(aclrtSetStreamFailureMode(stream: aclrtStream, mode: u64) {
        host().set_stream_failure_mode(args::optional_stream(stream), mode)
    })
}

/// `void fn(void *userData)`, run by `aclrtLaunchCallback`.
pub type aclrtCallback = Option<unsafe extern "C" fn(userData: *mut c_void)>;
/// `void fn(void *args)`, run by `aclrtLaunchHostFunc`.
pub type aclrtHostFunc = Option<unsafe extern "C" fn(args: *mut c_void)>;

/// Whether a callback holds its stream until it has run.
pub type aclrtCallbackBlockType = i32;
/// The stream goes on at once.
pub const ACL_CALLBACK_NO_BLOCK: aclrtCallbackBlockType = 0;
/// The stream waits until the callback has run.
pub const ACL_CALLBACK_BLOCK: aclrtCallbackBlockType = 1;

/// Runs `fn(args)` on `stream` (NULL: the default stream) in order with its
/// other work, on the stream's own thread.
///
/// # Safety
/// `fn` may be called with `args` from another thread.
#[no_mangle]
pub unsafe extern "C" fn aclrtLaunchHostFunc(
    stream: aclrtStream,
    fn_: aclrtHostFunc,
    args: *mut c_void,
) -> aclError {
    real_or_host!(aclrtLaunchHostFunc(stream: aclrtStream, fn_: aclrtHostFunc, args: *mut c_void) {
        let f = args::required(fn_, "fn")?;
        host().launch_host_func(args::optional_stream(stream), f, args)
    })
}

/// When `stream` reaches this point, `fn(userData)` runs on the thread
/// subscribed to the stream, inside its `aclrtProcessReport`.
/// `ACL_CALLBACK_BLOCK` holds the stream until it has run. A stream no
/// thread is subscribed to: `ACL_ERROR_INVALID_PARAM`.
///
/// # Safety
/// `fn` may be called with `userData` from the subscribed thread.
#[no_mangle]
pub unsafe extern "C" fn aclrtLaunchCallback(
    fn_: aclrtCallback,
    userData: *mut c_void,
    blockType: aclrtCallbackBlockType,
    stream: aclrtStream,
) -> aclError {
    real_or_host!(aclrtLaunchCallback(fn_: aclrtCallback, userData: *mut c_void, blockType: aclrtCallbackBlockType, stream: aclrtStream) {
        let f = args::required(fn_, "fn")?;
        let blocking = match blockType {
            ACL_CALLBACK_NO_BLOCK => false,
            ACL_CALLBACK_BLOCK => true,
            _ => {
                return Err(crate::base::error::Error::InvalidParam {
                    param: "blockType",
                    reason: "It must be ACL_CALLBACK_NO_BLOCK or ACL_CALLBACK_BLOCK",
                })
            }
        };
        host().launch_callback(args::optional_stream(stream), f, userData, blocking)
    })
}

/// Makes the thread `threadId` (its `pthread_self()`) the one that runs
/// `stream`'s callbacks. One thread per stream.
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtSubscribeReport(threadId: u64, stream: aclrtStream) -> aclError {
    real_or_host!(aclrtSubscribeReport(threadId: u64, stream: aclrtStream) {
        host().subscribe_report(threadId, args::optional_stream(stream))
    })
}

/// Undoes `aclrtSubscribeReport`.
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtUnSubscribeReport(threadId: u64, stream: aclrtStream) -> aclError {
    real_or_host!(aclrtUnSubscribeReport(threadId: u64, stream: aclrtStream) {
        host().unsubscribe_report(threadId, args::optional_stream(stream))
    })
}

/// Runs one callback posted for the calling (subscribed) thread, waiting up
/// to `timeout` ms for one (-1: no limit); none in time:
/// `ACL_ERROR_RT_REPORT_TIMEOUT`.
#[no_mangle]
pub extern "C" fn aclrtProcessReport(timeout: i32) -> aclError {
    real_or_host!(aclrtProcessReport(timeout: i32) {
        // SAFETY: pthread_self has no preconditions.
        let me = unsafe { libc::pthread_self() } as u64;
        host().process_report(me, timeout)
    })
}

/// Makes the thread `hostFuncThreadId` (its `pthread_self()`) the one that
/// runs the host functions launched on `exeStream` (`aclrtLaunchHostFunc`):
/// when the stream reaches one, it waits until that thread has run it
/// inside `aclrtProcessHostFunc`. One thread per stream.
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtSubscribeHostFunc(
    hostFuncThreadId: u64,
    exeStream: aclrtStream,
) -> aclError {
    real_or_host!(aclrtSubscribeHostFunc(hostFuncThreadId: u64, exeStream: aclrtStream) {
        host().subscribe_host_func(hostFuncThreadId, args::optional_stream(exeStream))
    })
}

/// Runs one host function posted for the calling (subscribed) thread,
/// waiting up to `timeout` ms for one (-1: no limit); none in time:
/// `ACL_ERROR_RT_REPORT_TIMEOUT`.
#[no_mangle]
pub extern "C" fn aclrtProcessHostFunc(timeout: i32) -> aclError {
    real_or_host!(aclrtProcessHostFunc(timeout: i32) {
        // SAFETY: pthread_self has no preconditions.
        let me = unsafe { libc::pthread_self() } as u64;
        host().process_host_func(me, timeout)
    })
}

/// Undoes `aclrtSubscribeHostFunc`: the stream's host functions run on its
/// own thread again.
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtUnSubscribeHostFunc(
    hostFuncThreadId: u64,
    exeStream: aclrtStream,
) -> aclError {
    real_or_host!(aclrtUnSubscribeHostFunc(hostFuncThreadId: u64, exeStream: aclrtStream) {
        host().unsubscribe_host_func(hostFuncThreadId, args::optional_stream(exeStream))
    })
}
