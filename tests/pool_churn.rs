//! A service that creates and destroys memory pools per request keeps a
//! flat resident set: a destroyed pool's host-side struct is freed once
//! nothing uses it, through aclalloc's pool API and CANN's stream-ordered
//! pools alike, while a handle resolved before the destroy is still
//! refused cleanly.

mod common;

use aclalloc::base::error::ACL_SUCCESS;
use aclalloc::ffi::cann::allocator::aclrtAllocatorDestroyDesc;
use aclalloc::ffi::cann::runtime::{aclInit, aclrtCreateStream, aclrtSetDevice};
use aclalloc::ffi::cann::stream_ordered::*;
use aclalloc::ffi::cann::types::*;
use aclalloc::ffi::ext::pool::{
    aclallocPoolAlloc, aclallocPoolCreate, aclallocPoolDestroy, aclallocPoolFree,
};
use common::long_run::rss_bytes;
use std::ffi::c_void;
use std::ptr::{null, null_mut};
use std::sync::Mutex;

const CYCLES: usize = 100_000;
const MIB: usize = 1 << 20;
static SERIAL: Mutex<()> = Mutex::new(());

fn setup() -> std::sync::MutexGuard<'static, ()> {
    let g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    static INIT: std::sync::Once = std::sync::Once::new();
    // SAFETY: NULL config.
    INIT.call_once(|| assert_eq!(unsafe { aclInit(null()) }, ACL_SUCCESS));
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    g
}

/// Runs `cycle` CYCLES times and returns how much the resident set grew
/// between the end of a warm-up (a tenth) and the end.
fn growth(mut cycle: impl FnMut()) -> usize {
    for _ in 0..CYCLES / 10 {
        cycle();
    }
    let before = rss_bytes();
    for _ in CYCLES / 10..CYCLES {
        cycle();
    }
    rss_bytes().saturating_sub(before)
}

#[test]
fn a_hundred_thousand_pools_created_and_destroyed_leave_the_resident_set_flat() {
    let _g = setup();
    let grew = growth(|| {
        let (mut pool, mut desc) = (null_mut(), null_mut());
        // SAFETY: valid out-pointers, then live handles.
        unsafe {
            assert_eq!(
                aclallocPoolCreate(null(), &mut pool, &mut desc),
                ACL_SUCCESS
            );
            let block = aclallocPoolAlloc(pool, 1000);
            assert!(!block.is_null());
            aclallocPoolFree(pool, block);
            assert_eq!(aclrtAllocatorDestroyDesc(desc), ACL_SUCCESS);
            assert_eq!(aclallocPoolDestroy(pool), ACL_SUCCESS);
            // The handle this thread resolved last is refused, not reused.
            assert!(aclallocPoolAlloc(pool, 1000).is_null());
        }
    });
    assert!(grew < MIB, "the resident set grew by {grew} bytes");
}

#[test]
fn a_hundred_thousand_stream_ordered_pools_leave_the_resident_set_flat() {
    let _g = setup();
    let mut stream = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtCreateStream(&mut stream) }, ACL_SUCCESS);
    let props = common::mem_pool_props();
    let grew = growth(|| {
        let mut pool: aclrtMemPool = null_mut();
        let mut ptr: *mut c_void = null_mut();
        // SAFETY: valid out-pointers, then live handles.
        unsafe {
            assert_eq!(aclrtMemPoolCreate(&mut pool, &props), ACL_SUCCESS);
            assert_eq!(
                aclrtMemPoolMallocAsync(&mut ptr, 1000, pool, stream),
                ACL_SUCCESS
            );
            assert_eq!(aclrtMemPoolFreeAsync(ptr, stream), ACL_SUCCESS);
            assert_eq!(aclrtMemPoolDestroy(pool), ACL_SUCCESS);
            assert_ne!(aclrtMemPoolTrimTo(pool, 0), ACL_SUCCESS);
        }
    });
    assert!(grew < MIB, "the resident set grew by {grew} bytes");
}

#[test]
fn a_pool_destroyed_while_another_thread_holds_its_handle_is_refused_there() {
    let _g = setup();
    let (mut pool, mut desc) = (null_mut(), null_mut());
    // SAFETY: valid out-pointers.
    unsafe {
        assert_eq!(
            aclallocPoolCreate(null(), &mut pool, &mut desc),
            ACL_SUCCESS
        );
        assert_eq!(aclrtAllocatorDestroyDesc(desc), ACL_SUCCESS);
    }
    let handle = pool as usize;
    let (resolved_tx, resolved_rx) = std::sync::mpsc::channel();
    let (destroyed_tx, destroyed_rx) = std::sync::mpsc::channel::<()>();
    let other = std::thread::spawn(move || {
        let pool = handle as *mut c_void;
        assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
        // A live pool handle: this thread now caches it.
        let block = aclallocPoolAlloc(pool, 512);
        assert!(!block.is_null());
        aclallocPoolFree(pool, block);
        resolved_tx.send(()).unwrap();
        destroyed_rx.recv().unwrap();
        // Its cache still holds the destroyed pool: refused, not a crash.
        let late = aclallocPoolAlloc(pool, 512);
        assert!(late.is_null());
    });
    resolved_rx.recv().unwrap();
    // A live pool with nothing allocated.
    assert_eq!(aclallocPoolDestroy(pool), ACL_SUCCESS);
    destroyed_tx.send(()).unwrap();
    other.join().unwrap();
}
