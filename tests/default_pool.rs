//! The default allocator as it comes: the caching pool, serving workspaces
//! of launches on streams without a registration from two threads, and the
//! raw functions. Its own process: the default allocator is process-wide.

mod common;

use aclalloc::base::error::*;
use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::errmsg::aclGetRecentErrMsg;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::ext::default_allocator::*;
use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
use aclalloc::ffi::ext::plugin::aclallocAllocatorStats;
use common::pool::stat;
use std::ffi::{c_void, CStr};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};

static RAN: AtomicUsize = AtomicUsize::new(0);

/// Workspace addresses seen by `slow_recording`, in launch order.
static SEEN: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

unsafe extern "C" fn slow_recording(workspace: *mut c_void, size: usize, _: *mut c_void) {
    std::thread::sleep(std::time::Duration::from_millis(30));
    unsafe { std::ptr::write_bytes(workspace as *mut u8, 0x5C, size) };
    SEEN.lock().unwrap().push(workspace as usize);
}

unsafe extern "C" fn kernel(workspace: *mut c_void, size: usize, _: *mut c_void) {
    unsafe { std::ptr::write_bytes(workspace as *mut u8, 0xA7, size) };
    RAN.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn the_pool_serves_unregistered_streams_by_default() {
    std::env::remove_var("ACLALLOC_DEFAULT_ALLOCATOR");
    assert_eq!(unsafe { aclInit(std::ptr::null()) }, ACL_SUCCESS);
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    let name = unsafe { CStr::from_ptr(aclallocGetDefaultAllocatorName()) };
    assert_eq!(name.to_str().unwrap(), "pool");
    let mut obj = null_mut();
    assert_eq!(
        unsafe { aclallocGetDefaultAllocator(&mut obj) },
        ACL_ERROR_UNINITIALIZE
    );
    assert!(obj.is_null());
    let _ = aclGetRecentErrMsg();

    let mut ctx = null_mut();
    assert_eq!(unsafe { aclrtGetCurrentContext(&mut ctx) }, ACL_SUCCESS);
    let ctx = ctx as usize;
    const LAUNCHES: usize = 600;
    let sizes = [512usize, 70_000, 1 << 20];
    let threads: Vec<_> = (0..2)
        .map(|_| {
            std::thread::spawn(move || {
                assert_eq!(
                    unsafe { aclrtSetCurrentContext(ctx as *mut c_void) },
                    ACL_SUCCESS
                );
                let mut s = null_mut();
                assert_eq!(unsafe { aclrtCreateStream(&mut s) }, ACL_SUCCESS);
                for i in 0..LAUNCHES {
                    let rc =
                        unsafe { aclallocLaunchKernel(s, sizes[i % 3], Some(kernel), null_mut()) };
                    assert_eq!(rc, ACL_SUCCESS);
                }
                assert_eq!(unsafe { aclrtSynchronizeStream(s) }, ACL_SUCCESS);
                assert_eq!(unsafe { aclrtDestroyStream(s) }, ACL_SUCCESS);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(RAN.load(Ordering::SeqCst), 2 * LAUNCHES);

    let mut st = aclallocAllocatorStats::default();
    assert_eq!(unsafe { aclallocDefaultGetStats(&mut st) }, ACL_SUCCESS);
    let n = 2 * LAUNCHES as u64;
    assert_eq!((st.allocCount, st.freeCount, st.activeCount), (n, n, 0));

    // The pool behind it: cached, so far fewer device allocations than
    // launches (workspaces of the default allocator go back after their
    // kernel, so as many are live as launches are pending).
    assert_eq!(
        unsafe { aclallocGetDefaultAllocator(&mut obj) },
        ACL_SUCCESS
    );
    assert_eq!(stat(obj, c"allocation.all.allocated"), n as i64);
    assert_eq!(stat(obj, c"allocation.all.current"), 0);
    let device_allocs = stat(obj, c"num_device_alloc");
    assert!(
        (1..n as i64 / 4).contains(&device_allocs),
        "{device_allocs} device allocations for {n} workspaces"
    );

    // In use: no swap.
    let desc = aclrtAllocatorCreateDesc();
    assert_eq!(
        aclallocSetDefaultAllocator(desc),
        ACL_ERROR_INVALID_PARAM,
        "incomplete"
    );
    let _ = aclGetRecentErrMsg();
    assert_eq!(aclrtAllocatorDestroyDesc(desc), ACL_SUCCESS);

    // The raw functions use the same pool.
    let mut p = null_mut();
    assert_eq!(
        unsafe { aclallocDefaultMalloc(&mut p, 1000, null_mut()) },
        ACL_SUCCESS
    );
    assert_eq!(p as usize % 512, 0);
    assert_eq!(stat(obj, c"allocation.all.current"), 1);
    assert_eq!(aclallocDefaultFree(p), ACL_SUCCESS);
    assert_eq!(stat(obj, c"allocation.all.current"), 0);

    // The pool refuses what it did not hand out, and counts it.
    let mut on_stack = 0u8;
    assert_eq!(
        aclallocDefaultFree(&mut on_stack as *mut u8 as *mut c_void),
        ACL_ERROR_INVALID_PARAM
    );
    let msg = unsafe { CStr::from_ptr(aclGetRecentErrMsg()) };
    assert_eq!(
        msg.to_str().unwrap(),
        "aclallocDefaultFree failed. Trying to free a pointer not allocated here."
    );
    assert_eq!(aclallocDefaultFree(p), ACL_ERROR_INVALID_PARAM, "twice");
    let msg = unsafe { CStr::from_ptr(aclGetRecentErrMsg()) };
    assert!(
        msg.to_str()
            .unwrap()
            .contains("already freed: a double free"),
        "a second free is told from a foreign pointer: {msg:?}"
    );
    assert_eq!(unsafe { aclallocDefaultGetStats(&mut st) }, ACL_SUCCESS);
    assert_eq!(
        (st.allocCount, st.freeCount, st.refusedFreeCount),
        (n + 1, n + 1, 2)
    );

    // The pool reuses a block only for its own stream, so workspaces go back
    // in stream order, as with a registered pool: the next launch on the
    // same stream gets the same block while the first kernel still runs; a
    // launch on another stream meanwhile gets a different one.
    let (mut s1, mut s2) = (null_mut(), null_mut());
    assert_eq!(unsafe { aclrtCreateStream(&mut s1) }, ACL_SUCCESS);
    assert_eq!(unsafe { aclrtCreateStream(&mut s2) }, ACL_SUCCESS);
    for s in [s1, s1, s2] {
        let rc = unsafe { aclallocLaunchKernel(s, 8192, Some(slow_recording), null_mut()) };
        assert_eq!(rc, ACL_SUCCESS);
    }
    assert_eq!(stat(obj, c"allocation.all.current"), 0, "all back already");
    assert_eq!(aclrtSynchronizeDevice(), ACL_SUCCESS);
    // In the order the kernels ran (the streams run side by side).
    let mut seen = SEEN.lock().unwrap().clone();
    seen.sort_unstable();
    assert!(
        seen.len() == 3 && seen[0] != seen[2] && (seen[1] == seen[0] || seen[1] == seen[2]),
        "{seen:x?}: stream 1's two launches share a block, stream 2 has its own"
    );
    assert_eq!(unsafe { aclrtDestroyStream(s1) }, ACL_SUCCESS);
    assert_eq!(unsafe { aclrtDestroyStream(s2) }, ACL_SUCCESS);
    assert_eq!(aclrtResetDevice(0), ACL_SUCCESS);
    assert_eq!(aclFinalize(), ACL_SUCCESS);
}
