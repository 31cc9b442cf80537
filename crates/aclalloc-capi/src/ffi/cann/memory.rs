//! CANN's `acl_rt.h` memory functions. Device memory is host memory mapped
//! lazily per allocation; every device pointer is checked against the live
//! allocations, never trusted.
#![allow(non_snake_case)]

use crate::base::boundary::{boundary, ffi_boundary};
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args::{self, Out};
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;
use crate::ffi::wiring::ordered_tracking;
use crate::ffi::wiring::region;
use std::ffi::c_void;

/// Device memory for `aclrtMalloc` and `aclrtMallocAlign32`, written to `devPtr`.
///
/// # Safety
/// `devPtr` is NULL or writable.
unsafe fn malloc(devPtr: *mut *mut c_void, size: usize) -> crate::base::error::Result<()> {
    // SAFETY: the caller's contract.
    unsafe {
        args::write_out(devPtr, "devPtr", || {
            let address = host().malloc(size)?.as_ptr().cast();
            ordered_tracking::reissued(address, size);
            Ok(address)
        })
    }
}

/// Allocates `size` bytes of device memory on the current context's device
/// (page-aligned; the policy has no effect on the host, and a value that is
/// not an `aclrtMemMallocPolicy` is accepted, as CANN falls back to its
/// default policy). More than the
/// device's free capacity (`ACLALLOC_DEVICE_MEMORY`):
/// `ACL_ERROR_RT_MEMORY_ALLOCATION`. `size` 0: `ACL_ERROR_INVALID_PARAM`.
/// Inside a tagged region (`aclallocRegionBegin`), the memory belongs to the
/// region's tag: reserved address space with physical memory mapped over
/// it (rounded up to the granularity), which `aclallocSleep` can give back
/// while the address stays.
///
/// # Safety
/// `devPtr` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtMalloc(
    devPtr: *mut *mut c_void,
    size: usize,
    policy: aclrtMemMallocPolicy,
) -> aclError {
    // SAFETY: the caller's contract.
    unsafe { in_region_or("aclrtMalloc", devPtr, size, policy, direct::aclrtMalloc) }
}

/// Region memory when the calling thread is inside a tagged region, else
/// what `outside` gives: the one choice of every allocating export.
/// `function` is the export, which a failure's message names.
///
/// # Safety
/// `devPtr` is NULL or writable.
unsafe fn in_region_or(
    function: &'static str,
    devPtr: *mut *mut c_void,
    size: usize,
    policy: aclrtMemMallocPolicy,
    outside: unsafe extern "C" fn(*mut *mut c_void, usize, aclrtMemMallocPolicy) -> aclError,
) -> aclError {
    if let Some(tag) = crate::pool::region::current() {
        // SAFETY: the caller's contract.
        return boundary(function, || unsafe { region::malloc(devPtr, size, tag) });
    }
    // SAFETY: the caller's contract.
    unsafe { outside(devPtr, size, policy) }
}

/// `aclrtMalloc` without CANN's 32 bytes of padding; on the host both give
/// page-aligned memory of exactly `size` usable bytes. Inside a tagged
/// region, region memory, as `aclrtMalloc`'s.
///
/// # Safety
/// `devPtr` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtMallocAlign32(
    devPtr: *mut *mut c_void,
    size: usize,
    policy: aclrtMemMallocPolicy,
) -> aclError {
    // SAFETY: the caller's contract.
    unsafe {
        in_region_or(
            "aclrtMallocAlign32",
            devPtr,
            size,
            policy,
            direct::aclrtMallocAlign32,
        )
    }
}

/// `aclrtMalloc` of memory the device may cache; on the host the same
/// memory as `aclrtMalloc`'s. Inside a tagged region, region memory, as
/// `aclrtMalloc`'s.
///
/// # Safety
/// `devPtr` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtMallocCached(
    devPtr: *mut *mut c_void,
    size: usize,
    policy: aclrtMemMallocPolicy,
) -> aclError {
    // SAFETY: the caller's contract.
    unsafe {
        in_region_or(
            "aclrtMallocCached",
            devPtr,
            size,
            policy,
            direct::aclrtMallocCached,
        )
    }
}

/// Frees device memory after all pending stream work has run. A pointer that
/// is not the start of live device memory (foreign, interior, already freed):
/// `ACL_ERROR_INVALID_PARAM`, nothing freed. Region memory is freed asleep
/// or awake: its physical memory (or offloaded copy) and its address range.
///
/// # Safety
/// `devPtr` is live for a real runtime; the host runtime refuses what is not.
#[no_mangle]
pub unsafe extern "C" fn aclrtFree(devPtr: *mut c_void) -> aclError {
    if crate::pool::region::is_allocation(devPtr as usize) {
        return ffi_boundary!(
            || crate::pool::region::free(devPtr as usize).unwrap_or(Err(region::NOT_ALLOCATED))
        );
    }
    // SAFETY: the caller's contract.
    unsafe { direct::aclrtFree(devPtr) }
}

/// Copies `count` bytes (`count` <= `destMax`). Device sides named by `kind`
/// must lie inside one live allocation; with `ACL_MEMCPY_DEFAULT`, any side
/// that starts in device memory must. On every side, a freed device address
/// or a reserved one with nothing mapped is refused (`ACL_ERROR_INVALID_PARAM`,
/// the address in the message), never touched; so is sleeping memory of a
/// tagged pool or region, in front of a real runtime too (the message names
/// the tag).
///
/// # Safety
/// Host-side ranges must be valid for `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemcpy(
    dst: *mut c_void,
    destMax: usize,
    src: *const c_void,
    count: usize,
    kind: aclrtMemcpyKind,
) -> aclError {
    if let Err(e) = region::refuse_sleeping(&[(dst, "dst"), (src, "src")], count) {
        return ffi_boundary!(|| Err(e));
    }
    // SAFETY: the caller's contract.
    unsafe { direct::aclrtMemcpy(dst, destMax, src, count, kind) }
}

/// Sets `count` bytes (`count` <= `maxCount`) to the low byte of `value`.
/// As CANN decides by the address, the memory may be the device's or the
/// host's: on the host runtime, an address no device allocation knows of is
/// host memory, accepted when the whole range lies in mappings of the
/// process that allow writing (`ACL_ERROR_INVALID_PARAM` otherwise: not
/// mapped, or read-only). Freed or overrun device memory is refused.
///
/// # Safety
/// None beyond C's: the range is checked against device memory and the
/// process's writable mappings.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemset(
    devPtr: *mut c_void,
    maxCount: usize,
    value: i32,
    count: usize,
) -> aclError {
    if let Err(e) = region::refuse_sleeping(&[(devPtr, "devPtr")], count) {
        return ffi_boundary!(|| Err(e));
    }
    real_or_host!(aclrtMemset(devPtr: *mut c_void, maxCount: usize, value: i32, count: usize), after_success {
        ordered_tracking::used(std::ptr::null_mut(), &[devPtr], count);
    } {
        host().memset(args::address(devPtr, "devPtr")?, maxCount, value, count)?;
        ordered_tracking::used(std::ptr::null_mut(), &[devPtr], count);
        Ok(())
    })
}

/// `aclrtMemcpy` run in order on `stream` (NULL: the default stream).
///
/// # Safety
/// Host-side ranges must stay valid until the stream has run the copy.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemcpyAsync(
    dst: *mut c_void,
    destMax: usize,
    src: *const c_void,
    count: usize,
    kind: aclrtMemcpyKind,
    stream: aclrtStream,
) -> aclError {
    if let Err(e) = region::refuse_sleeping(&[(dst, "dst"), (src, "src")], count) {
        return ffi_boundary!(|| Err(e));
    }
    real_or_host!(aclrtMemcpyAsync(
        dst: *mut c_void,
        destMax: usize,
        src: *const c_void,
        count: usize,
        kind: aclrtMemcpyKind,
        stream: aclrtStream
    ), after_success {
        ordered_tracking::used(stream, &[dst, src], count);
    } {
        let (dst_ptr, src_ptr) = (dst, src);
        let dst = args::address(dst, "dst")?;
        let src = args::address(src.cast_mut(), "src")?;
        let key = args::optional_stream(stream);
        // SAFETY: the caller's contract for host-side ranges.
        unsafe { host().memcpy_async(dst, destMax, src, count, kind, key) }?;
        ordered_tracking::used_on_host(stream, &[dst_ptr, src_ptr], count);
        Ok(())
    })
}

/// `aclrtMemset` run in order on `stream` (NULL: the default stream); the
/// range is checked as `aclrtMemset`'s when the call is made.
///
/// # Safety
/// The memory must not be freed (host memory: unmapped) before the stream
/// has run the fill (`aclrtFree` waits for pending work, so this holds for
/// device memory).
#[no_mangle]
pub unsafe extern "C" fn aclrtMemsetAsync(
    devPtr: *mut c_void,
    maxCount: usize,
    value: i32,
    count: usize,
    stream: aclrtStream,
) -> aclError {
    if let Err(e) = region::refuse_sleeping(&[(devPtr, "devPtr")], count) {
        return ffi_boundary!(|| Err(e));
    }
    real_or_host!(aclrtMemsetAsync(devPtr: *mut c_void, maxCount: usize, value: i32, count: usize, stream: aclrtStream), after_success {
        ordered_tracking::used(stream, &[devPtr], count);
    } {
        let dst = args::address(devPtr, "devPtr")?;
        host().memset_async(dst, maxCount, value, count, args::optional_stream(stream))?;
        ordered_tracking::used_on_host(stream, &[devPtr], count);
        Ok(())
    })
}

/// Free and total bytes of the current context's device; every `attr`
/// describes the same memory on the host.
///
/// # Safety
/// `free` and `total` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetMemInfo(
    attr: aclrtMemAttr,
    free: *mut usize,
    total: *mut usize,
) -> aclError {
    real_or_host!(aclrtGetMemInfo(attr: aclrtMemAttr, free: *mut usize, total: *mut usize) {
        // SAFETY: the caller's contract.
        let free_out = unsafe { Out::required(free, "free") }?;
        // SAFETY: the caller's contract.
        let total_out = unsafe { Out::required(total, "total") }?;
        let (f, t) = host().mem_info(attr)?;
        free_out.write(f);
        total_out.write(t);
        Ok(())
    })
}

/// The memory calls without the region layer: what the exports do outside
/// a region, and what this library's own device memory uses (a pool's
/// segments never belong to the program's region).
pub(crate) mod direct {
    #![allow(non_snake_case)]
    use super::*;

    /// The allocating calls of `aclrtMalloc`'s signature: forwarded, or
    /// served by the host runtime's `aclrtMalloc` (on the host they differ in
    /// nothing: every allocation is page-aligned and cached alike).
    macro_rules! direct_malloc {
        ($name:ident) => {
            #[doc = concat!("`", stringify!($name), "`, forwarded or served by the host runtime.")]
            ///
            /// # Safety
            /// `devPtr` is NULL or writable.
            pub(crate) unsafe extern "C" fn $name(
                devPtr: *mut *mut c_void,
                size: usize,
                policy: aclrtMemMallocPolicy,
            ) -> aclError {
                real_or_host!($name(devPtr: *mut *mut c_void, size: usize, policy: aclrtMemMallocPolicy), after_success {
                    // SAFETY: the runtime succeeded, so `devPtr` was writable and now holds the address.
                    ordered_tracking::reissued(unsafe { devPtr.read() }, size);
                } {
                    // SAFETY: the caller's contract.
                    unsafe { malloc(devPtr, size) }
                })
            }
        };
    }
    direct_malloc!(aclrtMalloc);
    direct_malloc!(aclrtMallocAlign32);
    direct_malloc!(aclrtMallocCached);

    /// `aclrtFree`, forwarded or served by the host runtime.
    ///
    /// # Safety
    /// `devPtr` is live for a real runtime; the host runtime refuses what is not.
    pub(crate) unsafe extern "C" fn aclrtFree(devPtr: *mut c_void) -> aclError {
        real_or_host!(aclrtFree(devPtr: *mut c_void) {
            host().free(args::address(devPtr, "devPtr")?.as_ptr())
        })
    }

    /// `aclrtMemcpy` without the check for sleeping memory: a sleeping
    /// pool's or region's own offload and restore.
    ///
    /// # Safety
    /// Host-side ranges must be valid for `count` bytes.
    pub(crate) unsafe extern "C" fn aclrtMemcpy(
        dst: *mut c_void,
        destMax: usize,
        src: *const c_void,
        count: usize,
        kind: aclrtMemcpyKind,
    ) -> aclError {
        real_or_host!(aclrtMemcpy(dst: *mut c_void, destMax: usize, src: *const c_void, count: usize, kind: aclrtMemcpyKind), after_success {
            ordered_tracking::used(std::ptr::null_mut(), &[dst, src], count);
        } {
            let (dst_ptr, src_ptr) = (dst, src);
            let dst = args::address(dst, "dst")?;
            let src = args::address(src.cast_mut(), "src")?;
            // SAFETY: the caller's contract for host-side ranges.
            unsafe { host().memcpy(dst, destMax, src, count, kind) }?;
            ordered_tracking::used(std::ptr::null_mut(), &[dst_ptr, src_ptr], count);
            Ok(())
        })
    }
}
