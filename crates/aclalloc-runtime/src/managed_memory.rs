//! `aclrtMemAllocManaged`: unified memory, which a device and the host both
//! reach at one address. On the host runtime device memory is host memory
//! already, so managed memory is device memory of the current device,
//! counted against its capacity and freed with `aclrtFree`, in CANN's
//! 2 MiB units.

use super::host::HostRuntime;
use crate::base::error::{Error, Result};

/// `aclrtMemAllocManaged`'s only flag (`ACL_RT_MEM_ATTACH_GLOBAL`).
pub const MEM_ATTACH_GLOBAL: u32 = 0x1;
/// Managed memory is allocated in whole 2 MiB units, as CANN documents.
const MANAGED_UNIT: usize = 2 << 20;

impl HostRuntime {
    /// `aclrtMemAllocManaged`: device memory, which the host reads and
    /// writes as it is (host memory on the host runtime), `size` rounded up
    /// to 2 MiB; freed with `aclrtFree`.
    pub fn malloc_managed(&self, size: usize, flag: u32) -> Result<std::ptr::NonNull<u8>> {
        if flag != MEM_ATTACH_GLOBAL {
            return Err(Error::InvalidParam {
                param: "flag",
                reason: "It must be ACL_RT_MEM_ATTACH_GLOBAL (1)",
            });
        }
        if size == 0 {
            return Err(Error::InvalidParam {
                param: "size",
                reason: "It must be greater than 0",
            });
        }
        let rounded = size
            .checked_next_multiple_of(MANAGED_UNIT)
            .ok_or(Error::InvalidParam {
                param: "size",
                reason: "It is too large",
            })?;
        self.malloc(rounded)
    }
}
