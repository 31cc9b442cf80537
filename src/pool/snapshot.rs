//! `memory_snapshot()`: the pool's segments and blocks as JSON.
//!
//! ```json
//! {"device":0,"segments":[{"address":139...,"total_size":2097152,"stream":0,
//!   "segment_type":"small","allocated_size":512,"active_size":512,"requested_size":100,
//!   "blocks":[{"address":139...,"size":512,"requested_size":100,"state":"active_allocated"},
//!             {"address":139...,"size":2096640,"requested_size":0,"state":"inactive"}]}]}
//! ```
//!
//! Field names and `state` values are PyTorch's (`active_allocated`,
//! `inactive`). Addresses are integers. `stream` is the stream handle of the
//! launch whose workspace request created the segment (its blocks serve only
//! that stream), or 0 when unknown: CANN's allocator callbacks do not receive
//! the stream, so the pool learns it only from launches made through this
//! library (`aclallocLaunchKernel`) or from [`Pool::malloc_on`].

use super::engine::SegmentView;
use super::Pool;
use std::fmt::Write as _;

impl Pool {
    /// The snapshot as JSON. The pool's locks are held only to copy the block
    /// lists; formatting happens after.
    pub fn snapshot_json(&self) -> String {
        to_json(&self.segments())
    }
}

/// Formats segment views as the snapshot JSON.
pub fn to_json(segments: &[SegmentView]) -> String {
    let mut out = String::with_capacity(64 + segments.len() * 256);
    out.push_str("{\"device\":0,\"segments\":[");
    for (i, s) in segments.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let allocated: usize = s
            .blocks
            .iter()
            .filter(|b| b.allocated)
            .map(|b| b.size)
            .sum();
        let requested: usize = s.blocks.iter().map(|b| b.requested_size).sum();
        let _ = write!(
            out,
            "{{\"address\":{},\"total_size\":{},\"stream\":{},\"segment_type\":\"{}\",\
             \"allocated_size\":{allocated},\"active_size\":{allocated},\"requested_size\":{requested},\"blocks\":[",
            s.address,
            s.total_size,
            s.stream,
            if s.small { "small" } else { "large" },
        );
        for (j, b) in s.blocks.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            let _ = write!(
                out,
                "{{\"address\":{},\"size\":{},\"requested_size\":{},\"state\":\"{}\"}}",
                b.address,
                b.size,
                b.requested_size,
                if b.allocated {
                    "active_allocated"
                } else {
                    "inactive"
                }
            );
        }
        out.push_str("]}");
    }
    out.push_str("]}");
    out
}
