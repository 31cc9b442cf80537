//! `aclallocPoolRecordHistory` and the history in `aclallocPoolSnapshot`,
//! called as C calls them.

mod common;

use aclalloc::base::error::{ACL_ERROR_BAD_ALLOC, ACL_ERROR_INVALID_PARAM, ACL_SUCCESS};
use aclalloc::ffi::cann::runtime::{aclInit, aclrtSetDevice};
use aclalloc::ffi::ext::pool::*;
use aclalloc::pool::PoolStats;
use common::message;
use serde_json::Value;
use std::collections::HashMap;
use std::ffi::c_void;
use std::ptr::{null, null_mut};

fn create() -> aclallocPool {
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| assert_eq!(unsafe { aclInit(null()) }, ACL_SUCCESS));
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    let (mut pool, mut desc) = (null_mut(), null_mut());
    assert_eq!(
        unsafe { aclallocPoolCreate(null(), &mut pool, &mut desc) },
        ACL_SUCCESS
    );
    pool
}

fn snapshot(pool: aclallocPool) -> Value {
    let mut len = 0;
    assert_eq!(
        unsafe { aclallocPoolSnapshot(pool, null_mut(), 0, &mut len) },
        ACL_SUCCESS
    );
    let mut buf = vec![0u8; len + 1];
    assert_eq!(
        unsafe { aclallocPoolSnapshot(pool, buf.as_mut_ptr().cast(), buf.len(), null_mut()) },
        ACL_SUCCESS
    );
    serde_json::from_slice(&buf[..len]).unwrap()
}

fn stats(pool: aclallocPool) -> PoolStats {
    let mut s = PoolStats::default();
    assert_eq!(unsafe { aclallocPoolGetStats(pool, &mut s) }, ACL_SUCCESS);
    s
}

fn trace(json: &Value) -> Vec<Value> {
    json["device_traces"][0].as_array().unwrap().clone()
}

#[test]
fn recorded_events_add_up_to_the_statistics() {
    let pool = create();
    assert_eq!(aclallocPoolRecordHistory(pool, 10_000), ACL_SUCCESS);
    let mut live = Vec::new();
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for i in 0..600 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if live.len() < 40 && (x % 3 != 0 || live.is_empty()) {
            let size = [100, 3000, 700 << 10, 5 << 20][(x >> 8) as usize % 4] + i;
            let b = aclallocPoolAlloc(pool, size);
            assert!(!b.is_null());
            live.push(b);
        } else {
            let b = live.swap_remove((x >> 16) as usize % live.len());
            aclallocPoolFree(pool, b);
        }
    }
    let json = snapshot(pool);
    let events = trace(&json);
    assert_eq!(json["history"]["entries"], events.len());
    assert_eq!(json["history"]["dropped"], 0);
    let s = stats(pool);
    let (mut allocated, mut requested, mut reserved, mut peak) = (0i64, 0i64, 0i64, 0i64);
    let mut open: HashMap<String, i64> = HashMap::new();
    let mut last_time = 0;
    for e in &events {
        let t = e["time_us"].as_u64().unwrap();
        assert!(t >= last_time, "events out of order");
        last_time = t;
        let size = e["size"].as_i64().unwrap();
        let addr = e["addr"].as_str().unwrap().to_string();
        match e["action"].as_str().unwrap() {
            "alloc" => {
                let block = e["block_size"].as_i64().unwrap();
                assert!(open.insert(addr, block).is_none());
                allocated += block;
                requested += size;
                peak = peak.max(allocated);
            }
            "free_completed" => {
                allocated -= open.remove(&addr).expect("a free of a live block");
                requested -= size;
            }
            "segment_alloc" => reserved += size,
            "segment_free" => reserved -= size,
            "free_requested" => assert!(open.contains_key(&addr)),
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!(allocated, s.allocated_bytes[0].current);
    assert_eq!(requested, s.requested_bytes[0].current);
    assert_eq!(reserved, s.reserved_bytes[0].current);
    assert_eq!(peak, s.allocated_bytes[0].peak);
    assert_eq!(open.len() as i64, s.allocation[0].current);
    for b in live {
        aclallocPoolFree(pool, b);
    }
    assert_eq!(aclallocPoolDestroy(pool), ACL_SUCCESS);
}

#[test]
fn the_ring_wraps_and_counts_what_it_dropped() {
    let pool = create();
    assert_eq!(aclallocPoolRecordHistory(pool, 4), ACL_SUCCESS);
    let first = aclallocPoolAlloc(pool, 1000); // segment_alloc + alloc
    aclallocPoolFree(pool, first); // free_requested + free_completed
    for _ in 0..10 {
        let b = aclallocPoolAlloc(pool, 1000);
        aclallocPoolFree(pool, b);
    }
    let json = snapshot(pool);
    let actions: Vec<String> = trace(&json)
        .iter()
        .map(|e| e["action"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        actions,
        [
            "free_completed",
            "alloc",
            "free_requested",
            "free_completed"
        ],
        "the newest four, oldest first"
    );
    assert_eq!(json["history"]["dropped"], 4 + 10 * 3 - 4);
    assert_eq!(json["history"]["max_entries"], 4);
    assert_eq!(aclallocPoolDestroy(pool), ACL_SUCCESS);
}

#[test]
fn zero_switches_off_and_re_enabling_clears() {
    let pool = create();
    let b = aclallocPoolAlloc(pool, 4096);
    assert!(trace(&snapshot(pool)).is_empty(), "off by default");
    assert_eq!(snapshot(pool)["history"]["enabled"], false);
    assert_eq!(aclallocPoolRecordHistory(pool, 100), ACL_SUCCESS);
    aclallocPoolFree(pool, b);
    assert_eq!(trace(&snapshot(pool)).len(), 2);
    assert_eq!(aclallocPoolRecordHistory(pool, 100), ACL_SUCCESS);
    assert!(trace(&snapshot(pool)).is_empty());
    assert_eq!(aclallocPoolRecordHistory(pool, 0), ACL_SUCCESS);
    let b = aclallocPoolAlloc(pool, 4096);
    aclallocPoolFree(pool, b);
    let json = snapshot(pool);
    assert!(trace(&json).is_empty());
    assert_eq!(json["history"]["enabled"], false);
    assert_eq!(aclallocPoolDestroy(pool), ACL_SUCCESS);
}

#[test]
fn bad_handles_and_impossible_sizes_are_refused_with_a_message() {
    assert_eq!(
        aclallocPoolRecordHistory(0x7777_0000 as *mut c_void, 10),
        ACL_ERROR_INVALID_PARAM
    );
    assert!(
        message().starts_with("aclallocPoolRecordHistory failed."),
        "{}",
        message()
    );
    let pool = create();
    assert_eq!(aclallocPoolRecordHistory(pool, 10), ACL_SUCCESS);
    let b = aclallocPoolAlloc(pool, 4096);
    assert_eq!(
        aclallocPoolRecordHistory(pool, usize::MAX / 16),
        ACL_ERROR_BAD_ALLOC
    );
    let m = message();
    assert!(
        m.contains("aclallocPoolRecordHistory") && m.contains("ask for fewer events"),
        "{m}"
    );
    assert_eq!(
        trace(&snapshot(pool)).len(),
        2,
        "the recording went on unchanged"
    );
    aclallocPoolFree(pool, b);
    assert_eq!(aclallocPoolDestroy(pool), ACL_SUCCESS);
    assert_eq!(aclallocPoolRecordHistory(pool, 10), ACL_ERROR_INVALID_PARAM);
}
