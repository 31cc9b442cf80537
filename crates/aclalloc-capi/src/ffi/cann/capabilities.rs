//! What the environment supports: CANN's attributes (`acl_base_rt.h`, which
//! CANN's `acl_base.h` includes: `aclGetCannAttributeList`,
//! `aclGetCannAttribute`), a device's features (`acl_rt.h`:
//! `aclrtGetDeviceCapability`) and whether kernels built for a SoC run here
//! (`acl_rt.h`: `aclrtCheckArchCompatibility`).
//!
//! The host runtime answers as a CANN 9.0.0 runtime (`aclsysGetVersionStr`)
//! on a host device would: what the host provides reads supported, the
//! rest not supported.
#![allow(non_snake_case, non_camel_case_types)]

use crate::base::error::Error;
use crate::ffi::cann::device_info::host_soc_name;
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args::{self, Out};
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;
use std::ffi::c_char;

/// A feature of CANN and its device (`aclGetCannAttribute`).
pub type aclCannAttr = i32;
/// Unknown.
pub const ACL_CANN_ATTR_UNDEFINED: aclCannAttr = -1;
/// Inf/NaN float overflow mode (`ACL_RT_OVERFLOW_MODE_INFNAN`).
pub const ACL_CANN_ATTR_INF_NAN: aclCannAttr = 0;
/// The bf16 data type (`ACL_BF16`).
pub const ACL_CANN_ATTR_BF16: aclCannAttr = 1;
/// Operators compiled just in time.
pub const ACL_CANN_ATTR_JIT_COMPILE: aclCannAttr = 2;

/// A device feature (`aclrtGetDeviceCapability`).
pub type aclrtDevFeatureType = i32;
/// Updating the tasks of AI Core kernels (of a captured model).
pub const ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV: aclrtDevFeatureType = 1;
/// Queue event messages sent across devices.
pub const ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV: aclrtDevFeatureType = 21;

/// `aclrtGetDeviceCapability`'s value: the feature is supported.
pub const ACL_DEV_FEATURE_SUPPORT: i32 = 1;
/// `aclrtGetDeviceCapability`'s value: the feature is not supported.
pub const ACL_DEV_FEATURE_NOT_SUPPORT: i32 = 0;

/// The attributes the host runtime supports, in CANN's order: Inf/NaN
/// (the host computes in IEEE arithmetic, and Inf/NaN is the overflow mode
/// until `aclrtSetDeviceSatMode`) and bf16 (a data type the runtime sizes,
/// and host kernels compute with as C++'s `__bf16`). Not JIT compilation:
/// the host runtime has no operator compiler.
static SUPPORTED: [aclCannAttr; 2] = [ACL_CANN_ATTR_INF_NAN, ACL_CANN_ATTR_BF16];

/// Writes the list of the CANN attributes this environment supports
/// (`ACL_CANN_ATTR_INF_NAN`, `ACL_CANN_ATTR_BF16` on the host runtime) and
/// their number. The list is the library's: the caller neither allocates
/// nor frees it.
///
/// # Safety
/// `cannAttrList` and `num` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclGetCannAttributeList(
    cannAttrList: *mut *const aclCannAttr,
    num: *mut usize,
) -> aclError {
    real_or_host!(aclGetCannAttributeList(cannAttrList: *mut *const aclCannAttr, num: *mut usize) {
        // SAFETY: the caller's contract.
        let list = unsafe { Out::required(cannAttrList, "cannAttrList") }?;
        // SAFETY: the caller's contract.
        let count = unsafe { Out::required(num, "num") }?;
        list.write(SUPPORTED.as_ptr());
        count.write(SUPPORTED.len());
        Ok(())
    })
}

/// Writes whether this environment supports `cannAttr`: 1 for those of
/// `aclGetCannAttributeList`, 0 for `ACL_CANN_ATTR_JIT_COMPILE` (the host
/// runtime compiles no operators); any other value is refused.
///
/// # Safety
/// `value` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclGetCannAttribute(cannAttr: aclCannAttr, value: *mut i32) -> aclError {
    real_or_host!(aclGetCannAttribute(cannAttr: aclCannAttr, value: *mut i32) {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(value, "value") }?;
        if !matches!(cannAttr, ACL_CANN_ATTR_INF_NAN | ACL_CANN_ATTR_BF16 | ACL_CANN_ATTR_JIT_COMPILE) {
            return Err(Error::InvalidParam {
                param: "cannAttr",
                reason: "It is not an aclCannAttr value (ACL_CANN_ATTR_INF_NAN, ACL_CANN_ATTR_BF16 or ACL_CANN_ATTR_JIT_COMPILE)",
            });
        }
        out.write(i32::from(SUPPORTED.contains(&cannAttr)));
        Ok(())
    })
}

/// Writes whether device `deviceId` supports `devFeatureType`:
/// `ACL_DEV_FEATURE_NOT_SUPPORT` for both features on a host device (it
/// has no task scheduler whose AI Core tasks could be updated, and no
/// queues across devices). A device id out of range:
/// `ACL_ERROR_RT_INVALID_DEVICEID`; another feature value:
/// `ACL_ERROR_INVALID_PARAM`.
///
/// # Safety
/// `value` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetDeviceCapability(
    deviceId: i32,
    devFeatureType: aclrtDevFeatureType,
    value: *mut i32,
) -> aclError {
    real_or_host!(aclrtGetDeviceCapability(deviceId: i32, devFeatureType: aclrtDevFeatureType, value: *mut i32) {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(value, "value") }?;
        host().device(deviceId)?;
        if !matches!(
            devFeatureType,
            ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV | ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV
        ) {
            return Err(Error::InvalidParam {
                param: "devFeatureType",
                reason: "It is not an aclrtDevFeatureType value (ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV or ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV)",
            });
        }
        out.write(ACL_DEV_FEATURE_NOT_SUPPORT);
        Ok(())
    })
}

/// Writes whether kernels built for the SoC `socVersion` run on this
/// device: 1 for the SoC the host runtime reports (`aclrtGetSocName`),
/// whose kernels are host code; 0 for any other (an Ascend SoC's kernels
/// are its instructions, which the host cannot run).
///
/// # Safety
/// `socVersion` is NULL or a NUL-terminated string; `canCompatible` is NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtCheckArchCompatibility(
    socVersion: *const c_char,
    canCompatible: *mut i32,
) -> aclError {
    real_or_host!(aclrtCheckArchCompatibility(socVersion: *const c_char, canCompatible: *mut i32) {
        // SAFETY: the caller's contract.
        let soc = unsafe { args::c_bytes(socVersion, "socVersion") }?;
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(canCompatible, "canCompatible") }?;
        if soc.is_empty() {
            return Err(Error::InvalidParam {
                param: "socVersion",
                reason: "It is empty",
            });
        }
        out.write(i32::from(soc == host_soc_name()));
        Ok(())
    })
}
