//! CANN's float overflow controls (`acl_rt.h`): `aclrtSetDeviceSatMode`,
//! `aclrtGetDeviceSatMode`, `aclrtSetStreamOverflowSwitch`,
//! `aclrtGetStreamOverflowSwitch`, `aclrtGetOverflowStatus`,
//! `aclrtResetOverflowStatus` (see `crate::runtime`'s overflow).
#![allow(non_snake_case, non_camel_case_types)]

use crate::ffi::cann::types::*;
use crate::ffi::wiring::args::{self, Out};
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;
use std::ffi::c_void;

/// How float results that overflow come out (`aclrtSetDeviceSatMode`).
pub type aclrtFloatOverflowMode = i32;
/// Saturated: Inf becomes the largest finite value, NaN becomes 0.
pub const ACL_RT_OVERFLOW_MODE_SATURATION: aclrtFloatOverflowMode = 0;
/// Inf and NaN as computed: the default.
pub const ACL_RT_OVERFLOW_MODE_INFNAN: aclrtFloatOverflowMode = 1;
/// Undefined: not a mode to set.
pub const ACL_RT_OVERFLOW_MODE_UNDEF: aclrtFloatOverflowMode = 2;

/// Sets the process's float overflow mode, saturation or Inf/NaN
/// (`ACL_RT_OVERFLOW_MODE_UNDEF` or another value: `ACL_ERROR_INVALID_PARAM`).
/// The host runtime keeps the mode and reports it back; its kernels are
/// host code, computing in the host's IEEE arithmetic either way.
#[no_mangle]
pub extern "C" fn aclrtSetDeviceSatMode(mode: aclrtFloatOverflowMode) -> aclError {
    real_or_host!(aclrtSetDeviceSatMode(mode: aclrtFloatOverflowMode) {
        host().set_sat_mode(mode)
    })
}

/// Writes the process's float overflow mode: the one last set, else
/// `ACL_RT_OVERFLOW_MODE_INFNAN` (CANN's default).
///
/// # Safety
/// `mode` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetDeviceSatMode(mode: *mut aclrtFloatOverflowMode) -> aclError {
    real_or_host!(aclrtGetDeviceSatMode(mode: *mut aclrtFloatOverflowMode) {
        // SAFETY: the caller's contract.
        unsafe { args::write_out(mode, "mode", || Ok(host().sat_mode())) }
    })
}

/// Turns the float overflow check of `stream` (NULL: the default stream)
/// off (`flag` 0) or on (1): the stream attribute
/// `ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK`, which reads it back.
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtSetStreamOverflowSwitch(stream: aclrtStream, flag: u32) -> aclError {
    real_or_host!(aclrtSetStreamOverflowSwitch(stream: aclrtStream, flag: u32) {
        host().set_stream_overflow_switch(args::optional_stream(stream), flag)
    })
}

/// Writes the float overflow check switch of `stream` (NULL: the default
/// stream): 0 until turned on.
///
/// # Safety
/// `flag` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetStreamOverflowSwitch(
    stream: aclrtStream,
    flag: *mut u32,
) -> aclError {
    real_or_host!(aclrtGetStreamOverflowSwitch(stream: aclrtStream, flag: *mut u32) {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(flag, "flag") }?;
        out.write(host().stream_overflow_switch(args::optional_stream(stream))?);
        Ok(())
    })
}

/// Queues on `stream` (NULL: the default stream) the copy of the overflow
/// status of the device's tasks into `outputSize` bytes (exactly 64) of
/// device memory at `outputAddr`; synchronize the stream before reading it.
/// Nothing overflows on the host: the status is all zeros.
///
/// # Safety
/// None for the host runtime: the stream is looked up, and `outputAddr`
/// must lie in live device memory (checked).
#[no_mangle]
pub unsafe extern "C" fn aclrtGetOverflowStatus(
    outputAddr: *mut c_void,
    outputSize: usize,
    stream: aclrtStream,
) -> aclError {
    real_or_host!(aclrtGetOverflowStatus(outputAddr: *mut c_void, outputSize: usize, stream: aclrtStream) {
        let out = args::address(outputAddr, "outputAddr")?;
        host().overflow_status(out, outputSize, args::optional_stream(stream))
    })
}

/// Clears the overflow status of the device's tasks, in order on `stream`
/// (NULL: the default stream). On the host there is nothing to clear.
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtResetOverflowStatus(stream: aclrtStream) -> aclError {
    real_or_host!(aclrtResetOverflowStatus(stream: aclrtStream) {
        host().reset_overflow_status(args::optional_stream(stream))
    })
}
