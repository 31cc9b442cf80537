//! Months inside a service, compressed: streams created and destroyed,
//! allocator registrations, launches on the default allocator and on a
//! registered pool, raw default allocations, from two threads, with
//! tracking on. Memory must stay flat: the process's RSS and the device's
//! memory in use after the warm-up are where they are at the end.
//!
//! Runs 60 s by default (CI); `ACLALLOC_SOAK_SECS=600` makes it the
//! 10-minute soak. Its own process: the runtime and tracking are
//! process-wide.

mod common;

use aclalloc::base::error::ACL_SUCCESS;
use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::memory::aclrtGetMemInfo;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::ext::default_allocator::{aclallocDefaultFree, aclallocDefaultMalloc};
use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
use aclalloc::ffi::ext::tracking::aclallocTrackingSetEnabled;
use common::long_run::{rss_bytes, tracked_pool};
use std::ffi::c_void;
use std::ptr::null_mut;
use std::time::{Duration, Instant};

unsafe extern "C" fn touch(ws: *mut c_void, size: usize, _: *mut c_void) {
    if size > 0 {
        unsafe { *(ws as *mut u8).add(size - 1) = 1 };
    }
}

fn device_used() -> usize {
    let (mut free, mut total) = (0, 0);
    assert_eq!(
        unsafe { aclrtGetMemInfo(1, &mut free, &mut total) },
        ACL_SUCCESS
    );
    total - free
}

/// One request: a stream of its own, on odd rounds with the pool
/// registered, a few launches with workspaces, a raw default allocation,
/// then the stream is destroyed.
fn request(round: usize, desc: usize) {
    let mut s = null_mut();
    assert_eq!(unsafe { aclrtCreateStream(&mut s) }, ACL_SUCCESS);
    if round % 2 == 1 {
        assert_eq!(aclrtAllocatorRegister(s, desc as *mut c_void), ACL_SUCCESS);
    }
    for i in 0..4 {
        let size = [512, 70_000, 1 << 20, 4 << 20][(round + i) % 4];
        assert_eq!(
            unsafe { aclallocLaunchKernel(s, size, Some(touch), null_mut()) },
            ACL_SUCCESS
        );
    }
    let mut p = null_mut();
    assert_eq!(
        unsafe { aclallocDefaultMalloc(&mut p, 3000 + round % 5000, s) },
        ACL_SUCCESS
    );
    assert_eq!(unsafe { aclrtSynchronizeStream(s) }, ACL_SUCCESS);
    assert_eq!(aclallocDefaultFree(p), ACL_SUCCESS);
    if round % 2 == 1 && round % 3 == 0 {
        assert_eq!(aclrtAllocatorUnregister(s), ACL_SUCCESS);
    }
    assert_eq!(unsafe { aclrtDestroyStream(s) }, ACL_SUCCESS);
}

#[test]
fn memory_stays_flat_through_stream_churn_registrations_and_launches() {
    let secs: u64 = std::env::var("ACLALLOC_SOAK_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    std::env::set_var("ACLALLOC_DEVICE_MEMORY", "1GiB");
    let (_pool, desc) = tracked_pool();
    let desc = desc as usize;
    let mut ctx = null_mut();
    assert_eq!(unsafe { aclrtGetCurrentContext(&mut ctx) }, ACL_SUCCESS);
    let ctx = ctx as usize;

    let run = |until: Instant| -> usize {
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..2)
                .map(|t| {
                    scope.spawn(move || {
                        assert_eq!(
                            unsafe { aclrtSetCurrentContext(ctx as *mut c_void) },
                            ACL_SUCCESS
                        );
                        let mut round = t;
                        while Instant::now() < until {
                            request(round, desc);
                            round += 2;
                        }
                        round / 2
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).sum()
        })
    };
    let total = Duration::from_secs(secs.max(4));
    let start = Instant::now();
    let warmed = run(start + total / 4);
    let (rss0, dev0) = (rss_bytes(), device_used());
    let rest = run(start + total);
    let (rss1, dev1) = (rss_bytes(), device_used());
    println!(
        "soak {secs} s: {warmed} + {rest} requests; RSS {} -> {} KiB; device in use {} -> {} KiB",
        rss0 >> 10,
        rss1 >> 10,
        dev0 >> 10,
        dev1 >> 10
    );
    assert!(rest > 0);
    assert!(
        rss1 <= rss0 + (8 << 20),
        "RSS grew from {rss0} to {rss1} bytes over {rest} requests"
    );
    // The default pool's stream-less cache may hold a segment or two more.
    assert!(
        dev1 <= dev0 + (24 << 20),
        "device memory in use grew from {dev0} to {dev1} bytes over {rest} requests"
    );
    assert_eq!(aclallocTrackingSetEnabled(0), ACL_SUCCESS);
}
