//! CANN's managed (unified) memory (`acl_rt.h`): `aclrtMemAllocManaged`.
//! On the host runtime device memory is host memory, so managed memory is
//! device memory the host reads and writes at the same address.
#![allow(non_snake_case, non_camel_case_types)]

use crate::ffi::cann::types::*;
use crate::ffi::wiring::args;
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;
use crate::ffi::wiring::ordered_tracking;
use std::ffi::c_void;

/// `aclrtMemAllocManaged` flag: the memory is reached from the device and the host.
pub const ACL_RT_MEM_ATTACH_GLOBAL: u32 = 0x1;

/// Allocates `size` bytes (rounded up to 2 MiB) of managed memory on the
/// current context's device, counted against its capacity; freed with
/// `aclrtFree`. `flag` must be `ACL_RT_MEM_ATTACH_GLOBAL`; `size` 0:
/// `ACL_ERROR_INVALID_PARAM`. The memory is not initialized.
///
/// # Safety
/// `ptr` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemAllocManaged(
    ptr: *mut *mut c_void,
    size: u64,
    flag: u32,
) -> aclError {
    real_or_host!(aclrtMemAllocManaged(ptr: *mut *mut c_void, size: u64, flag: u32) {
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        // SAFETY: the caller's contract.
        unsafe {
            args::write_out(ptr, "ptr", || {
                let address = host().malloc_managed(size, flag)?.as_ptr().cast();
                ordered_tracking::reissued(address, size);
                Ok(address)
            })
        }
    })
}
