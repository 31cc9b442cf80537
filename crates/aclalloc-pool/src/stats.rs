//! Memory statistics with the names and meaning of PyTorch's
//! `torch.cuda.memory_stats()` / `torch.npu.memory_stats()`.
//!
//! Counters are kept per shard, under the shard's lock; a reader locks every
//! shard and adds their shares up, so a copy is always consistent.

/// Index of the aggregate entry in each per-pool array.
pub const STAT_ALL: usize = 0;
/// Index of the small-pool entry (blocks of at most 1 MiB, from 2 MiB segments).
pub const STAT_SMALL_POOL: usize = 1;
/// Index of the large-pool entry (everything else).
pub const STAT_LARGE_POOL: usize = 2;

pub use crate::base::stats::Stat;

/// A statistic for all pools and for each pool, indexed by [`STAT_ALL`],
/// [`STAT_SMALL_POOL`], [`STAT_LARGE_POOL`] (`ACLALLOC_STAT_*` in C).
pub type StatArray = [Stat; 3];

/// A pool's statistics (`aclallocPoolStats` in C). Counts are of blocks and
/// segments, `*_bytes` of bytes; every block size is a multiple of 512.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Blocks handed out and not yet freed.
    pub allocation: StatArray,
    /// Device allocations (segments) the pool holds.
    pub segment: StatArray,
    /// Blocks in use (equal to `allocation`: blocks are returned synchronously).
    pub active: StatArray,
    /// Free blocks inside a segment that also holds other blocks: cached
    /// memory that `empty_cache` cannot return until its neighbours are freed.
    pub inactive_split: StatArray,
    /// Bytes of blocks handed out (request sizes rounded up to 512).
    pub allocated_bytes: StatArray,
    /// Bytes of device memory the pool holds.
    pub reserved_bytes: StatArray,
    /// Bytes of blocks in use.
    pub active_bytes: StatArray,
    /// Bytes of `inactive_split` blocks.
    pub inactive_split_bytes: StatArray,
    /// Bytes the callers asked for (before rounding).
    pub requested_bytes: StatArray,
    /// Times a device allocation failed and the pool released its cached segments to retry.
    pub num_alloc_retries: i64,
    /// Allocations that failed (out of memory or over the limit).
    pub num_ooms: i64,
    /// Device allocations made (`aclrtMalloc` calls).
    pub num_device_alloc: i64,
    /// Device frees made (`aclrtFree` calls).
    pub num_device_free: i64,
    /// The configured max split size in bytes (`i64::MAX` when unlimited).
    pub max_split_size: i64,
    /// Blocks of at least `max_split_size` bytes handed out.
    pub oversize_allocations: Stat,
    /// Segments of at least `max_split_size` bytes held.
    pub oversize_segments: Stat,
}

/// The names of the per-pool statistics, in PyTorch's spelling and order.
pub const ARRAY_STAT_NAMES: [&str; 9] = [
    "allocation",
    "segment",
    "active",
    "inactive_split",
    "allocated_bytes",
    "reserved_bytes",
    "active_bytes",
    "inactive_split_bytes",
    "requested_bytes",
];

const POOL_NAMES: [&str; 3] = ["all", "small_pool", "large_pool"];
const FIELD_NAMES: [&str; 4] = ["current", "peak", "allocated", "freed"];

impl PoolStats {
    fn arrays_mut(&mut self) -> [&mut StatArray; 9] {
        [
            &mut self.allocation,
            &mut self.segment,
            &mut self.active,
            &mut self.inactive_split,
            &mut self.allocated_bytes,
            &mut self.reserved_bytes,
            &mut self.active_bytes,
            &mut self.inactive_split_bytes,
            &mut self.requested_bytes,
        ]
    }

    /// Sets every peak to the current value (`reset_peak_memory_stats`).
    pub fn reset_peak(&mut self) {
        for array in self.arrays_mut() {
            array.iter_mut().for_each(Stat::reset_peak);
        }
        self.oversize_allocations.reset_peak();
        self.oversize_segments.reset_peak();
    }

    /// Zeroes the totals and the event counters (`reset_accumulated_memory_stats`).
    pub fn reset_accumulated(&mut self) {
        for array in self.arrays_mut() {
            array.iter_mut().for_each(Stat::reset_accumulated);
        }
        self.oversize_allocations.reset_accumulated();
        self.oversize_segments.reset_accumulated();
        self.num_alloc_retries = 0;
        self.num_ooms = 0;
        self.num_device_alloc = 0;
        self.num_device_free = 0;
    }

    /// Every statistic as `(key, value)` with PyTorch's flat key names, e.g.
    /// `allocated_bytes.all.peak`, sorted by key as `memory_stats()` is.
    pub fn key_values(&self) -> Vec<(&'static str, i64)> {
        let keys = keys();
        let values = self.values();
        let mut out: Vec<_> = keys.iter().copied().zip(values).collect();
        out.sort_unstable_by_key(|&(k, _)| k);
        out
    }

    /// The statistic named `key` (a [`PoolStats::key_values`] key).
    pub fn get(&self, key: &str) -> Option<i64> {
        let index = keys().iter().position(|k| *k == key)?;
        self.values().get(index).copied()
    }

    /// Values in the order of [`keys`].
    fn values(&self) -> Vec<i64> {
        let mut out = Vec::with_capacity(KEY_COUNT);
        let mut copy = *self;
        for array in copy.arrays_mut() {
            for stat in array {
                out.extend([stat.current, stat.peak, stat.allocated, stat.freed]);
            }
        }
        out.extend([
            self.num_alloc_retries,
            self.num_ooms,
            self.num_device_alloc,
            self.num_device_free,
            self.max_split_size,
        ]);
        for stat in [&self.oversize_allocations, &self.oversize_segments] {
            out.extend([stat.current, stat.peak, stat.allocated, stat.freed]);
        }
        out
    }
}

/// How many flat keys there are.
pub const KEY_COUNT: usize = 9 * 3 * 4 + 5 + 2 * 4;

/// The flat key names, built once and kept for the life of the process (so C
/// callers may keep the `const char *` they get).
pub(crate) fn keys() -> &'static [&'static str] {
    static KEYS: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| {
        let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
        let mut keys = Vec::with_capacity(KEY_COUNT);
        for name in ARRAY_STAT_NAMES {
            for pool in POOL_NAMES {
                for field in FIELD_NAMES {
                    keys.push(leak(format!("{name}.{pool}.{field}")));
                }
            }
        }
        keys.extend([
            "num_alloc_retries",
            "num_ooms",
            "num_device_alloc",
            "num_device_free",
            "max_split_size",
        ]);
        for name in ["oversize_allocations", "oversize_segments"] {
            for field in FIELD_NAMES {
                keys.push(leak(format!("{name}.{field}")));
            }
        }
        keys
    })
}

/// The same keys as NUL-terminated C strings, for the C key/value export.
pub fn c_keys() -> &'static [std::ffi::CString] {
    static KEYS: std::sync::OnceLock<Vec<std::ffi::CString>> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| {
        let mut pairs: Vec<&str> = keys().to_vec();
        pairs.sort_unstable();
        pairs
            .into_iter()
            .map(|k| std::ffi::CString::new(k).expect("keys have no NUL"))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_use_pytorch_names_and_values_line_up() {
        let mut s = PoolStats::default();
        s.allocated_bytes[STAT_LARGE_POOL].increase(4096);
        s.allocated_bytes[STAT_LARGE_POOL].decrease(1024);
        s.num_ooms = 3;
        s.oversize_segments.increase(2);
        assert_eq!(keys().len(), KEY_COUNT);
        assert_eq!(s.get("allocated_bytes.large_pool.current"), Some(3072));
        assert_eq!(s.get("allocated_bytes.large_pool.peak"), Some(4096));
        assert_eq!(s.get("allocated_bytes.large_pool.allocated"), Some(4096));
        assert_eq!(s.get("allocated_bytes.large_pool.freed"), Some(1024));
        assert_eq!(s.get("allocated_bytes.small_pool.peak"), Some(0));
        assert_eq!(s.get("num_ooms"), Some(3));
        assert_eq!(s.get("oversize_segments.peak"), Some(2));
        assert_eq!(s.get("no_such_key"), None);
        let kv = s.key_values();
        assert!(kv.windows(2).all(|w| w[0].0 < w[1].0), "sorted and unique");
        for (k, v) in &kv {
            assert_eq!(s.get(k), Some(*v));
        }
        let c: Vec<_> = c_keys().iter().map(|k| k.to_str().unwrap()).collect();
        assert_eq!(c, kv.iter().map(|(k, _)| *k).collect::<Vec<_>>());
    }
}
