//! CANN's `acl.h` / `acl_rt.h`: initialization, devices, contexts, streams.
//!
//! Each export forwards to the active runtime backend
//! ([`super::dispatch`]), chosen once, at the first runtime call. The host backend's
//! implementations are in the private `host` module; each runs its body
//! through the crate's one boundary function.
#![allow(non_snake_case)]

use super::boundary::passthrough;
use super::dispatch::active;
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
    // SAFETY: `active()` holds `aclInit` of the chosen backend (the host's or the real CANN
    // symbol), with acl_rt.h's signature; `configPath` is passed unchanged under this export's
    // own contract (NULL or NUL-terminated).
    passthrough("aclInit", || unsafe { (active().aclInit)(configPath) })
}

/// Finalizes ACL: every context and stream is released (pending work runs
/// first). Without a matching `aclInit`: `ACL_ERROR_REPEAT_FINALIZE`.
#[no_mangle]
pub extern "C" fn aclFinalize() -> aclError {
    // SAFETY: `active()` holds `aclFinalize` of the chosen backend (the host's or the real CANN
    // symbol), with acl_rt.h's signature; no pointer arguments.
    passthrough("aclFinalize", || unsafe { (active().aclFinalize)() })
}

/// Makes `deviceId` the calling thread's device (its default context becomes
/// current). Counted: the device's default context is released after as many
/// `aclrtResetDevice` calls. Out of range: `ACL_ERROR_RT_INVALID_DEVICEID`.
#[no_mangle]
pub extern "C" fn aclrtSetDevice(deviceId: i32) -> aclError {
    // SAFETY: `active()` holds `aclrtSetDevice` of the chosen backend (the host's or the real
    // CANN symbol), with acl_rt.h's signature; no pointer arguments.
    passthrough("aclrtSetDevice", || unsafe {
        (active().aclrtSetDevice)(deviceId)
    })
}

/// Undoes one `aclrtSetDevice`; the last one releases the device's default
/// context and its streams (pending work runs first). A device that is not
/// set is left as it is. Device memory is not freed.
#[no_mangle]
pub extern "C" fn aclrtResetDevice(deviceId: i32) -> aclError {
    // SAFETY: `active()` holds `aclrtResetDevice` of the chosen backend (the host's or the real
    // CANN symbol), with acl_rt.h's signature; no pointer arguments.
    passthrough("aclrtResetDevice", || unsafe {
        (active().aclrtResetDevice)(deviceId)
    })
}

/// Resets `deviceId` whatever the number of `aclrtSetDevice` calls, releasing
/// every context on it (its own and those from `aclrtCreateContext`).
#[no_mangle]
pub extern "C" fn aclrtResetDeviceForce(deviceId: i32) -> aclError {
    // SAFETY: `active()` holds `aclrtResetDeviceForce` of the chosen backend (the host's or the
    // real CANN symbol), with acl_rt.h's signature; no pointer arguments.
    passthrough("aclrtResetDeviceForce", || unsafe {
        (active().aclrtResetDeviceForce)(deviceId)
    })
}

/// The device of the calling thread's current context. No current context:
/// `ACL_ERROR_RT_CONTEXT_NULL`.
///
/// # Safety
/// `deviceId` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetDevice(deviceId: *mut i32) -> aclError {
    // SAFETY: `active()` holds `aclrtGetDevice` of the chosen backend (the host's or the real
    // CANN symbol), with acl_rt.h's signature; `deviceId` is NULL or writable (this export's
    // contract), the host backend refuses NULL, the real runtime gets it as it would without
    // this library.
    passthrough("aclrtGetDevice", || unsafe {
        (active().aclrtGetDevice)(deviceId)
    })
}

/// The number of devices (`ACLALLOC_DEVICE_COUNT`, default 1).
///
/// # Safety
/// `count` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetDeviceCount(count: *mut u32) -> aclError {
    // SAFETY: `active()` holds `aclrtGetDeviceCount` of the chosen backend (the host's or the
    // real CANN symbol), with acl_rt.h's signature; `count` is NULL or writable (this export's
    // contract), the host backend refuses NULL, the real runtime gets it as it would without
    // this library.
    passthrough("aclrtGetDeviceCount", || unsafe {
        (active().aclrtGetDeviceCount)(count)
    })
}

/// Creates a context on `deviceId` and makes it current on the calling thread.
///
/// # Safety
/// `context` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateContext(context: *mut aclrtContext, deviceId: i32) -> aclError {
    // SAFETY: `active()` holds `aclrtCreateContext` of the chosen backend (the host's or the
    // real CANN symbol), with acl_rt.h's signature; `context` is NULL or writable (this
    // export's contract), the host backend refuses NULL, the real runtime gets it as it would
    // without this library.
    passthrough("aclrtCreateContext", || unsafe {
        (active().aclrtCreateContext)(context, deviceId)
    })
}

/// Destroys a context from `aclrtCreateContext` and its streams (pending work
/// runs first). A device's default context is refused.
///
/// # Safety
/// `context` is one this library handed out, or anything else: the host backend
/// looks it up and refuses what is not live; a runtime forwarded to may not.
#[no_mangle]
pub unsafe extern "C" fn aclrtDestroyContext(context: aclrtContext) -> aclError {
    // SAFETY: `active()` holds `aclrtDestroyContext` of the chosen backend (the host's or the
    // real CANN symbol), with acl_rt.h's signature; `context` is passed unchanged: the host
    // backend looks it up in its live-handle table, the real runtime gets what the caller gave
    // it.
    passthrough("aclrtDestroyContext", || unsafe {
        (active().aclrtDestroyContext)(context)
    })
}

/// Makes `context` current on the calling thread.
///
/// # Safety
/// `context` is one this library handed out, or anything else: the host backend
/// looks it up and refuses what is not live; a runtime forwarded to may not.
#[no_mangle]
pub unsafe extern "C" fn aclrtSetCurrentContext(context: aclrtContext) -> aclError {
    // SAFETY: `active()` holds `aclrtSetCurrentContext` of the chosen backend (the host's or
    // the real CANN symbol), with acl_rt.h's signature; `context` is passed unchanged: the host
    // backend looks it up in its live-handle table, the real runtime gets what the caller gave
    // it.
    passthrough("aclrtSetCurrentContext", || unsafe {
        (active().aclrtSetCurrentContext)(context)
    })
}

/// The calling thread's current context. None: `ACL_ERROR_RT_CONTEXT_NULL`.
///
/// # Safety
/// `context` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetCurrentContext(context: *mut aclrtContext) -> aclError {
    // SAFETY: `active()` holds `aclrtGetCurrentContext` of the chosen backend (the host's or
    // the real CANN symbol), with acl_rt.h's signature; `context` is NULL or writable (this
    // export's contract), the host backend refuses NULL, the real runtime gets it as it would
    // without this library.
    passthrough("aclrtGetCurrentContext", || unsafe {
        (active().aclrtGetCurrentContext)(context)
    })
}

/// Creates a stream in the current context: an in-order queue run by its own
/// host worker thread.
///
/// # Safety
/// `stream` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateStream(stream: *mut aclrtStream) -> aclError {
    // SAFETY: `active()` holds `aclrtCreateStream` of the chosen backend (the host's or the
    // real CANN symbol), with acl_rt.h's signature; `stream` is NULL or writable (this export's
    // contract), the host backend refuses NULL, the real runtime gets it as it would without
    // this library.
    passthrough("aclrtCreateStream", || unsafe {
        (active().aclrtCreateStream)(stream)
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
    // SAFETY: `active()` holds `aclrtCreateStreamWithConfig` of the chosen backend (the host's
    // or the real CANN symbol), with acl_rt.h's signature; `stream` is NULL or writable (this
    // export's contract), the host backend refuses NULL, the real runtime gets it as it would
    // without this library.
    passthrough("aclrtCreateStreamWithConfig", || unsafe {
        (active().aclrtCreateStreamWithConfig)(stream, priority, flag)
    })
}

/// Destroys a stream once its pending work has run, and drops its allocator
/// registration (CANN keeps it; here a later stream can never inherit it).
///
/// # Safety
/// `stream` is one this library handed out, or anything else: the host backend
/// looks it up and refuses what is not live; a runtime forwarded to may not.
#[no_mangle]
pub unsafe extern "C" fn aclrtDestroyStream(stream: aclrtStream) -> aclError {
    // SAFETY: `active()` holds `aclrtDestroyStream` of the chosen backend (the host's or the
    // real CANN symbol), with acl_rt.h's signature; `stream` is passed unchanged: the host
    // backend looks it up in its live-handle table, the real runtime gets what the caller gave
    // it.
    passthrough("aclrtDestroyStream", || unsafe {
        (active().aclrtDestroyStream)(stream)
    })
}

/// Destroys a stream at once: work that has not started is dropped, the
/// running kernel is waited for. Drops the allocator registration too.
///
/// # Safety
/// `stream` is one this library handed out, or anything else: the host backend
/// looks it up and refuses what is not live; a runtime forwarded to may not.
#[no_mangle]
pub unsafe extern "C" fn aclrtDestroyStreamForce(stream: aclrtStream) -> aclError {
    // SAFETY: `active()` holds `aclrtDestroyStreamForce` of the chosen backend (the host's or
    // the real CANN symbol), with acl_rt.h's signature; `stream` is passed unchanged: the host
    // backend looks it up in its live-handle table, the real runtime gets what the caller gave
    // it.
    passthrough("aclrtDestroyStreamForce", || unsafe {
        (active().aclrtDestroyStreamForce)(stream)
    })
}

/// Waits until all work enqueued on `stream` (NULL: the current context's
/// default stream) has run.
///
/// # Safety
/// `stream` is one this library handed out, or anything else: the host backend
/// looks it up and refuses what is not live; a runtime forwarded to may not.
#[no_mangle]
pub unsafe extern "C" fn aclrtSynchronizeStream(stream: aclrtStream) -> aclError {
    // SAFETY: `active()` holds `aclrtSynchronizeStream` of the chosen backend (the host's or
    // the real CANN symbol), with acl_rt.h's signature; `stream` is passed unchanged: the host
    // backend looks it up in its live-handle table, the real runtime gets what the caller gave
    // it.
    passthrough("aclrtSynchronizeStream", || unsafe {
        (active().aclrtSynchronizeStream)(stream)
    })
}

/// As `aclrtSynchronizeStream`, giving up after `timeout` ms (-1: wait as
/// long as it takes). The host runtime's kernels are host functions that run
/// to completion, so it waits for them without enforcing the timeout.
///
/// # Safety
/// As `aclrtSynchronizeStream`.
#[no_mangle]
pub unsafe extern "C" fn aclrtSynchronizeStreamWithTimeout(
    stream: aclrtStream,
    timeout: i32,
) -> aclError {
    // SAFETY: `active()` holds `aclrtSynchronizeStreamWithTimeout` of the chosen backend (the
    // host's or the real CANN symbol), with acl_rt.h's signature; `stream` is passed unchanged:
    // the host backend looks it up in its live-handle table, the real runtime gets what the
    // caller gave it.
    passthrough("aclrtSynchronizeStreamWithTimeout", || unsafe {
        (active().aclrtSynchronizeStreamWithTimeout)(stream, timeout)
    })
}

/// Waits until all work enqueued on every stream has run.
#[no_mangle]
pub extern "C" fn aclrtSynchronizeDevice() -> aclError {
    // SAFETY: `active()` holds `aclrtSynchronizeDevice` of the chosen backend (the host's or
    // the real CANN symbol), with acl_rt.h's signature; no pointer arguments.
    passthrough("aclrtSynchronizeDevice", || unsafe {
        (active().aclrtSynchronizeDevice)()
    })
}

/// The host backend's implementations.
pub(crate) mod host {
    use super::super::args::{self, Out};
    use super::super::boundary::boundary;
    use super::*;
    use crate::ffi::process::{host, note_late_runtime};

    // The calls that start work on the host runtime (init, device, context,
    // stream) also look whether a real runtime was loaded since this library
    // began serving, to say so once (`note_late_runtime`).

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
            let out = unsafe { Out::required(deviceId, "deviceId") }?;
            out.write(host().current_device()? as i32);
            Ok(())
        })
    }

    pub(crate) unsafe extern "C" fn aclrtGetDeviceCount(count: *mut u32) -> aclError {
        boundary("aclrtGetDeviceCount", || {
            // SAFETY: the caller's contract.
            let out = unsafe { Out::required(count, "count") }?;
            out.write(host().device_count()?);
            Ok(())
        })
    }

    pub(crate) unsafe extern "C" fn aclrtCreateContext(
        context: *mut aclrtContext,
        deviceId: i32,
    ) -> aclError {
        note_late_runtime();
        boundary("aclrtCreateContext", || {
            // SAFETY: the caller's contract.
            let out = unsafe { Out::required(context, "context") }?;
            out.write(host().create_context(deviceId)? as aclrtContext);
            Ok(())
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
            let out = unsafe { Out::required(context, "context") }?;
            out.write(host().current_context()?.0 as aclrtContext);
            Ok(())
        })
    }

    pub(crate) unsafe extern "C" fn aclrtCreateStream(stream: *mut aclrtStream) -> aclError {
        note_late_runtime();
        boundary("aclrtCreateStream", || {
            // SAFETY: the caller's contract.
            let out = unsafe { Out::required(stream, "stream") }?;
            out.write(host().create_stream(0, 0)?.as_ptr());
            Ok(())
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
            let out = unsafe { Out::required(stream, "stream") }?;
            out.write(host().create_stream(priority, flag)?.as_ptr());
            Ok(())
        })
    }

    pub(crate) unsafe extern "C" fn aclrtDestroyStream(stream: aclrtStream) -> aclError {
        boundary("aclrtDestroyStream", || {
            host().destroy_stream(args::stream(stream)?, false)
        })
    }

    pub(crate) unsafe extern "C" fn aclrtDestroyStreamForce(stream: aclrtStream) -> aclError {
        boundary("aclrtDestroyStreamForce", || {
            host().destroy_stream(args::stream(stream)?, true)
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
                return Err(crate::core::error::Error::InvalidParam {
                    param: "timeout",
                    reason: "It must be -1 (no limit) or a number of milliseconds",
                });
            }
            host().synchronize_stream(args::optional_stream(stream))
        })
    }

    pub(crate) unsafe extern "C" fn aclrtSynchronizeDevice() -> aclError {
        boundary("aclrtSynchronizeDevice", || {
            host().synchronize_all()?;
            crate::tracking::device_synchronized();
            Ok(())
        })
    }
}
