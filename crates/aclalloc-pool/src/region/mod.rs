//! Tagged regions: sleep and wake for device memory the program allocates
//! itself, as torch_npu's caching allocator does (`aclrtMalloc`, or
//! `aclrtMallocPhysical` + `aclrtMapMem` for its expandable segments).
//!
//! A thread opens a region with [`begin`] (`aclallocRegionBegin`) and
//! closes it with [`end`]; regions nest, the innermost tag wins. Inside one:
//! - `aclrtMalloc`, `aclrtMallocAlign32` and `aclrtMallocCached` are served
//!   as reserved address space with physical memory mapped over it
//!   ([`malloc`]), so the memory can go while the address stays;
//! - `aclrtMallocPhysical` returns a handle of aclalloc's
//!   ([`malloc_physical`]; kind tag `0xACC0` in its top 16 bits) in front of
//!   the runtime's physical memory. The program maps, unmaps and frees it
//!   with CANN's calls as usual; the handle stays valid through sleep and
//!   wake, while the runtime's physical memory behind it is freed at sleep
//!   and made anew at wake. It cannot be exported for sharing.
//!
//! `aclallocSleep` / `aclallocWakeUp` (the pools' [`crate::sleep::sleep_all`]
//! and [`crate::sleep::wake_all`]) sleep and wake region memory by tag too
//! ([`sleep_all`], [`wake_all`]). Everything speaks to the runtime through
//! [`RegionPort`], which the device port's virtual-memory calls implement:
//! the host runtime's, or the real runtime's in front of a real CANN.

mod books;
mod port;
mod sleep;
mod stack;

pub use self::books::{
    bytes, check_release, is_allocation, is_mapping, is_region_handle, released, reserved,
};
pub use self::port::RegionPort;
pub use self::stack::{begin, current, depth, end};

use crate::base::error::Result;
use crate::base::types::aclrtPhysicalMemProp;
use std::sync::Arc;

/// `aclrtMalloc` of `size` bytes in the region tagged `tag`; returns the address.
pub fn malloc(tag: Arc<str>, size: usize) -> Result<usize> {
    books::malloc(&port::runtime()?, tag, size)
}

/// `aclrtFree` of `va`: `None` when it is not region memory from [`malloc`].
pub fn free(va: usize) -> Option<Result<()>> {
    if books::none_live() {
        return None;
    }
    match port::runtime() {
        Ok(port) => books::free(&port, va),
        Err(e) => Some(Err(e)),
    }
}

/// `aclrtMallocPhysical` in the region tagged `tag`; returns the program's handle.
pub fn malloc_physical(
    tag: Arc<str>,
    size: usize,
    prop: &aclrtPhysicalMemProp,
    flags: u64,
) -> Result<usize> {
    books::malloc_physical(&port::runtime()?, tag, size, prop, flags)
}

/// `aclrtFreePhysical` of a region handle ([`is_region_handle`]).
pub fn free_physical(handle: usize) -> Result<()> {
    books::free_physical(&port::runtime()?, handle)
}

/// `aclrtMapMem` of a region handle ([`is_region_handle`]).
pub fn map(va: usize, size: usize, offset: usize, handle: usize, flags: u64) -> Result<()> {
    books::map(&port::runtime()?, va, size, offset, handle, flags)
}

/// `aclrtUnmapMem` of `va`: `None` when no region memory is mapped there.
pub fn unmap(va: usize) -> Option<Result<()>> {
    if books::none_live() {
        return None;
    }
    match port::runtime() {
        Ok(port) => books::unmap(&port, va),
        Err(e) => Some(Err(e)),
    }
}

/// Puts every region's memory to sleep; tags in `offload_tags` keep their
/// contents in host memory. Returns the bytes given back.
pub fn sleep_all(offload_tags: &[&str]) -> Result<usize> {
    if books::none_live() {
        return Ok(0);
    }
    sleep::sleep_all(&port::runtime()?, offload_tags)
}

/// Wakes the region memory of `tags` (`None`: every tag), all or nothing.
/// Returns the bytes mapped again.
pub fn wake_all(tags: Option<&[&str]>) -> Result<usize> {
    if books::none_live() {
        let mut books = books::books();
        books
            .asleep_tags
            .retain(|t| tags.is_some_and(|w| !w.contains(&&**t)));
        return Ok(0);
    }
    sleep::wake_all(&port::runtime()?, tags)
}
