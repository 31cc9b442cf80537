//! One shard's share of the pool's statistics, and its *headroom*: how far
//! each statistic may rise under the shard's lock alone without passing the
//! pool-wide peak.
//!
//! Invariant: `peak == Σ over shards (current + headroom)`, every headroom
//! `>= 0`. A decrease gives to the shard's headroom, an increase takes from
//! it; an operation needing more runs with every shard locked, where the
//! deficit comes from the other shards' headroom, then from raising the
//! peak (`All::settle`), which is then exactly the pool-wide maximum.
//!
//! Settling looks only at the headroom an operation ends with: within one
//! operation each statistic only falls, then only rises (a merge raises
//! `inactive_split` by at most what it just lowered it by).
//!
//! Each part keeps `current + headroom` (its *ceiling*) rather than the
//! headroom, and no freed total: a decrease then writes one word and an
//! increase two, on the path every request that misses its thread cache
//! takes. The pool-wide freed total follows when read: every increase adds
//! to `allocated` and `current`, every decrease takes from `current`, so
//! `freed == allocated - current + base`, `base` being `current` when the
//! totals were last zeroed.

use crate::stats::{PoolStats, Stat};

/// A shard's part of one statistic.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Part {
    pub current: i64,
    pub allocated: i64,
    /// `current` plus how much it may still rise before the pool-wide peak
    /// would; below `current` only until settled, under the pool-wide lock.
    ceiling: i64,
}

impl Part {
    #[inline]
    pub(crate) fn increase(&mut self, amount: i64) {
        self.current += amount;
        self.allocated += amount;
    }

    #[inline]
    pub(crate) fn decrease(&mut self, amount: i64) {
        self.current -= amount;
    }

    /// True when `current` may rise by `amount` under the shard lock alone.
    #[inline]
    pub(crate) fn room(&self, amount: i64) -> bool {
        self.ceiling - self.current >= amount
    }

    /// How much `current` may still rise under the shard lock alone.
    #[inline]
    pub(crate) fn headroom(&self) -> i64 {
        self.ceiling - self.current
    }

    /// Adds `amount` (negative: takes) to the headroom.
    #[inline]
    pub(crate) fn add_headroom(&mut self, amount: i64) {
        self.ceiling += amount;
    }

    /// Moves `amount` of `current` out (to a thread's cache, which counts
    /// it), the headroom unchanged; negative moves it back in.
    #[inline]
    pub(crate) fn move_out(&mut self, amount: i64) {
        self.current -= amount;
        self.ceiling -= amount;
    }
}

/// How many [`Part`]s a shard has (the order of [`ShardStats::parts_mut`]).
pub(crate) const PARTS: usize = 7 * 3 + 2;

/// A shard's statistics; `active` is derived from `allocation` when read.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ShardStats {
    pub allocation: [Part; 3],
    pub segment: [Part; 3],
    pub inactive_split: [Part; 3],
    pub allocated_bytes: [Part; 3],
    pub reserved_bytes: [Part; 3],
    pub inactive_split_bytes: [Part; 3],
    pub requested_bytes: [Part; 3],
    pub oversize_allocations: Part,
    pub oversize_segments: Part,
    pub num_alloc_retries: i64,
    pub num_ooms: i64,
    pub num_device_alloc: i64,
    pub num_device_free: i64,
}

impl ShardStats {
    pub(crate) fn parts_mut(&mut self) -> [&mut Part; PARTS] {
        let arrays = [
            &mut self.allocation,
            &mut self.segment,
            &mut self.inactive_split,
            &mut self.allocated_bytes,
            &mut self.reserved_bytes,
            &mut self.inactive_split_bytes,
            &mut self.requested_bytes,
        ];
        let single = [&mut self.oversize_allocations, &mut self.oversize_segments];
        let mut parts = arrays.into_iter().flatten().chain(single);
        std::array::from_fn(|_| parts.next().expect("PARTS parts"))
    }

    pub(crate) fn reset_accumulated(&mut self) {
        for p in self.parts_mut() {
            p.allocated = 0;
        }
        self.num_alloc_retries = 0;
        self.num_ooms = 0;
        self.num_device_alloc = 0;
        self.num_device_free = 0;
    }
}

/// Adds the shards' statistics into pool-wide ones, with `peaks` and the
/// `bases` of the freed totals (each statistic's pool-wide `current` when
/// the totals were last zeroed), in the order of [`ShardStats::parts_mut`].
pub(crate) fn sum(
    shards: &mut [&mut ShardStats],
    peaks: &[i64; PARTS],
    bases: &[i64; PARTS],
    out: &mut PoolStats,
) {
    let mut stats: [Stat; PARTS] = [Stat::default(); PARTS];
    for (j, stat) in stats.iter_mut().enumerate() {
        stat.peak = peaks[j];
    }
    for shard in shards.iter_mut() {
        out.num_alloc_retries += shard.num_alloc_retries;
        out.num_ooms += shard.num_ooms;
        out.num_device_alloc += shard.num_device_alloc;
        out.num_device_free += shard.num_device_free;
        for (stat, p) in stats.iter_mut().zip(shard.parts_mut()) {
            stat.current += p.current;
            stat.allocated += p.allocated;
        }
    }
    for (stat, base) in stats.iter_mut().zip(bases) {
        stat.freed = stat.allocated - stat.current + base;
    }
    let arrays = [
        &mut out.allocation,
        &mut out.segment,
        &mut out.inactive_split,
        &mut out.allocated_bytes,
        &mut out.reserved_bytes,
        &mut out.inactive_split_bytes,
        &mut out.requested_bytes,
    ];
    for (a, array) in arrays.into_iter().enumerate() {
        array.copy_from_slice(&stats[a * 3..a * 3 + 3]);
    }
    out.oversize_allocations = stats[21];
    out.oversize_segments = stats[22];
    out.active = out.allocation;
    out.active_bytes = out.allocated_bytes;
}
