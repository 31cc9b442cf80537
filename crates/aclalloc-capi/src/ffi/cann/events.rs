//! CANN's events (`acl_rt.h`): markers in a stream's queue that other
//! streams and the host wait for (see `crate::runtime::events`).
#![allow(non_snake_case, non_camel_case_types)]

use crate::base::error::{Error, ACL_SUCCESS};
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args::{self, Out};
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;
use crate::interpose::next::Sym;
use std::ffi::c_void;

/// An event handle.
pub type aclrtEvent = *mut c_void;

/// `aclrtCreateEventExWithFlag` flag: the event synchronizes streams.
pub const ACL_EVENT_SYNC: u32 = 0x0000_0001;
/// `aclrtCreateEventExWithFlag` flag: the event tracks a stream's progress.
pub const ACL_EVENT_CAPTURE_STREAM_PROGRESS: u32 = 0x0000_0002;
/// `aclrtCreateEventExWithFlag` flag: the event records timestamps.
pub const ACL_EVENT_TIME_LINE: u32 = 0x0000_0008;
/// `aclrtCreateEventExWithFlag` flag: used on the device only.
pub const ACL_EVENT_DEVICE_USE_ONLY: u32 = 0x0000_0010;
/// `aclrtCreateEventExWithFlag` flag: an external event.
pub const ACL_EVENT_EXTERNAL: u32 = 0x0000_0020;
/// `aclrtCreateEventExWithFlag` flag: an event other processes open (alone: no other flag with it).
pub const ACL_EVENT_IPC: u32 = 0x0000_0040;

/// An event's status (`aclrtQueryEvent`, deprecated by CANN).
pub type aclrtEventStatus = i32;
/// Complete.
pub const ACL_EVENT_STATUS_COMPLETE: aclrtEventStatus = 0;
/// Not ready.
pub const ACL_EVENT_STATUS_NOT_READY: aclrtEventStatus = 1;
/// Reserved.
pub const ACL_EVENT_STATUS_RESERVED: aclrtEventStatus = 2;

/// Whether an event's recorded work has run (`aclrtQueryEventStatus`).
pub type aclrtEventRecordedStatus = i32;
/// Some recorded work has not run.
pub const ACL_EVENT_RECORDED_STATUS_NOT_READY: aclrtEventRecordedStatus = 0;
/// All recorded work has run.
pub const ACL_EVENT_RECORDED_STATUS_COMPLETE: aclrtEventRecordedStatus = 1;

/// Whether the stream waits on an event have run (`aclrtQueryEventWaitStatus`).
pub type aclrtEventWaitStatus = i32;
/// Every wait has run.
pub const ACL_EVENT_WAIT_STATUS_COMPLETE: aclrtEventWaitStatus = 0;
/// Some wait has not run.
pub const ACL_EVENT_WAIT_STATUS_NOT_READY: aclrtEventWaitStatus = 1;
/// Reserved.
pub const ACL_EVENT_WAIT_STATUS_RESERVED: aclrtEventWaitStatus = 0xFFFF;

const ONLY_HOST_FLAGS: u32 =
    ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE | ACL_EVENT_CAPTURE_STREAM_PROGRESS;

unsafe fn create(event: *mut aclrtEvent, flag: u32, ex: bool) -> crate::base::error::Result<()> {
    // SAFETY: the caller's contract.
    unsafe {
        args::write_out(event, "event", || {
            Ok(host().create_event(flag, ex)? as aclrtEvent)
        })
    }
}

/// Creates an event in the current context. No current context:
/// `ACL_ERROR_RT_CONTEXT_NULL`.
///
/// # Safety
/// `event` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateEvent(event: *mut aclrtEvent) -> aclError {
    real_or_host!(aclrtCreateEvent(event: *mut aclrtEvent) {
        // SAFETY: the caller's contract.
        unsafe { create(event, ACL_EVENT_SYNC, false) }
    })
}

/// `aclrtCreateEvent` with `ACL_EVENT_*` flags (other bits:
/// `ACL_ERROR_INVALID_PARAM`; `ACL_EVENT_IPC` with another flag: the same).
///
/// # Safety
/// `event` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateEventWithFlag(event: *mut aclrtEvent, flag: u32) -> aclError {
    real_or_host!(aclrtCreateEventWithFlag(event: *mut aclrtEvent, flag: u32) {
        // SAFETY: the caller's contract.
        unsafe { create(event, flag, false) }
    })
}

/// As `aclrtCreateEventWithFlag`, but complete before its first record, and
/// `aclrtResetEvent` / `aclrtQueryEventWaitStatus` refuse it.
///
/// # Safety
/// `event` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateEventExWithFlag(event: *mut aclrtEvent, flag: u32) -> aclError {
    real_or_host!(aclrtCreateEventExWithFlag(event: *mut aclrtEvent, flag: u32) {
        if flag & !ONLY_HOST_FLAGS & !ACL_EVENT_IPC != 0 {
            return Err(Error::InvalidParam {
                param: "flag",
                reason: "It must be ACL_EVENT_TIME_LINE, ACL_EVENT_SYNC, ACL_EVENT_CAPTURE_STREAM_PROGRESS or ACL_EVENT_IPC",
            });
        }
        // SAFETY: the caller's contract.
        unsafe { create(event, flag, true) }
    })
}

/// Destroys an event at once; markers already queued still run.
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtDestroyEvent(event: aclrtEvent) -> aclError {
    let rc = real_or_host!(aclrtDestroyEvent(event: aclrtEvent) {
        host().destroy_event(required(event)?)
    });
    if rc == ACL_SUCCESS {
        crate::ffi::wiring::event_order::destroyed(event);
    }
    rc
}

fn required(event: aclrtEvent) -> crate::base::error::Result<usize> {
    args::address(event, "event").map(|e| e.as_ptr() as usize)
}

/// Records the event on `stream` (NULL: the default stream): a marker that
/// completes once everything enqueued on `stream` before it has run.
///
/// # Safety
/// None for the host runtime: the handles are looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtRecordEvent(event: aclrtEvent, stream: aclrtStream) -> aclError {
    let rc = real_or_host!(aclrtRecordEvent(event: aclrtEvent, stream: aclrtStream) {
        host().record_event(required(event)?, args::optional_stream(stream))
    });
    if rc == ACL_SUCCESS {
        crate::ffi::wiring::event_order::recorded(Sym::aclrtRecordEvent, event, stream);
    }
    rc
}

/// Puts the event back in its initial state when `stream` reaches this point.
///
/// # Safety
/// None for the host runtime: the handles are looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtResetEvent(event: aclrtEvent, stream: aclrtStream) -> aclError {
    real_or_host!(aclrtResetEvent(event: aclrtEvent, stream: aclrtStream) {
        host().reset_event(required(event)?, args::optional_stream(stream))
    })
}

/// Makes `stream` (NULL: the default stream) run nothing enqueued after this
/// call before the event's last record has completed. Returns at once.
///
/// # Safety
/// None for the host runtime: the handles are looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamWaitEvent(stream: aclrtStream, event: aclrtEvent) -> aclError {
    let rc = real_or_host!(aclrtStreamWaitEvent(stream: aclrtStream, event: aclrtEvent) {
        host().stream_wait_event(args::optional_stream(stream), required(event)?)
    });
    if rc == ACL_SUCCESS {
        crate::ffi::wiring::event_order::waited(Sym::aclrtStreamWaitEvent, stream, event);
    }
    rc
}

/// `ACL_EVENT_RECORDED_STATUS_COMPLETE` once all recorded work has run, else
/// `_NOT_READY` (also for an event never recorded, unless it is from
/// `aclrtCreateEventExWithFlag`).
///
/// # Safety
/// `status` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtQueryEventStatus(
    event: aclrtEvent,
    status: *mut aclrtEventRecordedStatus,
) -> aclError {
    real_or_host!(aclrtQueryEventStatus(event: aclrtEvent, status: *mut aclrtEventRecordedStatus) {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(status, "status") }?;
        let done = host().event_complete(required(event)?)?;
        out.write(if done { ACL_EVENT_RECORDED_STATUS_COMPLETE } else { ACL_EVENT_RECORDED_STATUS_NOT_READY });
        Ok(())
    })
}

/// `ACL_EVENT_WAIT_STATUS_COMPLETE` once every `aclrtStreamWaitEvent` on the
/// event has been passed by its stream, else `_NOT_READY`.
///
/// # Safety
/// `status` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtQueryEventWaitStatus(
    event: aclrtEvent,
    status: *mut aclrtEventWaitStatus,
) -> aclError {
    real_or_host!(aclrtQueryEventWaitStatus(event: aclrtEvent, status: *mut aclrtEventWaitStatus) {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(status, "status") }?;
        let done = host().event_waits_complete(required(event)?)?;
        out.write(if done { ACL_EVENT_WAIT_STATUS_COMPLETE } else { ACL_EVENT_WAIT_STATUS_NOT_READY });
        Ok(())
    })
}

/// Blocks until the event's last record (made before the call) has run.
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtSynchronizeEvent(event: aclrtEvent) -> aclError {
    real_or_host!(aclrtSynchronizeEvent(event: aclrtEvent) {
        host().synchronize_event(required(event)?, -1)
    })
}

/// As `aclrtSynchronizeEvent`, giving up after `timeout` ms (-1: no limit;
/// 0 or below -1: `ACL_ERROR_INVALID_PARAM`) with
/// `ACL_ERROR_RT_EVENT_SYNC_TIMEOUT`.
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtSynchronizeEventWithTimeout(
    event: aclrtEvent,
    timeout: i32,
) -> aclError {
    real_or_host!(aclrtSynchronizeEventWithTimeout(event: aclrtEvent, timeout: i32) {
        host().synchronize_event(required(event)?, timeout)
    })
}

/// Milliseconds between the runs of two completed records. Either not
/// recorded or not run yet: `ACL_ERROR_RT_EVENT_NOT_COMPLETE`.
///
/// # Safety
/// `ms` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtEventElapsedTime(
    ms: *mut f32,
    startEvent: aclrtEvent,
    endEvent: aclrtEvent,
) -> aclError {
    real_or_host!(aclrtEventElapsedTime(ms: *mut f32, startEvent: aclrtEvent, endEvent: aclrtEvent) {
        let (start, end) = (
            args::address(startEvent, "startEvent")?.as_ptr() as usize,
            args::address(endEvent, "endEvent")?.as_ptr() as usize,
        );
        // SAFETY: the caller's contract.
        unsafe { args::write_out(ms, "ms", || host().event_elapsed_ms(start, end)) }
    })
}

/// When the event's last record ran, in µs on a monotonic clock. Not
/// recorded or not run yet: `ACL_ERROR_RT_EVENT_NOT_COMPLETE`.
///
/// # Safety
/// `timestamp` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtEventGetTimestamp(
    event: aclrtEvent,
    timestamp: *mut u64,
) -> aclError {
    real_or_host!(aclrtEventGetTimestamp(event: aclrtEvent, timestamp: *mut u64) {
        let event = required(event)?;
        // SAFETY: the caller's contract.
        unsafe { args::write_out(timestamp, "timestamp", || host().event_timestamp_us(event)) }
    })
}

/// `aclrtRecordEventWithFlag`: an ordinary record.
pub const ACL_EVENT_RECORD_DEFAULT: u32 = 0x0;
/// `aclrtRecordEventWithFlag`: a record external to a captured graph (on
/// the host runtime, every record a capture takes is one a wait outside
/// the model sees).
pub const ACL_EVENT_RECORD_EXTERNAL: u32 = 0x01;

/// `aclrtRecordEvent` with a behaviour flag: `ACL_EVENT_RECORD_DEFAULT` or
/// `ACL_EVENT_RECORD_EXTERNAL` (other values: `ACL_ERROR_INVALID_PARAM`).
///
/// # Safety
/// None for the host runtime: the handles are looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtRecordEventWithFlag(
    event: aclrtEvent,
    stream: aclrtStream,
    flag: u32,
) -> aclError {
    let rc = real_or_host!(aclrtRecordEventWithFlag(event: aclrtEvent, stream: aclrtStream, flag: u32) {
        if flag != ACL_EVENT_RECORD_DEFAULT && flag != ACL_EVENT_RECORD_EXTERNAL {
            return Err(Error::InvalidParam {
                param: "flag",
                reason: "It must be ACL_EVENT_RECORD_DEFAULT or ACL_EVENT_RECORD_EXTERNAL",
            });
        }
        host().record_event(required(event)?, args::optional_stream(stream))
    });
    if rc == ACL_SUCCESS {
        crate::ffi::wiring::event_order::recorded(Sym::aclrtRecordEventWithFlag, event, stream);
    }
    rc
}

/// As `aclrtStreamWaitEvent`, but `stream` waits at most `timeout` seconds
/// (0: no limit; below 0: `ACL_ERROR_INVALID_PARAM`). When the time runs
/// out the stream goes on and its next synchronize returns
/// `ACL_ERROR_RT_EVENT_SYNC_TIMEOUT`.
///
/// # Safety
/// None for the host runtime: the handles are looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamWaitEventWithTimeout(
    stream: aclrtStream,
    event: aclrtEvent,
    timeout: i32,
) -> aclError {
    let rc = real_or_host!(aclrtStreamWaitEventWithTimeout(stream: aclrtStream, event: aclrtEvent, timeout: i32) {
        host().stream_wait_event_timeout(args::optional_stream(stream), required(event)?, timeout)
    });
    // Only a wait with no limit orders the streams: a timed one may run out
    // before the record has run, and the stream goes on.
    if rc == ACL_SUCCESS && timeout == 0 {
        crate::ffi::wiring::event_order::waited(
            Sym::aclrtStreamWaitEventWithTimeout,
            stream,
            event,
        );
    }
    rc
}

/// `aclrtStreamWaitEventWithFlag`: an ordinary wait.
pub const ACL_EVENT_WAIT_DEFAULT: u32 = 0x0;
/// `aclrtStreamWaitEventWithFlag`: a captured graph's wait for a record
/// made outside it: at each replay, the model waits for a record of the
/// event completed since its last reset (as for an `ACL_EVENT_EXTERNAL`
/// event); outside a capture, an ordinary wait.
pub const ACL_EVENT_WAIT_EXTERNAL: u32 = 0x01;

/// `aclrtStreamWaitEvent` with a behaviour flag (`ACL_EVENT_WAIT_DEFAULT`
/// or `ACL_EVENT_WAIT_EXTERNAL`) and a limit in seconds as
/// `aclrtStreamWaitEventWithTimeout`'s (0: none; `ACL_EVENT_WAIT_EXTERNAL`
/// takes 0 only).
///
/// # Safety
/// None for the host runtime: the handles are looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamWaitEventWithFlag(
    stream: aclrtStream,
    event: aclrtEvent,
    timeout: u32,
    flag: u32,
) -> aclError {
    let rc = real_or_host!(aclrtStreamWaitEventWithFlag(stream: aclrtStream, event: aclrtEvent, timeout: u32, flag: u32) {
        if flag != ACL_EVENT_WAIT_DEFAULT && flag != ACL_EVENT_WAIT_EXTERNAL {
            return Err(Error::InvalidParam {
                param: "flag",
                reason: "It must be ACL_EVENT_WAIT_DEFAULT or ACL_EVENT_WAIT_EXTERNAL",
            });
        }
        let Ok(seconds) = i32::try_from(timeout) else {
            return Err(Error::InvalidParam {
                param: "timeout",
                reason: "It is too large",
            });
        };
        if flag == ACL_EVENT_WAIT_EXTERNAL && seconds != 0 {
            return Err(Error::InvalidParam {
                param: "timeout",
                reason: "ACL_EVENT_WAIT_EXTERNAL takes 0 only",
            });
        }
        if seconds == 0 {
            let external = flag == ACL_EVENT_WAIT_EXTERNAL;
            return host().stream_wait_event_flag(args::optional_stream(stream), required(event)?, external);
        }
        host().stream_wait_event_timeout(args::optional_stream(stream), required(event)?, seconds)
    });
    if rc == ACL_SUCCESS && timeout == 0 {
        crate::ffi::wiring::event_order::waited(Sym::aclrtStreamWaitEventWithFlag, stream, event);
    }
    rc
}
