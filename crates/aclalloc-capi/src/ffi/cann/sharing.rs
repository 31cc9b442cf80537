//! CANN's `acl_rt.h` calls that share physical memory between processes:
//! shareable handles, pid whitelists, access flags (see
//! `crate::runtime::sharing`). Each forwards to a real CANN when one is in
//! front of this library.
#![allow(non_snake_case, non_camel_case_types)]

use crate::base::error::Result;
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args::{self, Out};
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;
use std::ffi::c_void;

/// Export flag: the importer's pid must be in the whitelist (the default).
pub const ACL_RT_VMM_EXPORT_FLAG_DEFAULT: u64 = 0x0;
/// Export flag: any process may import the handle.
pub const ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION: u64 = 0x1;

/// What a V2 shareable handle points to (`aclrtMemSharedHandleType`).
pub type aclrtMemSharedHandleType = i32;
/// A `uint64_t`, within one server.
pub const ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT: aclrtMemSharedHandleType = 0x1;
/// An `aclrtMemFabricHandle` (across servers on CANN; one host here).
pub const ACL_MEM_SHARE_HANDLE_TYPE_FABRIC: aclrtMemSharedHandleType = 0x2;

/// A shareable handle of type `ACL_MEM_SHARE_HANDLE_TYPE_FABRIC`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclrtMemFabricHandle {
    /// The handle's bytes.
    pub data: [u8; 128],
}

/// A device's access to mapped memory (`aclrtMemAccessFlags`).
pub type aclrtMemAccessFlags = i32;
/// No access.
pub const ACL_RT_MEM_ACCESS_FLAGS_NONE: aclrtMemAccessFlags = 0x0;
/// Read access.
pub const ACL_RT_MEM_ACCESS_FLAGS_READ: aclrtMemAccessFlags = 0x1;
/// Read and write access.
pub const ACL_RT_MEM_ACCESS_FLAGS_READWRITE: aclrtMemAccessFlags = 0x3;

/// One location's access, for `aclrtMemSetAccess`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclrtMemAccessDesc {
    /// An `aclrtMemAccessFlags`.
    pub flags: aclrtMemAccessFlags,
    /// The device given the access.
    pub location: aclrtMemLocation,
    /// Reserved.
    pub rsv: [u8; 12],
}

fn physical(handle: aclrtDrvMemHandle) -> Result<usize> {
    args::address(handle, "handle").map(|h| h.as_ptr() as usize)
}

fn share_type(shareType: aclrtMemSharedHandleType) -> Result<()> {
    if [
        ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT,
        ACL_MEM_SHARE_HANDLE_TYPE_FABRIC,
    ]
    .contains(&shareType)
    {
        Ok(())
    } else {
        Err(crate::base::error::Error::InvalidParam {
            param: "shareType",
            reason:
                "It must be ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT or ACL_MEM_SHARE_HANDLE_TYPE_FABRIC",
        })
    }
}

/// Reads a V2 shareable handle of `shareType` (its first 8 bytes).
///
/// # Safety
/// A non-NULL `ptr` points to a `uint64_t` or an `aclrtMemFabricHandle`.
unsafe fn read_v2(ptr: *mut c_void, shareType: aclrtMemSharedHandleType) -> Result<u64> {
    share_type(shareType)?;
    // SAFETY: the caller's contract: at least a uint64_t either way.
    unsafe { args::input(ptr.cast_const().cast::<[u8; 8]>(), "shareableHandle") }
        .map(|b| u64::from_ne_bytes(*b))
}

/// Exports physical memory of this process so another process can import
/// it. `handleType` must be `ACL_MEM_HANDLE_TYPE_NONE`; `flags`
/// `ACL_RT_VMM_EXPORT_FLAG_DEFAULT` (importers must be whitelisted with
/// `aclrtMemSetPidToShareableHandle`) or `..._DISABLE_PID_VALIDATION`. An
/// allocation is exported once; `aclrtFreePhysical` ends the export.
///
/// # Safety
/// `shareableHandle` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemExportToShareableHandle(
    handle: aclrtDrvMemHandle,
    handleType: aclrtMemHandleType,
    flags: u64,
    shareableHandle: *mut u64,
) -> aclError {
    real_or_host!(aclrtMemExportToShareableHandle(handle: aclrtDrvMemHandle, handleType: aclrtMemHandleType, flags: u64, shareableHandle: *mut u64) {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(shareableHandle, "shareableHandle") }?;
        out.write(host().export_physical(physical(handle)?, handleType, flags)?);
        Ok(())
    })
}

/// As `aclrtMemExportToShareableHandle`, writing a `uint64_t`
/// (`ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT`) or an `aclrtMemFabricHandle`
/// (`..._FABRIC`, which on the host works between processes of one host).
///
/// # Safety
/// `shareableHandle` is NULL or writable for the type `shareType` names.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemExportToShareableHandleV2(
    handle: aclrtDrvMemHandle,
    flags: u64,
    shareType: aclrtMemSharedHandleType,
    shareableHandle: *mut c_void,
) -> aclError {
    real_or_host!(aclrtMemExportToShareableHandleV2(handle: aclrtDrvMemHandle, flags: u64, shareType: aclrtMemSharedHandleType, shareableHandle: *mut c_void) {
        share_type(shareType)?;
        let h = physical(handle)?;
        if shareType == ACL_MEM_SHARE_HANDLE_TYPE_FABRIC {
            // SAFETY: the caller's contract.
            let out = unsafe { Out::required(shareableHandle.cast::<aclrtMemFabricHandle>(), "shareableHandle") }?;
            let mut fabric = aclrtMemFabricHandle { data: [0; 128] };
            fabric.data[..8].copy_from_slice(&host().export_physical(h, 0, flags)?.to_ne_bytes());
            out.write(fabric);
        } else {
            // SAFETY: the caller's contract.
            let out = unsafe { Out::required(shareableHandle.cast::<u64>(), "shareableHandle") }?;
            out.write(host().export_physical(h, 0, flags)?);
        }
        Ok(())
    })
}

/// Imports another process's shareable handle as physical memory of this
/// process on `deviceId` (map it with `aclrtMapMem`, free it with
/// `aclrtFreePhysical`). A pid not whitelisted by the exporter:
/// `ACL_ERROR_RT_NO_PERMISSION`; a handle that names no live export (made
/// up, from another run, freed, its process gone): `ACL_ERROR_INVALID_PARAM`.
///
/// # Safety
/// `handle` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemImportFromShareableHandle(
    shareableHandle: u64,
    deviceId: i32,
    handle: *mut aclrtDrvMemHandle,
) -> aclError {
    real_or_host!(aclrtMemImportFromShareableHandle(shareableHandle: u64, deviceId: i32, handle: *mut aclrtDrvMemHandle) {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(handle, "handle") }?;
        out.write(host().import_physical(shareableHandle, deviceId)? as aclrtDrvMemHandle);
        Ok(())
    })
}

/// As `aclrtMemImportFromShareableHandle` for a V2 handle (`flags`
/// reserved, 0), on the current device.
///
/// # Safety
/// `shareableHandle` is NULL or points to the type `shareType` names;
/// `handle` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemImportFromShareableHandleV2(
    shareableHandle: *mut c_void,
    shareType: aclrtMemSharedHandleType,
    flags: u64,
    handle: *mut aclrtDrvMemHandle,
) -> aclError {
    real_or_host!(aclrtMemImportFromShareableHandleV2(shareableHandle: *mut c_void, shareType: aclrtMemSharedHandleType, flags: u64, handle: *mut aclrtDrvMemHandle) {
        // SAFETY: the caller's contract.
        let shared = unsafe { read_v2(shareableHandle, shareType) }?;
        if flags != 0 {
            return Err(crate::base::error::Error::InvalidParam { param: "flags", reason: "It is reserved and must be 0" });
        }
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(handle, "handle") }?;
        let device = host().current_device().unwrap_or(0) as i32;
        out.write(host().import_physical(shared, device)? as aclrtDrvMemHandle);
        Ok(())
    })
}

/// Adds `pidNum` pids (from `aclrtDeviceGetBareTgid`) to the whitelist of a
/// shareable handle this process exported.
///
/// # Safety
/// `pid` is NULL or readable for `pidNum` elements.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemSetPidToShareableHandle(
    shareableHandle: u64,
    pid: *mut i32,
    pidNum: usize,
) -> aclError {
    real_or_host!(aclrtMemSetPidToShareableHandle(shareableHandle: u64, pid: *mut i32, pidNum: usize) {
        // SAFETY: the caller's contract.
        let pids = unsafe { args::input_array(pid.cast_const(), pidNum, "pid") }?;
        host().allow_physical_import(shareableHandle, &pids)
    })
}

/// As `aclrtMemSetPidToShareableHandle` for a V2 handle.
///
/// # Safety
/// `shareableHandle` is NULL or points to the type `shareType` names; `pid`
/// is NULL or readable for `pidNum` elements.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemSetPidToShareableHandleV2(
    shareableHandle: *mut c_void,
    shareType: aclrtMemSharedHandleType,
    pid: *mut i32,
    pidNum: usize,
) -> aclError {
    real_or_host!(aclrtMemSetPidToShareableHandleV2(shareableHandle: *mut c_void, shareType: aclrtMemSharedHandleType, pid: *mut i32, pidNum: usize) {
        // SAFETY: the caller's contract.
        let shared = unsafe { read_v2(shareableHandle, shareType) }?;
        // SAFETY: the caller's contract.
        let pids = unsafe { args::input_array(pid.cast_const(), pidNum, "pid") }?;
        host().allow_physical_import(shared, &pids)
    })
}

/// This process's id as the device knows it (the pid to whitelist).
///
/// # Safety
/// `pid` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtDeviceGetBareTgid(pid: *mut i32) -> aclError {
    real_or_host!(aclrtDeviceGetBareTgid(pid: *mut i32) {
        // SAFETY: the caller's contract.
        unsafe { args::write_out(pid, "pid", || Ok(std::process::id() as i32)) }
    })
}

/// Sets the access of `count` devices to the mapped range `[virPtr,
/// virPtr + size)`. The host maps it read-write whatever the flags; they
/// are kept for `aclrtMemGetAccess`.
///
/// # Safety
/// `desc` is NULL or readable for `count` elements.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemSetAccess(
    virPtr: *mut c_void,
    size: usize,
    desc: *mut aclrtMemAccessDesc,
    count: usize,
) -> aclError {
    real_or_host!(aclrtMemSetAccess(virPtr: *mut c_void, size: usize, desc: *mut aclrtMemAccessDesc, count: usize) {
        let addr = args::address(virPtr, "virPtr")?.as_ptr() as usize;
        // SAFETY: the caller's contract.
        let descs = unsafe { args::input_array(desc.cast_const(), count, "desc") }?;
        let descs: Vec<_> = descs.iter().map(|d| (d.flags as u64, d.location)).collect();
        host().set_access(addr, size, &descs)
    })
}

/// The access flags of `location` to the mapped memory at `virPtr`
/// (`ACL_RT_MEM_ACCESS_FLAGS_READWRITE` until set otherwise).
///
/// # Safety
/// `location` is NULL or readable; `flag` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemGetAccess(
    virPtr: *mut c_void,
    location: *mut aclrtMemLocation,
    flag: *mut u64,
) -> aclError {
    real_or_host!(aclrtMemGetAccess(virPtr: *mut c_void, location: *mut aclrtMemLocation, flag: *mut u64) {
        let addr = args::address(virPtr, "virPtr")?.as_ptr() as usize;
        // SAFETY: the caller's contract.
        let location = *unsafe { args::input(location.cast_const(), "location") }?;
        // SAFETY: the caller's contract.
        unsafe { args::write_out(flag, "flag", || host().get_access(addr, location)) }
    })
}
