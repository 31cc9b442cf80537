//! CANN's IPC event calls (`acl_rt.h`). Forwarded to a real CANN in front of
//! this library; the host runtime has no IPC events (`ACL_EVENT_IPC` is
//! refused at creation), so after their argument checks they answer
//! `ACL_ERROR_API_NOT_SUPPORT`.
#![allow(non_snake_case, non_camel_case_types)]

use super::args::{self, Out};
use super::events::aclrtEvent;
use super::forward::real_or_host;
use super::types::*;
use crate::base::error::Error;
use std::ffi::c_char;

/// The size of an `aclrtIpcEventHandle`.
pub const ACL_IPC_EVENT_HANDLE_SIZE: u32 = 64;

/// An event handed to another process.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclrtIpcEventHandle {
    /// The handle's bytes.
    pub reserved: [c_char; 64],
}

const NO_IPC_EVENTS: Error = Error::NotSupported {
    what: "IPC events on the host runtime (share a notify with aclrtNotifyGetExportKey instead)",
};

/// The handle another process opens `event` with (an `ACL_EVENT_IPC` event).
///
/// # Safety
/// `handle` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcGetEventHandle(
    event: aclrtEvent,
    handle: *mut aclrtIpcEventHandle,
) -> aclError {
    real_or_host!(aclrtIpcGetEventHandle(event: aclrtEvent, handle: *mut aclrtIpcEventHandle) {
        args::address(event, "event")?;
        // SAFETY: the caller's contract.
        unsafe { Out::required(handle, "handle") }?;
        Err(NO_IPC_EVENTS)
    })
}

/// Opens another process's event from its handle.
///
/// # Safety
/// `event` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcOpenEventHandle(
    handle: aclrtIpcEventHandle,
    event: *mut aclrtEvent,
) -> aclError {
    real_or_host!(aclrtIpcOpenEventHandle(handle: aclrtIpcEventHandle, event: *mut aclrtEvent) {
        let _ = handle;
        // SAFETY: the caller's contract.
        unsafe { Out::required(event, "event") }?;
        Err(NO_IPC_EVENTS)
    })
}
