//! The JSON snapshot, in the shape of the pool's (PyTorch's
//! `memory_snapshot`). The tracking layer only sees blocks, so every live
//! block is its own segment of type `user` (its `device`: its stream's as
//! the history learnt it, else 0); `allocators` carries each allocator's
//! statistics, `stream_ordered_pools` each stream-ordered pool's (whose
//! live blocks are segments of type `stream_ordered`), `events` the faults, `device_traces` and `history` the
//! recorded history. Handles and addresses are hex strings, as in the
//! pool's snapshot. With stacks captured, blocks, faults and allocation
//! events carry PyTorch's `frames` (`filename`, `line`, `name`, innermost
//! first); a suppressed fault names its pattern in `suppressed_by`.

use super::events::{events, Fault};
use super::owner::REPORT_PATIENCE;
use super::tracker::tracker;
use aclalloc_core::history::json::{device_traces, recording_info};
use aclalloc_core::history::stacks::{self, NO_STACK};
use aclalloc_core::history::Hex;
use serde_json::{json, Map, Value};

/// The version of the snapshot's JSON layout (2: hex strings for handles
/// and addresses, written by a JSON library; 1: integers).
const SNAPSHOT_VERSION: u32 = 2;

/// The snapshot of live blocks, statistics and faults, as JSON.
pub fn snapshot_json() -> String {
    let mut segments = Vec::new();
    let mut allocators = Vec::new();
    for state in tracker().states() {
        let Some(mut inside) = state.enter_for_report(REPORT_PATIENCE) else {
            continue;
        };
        let s = inside.stats();
        let stat = |x: super::stats::Stat| json!({"current": x.current, "peak": x.peak, "allocated": x.allocated, "freed": x.freed});
        let streams: Vec<Hex> = inside.streams.iter().map(|&s| Hex(s)).collect();
        allocators.push(json!({
            "allocator": Hex(state.allocator),
            "streams": streams,
            "streams_destroyed": inside.streams_destroyed,
            "stats": {
                "allocation": stat(s.allocation),
                "allocated_bytes": stat(s.allocated_bytes),
                "num_alloc_failures": s.num_alloc_failures,
            },
        }));
        for (block, rec) in inside.live_blocks() {
            let address = (rec.address != 0).then_some(Hex(rec.address));
            let size = rec.size;
            let mut entry = json!({
                "address": address,
                "size": size,
                "requested_size": size,
                "state": "active_allocated",
                "block": Hex(block),
                "time_ns": rec.time_ns,
            });
            if rec.stack != NO_STACK {
                entry["frames"] = json!(stacks::frames(rec.stack));
            }
            segments.push(json!({
                "address": address,
                "total_size": size,
                "stream": Hex(rec.stream),
                "segment_type": "user",
                "device": rec.device,
                "allocator": Hex(state.allocator),
                "allocated_size": size,
                "active_size": size,
                "requested_size": size,
                "blocks": [entry],
            }));
        }
    }
    let stat = |x: super::stats::Stat| json!({"current": x.current, "peak": x.peak, "allocated": x.allocated, "freed": x.freed});
    let ordered_pools: Vec<Value> = super::ordered_pool_stats()
        .into_iter()
        .map(|p| {
            let streams: Vec<Hex> = p.streams.iter().map(|&s| Hex(s)).collect();
            json!({
                "pool": Hex(p.pool),
                "streams": streams,
                "stats": {
                    "allocation": stat(p.allocation),
                    "allocated_bytes": stat(p.allocated_bytes),
                },
            })
        })
        .collect();
    for b in super::ordered::live_ordered() {
        let mut entry = json!({
            "address": Hex(b.address),
            "size": b.size,
            "requested_size": b.size,
            "state": "active_allocated",
            "block": Hex(b.address),
            "time_ns": b.time_ns,
        });
        if b.stack != NO_STACK {
            entry["frames"] = json!(stacks::frames(b.stack));
        }
        segments.push(json!({
            "address": Hex(b.address),
            "total_size": b.size,
            "stream": Hex(b.stream),
            "segment_type": "stream_ordered",
            "device": b.device,
            "pool": Hex(b.pool),
            "allocated_size": b.size,
            "active_size": b.size,
            "requested_size": b.size,
            "blocks": [entry],
        }));
    }
    // Read after the blocks: an allocation recorded meanwhile, without its
    // live block, is drawn as live to the end anyway.
    let history = super::history::history();
    let (events, dropped) = events();
    let events: Vec<Value> = super::leaks::annotate(&events)
        .into_iter()
        .map(|a| {
            let e = a.event;
            let mut fields = fault_fields(&e.fault);
            fields.insert("kind".into(), e.fault.kind().into());
            fields.insert("time_ns".into(), e.time_ns.into());
            fields.insert("count".into(), e.count.into());
            if e.stack != NO_STACK {
                fields.insert("frames".into(), json!(a.frames));
            }
            if let Some(pattern) = a.suppressed_by {
                fields.insert("suppressed_by".into(), pattern.into());
            }
            Value::Object(fields)
        })
        .collect();
    let snapshot = json!({
        "version": SNAPSHOT_VERSION,
        "pid": std::process::id(),
        "segments": segments,
        "allocators": allocators,
        "stream_ordered_pools": ordered_pools,
        "events": events,
        "events_dropped": dropped,
        "device_traces": device_traces(&[&history]),
        "history": recording_info(&history),
    });
    let mut out = serde_json::to_string(&snapshot).expect("the snapshot serializes");
    out.push('\n');
    out
}

/// The fields of `fault`: sizes and ages as numbers, handles and addresses as hex strings.
fn fault_fields(fault: &Fault) -> Map<String, Value> {
    const NUMBERS: [&str; 3] = ["size", "other_size", "age_ns"];
    let Ok(Value::Object(fields)) = serde_json::to_value(fault) else {
        unreachable!("a fault serializes as an object")
    };
    let hex = |(key, value): (String, Value)| match value.as_u64() {
        Some(v) if !NUMBERS.contains(&key.as_str()) => (key, json!(Hex(v as usize))),
        _ => (key, value),
    };
    fields.into_iter().map(hex).collect()
}
