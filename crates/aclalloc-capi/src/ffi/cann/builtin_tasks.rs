//! CANN's built-in tasks (`acl_rt.h`): the SDMA reduce
//! (`aclrtReduceAsync`) and the random-number task (`aclrtRandomNumAsync`),
//! queued in stream order (see `crate::runtime::reduce` and
//! `crate::runtime::random_num`).
#![allow(non_snake_case, non_camel_case_types)]

use crate::base::error::{Error, Result};
use crate::ffi::cann::device_info::aclDataType;
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args;
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;
use crate::runtime::random_num::{RandomParam, RandomTask};
use std::ffi::c_void;

/// A reduce's operation (`aclrtReduceAsync`).
pub type aclrtReduceKind = i32;
/// `dst[i] += src[i]`.
pub const ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM: aclrtReduceKind = 10;
/// `dst[i] = max(dst[i], src[i])`.
pub const ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX: aclrtReduceKind = 11;
/// `dst[i] = min(dst[i], src[i])`.
pub const ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN: aclrtReduceKind = 12;
/// The STARS hardware's EQUAL (refused by the host runtime, as CANN
/// refuses it elsewhere).
pub const ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL: aclrtReduceKind = 13;

/// The distribution of a random-number task.
pub type aclrtRandomNumFuncType = i32;
/// A dropout bitmask: one bit per number, 1 for a kept element.
pub const ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK: aclrtRandomNumFuncType = 0;
/// Uniform in `[min, max)`.
pub const ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS: aclrtRandomNumFuncType = 1;
/// Normal.
pub const ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS: aclrtRandomNumFuncType = 2;
/// Normal, truncated to two standard deviations.
pub const ACL_RT_RANDOM_NUM_FUNC_TYPE_TRUNCATED_NORMAL_DIS: aclrtRandomNumFuncType = 3;

/// One parameter of a random-number task: a value (`isAddr` 0, its first
/// `size` bytes of `valueOrAddr`, little-endian) or the device address of
/// one (`isAddr` 1).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclrtRandomParaInfo {
    pub isAddr: u8,
    pub valueOrAddr: [u8; 8],
    pub size: u8,
    pub rsv: [u8; 6],
}

/// A dropout bitmask's parameter: the ratio of dropped elements.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclrtDropoutBitmaskInfo {
    pub dropoutRation: aclrtRandomParaInfo,
}

/// A uniform distribution's parameters.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclrtUniformDisInfo {
    pub min: aclrtRandomParaInfo,
    pub max: aclrtRandomParaInfo,
}

/// A normal distribution's parameters.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclrtNormalDisInfo {
    pub mean: aclrtRandomParaInfo,
    pub stddev: aclrtRandomParaInfo,
}

/// The parameters of one distribution (the union CANN declares inside
/// [`aclrtRandomNumFuncParaInfo`], named here so C can spell it).
#[repr(C)]
#[derive(Clone, Copy)]
pub union aclrtRandomNumFuncParaInfoParam {
    pub dropoutBitmaskInfo: aclrtDropoutBitmaskInfo,
    pub uniformDisInfo: aclrtUniformDisInfo,
    pub normalDisInfo: aclrtNormalDisInfo,
}

/// A distribution and its parameters.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclrtRandomNumFuncParaInfo {
    pub funcType: aclrtRandomNumFuncType,
    pub paramInfo: aclrtRandomNumFuncParaInfoParam,
}

/// A random-number task (`aclrtRandomNumAsync`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclrtRandomNumTaskInfo {
    /// The numbers' type (the ratio's, for a dropout bitmask).
    pub dataType: aclDataType,
    pub randomNumFuncParaInfo: aclrtRandomNumFuncParaInfo,
    /// Device memory the runtime writes the parameters to (NULL: its own).
    pub randomParaAddr: *mut c_void,
    /// Device memory for the numbers.
    pub randomResultAddr: *mut c_void,
    /// 16 bytes of device memory: the generator's counter.
    pub randomCounterAddr: *mut c_void,
    pub randomSeed: aclrtRandomParaInfo,
    pub randomNum: aclrtRandomParaInfo,
    pub rsv: [u8; 8],
}

/// The fields of a parameter the task reads (`rsv` may be uninitialized,
/// as CANN's own samples leave it, so it is not read).
///
/// # Safety
/// `p` points into a readable task.
unsafe fn param(p: *const aclrtRandomParaInfo) -> RandomParam {
    use std::ptr::addr_of;
    // SAFETY: the function's contract; fields read one by one, through raw
    // pointers, never as a whole struct.
    unsafe {
        RandomParam {
            is_addr: addr_of!((*p).isAddr).read(),
            value_or_addr: addr_of!((*p).valueOrAddr).read(),
            size: addr_of!((*p).size).read(),
        }
    }
}

fn reserved_null(reserve: *mut c_void) -> Result<()> {
    if reserve.is_null() {
        Ok(())
    } else {
        Err(Error::InvalidParam {
            param: "reserve",
            reason: "reserve is a reserved parameter and must be nullptr",
        })
    }
}

/// Queues `dst[i] = dst[i] kind src[i]` over `count` bytes of `type`
/// elements on `stream` (`reserve`: NULL).
///
/// # Safety
/// None for the host runtime: both ranges are checked as live device memory.
#[no_mangle]
pub unsafe extern "C" fn aclrtReduceAsync(
    dst: *mut c_void,
    src: *const c_void,
    count: u64,
    kind: aclrtReduceKind,
    r#type: aclDataType,
    stream: aclrtStream,
    reserve: *mut c_void,
) -> aclError {
    real_or_host!(aclrtReduceAsync(dst: *mut c_void, src: *const c_void, count: u64, kind: aclrtReduceKind, r#type: aclDataType, stream: aclrtStream, reserve: *mut c_void) {
        let dst = args::address(dst, "dst")?;
        let src = args::address(src.cast_mut(), "src")?;
        reserved_null(reserve)?;
        host().reduce_async(dst.as_ptr(), src.as_ptr(), count, kind, r#type, args::optional_stream(stream))
    })
}

/// Queues the random-number task `taskInfo` on `stream` (`reserve`: NULL).
///
/// # Safety
/// `taskInfo` is NULL or points to a readable task; the addresses in it
/// are checked as live device memory.
#[no_mangle]
pub unsafe extern "C" fn aclrtRandomNumAsync(
    taskInfo: *const aclrtRandomNumTaskInfo,
    stream: aclrtStream,
    reserve: *mut c_void,
) -> aclError {
    real_or_host!(aclrtRandomNumAsync(taskInfo: *const aclrtRandomNumTaskInfo, stream: aclrtStream, reserve: *mut c_void) {
        if taskInfo.is_null() {
            return Err(Error::NullPointer { param: "taskInfo" });
        }
        reserved_null(reserve)?;
        use std::ptr::addr_of;
        // SAFETY: the caller's contract. Only the fields the task uses are
        // read, each through a raw pointer: a program may leave the rest
        // (`rsv`, a dropout's unused second parameter) uninitialized, as
        // CANN's samples do.
        let task = unsafe {
            let f = addr_of!((*taskInfo).randomNumFuncParaInfo);
            let func = addr_of!((*f).funcType).read();
            let pair = addr_of!((*f).paramInfo.uniformDisInfo);
            let second = if func == ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK {
                RandomParam::default()
            } else {
                param(addr_of!((*pair).max))
            };
            RandomTask {
                data_type: addr_of!((*taskInfo).dataType).read(),
                func,
                params: [param(addr_of!((*pair).min)), second],
                para_addr: addr_of!((*taskInfo).randomParaAddr).read() as usize,
                result: addr_of!((*taskInfo).randomResultAddr).read() as usize,
                counter: addr_of!((*taskInfo).randomCounterAddr).read() as usize,
                seed: param(addr_of!((*taskInfo).randomSeed)),
                num: param(addr_of!((*taskInfo).randomNum)),
            }
        };
        host().random_num_async(&task, args::optional_stream(stream))
    })
}
