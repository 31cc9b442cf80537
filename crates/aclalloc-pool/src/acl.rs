//! The pool's device memory in the C API: `aclrtMalloc` / `aclrtFree` /
//! `aclrtGetMemInfo` through the device port (`crate::base::device_port`),
//! so that the host runtime serves them here and CANN's own would serve them
//! in front of a real CANN runtime.

use super::device::DeviceMemory;
use crate::base::device_port::{port, VirtualMemoryCalls};
use crate::base::error::{Error, Result, ACL_ERROR_RT_CONTEXT_NULL, ACL_SUCCESS};
use crate::base::types::{ACL_HBM_MEM, ACL_MEM_MALLOC_HUGE_FIRST};
use std::ffi::c_void;
use std::num::NonZeroUsize;

/// Device memory of the calling thread's current device, as `aclrtMalloc`
/// allocates: a pool must grow on its own device, so use one pool per device.
pub struct AclMemory {
    capacity: usize,
    /// The current device when the pool was made (snapshots and histories
    /// name it; physical pages of expandable segments are allocated on it).
    device: i32,
    /// The virtual-memory page size (`aclrtMemGetAllocationGranularity`).
    page: std::sync::OnceLock<usize>,
    /// The runtime's virtual-memory calls (`None`: fixed segments only).
    vm: Option<VirtualMemoryCalls>,
}

impl AclMemory {
    /// The current device's memory; fails when the thread has no current
    /// device (`aclrtGetMemInfo` fails).
    pub fn current() -> Result<Self> {
        // Without a current device the query below would fail and leave a
        // message of its own beside the caller's.
        let device = port().current_device().ok_or(Error::NoContext)?;
        let (mut free, mut total) = (0usize, 0usize);
        let rc = port().acl_mem_info(ACL_HBM_MEM, &mut free, &mut total);
        match rc {
            ACL_SUCCESS => Ok(AclMemory {
                capacity: total,
                device,
                page: std::sync::OnceLock::new(),
                vm: port().virtual_memory(),
            }),
            ACL_ERROR_RT_CONTEXT_NULL => Err(Error::NoContext),
            _ => Err(Error::Internal {
                reason: "aclrtGetMemInfo failed; the device's capacity is unknown",
            }),
        }
    }
}

impl DeviceMemory for AclMemory {
    fn malloc(&self, size: usize) -> Option<NonZeroUsize> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        let rc = port().acl_malloc(&mut ptr, size, ACL_MEM_MALLOC_HUGE_FIRST);
        if rc == ACL_SUCCESS {
            NonZeroUsize::new(ptr as usize)
        } else {
            None
        }
    }

    fn free(&self, addr: NonZeroUsize, _size: usize) {
        // aclrtFree waits for queued work first, so a kernel still using a
        // block of this segment finishes before the memory goes.
        // `addr` came from aclrtMalloc and is freed once.
        let _ = port().acl_free(addr.get() as *mut c_void);
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn device(&self) -> i32 {
        self.device
    }

    fn free_memory(&self) -> Option<usize> {
        // aclrtGetMemInfo reads the current device, which may be another one.
        if port().current_device() != Some(self.device) {
            return None;
        }
        let (mut free, mut total) = (0usize, 0usize);
        let rc = port().acl_mem_info(ACL_HBM_MEM, &mut free, &mut total);
        (rc == ACL_SUCCESS).then_some(free)
    }

    fn virtual_memory(&self) -> Option<&dyn super::virtual_memory::VirtualMemory> {
        // Without the runtime's virtual memory, fixed segments (as torch_npu).
        self.vm
            .is_some()
            .then_some(self as &dyn super::virtual_memory::VirtualMemory)
    }
}

impl AclMemory {
    /// The runtime's virtual-memory calls; only asked for once
    /// [`DeviceMemory::virtual_memory`] said they are there.
    pub(crate) fn vm_calls(&self) -> Option<&VirtualMemoryCalls> {
        self.vm.as_ref()
    }

    /// The virtual-memory page size, asked once.
    pub(crate) fn page(&self) -> usize {
        *self.page.get_or_init(|| self.granularity())
    }
}
