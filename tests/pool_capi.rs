//! The caching pool's C API, called as C calls it: create, register on two
//! streams, allocate through the registered callbacks, statistics export,
//! text buffers, failure messages through aclGetRecentErrMsg, destroy.

mod common;

use aclalloc::base::error::{
    ACL_ERROR_INVALID_PARAM, ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED, ACL_SUCCESS,
};
use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::errmsg::aclGetRecentErrMsg;
use aclalloc::ffi::cann::runtime::{aclInit, aclrtSetDevice};
use aclalloc::ffi::cann::types::{aclrtAllocatorAllocFunc, aclrtAllocatorFreeFunc};
use aclalloc::ffi::ext::pool::*;
use aclalloc::pool::PoolStats;
use common::message;
use common::pool::snapshot_text;
use std::ffi::{c_void, CStr, CString};
use std::ptr::{null, null_mut};

const MIB: usize = 1 << 20;

fn config(limit: usize) -> aclallocPoolConfig {
    aclallocPoolConfig {
        max_split_size: 0,
        garbage_collection_threshold: 0.0,
        memory_limit: limit,
        memory_fraction: 0.0,
        expandable_segments: 0,
        roundup_power2_divisions: [0; 16],
    }
}

/// The pool allocates with aclrtMalloc on the thread's current device.
fn device() {
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| assert_eq!(unsafe { aclInit(null()) }, ACL_SUCCESS));
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
}

fn create(cfg: &aclallocPoolConfig) -> (aclallocPool, *mut c_void) {
    device();
    let (mut pool, mut desc) = (null_mut(), null_mut());
    assert_eq!(
        unsafe { aclallocPoolCreate(cfg, &mut pool, &mut desc) },
        ACL_SUCCESS
    );
    (pool, desc)
}

#[test]
fn one_pool_serves_two_streams_through_the_registered_callbacks() {
    let (pool, desc) = create(&config(0));
    let streams = [0x1000 as *mut c_void, 0x2000 as *mut c_void];
    for s in streams {
        assert_eq!(aclrtAllocatorRegister(s, desc), ACL_SUCCESS);
    }
    let mut blocks = Vec::new();
    for s in streams {
        let (mut d, mut obj) = (null_mut(), null_mut());
        let (mut alloc, mut free, mut advise, mut addr) = (None, None, None, None);
        let rc = unsafe {
            aclrtAllocatorGetByStream(
                s,
                &mut d,
                &mut obj,
                &mut alloc,
                &mut free,
                &mut advise,
                &mut addr,
            )
        };
        assert_eq!(rc, ACL_SUCCESS);
        assert_eq!(
            (d, obj),
            (desc, pool),
            "the descriptor's object is the pool"
        );
        let (alloc, free, advise, addr) = (
            alloc.unwrap(),
            free.unwrap(),
            advise.unwrap(),
            addr.unwrap(),
        );
        let b = unsafe { alloc(obj, 4000) };
        assert!(!b.is_null());
        let a = unsafe { addr(b) };
        assert_eq!(a as usize % 512, 0);
        unsafe { (a as *mut u8).write_bytes(7, 4000) };
        unsafe { free(obj, b) };
        let again = unsafe { advise(obj, 4000, a) };
        assert_eq!(again, a, "allocAdvise gets the free address back");
        blocks.push(again);
    }
    let mut allocated = 0;
    assert_eq!(
        unsafe { aclallocPoolMemoryAllocated(pool, &mut allocated) },
        ACL_SUCCESS
    );
    assert_eq!(allocated, 2 * 4096);
    for b in blocks {
        aclallocPoolFree(pool, b);
    }
    let mut stats = PoolStats::default();
    assert_eq!(
        unsafe { aclallocPoolGetStats(pool, &mut stats) },
        ACL_SUCCESS
    );
    assert_eq!(stats.allocation[ACLALLOC_STAT_ALL].allocated, 4);
    assert_eq!(stats.num_device_alloc, 1);
    for s in streams {
        assert_eq!(aclrtAllocatorUnregister(s), ACL_SUCCESS);
    }
    assert_eq!(aclrtAllocatorDestroyDesc(desc), ACL_SUCCESS);
    assert_eq!(aclallocPoolDestroy(pool), ACL_SUCCESS);
}

#[test]
fn statistics_export_with_pytorch_keys() {
    let (pool, desc) = create(&config(0));
    let b = aclallocPoolAlloc(pool, 3 * MIB);
    let mut count = 0;
    assert_eq!(
        unsafe { aclallocPoolGetStatsKeyValues(pool, null_mut(), 0, &mut count) },
        ACL_SUCCESS
    );
    assert_eq!(count, ACLALLOC_STAT_KEY_COUNT);
    let mut entries = vec![
        aclallocStatEntry {
            key: null(),
            value: -1
        };
        count
    ];
    assert_eq!(
        unsafe { aclallocPoolGetStatsKeyValues(pool, entries.as_mut_ptr(), count, &mut count) },
        ACL_SUCCESS
    );
    let kv: Vec<(String, i64)> = entries
        .iter()
        .map(|e| {
            (
                unsafe { CStr::from_ptr(e.key) }
                    .to_str()
                    .unwrap()
                    .to_owned(),
                e.value,
            )
        })
        .collect();
    let get = |k: &str| kv.iter().find(|(key, _)| key == k).map(|(_, v)| *v);
    assert_eq!(
        get("allocated_bytes.large_pool.current"),
        Some(3 * MIB as i64)
    );
    assert_eq!(get("reserved_bytes.all.peak"), Some(20 * MIB as i64));
    assert_eq!(get("segment.small_pool.current"), Some(0));
    assert_eq!(get("requested_bytes.all.allocated"), Some(3 * MIB as i64));
    assert_eq!(get("num_device_alloc"), Some(1));
    assert_eq!(get("oversize_allocations.current"), Some(0));
    for name in [
        "allocation",
        "segment",
        "active",
        "inactive_split",
        "allocated_bytes",
        "reserved_bytes",
        "active_bytes",
        "inactive_split_bytes",
        "requested_bytes",
    ] {
        for p in ["all", "large_pool", "small_pool"] {
            for f in ["current", "peak", "allocated", "freed"] {
                assert!(get(&format!("{name}.{p}.{f}")).is_some(), "{name}.{p}.{f}");
            }
        }
    }
    for k in [
        "num_alloc_retries",
        "num_ooms",
        "num_device_free",
        "max_split_size",
        "oversize_segments.peak",
    ] {
        assert!(get(k).is_some(), "{k}");
    }
    let mut v = 0;
    let key = CString::new("inactive_split.large_pool.current").unwrap();
    assert_eq!(
        unsafe { aclallocPoolGetStat(pool, key.as_ptr(), &mut v) },
        ACL_SUCCESS
    );
    assert_eq!(v, 1);
    let bad = CString::new("allocated").unwrap();
    assert_eq!(
        unsafe { aclallocPoolGetStat(pool, bad.as_ptr(), &mut v) },
        ACL_ERROR_INVALID_PARAM
    );
    assert!(message().starts_with("aclallocPoolGetStat failed. Parameter key is invalid."));
    // Text works like snprintf.
    let mut len = 0;
    assert_eq!(
        unsafe { aclallocPoolSummary(pool, null_mut(), 0, &mut len) },
        ACL_SUCCESS
    );
    let mut small = [0x55 as std::ffi::c_char; 8];
    assert_eq!(
        unsafe { aclallocPoolSummary(pool, small.as_mut_ptr(), small.len(), &mut len) },
        ACL_SUCCESS
    );
    assert_eq!(
        unsafe { CStr::from_ptr(small.as_ptr()) }.to_bytes(),
        b"|======"
    );
    let mut buf = vec![0 as std::ffi::c_char; len + 1];
    assert_eq!(
        unsafe { aclallocPoolSnapshot(pool, buf.as_mut_ptr(), buf.len(), &mut len) },
        ACL_SUCCESS
    );
    let mut buf = vec![0 as std::ffi::c_char; len + 1];
    assert_eq!(
        unsafe { aclallocPoolSnapshot(pool, buf.as_mut_ptr(), buf.len(), null_mut()) },
        ACL_SUCCESS
    );
    let json = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
    assert!(
        json.starts_with(
            "{\"version\":2,\"device\":0,\"segments\":[{\"device\":0,\"address\":\"0x"
        ) && json.len() == len,
        "{json}"
    );
    assert!(
        json.contains("\"segment_type\":\"large\"")
            && json.contains("\"state\":\"active_allocated\"")
    );
    aclallocPoolFree(pool, b);
    assert_eq!(aclallocPoolResetPeakStats(pool), ACL_SUCCESS);
    assert_eq!(aclallocPoolResetAccumulatedStats(pool), ACL_SUCCESS);
    let mut peak = 1;
    assert_eq!(
        unsafe { aclallocPoolMaxMemoryAllocated(pool, &mut peak) },
        ACL_SUCCESS
    );
    assert_eq!(peak, 0);
    assert_eq!(aclallocPoolTrim(pool, 0), ACL_SUCCESS);
    assert_eq!(
        unsafe { aclallocPoolMemoryReserved(pool, &mut peak) },
        ACL_SUCCESS
    );
    assert_eq!(peak, 0);
    assert_eq!(aclrtAllocatorDestroyDesc(desc), ACL_SUCCESS);
    assert_eq!(aclallocPoolDestroy(pool), ACL_SUCCESS);
}

#[test]
fn failures_leave_messages() {
    let (pool, desc) = create(&config(8 * MIB));
    let a = aclallocPoolAlloc(pool, 3 * MIB);
    assert!(!a.is_null());
    assert!(aclallocPoolAlloc(pool, 6 * MIB).is_null());
    assert_eq!(
        message(),
        format!(
            "aclallocPoolAlloc failed. Out of memory in the caching pool. Reason: tried to allocate {} bytes with {} bytes allocated and {} bytes reserved by the pool, limit {} bytes; the pool's memory limit would be exceeded.",
            6 * MIB, 4 * MIB, 4 * MIB, 8 * MIB
        )
    );
    aclallocPoolFree(pool, a);
    aclallocPoolFree(pool, a);
    assert_eq!(message(), "aclallocPoolFree failed. Parameter block is invalid. Reason: The block was already freed (double free).");
    let mut x = 0u64;
    aclallocPoolFree(pool, &mut x as *mut u64 as *mut c_void);
    assert_eq!(message(), "aclallocPoolFree failed. Parameter block is invalid. Reason: It is not a block of this pool.");
    aclallocPoolFree(0x1234 as *mut c_void, a);
    assert!(message().starts_with("aclallocPoolFree failed. Parameter pool is invalid."));
    assert_eq!(
        aclallocPoolSetMemoryFraction(pool, 0.0),
        ACL_ERROR_INVALID_PARAM
    );
    assert_eq!(aclallocPoolSetMemoryFraction(pool, 0.25), ACL_SUCCESS);
    assert_eq!(aclallocPoolSetMemoryLimit(pool, 0), ACL_SUCCESS);
    let b = aclallocPoolAlloc(pool, 6 * MIB);
    assert!(!b.is_null(), "no limit any more");
    assert_eq!(
        aclallocPoolDestroy(pool),
        ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED,
        "the code a pluggable allocator's destroy gives in the same situation"
    );
    assert!(message().contains("It is still in use. Blocks it handed out that were not freed: 1"));
    aclallocPoolFree(pool, b);
    assert_eq!(aclallocPoolEmptyCache(pool), ACL_SUCCESS);
    assert_eq!(aclallocPoolDestroy(pool), ACL_SUCCESS);
    assert!(
        aclallocPoolAlloc(pool, 100).is_null(),
        "a destroyed pool's callbacks refuse"
    );
    assert!(message().starts_with("aclallocPoolAlloc failed. Parameter pool is invalid."));
    assert_eq!(aclallocPoolDestroy(pool), ACL_ERROR_INVALID_PARAM);
    assert_eq!(aclrtAllocatorDestroyDesc(desc), ACL_SUCCESS);
    let bad = aclallocPoolConfig {
        max_split_size: 1000,
        ..config(0)
    };
    let (mut p, mut d) = (null_mut(), null_mut());
    assert_eq!(
        unsafe { aclallocPoolCreate(&bad, &mut p, &mut d) },
        ACL_ERROR_INVALID_PARAM
    );
    assert!(p.is_null() && d.is_null(), "nothing written on failure");
}

#[test]
fn config_comes_from_the_environment() {
    // The only test in this binary that reads the environment.
    std::env::set_var(
        "ACLALLOC_ALLOC_CONF",
        "max_split_size_mb:64,memory_limit_mb:100",
    );
    let mut cfg = config(0);
    assert_eq!(unsafe { aclallocPoolConfigInit(&mut cfg) }, ACL_SUCCESS);
    assert_eq!(cfg.max_split_size, 64 * MIB);
    assert_eq!(
        (cfg.max_split_size, cfg.memory_limit),
        (64 * MIB, 100 * MIB)
    );
    std::env::set_var("ACLALLOC_ALLOC_CONF", "max_split_size_mb:64,bogus:1");
    let before = cfg.max_split_size;
    assert_eq!(
        unsafe { aclallocPoolConfigInit(&mut cfg) },
        ACL_ERROR_INVALID_PARAM
    );
    assert_eq!(
        message(),
        "aclallocPoolConfigInit failed. Environment variable ACLALLOC_ALLOC_CONF is invalid. Reason: unknown key \"bogus\" in \"bogus:1\"; accepted keys: max_split_size_mb, garbage_collection_threshold, memory_limit_mb, memory_fraction, expandable_segments, roundup_power2_divisions, per_process_memory_fraction, pin_memory_expandable_segments, pinned_mem_register, pinned_use_background_threads, pinned_reserve_segment_size_mb, release_lock_on_npumalloc, multi_stream_lazy_reclaim, base_addr_aligned_kb, page_size, segment_size_mb, large_segment_size_mb, max_non_split_rounding_mb."
    );
    assert_eq!(cfg.max_split_size, before);
    // Two limits: refused, naming both, instead of the last one winning.
    std::env::set_var(
        "ACLALLOC_ALLOC_CONF",
        "memory_limit_mb:100,memory_fraction:0.5",
    );
    assert_eq!(
        unsafe { aclallocPoolConfigInit(&mut cfg) },
        ACL_ERROR_INVALID_PARAM
    );
    let m = message();
    assert!(
        m.contains("memory_limit_mb and memory_fraction contradict each other"),
        "{m}"
    );
    // aclallocPoolCreate with NULL reads the same variable and refuses the same way.
    std::env::set_var(
        "ACLALLOC_ALLOC_CONF",
        "max_split_size_mb:64,max_split_size_mb:64",
    );
    let (mut p, mut d) = (null_mut(), null_mut());
    assert_eq!(
        unsafe { aclallocPoolCreate(std::ptr::null(), &mut p, &mut d) },
        ACL_ERROR_INVALID_PARAM
    );
    assert!(p.is_null() && d.is_null(), "nothing written on failure");
    let m = message();
    assert!(
        m.contains("ACLALLOC_ALLOC_CONF")
            && m.contains("max_split_size_mb is given more than once"),
        "{m}"
    );
    torch_npu_conf_through_the_c_abi();
    std::env::remove_var("ACLALLOC_ALLOC_CONF");
}

/// A `PYTORCH_NPU_ALLOC_CONF` string, unchanged, through
/// `aclallocPoolConfigInit` and `aclallocPoolCreate(NULL, ...)`; bad values
/// refused with the key and what it accepts. Called from the one test that
/// sets the environment.
fn torch_npu_conf_through_the_c_abi() {
    std::env::set_var(
        "ACLALLOC_ALLOC_CONF",
        "expandable_segments:True,max_split_size_mb:512,garbage_collection_threshold:0.6,roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
    );
    let mut cfg = config(0);
    assert_eq!(unsafe { aclallocPoolConfigInit(&mut cfg) }, ACL_SUCCESS);
    assert_eq!(cfg.expandable_segments, 1);
    assert_eq!(cfg.max_split_size, 512 * MIB);
    assert_eq!(cfg.garbage_collection_threshold, 0.6);
    assert_eq!(
        cfg.roundup_power2_divisions,
        [1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 4, 8, 8, 8, 8, 8]
    );
    assert_eq!(
        ACLALLOC_ROUNDUP_INTERVALS,
        cfg.roundup_power2_divisions.len()
    );

    // aclallocPoolCreate(NULL): an expandable pool rounding with the divisions.
    std::env::set_var(
        "ACLALLOC_ALLOC_CONF",
        "expandable_segments:True,roundup_power2_divisions:4",
    );
    device();
    let (mut pool, mut desc) = (null_mut(), null_mut());
    assert_eq!(
        unsafe { aclallocPoolCreate(null(), &mut pool, &mut desc) },
        ACL_SUCCESS,
        "{}",
        message()
    );
    // 5 MiB + 1 lies between 4 and 8 MiB: 4 steps of 1 MiB, so 6 MiB.
    let block = aclallocPoolAlloc(pool, 5 * MIB + 1);
    assert!(!block.is_null(), "{}", message());
    let mut stats = PoolStats::default();
    assert_eq!(
        unsafe { aclallocPoolGetStats(pool, &mut stats) },
        ACL_SUCCESS
    );
    assert_eq!(stats.allocated_bytes[0].current, 6 * MIB as i64);
    assert_eq!(stats.requested_bytes[0].current, 5 * MIB as i64 + 1);
    let json = snapshot_text(pool);
    assert!(json.contains("\"is_expandable\":true"), "{json}");
    aclallocPoolFree(pool, block);
    assert_eq!(aclallocPoolDestroy(pool), ACL_SUCCESS);
    assert_eq!(aclrtAllocatorDestroyDesc(desc), ACL_SUCCESS);

    // Bad values: the key, the value and what is accepted.
    for (conf, expected) in [
        (
            "expandable_segments:Ture",
            "the value \"Ture\" of expandable_segments is not accepted; accepted: a truth value: True, False, 1, 0, yes, no, on, off (any case)",
        ),
        (
            "roundup_power2_divisions:[256:1,512:3]",
            "the value \"[256:1,512:3]\" of roundup_power2_divisions is not accepted; accepted: a power of two (divisions for every size), or [MiB:divisions,...,>:divisions] with each MiB a power of two and each divisions 0 or a power of two, e.g. [256:1,512:2,1024:4,>:8]",
        ),
    ] {
        std::env::set_var("ACLALLOC_ALLOC_CONF", conf);
        let (mut p, mut d) = (null_mut(), null_mut());
        assert_eq!(
            unsafe { aclallocPoolCreate(null(), &mut p, &mut d) },
            ACL_ERROR_INVALID_PARAM
        );
        assert!(p.is_null() && d.is_null(), "nothing written on failure");
        assert_eq!(
            message(),
            format!("aclallocPoolCreate failed. Environment variable ACLALLOC_ALLOC_CONF is invalid. Reason: {expected}.")
        );
    }
}

#[test]
fn divisions_outside_powers_of_two_are_refused_naming_the_field() {
    let mut bad = config(0);
    bad.roundup_power2_divisions[3] = 3;
    device();
    let (mut p, mut d) = (null_mut(), null_mut());
    assert_eq!(
        unsafe { aclallocPoolCreate(&bad, &mut p, &mut d) },
        ACL_ERROR_INVALID_PARAM
    );
    assert!(p.is_null() && d.is_null(), "nothing written on failure");
    let m = message();
    assert!(
        m.starts_with(
            "aclallocPoolCreate failed. Parameter config->roundup_power2_divisions is invalid."
        ) && m.contains("Each entry must be 0 or a power of two"),
        "{m}"
    );
    let mut good = config(0);
    good.roundup_power2_divisions = [0, 1, 2, 4, 8, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 << 20];
    let (pool, desc) = create(&good);
    assert_eq!(aclallocPoolDestroy(pool), ACL_SUCCESS);
    assert_eq!(aclrtAllocatorDestroyDesc(desc), ACL_SUCCESS);
}

#[test]
fn launches_on_two_streams_keep_their_blocks_apart() {
    use aclalloc::ffi::cann::runtime::{
        aclrtCreateStream, aclrtDestroyStream, aclrtSynchronizeStream,
    };
    use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
    let (pool, desc) = create(&config(0));
    let mut streams = [null_mut(); 2];
    for s in &mut streams {
        assert_eq!(unsafe { aclrtCreateStream(s) }, ACL_SUCCESS);
        assert_eq!(aclrtAllocatorRegister(*s, desc), ACL_SUCCESS);
    }
    static SEEN: std::sync::Mutex<Vec<(usize, usize)>> = std::sync::Mutex::new(Vec::new());
    unsafe extern "C" fn kernel(ws: *mut c_void, _size: usize, stream: *mut c_void) {
        SEEN.lock().unwrap().push((stream as usize, ws as usize));
    }
    for _ in 0..3 {
        for &s in &streams {
            assert_eq!(
                unsafe { aclallocLaunchKernel(s, 100 << 10, Some(kernel), s) },
                ACL_SUCCESS
            );
        }
    }
    for &s in &streams {
        assert_eq!(unsafe { aclrtSynchronizeStream(s) }, ACL_SUCCESS);
    }
    let seen = SEEN.lock().unwrap().clone();
    let addrs = |s: *mut c_void| -> std::collections::BTreeSet<usize> {
        seen.iter()
            .filter(|(st, _)| *st == s as usize)
            .map(|(_, a)| *a)
            .collect()
    };
    let (a, b) = (addrs(streams[0]), addrs(streams[1]));
    assert_eq!(
        (a.len(), b.len()),
        (1, 1),
        "each stream reuses its own block"
    );
    assert!(
        a.is_disjoint(&b),
        "a block freed by one stream never went to the other"
    );
    let json = snapshot_text(pool);
    for s in streams {
        assert!(
            json.contains(&format!("\"stream\":\"{:#x}\",", s as usize)),
            "{json}"
        );
    }
    for s in streams {
        assert_eq!(aclrtAllocatorUnregister(s), ACL_SUCCESS);
        assert_eq!(unsafe { aclrtDestroyStream(s) }, ACL_SUCCESS);
    }
    assert_eq!(aclrtAllocatorDestroyDesc(desc), ACL_SUCCESS);
    assert_eq!(aclallocPoolDestroy(pool), ACL_SUCCESS);
}

#[test]
fn a_pool_destroyed_on_another_thread_refuses_this_threads_calls() {
    let (pool, desc) = create(&config(0));
    let b = aclallocPoolAlloc(pool, 100); // this thread now knows the pool
    aclallocPoolFree(pool, b);
    let handle = pool as usize;
    std::thread::spawn(move || assert_eq!(aclallocPoolDestroy(handle as *mut c_void), ACL_SUCCESS))
        .join()
        .unwrap();
    assert!(aclallocPoolAlloc(pool, 100).is_null());
    assert_eq!(
        message(),
        "aclallocPoolAlloc failed. Parameter pool is invalid. Reason: The pool was destroyed."
    );
    aclallocPoolFree(pool, b);
    assert!(message().starts_with("aclallocPoolFree failed. Parameter pool is invalid."));
    assert_eq!(aclallocPoolDestroy(pool), ACL_ERROR_INVALID_PARAM);
    assert_eq!(aclrtAllocatorDestroyDesc(desc), ACL_SUCCESS);
}

#[test]
fn a_launch_whose_workspace_the_pool_cannot_serve_fails_with_the_pools_reason() {
    use aclalloc::base::error::ACL_ERROR_RT_MEMORY_ALLOCATION;
    use aclalloc::ffi::cann::runtime::{aclrtCreateStream, aclrtDestroyStream};
    use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
    let (pool, desc) = create(&config(8 * MIB));
    let mut stream = null_mut();
    assert_eq!(unsafe { aclrtCreateStream(&mut stream) }, ACL_SUCCESS);
    assert_eq!(aclrtAllocatorRegister(stream, desc), ACL_SUCCESS);
    unsafe extern "C" fn kernel(_: *mut c_void, _: usize, _: *mut c_void) {}
    let rc = unsafe { aclallocLaunchKernel(stream, 9 * MIB, Some(kernel), null_mut()) };
    assert_eq!(rc, ACL_ERROR_RT_MEMORY_ALLOCATION);
    let text = message();
    assert!(
        text.contains(&format!(
            "aclallocPoolAlloc failed. Out of memory in the caching pool. Reason: tried to allocate {} bytes with 0 bytes allocated and 0 bytes reserved by the pool, limit {} bytes",
            9 * MIB,
            8 * MIB
        )),
        "{text}"
    );
    assert!(text.contains("aclallocLaunchKernel failed"), "{text}");
    let mut stats = PoolStats::default();
    assert_eq!(
        unsafe { aclallocPoolGetStats(pool, &mut stats) },
        ACL_SUCCESS
    );
    assert_eq!((stats.num_ooms, stats.num_device_alloc), (1, 0));
    assert_eq!(aclrtAllocatorUnregister(stream), ACL_SUCCESS);
    assert_eq!(unsafe { aclrtDestroyStream(stream) }, ACL_SUCCESS);
    assert_eq!(aclrtAllocatorDestroyDesc(desc), ACL_SUCCESS);
    assert_eq!(aclallocPoolDestroy(pool), ACL_SUCCESS);
}

/// The callbacks a stream's registration hands out, as an executor reads them.
fn callbacks_of(
    stream: *mut c_void,
) -> (*mut c_void, aclrtAllocatorAllocFunc, aclrtAllocatorFreeFunc) {
    let (mut d, mut obj) = (null_mut(), null_mut());
    let (mut alloc, mut free) = (None, None);
    let rc = unsafe {
        aclrtAllocatorGetByStream(
            stream,
            &mut d,
            &mut obj,
            &mut alloc,
            &mut free,
            null_mut(),
            null_mut(),
        )
    };
    assert_eq!(rc, ACL_SUCCESS);
    (obj, alloc, free)
}

/// With a descriptor per stream, the pool keeps a block freed by one stream
/// for that stream even when nothing tells it which stream is calling (as
/// when CANN's executor calls the callbacks), while the shared descriptor
/// hands the same block to any caller.
#[test]
fn stream_descriptors_keep_freed_blocks_on_their_stream() {
    let (pool, shared) = create(&config(0));
    let (a, b) = (0x7100 as *mut c_void, 0x7200 as *mut c_void);
    let (mut desc_a, mut desc_b) = (null_mut(), null_mut());
    unsafe {
        assert_eq!(
            aclallocPoolCreateStreamDesc(pool, a, &mut desc_a),
            ACL_SUCCESS
        );
        assert_eq!(
            aclallocPoolCreateStreamDesc(pool, b, &mut desc_b),
            ACL_SUCCESS
        );
    }
    assert_eq!(aclrtAllocatorRegister(a, desc_a), ACL_SUCCESS);
    assert_eq!(aclrtAllocatorRegister(b, desc_b), ACL_SUCCESS);
    let (obj_a, alloc_a, free_a) = callbacks_of(a);
    let (obj_b, alloc_b, _) = callbacks_of(b);
    assert_ne!(obj_a, obj_b, "each stream's descriptor has its own object");
    unsafe {
        let first = alloc_a.unwrap()(obj_a, 4096);
        assert!(!first.is_null());
        free_a.unwrap()(obj_a, first);
        let on_b = alloc_b.unwrap()(obj_b, 4096);
        assert_ne!(
            on_b, first,
            "a block freed on stream a must not go to stream b"
        );
        let again_on_a = alloc_a.unwrap()(obj_a, 4096);
        assert_eq!(again_on_a, first, "stream a reuses its own block");
        free_a.unwrap()(obj_a, again_on_a);
        free_a.unwrap()(obj_b, on_b);

        // The shared descriptor has no stream: its callers share blocks.
        let shared_stream = 0x7300 as *mut c_void;
        assert_eq!(aclrtAllocatorRegister(shared_stream, shared), ACL_SUCCESS);
        let (obj, alloc, free) = callbacks_of(shared_stream);
        let x = alloc.unwrap()(obj, 4096);
        free.unwrap()(obj, x);
        assert_eq!(alloc.unwrap()(obj, 4096), x);
        free.unwrap()(obj, x);
        aclrtAllocatorUnregister(shared_stream);
    }

    // A view is not a pool: it cannot destroy one.
    assert_eq!(aclallocPoolDestroy(obj_a), ACL_ERROR_INVALID_PARAM);
    assert!(message().contains("not a pool"));
    for (s, d) in [(a, desc_a), (b, desc_b)] {
        aclrtAllocatorUnregister(s);
        assert_eq!(aclrtAllocatorDestroyDesc(d), ACL_SUCCESS);
    }
    assert_eq!(aclrtAllocatorDestroyDesc(shared), ACL_SUCCESS);
    assert_eq!(aclallocPoolDestroy(pool), ACL_SUCCESS);
    // Views die with their pool.
    let mut late = null_mut();
    assert_eq!(
        unsafe { aclallocPoolCreateStreamDesc(pool, a, &mut late) },
        ACL_ERROR_INVALID_PARAM
    );
    assert!(late.is_null());
    let _ = aclGetRecentErrMsg();
    let dead = unsafe { alloc_a.unwrap()(obj_a, 4096) };
    assert!(
        dead.is_null(),
        "a view of a destroyed pool allocates nothing"
    );
    let _ = aclGetRecentErrMsg();
}
