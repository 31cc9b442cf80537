//! CANN's stream-ordered memory pools (`acl/acl_rt_memory_soma.h`) on the
//! host runtime, through the C ABI, as CANN's API reference documents them:
//! reuse within a stream (closest size first), across streams after an
//! event wait or a synchronize (and not before, nor with the switches
//! off), a free on another stream taking effect when that stream reaches
//! it, the release threshold at a synchronize, trimming, the attributes,
//! the pool's limit, and each bad input refused with a message.

mod common;

use aclalloc::ffi::cann::events::*;
use aclalloc::ffi::cann::memory::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::stream_info::aclrtLaunchHostFunc;
use aclalloc::ffi::cann::stream_ordered::*;
use aclalloc::ffi::cann::types::*;
use common::message;
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::Mutex;
use std::time::Duration;

const OK: aclError = 0;
const INVALID_PARAM: aclError = 100_000;
const NOT_CLEARED: aclError = 148_051;
const MIB: usize = 1 << 20;

/// One test at a time: they share the runtime's device memory.
static SERIAL: Mutex<()> = Mutex::new(());

fn setup() -> std::sync::MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: NULL is a valid config path.
    let init = unsafe { aclInit(null_mut()) };
    assert!(init == OK || init == 100_002, "aclInit: {init}");
    assert_eq!(aclrtSetDevice(0), OK);
    guard
}

fn refused(rc: aclError, want: aclError, needle: &str) {
    assert_eq!(rc, want, "expected {want} naming {needle:?}");
    let text = message();
    assert!(text.contains(needle), "{text:?} does not name {needle:?}");
}

fn create_with(p: aclrtMemPoolProps) -> aclrtMemPool {
    let mut pool = null_mut();
    // SAFETY: valid pointers.
    assert_eq!(unsafe { aclrtMemPoolCreate(&mut pool, &p) }, OK);
    pool
}

fn create() -> aclrtMemPool {
    create_with(common::mem_pool_props())
}

fn stream() -> aclrtStream {
    let mut s = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtCreateStream(&mut s) }, OK);
    s
}

fn malloc(pool: aclrtMemPool, size: usize, s: aclrtStream) -> usize {
    let mut p = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(
        unsafe { aclrtMemPoolMallocAsync(&mut p, size, pool, s) },
        OK
    );
    assert!(!p.is_null());
    p as usize
}

fn free(p: usize, s: aclrtStream) {
    assert_eq!(free_rc(p as *mut c_void, s), OK);
}

fn free_rc(p: *mut c_void, s: aclrtStream) -> aclError {
    // SAFETY: the runtime looks the address and the stream up.
    unsafe { aclrtMemPoolFreeAsync(p, s) }
}

fn destroy_pool(pool: aclrtMemPool) -> aclError {
    // SAFETY: the runtime looks the handle up.
    unsafe { aclrtMemPoolDestroy(pool) }
}

fn trim(pool: aclrtMemPool, keep: usize) -> aclError {
    // SAFETY: the runtime looks the handle up.
    unsafe { aclrtMemPoolTrimTo(pool, keep) }
}

fn get(pool: aclrtMemPool, attr: aclrtMemPoolAttr) -> u64 {
    let mut v = 0u64;
    // SAFETY: room for a uint64_t (a uint32_t attribute writes 4 bytes of it).
    assert_eq!(
        unsafe { aclrtMemPoolGetAttr(pool, attr, (&mut v as *mut u64).cast()) },
        OK
    );
    v
}

fn set_switch(pool: aclrtMemPool, attr: aclrtMemPoolAttr, value: u32) -> aclError {
    let mut v = value;
    // SAFETY: a readable uint32_t.
    unsafe { aclrtMemPoolSetAttr(pool, attr, (&mut v as *mut u32).cast()) }
}

fn set_bytes(pool: aclrtMemPool, attr: aclrtMemPoolAttr, value: u64) -> aclError {
    let mut v = value;
    // SAFETY: a readable uint64_t.
    unsafe { aclrtMemPoolSetAttr(pool, attr, (&mut v as *mut u64).cast()) }
}

fn sync(s: aclrtStream) {
    // SAFETY: the runtime looks the handle up.
    assert_eq!(unsafe { aclrtSynchronizeStream(s) }, OK);
}

fn destroy_stream(s: aclrtStream) {
    // SAFETY: the runtime looks the handle up.
    assert_eq!(unsafe { aclrtDestroyStream(s) }, OK);
}

fn finish(pool: aclrtMemPool, streams: &[aclrtStream]) {
    for &s in streams {
        sync(s);
        destroy_stream(s);
    }
    assert_eq!(destroy_pool(pool), OK);
}

#[test]
fn a_block_freed_on_a_stream_serves_that_stream_again_closest_size_first() {
    let _g = setup();
    let pool = create();
    let s = stream();
    let wide = malloc(pool, 30 * MIB + 77, s);
    let close = malloc(pool, 12 * MIB + 300, s);
    let small = malloc(pool, 5_000, s);
    free(wide, s);
    free(close, s);
    free(small, s);
    // No synchronize: the stream's later work runs after the frees.
    assert_eq!(malloc(pool, 5_000, s), small, "the same size again");
    assert_eq!(malloc(pool, 11 * MIB, s), close, "the closest free block");
    assert_eq!(malloc(pool, 29 * MIB, s), wide);
    assert!(get(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT) as usize >= 40 * MIB);
    for p in [small, close, wide] {
        free(p, s);
    }
    finish(pool, &[s]);
}

/// Whole free segments (here a 9 MiB block's) move between streams.
#[test]
fn another_stream_reuses_a_free_after_an_event_wait_and_not_before() {
    let _g = setup();
    let pool = create();
    // Without internal dependencies, which would make c wait for a.
    let deps = ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES;
    assert_eq!(set_switch(pool, deps, 0), OK);
    let (a, b, c) = (stream(), stream(), stream());
    let p = malloc(pool, 9 * MIB, a);
    free(p, a);
    let before = malloc(pool, 9 * MIB, c);
    assert_ne!(before, p, "c is not ordered after a's free");
    free(before, c);
    let mut e = null_mut();
    // SAFETY: a valid out-pointer, then live handles.
    unsafe {
        assert_eq!(aclrtCreateEvent(&mut e), OK);
        assert_eq!(aclrtRecordEvent(e, a), OK);
        assert_eq!(aclrtStreamWaitEvent(b, e), OK);
    }
    let r = malloc(pool, 9 * MIB, b);
    assert_eq!(r, p, "b waited on an event recorded after a's free");
    free(r, b);
    // SAFETY: a live event.
    assert_eq!(unsafe { aclrtDestroyEvent(e) }, OK);
    finish(pool, &[a, b, c]);
}

/// A 9 MiB block freed on `a`, then `order` orders `b` after the free (or
/// not); true when `b`'s next 9 MiB is that block.
fn reused_after(pool: aclrtMemPool, order: impl Fn(aclrtStream, aclrtStream)) -> bool {
    let (a, b) = (stream(), stream());
    let p = malloc(pool, 9 * MIB, a);
    free(p, a);
    order(a, b);
    let q = malloc(pool, 9 * MIB, b);
    free(q, b);
    for s in [a, b] {
        sync(s);
        destroy_stream(s);
    }
    // The next case starts from an empty pool.
    assert_eq!(trim(pool, 0), OK);
    q == p
}

#[test]
fn each_switch_decides_its_own_way_of_reuse_across_streams() {
    let _g = setup();
    let after_sync = |a: aclrtStream, _b: aclrtStream| sync(a);
    let after_event = |a: aclrtStream, b: aclrtStream| {
        let mut e = null_mut();
        // SAFETY: a valid out-pointer, then live handles.
        unsafe {
            assert_eq!(aclrtCreateEvent(&mut e), OK);
            assert_eq!(aclrtRecordEvent(e, a), OK);
            assert_eq!(aclrtStreamWaitEvent(b, e), OK);
            assert_eq!(aclrtDestroyEvent(e), OK);
        }
    };
    for switches in 0..8u32 {
        let (follow, opportunistic, internal) = (switches & 1, switches >> 1 & 1, switches >> 2);
        let pool = create();
        // Kept at the synchronize, so the reuse is the pool's.
        assert_eq!(
            set_bytes(pool, ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD, u64::MAX),
            OK
        );
        let events = ACL_RT_MEM_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES;
        assert_eq!(set_switch(pool, events, follow), OK);
        let opp = ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC;
        assert_eq!(set_switch(pool, opp, opportunistic), OK);
        let deps = ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES;
        assert_eq!(set_switch(pool, deps, internal), OK);
        let case = format!("follow {follow}, opportunistic {opportunistic}, internal {internal}");
        // Internal dependencies serve whatever the other two do not.
        assert_eq!(
            reused_after(pool, after_sync),
            opportunistic == 1 || internal == 1,
            "{case}: sync"
        );
        assert_eq!(
            reused_after(pool, after_event),
            follow == 1 || internal == 1,
            "{case}: event"
        );
        assert_eq!(
            reused_after(pool, |_, _| ()),
            internal == 1,
            "{case}: no ordering"
        );
        assert_eq!(destroy_pool(pool), OK);
    }
}

static RAN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

extern "C" fn slow_step(_: *mut c_void) {
    std::thread::sleep(Duration::from_millis(150));
    RAN.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

extern "C" fn read_step(out: *mut c_void) {
    let seen = RAN.load(std::sync::atomic::Ordering::SeqCst);
    // SAFETY: the test passes a live AtomicU32.
    unsafe { &*(out as *const std::sync::atomic::AtomicU32) }
        .store(seen + 1, std::sync::atomic::Ordering::SeqCst);
}

#[test]
fn an_internal_dependency_makes_the_allocating_stream_wait_for_the_freeing_one() {
    let _g = setup();
    let pool = create();
    let (a, b) = (stream(), stream());
    let p = malloc(pool, 9 * MIB, a);
    let before = RAN.load(std::sync::atomic::Ordering::SeqCst);
    // a's work that used the block is still running when a frees it.
    // SAFETY: a function that ignores its argument.
    assert_eq!(
        unsafe { aclrtLaunchHostFunc(a, Some(slow_step), null_mut()) },
        OK
    );
    free(p, a);
    // b gets a's memory without any ordering of its own ...
    let q = malloc(pool, 9 * MIB, b);
    assert_eq!(q, p, "the segment a freed, not a new one");
    // One 20 MiB segment (the pool's for 9 MiB), not two.
    assert_eq!(
        get(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT),
        20 * MIB as u64
    );
    // ... and work b queues after the allocation runs after a's.
    let seen = std::sync::atomic::AtomicU32::new(0);
    // SAFETY: `seen` outlives the synchronize below.
    let rc = unsafe { aclrtLaunchHostFunc(b, Some(read_step), &seen as *const _ as *mut c_void) };
    assert_eq!(rc, OK);
    sync(b);
    assert_eq!(
        seen.load(std::sync::atomic::Ordering::SeqCst),
        before + 2,
        "b's step saw a's slow step done"
    );
    free(q, b);
    finish(pool, &[a, b]);
}

extern "C" fn hold(_: *mut c_void) {
    std::thread::sleep(Duration::from_millis(100));
}

#[test]
fn a_free_on_another_stream_takes_effect_when_that_stream_reaches_it() {
    let _g = setup();
    let pool = create();
    let (a, b) = (stream(), stream());
    let p = malloc(pool, 3_000, a);
    // SAFETY: a function that ignores its argument.
    assert_eq!(
        unsafe { aclrtLaunchHostFunc(b, Some(hold), null_mut()) },
        OK
    );
    free(p, b);
    // b has not reached the free: the block is still allocated.
    let early = malloc(pool, 3_000, a);
    assert_ne!(early, p);
    refused(destroy_pool(pool), NOT_CLEARED, "still in use");
    refused(free_rc(p as *mut c_void, b), INVALID_PARAM, "already freed");
    sync(b);
    assert_eq!(
        malloc(pool, 3_000, a),
        p,
        "back to the stream it was allocated on"
    );
    free(p, a);
    free(early, a);
    finish(pool, &[a, b]);
}

#[test]
fn the_release_threshold_applies_at_a_synchronize_and_trim_to_at_once() {
    let _g = setup();
    let pool = create();
    let s = stream();
    assert_eq!(get(pool, ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD), 0);
    assert_eq!(
        set_bytes(
            pool,
            ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD,
            64 * MIB as u64
        ),
        OK
    );
    let p = malloc(pool, 9 * MIB, s);
    free(p, s);
    sync(s);
    let reserved = get(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT);
    assert!(
        reserved >= 9 * MIB as u64,
        "under the threshold: kept ({reserved})"
    );
    assert_eq!(
        set_bytes(pool, ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD, 0),
        OK
    );
    sync(s);
    assert_eq!(
        get(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT),
        0,
        "released"
    );
    // TrimTo takes priority over the threshold.
    assert_eq!(
        set_bytes(pool, ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD, u64::MAX),
        OK
    );
    let p = malloc(pool, 9 * MIB, s);
    let q = malloc(pool, 20 * MIB, s);
    free(q, s);
    let before = get(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT);
    assert_eq!(trim(pool, 0), OK);
    let after = get(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT);
    assert!(
        before - after >= 20 * MIB as u64 && after >= 9 * MIB as u64,
        "the free block goes, the used one stays: {before} -> {after}"
    );
    free(p, s);
    finish(pool, &[s]);
}

#[test]
fn attributes_read_back_with_defaults_peaks_reset_and_bad_values_refused() {
    let _g = setup();
    let pool = create();
    let s = stream();
    for attr in [
        ACL_RT_MEM_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES,
        ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC,
        ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
    ] {
        let mut v = 7u32;
        // SAFETY: a writable uint32_t.
        assert_eq!(
            unsafe { aclrtMemPoolGetAttr(pool, attr, (&mut v as *mut u32).cast()) },
            OK
        );
        assert_eq!(v, 1, "attribute {attr} defaults to on");
        assert_eq!(set_switch(pool, attr, 0), OK);
        assert_eq!(get(pool, attr), 0);
        refused(set_switch(pool, attr, 2), INVALID_PARAM, "0 or 1");
        assert_eq!(set_switch(pool, attr, 1), OK);
    }
    let p = malloc(pool, 5 * MIB, s);
    // The handle is the caching pool's: aclalloc's pool API reads it too.
    let mut allocated = 0usize;
    // SAFETY: a live pool and a valid out-pointer.
    let rc = unsafe {
        aclalloc::ffi::ext::pool::aclallocPoolMemoryAllocated(pool.cast(), &mut allocated)
    };
    assert_eq!(rc, OK);
    assert_eq!(
        allocated as u64,
        get(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT)
    );
    free(p, s);
    let used_high = get(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH);
    assert!(used_high >= 5 * MIB as u64);
    assert_eq!(get(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT), 0);
    assert!(get(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_HIGH) >= used_high);
    refused(
        set_bytes(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH, 5),
        INVALID_PARAM,
        "writing 0",
    );
    assert_eq!(set_bytes(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH, 0), OK);
    assert_eq!(get(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH), 0);
    refused(
        set_bytes(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT, 0),
        INVALID_PARAM,
        "read-only",
    );
    refused(set_bytes(pool, 99, 0), INVALID_PARAM, "aclrtMemPoolAttr");
    // SAFETY: NULL value pointers are refused before any access.
    unsafe {
        refused(
            aclrtMemPoolGetAttr(pool, ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH, null_mut()),
            INVALID_PARAM,
            "value",
        );
    }
    finish(pool, &[s]);
}

#[test]
fn max_size_bounds_the_pool() {
    let _g = setup();
    let pool = create_with(aclrtMemPoolProps {
        maxSize: 16 * MIB,
        ..common::mem_pool_props()
    });
    let s = stream();
    let p = malloc(pool, 10 * MIB, s);
    let mut q = null_mut();
    // SAFETY: a valid out-pointer.
    let rc = unsafe { aclrtMemPoolMallocAsync(&mut q, 10 * MIB, pool, s) };
    assert_eq!(rc, 207_001, "20 MiB do not fit a 16 MiB pool");
    assert!(q.is_null(), "nothing written on failure");
    free(p, s);
    finish(pool, &[s]);
}

#[test]
fn a_max_size_below_a_segment_still_serves_what_fits() {
    let _g = setup();
    // Smaller than the pool's 2 MiB segments for small blocks.
    let pool = create_with(aclrtMemPoolProps {
        maxSize: MIB,
        ..common::mem_pool_props()
    });
    let s = stream();
    let a = malloc(pool, 4000, s);
    let b = malloc(pool, 3000, s);
    let c = malloc(pool, 1000 * 1000, s);
    assert_eq!(
        get(pool, ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT),
        MIB as u64
    );
    let mut q = null_mut();
    // SAFETY: a valid out-pointer.
    let rc = unsafe { aclrtMemPoolMallocAsync(&mut q, 64 * 1024, pool, s) };
    assert_eq!(rc, 207_001, "the 1 MiB are used up");
    assert!(q.is_null());
    for p in [a, b, c] {
        free(p, s);
    }
    finish(pool, &[s]);
}

#[test]
fn props_canns_refuses_are_refused_naming_the_field() {
    let _g = setup();
    let mut pool = null_mut();
    let mut reserved = common::mem_pool_props();
    reserved.reserved[31] = 1;
    for (p, field) in [
        (
            aclrtMemPoolProps {
                allocType: 1,
                ..common::mem_pool_props()
            },
            "allocType",
        ),
        (
            aclrtMemPoolProps {
                handleType: 2,
                ..common::mem_pool_props()
            },
            "handleType",
        ),
        (
            aclrtMemPoolProps {
                location: aclrtMemLocation {
                    id: 0,
                    r#type: ACL_MEM_LOCATION_TYPE_HOST,
                },
                ..common::mem_pool_props()
            },
            "location.type",
        ),
        (reserved, "reserved"),
    ] {
        // SAFETY: valid pointers.
        refused(
            unsafe { aclrtMemPoolCreate(&mut pool, &p) },
            INVALID_PARAM,
            field,
        );
        assert!(pool.is_null(), "nothing written for {field}");
    }
    // SAFETY: NULL pointers are refused before any access.
    unsafe {
        refused(
            aclrtMemPoolCreate(&mut pool, std::ptr::null()),
            INVALID_PARAM,
            "poolProps",
        );
        refused(
            aclrtMemPoolCreate(null_mut(), &common::mem_pool_props()),
            INVALID_PARAM,
            "memPool",
        );
    }
}

/// A thread with no current context: refused with CANN's code, and the
/// message is the call's own (no inner device query leaves one), for
/// CANN's pools and aclalloc's.
#[test]
fn a_thread_without_a_context_is_refused_with_one_message() {
    let _g = setup();
    std::thread::spawn(|| {
        let mut pool = null_mut();
        // SAFETY: valid pointers.
        let rc = unsafe { aclrtMemPoolCreate(&mut pool, &common::mem_pool_props()) };
        assert_eq!(rc, 107_002);
        let text = message();
        assert!(text.starts_with("aclrtMemPoolCreate failed"), "{text:?}");
        assert!(!text.contains("aclrtGetMemInfo"), "{text:?}");
        assert!(pool.is_null());
        // aclalloc's own pools grow the same way, and say the same.
        let mut desc = null_mut();
        // SAFETY: NULL config (the defaults), valid out-pointers.
        let rc = unsafe {
            aclalloc::ffi::ext::pool::lifecycle::aclallocPoolCreate(
                std::ptr::null(),
                &mut pool,
                &mut desc,
            )
        };
        assert_eq!(rc, 107_002);
        let text = message();
        assert!(text.starts_with("aclallocPoolCreate failed"), "{text:?}");
        assert!(!text.contains("aclrtGetMemInfo"), "{text:?}");
    })
    .join()
    .unwrap();
}

#[test]
fn bad_pointers_pools_and_streams_are_refused_and_nothing_is_lost() {
    let _g = setup();
    let pool = create();
    let s = stream();
    let p = malloc(pool, 4_096, s);
    let mut q = null_mut();
    // SAFETY: valid or NULL pointers, each refused or served as documented.
    unsafe {
        refused(
            aclrtMemPoolMallocAsync(&mut q, 0, pool, s),
            INVALID_PARAM,
            "size",
        );
        refused(
            aclrtMemPoolMallocAsync(&mut q, 64, null_mut(), s),
            INVALID_PARAM,
            "memPool",
        );
        refused(
            aclrtMemPoolMallocAsync(null_mut(), 64, pool, s),
            INVALID_PARAM,
            "ptr",
        );
        refused(
            aclrtMemPoolMallocAsync(&mut q, 64, 0x1234 as aclrtMemPool, s),
            INVALID_PARAM,
            "memPool",
        );
        let mut dev = null_mut();
        assert_eq!(aclrtMalloc(&mut dev, 4_096, ACL_MEM_MALLOC_HUGE_FIRST), OK);
        refused(free_rc(dev, s), INVALID_PARAM, "ptr");
        assert_eq!(aclrtFree(dev), OK);
    }
    refused(free_rc(null_mut(), s), INVALID_PARAM, "ptr");
    refused(destroy_pool(pool), NOT_CLEARED, "still in use");
    // A destroyed stream.
    let dead = stream();
    destroy_stream(dead);
    refused(free_rc(p as *mut c_void, dead), INVALID_PARAM, "stream");
    free(p, s);
    refused(free_rc(p as *mut c_void, s), INVALID_PARAM, "already freed");
    finish(pool, &[s]);
    // A destroyed pool.
    let s = stream();
    // SAFETY: a valid out-pointer.
    unsafe {
        refused(
            aclrtMemPoolMallocAsync(&mut q, 64, pool, s),
            INVALID_PARAM,
            "memPool",
        );
    }
    refused(destroy_pool(pool), INVALID_PARAM, "memPool");
    refused(trim(pool, 0), INVALID_PARAM, "memPool");
    destroy_stream(s);
}

/// A pool destroyed through aclalloc's own API (its handle is a caching
/// pool's) is dead to CANN's functions too, and nothing of it is kept.
#[test]
fn a_pool_destroyed_through_aclallocs_api_is_refused_by_canns() {
    let _g = setup();
    let pool = create();
    let rc = aclalloc::ffi::ext::pool::lifecycle::aclallocPoolDestroy(pool.cast());
    assert_eq!(rc, OK);
    let s = stream();
    let mut p = null_mut();
    // SAFETY: a valid out-pointer.
    let rc = unsafe { aclrtMemPoolMallocAsync(&mut p, 64, pool, s) };
    refused(rc, INVALID_PARAM, "memPool");
    refused(destroy_pool(pool), INVALID_PARAM, "memPool");
    refused(destroy_pool(pool), INVALID_PARAM, "memPool");
    destroy_stream(s);
}

/// A free names only the address: it finds the block's pool whichever pool
/// the thread used last, and an address inside a block is no block.
#[test]
fn a_free_finds_its_pool_among_several() {
    let _g = setup();
    let (one, two) = (create(), create());
    let s = stream();
    let a = malloc(one, 5_000, s);
    let b = malloc(two, 5_000, s);
    // The thread allocated from `two` last.
    refused(free_rc((a + 512) as *mut c_void, s), INVALID_PARAM, "ptr");
    free(a, s);
    refused(free_rc(a as *mut c_void, s), INVALID_PARAM, "already freed");
    free(b, s);
    // Freed in its own pool: each pool takes its block back.
    assert_eq!(malloc(one, 5_000, s), a);
    assert_eq!(malloc(two, 5_000, s), b);
    free(a, s);
    free(b, s);
    finish(one, &[]);
    finish(two, &[s]);
}

/// A second free of a block whose free on another stream is running is
/// refused: the block stays a pending free until the pool has it back, so
/// no moment between the stream reaching the free and the pool taking the
/// block lets a second free through.
#[test]
fn a_second_free_is_refused_while_the_first_runs_on_another_stream() {
    let _serial = setup();
    let pool = create();
    let (a, b) = (stream(), stream());
    for i in 0..50_000u32 {
        let p = malloc(pool, 512, a) as *mut c_void;
        assert_eq!(free_rc(p, b), OK);
        // Races the freeing stream, which runs the free now: each delay
        // from none to a few microseconds, so some land inside its run.
        for _ in 0..i % 400 {
            std::hint::spin_loop();
        }
        assert_eq!(
            free_rc(p, b),
            INVALID_PARAM,
            "a second free was accepted (iteration {i})"
        );
        sync(b);
    }
    finish(pool, &[a, b]);
}
