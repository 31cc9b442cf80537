//! What the region mechanism needs of a runtime: CANN's virtual-memory
//! calls, a device-wide synchronize and copies to and from the host. One
//! implementation serves both worlds: [`VirtualMemoryCalls`], which the
//! composition root fills with the host runtime's functions or with the
//! real runtime's (the same functions a tagged pool uses).

use crate::base::device_port::{self, VirtualMemoryCalls};
use crate::base::error::{aclError, Error, Result, ACL_SUCCESS};
use crate::base::types::{
    aclrtDrvMemHandle, aclrtPhysicalMemProp, ACL_HBM_MEM, ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
};
use std::ffi::c_void;

/// A runtime's device memory as regions use it. Addresses and handles are
/// the runtime's own numbers.
pub trait RegionPort {
    /// Physical memory for `aclrtMalloc` inside a region: the current device's HBM.
    fn device_prop(&self) -> aclrtPhysicalMemProp;
    /// The granularity of physical memory described by `prop`.
    fn granularity(&self, prop: &aclrtPhysicalMemProp) -> usize;
    /// `aclrtReserveMemAddress` of `size` bytes anywhere.
    fn reserve(&self, size: usize) -> Result<usize>;
    /// `aclrtReleaseMemAddress`.
    fn release(&self, va: usize) -> Result<()>;
    /// `aclrtMallocPhysical`; the error says how much the device lacks.
    fn malloc_physical(
        &self,
        size: usize,
        prop: &aclrtPhysicalMemProp,
        flags: u64,
    ) -> Result<usize>;
    /// `aclrtFreePhysical`.
    fn free_physical(&self, handle: usize) -> Result<()>;
    /// `aclrtMapMem`.
    fn map(&self, va: usize, size: usize, offset: usize, handle: usize, flags: u64) -> Result<()>;
    /// `aclrtUnmapMem`.
    fn unmap(&self, va: usize) -> Result<()>;
    /// Waits for the device's queued work (`aclrtSynchronizeDevice`).
    fn synchronize(&self) -> Result<()>;
    /// Copies mapped device memory at `va` to `out`.
    fn read(&self, va: usize, out: &mut [u8]) -> Result<()>;
    /// Copies `data` to mapped device memory at `va`.
    fn write(&self, va: usize, data: &[u8]) -> Result<()>;
}

/// The process's runtime, as the device port wires it; refused on a runtime
/// without virtual memory.
pub(crate) fn runtime() -> Result<VirtualMemoryCalls> {
    device_port::port()
        .virtual_memory()
        .ok_or(Error::NotSupported {
            what: "a tagged region on a runtime without virtual memory (aclrtReserveMemAddress)",
        })
}

/// A call's code as a `Result`, with `reason` when the runtime refused.
fn checked(rc: aclError, reason: &'static str) -> Result<()> {
    match rc {
        ACL_SUCCESS => Ok(()),
        _ => Err(Error::Failure { reason }),
    }
}

impl RegionPort for VirtualMemoryCalls {
    fn device_prop(&self) -> aclrtPhysicalMemProp {
        let device = device_port::current_device().unwrap_or(0);
        crate::virtual_memory::device_hbm_prop(u32::try_from(device).unwrap_or(0))
    }

    fn granularity(&self, prop: &aclrtPhysicalMemProp) -> usize {
        const FALLBACK: usize = 2 << 20;
        let (mut prop, mut g) = (*prop, 0usize);
        // SAFETY: both pointers are valid for the call.
        let rc =
            unsafe { (self.granularity)(&mut prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &mut g) };
        if rc == ACL_SUCCESS && g.is_power_of_two() {
            g
        } else {
            FALLBACK
        }
    }

    fn reserve(&self, size: usize) -> Result<usize> {
        let mut va: *mut c_void = std::ptr::null_mut();
        // SAFETY: `va` is a valid out-pointer; flags 1: huge pages, as
        // torch_npu reserves its expandable segments.
        let rc = unsafe { (self.reserve)(&mut va, size, 0, std::ptr::null_mut(), 1) };
        match rc {
            ACL_SUCCESS if !va.is_null() => Ok(va as usize),
            _ => Err(Error::ReserveFailed {
                device: u32::try_from(device_port::current_device().unwrap_or(0)).unwrap_or(0),
                size,
            }),
        }
    }

    fn release(&self, va: usize) -> Result<()> {
        // SAFETY: a reservation of a region, with nothing mapped.
        let rc = unsafe { (self.release)(va as *mut c_void) };
        checked(
            rc,
            "The runtime refused to release a region's address range (aclrtReleaseMemAddress)",
        )
    }

    fn malloc_physical(
        &self,
        size: usize,
        prop: &aclrtPhysicalMemProp,
        flags: u64,
    ) -> Result<usize> {
        let mut handle: aclrtDrvMemHandle = std::ptr::null_mut();
        // SAFETY: valid pointers for the call.
        let rc = unsafe { (self.malloc_physical)(&mut handle, size, prop, flags) };
        if rc == ACL_SUCCESS && !handle.is_null() {
            return Ok(handle as usize);
        }
        let device = i32::try_from(prop.location.id).unwrap_or(0);
        let (mut free, mut total) = (0usize, 0usize);
        let port = device_port::port();
        let known = port.current_device() == Some(device)
            && port.acl_mem_info(ACL_HBM_MEM, &mut free, &mut total) == ACL_SUCCESS;
        Err(match known {
            true => Error::DeviceMemoryExhausted {
                device: prop.location.id,
                size,
                free,
                capacity: total,
            },
            false => Error::AllocatorReturnedNull {
                allocator: "device (aclrtMallocPhysical)",
                size,
                device,
            },
        })
    }

    fn free_physical(&self, handle: usize) -> Result<()> {
        // SAFETY: physical memory of a region, unmapped, freed once.
        let rc = unsafe { (self.free_physical)(handle as aclrtDrvMemHandle) };
        checked(
            rc,
            "The runtime refused to free a region's physical memory (aclrtFreePhysical)",
        )
    }

    fn map(&self, va: usize, size: usize, offset: usize, handle: usize, flags: u64) -> Result<()> {
        // SAFETY: `va` lies in a reservation with nothing mapped there;
        // `handle` is live physical memory of a region.
        let rc = unsafe {
            (self.map)(
                va as *mut c_void,
                size,
                offset,
                handle as aclrtDrvMemHandle,
                flags,
            )
        };
        checked(
            rc,
            "The runtime refused to map a region's physical memory (aclrtMapMem)",
        )
    }

    fn unmap(&self, va: usize) -> Result<()> {
        // SAFETY: a mapping of a region; no queued work uses it (the caller synchronized).
        let rc = unsafe { (self.unmap)(va as *mut c_void) };
        checked(
            rc,
            "The runtime refused to unmap a region's memory (aclrtUnmapMem)",
        )
    }

    fn synchronize(&self) -> Result<()> {
        // SAFETY: no arguments.
        let rc = unsafe { (self.synchronize_device)() };
        checked(
            rc,
            "The device's queued work failed before a region could sleep (aclrtSynchronizeDevice)",
        )
    }

    fn read(&self, va: usize, out: &mut [u8]) -> Result<()> {
        let (dst, len) = (out.as_mut_ptr().cast::<c_void>(), out.len());
        // SAFETY: `out` is writable for `len` bytes; `va` starts `len`
        // mapped bytes of a region.
        let rc = unsafe {
            (self.memcpy)(
                dst,
                len,
                va as *const c_void,
                len,
                ACL_MEMCPY_DEVICE_TO_HOST,
            )
        };
        checked(
            rc,
            "The device refused to copy a sleeping region's memory to the host",
        )
    }

    fn write(&self, va: usize, data: &[u8]) -> Result<()> {
        let (src, len) = (data.as_ptr().cast::<c_void>(), data.len());
        // SAFETY: `data` is readable for `len` bytes; `va` starts `len`
        // mapped bytes of a region.
        let rc =
            unsafe { (self.memcpy)(va as *mut c_void, len, src, len, ACL_MEMCPY_HOST_TO_DEVICE) };
        checked(
            rc,
            "The device refused to copy a waking region's contents back",
        )
    }
}
