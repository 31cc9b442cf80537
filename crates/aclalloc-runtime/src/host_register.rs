//! Registered host memory (`aclrtHostRegisterV2`, `aclrtHostGetDevicePointer`,
//! `aclrtHostUnregister`). On a device, registering maps a host range into
//! the device's address space (`ACL_HOST_REG_MAPPED`) or pins pageable
//! memory (`ACL_HOST_REG_PINNED`); on the host runtime every kernel and copy
//! reads host memory directly, so a mapped range's device address is its
//! host address, and what is kept is the ranges, so that the calls refuse
//! what CANN refuses: overlapping registrations, unknown pointers, pinning
//! memory `aclrtMallocHost` gave (it is page-locked already).

use super::host::HostRuntime;
use super::host_ranges;
use crate::base::error::{Error, Result};
use parking_lot::Mutex;
use std::collections::BTreeMap;

/// `aclrtHostRegisterV2` flags (CANN's `ACL_HOST_REG_*`).
pub const HOST_REG_MAPPED: u32 = 0x2;
pub const HOST_REG_IOMEMORY: u32 = 0x4;
pub const HOST_REG_READONLY: u32 = 0x8;
pub const HOST_REG_PINNED: u32 = 0x1000_0000;
const VALID: u32 = HOST_REG_MAPPED | HOST_REG_IOMEMORY | HOST_REG_READONLY | HOST_REG_PINNED;
/// Registered ranges must start on a 4 KiB page, as CANN documents.
const PAGE: usize = 4096;

/// Registered ranges by start: their size and flags.
static RANGES: Mutex<BTreeMap<usize, (usize, u32)>> = Mutex::new(BTreeMap::new());

/// The registration holding `addr`, if any.
fn holding(ranges: &BTreeMap<usize, (usize, u32)>, addr: usize) -> Option<(usize, usize, u32)> {
    let (&start, &(size, flags)) = ranges.range(..=addr).next_back()?;
    (addr < start + size).then_some((start, size, flags))
}

impl HostRuntime {
    /// `aclrtHostRegisterV2`: registers `[ptr, ptr + size)` with `flags`.
    pub fn host_register(&self, ptr: usize, size: usize, flags: u32) -> Result<()> {
        if size == 0 {
            return Err(Error::InvalidParam {
                param: "size",
                reason: "It must be greater than 0",
            });
        }
        if flags & VALID == 0 || flags & !VALID != 0 {
            return Err(Error::InvalidParam {
                param: "flag",
                reason: "The valid flag is an OR combination of ACL_HOST_REG_MAPPED(0x2), ACL_HOST_REG_IOMEMORY(0x4), ACL_HOST_REG_READONLY(0x8) and ACL_HOST_REG_PINNED(0x10000000)",
            });
        }
        if flags & (HOST_REG_IOMEMORY | HOST_REG_READONLY) != 0 {
            return Err(Error::FeatureNotSupported {
                what:
                    "ACL_HOST_REG_IOMEMORY and ACL_HOST_REG_READONLY are reserved and not supported",
            });
        }
        if ptr % PAGE != 0 {
            return Err(Error::InvalidParam {
                param: "ptr",
                reason: "It must be aligned to a 4 KB page",
            });
        }
        let end = ptr.checked_add(size).ok_or(Error::InvalidParam {
            param: "size",
            reason: "The range wraps around the address space",
        })?;
        if flags & HOST_REG_PINNED != 0 && self.host_memory.region(ptr, 1).is_some() {
            return Err(Error::InvalidParam {
                param: "flag",
                reason: "ACL_HOST_REG_PINNED is for pageable memory; aclrtMallocHost's is page-locked already",
            });
        }
        if !host_ranges::writable(ptr, size) {
            return Err(Error::InvalidParam {
                param: "ptr",
                reason: "The range is not mapped writable host memory of this process",
            });
        }
        let mut ranges = RANGES.lock();
        let overlaps = holding(&ranges, ptr).is_some() || ranges.range(ptr..end).next().is_some();
        if overlaps {
            return Err(Error::HostMemoryAlreadyRegistered);
        }
        ranges.insert(ptr, (size, flags));
        Ok(())
    }

    /// `aclrtHostRegister` (CANN's first version): registers the range for
    /// device mapping (`kind`: `aclrtHostRegisterType`) and gives its device
    /// address, which on the host is the same address.
    pub fn host_register_mapped(&self, ptr: usize, size: usize, kind: i32) -> Result<usize> {
        match kind {
            // ACL_HOST_REGISTER_MAPPED
            0 => {}
            // ACL_HOST_REGISTER_IOMEMORY, ACL_HOST_REGISTER_READONLY: as
            // aclrtHostRegisterV2's flags of the same names.
            4 | 8 => return Err(Error::FeatureNotSupported {
                what: "ACL_HOST_REGISTER_IOMEMORY and ACL_HOST_REGISTER_READONLY are not supported",
            }),
            _ => {
                return Err(Error::InvalidParam {
                    param: "type",
                    reason: "It is not an aclrtHostRegisterType value",
                })
            }
        }
        self.host_register(ptr, size, HOST_REG_MAPPED)?;
        Ok(ptr)
    }

    /// `aclrtHostGetDevicePointer`: the device address of registered, mapped
    /// host memory, which on the host is the same address.
    pub fn host_device_pointer(&self, ptr: usize, flag: u32) -> Result<usize> {
        if flag != 0 {
            return Err(Error::InvalidParam {
                param: "flag",
                reason: "It must be 0",
            });
        }
        match holding(&RANGES.lock(), ptr) {
            Some((_, _, flags)) if flags & HOST_REG_MAPPED != 0 => Ok(ptr),
            Some(_) => Err(Error::HostMemoryNotRegistered {
                what: " with ACL_HOST_REG_MAPPED for device memory mapping",
            }),
            None => Err(Error::HostMemoryNotRegistered {
                what: " for device memory mapping",
            }),
        }
    }

    /// `aclrtHostUnregister`: `ptr` is the start of a registered range.
    pub fn host_unregister(&self, ptr: usize) -> Result<()> {
        RANGES
            .lock()
            .remove(&ptr)
            .map(drop)
            .ok_or(Error::HostMemoryNotRegistered {
                what: " (it is not the start of a range aclrtHostRegisterV2 registered)",
            })
    }
}

/// Forgets registrations inside `[start, start + len)`: the memory was
/// freed (`aclrtFreeHost`), and a later allocation there starts unregistered.
pub(crate) fn forget_within(start: usize, len: usize) {
    let mut ranges = RANGES.lock();
    let inside: Vec<usize> = ranges
        .range(start..start.saturating_add(len))
        .map(|(&s, _)| s)
        .collect();
    for s in inside {
        ranges.remove(&s);
    }
}
