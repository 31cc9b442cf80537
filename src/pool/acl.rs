//! The pool's device memory in the C API: `aclrtMalloc` / `aclrtFree` /
//! `aclrtGetMemInfo` through the runtime's backend table, so that the host
//! runtime serves them here and CANN's own would serve them in front of a
//! real CANN runtime.

use super::device::DeviceMemory;
use crate::core::error::{Error, Result, ACL_ERROR_RT_CONTEXT_NULL, ACL_SUCCESS};
use crate::ffi::types::{ACL_HBM_MEM, ACL_MEM_MALLOC_HUGE_FIRST};
use crate::runtime::backend::active;
use std::ffi::c_void;
use std::num::NonZeroUsize;

/// Device memory of the device current on the calling thread
/// (`aclrtSetDevice` or a context). `aclrtMalloc` allocates on the thread's
/// current device, so a pool must grow from threads whose current device is
/// the one it was created on: use one pool per device.
pub struct AclMemory {
    capacity: usize,
    /// The current device when the pool was made (snapshots and histories
    /// name it; physical pages of expandable segments are allocated on it).
    device: i32,
    /// The virtual-memory page size (`aclrtMemGetAllocationGranularity`).
    page: std::sync::OnceLock<usize>,
}

impl AclMemory {
    /// The current device's memory; fails when the thread has no current
    /// device (`aclrtGetMemInfo` fails).
    pub fn current() -> Result<Self> {
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: both out-pointers are valid.
        let rc = unsafe { (active().aclrtGetMemInfo)(ACL_HBM_MEM, &mut free, &mut total) };
        match rc {
            ACL_SUCCESS => {
                let mut device = 0;
                // SAFETY: a valid out-pointer; on failure the id stays 0.
                let _ = unsafe { (active().aclrtGetDevice)(&mut device) };
                Ok(AclMemory {
                    capacity: total,
                    device,
                    page: std::sync::OnceLock::new(),
                })
            }
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
        // SAFETY: `ptr` is a valid out-pointer.
        let rc = unsafe { (active().aclrtMalloc)(&mut ptr, size, ACL_MEM_MALLOC_HUGE_FIRST) };
        if rc == ACL_SUCCESS {
            NonZeroUsize::new(ptr as usize)
        } else {
            None
        }
    }

    fn free(&self, addr: NonZeroUsize, _size: usize) {
        // aclrtFree waits for queued work first, so a kernel still using a
        // block of this segment finishes before the memory goes.
        // SAFETY: `addr` came from aclrtMalloc and is freed once.
        let _ = unsafe { (active().aclrtFree)(addr.get() as *mut c_void) };
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn device(&self) -> i32 {
        self.device
    }

    fn virtual_memory(&self) -> Option<&dyn super::virtual_memory::VirtualMemory> {
        // In front of a runtime without virtual memory, fixed segments (as
        // torch_npu falls back when aclrtReserveMemAddress is unsupported):
        // the host runtime's virtual memory is not the device's.
        use crate::interpose::next::{address, Sym};
        use crate::runtime::backend::Backend;
        let missing = active().backend == Backend::Forward
            && [
                Sym::aclrtReserveMemAddress,
                Sym::aclrtReleaseMemAddress,
                Sym::aclrtMallocPhysical,
                Sym::aclrtFreePhysical,
                Sym::aclrtMapMem,
                Sym::aclrtUnmapMem,
            ]
            .iter()
            .any(|&sym| address(sym).is_none());
        (!missing).then_some(self as &dyn super::virtual_memory::VirtualMemory)
    }
}

impl AclMemory {
    /// The virtual-memory page size, asked once.
    pub(crate) fn page(&self) -> usize {
        *self.page.get_or_init(|| self.granularity())
    }
}
