//! What the long-running service tests (soak, stream churn) share: the
//! runtime with tracking on and a registered pool's descriptor, and the
//! process's resident memory.

use aclalloc::base::error::ACL_SUCCESS;
use aclalloc::ffi::cann::runtime::{aclInit, aclrtSetDevice};
use aclalloc::ffi::ext::pool::{aclallocPool, aclallocPoolCreate};
use aclalloc::ffi::ext::tracking::aclallocTrackingSetEnabled;
use std::ffi::c_void;
use std::ptr::{null, null_mut};

/// The runtime on device 0 with tracking on, and a caching pool made with
/// the defaults: the pool and its descriptor. Environment variables the
/// runtime reads must be set before.
pub fn tracked_pool() -> (aclallocPool, *mut c_void) {
    assert_eq!(unsafe { aclInit(null()) }, ACL_SUCCESS);
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    assert_eq!(aclallocTrackingSetEnabled(1), ACL_SUCCESS);
    let (mut pool, mut desc) = (null_mut(), null_mut());
    assert_eq!(
        unsafe { aclallocPoolCreate(null(), &mut pool, &mut desc) },
        ACL_SUCCESS
    );
    (pool, desc)
}

/// The process's resident set size in bytes.
pub fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}
