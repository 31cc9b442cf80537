//! Building the default allocator before its first allocation, and where it
//! lives: what torch_npu's lazy initialisation and per-device statistics need
//! (`set_per_process_memory_fraction` before any allocation, `memory_stats(device)`).
#![allow(non_snake_case)]

use super::args::Out;
use super::boundary::boundary;
use super::types::*;
use crate::core::error::Error;
use crate::default_allocator::{global, Kind};

/// Builds the default allocator now, as its first allocation would (torch's
/// lazy initialisation): the environment's choice, or the allocator swapped
/// in with `aclallocSetDefaultAllocator`, is frozen, so that its object
/// (`aclallocGetDefaultAllocator`) can be configured before anything is
/// allocated, e.g. `aclallocPoolSetMemoryFraction` on the default pool. From
/// now on `aclallocSetDefaultAllocator` fails with `ACL_ERROR_REPEAT_INITIALIZE`,
/// as PyTorch's `change_current_allocator` does once its allocator is
/// initialized. The caching pool is built on the calling thread's current
/// device. Calling it again does nothing.
///
/// Errors, as the first allocation's: an invalid `ACLALLOC_DEFAULT_ALLOCATOR`:
/// `ACL_ERROR_INVALID_PARAM`; the pool, with no current device on the calling
/// thread: `ACL_ERROR_RT_CONTEXT_NULL`; a plugin that cannot be loaded:
/// `ACL_ERROR_INVALID_FILE`. The default allocator stays unbuilt then.
#[no_mangle]
pub extern "C" fn aclallocDefaultInit() -> aclError {
    boundary("aclallocDefaultInit", || global().serving().map(|_| ()))
}

/// The device of the default allocator's object (`aclallocGetDefaultAllocator`):
/// for the caching pool, one per device, the calling thread's current device
/// (whose pool that object is, so its statistics are that device's); for
/// others the device that was current on the thread that built the default
/// allocator (at its first allocation or `aclallocDefaultInit`). Before the default allocator is built:
/// `ACL_ERROR_UNINITIALIZE`, `*deviceId` untouched.
///
/// # Safety
/// `deviceId` must be writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocDefaultGetDevice(deviceId: *mut i32) -> aclError {
    boundary("aclallocDefaultGetDevice", || {
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
