//! Sleep and wake of tagged pools: `aclallocPoolSetTag`, `aclallocSleep`,
//! `aclallocWakeUp` (see `crates/aclalloc-pool/src/sleep.rs`).

#![allow(non_snake_case, non_camel_case_types)]

use super::aclallocPool;
use crate::base::boundary::ffi_boundary;
use crate::base::error::{Error, Result};
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args;
use crate::pool::{handles, sleep};
use std::ffi::c_char;

/// Tags a pool (`tag` NULL: removes its tag). A tagged pool takes even its
/// fixed segments through the device's virtual memory, so `aclallocSleep`
/// can give its physical memory back while its addresses stay reserved.
/// Refused once the pool holds memory (tag it before its first allocation),
/// for an empty tag, and on a device without virtual memory.
///
/// # Safety
/// `tag` must be NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn aclallocPoolSetTag(pool: aclallocPool, tag: *const c_char) -> aclError {
    ffi_boundary!(|| {
        let tag = match tag.is_null() {
            true => None,
            // SAFETY: the caller's contract.
            false => Some(unsafe { args::c_str(tag, "tag") }?),
        };
        handles::with(pool, |p| p.set_tag(tag))?
    })
}

/// `count` tags from a C array (`tags` NULL with `count` 0: none).
///
/// # Safety
/// A non-NULL `tags` must point to `count` pointers to NUL-terminated strings.
unsafe fn tag_list<'a>(
    tags: *const *const c_char,
    count: usize,
    param: &'static str,
) -> Result<Vec<&'a str>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if tags.is_null() {
        return Err(Error::NullPointer { param });
    }
    // SAFETY: the caller's contract: `count` readable pointers.
    let ptrs = unsafe { std::slice::from_raw_parts(tags, count) };
    ptrs.iter()
        // SAFETY: each is a NUL-terminated string, the caller's contract.
        .map(|&p| unsafe { args::c_str(p, param) })
        .collect()
}

/// Puts every tagged pool of the process to sleep: after the device's
/// queued work, the physical memory of each of their segments is unmapped
/// and given back to the device; the virtual addresses stay reserved, so
/// pointers stay valid for after `aclallocWakeUp`. Pools whose tag is one of
/// the `count` strings of `offloadTags` copy their contents to host memory
/// first; the others' contents are discarded. A pool already asleep stays
/// as it is. While asleep a pool allocates nothing, and copies and sets
/// touching its memory are refused with a message naming its tag.
///
/// # Safety
/// `offloadTags` must be NULL (with `count` 0) or point to `count`
/// NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn aclallocSleep(
    offloadTags: *const *const c_char,
    count: usize,
) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract.
        let offload = unsafe { tag_list(offloadTags, count, "offloadTags") }?;
        sleep::sleep_all(&offload).map(drop)
    })
}

/// Wakes the sleeping tagged pools whose tag is one of the `count` strings
/// of `tags` (`tags` NULL: every tagged pool): new physical memory is mapped
/// at the same addresses, offloaded contents are copied back, discarded
/// ones come back as fresh memory. A pool awake stays as it is. Out of
/// device memory, the pages not yet mapped stay asleep: call it again.
///
/// # Safety
/// `tags` must be NULL or point to `count` NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn aclallocWakeUp(tags: *const *const c_char, count: usize) -> aclError {
    ffi_boundary!(|| {
        if tags.is_null() && count == 0 {
            return sleep::wake_all(None).map(drop);
        }
        // SAFETY: the caller's contract.
        let tags = unsafe { tag_list(tags, count, "tags") }?;
        sleep::wake_all(Some(&tags)).map(drop)
    })
}
