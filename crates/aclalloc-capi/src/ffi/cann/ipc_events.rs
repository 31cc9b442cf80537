//! CANN's IPC event calls (`acl_rt.h`): an event created with
//! `ACL_EVENT_IPC` is opened by other processes of the host from its handle
//! (see `crate::runtime::ipc_event`).
#![allow(non_snake_case, non_camel_case_types)]

use crate::base::error::Error;
use crate::ffi::cann::events::aclrtEvent;
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args::{self, Out};
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;
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

/// The first bytes of every handle this library makes, so that bytes of
/// another origin are told apart from a handle whose event is gone.
const MAGIC: [u8; 8] = *b"aclaIPCE";

fn to_bytes(shared: u64) -> aclrtIpcEventHandle {
    let mut bytes = [0u8; 64];
    bytes[..8].copy_from_slice(&MAGIC);
    bytes[8..16].copy_from_slice(&shared.to_le_bytes());
    aclrtIpcEventHandle {
        reserved: bytes.map(|b| b as c_char),
    }
}

fn from_bytes(handle: &aclrtIpcEventHandle) -> crate::base::error::Result<u64> {
    let bytes = handle.reserved.map(|c| c as u8);
    if bytes[..8] != MAGIC || bytes[16..].iter().any(|&b| b != 0) {
        return Err(Error::InvalidParam {
            param: "handle",
            reason: "It is not a handle returned by aclrtIpcGetEventHandle",
        });
    }
    Ok(u64::from_le_bytes(
        bytes[8..16].try_into().unwrap_or_default(),
    ))
}

/// The handle another process opens `event` with: an event of this
/// process created with `ACL_EVENT_IPC` (other events:
/// `ACL_ERROR_INVALID_PARAM`). The handle names the event until it is
/// destroyed.
///
/// # Safety
/// `handle` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcGetEventHandle(
    event: aclrtEvent,
    handle: *mut aclrtIpcEventHandle,
) -> aclError {
    real_or_host!(aclrtIpcGetEventHandle(event: aclrtEvent, handle: *mut aclrtIpcEventHandle) {
        let event = args::address(event, "event")?.as_ptr() as usize;
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(handle, "handle") }?;
        out.write(to_bytes(host().ipc_event_handle(event)?));
        Ok(())
    })
}

/// Opens another process's IPC event from its handle, in the current
/// context: the event may be waited on, recorded, synchronized, queried
/// and destroyed. A handle naming no live IPC event (made up, from another
/// run, its event destroyed or its process gone): `ACL_ERROR_INVALID_PARAM`.
///
/// # Safety
/// `event` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcOpenEventHandle(
    handle: aclrtIpcEventHandle,
    event: *mut aclrtEvent,
) -> aclError {
    real_or_host!(aclrtIpcOpenEventHandle(handle: aclrtIpcEventHandle, event: *mut aclrtEvent) {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(event, "event") }?;
        let shared = from_bytes(&handle)?;
        out.write(host().open_ipc_event(shared)? as aclrtEvent);
        Ok(())
    })
}
