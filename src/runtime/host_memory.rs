//! `aclrtMallocHost` / `aclrtFreeHost`: page-locked host memory in CANN, plain
//! host memory here, kept in a table of its own so that copies of every kind
//! accept it and a freed pointer is refused rather than touched.

use super::host::HostRuntime;
use crate::base::error::{Error, Result};
use std::ptr::NonNull;

const NOT_HOST_MEMORY: Error = Error::InvalidParam {
    param: "hostPtr",
    reason: "It is not the start of live memory from aclrtMallocHost (it was not returned by aclrtMallocHost, or it was already freed)",
};

impl HostRuntime {
    /// `aclrtMallocHost`: `size` bytes, page-aligned and zeroed.
    pub fn malloc_host(&self, size: usize) -> Result<NonNull<u8>> {
        self.config()?;
        self.host_memory.alloc(size).map_err(|e| match e {
            Error::InvalidParam { .. } => e,
            _ => Error::ReserveFailed { device: 0, size },
        })
    }

    /// `aclrtFreeHost`: waits for every stream's pending work (a queued copy
    /// may still read the memory), then frees.
    pub fn free_host(&self, ptr: *mut u8) -> Result<()> {
        if !self.host_memory.owns(ptr) {
            return Err(NOT_HOST_MEMORY);
        }
        self.synchronize_all()?;
        self.host_memory.free(ptr).map_err(|_| NOT_HOST_MEMORY)
    }
}

#[cfg(test)]
mod tests {
    use crate::runtime::host::tests::runtime;
    use crate::runtime::memops::CopyKind;

    #[test]
    fn host_memory_serves_every_copy_kind_and_is_refused_once_freed() {
        let rt = runtime(1, 1 << 20);
        rt.set_device(0).unwrap();
        let h = rt.malloc_host(64).unwrap();
        let d = rt.malloc(64).unwrap();
        for kind in [0, 1, 2, 3, 4] {
            CopyKind::from_acl(kind).unwrap();
            // SAFETY: both ranges are 64 live bytes.
            unsafe { rt.memcpy(d, 64, h, 64, kind) }.unwrap();
            // SAFETY: as above.
            unsafe { rt.memcpy(h, 64, d, 64, kind) }.unwrap();
        }
        rt.free_host(h.as_ptr()).unwrap();
        assert!(rt.free_host(h.as_ptr()).is_err(), "double free");
        assert!(rt.free_host(d.as_ptr()).is_err(), "device memory");
        // SAFETY: refused before any byte is touched.
        assert!(unsafe { rt.memcpy(d, 64, h, 64, 1) }.is_err());
        assert!(rt.malloc_host(0).is_err());
    }
}
