//! The virtual-memory calls of the host runtime: CANN's argument rules
//! (`aclrtPhysicalMemProp`, options, flags) and the device accounting around
//! the address-space bookkeeping of [`super::virtual_memory`].

use super::host::HostRuntime;
use super::memops::MAX_MEM_ATTR;
use super::virtual_memory::{aligned, invalid, unaligned, virtual_memory, GRANULARITY};
use crate::base::error::Result;
use crate::base::types::{
    aclrtPhysicalMemProp, ACL_MEM_ALLOCATION_TYPE_PINNED, ACL_MEM_HANDLE_TYPE_NONE,
    ACL_MEM_HANDLE_TYPE_POSIX, ACL_MEM_LOCATION_TYPE_DEVICE, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
    ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED,
};

impl HostRuntime {
    /// Checks CANN's `aclrtPhysicalMemProp` and returns its device.
    fn physical_device(&self, prop: &aclrtPhysicalMemProp) -> Result<&super::device::Device> {
        if prop.location.r#type != ACL_MEM_LOCATION_TYPE_DEVICE {
            return Err(invalid(
                "prop",
                "location.type must be ACL_MEM_LOCATION_TYPE_DEVICE (the host runtime has device memory only)",
            ));
        }
        let refused =
            if ![ACL_MEM_HANDLE_TYPE_NONE, ACL_MEM_HANDLE_TYPE_POSIX].contains(&prop.handleType) {
                "handleType is not an aclrtMemHandleType value"
            } else if prop.allocationType != ACL_MEM_ALLOCATION_TYPE_PINNED {
                "allocationType must be ACL_MEM_ALLOCATION_TYPE_PINNED"
            } else if !(0..=MAX_MEM_ATTR).contains(&prop.memAttr) {
                "memAttr is not an aclrtMemAttr value"
            } else {
                ""
            };
        if !refused.is_empty() {
            return Err(invalid("prop", refused));
        }
        let id = i32::try_from(prop.location.id).unwrap_or(i32::MAX);
        self.device(id)
    }

    /// `aclrtMemGetAllocationGranularity`.
    pub fn allocation_granularity(
        &self,
        prop: &aclrtPhysicalMemProp,
        option: i32,
    ) -> Result<usize> {
        if ![
            ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
            ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED,
        ]
        .contains(&option)
        {
            return Err(invalid(
                "option",
                "It must be ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM or ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED",
            ));
        }
        self.physical_device(prop)?;
        Ok(GRANULARITY)
    }

    /// `aclrtMallocPhysical`. The arguments are checked in their order: size, prop, flags.
    pub fn malloc_physical(
        &self,
        size: usize,
        prop: &aclrtPhysicalMemProp,
        flags: u64,
    ) -> Result<usize> {
        if size == 0 {
            return Err(invalid("size", "It must be greater than 0"));
        }
        if !aligned(size) {
            return Err(unaligned("size"));
        }
        let device = self.physical_device(prop)?;
        if flags != 0 {
            return Err(invalid("flags", "It is reserved and must be 0"));
        }
        virtual_memory().malloc_physical(device.memory(), size)
    }

    fn uncharge(&self, freed: Option<(u32, usize)>) {
        if let Some((Ok(d), size)) = freed.map(|(d, size)| (self.device(d as i32), size)) {
            d.memory().uncharge(size);
        }
    }

    /// `aclrtFreePhysical`.
    pub fn free_physical(&self, handle: usize) -> Result<()> {
        let freed = virtual_memory().free_physical(handle)?;
        self.unshare_physical(handle);
        self.uncharge(freed);
        Ok(())
    }

    /// `aclrtUnmapMem`: waits for the pending work of every stream first,
    /// as `aclrtFree` does: a queued copy, set or kernel on the range would
    /// otherwise touch pages the host no longer maps (on a device that work
    /// fails; here it would take the process down). The mapping is checked
    /// first, so a bad address waits for nothing.
    pub fn unmap_mem(&self, addr: usize) -> Result<()> {
        if !virtual_memory().is_mapping(addr) {
            return Err(super::virtual_memory::NOT_MAPPED);
        }
        self.synchronize_all()?;
        let freed = virtual_memory().unmap(addr)?;
        self.uncharge(freed);
        Ok(())
    }
}
