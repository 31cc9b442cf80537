//! CANN's stream attributes (`acl_rt.h`): `aclrtSetStreamAttribute` and
//! `aclrtGetStreamAttribute` (see `crate::runtime`'s stream attributes).
#![allow(non_snake_case, non_camel_case_types)]

use crate::ffi::cann::types::*;
use crate::ffi::wiring::args::{self, Out};
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;

/// A stream attribute.
pub type aclrtStreamAttr = i32;
/// The failure mode (`aclrtStreamAttrValue::failureMode`): as `aclrtSetStreamFailureMode`.
pub const ACL_STREAM_ATTR_FAILURE_MODE: aclrtStreamAttr = 1;
/// The float-overflow check switch (`overflowSwitch`, 0 or 1).
pub const ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK: aclrtStreamAttr = 2;
/// A tag of the user's (`userCustomTag`).
pub const ACL_STREAM_ATTR_USER_CUSTOM_TAG: aclrtStreamAttr = 3;
/// The cache-op information switch (`cacheOpInfoSwitch`, 0 or 1).
pub const ACL_STREAM_ATTR_CACHE_OP_INFO: aclrtStreamAttr = 4;
/// The priority (`streamPriority`): read only on the host.
pub const ACL_STREAM_ATTR_PRIORITY: aclrtStreamAttr = 5;

/// A stream attribute's value: the member its `aclrtStreamAttr` names.
#[repr(C)]
#[derive(Clone, Copy)]
pub union aclrtStreamAttrValue {
    /// `ACL_STREAM_ATTR_FAILURE_MODE`.
    pub failureMode: u64,
    /// `ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK`.
    pub overflowSwitch: u32,
    /// `ACL_STREAM_ATTR_USER_CUSTOM_TAG`.
    pub userCustomTag: u32,
    /// `ACL_STREAM_ATTR_CACHE_OP_INFO`.
    pub cacheOpInfoSwitch: u32,
    /// `ACL_STREAM_ATTR_PRIORITY`.
    pub streamPriority: u32,
    /// The union's size.
    pub reserve: [u32; 4],
}

/// Sets `stmAttrType` of `stream` (NULL: the default stream, whose failure
/// mode cannot be set) from its member of `value`. Switches take 0 or 1;
/// the priority is fixed at creation (`ACL_ERROR_INVALID_PARAM`).
///
/// # Safety
/// `value` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn aclrtSetStreamAttribute(
    stream: aclrtStream,
    stmAttrType: aclrtStreamAttr,
    value: *mut aclrtStreamAttrValue,
) -> aclError {
    real_or_host!(aclrtSetStreamAttribute(stream: aclrtStream, stmAttrType: aclrtStreamAttr, value: *mut aclrtStreamAttrValue) {
        // SAFETY: the caller's contract.
        let v = unsafe { args::input(value.cast_const(), "value") }?;
        // SAFETY: every member is plain data of the union's first bytes;
        // the attribute says which one the caller wrote.
        let raw = unsafe {
            if stmAttrType == ACL_STREAM_ATTR_FAILURE_MODE {
                v.failureMode
            } else {
                u64::from(v.reserve[0])
            }
        };
        host().set_stream_attribute(args::optional_stream(stream), stmAttrType, raw)
    })
}

/// Writes `stmAttrType` of `stream` (NULL: the default stream) into its
/// member of `value` (a switch or tag never set: 0).
///
/// # Safety
/// `value` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetStreamAttribute(
    stream: aclrtStream,
    stmAttrType: aclrtStreamAttr,
    value: *mut aclrtStreamAttrValue,
) -> aclError {
    real_or_host!(aclrtGetStreamAttribute(stream: aclrtStream, stmAttrType: aclrtStreamAttr, value: *mut aclrtStreamAttrValue) {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(value, "value") }?;
        let raw = host().stream_attribute(args::optional_stream(stream), stmAttrType)?;
        out.write(if stmAttrType == ACL_STREAM_ATTR_FAILURE_MODE {
            aclrtStreamAttrValue { failureMode: raw }
        } else {
            aclrtStreamAttrValue { reserve: [raw as u32, 0, 0, 0] }
        });
        Ok(())
    })
}
