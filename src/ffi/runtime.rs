//! CANN's `acl.h` / `acl_rt.h`: initialization, devices, contexts, streams.
//!
//! Each export calls the active runtime backend ([`super::dispatch`]); the
//! host backend's implementations are in the private `host` module.
#![allow(non_snake_case)]

use super::dispatch::call_active;
use super::types::*;
use std::ffi::c_char;

/// Initializes ACL. `configPath` may be NULL or empty; a file given must be
/// readable (`ACL_ERROR_INVALID_FILE`), its contents are not interpreted by
/// the host runtime. A second call before `aclFinalize`:
/// `ACL_ERROR_REPEAT_INITIALIZE`.
///
/// # Safety
/// `configPath` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn aclInit(configPath: *const c_char) -> aclError {
    call_active!(aclInit(configPath))
}

/// Finalizes ACL: every context and stream is released (pending work runs
/// first). Without a matching `aclInit`: `ACL_ERROR_REPEAT_FINALIZE`.
#[no_mangle]
pub extern "C" fn aclFinalize() -> aclError {
    call_active!(aclFinalize())
}

/// Makes `deviceId` the calling thread's device (its default context becomes
/// current). Counted: the device's default context is released after as many
/// `aclrtResetDevice` calls. Out of range: `ACL_ERROR_RT_INVALID_DEVICEID`.
#[no_mangle]
pub extern "C" fn aclrtSetDevice(deviceId: i32) -> aclError {
    call_active!(aclrtSetDevice(deviceId))
}

/// Undoes one `aclrtSetDevice`; the last one releases the device's default
/// context and its streams (pending work runs first). A device that is not
/// set is left as it is. Device memory is not freed.
#[no_mangle]
pub extern "C" fn aclrtResetDevice(deviceId: i32) -> aclError {
    call_active!(aclrtResetDevice(deviceId))
}

/// Resets `deviceId` whatever the number of `aclrtSetDevice` calls, releasing
/// every context on it (its own and those from `aclrtCreateContext`).
#[no_mangle]
pub extern "C" fn aclrtResetDeviceForce(deviceId: i32) -> aclError {
    call_active!(aclrtResetDeviceForce(deviceId))
}

/// The device of the calling thread's current context. No current context:
/// `ACL_ERROR_RT_CONTEXT_NULL`.
///
/// # Safety
/// `deviceId` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetDevice(deviceId: *mut i32) -> aclError {
    call_active!(aclrtGetDevice(deviceId))
}

/// The number of devices (`ACLALLOC_DEVICE_COUNT`, default 1).
///
/// # Safety
/// `count` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetDeviceCount(count: *mut u32) -> aclError {
    call_active!(aclrtGetDeviceCount(count))
}

/// Creates a context on `deviceId` and makes it current on the calling thread.
///
/// # Safety
/// `context` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateContext(context: *mut aclrtContext, deviceId: i32) -> aclError {
    call_active!(aclrtCreateContext(context, deviceId))
}

/// Destroys a context from `aclrtCreateContext` and its streams (pending work
/// runs first). A device's default context is refused.
///
/// # Safety
/// `context` is live for a real runtime; the host runtime refuses what is not.
#[no_mangle]
pub unsafe extern "C" fn aclrtDestroyContext(context: aclrtContext) -> aclError {
    call_active!(aclrtDestroyContext(context))
}

/// Makes `context` current on the calling thread.
///
/// # Safety
/// `context` is live for a real runtime; the host runtime refuses what is not.
#[no_mangle]
pub unsafe extern "C" fn aclrtSetCurrentContext(context: aclrtContext) -> aclError {
    call_active!(aclrtSetCurrentContext(context))
}

/// The calling thread's current context. None: `ACL_ERROR_RT_CONTEXT_NULL`.
///
/// # Safety
/// `context` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetCurrentContext(context: *mut aclrtContext) -> aclError {
    call_active!(aclrtGetCurrentContext(context))
}

/// Creates a stream in the current context: an in-order queue run by its own
/// host worker thread.
///
/// # Safety
/// `stream` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateStream(stream: *mut aclrtStream) -> aclError {
    call_active!(aclrtCreateStream(stream))
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
    call_active!(aclrtCreateStreamWithConfig(stream, priority, flag))
}

/// Destroys a stream once its pending work has run, and drops its allocator
/// registration (CANN keeps it; here a later stream can never inherit it).
///
/// # Safety
/// `stream` is live for a real runtime; the host runtime refuses what is not.
#[no_mangle]
pub unsafe extern "C" fn aclrtDestroyStream(stream: aclrtStream) -> aclError {
    call_active!(aclrtDestroyStream(stream))
}

/// Destroys a stream at once: work that has not started is dropped, the
/// running kernel is waited for. Drops the allocator registration too.
///
/// # Safety
/// `stream` is live for a real runtime; the host runtime refuses what is not.
#[no_mangle]
pub unsafe extern "C" fn aclrtDestroyStreamForce(stream: aclrtStream) -> aclError {
    call_active!(aclrtDestroyStreamForce(stream))
}

/// Waits until all work enqueued on `stream` (NULL: the current context's
/// default stream) has run.
///
/// # Safety
/// `stream` is live for a real runtime; the host runtime refuses what is not.
#[no_mangle]
pub unsafe extern "C" fn aclrtSynchronizeStream(stream: aclrtStream) -> aclError {
    call_active!(aclrtSynchronizeStream(stream))
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
    call_active!(aclrtSynchronizeStreamWithTimeout(stream, timeout))
}

/// Waits until all work enqueued on every stream has run.
#[no_mangle]
pub extern "C" fn aclrtSynchronizeDevice() -> aclError {
    call_active!(aclrtSynchronizeDevice())
}

/// The host backend's implementations.
pub(crate) mod host {
    use super::super::args;
    use super::super::boundary::boundary;
    use super::*;
    use crate::ffi::process::{host, note_late_runtime};
    use crate::ffi::stream_control::{
        stream_state_changed, ACL_RT_STREAM_STATE_CREATE_POST, ACL_RT_STREAM_STATE_DESTROY_PRE,
    };

    // The calls that start work also say once if a real runtime was loaded
    // too late (`note_late_runtime`).

    pub(crate) unsafe extern "C" fn aclInit(configPath: *const c_char) -> aclError {
        note_late_runtime();
        boundary("aclInit", || {
            // SAFETY: the caller's contract.
            host().init(unsafe { args::optional_cstr(configPath) })
        })
    }

    pub(crate) unsafe extern "C" fn aclFinalize() -> aclError {
        boundary("aclFinalize", || host().finalize())
    }

    pub(crate) unsafe extern "C" fn aclrtSetDevice(deviceId: i32) -> aclError {
        note_late_runtime();
        boundary("aclrtSetDevice", || host().set_device(deviceId))
    }

    pub(crate) unsafe extern "C" fn aclrtResetDevice(deviceId: i32) -> aclError {
        boundary("aclrtResetDevice", || host().reset_device(deviceId, false))
    }

    pub(crate) unsafe extern "C" fn aclrtResetDeviceForce(deviceId: i32) -> aclError {
        boundary("aclrtResetDeviceForce", || {
            host().reset_device(deviceId, true)
        })
    }

    pub(crate) unsafe extern "C" fn aclrtGetDevice(deviceId: *mut i32) -> aclError {
        boundary("aclrtGetDevice", || {
            // SAFETY: the caller's contract.
            unsafe { args::write_out(deviceId, "deviceId", || Ok(host().current_device()? as i32)) }
        })
    }

    pub(crate) unsafe extern "C" fn aclrtGetDeviceCount(count: *mut u32) -> aclError {
        boundary("aclrtGetDeviceCount", || {
            // SAFETY: the caller's contract.
            unsafe { args::write_out(count, "count", || host().device_count()) }
        })
    }

    pub(crate) unsafe extern "C" fn aclrtCreateContext(
        context: *mut aclrtContext,
        deviceId: i32,
    ) -> aclError {
        note_late_runtime();
        boundary("aclrtCreateContext", || {
            // SAFETY: the caller's contract.
            unsafe {
                args::write_out(context, "context", || {
                    Ok(host().create_context(deviceId)? as aclrtContext)
                })
            }
        })
    }

    pub(crate) unsafe extern "C" fn aclrtDestroyContext(context: aclrtContext) -> aclError {
        boundary("aclrtDestroyContext", || {
            host().destroy_context(args::context(context)?)
        })
    }

    pub(crate) unsafe extern "C" fn aclrtSetCurrentContext(context: aclrtContext) -> aclError {
        boundary("aclrtSetCurrentContext", || {
            host().set_current_context(args::context(context)?)
        })
    }

    pub(crate) unsafe extern "C" fn aclrtGetCurrentContext(context: *mut aclrtContext) -> aclError {
        boundary("aclrtGetCurrentContext", || {
            // SAFETY: the caller's contract.
            unsafe {
                args::write_out(context, "context", || {
                    Ok(host().current_context()?.0 as aclrtContext)
                })
            }
        })
    }

    pub(crate) unsafe extern "C" fn aclrtCreateStream(stream: *mut aclrtStream) -> aclError {
        note_late_runtime();
        boundary("aclrtCreateStream", || {
            // SAFETY: the caller's contract.
            unsafe {
                args::write_out(stream, "stream", || {
                    Ok(host().create_stream(0, 0)?.as_ptr())
                })?;
                stream_state_changed(*stream, ACL_RT_STREAM_STATE_CREATE_POST);
                Ok(())
            }
        })
    }

    pub(crate) unsafe extern "C" fn aclrtCreateStreamWithConfig(
        stream: *mut aclrtStream,
        priority: u32,
        flag: u32,
    ) -> aclError {
        note_late_runtime();
        boundary("aclrtCreateStreamWithConfig", || {
            // SAFETY: the caller's contract.
            unsafe {
                args::write_out(stream, "stream", || {
                    Ok(host().create_stream(priority, flag)?.as_ptr())
                })?;
                stream_state_changed(*stream, ACL_RT_STREAM_STATE_CREATE_POST);
                Ok(())
            }
        })
    }

    pub(crate) unsafe extern "C" fn aclrtDestroyStream(stream: aclrtStream) -> aclError {
        boundary("aclrtDestroyStream", || {
            let key = args::stream(stream)?;
            if host().resolve_stream(Some(key)).is_ok() {
                stream_state_changed(stream, ACL_RT_STREAM_STATE_DESTROY_PRE);
            }
            host().destroy_stream(key, false)
        })
    }

    pub(crate) unsafe extern "C" fn aclrtDestroyStreamForce(stream: aclrtStream) -> aclError {
        boundary("aclrtDestroyStreamForce", || {
            let key = args::stream(stream)?;
            if host().resolve_stream(Some(key)).is_ok() {
                stream_state_changed(stream, ACL_RT_STREAM_STATE_DESTROY_PRE);
            }
            host().destroy_stream(key, true)
        })
    }

    pub(crate) unsafe extern "C" fn aclrtSynchronizeStream(stream: aclrtStream) -> aclError {
        boundary("aclrtSynchronizeStream", || {
            host().synchronize_stream(args::optional_stream(stream))
        })
    }

    pub(crate) unsafe extern "C" fn aclrtSynchronizeStreamWithTimeout(
        stream: aclrtStream,
        timeout: i32,
    ) -> aclError {
        boundary("aclrtSynchronizeStreamWithTimeout", || {
            if timeout < -1 {
                return Err(crate::base::error::Error::InvalidParam {
                    param: "timeout",
                    reason: "It must be -1 (no limit) or a number of milliseconds",
                });
            }
            host().synchronize_stream_timeout(args::optional_stream(stream), timeout)
        })
    }

    pub(crate) unsafe extern "C" fn aclrtSynchronizeDevice() -> aclError {
        boundary("aclrtSynchronizeDevice", || {
            host().synchronize_all()?;
            crate::tracking::device_synchronized();
            host().take_task_failure()
        })
    }
}
