//! The default allocator for C: raw alloc/free (PyTorch's
//! `caching_allocator_alloc`/`caching_allocator_delete`) and swapping it
//! (`change_current_allocator`).
#![allow(non_snake_case)]

use crate::base::boundary::ffi_boundary;
use crate::base::error::Error;
use crate::default_allocator::{global, Kind, Source};
use crate::ffi::cann::types::*;
use crate::ffi::ext::plugin::aclallocAllocatorStats;
use crate::ffi::wiring::args::{self, Out};
use crate::registry::StreamKey;
use std::ffi::{c_char, c_void, CStr};
use std::ptr::NonNull;

/// Allocates `size` bytes from the default allocator for `stream` (NULL: no
/// particular stream), like PyTorch's `caching_allocator_alloc`; the first
/// allocation fixes which allocator that is. `ACLALLOC_DEFAULT_ALLOCATOR`
/// chooses it: `pool` (default: one caching pool per device, configured by
/// `ACLALLOC_ALLOC_CONF`), `device` (no caching) or
/// `plugin:PATH:ALLOC_SYMBOL:FREE_SYMBOL` (PATH may contain ':'). It also
/// serves launch workspaces on streams without a registered allocator.
///
/// Errors: an invalid choice or NULL `devPtr`: `ACL_ERROR_INVALID_PARAM`; no
/// memory: `ACL_ERROR_RT_MEMORY_ALLOCATION`. `*devPtr` is written only on
/// success.
///
/// # Safety
/// `devPtr` must be writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocDefaultMalloc(
    devPtr: *mut *mut c_void,
    size: usize,
    stream: aclrtStream,
) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract.
        unsafe {
            args::write_out(devPtr, "devPtr", || {
                Ok(global().alloc(size, StreamKey::from_ptr(stream))?.as_ptr())
            })
        }
    })
}

/// Frees memory from `aclallocDefaultMalloc`, like PyTorch's
/// `caching_allocator_delete`. Anything else, or a second free:
/// `ACL_ERROR_INVALID_PARAM`, and the allocator is not called.
#[no_mangle]
pub extern "C" fn aclallocDefaultFree(devPtr: *mut c_void) -> aclError {
    ffi_boundary!(|| {
        global().free(NonNull::new(devPtr).ok_or(Error::NullPointer { param: "devPtr" })?)
    })
}

/// Makes a copy of the allocator `allocatorDesc` holds the default allocator,
/// like PyTorch's `change_current_allocator` (a pluggable allocator then
/// cannot be destroyed while it is the default). After the default allocator's
/// first allocation: `ACL_ERROR_REPEAT_INITIALIZE`; an incomplete or dead
/// descriptor: `ACL_ERROR_INVALID_PARAM`.
#[no_mangle]
pub extern "C" fn aclallocSetDefaultAllocator(allocatorDesc: aclrtAllocatorDesc) -> aclError {
    ffi_boundary!(|| {
        let source = Source::from_descriptor(args::descriptor(allocatorDesc)?)?;
        global().swap(source)
    })
}

/// The default allocator's kind (static): "pool", "device", "plugin" or
/// "descriptor"; NULL if `ACLALLOC_DEFAULT_ALLOCATOR` is invalid.
#[no_mangle]
pub extern "C" fn aclallocGetDefaultAllocatorName() -> *const c_char {
    ffi_boundary!(|| {
        let name: &'static CStr = match global().kind()? {
            Kind::Pool => c"pool",
            Kind::Device => c"device",
            Kind::Plugin => c"plugin",
            Kind::Descriptor => c"descriptor",
        };
        Ok(name.as_ptr())
    })
}

/// The default allocator's object: the `aclallocPool` of the calling thread's
/// device for the caching pool, the `aclallocPluggable` of a pluggable one,
/// a swapped-in descriptor's object. Before the first allocation:
/// `ACL_ERROR_UNINITIALIZE`, `*allocator` untouched.
///
/// # Safety
/// `allocator` must be writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocGetDefaultAllocator(allocator: *mut aclrtAllocator) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(allocator, "allocator") }?;
        let source = global().in_use().ok_or(Error::DefaultNotInUse)?;
        let obj = match source.kind {
            // One pool per device: the calling thread's device's.
            Kind::Pool => crate::default_allocator::per_device::current()? as *mut c_void,
            _ => source.callbacks.obj.as_ptr(),
        };
        out.write(obj);
        Ok(())
    })
}

/// Statistics of the default allocator's blocks (launch workspaces included,
/// except for direct device memory). For the caching pool: the block and
/// byte counts `aclallocPoolGetStats` reports (they reset together), its
/// out-of-memory count as failed allocations, and the frees refused here.
///
/// # Safety
/// `stats` must be writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocDefaultGetStats(stats: *mut aclallocAllocatorStats) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract.
        unsafe { args::write_out(stats, "stats", || Ok(global().stats().into())) }
    })
}
