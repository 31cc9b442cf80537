//! The default allocator for C: raw alloc/free (PyTorch's
//! `caching_allocator_alloc`/`caching_allocator_delete`) and swapping it
//! (`change_current_allocator`).
#![allow(non_snake_case)]

use super::args::{self, Out};
use super::boundary::boundary;
use super::plugin::aclallocAllocatorStats;
use super::types::*;
use crate::core::error::Error;
use crate::default_allocator::{global, Kind, Source};
use crate::registry::StreamKey;
use std::ffi::{c_char, c_void, CStr};
use std::ptr::NonNull;

/// Allocates `size` bytes of device memory from the default allocator for
/// `stream` (NULL: no particular stream), like PyTorch's
/// `caching_allocator_alloc`. The first allocation fixes which allocator the
/// default one is (see `aclallocSetDefaultAllocator`).
///
/// The default allocator is chosen at start-up by the environment variable
/// `ACLALLOC_DEFAULT_ALLOCATOR`: `pool` (the default: the caching pool, with
/// `ACLALLOC_ALLOC_CONF`, one pool per device, each created when first used
/// on its device), `device` (direct device memory, no caching), or
/// `plugin:PATH:ALLOC_SYMBOL:FREE_SYMBOL` (a pluggable allocator; PATH may
/// contain ':'). An invalid value fails the allocation
/// with `ACL_ERROR_INVALID_PARAM`. It also serves the workspaces of
/// `aclallocLaunchKernel` on streams without a registered allocator.
///
/// Errors: NULL `devPtr`: `ACL_ERROR_INVALID_PARAM`; the allocator returns
/// NULL: `ACL_ERROR_RT_MEMORY_ALLOCATION`. `*devPtr` is written only on success.
///
/// # Safety
/// `devPtr` must be writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocDefaultMalloc(
    devPtr: *mut *mut c_void,
    size: usize,
    stream: aclrtStream,
) -> aclError {
    boundary("aclallocDefaultMalloc", || {
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
/// `ACL_ERROR_INVALID_PARAM` ("Trying to free a pointer not allocated here";
/// other allocators than the caching pool name a recent second free a
/// double free), and the allocator is not called.
#[no_mangle]
pub extern "C" fn aclallocDefaultFree(devPtr: *mut c_void) -> aclError {
    boundary("aclallocDefaultFree", || {
        global().free(NonNull::new(devPtr).ok_or(Error::NullPointer { param: "devPtr" })?)
    })
}

/// Makes the allocator a descriptor holds (a copy of its current contents,
/// as `aclrtAllocatorRegister` takes) the default allocator, like PyTorch's
/// `change_current_allocator`: it then serves launches on streams without a
/// registration and `aclallocDefaultMalloc`. A pluggable allocator's
/// descriptor may be passed; such an allocator cannot be destroyed while it
/// is the default.
///
/// Only before the default allocator has served its first allocation:
/// afterwards `ACL_ERROR_REPEAT_INITIALIZE` ("can't swap an already
/// initialized allocator"). An incomplete or dead descriptor:
/// `ACL_ERROR_INVALID_PARAM`.
#[no_mangle]
pub extern "C" fn aclallocSetDefaultAllocator(allocatorDesc: aclrtAllocatorDesc) -> aclError {
    boundary("aclallocSetDefaultAllocator", || {
        let source = Source::from_descriptor(args::descriptor(allocatorDesc)?)?;
        global().swap(source)
    })
}

/// The kind of the default allocator (or, before its first use, of the one
/// it will be): "pool", "device", "plugin" or "descriptor" (swapped in from
/// a descriptor). NULL if `ACLALLOC_DEFAULT_ALLOCATOR` is invalid. The string
/// is static.
#[no_mangle]
pub extern "C" fn aclallocGetDefaultAllocatorName() -> *const c_char {
    boundary("aclallocGetDefaultAllocatorName", || {
        let name: &'static CStr = match global().kind()? {
            Kind::Pool => c"pool",
            Kind::Device => c"device",
            Kind::Plugin => c"plugin",
            Kind::Descriptor => c"descriptor",
        };
        Ok(name.as_ptr())
    })
}

/// The default allocator's object, once it has served memory: for the
/// caching pool the `aclallocPool` handle of the calling thread's current
/// device's pool (one pool per device, created on first use there; for
/// `aclallocPoolGetStats`, `aclallocPoolEmptyCache`, ...), for a pluggable allocator its
/// `aclallocPluggable` handle, for a swapped-in descriptor the object it
/// held. Before the first allocation: `ACL_ERROR_UNINITIALIZE` (the default
/// allocator is built then), `*allocator` untouched.
///
/// # Safety
/// `allocator` must be writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocGetDefaultAllocator(allocator: *mut aclrtAllocator) -> aclError {
    boundary("aclallocGetDefaultAllocator", || {
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

/// Statistics of the default allocator's blocks: `aclallocDefaultMalloc`/
/// `aclallocDefaultFree`, and launch workspaces unless it is direct device
/// memory (whose workspaces the runtime's device accounting sees). For the
/// caching pool these are the pool's own counts of blocks and requested
/// bytes (`aclallocPoolGetStats` on its handle; they reset with it), its
/// out-of-memory count as failed allocations, and the frees refused here.
///
/// # Safety
/// `stats` must be writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocDefaultGetStats(stats: *mut aclallocAllocatorStats) -> aclError {
    boundary("aclallocDefaultGetStats", || {
        // SAFETY: the caller's contract.
        unsafe { args::write_out(stats, "stats", || Ok(global().stats().into())) }
    })
}
