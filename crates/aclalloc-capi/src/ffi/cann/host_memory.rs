//! CANN's `aclrtMallocHost` / `aclrtFreeHost`.
#![allow(non_snake_case)]

use crate::ffi::cann::types::*;
use crate::ffi::wiring::args;
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;
use std::ffi::c_void;

/// Allocates `size` bytes of host memory (page-aligned, zeroed) that every
/// `aclrtMemcpy[Async]` kind and every kernel accepts. `size` 0:
/// `ACL_ERROR_INVALID_PARAM`.
///
/// # Safety
/// `hostPtr` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtMallocHost(hostPtr: *mut *mut c_void, size: usize) -> aclError {
    real_or_host!(aclrtMallocHost(hostPtr: *mut *mut c_void, size: usize) {
        // SAFETY: the caller's contract.
        unsafe { args::write_out(hostPtr, "hostPtr", || Ok(host().malloc_host(size)?.as_ptr().cast())) }
    })
}

/// Frees memory from `aclrtMallocHost` once every stream's pending work has
/// run. Anything else (device memory, an interior or freed pointer):
/// `ACL_ERROR_INVALID_PARAM`, nothing freed.
///
/// # Safety
/// None for the host runtime: the pointer is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtFreeHost(hostPtr: *mut c_void) -> aclError {
    real_or_host!(aclrtFreeHost(hostPtr: *mut c_void) {
        host().free_host(args::address(hostPtr, "hostPtr")?.as_ptr())
    })
}
