//! Building the default allocator before its first allocation, and where it
//! lives: what torch_npu's lazy initialisation and per-device statistics need
//! (`set_per_process_memory_fraction` before any allocation, `memory_stats(device)`).
#![allow(non_snake_case)]

use crate::base::boundary::ffi_boundary;
use crate::base::error::Error;
use crate::default_allocator::{global, Kind};
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args::Out;

/// Builds the default allocator now, as its first allocation would, so that
/// its object can be configured before anything is allocated (torch's lazy
/// initialisation). `aclallocSetDefaultAllocator` then fails with
/// `ACL_ERROR_REPEAT_INITIALIZE`. Calling it again does nothing.
///
/// Errors, as the first allocation's (the allocator stays unbuilt): an
/// invalid `ACLALLOC_DEFAULT_ALLOCATOR`: `ACL_ERROR_INVALID_PARAM`; the pool
/// without a current device: `ACL_ERROR_RT_CONTEXT_NULL`; a plugin that
/// cannot be loaded: `ACL_ERROR_INVALID_FILE`.
#[no_mangle]
pub extern "C" fn aclallocDefaultInit() -> aclError {
    ffi_boundary!(|| global().serving().map(|_| ()))
}

/// The device of the default allocator's object: for the caching pool the
/// calling thread's current device, otherwise the one current when the
/// default allocator was built. Before that: `ACL_ERROR_UNINITIALIZE`,
/// `*deviceId` untouched.
///
/// # Safety
/// `deviceId` must be writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocDefaultGetDevice(deviceId: *mut i32) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(deviceId, "deviceId") }?;
        let device = match global().in_use() {
            Some(source) if source.kind == Kind::Pool => crate::plugin::context::current_device(),
            _ => global().built_on().ok_or(Error::DefaultNotInUse)?,
        };
        out.write(device);
        Ok(())
    })
}
