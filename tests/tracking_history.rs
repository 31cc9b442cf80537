//! The tracking layer's history (`aclallocTrackingRecordHistory`): what a
//! runtime does through the tracking callbacks (alloc, getAddrFromBlock,
//! free) is recorded with the addresses the user's allocator gave, in
//! order, on the stream's device; the sizes add up to the layer's own
//! statistics; the ring keeps the newest events and counts the others; the
//! JSON snapshot carries them as `device_traces`.
//!
//! The recorder is process-wide: the tests take turns (`TURN`).

mod common;

use aclalloc::base::error::{ACL_ERROR_BAD_ALLOC, ACL_SUCCESS};
use aclalloc::ffi::cann::runtime::aclrtSetDevice;
use aclalloc::ffi::ext::tracking::{aclallocTrackingRecordHistory, aclallocTrackingWriteSnapshot};
use aclalloc::{tracking, AllocatorObj, Callbacks};
use common::tracking::tracked_callbacks;
use serde_json::Value;
use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

static TURN: Mutex<()> = Mutex::new(());

/// The user's allocator: hands out boxed blocks whose addresses are taken
/// from a counter (so every address is known to the test), or NULL while
/// `failing`.
struct Bump {
    next: AtomicUsize,
    failing: AtomicBool,
}

struct Block {
    addr: usize,
}

unsafe extern "C" fn bump_alloc(obj: *mut c_void, size: usize) -> *mut c_void {
    let a = unsafe { &*(obj as *const Bump) };
    if a.failing.load(Ordering::Relaxed) {
        return std::ptr::null_mut();
    }
    let addr = a
        .next
        .fetch_add(size.next_multiple_of(512), Ordering::Relaxed);
    Box::into_raw(Box::new(Block { addr })).cast()
}
unsafe extern "C" fn bump_free(_obj: *mut c_void, block: *mut c_void) {
    drop(unsafe { Box::from_raw(block as *mut Block) });
}
unsafe extern "C" fn bump_get_addr(block: *mut c_void) -> *mut c_void {
    unsafe { (*(block as *const Block)).addr as *mut c_void }
}

/// A tracked allocator on `stream`, as a runtime gets it from
/// `aclrtAllocatorGetByStream` with tracking on; and the user's object.
fn tracked(stream: usize, base: usize) -> (Callbacks, &'static Bump) {
    let user: &'static Bump = Box::leak(Box::new(Bump {
        next: AtomicUsize::new(base),
        failing: AtomicBool::new(false),
    }));
    let callbacks = Callbacks {
        obj: AllocatorObj::new(user as *const Bump as *mut c_void).unwrap(),
        alloc: bump_alloc,
        free: bump_free,
        alloc_advise: None,
        get_addr_from_block: bump_get_addr,
    };
    (tracked_callbacks(stream, callbacks), user)
}

fn alloc(c: &Callbacks, size: usize) -> *mut c_void {
    unsafe { (c.alloc)(c.obj.as_ptr(), size) }
}
fn address(c: &Callbacks, block: *mut c_void) -> usize {
    unsafe { (c.get_addr_from_block)(block) as usize }
}
fn free(c: &Callbacks, block: *mut c_void) {
    unsafe { (c.free)(c.obj.as_ptr(), block) }
}

fn snapshot(name: &str) -> Value {
    let path = std::env::temp_dir().join(format!(
        "aclalloc-tracking-history-{}-{name}.json",
        std::process::id()
    ));
    let c_path = CString::new(path.to_str().unwrap()).unwrap();
    assert_eq!(
        unsafe { aclallocTrackingWriteSnapshot(c_path.as_ptr()) },
        ACL_SUCCESS
    );
    let json = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let _ = std::fs::remove_file(&path);
    json
}

fn hex(v: usize) -> String {
    format!("{v:#x}")
}

#[test]
fn events_follow_the_runtime_and_add_up_to_the_tracking_statistics() {
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    // The host runtime has one device unless told otherwise; device 0 is
    // current on this thread.
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    let stream = 0x7E57_0001_0000;
    let (c, user) = tracked(stream, 0x1_0000_0000);
    assert_eq!(aclallocTrackingRecordHistory(10_000), ACL_SUCCESS);
    let mut live: Vec<(*mut c_void, usize, usize)> = Vec::new();
    let mut expected: Vec<(&str, usize, usize)> = Vec::new();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..400 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if live.len() < 20 && (x % 3 != 0 || live.is_empty()) {
            let size = 1 + (x >> 20) as usize % 100_000;
            let block = alloc(&c, size);
            let addr = address(&c, block);
            live.push((block, addr, size));
            expected.push(("alloc", addr, size));
        } else {
            let (block, addr, size) = live.swap_remove((x >> 16) as usize % live.len());
            free(&c, block);
            expected.push(("free_requested", addr, size));
            expected.push(("free_completed", addr, size));
        }
    }
    for (block, addr, size) in live.drain(..) {
        free(&c, block);
        expected.push(("free_requested", addr, size));
        expected.push(("free_completed", addr, size));
    }
    // A block freed before anyone asked its address is recorded too, at
    // address 0 (unknown).
    let unaddressed = alloc(&c, 77);
    free(&c, unaddressed);
    expected.push(("alloc", 0, 77));
    expected.push(("free_requested", 0, 77));
    expected.push(("free_completed", 0, 77));
    // A failed allocation is an oom event with the request.
    user.failing.store(true, Ordering::Relaxed);
    assert!(alloc(&c, 4242).is_null());
    expected.push(("oom", 0, 4242));

    let json = snapshot("events");
    assert_eq!(json["history"]["enabled"], true);
    assert_eq!(json["history"]["max_entries"], 10_000);
    assert_eq!(json["history"]["dropped"], 0);
    let trace = json["device_traces"][0].as_array().unwrap();
    assert_eq!(json["history"]["entries"], trace.len());
    let got: Vec<(&str, usize, usize)> = trace
        .iter()
        .map(|e| {
            let addr = e["addr"].as_str().unwrap();
            (
                e["action"].as_str().unwrap(),
                usize::from_str_radix(addr.trim_start_matches("0x"), 16).unwrap(),
                e["size"].as_u64().unwrap() as usize,
            )
        })
        .collect();
    assert_eq!(got, expected, "the events, in the order of the calls");
    let mut last = 0;
    for e in trace {
        assert_eq!(e["stream"], hex(stream).as_str(), "{e}");
        let t = e["time_us"].as_u64().unwrap();
        assert!(t >= last, "times never go backwards");
        last = t;
    }

    // Against the layer's statistics: everything allocated was recorded, and the running total peaks where they say.
    let stats = tracking::allocator_stats(user as *const Bump as *mut c_void).unwrap();
    let (mut allocated, mut freed, mut current, mut peak) = (0i64, 0i64, 0i64, 0i64);
    for &(action, _, size) in &got {
        match action {
            "alloc" => {
                allocated += size as i64;
                current += size as i64;
                peak = peak.max(current);
            }
            "free_completed" => {
                freed += size as i64;
                current -= size as i64;
            }
            _ => {}
        }
    }
    assert_eq!(allocated, stats.allocated_bytes.allocated);
    assert_eq!(freed, stats.allocated_bytes.freed);
    assert_eq!(current, stats.allocated_bytes.current);
    assert_eq!(peak, stats.allocated_bytes.peak);
    assert_eq!(stats.num_alloc_failures, 1);
    assert_eq!(aclallocTrackingRecordHistory(0), ACL_SUCCESS);
}

#[test]
fn a_full_ring_keeps_the_newest_events_and_off_records_nothing() {
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let stream = 0x7E57_0002_0000;
    let (c, _) = tracked(stream, 0x2_0000_0000);
    assert_eq!(aclallocTrackingRecordHistory(5), ACL_SUCCESS);
    let mut last_addr = 0;
    for size in 1..=10 {
        let block = alloc(&c, size * 1000);
        last_addr = address(&c, block);
        free(&c, block);
    }
    let h = tracking::history();
    assert_eq!(h.max_entries, 5);
    assert_eq!(h.dropped, 25, "30 events, 5 kept");
    let kept: Vec<&str> = h.events.iter().map(|e| e.action.name()).collect();
    assert_eq!(
        kept,
        [
            "free_requested",
            "free_completed",
            "alloc",
            "free_requested",
            "free_completed"
        ]
    );
    assert!(h
        .events
        .iter()
        .skip(2)
        .all(|e| e.addr == last_addr && e.size == 10_000));

    // Off: nothing is recorded, and the snapshot says so.
    assert_eq!(aclallocTrackingRecordHistory(0), ACL_SUCCESS);
    let block = alloc(&c, 64);
    address(&c, block);
    free(&c, block);
    let json = snapshot("off");
    assert_eq!(json["history"]["enabled"], false);
    assert_eq!(json["device_traces"], serde_json::json!([[]]));
    // An impossible ring is refused, and changes nothing.
    assert_eq!(
        aclallocTrackingRecordHistory(usize::MAX / 2),
        ACL_ERROR_BAD_ALLOC
    );
    assert!(aclalloc::take_recent_error_messages()
        .unwrap_or_default()
        .contains("ask for fewer events"));
    assert_eq!(tracking::history().max_entries, 0);
}
