//! `memory_snapshot()`: the pool's segments and blocks, and its recorded
//! history, as JSON in PyTorch's shape.
//!
//! ```json
//! {"version":2,"device":0,
//!  "segments":[{"device":0,"address":"0x7f..","total_size":2097152,"stream":"0x0",
//!    "segment_type":"small","is_expandable":false,"mapped_size":2097152,"unmapped_size":0,
//!    "allocated_size":512,"active_size":512,"requested_size":100,
//!    "blocks":[{"address":"0x7f..","size":512,"requested_size":100,"state":"active_allocated"},
//!              {"address":"0x7f..","size":2096640,"requested_size":0,"state":"inactive"}]}],
//!  "device_traces":[[{"action":"alloc","addr":"0x7f..","size":100,"block_size":512,
//!    "stream":"0x0","time_us":1234}]],
//!  "history":{"enabled":true,"max_entries":1000,"entries":1,"dropped":0}}
//! ```
//!
//! Key names, `state` values and actions are PyTorch's. An expandable
//! segment's `total_size` is its reservation, `mapped_size` the part backed
//! by physical memory. Addresses and streams are hex strings: JavaScript's
//! numbers cannot hold every 64-bit handle. `stream` is the stream the
//! segment serves, 0 when unknown (CANN's callbacks are not told it).

use super::engine::SegmentView;
use super::Pool;
use crate::history::json::{device_traces, recording_info, RecordingInfo, TraceEntry};
use crate::history::{Hex, History};
use serde::Serialize;

/// The version of the snapshot's JSON layout.
pub const SNAPSHOT_VERSION: u32 = 2;

#[derive(Serialize)]
struct Snapshot {
    version: u32,
    device: i32,
    segments: Vec<SegmentJson>,
    device_traces: Vec<Vec<TraceEntry>>,
    history: RecordingInfo,
}

#[derive(Serialize)]
struct SegmentJson {
    device: i32,
    address: Hex,
    total_size: usize,
    stream: Hex,
    segment_type: &'static str,
    is_expandable: bool,
    mapped_size: usize,
    unmapped_size: usize,
    allocated_size: usize,
    active_size: usize,
    requested_size: usize,
    blocks: Vec<BlockJson>,
}

#[derive(Serialize)]
struct BlockJson {
    address: Hex,
    size: usize,
    requested_size: usize,
    state: &'static str,
}

impl Pool {
    /// The snapshot as JSON. The pool's locks are held only to copy the block
    /// lists and the history; formatting happens after.
    pub fn snapshot_json(&self) -> String {
        let segments = self.segments();
        to_json(&segments, &self.history())
    }
}

/// Formats segment views and a history as the snapshot JSON.
pub fn to_json(segments: &[SegmentView], history: &History) -> String {
    let device = history.device;
    let snapshot = Snapshot {
        version: SNAPSHOT_VERSION,
        device,
        segments: segments.iter().map(|s| segment(device, s)).collect(),
        device_traces: device_traces(&[history]),
        history: recording_info(history),
    };
    serde_json::to_string(&snapshot).expect("the snapshot serializes")
}

fn segment(device: i32, s: &SegmentView) -> SegmentJson {
    let allocated: usize = s
        .blocks
        .iter()
        .filter(|b| b.allocated)
        .map(|b| b.size)
        .sum();
    SegmentJson {
        device,
        address: Hex(s.address),
        total_size: s.total_size,
        stream: Hex(s.stream),
        segment_type: if s.small { "small" } else { "large" },
        is_expandable: s.is_expandable,
        mapped_size: s.mapped_size,
        unmapped_size: s.total_size - s.mapped_size,
        allocated_size: allocated,
        active_size: allocated,
        requested_size: s.blocks.iter().map(|b| b.requested_size).sum(),
        blocks: s
            .blocks
            .iter()
            .map(|b| BlockJson {
                address: Hex(b.address),
                size: b.size,
                requested_size: b.requested_size,
                state: if b.allocated {
                    "active_allocated"
                } else {
                    "inactive"
                },
            })
            .collect(),
    }
}
