//! The JSON snapshot, in the shape of the pool's (PyTorch's
//! `memory_snapshot`): `segments` (address, total_size, stream, segment_type,
//! allocated_size, active_size, requested_size), each with its `blocks`
//! (address, size, requested_size, state). The tracking layer
//! only sees blocks, so every live block is its own segment of type `user`;
//! `allocators` carries each allocator's statistics and `events` the faults.
//! Handles and addresses are numbers, as in PyTorch's snapshot.

use super::events::{events, Fault};
use super::owner::REPORT_PATIENCE;
use super::report::leak_seen;
use super::tracker::tracker;
use std::fmt::Write as _;

/// The snapshot of live blocks, statistics and faults, as JSON.
pub fn snapshot_json() -> String {
    let mut segments = Vec::new();
    let mut allocators = Vec::new();
    for state in tracker().states() {
        let Some(inside) = state.enter_for_report(REPORT_PATIENCE) else {
            continue;
        };
        let s = inside.stats;
        let stat = |x: super::stats::Stat| {
            format!(
                "{{\"current\":{},\"peak\":{},\"allocated\":{},\"freed\":{}}}",
                x.current, x.peak, x.allocated, x.freed
            )
        };
        let streams: Vec<String> = inside.streams.iter().map(|s| s.to_string()).collect();
        allocators.push(format!(
            "{{\"allocator\":{},\"streams\":[{}],\"stats\":{{\"allocation\":{},\
             \"allocated_bytes\":{},\"num_alloc_failures\":{}}}}}",
            state.allocator,
            streams.join(","),
            stat(s.allocation),
            stat(s.allocated_bytes),
            s.num_alloc_failures
        ));
        for (block, rec) in inside.live_blocks() {
            let address = if rec.address == 0 {
                "null".to_string()
            } else {
                rec.address.to_string()
            };
            segments.push(format!(
                "{{\"address\":{address},\"total_size\":{size},\"stream\":{stream},\
                 \"segment_type\":\"user\",\"allocator\":{allocator},\"allocated_size\":{size},\
                 \"active_size\":{size},\"requested_size\":{size},\"blocks\":[{{\"address\":{address},\"size\":{size},\
                 \"requested_size\":{size},\"state\":\"active_allocated\",\"block\":{block},\
                 \"time_ns\":{time}}}]}}",
                size = rec.size,
                stream = rec.stream,
                allocator = state.allocator,
                time = rec.time_ns,
            ));
        }
    }
    let (events, dropped) = events();
    let events: Vec<String> = events
        .iter()
        .map(|e| {
            let mut fields = format!(
                "{{\"kind\":\"{}\",\"time_ns\":{},\"count\":{}",
                e.fault.kind(),
                e.time_ns,
                e.count
            );
            for (key, value) in fault_fields(&e.fault) {
                let _ = write!(fields, ",\"{key}\":{value}");
            }
            fields.push('}');
            fields
        })
        .collect();
    format!(
        "{{\"version\":1,\"pid\":{},\"segments\":[{}],\"allocators\":[{}],\"events\":[{}],\
         \"events_dropped\":{}}}\n",
        std::process::id(),
        segments.join(","),
        allocators.join(","),
        events.join(","),
        dropped
    )
}

fn fault_fields(fault: &Fault) -> Vec<(&'static str, String)> {
    let n = |v: usize| v.to_string();
    match *fault {
        Fault::UnknownFree {
            stream,
            allocator,
            block,
        } => vec![
            ("stream", n(stream)),
            ("allocator", n(allocator)),
            ("block", n(block)),
        ],
        Fault::DoubleFree {
            stream,
            allocator,
            block,
            size,
            first_freed_on,
        } => vec![
            ("stream", n(stream)),
            ("allocator", n(allocator)),
            ("block", n(block)),
            ("size", n(size)),
            ("first_freed_on", n(first_freed_on)),
        ],
        Fault::NullAddress {
            stream,
            allocator,
            block,
            size,
        } => vec![
            ("stream", n(stream)),
            ("allocator", n(allocator)),
            ("block", n(block)),
            ("size", n(size)),
        ],
        Fault::UnknownBlock { allocator, block } => {
            vec![("allocator", n(allocator)), ("block", n(block))]
        }
        Fault::Overlap {
            stream,
            allocator,
            block,
            address,
            size,
            other_stream,
            other_block,
            other_address,
            other_size,
        } => vec![
            ("stream", n(stream)),
            ("allocator", n(allocator)),
            ("block", n(block)),
            ("address", n(address)),
            ("size", n(size)),
            ("other_stream", n(other_stream)),
            ("other_block", n(other_block)),
            ("other_address", n(other_address)),
            ("other_size", n(other_size)),
        ],
        Fault::CrossStreamReuse {
            stream,
            allocator,
            block,
            address,
            size,
            freed_on,
            freed_block,
        } => vec![
            ("stream", n(stream)),
            ("allocator", n(allocator)),
            ("block", n(block)),
            ("address", n(address)),
            ("size", n(size)),
            ("freed_on", n(freed_on)),
            ("freed_block", n(freed_block)),
        ],
        Fault::ConcurrentUse {
            allocator,
            stream,
            other_stream,
        } => vec![
            ("stream", n(stream)),
            ("allocator", n(allocator)),
            ("other_stream", n(other_stream)),
        ],
        Fault::Leak {
            stream,
            allocator,
            block,
            address,
            size,
            age_ns,
            seen,
        } => vec![
            ("stream", n(stream)),
            ("allocator", n(allocator)),
            ("block", n(block)),
            ("address", n(address)),
            ("size", n(size)),
            ("age_ns", age_ns.to_string()),
            ("seen_at", format!("\"{}\"", leak_seen(seen))),
        ],
    }
}
