//! The default allocator's pool honours `ACLALLOC_ALLOC_CONF` given as a
//! `PYTORCH_NPU_ALLOC_CONF` string: expandable segments and
//! `roundup_power2_divisions`. Its own process: the default allocator is
//! process-wide and reads the variable once.

mod common;

use aclalloc::base::error::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::ext::default_allocator::*;
use common::pool::{snapshot_text, stat};
use std::ptr::null_mut;

const MIB: usize = 1 << 20;

#[test]
fn the_default_pool_takes_a_torch_npu_string_unchanged() {
    std::env::remove_var("ACLALLOC_DEFAULT_ALLOCATOR");
    std::env::set_var(
        "ACLALLOC_ALLOC_CONF",
        "expandable_segments:True,garbage_collection_threshold:0.6,roundup_power2_divisions:[1:4,>:8],memory_fraction:0.5",
    );
    assert_eq!(unsafe { aclInit(std::ptr::null()) }, ACL_SUCCESS);
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    let mut p = null_mut();
    // 5 MiB + 1 lies in [4, 8) MiB, which `>` gave 8 divisions: 512 KiB
    // steps, so 5.5 MiB.
    assert_eq!(
        unsafe { aclallocDefaultMalloc(&mut p, 5 * MIB + 1, null_mut()) },
        ACL_SUCCESS
    );
    let mut pool = null_mut();
    assert_eq!(
        unsafe { aclallocGetDefaultAllocator(&mut pool) },
        ACL_SUCCESS
    );
    assert_eq!(
        stat(pool, c"allocated_bytes.all.current"),
        (11 * MIB / 2) as i64
    );
    assert_eq!(
        stat(pool, c"requested_bytes.all.current"),
        5 * MIB as i64 + 1
    );
    // 1 MiB + 1 lies in the first interval: 4 divisions, 256 KiB steps.
    let mut q = null_mut();
    assert_eq!(
        unsafe { aclallocDefaultMalloc(&mut q, MIB + 1, null_mut()) },
        ACL_SUCCESS
    );
    assert_eq!(
        stat(pool, c"allocated_bytes.all.current"),
        (11 * MIB / 2 + MIB + MIB / 4) as i64
    );
    let json = snapshot_text(pool);
    assert!(json.contains("\"is_expandable\":true"), "{json}");
    assert!(!json.contains("\"is_expandable\":false"), "{json}");
    assert_eq!(aclallocDefaultFree(p), ACL_SUCCESS);
    assert_eq!(aclallocDefaultFree(q), ACL_SUCCESS);
    assert_eq!(aclrtResetDevice(0), ACL_SUCCESS);
    assert_eq!(aclFinalize(), ACL_SUCCESS);
}
