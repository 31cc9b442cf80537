//! CANN's `acl_rt.h` virtual-memory functions: reserve address space, make
//! physical memory, map it into a reservation, and undo each step.
#![allow(non_snake_case)]

use crate::base::device_port::VirtualMemoryCalls;
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

/// Releases a whole reservation by its start address. A reservation that
/// still has mappings is refused (`aclrtUnmapMem` them first).
///
/// # Safety
/// None: the address is looked up among the live reservations.
#[no_mangle]
pub unsafe extern "C" fn aclrtReleaseMemAddress(virPtr: *mut c_void) -> aclError {
    real_or_host!(aclrtReleaseMemAddress(virPtr: *mut c_void) {
        let addr = args::address(virPtr, "virPtr")?;
        virtual_memory().release(addr.as_ptr() as usize)
    })
}

/// Allocates `size` bytes of physical memory (a multiple of the
/// granularity) on the device `prop->location.id`, counted against its
/// capacity; `flags` must be 0.
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

/// Frees physical memory. Memory still mapped is given back when its last
/// mapping is unmapped; the handle is invalid at once.
///
/// # Safety
/// None: the handle is looked up among the live ones.
#[no_mangle]
pub unsafe extern "C" fn aclrtFreePhysical(handle: aclrtDrvMemHandle) -> aclError {
    real_or_host!(aclrtFreePhysical(handle: aclrtDrvMemHandle) {
        let h = args::address(handle, "handle")?;
        host().free_physical(h.as_ptr() as usize)
    })
}

/// Maps all of physical memory `handle` at `virPtr`: `size` equal to its
/// size, `offset` and `flags` 0, the range granularity-aligned, inside one
/// reservation and over no other mapping.
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

/// Removes the mapping that starts at `virPtr`; its range stays reserved.
/// As on CANN it does not wait for streams: synchronize first if queued
/// work may still use the memory.
///
/// # Safety
/// No queued work may use the range afterwards.
#[no_mangle]
pub unsafe extern "C" fn aclrtUnmapMem(virPtr: *mut c_void) -> aclError {
    real_or_host!(aclrtUnmapMem(virPtr: *mut c_void) {
        let addr = args::address(virPtr, "virPtr")?;
        host().unmap_mem(addr.as_ptr() as usize)
    })
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

/// The virtual-memory calls the pool's expandable segments make: these
/// exports (each the real runtime's function, or the host runtime's), with
/// the device-wide synchronize and the copy the pool's sleep needs.
pub(crate) fn calls() -> VirtualMemoryCalls {
    VirtualMemoryCalls {
        reserve: aclrtReserveMemAddress,
        release: aclrtReleaseMemAddress,
        malloc_physical: aclrtMallocPhysical,
        free_physical: aclrtFreePhysical,
        map: aclrtMapMem,
        unmap: aclrtUnmapMem,
        granularity: aclrtMemGetAllocationGranularity,
        synchronize_device: crate::ffi::cann::runtime::aclrtSynchronizeDevice,
        memcpy: crate::ffi::cann::memory::aclrtMemcpy,
    }
}
