//! CANN's device status, resource limits and utilization (`acl_rt.h`):
//! `aclrtQueryDeviceStatus`, `aclrtGetDeviceResLimit`,
//! `aclrtSetDeviceResLimit`, `aclrtResetDeviceResLimit`,
//! `aclrtGetDeviceUtilizationRate`.
#![allow(non_snake_case, non_camel_case_types)]

use crate::base::error::Error;
use crate::ffi::cann::device_info::aclrtDevResLimitType;
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args::Out;
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;
use std::ffi::c_void;

/// A device's health (`aclrtQueryDeviceStatus`).
pub type aclrtDeviceStatus = i32;
/// The device works.
pub const ACL_RT_DEVICE_STATUS_NORMAL: aclrtDeviceStatus = 0;
/// The device has failed.
pub const ACL_RT_DEVICE_STATUS_ABNORMAL: aclrtDeviceStatus = 1;
/// The end of the range.
pub const ACL_RT_DEVICE_STATUS_END: aclrtDeviceStatus = 0xFFFF;

/// A device's utilization in percent (`aclrtGetDeviceUtilizationRate`).
#[repr(C)]
pub struct aclrtUtilizationInfo {
    pub cubeUtilization: i32,
    pub vectorUtilization: i32,
    pub aicpuUtilization: i32,
    pub memoryUtilization: i32,
    /// Reserved: NULL.
    pub utilizationExtend: *mut c_void,
}

/// Writes whether device `deviceId` works: always
/// `ACL_RT_DEVICE_STATUS_NORMAL` for a host device (a device id out of
/// range: `ACL_ERROR_RT_INVALID_DEVICEID`).
///
/// # Safety
/// `deviceStatus` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtQueryDeviceStatus(
    deviceId: i32,
    deviceStatus: *mut aclrtDeviceStatus,
) -> aclError {
    real_or_host!(aclrtQueryDeviceStatus(deviceId: i32, deviceStatus: *mut aclrtDeviceStatus) {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(deviceStatus, "deviceStatus") }?;
        let normal = host().device_status_normal(deviceId)?;
        out.write(if normal { ACL_RT_DEVICE_STATUS_NORMAL } else { ACL_RT_DEVICE_STATUS_ABNORMAL });
        Ok(())
    })
}

/// Writes the cores of `type` that work on device `deviceId` may use: the
/// limit `aclrtSetDeviceResLimit` set, else all of them (the host's
/// available parallelism, as `aclrtGetDeviceInfo` reports).
///
/// # Safety
/// `value` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetDeviceResLimit(
    deviceId: i32,
    type_: aclrtDevResLimitType,
    value: *mut u32,
) -> aclError {
    real_or_host!(aclrtGetDeviceResLimit(deviceId: i32, type_: aclrtDevResLimitType, value: *mut u32) {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(value, "value") }?;
        out.write(host().device_res_limit(deviceId, type_)?);
        Ok(())
    })
}

/// Limits the cores of `type` that work on device `deviceId` may use to
/// `value` (at least 1). The host runtime keeps the limit and reads it back;
/// its kernels run on host threads, which the limit does not change.
#[no_mangle]
pub extern "C" fn aclrtSetDeviceResLimit(
    deviceId: i32,
    type_: aclrtDevResLimitType,
    value: u32,
) -> aclError {
    real_or_host!(aclrtSetDeviceResLimit(deviceId: i32, type_: aclrtDevResLimitType, value: u32) {
        host().set_device_res_limit(deviceId, type_, value)
    })
}

/// Drops the limits `aclrtSetDeviceResLimit` set on device `deviceId`.
#[no_mangle]
pub extern "C" fn aclrtResetDeviceResLimit(deviceId: i32) -> aclError {
    real_or_host!(aclrtResetDeviceResLimit(deviceId: i32) {
        host().reset_device_res_limit(deviceId)
    })
}

/// The utilization of device `deviceId`, in percent: memory is the share of
/// its capacity allocated; a host device has no cores of its own to measure
/// (its kernels run on host threads among the host's other work), so its
/// cube, vector and AI CPU figures are 0. `utilizationExtend` is reserved:
/// it must be NULL.
///
/// # Safety
/// `utilizationInfo` is NULL or points to a writable `aclrtUtilizationInfo`.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetDeviceUtilizationRate(
    deviceId: i32,
    utilizationInfo: *mut aclrtUtilizationInfo,
) -> aclError {
    real_or_host!(aclrtGetDeviceUtilizationRate(deviceId: i32, utilizationInfo: *mut aclrtUtilizationInfo) {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(utilizationInfo, "utilizationInfo") }?;
        // SAFETY: the caller's contract: a readable struct.
        if !unsafe { (*utilizationInfo).utilizationExtend }.is_null() {
            return Err(Error::InvalidParam {
                param: "utilizationInfo",
                reason: "Its utilizationExtend is reserved and must be NULL",
            });
        }
        let memory = host().device_memory_utilization(deviceId)?;
        out.write(aclrtUtilizationInfo {
            cubeUtilization: 0,
            vectorUtilization: 0,
            aicpuUtilization: 0,
            memoryUtilization: memory,
            utilizationExtend: std::ptr::null_mut(),
        });
        Ok(())
    })
}
