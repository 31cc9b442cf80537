//! The pool's allocation history through the Rust API: what is recorded, in
//! which order, how it adds up against the statistics, the ring's bound, and
//! the page `aclalloc viz` builds from it.

mod history_support;

use aclalloc::history::Action;
use aclalloc::pool::{HostMemory, Limit, Pool, PoolConfig, STAT_ALL};
use history_support::{inference_session, number, peak_from_trace, MIB};
use serde_json::Value;
use std::collections::HashMap;

fn pool(limit: usize) -> Pool {
    let config = PoolConfig {
        limit: Limit::Bytes(limit),
        ..PoolConfig::default()
    };
    Pool::new(config, HostMemory::new(16 << 30)).unwrap()
}

#[test]
fn events_are_in_order_and_add_up_to_the_statistics() {
    let pool = pool(6 << 30);
    pool.record_history(1 << 20).unwrap();
    let ops = inference_session(&pool, 40);
    let h = pool.history();
    assert_eq!(h.dropped, 0);
    assert_eq!(h.max_entries, 1 << 20);
    assert!(
        h.events.len() > ops,
        "{} events for {ops} operations",
        h.events.len()
    );
    let (mut allocated, mut requested, mut reserved, mut peak) = (0i64, 0i64, 0i64, 0i64);
    let mut live: HashMap<usize, (usize, usize, usize)> = HashMap::new();
    let mut segments: HashMap<usize, usize> = HashMap::new();
    let mut requested_free: Option<usize> = None;
    let mut ooms = 0;
    for (i, e) in h.events.iter().enumerate() {
        if i > 0 {
            assert!(
                e.time_us >= h.events[i - 1].time_us,
                "time goes back at {i}"
            );
        }
        assert_eq!(e.device, 0);
        match e.action {
            Action::Alloc => {
                assert!(live
                    .insert(e.addr, (e.size, e.block_size, e.stream))
                    .is_none());
                assert!(e.block_size >= e.size && e.block_size % 512 == 0);
                let (&start, &size) = segments
                    .range_lookup(e.addr)
                    .expect("an allocation lies in a live segment");
                assert!(e.addr + e.block_size <= start + size);
                allocated += e.block_size as i64;
                requested += e.size as i64;
                peak = peak.max(allocated);
            }
            Action::FreeRequested => {
                assert_eq!(live.get(&e.addr), Some(&(e.size, e.block_size, e.stream)));
                requested_free = Some(e.addr);
            }
            Action::FreeCompleted => {
                assert_eq!(
                    requested_free.take(),
                    Some(e.addr),
                    "completed right after requested"
                );
                assert_eq!(live.remove(&e.addr), Some((e.size, e.block_size, e.stream)));
                allocated -= e.block_size as i64;
                requested -= e.size as i64;
            }
            Action::SegmentAlloc => {
                assert!(segments.insert(e.addr, e.size).is_none());
                reserved += e.size as i64;
            }
            Action::SegmentFree => {
                assert_eq!(segments.remove(&e.addr), Some(e.size));
                assert!(
                    live.keys().all(|&a| a < e.addr || a >= e.addr + e.size),
                    "a segment with live blocks was freed"
                );
                reserved -= e.size as i64;
            }
            Action::Oom => {
                ooms += 1;
                assert_eq!(e.size, 64 << 30);
            }
        }
    }
    let s = pool.stats();
    assert_eq!(allocated, s.allocated_bytes[STAT_ALL].current);
    assert_eq!(requested, s.requested_bytes[STAT_ALL].current);
    assert_eq!(reserved, s.reserved_bytes[STAT_ALL].current);
    assert_eq!(peak, s.allocated_bytes[STAT_ALL].peak);
    assert_eq!(live.len() as i64, s.allocation[STAT_ALL].current);
    assert_eq!(ooms, s.num_ooms);
    let streams: std::collections::HashSet<usize> = h.events.iter().map(|e| e.stream).collect();
    assert_eq!(streams.len(), 3, "each stream's events carry its handle");
}

/// Lookup of the entry whose key is the greatest at or below `addr`.
trait RangeLookup {
    fn range_lookup(&self, addr: usize) -> Option<(&usize, &usize)>;
}

impl RangeLookup for HashMap<usize, usize> {
    fn range_lookup(&self, addr: usize) -> Option<(&usize, &usize)> {
        self.iter()
            .filter(|(&k, _)| k <= addr)
            .max_by_key(|(&k, _)| k)
    }
}

#[test]
fn a_full_ring_keeps_the_newest_events_and_counts_the_dropped() {
    let pool = pool(1 << 30);
    pool.record_history(10).unwrap();
    let a = pool.malloc(1000).unwrap().get(); // segment_alloc, alloc
    pool.free(a).unwrap(); // free_requested, free_completed
    let mut last = 0;
    for i in 0..20 {
        let b = pool.malloc(2000 + i * 512).unwrap().get();
        pool.free(b).unwrap();
        last = b;
    }
    let h = pool.history();
    assert_eq!(h.events.len(), 10);
    assert_eq!(h.dropped, 4 + 20 * 3 - 10);
    let tail: Vec<Action> = h.events.iter().rev().take(3).map(|e| e.action).collect();
    assert_eq!(
        tail,
        [Action::FreeCompleted, Action::FreeRequested, Action::Alloc]
    );
    assert_eq!(h.events.last().unwrap().addr, last);
    assert_eq!(h.events.last().unwrap().block_size, 2000 + 19 * 512 + 48);
}

#[test]
fn recording_is_off_by_default_and_every_call_starts_afresh() {
    let pool = pool(1 << 30);
    let a = pool.malloc(1000).unwrap().get();
    assert!(pool.history().events.is_empty());
    assert_eq!(pool.history().max_entries, 0);
    pool.record_history(100).unwrap();
    pool.free(a).unwrap();
    assert_eq!(pool.history().events.len(), 2);
    pool.record_history(100).unwrap();
    assert!(pool.history().events.is_empty(), "re-enabling clears");
    let b = pool.malloc(1000).unwrap().get();
    pool.record_history(0).unwrap();
    pool.free(b).unwrap();
    assert!(pool.history().events.is_empty(), "0 switches off");
    assert!(
        pool.record_history(usize::MAX / 8).is_err(),
        "an impossible ring is refused"
    );
}

#[test]
fn an_out_of_memory_failure_is_recorded_with_the_room_left() {
    let pool = pool(8 * MIB);
    pool.record_history(100).unwrap();
    let a = pool.malloc(3 * MIB).unwrap().get(); // a 4 MiB segment (oversize of 20 MiB segments is refused)
    assert!(pool.malloc(7 * MIB).is_err());
    let h = pool.history();
    let oom = h.events.iter().find(|e| e.action == Action::Oom).unwrap();
    assert_eq!(oom.size, 7 * MIB);
    assert_eq!(oom.addr, 8 * MIB - pool.memory_reserved());
    pool.free(a).unwrap();
}

fn snapshot_of_a_session() -> (Pool, Value) {
    let pool = pool(6 << 30);
    pool.record_history(1 << 20).unwrap();
    inference_session(&pool, 24);
    let json: Value = serde_json::from_str(&pool.snapshot_json()).unwrap();
    (pool, json)
}

#[test]
fn the_snapshot_carries_the_history_in_pytorch_shape() {
    let (pool, json) = snapshot_of_a_session();
    assert_eq!(json["version"], 2);
    let trace = json["device_traces"][0].as_array().unwrap();
    assert_eq!(trace.len(), pool.history().events.len());
    for e in trace {
        let action = e["action"].as_str().unwrap();
        assert!([
            "alloc",
            "free_requested",
            "free_completed",
            "segment_alloc",
            "segment_free",
            "oom"
        ]
        .contains(&action));
        assert!(e["addr"].as_str().unwrap().starts_with("0x"));
        assert!(e["stream"].as_str().unwrap().starts_with("0x"));
        assert!(e["time_us"].is_u64() && e["size"].is_u64());
        assert_eq!(
            e["block_size"].is_u64(),
            !action.contains("segment") && action != "oom"
        );
    }
    assert_eq!(
        json["history"],
        serde_json::json!({"enabled": true, "max_entries": 1 << 20, "entries": trace.len(), "dropped": 0})
    );
    assert_eq!(peak_from_trace(&json), pool.max_memory_allocated() as u64);
    // The live blocks of the segments are the allocations the trace leaves live.
    let mut live: HashMap<u64, u64> = HashMap::new();
    for e in trace {
        match e["action"].as_str().unwrap() {
            "alloc" => {
                live.insert(number(&e["addr"]), e["block_size"].as_u64().unwrap());
            }
            "free_completed" => {
                live.remove(&number(&e["addr"]));
            }
            _ => {}
        }
    }
    let mut blocks = HashMap::new();
    for s in json["segments"].as_array().unwrap() {
        assert_eq!(s["device"], 0);
        for b in s["blocks"].as_array().unwrap() {
            if b["state"] == "active_allocated" {
                blocks.insert(number(&b["address"]), b["size"].as_u64().unwrap());
            }
        }
    }
    assert_eq!(blocks, live);
}

fn embedded_data(page: &str) -> Value {
    let start = page
        .find("<script type=\"application/json\" id=\"aclalloc-data\">")
        .unwrap();
    let rest = &page[start..];
    let body = &rest[rest.find('>').unwrap() + 1..rest.find("</script>").unwrap()];
    serde_json::from_str(body).unwrap()
}

#[test]
fn the_page_of_a_recorded_session_is_self_contained_and_complete() {
    let (pool, json) = snapshot_of_a_session();
    let page = aclalloc_viz::page(&json, "session <1>").unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    for needle in [
        "id=\"timeline-canvas\"",
        "id=\"segments-canvas\"",
        "id=\"largest\"",
        "id=\"faults\"",
        "window.onerror",
        "session &lt;1&gt;",
    ] {
        assert!(page.contains(needle), "the page lacks {needle}");
    }
    // Nothing is loaded from anywhere.
    for banned in [
        "http://",
        "https://",
        "<script src",
        "<link",
        "@import",
        "url(",
    ] {
        assert!(!page.contains(banned), "the page contains {banned}");
    }
    assert_eq!(
        page.matches("</script>").count(),
        3,
        "the data cannot end its element"
    );
    let data = embedded_data(&page);
    let d = &data["devices"][0];
    let trace = json["device_traces"][0].as_array().unwrap();
    let drawn = trace
        .iter()
        .filter(|e| e["action"] != "free_requested")
        .count();
    assert_eq!(d["t"].as_array().unwrap().len(), drawn);
    let allocs = trace.iter().filter(|e| e["action"] == "alloc").count();
    let a = &d["allocs"];
    assert_eq!(a["size"].as_array().unwrap().len(), allocs);
    assert_eq!(d["streams"].as_array().unwrap().len(), 3);
    // Every allocation is placed in a segment, and the sizes of those live
    // at the end are the pool's allocated bytes.
    let (mut live_bytes, n) = (0, allocs);
    for i in 0..n {
        assert!(
            a["seg"][i].as_i64().unwrap() >= 0,
            "allocation {i} has no segment"
        );
        if a["end"][i] == -1 {
            live_bytes += a["size"][i].as_u64().unwrap();
        }
    }
    assert_eq!(live_bytes, pool.memory_allocated() as u64);
    // The page's own peak, from its intervals, is the pool's.
    let (mut events, mut now, mut peak) = (vec![0i64; drawn], 0i64, 0i64);
    for i in 0..n {
        let size = a["size"][i].as_i64().unwrap();
        events[a["start"][i].as_u64().unwrap() as usize] += size;
        if let Some(end) = a["end"][i].as_u64() {
            events[end as usize] -= size;
        }
    }
    for delta in events {
        now += delta;
        peak = peak.max(now);
    }
    assert_eq!(peak as usize, pool.max_memory_allocated());
}

#[test]
fn aclalloc_viz_writes_the_page_and_explains_bad_input() {
    let dir = std::env::temp_dir().join(format!("aclalloc-viz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (_pool, json) = snapshot_of_a_session();
    let input = dir.join("pool.json");
    std::fs::write(&input, json.to_string()).unwrap();
    let output = dir.join("page.html");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_aclalloc"))
        .arg("viz")
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let page = std::fs::read_to_string(&output).unwrap();
    assert_eq!(page, aclalloc_viz::page(&json, "pool.json").unwrap());
    // Without -o, the page goes next to the snapshot.
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_aclalloc"))
        .arg("viz")
        .arg(&input)
        .output()
        .unwrap();
    assert!(run.status.success());
    assert!(dir.join("pool.html").is_file());
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\"foo\": 1}").unwrap();
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_aclalloc"))
        .arg("viz")
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("neither \"segments\" nor \"device_traces\""),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
