//! The functions a pluggable allocator takes by address after creation, as
//! torch_npu's allocator object does (`allocator().set_init_fn(ptr)`, ...),
//! and the calls that reach them.
//!
//! Each setter takes a function with torch_npu's C signature, or NULL to
//! unset it; the function must stay loaded while the allocator lives. Every
//! call goes through the library's trampoline: a C++ exception thrown by one
//! is an error carrying its what(). Where each is called:
//! - init: once, at the first use of the allocator after it was set, with
//!   the device count;
//! - reset: by `aclallocPluggableEmptyCache` (instead of `emptyCacheSymbol`),
//!   with `checkError` true;
//! - memory fraction: by `aclallocPluggableSetMemoryFraction` (instead of
//!   `memoryFractionSymbol`);
//! - base alloc: by `aclallocPluggableGetBaseAllocation`;
//! - record/erase stream: by `aclallocPluggableRecordStream` /
//!   `aclallocPluggableEraseStream`, for a live block only;
//! - get device stats: by `aclallocPluggableGetDeviceStats`, always with
//!   room for the current `DeviceStats` layout (976 bytes); a function built
//!   against the older one is declared with
//!   `aclallocPluggableSetDeviceStatsLayout`;
//! - reset peak status: by `aclallocPluggableResetPeakStatus`.
#![allow(non_snake_case, non_camel_case_types)]

use crate::base::boundary::ffi_boundary;
use crate::base::error::{Error, Result};
use crate::ffi::boundary::boundary;
use crate::ffi::cann::types::*;
use crate::ffi::ext::plugin::{aclallocPluggable, handle};
use crate::ffi::wiring::args::Out;
use crate::plugin::{published, DeviceStats, DeviceStatsLayout, DeviceStatsV1, Hooks};
use std::ffi::c_void;
use std::ptr::NonNull;

/// `void init(int deviceCount)`.
pub type aclallocPluggableInitFn = Option<unsafe extern "C" fn(deviceCount: i32)>;
/// `void reset(bool checkError)`: gives cached memory back (torch_npu's empty cache).
pub type aclallocPluggableResetFn = Option<unsafe extern "C" fn(checkError: bool)>;
/// `void memoryFraction(double fraction, int device)`.
pub type aclallocPluggableMemoryFractionFn =
    Option<unsafe extern "C" fn(fraction: f64, device: i32)>;
/// `void *baseAlloc(void *ptr, size_t *size)`: the start of the allocation
/// `ptr` lies in, its size written to `*size`.
pub type aclallocPluggableBaseAllocFn =
    Option<unsafe extern "C" fn(ptr: *mut c_void, size: *mut usize) -> *mut c_void>;
/// `void recordStream(void *ptr, aclrtStream stream)` (and eraseStream).
pub type aclallocPluggableStreamFn =
    Option<unsafe extern "C" fn(ptr: *mut c_void, stream: aclrtStream)>;
/// `aclallocPluggableDeviceStats getDeviceStats(int device)`, returned by
/// value in the current layout (PyTorch's `DeviceStats`, 976 bytes).
pub type aclallocPluggableGetDeviceStatsFn =
    Option<unsafe extern "C" fn(device: i32) -> DeviceStats>;
/// `aclallocPluggableDeviceStatsV1 getDeviceStats(int device)`: a function
/// built against PyTorch's older layout (952 bytes). Give it to
/// `aclallocPluggableSetGetDeviceStatsFn` cast to
/// `aclallocPluggableGetDeviceStatsFn` (through `void (*)(void)`, which
/// `-Wcast-function-type` accepts): the library calls it with room for
/// the larger layout and reads it as the older one once declared with
/// `ACLALLOC_DEVICE_STATS_LAYOUT_V1`.
pub type aclallocPluggableGetDeviceStatsV1Fn =
    Option<unsafe extern "C" fn(device: i32) -> DeviceStatsV1>;

/// The function returns `aclallocPluggableDeviceStats` (976 bytes, PyTorch's
/// layout today): the default.
pub const ACLALLOC_DEVICE_STATS_LAYOUT_CURRENT: i32 = 0;
/// The function returns `aclallocPluggableDeviceStatsV1` (952 bytes, the
/// layout before `num_sync_all_streams`, `num_device_alloc` and
/// `num_device_free`).
pub const ACLALLOC_DEVICE_STATS_LAYOUT_V1: i32 = 1;
/// `void resetPeakStatus(int device)`.
pub type aclallocPluggableResetPeakStatusFn = Option<unsafe extern "C" fn(device: i32)>;

fn set(name: &'static str, allocator: aclallocPluggable, f: impl FnOnce(&mut Hooks)) -> aclError {
    boundary(name, || {
        published::with_allocator(handle(allocator)?, |a| {
            a.set_hooks(f);
            Ok(())
        })
    })
}

/// Sets (or with NULL unsets) the init function: called once, with the
/// device count, at the allocator's first use after it was set.
#[no_mangle]
pub extern "C" fn aclallocPluggableSetInitFn(
    allocator: aclallocPluggable,
    fn_: aclallocPluggableInitFn,
) -> aclError {
    set("aclallocPluggableSetInitFn", allocator, |h| h.init = fn_)
}

/// Sets (or unsets) the reset function, which `aclallocPluggableEmptyCache`
/// calls (with true) instead of `emptyCacheSymbol`.
#[no_mangle]
pub extern "C" fn aclallocPluggableSetResetFn(
    allocator: aclallocPluggable,
    fn_: aclallocPluggableResetFn,
) -> aclError {
    set("aclallocPluggableSetResetFn", allocator, |h| h.reset = fn_)
}

/// Sets (or unsets) the memory-fraction function, which
/// `aclallocPluggableSetMemoryFraction` calls instead of `memoryFractionSymbol`.
#[no_mangle]
pub extern "C" fn aclallocPluggableSetMemoryFractionFn(
    allocator: aclallocPluggable,
    fn_: aclallocPluggableMemoryFractionFn,
) -> aclError {
    set("aclallocPluggableSetMemoryFractionFn", allocator, |h| {
        h.memory_fraction = fn_
    })
}

/// Sets (or unsets) the base-allocation function of
/// `aclallocPluggableGetBaseAllocation`.
#[no_mangle]
pub extern "C" fn aclallocPluggableSetBaseAllocFn(
    allocator: aclallocPluggable,
    fn_: aclallocPluggableBaseAllocFn,
) -> aclError {
    set("aclallocPluggableSetBaseAllocFn", allocator, |h| {
        h.base_alloc = fn_
    })
}

/// Sets (or unsets) the record-stream function of `aclallocPluggableRecordStream`.
#[no_mangle]
pub extern "C" fn aclallocPluggableSetRecordStreamFn(
    allocator: aclallocPluggable,
    fn_: aclallocPluggableStreamFn,
) -> aclError {
    set("aclallocPluggableSetRecordStreamFn", allocator, |h| {
        h.record_stream = fn_
    })
}

/// Sets (or unsets) the erase-stream function of `aclallocPluggableEraseStream`.
#[no_mangle]
pub extern "C" fn aclallocPluggableSetEraseStreamFn(
    allocator: aclallocPluggable,
    fn_: aclallocPluggableStreamFn,
) -> aclError {
    set("aclallocPluggableSetEraseStreamFn", allocator, |h| {
        h.erase_stream = fn_
    })
}

/// Sets (or unsets) the function `aclallocPluggableGetDeviceStats` answers with.
#[no_mangle]
pub extern "C" fn aclallocPluggableSetGetDeviceStatsFn(
    allocator: aclallocPluggable,
    fn_: aclallocPluggableGetDeviceStatsFn,
) -> aclError {
    set("aclallocPluggableSetGetDeviceStatsFn", allocator, |h| {
        h.device_stats = fn_
    })
}

/// Says which `DeviceStats` layout the get-device-stats function returns:
/// `ACLALLOC_DEVICE_STATS_LAYOUT_CURRENT` (the default) or
/// `ACLALLOC_DEVICE_STATS_LAYOUT_V1`; anything else:
/// `ACL_ERROR_INVALID_PARAM`. Kept when the function is set again. Either
/// way the function is called with room for the larger layout.
#[no_mangle]
pub extern "C" fn aclallocPluggableSetDeviceStatsLayout(
    allocator: aclallocPluggable,
    layout: i32,
) -> aclError {
    boundary("aclallocPluggableSetDeviceStatsLayout", || {
        let layout = match layout {
            ACLALLOC_DEVICE_STATS_LAYOUT_CURRENT => DeviceStatsLayout::Current,
            ACLALLOC_DEVICE_STATS_LAYOUT_V1 => DeviceStatsLayout::V1,
            _ => {
                return Err(Error::InvalidParam {
                    param: "layout",
                    reason: "It must be ACLALLOC_DEVICE_STATS_LAYOUT_CURRENT (0) or _V1 (1)",
                })
            }
        };
        published::with_allocator(handle(allocator)?, |a| {
            a.set_hooks(|h| h.device_stats_layout = layout);
            Ok(())
        })
    })
}

/// Sets (or unsets) the function `aclallocPluggableResetPeakStatus` calls.
#[no_mangle]
pub extern "C" fn aclallocPluggableSetResetPeakStatusFn(
    allocator: aclallocPluggable,
    fn_: aclallocPluggableResetPeakStatusFn,
) -> aclError {
    set("aclallocPluggableSetResetPeakStatusFn", allocator, |h| {
        h.reset_peak_status = fn_
    })
}

/// `deviceId`'s statistics in the current `DeviceStats` layout (976 bytes;
/// a function of the older layout is read into it, its three missing
/// counters 0): the get-device-stats function's answer, or without one the counters the
/// library keeps (`allocation`, `active`, `allocated_bytes`, `active_bytes`
/// and `requested_bytes` in the "all" entry, `num_ooms`; the rest 0).
///
/// # Safety
/// `stats` must be NULL or writable for an `aclallocPluggableDeviceStats`
/// (976 bytes: a caller built against the older 952-byte layout must give
/// room for the current one).
#[no_mangle]
pub unsafe extern "C" fn aclallocPluggableGetDeviceStats(
    allocator: aclallocPluggable,
    deviceId: i32,
    stats: *mut DeviceStats,
) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: `stats` is NULL or writable (the caller's contract); `Out::required`
        // refuses NULL.
        let out = unsafe { Out::required(stats, "stats") }?;
        let value = published::with_allocator(handle(allocator)?, |a| a.device_stats(deviceId))?;
        out.write(value);
        Ok(())
    })
}

/// Restarts the peaks the library keeps for the allocator, then calls the
/// reset-peak-status function (if set) with `deviceId`.
#[no_mangle]
pub extern "C" fn aclallocPluggableResetPeakStatus(
    allocator: aclallocPluggable,
    deviceId: i32,
) -> aclError {
    ffi_boundary!(|| {
        published::with_allocator(handle(allocator)?, |a| a.reset_peak_status(deviceId))
    })
}

fn block(devPtr: *mut c_void) -> Result<NonNull<c_void>> {
    NonNull::new(devPtr).ok_or(Error::NullPointer { param: "devPtr" })
}

/// The allocation `devPtr` lies in: the base-allocation function's answer,
/// or without one, `devPtr` itself and its size when it is a live block of
/// this allocator (anything else: `ACL_ERROR_INVALID_PARAM`). A NULL answer
/// from the function: `ACL_ERROR_INVALID_PARAM`, nothing written.
///
/// # Safety
/// `basePtr` and `size` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocPluggableGetBaseAllocation(
    allocator: aclallocPluggable,
    devPtr: *mut c_void,
    basePtr: *mut *mut c_void,
    size: *mut usize,
) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: NULL or writable (the caller's contract); refused when NULL.
        let base_out = unsafe { Out::required(basePtr, "basePtr") }?;
        // SAFETY: as above.
        let size_out = unsafe { Out::required(size, "size") }?;
        let ptr = block(devPtr)?;
        let (base, length) =
            published::with_allocator(handle(allocator)?, |a| a.base_allocation(ptr))?;
        base_out.write(base);
        size_out.write(length);
        Ok(())
    })
}

/// Tells the record-stream function that `stream` uses the live block
/// `devPtr` (PyTorch's `record_stream`). Without one set, does nothing. A
/// pointer that is not a live block of this allocator:
/// `ACL_ERROR_INVALID_PARAM`, nothing called.
#[no_mangle]
pub extern "C" fn aclallocPluggableRecordStream(
    allocator: aclallocPluggable,
    devPtr: *mut c_void,
    stream: aclrtStream,
) -> aclError {
    ffi_boundary!(|| {
        let ptr = block(devPtr)?;
        published::with_allocator(handle(allocator)?, |a| {
            a.stream_hook(ptr, stream as usize, false)
        })
    })
}

/// Tells the erase-stream function that `stream` no longer uses the live
/// block `devPtr`; as `aclallocPluggableRecordStream` otherwise.
#[no_mangle]
pub extern "C" fn aclallocPluggableEraseStream(
    allocator: aclallocPluggable,
    devPtr: *mut c_void,
    stream: aclrtStream,
) -> aclError {
    ffi_boundary!(|| {
        let ptr = block(devPtr)?;
        published::with_allocator(handle(allocator)?, |a| {
            a.stream_hook(ptr, stream as usize, true)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::errlog;
    use crate::base::error::{ACL_ERROR_INVALID_PARAM, ACL_SUCCESS};
    use crate::plugin::{PluggableAllocator, PluginFunctions};

    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0x7B00_0000);
    unsafe extern "C" fn alloc(_: isize, _: i32, _: *mut c_void) -> *mut c_void {
        NEXT.fetch_add(0x1000, std::sync::atomic::Ordering::SeqCst) as *mut c_void
    }
    unsafe extern "C" fn free(_: *mut c_void, _: isize, _: i32, _: *mut c_void) {}
    unsafe extern "C" fn stats(device: i32) -> DeviceStats {
        DeviceStats {
            num_alloc_retries: i64::from(device) * 2,
            ..DeviceStats::default()
        }
    }

    fn publish() -> aclallocPluggable {
        let (h, _) = published::publish(PluggableAllocator::from_functions(PluginFunctions {
            alloc,
            free,
            init: None,
            empty_cache: None,
            memory_fraction: None,
        }))
        .unwrap();
        h.as_ptr()
    }

    #[test]
    fn the_exports_write_only_on_success_and_name_what_failed() {
        let a = publish();
        let mut out = DeviceStats {
            max_split_size: -5,
            ..DeviceStats::default()
        };
        // SAFETY: `out` is writable.
        let code = unsafe { aclallocPluggableGetDeviceStats(a, 3, &mut out) };
        assert_eq!(code, ACL_SUCCESS);
        assert_eq!(
            (out.num_alloc_retries, out.max_split_size),
            (0, 0),
            "the counters"
        );
        assert_eq!(
            aclallocPluggableSetGetDeviceStatsFn(a, Some(stats)),
            ACL_SUCCESS
        );
        // SAFETY: as above.
        let code = unsafe { aclallocPluggableGetDeviceStats(a, 3, &mut out) };
        assert_eq!(code, ACL_SUCCESS);
        assert_eq!(out.num_alloc_retries, 6, "the function's, for device 3");
        // SAFETY: NULL is refused.
        let code = unsafe { aclallocPluggableGetDeviceStats(a, 0, std::ptr::null_mut()) };
        assert_eq!(code, ACL_ERROR_INVALID_PARAM);
        assert!(errlog::take_recent().unwrap().contains("stats"));

        let mut block = std::ptr::null_mut();
        // SAFETY: `block` is writable.
        let code = unsafe {
            super::super::plugin::aclallocPluggableMalloc(a, &mut block, 100, std::ptr::null_mut())
        };
        assert_eq!(code, ACL_SUCCESS);
        let (mut base, mut size) = (0x1 as *mut c_void, 7usize);
        let foreign = 0x42 as *mut c_void;
        // SAFETY: both outputs are writable.
        let code = unsafe { aclallocPluggableGetBaseAllocation(a, foreign, &mut base, &mut size) };
        assert_eq!(code, ACL_ERROR_INVALID_PARAM);
        assert_eq!((base as usize, size), (1, 7), "nothing written on failure");
        assert!(errlog::take_recent()
            .unwrap()
            .contains("not allocated here"));
        // SAFETY: as above.
        let code = unsafe { aclallocPluggableGetBaseAllocation(a, block, &mut base, &mut size) };
        assert_eq!((code, base, size), (ACL_SUCCESS, block, 100));
        assert_eq!(
            aclallocPluggableRecordStream(a, block, std::ptr::null_mut()),
            ACL_SUCCESS
        );
        assert_eq!(
            aclallocPluggableRecordStream(a, foreign, std::ptr::null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclallocPluggableEraseStream(a, std::ptr::null_mut(), std::ptr::null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(errlog::take_recent().unwrap().contains("devPtr"));
        assert_eq!(
            super::super::plugin::aclallocPluggableFree(a, block),
            ACL_SUCCESS
        );
        assert_eq!(aclallocPluggableResetPeakStatus(a, 0), ACL_SUCCESS);
        assert_eq!(
            super::super::plugin::aclallocPluggableDestroy(a),
            ACL_SUCCESS
        );
        assert_eq!(
            aclallocPluggableSetInitFn(a, None),
            ACL_ERROR_INVALID_PARAM,
            "destroyed"
        );
    }
}
