//! A service with tracking on creates and destroys a stream per request:
//! the tracking layer's memory stays bounded (it kept ~200 bytes for every
//! stream ever made), and its report groups destroyed streams instead of
//! listing each. Its own process: tracking is process-wide.

mod common;

use aclalloc::base::error::ACL_SUCCESS;
use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
use common::long_run::{rss_bytes, tracked_pool};
use std::ffi::c_void;
use std::ptr::null_mut;

unsafe extern "C" fn nothing(_: *mut c_void, _: usize, _: *mut c_void) {}

/// `n` streams, each with the pool registered, a launch with a workspace,
/// a synchronize, and the destroy.
fn churn(desc: *mut c_void, n: usize) {
    for _ in 0..n {
        let mut s = null_mut();
        assert_eq!(unsafe { aclrtCreateStream(&mut s) }, ACL_SUCCESS);
        assert_eq!(aclrtAllocatorRegister(s, desc), ACL_SUCCESS);
        assert_eq!(
            unsafe { aclallocLaunchKernel(s, 4096, Some(nothing), null_mut()) },
            ACL_SUCCESS
        );
        assert_eq!(unsafe { aclrtSynchronizeStream(s) }, ACL_SUCCESS);
        assert_eq!(unsafe { aclrtDestroyStream(s) }, ACL_SUCCESS);
    }
}

#[test]
fn tracking_memory_stays_bounded_across_stream_churn_and_the_report_groups_streams() {
    let (pool, desc) = tracked_pool();
    churn(desc, 3_000); // warm-up: tables and caches reach their size
    let before = rss_bytes();
    const CYCLES: usize = 20_000;
    churn(desc, CYCLES);
    let grown = rss_bytes().saturating_sub(before);
    println!("RSS grew {grown} bytes over {CYCLES} stream create/destroy cycles");
    // Kept per stream before: ~200 bytes (4 MB here). Allow 1 MB of noise.
    assert!(
        grown < 1 << 20,
        "RSS grew {grown} bytes over {CYCLES} cycles ({} per stream)",
        grown / CYCLES
    );
    let report = aclalloc::tracking::report_text();
    let line = report
        .lines()
        .find(|l| l.contains(&format!("allocator {:#x}", pool as usize)))
        .expect("the pool's line");
    assert!(
        line.len() < 1000,
        "one stream listed per created stream: {}",
        &line[..300]
    );
    assert!(line.contains("more destroyed"), "{line}");
}
