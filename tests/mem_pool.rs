//! Memory pools (`aclallocMemPool*`) through the C API: routing of the
//! default allocator's raw functions per thread and device, blocks keeping
//! their pool, deferred destroy, `use_count`, `no_split`, `use_on_oom`,
//! per-pool snapshots and the argument errors.

mod common;

use aclalloc::base::error::*;
use aclalloc::ffi::cann::memory::{aclrtGetMemInfo, aclrtMemset};
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::ext::default_allocator::*;
use aclalloc::ffi::ext::mem_pool::*;
use aclalloc::ffi::ext::pool::*;
use std::ffi::c_void;
use std::ptr::{null, null_mut};
use std::sync::{Mutex, MutexGuard, Once, PoisonError};

/// Sets the process up once; the guard keeps this file's tests one at a
/// time, since they read a device's free memory, which every test moves.
fn init() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    let guard = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        std::env::set_var("ACLALLOC_DEVICE_COUNT", "2");
        std::env::remove_var("ACLALLOC_DEFAULT_ALLOCATOR");
        std::env::remove_var("ACLALLOC_ALLOC_CONF");
        assert_eq!(unsafe { aclInit(null()) }, ACL_SUCCESS);
    });
    guard
}

fn create(options: Option<aclallocMemPoolOptions>) -> aclallocMemPool {
    let mut pool = null_mut();
    let o = options.as_ref().map_or(null(), |o| o as *const _);
    assert_eq!(unsafe { aclallocMemPoolCreate(o, &mut pool) }, ACL_SUCCESS);
    assert!(!pool.is_null());
    pool
}

fn options() -> aclallocMemPoolOptions {
    aclallocMemPoolOptions {
        allocator: null_mut(),
        useOnOom: 0,
        noSplit: 0,
        tag: null(),
    }
}

fn malloc(size: usize) -> *mut c_void {
    let mut p = null_mut();
    assert_eq!(
        unsafe { aclallocDefaultMalloc(&mut p, size, null_mut()) },
        ACL_SUCCESS,
        "{:?}",
        common::recent_message()
    );
    p
}

fn snapshot(pool: aclallocMemPool) -> serde_json::Value {
    let mut length = 0usize;
    assert_eq!(
        unsafe { aclallocMemPoolSnapshot(pool, null_mut(), 0, &mut length) },
        ACL_SUCCESS
    );
    let mut buffer = vec![0u8; length + 1];
    assert_eq!(
        unsafe {
            aclallocMemPoolSnapshot(pool, buffer.as_mut_ptr().cast(), buffer.len(), null_mut())
        },
        ACL_SUCCESS
    );
    serde_json::from_slice(&buffer[..length]).unwrap()
}

/// Addresses of the pool's blocks in `state`.
fn blocks(pool: aclallocMemPool, state: &str) -> Vec<usize> {
    let snap = snapshot(pool);
    let mut out = Vec::new();
    for segment in snap["segments"].as_array().unwrap() {
        for b in segment["blocks"].as_array().unwrap() {
            if b["state"] == state {
                let hex = b["address"].as_str().unwrap().trim_start_matches("0x");
                out.push(usize::from_str_radix(hex, 16).unwrap());
            }
        }
    }
    out
}

fn use_count(pool: aclallocMemPool) -> u64 {
    let mut n = 0;
    assert_eq!(
        unsafe { aclallocMemPoolUseCount(pool, &mut n) },
        ACL_SUCCESS
    );
    n
}

#[test]
fn allocations_inside_a_use_come_from_the_pool_and_go_back_to_it() {
    let _serial = init();
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    let pool = create(None);
    let mut id = 0;
    assert_eq!(unsafe { aclallocMemPoolGetId(pool, &mut id) }, ACL_SUCCESS);
    assert!(id > 0);
    assert_eq!(use_count(pool), 1);
    assert_eq!(aclallocMemPoolBeginUse(pool, 0), ACL_SUCCESS);
    assert_eq!(use_count(pool), 2);
    let inside = malloc(4096) as usize;
    // Another thread is not routed, even while this one is inside.
    let other = std::thread::spawn(|| {
        assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
        malloc(4096) as usize
    })
    .join()
    .unwrap();
    // Device 1 is not routed by a use on device 0.
    assert_eq!(aclrtSetDevice(1), ACL_SUCCESS);
    let on_one = malloc(4096) as usize;
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    assert_eq!(aclallocMemPoolEndUse(pool, 0), ACL_SUCCESS);
    assert_eq!(use_count(pool), 1);
    let after = malloc(4096) as usize;

    let live = blocks(pool, "active_allocated");
    assert_eq!(live, vec![inside]);
    for p in [other, on_one, after] {
        assert!(!live.contains(&p));
    }
    let mut device_pool = null_mut();
    assert_eq!(
        unsafe { aclallocMemPoolGetDevicePool(pool, 0, &mut device_pool) },
        ACL_SUCCESS
    );
    assert!(!device_pool.is_null());
    assert_eq!(
        unsafe { aclallocMemPoolGetDevicePool(pool, 1, &mut device_pool) },
        ACL_SUCCESS
    );
    assert!(device_pool.is_null(), "never used on device 1");
    assert_eq!(
        unsafe { aclallocMemPoolGetDevicePool(pool, 0, &mut device_pool) },
        ACL_SUCCESS
    );
    let mut listed = [null_mut(); 64];
    let mut count = 0;
    assert_eq!(
        unsafe { aclallocMemPoolListDevicePools(0, listed.as_mut_ptr(), 64, &mut count) },
        ACL_SUCCESS
    );
    assert!(listed[..count.min(64)].contains(&device_pool));

    // Freed outside the use, from another thread: back to the memory pool.
    std::thread::spawn(move || {
        assert_eq!(aclallocDefaultFree(inside as *mut c_void), ACL_SUCCESS);
    })
    .join()
    .unwrap();
    assert!(blocks(pool, "active_allocated").is_empty());
    assert!(blocks(pool, "inactive").contains(&inside));
    assert_eq!(
        aclallocDefaultFree(inside as *mut c_void),
        ACL_ERROR_INVALID_PARAM,
        "a second free is refused"
    );
    for p in [other, on_one, after] {
        assert_eq!(aclallocDefaultFree(p as *mut c_void), ACL_SUCCESS);
    }
    assert_eq!(aclallocMemPoolDestroy(pool), ACL_SUCCESS);
}

#[test]
fn uses_nest_and_the_innermost_wins() {
    let _serial = init();
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    let (outer, inner) = (create(None), create(None));
    assert_eq!(aclallocMemPoolBeginUse(outer, 0), ACL_SUCCESS);
    let a = malloc(1000) as usize;
    assert_eq!(aclallocMemPoolBeginUse(inner, 0), ACL_SUCCESS);
    let b = malloc(1000) as usize;
    assert_eq!(aclallocMemPoolEndUse(inner, 0), ACL_SUCCESS);
    let c = malloc(1000) as usize;
    assert_eq!(aclallocMemPoolEndUse(outer, 0), ACL_SUCCESS);
    let mut outer_blocks = blocks(outer, "active_allocated");
    outer_blocks.sort_unstable();
    let mut expected = vec![a, c];
    expected.sort_unstable();
    assert_eq!(outer_blocks, expected);
    assert_eq!(blocks(inner, "active_allocated"), vec![b]);
    for p in [a, b, c] {
        assert_eq!(aclallocDefaultFree(p as *mut c_void), ACL_SUCCESS);
    }
    // No use left on this thread.
    assert_eq!(aclallocMemPoolEndUse(outer, 0), ACL_ERROR_INVALID_PARAM);
    for p in [outer, inner] {
        assert_eq!(aclallocMemPoolDestroy(p), ACL_SUCCESS);
    }
}

fn free_memory(device: i32) -> usize {
    assert_eq!(aclrtSetDevice(device), ACL_SUCCESS);
    let (mut free, mut total) = (0usize, 0usize);
    assert_eq!(
        unsafe { aclrtGetMemInfo(aclalloc::base::types::ACL_HBM_MEM, &mut free, &mut total) },
        ACL_SUCCESS
    );
    free
}

#[test]
fn destroy_with_live_blocks_is_deferred_until_they_are_freed() {
    let _serial = init();
    // Device 1: the other tests allocate on device 0 at the same time.
    assert_eq!(aclrtSetDevice(1), ACL_SUCCESS);
    let warm = malloc(512);
    assert_eq!(aclallocDefaultFree(warm), ACL_SUCCESS);
    let pool = create(None);
    assert_eq!(aclallocMemPoolBeginUse(pool, 1), ACL_SUCCESS);
    assert_eq!(
        aclallocMemPoolDestroy(pool),
        ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED,
        "refused while a use is open"
    );
    let before = free_memory(1);
    let p = malloc(8 << 20);
    assert_eq!(aclallocMemPoolEndUse(pool, 1), ACL_SUCCESS);
    assert!(free_memory(1) < before);
    assert_eq!(aclallocMemPoolDestroy(pool), ACL_SUCCESS);
    let mut id = 0;
    assert_eq!(
        unsafe { aclallocMemPoolGetId(pool, &mut id) },
        ACL_ERROR_INVALID_PARAM,
        "the handle is dead"
    );
    assert_eq!(id, 0, "nothing written on failure");
    // The block is still the caller's: usable, then freed.
    assert_eq!(
        unsafe { aclrtMemset(p, 8 << 20, 0x5A, 8 << 20) },
        ACL_SUCCESS
    );
    assert!(free_memory(1) < before);
    assert_eq!(aclallocDefaultFree(p), ACL_SUCCESS);
    assert_eq!(free_memory(1), before, "the pool's memory went back");
}

#[test]
fn no_split_gives_each_block_a_segment_of_its_own() {
    let _serial = init();
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    for (no_split, segments) in [(1, 3), (0, 1)] {
        let pool = create(Some(aclallocMemPoolOptions {
            noSplit: no_split,
            ..options()
        }));
        assert_eq!(aclallocMemPoolBeginUse(pool, 0), ACL_SUCCESS);
        let ptrs: Vec<_> = (0..3).map(|_| malloc(1000)).collect();
        assert_eq!(aclallocMemPoolEndUse(pool, 0), ACL_SUCCESS);
        let snap = snapshot(pool);
        let segs = snap["segments"].as_array().unwrap();
        assert_eq!(segs.len(), segments, "noSplit {no_split}");
        if no_split == 1 {
            for s in segs {
                assert_eq!(s["blocks"].as_array().unwrap().len(), 1);
            }
        }
        for p in ptrs {
            assert_eq!(aclallocDefaultFree(p), ACL_SUCCESS);
        }
        assert_eq!(aclallocMemPoolDestroy(pool), ACL_SUCCESS);
    }
}

#[test]
fn use_on_oom_pools_serve_the_default_pool_from_their_cache() {
    let _serial = init();
    // Device 1's default pool, limited to 4 MiB: an 8 MiB request fails there.
    std::thread::spawn(|| {
        assert_eq!(aclrtSetDevice(1), ACL_SUCCESS);
        let warm = malloc(512);
        let mut default_pool = null_mut();
        assert_eq!(
            unsafe { aclallocGetDefaultAllocator(&mut default_pool) },
            ACL_SUCCESS
        );
        assert_eq!(
            aclallocPoolSetMemoryLimit(default_pool, 4 << 20),
            ACL_SUCCESS
        );
        let mut p = null_mut();
        assert_eq!(
            unsafe { aclallocDefaultMalloc(&mut p, 8 << 20, null_mut()) },
            ACL_ERROR_RT_MEMORY_ALLOCATION
        );
        for use_on_oom in [0, 1] {
            let pool = create(Some(aclallocMemPoolOptions {
                useOnOom: use_on_oom,
                ..options()
            }));
            assert_eq!(aclallocMemPoolBeginUse(pool, 1), ACL_SUCCESS);
            let cached = malloc(8 << 20);
            assert_eq!(aclallocMemPoolEndUse(pool, 1), ACL_SUCCESS);
            assert_eq!(aclallocDefaultFree(cached), ACL_SUCCESS);
            let mut q = null_mut();
            let rc = unsafe { aclallocDefaultMalloc(&mut q, 8 << 20, null_mut()) };
            if use_on_oom == 1 {
                assert_eq!(rc, ACL_SUCCESS);
                assert_eq!(q, cached, "the pool's cached block");
                assert_eq!(blocks(pool, "active_allocated"), vec![q as usize]);
                assert_eq!(aclallocDefaultFree(q), ACL_SUCCESS);
            } else {
                assert_eq!(rc, ACL_ERROR_RT_MEMORY_ALLOCATION);
                assert!(q.is_null());
            }
            assert_eq!(aclallocMemPoolDestroy(pool), ACL_SUCCESS);
        }
        assert_eq!(aclallocPoolSetMemoryLimit(default_pool, 0), ACL_SUCCESS);
        assert_eq!(aclallocDefaultFree(warm), ACL_SUCCESS);
    })
    .join()
    .unwrap();
}

#[test]
fn bad_arguments_are_refused_and_nothing_is_written() {
    let _serial = init();
    assert_eq!(
        unsafe { aclallocMemPoolCreate(null(), null_mut()) },
        ACL_ERROR_INVALID_PARAM
    );
    let mut pool = null_mut();
    for bad in [
        aclallocMemPoolOptions {
            useOnOom: 2,
            ..options()
        },
        aclallocMemPoolOptions {
            noSplit: -1,
            ..options()
        },
        aclallocMemPoolOptions {
            allocator: 0x1234 as *mut c_void,
            ..options()
        },
    ] {
        assert_eq!(
            unsafe { aclallocMemPoolCreate(&bad, &mut pool) },
            ACL_ERROR_INVALID_PARAM
        );
        assert!(pool.is_null());
    }
    let garbage = 0x5678 as *mut c_void;
    assert_eq!(aclallocMemPoolDestroy(garbage), ACL_ERROR_INVALID_PARAM);
    assert_eq!(aclallocMemPoolBeginUse(garbage, 0), ACL_ERROR_INVALID_PARAM);
    let pool = create(None);
    assert_eq!(
        aclallocMemPoolBeginUse(pool, 2),
        ACL_ERROR_RT_INVALID_DEVICEID
    );
    assert_eq!(
        aclallocMemPoolBeginUse(pool, -1),
        ACL_ERROR_RT_INVALID_DEVICEID
    );
    assert_eq!(aclallocMemPoolEndUse(pool, 0), ACL_ERROR_INVALID_PARAM);
    assert_eq!(
        unsafe { aclallocMemPoolGetId(pool, null_mut()) },
        ACL_ERROR_INVALID_PARAM
    );
    let mut count = 7;
    assert_eq!(
        unsafe { aclallocMemPoolListDevicePools(0, null_mut(), 0, null_mut()) },
        ACL_ERROR_INVALID_PARAM
    );
    assert_eq!(
        unsafe { aclallocMemPoolListDevicePools(0, null_mut(), 1, &mut count) },
        ACL_ERROR_INVALID_PARAM
    );
    assert_eq!(
        unsafe { aclallocMemPoolListDevicePools(9, null_mut(), 0, &mut count) },
        ACL_ERROR_RT_INVALID_DEVICEID
    );
    assert_eq!(count, 7, "nothing written on failure");
    let tagged = create(Some(aclallocMemPoolOptions {
        tag: c"weights".as_ptr(),
        ..options()
    }));
    for p in [pool, tagged] {
        assert_eq!(aclallocMemPoolDestroy(p), ACL_SUCCESS);
        assert_eq!(aclallocMemPoolDestroy(p), ACL_ERROR_INVALID_PARAM);
    }
}

#[test]
fn a_thread_that_exits_inside_a_use_ends_it() {
    let _serial = init();
    let pool = create(None);
    let handle = pool as usize;
    std::thread::spawn(move || {
        assert_eq!(
            aclallocMemPoolBeginUse(handle as aclallocMemPool, 0),
            ACL_SUCCESS
        );
    })
    .join()
    .unwrap();
    assert_eq!(use_count(pool), 1);
    assert_eq!(aclallocMemPoolDestroy(pool), ACL_SUCCESS);
}
