//! Per-allocator statistics, in the shape of the pool's (PyTorch's
//! `memory_stats` keys), with the pool's `Stat`: each counter has
//! `current`, `peak`, `allocated` and `freed`.

/// One statistic: the pool's own type (`aclallocStat` in C), so that the
/// tracking layer's figures read exactly like the pool's.
pub use crate::base::stats::Stat;

/// What the tracking layer counts for one allocator object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocatorStats {
    /// Blocks (`allocation` in PyTorch's keys).
    pub allocation: Stat,
    /// Bytes requested from alloc (`allocated_bytes`).
    pub allocated_bytes: Stat,
    /// Calls of alloc that returned NULL.
    pub num_alloc_failures: u64,
}
