//! CANN's registered host memory (`acl_rt.h`): `aclrtHostRegister`,
//! `aclrtHostRegisterV2`, `aclrtHostGetDevicePointer`, `aclrtHostUnregister` (see
//! `crate::runtime`'s host registrations: on the host runtime a mapped
//! range's device address is its host address).
#![allow(non_snake_case, non_camel_case_types)]

use crate::ffi::cann::types::*;
use crate::ffi::wiring::args;
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;
use std::ffi::c_void;

/// `aclrtHostRegisterV2` flag: map the host memory for the device
/// (`aclrtHostGetDevicePointer` gives its device address).
pub const ACL_HOST_REG_MAPPED: u64 = 0x2;
/// `aclrtHostRegisterV2` flag: a PCIe device's IO space (reserved, not supported).
pub const ACL_HOST_REG_IOMEMORY: u64 = 0x4;
/// `aclrtHostRegisterV2` flag: read only for the device (reserved, not supported).
pub const ACL_HOST_REG_READONLY: u64 = 0x8;
/// `aclrtHostRegisterV2` flag: page-lock pageable memory (not memory from
/// `aclrtMallocHost`, which is page-locked already).
pub const ACL_HOST_REG_PINNED: u64 = 0x1000_0000;

/// How `aclrtHostRegister` registers host memory.
pub type aclrtHostRegisterType = i32;
/// Mapped for the device.
pub const ACL_HOST_REGISTER_MAPPED: aclrtHostRegisterType = 0;
/// A PCIe device's IO space (not supported by the host runtime).
pub const ACL_HOST_REGISTER_IOMEMORY: aclrtHostRegisterType = 0x04;
/// Read only for the device (not supported by the host runtime).
pub const ACL_HOST_REGISTER_READONLY: aclrtHostRegisterType = 0x08;

/// Registers `size` bytes of host memory at `ptr` (4 KB aligned) for the
/// device (`type`: `ACL_HOST_REGISTER_MAPPED`) and writes its device address
/// to `devPtr` (on the host runtime: `ptr` itself), as `aclrtHostRegisterV2`
/// with `ACL_HOST_REG_MAPPED` then `aclrtHostGetDevicePointer` do; the same
/// refusals. `ACL_HOST_REGISTER_IOMEMORY` or `_READONLY`:
/// `ACL_ERROR_RT_FEATURE_NOT_SUPPORT`. Unregistered with `aclrtHostUnregister`.
///
/// # Safety
/// `devPtr` is NULL or writable; the range is checked against this
/// process's mappings, never touched.
#[no_mangle]
pub unsafe extern "C" fn aclrtHostRegister(
    ptr: *mut c_void,
    size: u64,
    r#type: aclrtHostRegisterType,
    devPtr: *mut *mut c_void,
) -> aclError {
    real_or_host!(aclrtHostRegister(ptr: *mut c_void, size: u64, r#type: aclrtHostRegisterType, devPtr: *mut *mut c_void) {
        let at = args::address(ptr, "ptr")?;
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        // SAFETY: the caller's contract.
        unsafe {
            args::write_out(devPtr, "devPtr", || {
                Ok(host().host_register_mapped(at.as_ptr() as usize, size, r#type)? as *mut c_void)
            })
        }
    })
}

/// Registers `size` bytes of host memory at `ptr` (4 KB aligned) with
/// `flag`, an OR of `ACL_HOST_REG_MAPPED` and `ACL_HOST_REG_PINNED`. A range
/// overlapping a registered one: `ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED`;
/// `ACL_HOST_REG_IOMEMORY` or `ACL_HOST_REG_READONLY`:
/// `ACL_ERROR_RT_FEATURE_NOT_SUPPORT`. Memory freed with `aclrtFreeHost`
/// is unregistered with it.
///
/// # Safety
/// None for the host runtime: the range is checked against this process's
/// mappings, never touched.
#[no_mangle]
pub unsafe extern "C" fn aclrtHostRegisterV2(ptr: *mut c_void, size: u64, flag: u32) -> aclError {
    real_or_host!(aclrtHostRegisterV2(ptr: *mut c_void, size: u64, flag: u32) {
        let at = args::address(ptr, "ptr")?;
        host().host_register(at.as_ptr() as usize, usize::try_from(size).unwrap_or(usize::MAX), flag)
    })
}

/// The device address of host memory registered with `ACL_HOST_REG_MAPPED`
/// (on the host runtime: `pHost` itself). `flag` must be 0. Memory not
/// registered so: `ACL_ERROR_HOST_MEMORY_NOT_REGISTERED`.
///
/// # Safety
/// `pDevice` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtHostGetDevicePointer(
    pHost: *mut c_void,
    pDevice: *mut *mut c_void,
    flag: u32,
) -> aclError {
    real_or_host!(aclrtHostGetDevicePointer(pHost: *mut c_void, pDevice: *mut *mut c_void, flag: u32) {
        let at = args::address(pHost, "pHost")?;
        // SAFETY: the caller's contract.
        unsafe {
            args::write_out(pDevice, "pDevice", || {
                Ok(host().host_device_pointer(at.as_ptr() as usize, flag)? as *mut c_void)
            })
        }
    })
}

/// Unregisters the range `aclrtHostRegisterV2` registered at `ptr`. Not the
/// start of one: `ACL_ERROR_HOST_MEMORY_NOT_REGISTERED`.
///
/// # Safety
/// None for the host runtime: the pointer is looked up, never touched.
#[no_mangle]
pub unsafe extern "C" fn aclrtHostUnregister(ptr: *mut c_void) -> aclError {
    real_or_host!(aclrtHostUnregister(ptr: *mut c_void) {
        host().host_unregister(args::address(ptr, "ptr")?.as_ptr() as usize)
    })
}
