//! CANN's `acl_rt.h` virtual-memory functions: reserve address space, make
//! physical memory, map it into a reservation, and undo each step.
#![allow(non_snake_case)]

use crate::base::boundary::ffi_boundary;
use crate::base::device_port::VirtualMemoryCalls;
use crate::base::error::ACL_SUCCESS;
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args::{self, Out};
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;
use crate::runtime::virtual_memory::virtual_memory;
use std::ffi::c_void;

/// Reserves `size` bytes of device address space without memory behind it
/// (rounded up to the granularity, 2 MiB on the host). `alignment`: 0 or a
/// power of two; `expectPtr`: NULL, or the address wanted (it must be free
/// and aligned); `flags`: the page type (0 normal, 1 huge, 2 huge 1G).
///
/// # Safety
/// `virPtr` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtReserveMemAddress(
    virPtr: *mut *mut c_void,
    size: usize,
    alignment: usize,
    expectPtr: *mut c_void,
    flags: u64,
) -> aclError {
    // SAFETY: the caller's contract.
    let rc = unsafe { direct::aclrtReserveMemAddress(virPtr, size, alignment, expectPtr, flags) };
    if rc == ACL_SUCCESS {
        // SAFETY: the call succeeded, so `virPtr` was writable and holds the address.
        crate::pool::region::reserved(unsafe { virPtr.read() } as usize, size);
    }
    rc
}

/// Releases a whole reservation by its start address. A reservation that
/// still has mappings is refused (`aclrtUnmapMem` them first), sleeping
/// region memory mapped there included.
///
/// # Safety
/// None: the address is looked up among the live reservations.
#[no_mangle]
pub unsafe extern "C" fn aclrtReleaseMemAddress(virPtr: *mut c_void) -> aclError {
    if let Err(e) = crate::pool::region::check_release(virPtr as usize) {
        return ffi_boundary!(|| Err(e));
    }
    // SAFETY: the caller's contract.
    let rc = unsafe { direct::aclrtReleaseMemAddress(virPtr) };
    if rc == ACL_SUCCESS {
        crate::pool::region::released(virPtr as usize);
    }
    rc
}

/// Allocates `size` bytes of physical memory (a multiple of the
/// granularity) on the device `prop->location.id`, counted against its
/// capacity; `flags` must be 0. Inside a tagged region
/// (`aclallocRegionBegin`) the memory belongs to the region's tag and the
/// handle is aclalloc's: it stays valid through `aclallocSleep` and
/// `aclallocWakeUp` (which free and remake the runtime's physical memory
/// behind it) for `aclrtMapMem`, `aclrtUnmapMem` and `aclrtFreePhysical`;
/// it cannot be exported for sharing.
///
/// # Safety
/// `handle` is NULL or writable; `prop` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn aclrtMallocPhysical(
    handle: *mut aclrtDrvMemHandle,
    size: usize,
    prop: *const aclrtPhysicalMemProp,
    flags: u64,
) -> aclError {
    if let Some(tag) = crate::pool::region::current() {
        return ffi_boundary!(|| {
            // SAFETY: the caller's contract.
            let out = unsafe { Out::required(handle, "handle") }?;
            // SAFETY: the caller's contract.
            let prop = unsafe { args::input(prop, "prop") }?;
            let h = crate::pool::region::malloc_physical(tag, size, prop, flags)?;
            out.write(h as aclrtDrvMemHandle);
            Ok(())
        });
    }
    // SAFETY: the caller's contract.
    unsafe { direct::aclrtMallocPhysical(handle, size, prop, flags) }
}

/// Frees physical memory. Memory still mapped is given back when its last
/// mapping is unmapped; the handle is invalid at once. A region's handle
/// is freed asleep or awake.
///
/// # Safety
/// None: the handle is looked up among the live ones.
#[no_mangle]
pub unsafe extern "C" fn aclrtFreePhysical(handle: aclrtDrvMemHandle) -> aclError {
    if crate::pool::region::is_region_handle(handle as usize) {
        return ffi_boundary!(|| crate::pool::region::free_physical(handle as usize));
    }
    // SAFETY: the caller's contract.
    unsafe { direct::aclrtFreePhysical(handle) }
}

/// Maps all of physical memory `handle` at `virPtr`: `size` equal to its
/// size, `offset` and `flags` 0, the range granularity-aligned, inside one
/// reservation and over no other mapping. A region's physical memory is
/// mapped at one address at a time (the address its sleep keeps), and not
/// while its tag sleeps.
///
/// # Safety
/// None: the address and handle are looked up.
#[no_mangle]
pub unsafe extern "C" fn aclrtMapMem(
    virPtr: *mut c_void,
    size: usize,
    offset: usize,
    handle: aclrtDrvMemHandle,
    flags: u64,
) -> aclError {
    if crate::pool::region::is_region_handle(handle as usize) {
        return ffi_boundary!(|| {
            let addr = args::address(virPtr, "virPtr")?.as_ptr() as usize;
            crate::pool::region::map(addr, size, offset, handle as usize, flags)
        });
    }
    // SAFETY: the caller's contract.
    unsafe { direct::aclrtMapMem(virPtr, size, offset, handle, flags) }
}

/// Removes the mapping that starts at `virPtr`; its range stays reserved.
/// As on CANN it does not wait for streams: synchronize first if queued
/// work may still use the memory. Sleeping region memory is unmapped too:
/// its offloaded contents are dropped, and its handle gets fresh memory at
/// the next wake.
///
/// # Safety
/// No queued work may use the range afterwards.
#[no_mangle]
pub unsafe extern "C" fn aclrtUnmapMem(virPtr: *mut c_void) -> aclError {
    if crate::pool::region::is_mapping(virPtr as usize) {
        return ffi_boundary!(
            || crate::pool::region::unmap(virPtr as usize).unwrap_or(Err(NOT_MAPPED))
        );
    }
    // SAFETY: the caller's contract.
    unsafe { direct::aclrtUnmapMem(virPtr) }
}

/// The granularity of physical allocations and mappings (2 MiB on the host
/// for every option and memory attribute).
///
/// # Safety
/// `prop` is NULL or readable; `granularity` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemGetAllocationGranularity(
    prop: *mut aclrtPhysicalMemProp,
    option: aclrtMemGranularityOptions,
    granularity: *mut usize,
) -> aclError {
    real_or_host!(aclrtMemGetAllocationGranularity(prop: *mut aclrtPhysicalMemProp, option: aclrtMemGranularityOptions, granularity: *mut usize) {
        // SAFETY: the caller's contract.
        let prop = unsafe { args::input(prop.cast_const(), "prop") }?;
        // SAFETY: the caller's contract.
        unsafe { args::write_out(granularity, "granularity", || host().allocation_granularity(prop, option)) }
    })
}

/// `aclrtUnmapMem` of region memory another thread unmapped first.
const NOT_MAPPED: crate::base::error::Error = crate::base::error::Error::InvalidParam {
    param: "virPtr",
    reason:
        "It is not the start of a live mapping made by aclrtMapMem (or it was already unmapped)",
};

/// The virtual-memory calls the pool's expandable segments and the regions
/// make: these exports without the region layer (each the real runtime's
/// function, or the host runtime's), with the device-wide synchronize and
/// the copy the pool's sleep needs.
pub(crate) fn calls() -> VirtualMemoryCalls {
    VirtualMemoryCalls {
        reserve: direct::aclrtReserveMemAddress,
        release: direct::aclrtReleaseMemAddress,
        malloc_physical: direct::aclrtMallocPhysical,
        free_physical: direct::aclrtFreePhysical,
        map: direct::aclrtMapMem,
        unmap: direct::aclrtUnmapMem,
        granularity: aclrtMemGetAllocationGranularity,
        synchronize_device: crate::ffi::cann::runtime::aclrtSynchronizeDevice,
        memcpy: crate::ffi::cann::memory::direct::aclrtMemcpy,
    }
}

/// The virtual-memory calls without the region layer: what the exports do
/// for memory outside a region, what regions themselves call, and what this
/// library's pools use (their pages never belong to the program's region).
pub(crate) mod direct {
    #![allow(non_snake_case)]
    use super::*;

    /// `aclrtReserveMemAddress`, forwarded or served by the host runtime.
    ///
    /// # Safety
    /// As the export's.
    pub(crate) unsafe extern "C" fn aclrtReserveMemAddress(
        virPtr: *mut *mut c_void,
        size: usize,
        alignment: usize,
        expectPtr: *mut c_void,
        flags: u64,
    ) -> aclError {
        real_or_host!(aclrtReserveMemAddress(virPtr: *mut *mut c_void, size: usize, alignment: usize, expectPtr: *mut c_void, flags: u64), after_success {
            // SAFETY: the runtime succeeded, so `virPtr` was writable and now holds the address.
            crate::ffi::wiring::ordered_tracking::reissued(unsafe { virPtr.read() }, size);
        } {
            let reserve = || -> crate::base::error::Result<usize> {
                let address = virtual_memory().reserve(size, alignment, expectPtr as usize, flags)?;
                crate::ffi::wiring::ordered_tracking::reissued(address as *mut c_void, size);
                Ok(address)
            };
            // SAFETY: the caller's contract.
            unsafe { args::write_out(virPtr, "virPtr", || Ok(reserve()? as *mut c_void)) }
        })
    }

    /// `aclrtReleaseMemAddress`, forwarded or served by the host runtime.
    ///
    /// # Safety
    /// As the export's.
    pub(crate) unsafe extern "C" fn aclrtReleaseMemAddress(virPtr: *mut c_void) -> aclError {
        real_or_host!(aclrtReleaseMemAddress(virPtr: *mut c_void) {
            let addr = args::address(virPtr, "virPtr")?;
            virtual_memory().release(addr.as_ptr() as usize)
        })
    }

    /// `aclrtMallocPhysical`, forwarded or served by the host runtime.
    ///
    /// # Safety
    /// As the export's.
    pub(crate) unsafe extern "C" fn aclrtMallocPhysical(
        handle: *mut aclrtDrvMemHandle,
        size: usize,
        prop: *const aclrtPhysicalMemProp,
        flags: u64,
    ) -> aclError {
        real_or_host!(aclrtMallocPhysical(handle: *mut aclrtDrvMemHandle, size: usize, prop: *const aclrtPhysicalMemProp, flags: u64) {
            // SAFETY: the caller's contract.
            let out = unsafe { Out::required(handle, "handle") }?;
            // SAFETY: the caller's contract.
            let prop = unsafe { args::input(prop, "prop") }?;
            let h = host().malloc_physical(size, prop, flags)?;
            out.write(h as aclrtDrvMemHandle);
            Ok(())
        })
    }

    /// `aclrtFreePhysical`, forwarded or served by the host runtime.
    ///
    /// # Safety
    /// As the export's.
    pub(crate) unsafe extern "C" fn aclrtFreePhysical(handle: aclrtDrvMemHandle) -> aclError {
        real_or_host!(aclrtFreePhysical(handle: aclrtDrvMemHandle) {
            let h = args::address(handle, "handle")?;
            host().free_physical(h.as_ptr() as usize)
        })
    }

    /// `aclrtMapMem`, forwarded or served by the host runtime.
    ///
    /// # Safety
    /// As the export's.
    pub(crate) unsafe extern "C" fn aclrtMapMem(
        virPtr: *mut c_void,
        size: usize,
        offset: usize,
        handle: aclrtDrvMemHandle,
        flags: u64,
    ) -> aclError {
        real_or_host!(aclrtMapMem(virPtr: *mut c_void, size: usize, offset: usize, handle: aclrtDrvMemHandle, flags: u64) {
            let addr = args::address(virPtr, "virPtr")?;
            let h = args::address(handle, "handle")?;
            virtual_memory().map(
                addr.as_ptr() as usize,
                size,
                offset,
                h.as_ptr() as usize,
                flags,
            )
        })
    }

    /// `aclrtUnmapMem`, forwarded or served by the host runtime.
    ///
    /// # Safety
    /// As the export's.
    pub(crate) unsafe extern "C" fn aclrtUnmapMem(virPtr: *mut c_void) -> aclError {
        real_or_host!(aclrtUnmapMem(virPtr: *mut c_void) {
            let addr = args::address(virPtr, "virPtr")?;
            host().unmap_mem(addr.as_ptr() as usize)
        })
    }
}
