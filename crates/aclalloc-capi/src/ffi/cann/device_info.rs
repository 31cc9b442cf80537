//! CANN's device, version and error queries, and `acl_base.h`'s data types
//! with their float16 conversions.
#![allow(non_snake_case, non_camel_case_types)]

use crate::base::error::Error;
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args::{self, Out};
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;
use std::ffi::{c_char, c_void};

/// Where the program runs (`aclrtGetRunMode`).
pub type aclrtRunMode = i32;
/// On the device (a device-side program).
pub const ACL_DEVICE: aclrtRunMode = 0;
/// On the host, with devices attached: always the host runtime's answer.
pub const ACL_HOST: aclrtRunMode = 1;

/// Which last error `aclrtGetLastError` / `aclrtPeekAtLastError` report.
pub type aclrtLastErrLevel = i32;
/// The calling thread's.
pub const ACL_RT_THREAD_LEVEL: aclrtLastErrLevel = 0;

/// The size `aclsysGetVersionStr`'s `versionStr` must have room for.
pub const ACL_PKG_VERSION_MAX_SIZE: u32 = 128;

/// A half-precision float's bits.
pub type aclFloat16 = u16;

/// A tensor element type (`aclDataType`).
pub type aclDataType = i32;
/// Undefined.
pub const ACL_DT_UNDEFINED: aclDataType = -1;
/// float.
pub const ACL_FLOAT: aclDataType = 0;
/// float16.
pub const ACL_FLOAT16: aclDataType = 1;
/// int8.
pub const ACL_INT8: aclDataType = 2;
/// int32.
pub const ACL_INT32: aclDataType = 3;
/// uint8.
pub const ACL_UINT8: aclDataType = 4;
/// int16.
pub const ACL_INT16: aclDataType = 6;
/// uint16.
pub const ACL_UINT16: aclDataType = 7;
/// uint32.
pub const ACL_UINT32: aclDataType = 8;
/// int64.
pub const ACL_INT64: aclDataType = 9;
/// uint64.
pub const ACL_UINT64: aclDataType = 10;
/// double.
pub const ACL_DOUBLE: aclDataType = 11;
/// bool.
pub const ACL_BOOL: aclDataType = 12;
/// string.
pub const ACL_STRING: aclDataType = 13;
/// complex64.
pub const ACL_COMPLEX64: aclDataType = 16;
/// complex128.
pub const ACL_COMPLEX128: aclDataType = 17;
/// bfloat16.
pub const ACL_BF16: aclDataType = 27;
/// int4.
pub const ACL_INT4: aclDataType = 29;
/// uint1.
pub const ACL_UINT1: aclDataType = 30;
/// complex32.
pub const ACL_COMPLEX32: aclDataType = 33;
/// hifloat8.
pub const ACL_HIFLOAT8: aclDataType = 34;
/// float8 e5m2.
pub const ACL_FLOAT8_E5M2: aclDataType = 35;
/// float8 e4m3fn.
pub const ACL_FLOAT8_E4M3FN: aclDataType = 36;
/// float8 e8m0.
pub const ACL_FLOAT8_E8M0: aclDataType = 37;
/// float6 e3m2.
pub const ACL_FLOAT6_E3M2: aclDataType = 38;
/// float6 e2m3.
pub const ACL_FLOAT6_E2M3: aclDataType = 39;
/// float4 e2m1.
pub const ACL_FLOAT4_E2M1: aclDataType = 40;
/// float4 e1m2.
pub const ACL_FLOAT4_E1M2: aclDataType = 41;

/// The bytes of one element of `dataType`: sub-byte types count 1 (their
/// smallest addressable unit); `ACL_STRING` and unknown values 0.
#[no_mangle]
pub extern "C" fn aclDataTypeSize(dataType: aclDataType) -> usize {
    match dataType {
        ACL_INT8 | ACL_UINT8 | ACL_BOOL | ACL_HIFLOAT8 | ACL_FLOAT8_E5M2 | ACL_FLOAT8_E4M3FN
        | ACL_FLOAT8_E8M0 | ACL_INT4 | ACL_UINT1 | ACL_FLOAT6_E3M2 | ACL_FLOAT6_E2M3
        | ACL_FLOAT4_E2M1 | ACL_FLOAT4_E1M2 => 1,
        ACL_FLOAT16 | ACL_INT16 | ACL_UINT16 | ACL_BF16 => 2,
        ACL_FLOAT | ACL_INT32 | ACL_UINT32 | ACL_COMPLEX32 => 4,
        ACL_INT64 | ACL_UINT64 | ACL_DOUBLE | ACL_COMPLEX64 => 8,
        ACL_COMPLEX128 => 16,
        _ => 0,
    }
}

/// `value` as IEEE half precision, rounded to nearest even.
#[no_mangle]
pub extern "C" fn aclFloatToFloat16(value: f32) -> aclFloat16 {
    crate::runtime::half::f32_to_f16(value)
}

/// The float a half-precision value stands for (exactly).
#[no_mangle]
pub extern "C" fn aclFloat16ToFloat(value: aclFloat16) -> f32 {
    crate::runtime::half::f16_to_f32(value)
}

/// The SoC name the host runtime reports: `ACLALLOC_SOC_NAME` when set to
/// 1 to 63 printable ASCII characters (for programs that choose a path by
/// SoC, or print it), else `"aclalloc-host"`; an invalid value is one line
/// on stderr.
pub(crate) fn host_soc_name() -> &'static std::ffi::CStr {
    static NAME: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        const VAR: &str = "ACLALLOC_SOC_NAME";
        let accepted = "1 to 63 printable ASCII characters";
        let raw = crate::base::env::var(VAR);
        let parsed = crate::base::env::parsed(VAR, raw.as_deref(), accepted, |text| {
            let ok = (1..=63).contains(&text.len())
                && text.bytes().all(|b| b.is_ascii_graphic() || b == b' ');
            ok.then(|| text.to_owned())
        });
        let name =
            crate::base::env::or_default(parsed, "aclalloc-host".to_owned(), "aclalloc-host");
        // Printable ASCII holds no NUL.
        std::ffi::CString::new(name).unwrap_or_else(|_| c"aclalloc-host".to_owned())
    })
}

/// The name of the SoC: on the host runtime `"aclalloc-host"` (no Ascend
/// SoC), or `ACLALLOC_SOC_NAME`; the real runtime's answer in front of one.
#[no_mangle]
pub extern "C" fn aclrtGetSocName() -> *const c_char {
    real_or_host!(aclrtGetSocName() -> *const c_char {
        Ok(host_soc_name().as_ptr())
    })
}

/// `ACL_HOST`: the program runs on the host.
///
/// # Safety
/// `runMode` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetRunMode(runMode: *mut aclrtRunMode) -> aclError {
    real_or_host!(aclrtGetRunMode(runMode: *mut aclrtRunMode) {
        // SAFETY: the caller's contract.
        unsafe { args::write_out(runMode, "runMode", || Ok(ACL_HOST)) }
    })
}

/// The version of CANN whose headers this library implements
/// (`include/acl/`, taken from CANN's runtime repository at this version).
/// On the host runtime every package (`"runtime"`, `"driver"`, ...) reports
/// it, so CANN programs that gate a feature on the version see the CANN
/// they were written for. aclalloc's own version is `aclallocGetVersion`.
pub const CANN_VERSION: (i32, i32, i32) = (9, 0, 0);

/// The version of the package `pkgName` as text: on the host runtime, the
/// CANN version whose headers this library implements (`"9.0.0"`) for every
/// package. `versionStr` must have room for `ACL_PKG_VERSION_MAX_SIZE` bytes.
///
/// # Safety
/// `pkgName` is NULL or a NUL-terminated string; `versionStr` is NULL or
/// writable for `ACL_PKG_VERSION_MAX_SIZE` bytes.
#[no_mangle]
pub unsafe extern "C" fn aclsysGetVersionStr(
    pkgName: *mut c_char,
    versionStr: *mut c_char,
) -> aclError {
    real_or_host!(aclsysGetVersionStr(pkgName: *mut c_char, versionStr: *mut c_char) {
        // SAFETY: the caller's contract.
        package(unsafe { args::c_bytes(pkgName, "pkgName") }?)?;
        if versionStr.is_null() {
            return Err(Error::NullPointer { param: "versionStr" });
        }
        let (major, minor, patch) = CANN_VERSION;
        let text = format!("{major}.{minor}.{patch}\0");
        debug_assert!(text.len() <= ACL_PKG_VERSION_MAX_SIZE as usize);
        // SAFETY: room for ACL_PKG_VERSION_MAX_SIZE bytes, more than the version.
        unsafe { std::ptr::copy_nonoverlapping(text.as_ptr().cast(), versionStr, text.len()) };
        Ok(())
    })
}

/// `aclsysGetVersionStr` as a number, by CANN's rule for a release:
/// major × 10,000,000 + minor × 100,000 + patch × 1,000 (9.0.0: 90000000).
///
/// # Safety
/// `pkgName` is NULL or a NUL-terminated string; `versionNum` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclsysGetVersionNum(
    pkgName: *mut c_char,
    versionNum: *mut i32,
) -> aclError {
    real_or_host!(aclsysGetVersionNum(pkgName: *mut c_char, versionNum: *mut i32) {
        // SAFETY: the caller's contract.
        package(unsafe { args::c_bytes(pkgName, "pkgName") }?)?;
        let (major, minor, patch) = CANN_VERSION;
        let number = major * 10_000_000 + minor * 100_000 + patch * 1_000;
        // SAFETY: the caller's contract.
        unsafe { args::write_out(versionNum, "versionNum", || Ok(number)) }
    })
}

fn package(name: &std::ffi::CStr) -> crate::base::error::Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidParam {
            param: "pkgName",
            reason: "It is empty",
        });
    }
    Ok(())
}

/// The calling thread's last error code (`ACL_SUCCESS` if none), cleared.
/// `level` must be `ACL_RT_THREAD_LEVEL`.
#[no_mangle]
pub extern "C" fn aclrtGetLastError(level: aclrtLastErrLevel) -> aclError {
    last_error(level, true)
}

/// As `aclrtGetLastError`, without clearing it.
#[no_mangle]
pub extern "C" fn aclrtPeekAtLastError(level: aclrtLastErrLevel) -> aclError {
    last_error(level, false)
}

fn last_error(level: aclrtLastErrLevel, take: bool) -> aclError {
    crate::ffi::wiring::dispatch::ensure();
    type Real = unsafe extern "C" fn(aclrtLastErrLevel) -> aclError;
    let sym = if take {
        crate::interpose::next::Sym::aclrtGetLastError
    } else {
        crate::interpose::next::Sym::aclrtPeekAtLastError
    };
    // SAFETY: `Real` is the C type of both functions in CANN's headers.
    if let Some(f) = unsafe { crate::interpose::next::real::<Real>(sym) } {
        // SAFETY: the real runtime's function.
        return unsafe { f(level) };
    }
    if level != ACL_RT_THREAD_LEVEL {
        return crate::base::error::ACL_ERROR_INVALID_PARAM;
    }
    crate::base::errlog::last_code(take)
}

/// The current context's default stream. No current context:
/// `ACL_ERROR_RT_CONTEXT_NULL`.
///
/// # Safety
/// `stream` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtCtxGetCurrentDefaultStream(stream: *mut aclrtStream) -> aclError {
    real_or_host!(aclrtCtxGetCurrentDefaultStream(stream: *mut aclrtStream) {
        // SAFETY: the caller's contract.
        unsafe { args::write_out(stream, "stream", || Ok(host().resolve_stream(None)?.0.as_ptr())) }
    })
}

/// 1 when `deviceId` can reach `peerDeviceId`'s memory: any two different
/// devices of the host runtime (all are host memory); 0 for the same device.
///
/// # Safety
/// `canAccessPeer` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtDeviceCanAccessPeer(
    canAccessPeer: *mut i32,
    deviceId: i32,
    peerDeviceId: i32,
) -> aclError {
    real_or_host!(aclrtDeviceCanAccessPeer(canAccessPeer: *mut i32, deviceId: i32, peerDeviceId: i32) {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(canAccessPeer, "canAccessPeer") }?;
        host().device(deviceId)?;
        host().device(peerDeviceId)?;
        out.write(i32::from(deviceId != peerDeviceId));
        Ok(())
    })
}

/// Lets the current device reach `peerDeviceId`'s memory (always so on the
/// host). `flags` must be 0; the peer must be another existing device.
#[no_mangle]
pub extern "C" fn aclrtDeviceEnablePeerAccess(peerDeviceId: i32, flags: u32) -> aclError {
    real_or_host!(aclrtDeviceEnablePeerAccess(peerDeviceId: i32, flags: u32) {
        if flags != 0 {
            return Err(Error::InvalidParam { param: "flags", reason: "It must be 0" });
        }
        peer(peerDeviceId)
    })
}

/// Undoes `aclrtDeviceEnablePeerAccess` (nothing changes on the host).
#[no_mangle]
pub extern "C" fn aclrtDeviceDisablePeerAccess(peerDeviceId: i32) -> aclError {
    real_or_host!(aclrtDeviceDisablePeerAccess(peerDeviceId: i32) { peer(peerDeviceId) })
}

fn peer(peer: i32) -> crate::base::error::Result<()> {
    host().device(peer)?;
    if host().current_device()? as i32 == peer {
        return Err(Error::InvalidParam {
            param: "peerDeviceId",
            reason: "It is the current device",
        });
    }
    Ok(())
}

/// A device resource that can be limited (`aclrtGetResInCurrentThread`).
pub type aclrtDevResLimitType = i32;
/// AI Core cube cores.
pub const ACL_RT_DEV_RES_CUBE_CORE: aclrtDevResLimitType = 0;
/// Vector cores.
pub const ACL_RT_DEV_RES_VECTOR_CORE: aclrtDevResLimitType = 1;

/// The cores the calling thread's work may use: the current device's limit
/// (`aclrtSetDeviceResLimit`), else, for either kind, the host's available
/// parallelism (kernels run on host threads). No current context:
/// `ACL_ERROR_RT_CONTEXT_NULL`.
///
/// # Safety
/// `value` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetResInCurrentThread(
    type_: aclrtDevResLimitType,
    value: *mut u32,
) -> aclError {
    real_or_host!(aclrtGetResInCurrentThread(type_: aclrtDevResLimitType, value: *mut u32) {
        if !matches!(type_, ACL_RT_DEV_RES_CUBE_CORE | ACL_RT_DEV_RES_VECTOR_CORE) {
            return Err(Error::InvalidParam {
                param: "type",
                reason: "It is not an aclrtDevResLimitType value",
            });
        }
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(value, "value") }?;
        let device = host().current_device()?;
        out.write(host().device_res_limit(device as i32, type_)?);
        Ok(())
    })
}

/// A device attribute (`aclrtGetDeviceInfo`).
pub type aclrtDevAttr = i32;
/// AI CPUs.
pub const ACL_DEV_ATTR_AICPU_CORE_NUM: aclrtDevAttr = 1;
/// AI Cores.
pub const ACL_DEV_ATTR_AICORE_CORE_NUM: aclrtDevAttr = 101;
/// Cube Cores.
pub const ACL_DEV_ATTR_CUBE_CORE_NUM: aclrtDevAttr = 102;
/// Vector Cores.
pub const ACL_DEV_ATTR_VECTOR_CORE_NUM: aclrtDevAttr = 201;
/// threads in a warp.
pub const ACL_DEV_ATTR_WARP_SIZE: aclrtDevAttr = 202;
/// threads per Vector Core.
pub const ACL_DEV_ATTR_MAX_THREAD_PER_VECTOR_CORE: aclrtDevAttr = 203;
/// local memory per Vector Core, bytes.
pub const ACL_DEV_ATTR_UBUF_PER_VECTOR_CORE: aclrtDevAttr = 204;
/// grid size, x.
pub const ACL_DEV_ATTR_MAX_GRID_DIM_X: aclrtDevAttr = 205;
/// grid size, y.
pub const ACL_DEV_ATTR_MAX_GRID_DIM_Y: aclrtDevAttr = 206;
/// grid size, z.
pub const ACL_DEV_ATTR_MAX_GRID_DIM_Z: aclrtDevAttr = 207;
/// blocks per grid.
pub const ACL_DEV_ATTR_MAX_BLOCK_PER_GRID: aclrtDevAttr = 208;
/// threads per block.
pub const ACL_DEV_ATTR_MAX_THREADS_PER_BLOCK: aclrtDevAttr = 209;
/// block size, x.
pub const ACL_DEV_ATTR_MAX_BLOCK_DIM_X: aclrtDevAttr = 210;
/// block size, y.
pub const ACL_DEV_ATTR_MAX_BLOCK_DIM_Y: aclrtDevAttr = 211;
/// block size, z.
pub const ACL_DEV_ATTR_MAX_BLOCK_DIM_Z: aclrtDevAttr = 212;
/// global memory, bytes.
pub const ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE: aclrtDevAttr = 301;
/// L2 cache, bytes.
pub const ACL_DEV_ATTR_L2_CACHE_SIZE: aclrtDevAttr = 302;
/// which OS the device is on.
pub const ACL_DEV_ATTR_SMP_ID: aclrtDevAttr = 401;
/// physical chip id.
pub const ACL_DEV_ATTR_PHY_CHIP_ID: aclrtDevAttr = 402;
/// super pod device id.
pub const ACL_DEV_ATTR_SUPER_POD_DEVICE_ID: aclrtDevAttr = 403;
/// super pod server id.
pub const ACL_DEV_ATTR_SUPER_POD_SERVER_ID: aclrtDevAttr = 404;
/// super pod id.
pub const ACL_DEV_ATTR_SUPER_POD_ID: aclrtDevAttr = 405;
/// custom operator privilege.
pub const ACL_DEV_ATTR_CUST_OP_PRIVILEGE: aclrtDevAttr = 406;
/// mainboard id.
pub const ACL_DEV_ATTR_MAINBOARD_ID: aclrtDevAttr = 407;
/// host-device connection.
pub const ACL_DEV_ATTR_HD_CONNECT_TYPE: aclrtDevAttr = 408;
/// form factor.
pub const ACL_DEV_ATTR_DEVICE_FORM_FACTOR: aclrtDevAttr = 409;
/// compute power splitting.
pub const ACL_DEV_ATTR_IS_VIRTUAL: aclrtDevAttr = 501;
/// NPU architecture.
pub const ACL_DEV_ATTR_NPU_ARCH: aclrtDevAttr = 601;

/// One attribute of device `deviceId`. The host runtime answers what a host
/// device has: its memory (`ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE`, the
/// configured capacity), its cores (the AI CPU, AI Core, Cube and Vector
/// core counts: the host's available parallelism), `ACL_DEV_ATTR_SMP_ID` 0,
/// `ACL_DEV_ATTR_PHY_CHIP_ID` the device id and `ACL_DEV_ATTR_IS_VIRTUAL` 0;
/// any other attribute: `ACL_ERROR_API_NOT_SUPPORT`.
///
/// # Safety
/// `value` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetDeviceInfo(
    deviceId: u32,
    attr: aclrtDevAttr,
    value: *mut i64,
) -> aclError {
    real_or_host!(aclrtGetDeviceInfo(deviceId: u32, attr: aclrtDevAttr, value: *mut i64) {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(value, "value") }?;
        let id = i32::try_from(deviceId).unwrap_or(i32::MAX);
        let device = host().device(id)?;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as i64;
        out.write(match attr {
            ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE => device.memory().capacity() as i64,
            ACL_DEV_ATTR_AICPU_CORE_NUM
            | ACL_DEV_ATTR_AICORE_CORE_NUM
            | ACL_DEV_ATTR_CUBE_CORE_NUM
            | ACL_DEV_ATTR_VECTOR_CORE_NUM => cores,
            ACL_DEV_ATTR_SMP_ID | ACL_DEV_ATTR_IS_VIRTUAL => 0,
            ACL_DEV_ATTR_PHY_CHIP_ID => i64::from(id),
            _ => {
                return Err(Error::NotSupported {
                    what: "this device attribute on the host runtime",
                })
            }
        });
        Ok(())
    })
}

/// A device fault's kind (`aclrtGetErrorVerbose`).
pub type aclrtErrorType = i32;
/// No fault.
pub const ACL_RT_NO_ERROR: aclrtErrorType = 0;
/// Memory.
pub const ACL_RT_ERROR_MEMORY: aclrtErrorType = 1;
/// L2 buffer.
pub const ACL_RT_ERROR_L2: aclrtErrorType = 2;
/// AI Core.
pub const ACL_RT_ERROR_AICORE: aclrtErrorType = 3;
/// Network link.
pub const ACL_RT_ERROR_LINK: aclrtErrorType = 4;
/// L3 port.
pub const ACL_RT_ERROR_L3_PORT: aclrtErrorType = 5;
/// Other.
pub const ACL_RT_ERROR_OTHERS: aclrtErrorType = 0xFFFF;

/// What an AI Core fault points at.
pub type aclrtAicoreErrorType = i32;
/// Unknown.
pub const ACL_RT_AICORE_ERROR_UNKNOWN: aclrtAicoreErrorType = 0;
/// Software.
pub const ACL_RT_AICORE_ERROR_SW: aclrtAicoreErrorType = 1;
/// This device's hardware.
pub const ACL_RT_AICORE_ERROR_HW_LOCAL: aclrtAicoreErrorType = 2;

/// One uncorrectable memory error: where and how long.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclrtMemUceInfo {
    pub addr: *mut c_void,
    pub len: usize,
    pub reserved: [usize; 14],
}

/// Uncorrectable memory errors (up to 20).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclrtMemUceInfoArray {
    pub arraySize: usize,
    pub memUceInfoArray: [aclrtMemUceInfo; 20],
}

/// The detail of a fault, by its kind.
#[repr(C)]
#[derive(Clone, Copy)]
pub union aclrtErrorInfoDetail {
    pub uceInfo: aclrtMemUceInfoArray,
    pub aicoreErrType: aclrtAicoreErrorType,
}

/// A device fault (`aclrtGetErrorVerbose`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclrtErrorInfo {
    pub tryRepair: u8,
    pub hasDetail: u8,
    pub reserved: [u8; 2],
    pub errorType: aclrtErrorType,
    pub detail: aclrtErrorInfoDetail,
}

/// The last device fault of `deviceId`: the host runtime's devices have
/// none, so `ACL_RT_NO_ERROR`, nothing to repair, no detail.
///
/// # Safety
/// `errorInfo` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetErrorVerbose(
    deviceId: i32,
    errorInfo: *mut aclrtErrorInfo,
) -> aclError {
    real_or_host!(aclrtGetErrorVerbose(deviceId: i32, errorInfo: *mut aclrtErrorInfo) {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(errorInfo, "errorInfo") }?;
        host().device(deviceId)?;
        out.write(aclrtErrorInfo {
            tryRepair: 0,
            hasDetail: 0,
            reserved: [0; 2],
            errorType: ACL_RT_NO_ERROR,
            detail: aclrtErrorInfoDetail { aicoreErrType: ACL_RT_AICORE_ERROR_UNKNOWN },
        });
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float16_conversions_round_to_nearest_even_and_keep_specials() {
        for (f, h) in [
            (1.625f32, 0x3E80u16),
            (1.0, 0x3C00),
            (-2.0, 0xC000),
            (65504.0, 0x7BFF),
            (1e6, 0x7C00),
            (0.0, 0),
            (5.960_464_5e-8, 1),
            (1.0 + 1.0 / 2048.0, 0x3C00),
            (1.0 + 3.0 / 2048.0, 0x3C02),
        ] {
            assert_eq!(aclFloatToFloat16(f), h, "{f}");
        }
        for h in [0x3E80u16, 0x3C00, 0xC000, 0x7BFF, 1, 0x0400, 0x8001] {
            assert_eq!(aclFloatToFloat16(aclFloat16ToFloat(h)), h, "{h:#x}");
        }
        assert!(aclFloat16ToFloat(0x7E00).is_nan());
        assert_eq!(aclFloat16ToFloat(0xFC00), f32::NEG_INFINITY);
        assert_eq!(aclDataTypeSize(ACL_FLOAT), 4);
        assert_eq!(aclDataTypeSize(ACL_FLOAT16), 2);
        assert_eq!(aclDataTypeSize(ACL_INT64), 8);
        assert_eq!(aclDataTypeSize(ACL_DT_UNDEFINED), 0);
    }
}
