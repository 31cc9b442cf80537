//! The device's virtual memory as an expandable pool sees it: reserve
//! address space, back one page of it with physical memory, take the page
//! back, release the address space. [`super::acl::AclMemory`] uses the ACL
//! functions; [`super::device::HostMemory`] maps host memory for tests.

use super::acl::AclMemory;
use super::device::HostMemory;
use crate::base::error::ACL_SUCCESS;
use crate::base::types::{
    aclrtDrvMemHandle, aclrtPhysicalMemProp, ACL_HBM_MEM_HUGE, ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEM_ALLOCATION_TYPE_PINNED, ACL_MEM_HANDLE_TYPE_NONE,
    ACL_MEM_LOCATION_TYPE_DEVICE, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
};
use std::ffi::c_void;
use std::num::NonZeroUsize;

/// Virtual memory of one device.
pub trait VirtualMemory: Send + Sync {
    /// The page size: physical memory is mapped and unmapped in pages.
    fn page_size(&self) -> usize;
    /// Reserves `size` bytes (a multiple of the page size) of address space.
    fn reserve(&self, size: usize) -> Option<NonZeroUsize>;
    /// Releases a reservation that has no page mapped.
    fn release(&self, addr: NonZeroUsize, size: usize);
    /// Backs the page at `addr` with new physical memory: a token for
    /// [`VirtualMemory::unmap_page`], or `None` when the device is out of memory.
    fn map_page(&self, addr: usize) -> Option<NonZeroUsize>;
    /// Unmaps the page at `addr` and frees its physical memory.
    fn unmap_page(&self, addr: usize, token: NonZeroUsize);
    /// Waits until no queued work can use memory about to be unmapped.
    fn synchronize(&self);
    /// Copies the mapped device memory at `addr` into `out` (a sleeping
    /// pool's offload). False when the device refused.
    fn read(&self, addr: usize, out: &mut [u8]) -> bool;
    /// Copies `data` into the mapped device memory at `addr` (the restore
    /// at wake). False when the device refused.
    fn write(&self, addr: usize, data: &[u8]) -> bool;
}

// ---- the ACL device -------------------------------------------------------

const PAGE: usize = 2 << 20;

/// Pinned huge-page HBM of `device`, not shareable: the physical memory
/// the pools and the regions map.
pub(crate) fn device_hbm_prop(device: u32) -> aclrtPhysicalMemProp {
    let mut prop = aclrtPhysicalMemProp {
        handleType: ACL_MEM_HANDLE_TYPE_NONE,
        allocationType: ACL_MEM_ALLOCATION_TYPE_PINNED,
        memAttr: ACL_HBM_MEM_HUGE,
        ..Default::default()
    };
    prop.location.r#type = ACL_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    prop
}

impl AclMemory {
    fn prop(&self) -> aclrtPhysicalMemProp {
        device_hbm_prop(u32::try_from(super::device::DeviceMemory::device(self)).unwrap_or(0))
    }

    /// The device's granularity (`aclrtMemGetAllocationGranularity`), or 2 MiB.
    pub(crate) fn granularity(&self) -> usize {
        let Some(c) = self.vm_calls() else {
            return PAGE;
        };
        let mut prop = self.prop();
        let mut g = 0usize;
        // SAFETY: both pointers are valid for the call.
        let rc =
            unsafe { (c.granularity)(&mut prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &mut g) };
        if rc == ACL_SUCCESS && g.is_power_of_two() {
            g.max(PAGE)
        } else {
            PAGE
        }
    }
}

impl VirtualMemory for AclMemory {
    fn page_size(&self) -> usize {
        self.page()
    }

    fn reserve(&self, size: usize) -> Option<NonZeroUsize> {
        let c = self.vm_calls()?;
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: `ptr` is a valid out-pointer; flags 1: huge pages, as
        // torch_npu reserves its expandable segments.
        let rc = unsafe { (c.reserve)(&mut ptr, size, 0, std::ptr::null_mut(), 1) };
        (rc == ACL_SUCCESS).then(|| NonZeroUsize::new(ptr as usize))?
    }

    fn release(&self, addr: NonZeroUsize, _size: usize) {
        let Some(c) = self.vm_calls() else { return };
        // SAFETY: a reservation of this pool with nothing mapped.
        let _ = unsafe { (c.release)(addr.get() as *mut c_void) };
    }

    fn map_page(&self, addr: usize) -> Option<NonZeroUsize> {
        let c = self.vm_calls()?;
        let prop = self.prop();
        let mut handle: aclrtDrvMemHandle = std::ptr::null_mut();
        let page = self.page();
        // SAFETY: valid pointers for the call.
        let rc = unsafe { (c.malloc_physical)(&mut handle, page, &prop, 0) };
        if rc != ACL_SUCCESS {
            return None;
        }
        // SAFETY: `addr` is an unmapped page of a reservation of this pool;
        // `handle` is the physical page just allocated.
        let rc = unsafe { (c.map)(addr as *mut c_void, page, 0, handle, 0) };
        if rc != ACL_SUCCESS {
            // SAFETY: the handle was just allocated and is not mapped.
            let _ = unsafe { (c.free_physical)(handle) };
            return None;
        }
        NonZeroUsize::new(handle as usize)
    }

    fn unmap_page(&self, addr: usize, token: NonZeroUsize) {
        let Some(c) = self.vm_calls() else { return };
        // SAFETY: `addr` is a page this pool mapped with `token`.
        unsafe {
            let _ = (c.unmap)(addr as *mut c_void);
            let _ = (c.free_physical)(token.get() as aclrtDrvMemHandle);
        }
    }

    fn synchronize(&self) {
        let Some(c) = self.vm_calls() else { return };
        // SAFETY: no arguments.
        let _ = unsafe { (c.synchronize_device)() };
    }

    fn read(&self, addr: usize, out: &mut [u8]) -> bool {
        let Some(c) = self.vm_calls() else {
            return false;
        };
        let (dst, len) = (out.as_mut_ptr().cast::<c_void>(), out.len());
        // SAFETY: `out` is writable for `len` bytes; `addr` starts `len`
        // mapped bytes of this pool.
        let rc = unsafe {
            (c.memcpy)(
                dst,
                len,
                addr as *const c_void,
                len,
                ACL_MEMCPY_DEVICE_TO_HOST,
            )
        };
        rc == ACL_SUCCESS
    }

    fn write(&self, addr: usize, data: &[u8]) -> bool {
        let Some(c) = self.vm_calls() else {
            return false;
        };
        let (src, len) = (data.as_ptr().cast::<c_void>(), data.len());
        // SAFETY: `data` is readable for `len` bytes; `addr` starts `len`
        // mapped bytes of this pool.
        let rc = unsafe {
            (c.memcpy)(
                addr as *mut c_void,
                len,
                src,
                len,
                ACL_MEMCPY_HOST_TO_DEVICE,
            )
        };
        rc == ACL_SUCCESS
    }
}

// ---- host memory ----------------------------------------------------------

/// The page size of [`HostMemory`]'s virtual memory (CANN's granularity).
pub(crate) const HOST_PAGE: usize = 2 << 20;

/// An anonymous mapping of `len` bytes with `prot`, reserving no swap; at
/// exactly `addr` unless it is 0. `None` when the kernel refuses.
///
/// # Safety
/// A non-zero `addr` must start a range of a reservation this device made.
unsafe fn anonymous(addr: usize, len: usize, prot: libc::c_int) -> Option<NonZeroUsize> {
    let fixed = if addr == 0 { 0 } else { libc::MAP_FIXED };
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | fixed;
    // SAFETY: the caller's contract; at 0 the kernel chooses the place.
    let p = unsafe { libc::mmap(addr as *mut c_void, len, prot, flags, -1, 0) };
    (p != libc::MAP_FAILED).then(|| NonZeroUsize::new(p as usize))?
}

impl VirtualMemory for HostMemory {
    fn page_size(&self) -> usize {
        HOST_PAGE
    }

    fn reserve(&self, size: usize) -> Option<NonZeroUsize> {
        // SAFETY: address space at the kernel's choice, no access.
        unsafe { anonymous(0, size, libc::PROT_NONE) }
    }

    fn release(&self, addr: NonZeroUsize, size: usize) {
        // SAFETY: a reservation made by `reserve`, with nothing mapped.
        unsafe { libc::munmap(addr.get() as *mut c_void, size) };
    }

    fn map_page(&self, addr: usize) -> Option<NonZeroUsize> {
        if !self.charge(HOST_PAGE) {
            return None;
        }
        // SAFETY: `addr` is an unmapped page of a reservation this device made.
        if unsafe { anonymous(addr, HOST_PAGE, libc::PROT_READ | libc::PROT_WRITE) }.is_none() {
            self.uncharge(HOST_PAGE);
            return None;
        }
        NonZeroUsize::new(1)
    }

    fn unmap_page(&self, addr: usize, _token: NonZeroUsize) {
        // SAFETY: back to reserved, inaccessible address space.
        unsafe { anonymous(addr, HOST_PAGE, libc::PROT_NONE) };
        self.uncharge(HOST_PAGE);
    }

    fn synchronize(&self) {}

    fn read(&self, addr: usize, out: &mut [u8]) -> bool {
        // SAFETY: `addr` starts `out.len()` bytes mapped readable by `map`,
        // which `out` cannot overlap (it is not this device's memory).
        unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, out.as_mut_ptr(), out.len()) };
        true
    }

    fn write(&self, addr: usize, data: &[u8]) -> bool {
        // SAFETY: `addr` starts `data.len()` bytes mapped writable by `map`,
        // which `data` cannot overlap.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), addr as *mut u8, data.len()) };
        true
    }
}
