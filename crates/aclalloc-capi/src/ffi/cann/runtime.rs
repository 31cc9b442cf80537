//! CANN's `acl.h` / `acl_rt.h`: initialization, devices, contexts, streams.
//!
//! Each export forwards to a real runtime or runs the host runtime
//! (`real_or_host!`, [`crate::ffi::wiring::dispatch`]). The calls that start work also say
//! once if a real runtime was loaded too late (`note_late_runtime`).
#![allow(non_snake_case)]

use crate::base::error::{Error, Result};
use crate::ffi::cann::stream_control::{
    stream_state_changed, ACL_RT_STREAM_STATE_CREATE_POST, ACL_RT_STREAM_STATE_DESTROY_PRE,
};
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args;
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::forward::{destroyed, synchronized};
use crate::ffi::wiring::host::{host, note_late_runtime};
use std::ffi::c_char;

/// A stream made on the host runtime, written to `stream`, then announced
/// to the stream state callbacks.
///
/// # Safety
/// `stream` is NULL or writable.
unsafe fn create_stream(stream: *mut aclrtStream, priority: u32, flag: u32) -> Result<()> {
    note_late_runtime();
    // SAFETY: the caller's contract.
    unsafe {
        args::write_out(stream, "stream", || {
            Ok(host().create_stream(priority, flag)?.as_ptr())
        })?;
        stream_state_changed(*stream, ACL_RT_STREAM_STATE_CREATE_POST);
    }
    Ok(())
}

/// Destroys a host stream (`force`: without running its queued work),
/// announced to the stream state callbacks first.
fn destroy_stream(stream: aclrtStream, force: bool) -> Result<()> {
    let key = args::stream(stream)?;
    if host().resolve_stream(Some(key)).is_ok() {
        stream_state_changed(stream, ACL_RT_STREAM_STATE_DESTROY_PRE);
    }
    host().destroy_stream(key, force)
}

/// Initializes ACL. `configPath` may be NULL or empty; a file given must be
/// readable (`ACL_ERROR_INVALID_FILE`), its contents are not interpreted by
/// the host runtime. A second call before `aclFinalize`:
/// `ACL_ERROR_REPEAT_INITIALIZE`.
///
/// # Safety
/// `configPath` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn aclInit(configPath: *const c_char) -> aclError {
    real_or_host!(aclInit(configPath: *const c_char) {
        note_late_runtime();
        // SAFETY: the caller's contract.
        host().init(unsafe { args::optional_cstr(configPath) })
    })
}

/// Finalizes ACL: every context and stream is released (pending work runs
/// first). Without a matching `aclInit`: `ACL_ERROR_REPEAT_FINALIZE`.
#[no_mangle]
pub extern "C" fn aclFinalize() -> aclError {
    real_or_host!(aclFinalize() { host().finalize() })
}

/// Makes `deviceId` the calling thread's device (its default context becomes
/// current). Counted: the device's default context is released after as many
/// `aclrtResetDevice` calls. Out of range: `ACL_ERROR_RT_INVALID_DEVICEID`.
#[no_mangle]
pub extern "C" fn aclrtSetDevice(deviceId: i32) -> aclError {
    real_or_host!(aclrtSetDevice(deviceId: i32) {
        note_late_runtime();
        host().set_device(deviceId)
    })
}

/// Undoes one `aclrtSetDevice`; the last one releases the device's default
/// context and its streams (pending work runs first). A device that is not
/// set is left as it is. Device memory is not freed.
#[no_mangle]
pub extern "C" fn aclrtResetDevice(deviceId: i32) -> aclError {
    real_or_host!(aclrtResetDevice(deviceId: i32), after_success {
        crate::tracking::device_synchronized()
    } {
        host().reset_device(deviceId, false)
    })
}

/// Resets `deviceId` whatever the number of `aclrtSetDevice` calls, releasing
/// every context on it (its own and those from `aclrtCreateContext`).
#[no_mangle]
pub extern "C" fn aclrtResetDeviceForce(deviceId: i32) -> aclError {
    real_or_host!(aclrtResetDeviceForce(deviceId: i32), after_success {
        crate::tracking::device_synchronized()
    } {
        host().reset_device(deviceId, true)
    })
}

/// The device of the calling thread's current context. No current context:
/// `ACL_ERROR_RT_CONTEXT_NULL`.
///
/// # Safety
/// `deviceId` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetDevice(deviceId: *mut i32) -> aclError {
    real_or_host!(aclrtGetDevice(deviceId: *mut i32) {
        // SAFETY: the caller's contract.
        unsafe { args::write_out(deviceId, "deviceId", || Ok(host().current_device()? as i32)) }
    })
}

/// The number of devices (`ACLALLOC_DEVICE_COUNT`, default 1).
///
/// # Safety
/// `count` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetDeviceCount(count: *mut u32) -> aclError {
    real_or_host!(aclrtGetDeviceCount(count: *mut u32) {
        // SAFETY: the caller's contract.
        unsafe { args::write_out(count, "count", || host().device_count()) }
    })
}

/// Creates a context on `deviceId` and makes it current on the calling thread.
///
/// # Safety
/// `context` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateContext(context: *mut aclrtContext, deviceId: i32) -> aclError {
    real_or_host!(aclrtCreateContext(context: *mut aclrtContext, deviceId: i32) {
        note_late_runtime();
        let create = || Ok(host().create_context(deviceId)? as aclrtContext);
        // SAFETY: the caller's contract.
        unsafe { args::write_out(context, "context", create) }
    })
}

/// Destroys a context from `aclrtCreateContext` and its streams (pending work
/// runs first). A device's default context is refused.
///
/// # Safety
/// `context` is live for a real runtime; the host runtime refuses what is not.
#[no_mangle]
pub unsafe extern "C" fn aclrtDestroyContext(context: aclrtContext) -> aclError {
    real_or_host!(aclrtDestroyContext(context: aclrtContext) {
        host().destroy_context(args::context(context)?)
    })
}

/// Makes `context` current on the calling thread.
///
/// # Safety
/// `context` is live for a real runtime; the host runtime refuses what is not.
#[no_mangle]
pub unsafe extern "C" fn aclrtSetCurrentContext(context: aclrtContext) -> aclError {
    real_or_host!(aclrtSetCurrentContext(context: aclrtContext) {
        host().set_current_context(args::context(context)?)
    })
}

/// The calling thread's current context. None: `ACL_ERROR_RT_CONTEXT_NULL`.
///
/// # Safety
/// `context` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetCurrentContext(context: *mut aclrtContext) -> aclError {
    real_or_host!(aclrtGetCurrentContext(context: *mut aclrtContext) {
        let current = || Ok(host().current_context()?.0 as aclrtContext);
        // SAFETY: the caller's contract.
        unsafe { args::write_out(context, "context", current) }
    })
}

/// Creates a stream in the current context: an in-order queue run by its own
/// host worker thread.
///
/// # Safety
/// `stream` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateStream(stream: *mut aclrtStream) -> aclError {
    real_or_host!(aclrtCreateStream(stream: *mut aclrtStream) {
        // SAFETY: the caller's contract.
        unsafe { create_stream(stream, 0, 0) }
    })
}

/// `aclrtCreateStream` with a priority (0 to 7) and `ACL_STREAM_*` flags,
/// which are checked and otherwise have no effect on the host.
///
/// # Safety
/// `stream` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateStreamWithConfig(
    stream: *mut aclrtStream,
    priority: u32,
    flag: u32,
) -> aclError {
    real_or_host!(aclrtCreateStreamWithConfig(stream: *mut aclrtStream, priority: u32, flag: u32) {
        // SAFETY: the caller's contract.
        unsafe { create_stream(stream, priority, flag) }
    })
}

/// Destroys a stream once its pending work has run, and drops its allocator
/// registration (CANN keeps it; here a later stream can never inherit it).
///
/// # Safety
/// `stream` is live for a real runtime; the host runtime refuses what is not.
#[no_mangle]
pub unsafe extern "C" fn aclrtDestroyStream(stream: aclrtStream) -> aclError {
    real_or_host!(aclrtDestroyStream(stream: aclrtStream), after_success {
        destroyed(stream)
    } {
        destroy_stream(stream, false)
    })
}

/// Destroys a stream at once: work that has not started is dropped, the
/// running kernel is waited for. Drops the allocator registration too.
///
/// # Safety
/// `stream` is live for a real runtime; the host runtime refuses what is not.
#[no_mangle]
pub unsafe extern "C" fn aclrtDestroyStreamForce(stream: aclrtStream) -> aclError {
    real_or_host!(aclrtDestroyStreamForce(stream: aclrtStream), after_success {
        destroyed(stream)
    } {
        destroy_stream(stream, true)
    })
}

/// Waits until all work enqueued on `stream` (NULL: the current context's
/// default stream) has run.
///
/// # Safety
/// `stream` is live for a real runtime; the host runtime refuses what is not.
#[no_mangle]
pub unsafe extern "C" fn aclrtSynchronizeStream(stream: aclrtStream) -> aclError {
    real_or_host!(aclrtSynchronizeStream(stream: aclrtStream), after_success {
        synchronized(stream)
    } {
        host().synchronize_stream(args::optional_stream(stream))
    })
}

/// As `aclrtSynchronizeStream`, giving up after `timeout` ms (-1: wait as
/// long as it takes) with `ACL_ERROR_RT_STREAM_SYNC_TIMEOUT` (507046); the
/// stream's work goes on. An abort that overtakes the wait returns
/// `ACL_ERROR_RT_STREAM_ABORT` (107023).
///
/// # Safety
/// As `aclrtSynchronizeStream`.
#[no_mangle]
pub unsafe extern "C" fn aclrtSynchronizeStreamWithTimeout(
    stream: aclrtStream,
    timeout: i32,
) -> aclError {
    real_or_host!(aclrtSynchronizeStreamWithTimeout(stream: aclrtStream, timeout: i32), after_success {
        synchronized(stream)
    } {
        if timeout < -1 {
            return Err(Error::InvalidParam {
                param: "timeout",
                reason: "It must be -1 (no limit) or a number of milliseconds",
            });
        }
        host().synchronize_stream_timeout(args::optional_stream(stream), timeout)
    })
}

/// Waits until all work enqueued on every stream has run.
#[no_mangle]
pub extern "C" fn aclrtSynchronizeDevice() -> aclError {
    real_or_host!(aclrtSynchronizeDevice(), after_success {
        crate::tracking::device_synchronized()
    } {
        crate::runtime::capture::refuse_if_capturing()?;
        host().synchronize_all()?;
        crate::tracking::device_synchronized();
        crate::stream_ordered::synchronized();
        host().take_task_failure()
    })
}
