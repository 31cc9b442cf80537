//! The pool's configuration, and its parsing from an environment variable in
//! the shape of `PYTORCH_NPU_ALLOC_CONF`.
//!
//! `ACLALLOC_ALLOC_CONF` is a comma-separated list of `key:value` pairs:
//!
//! | key | value | meaning |
//! | --- | --- | --- |
//! | `max_split_size_mb` | MiB, > 1 | blocks at least this large are never split, and smaller requests never take them (limits fragmentation of large blocks) |
//! | `garbage_collection_threshold` | 0 < t < 1 | before a new segment would push reserved memory over `t` x limit, whole free segments are returned to the device first (needs a limit) |
//! | `memory_limit_mb` | MiB | the pool never reserves more than this |
//! | `memory_fraction` | 0 < f <= 1 | the pool never reserves more than `f` x the device capacity (like `torch.npu.set_per_process_memory_fraction`) |
//! | `per_process_memory_fraction` | 0 < f <= 1 | torch_npu's name for `memory_fraction` |
//! | `expandable_segments` | a truth value (`True`, `False`, `1`, `off`, ...) | per stream one reservation of address space mapped page by page (see `crates/aclalloc-pool/src/engine/expandable.rs`) |
//! | `roundup_power2_divisions` | `4`, or `[256:1,512:2,>:8]` | requests are rounded up to one of `n` steps between two powers of two (PyTorch's `round_size`; see `crates/aclalloc-pool/src/roundup.rs`) |
//!
//! torch_npu's other keys (pinned host memory, its threads and locks) are
//! accepted and have no effect; its segment-sizing keys are refused. Unlike
//! torch_npu, `expandable_segments:True` combines with `max_split_size_mb`
//! and `garbage_collection_threshold`. The syntax and its errors are
//! [`crate::base::env`]'s.

use super::roundup::{self, RoundupDivisions};
use crate::base::env::{self, Key, KeyList};
use crate::base::error::{Error, Result};

/// The environment variable [`PoolConfig::from_env`] reads.
pub const ENV_VAR: &str = "ACLALLOC_ALLOC_CONF";

const MIB: usize = 1 << 20;

/// A memory limit on what a pool may reserve from the device.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum Limit {
    /// No limit other than the device's capacity.
    #[default]
    None,
    /// At most this many bytes.
    Bytes(usize),
    /// At most this fraction (0 < f <= 1) of the device's capacity.
    Fraction(f64),
}

impl Limit {
    /// The limit in bytes on a device of `capacity` bytes (`usize::MAX`: none).
    pub fn bytes(self, capacity: usize) -> usize {
        match self {
            Limit::None => usize::MAX,
            Limit::Bytes(b) => b,
            Limit::Fraction(f) => (capacity as f64 * f) as usize,
        }
    }

    /// Checks the limit is meaningful.
    pub fn validate(self) -> Result<Self> {
        match self {
            Limit::Fraction(f) if !(f > 0.0 && f <= 1.0) => Err(Error::InvalidParam {
                param: "fraction",
                reason: "A memory fraction must be in (0, 1]",
            }),
            other => Ok(other),
        }
    }
}

/// How a pool behaves. [`PoolConfig::default`] matches PyTorch's defaults:
/// no max split size, no garbage collection, no limit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PoolConfig {
    /// Blocks of at least this many bytes are not split (`usize::MAX`: no
    /// limit; 0: no block is split, a memory pool's `no_split`).
    pub max_split_size: usize,
    /// Fraction of the limit above which free segments are released before a
    /// new one is allocated (0: off).
    pub garbage_collection_threshold: f64,
    /// The most the pool may reserve.
    pub limit: Limit,
    /// PyTorch's `expandable_segments` (`crates/aclalloc-pool/src/engine/expandable.rs`), when the
    /// device offers virtual memory; otherwise fixed segments.
    pub expandable_segments: bool,
    /// PyTorch's `roundup_power2_divisions`: how requests are rounded (all 0: to 512 bytes).
    pub roundup_power2_divisions: RoundupDivisions,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            max_split_size: usize::MAX,
            garbage_collection_threshold: 0.0,
            limit: Limit::None,
            expandable_segments: false,
            roundup_power2_divisions: RoundupDivisions::default(),
        }
    }
}

/// The keys of `ACLALLOC_ALLOC_CONF`: one line per key.
#[rustfmt::skip]
const KEYS: &[Key<PoolConfig>] = &[
    Key { name: "max_split_size_mb", accepted: "a number of MiB larger than 1", set: set_max_split_size_mb },
    Key { name: "garbage_collection_threshold", accepted: "a number between 0 and 1, both excluded", set: set_garbage_collection_threshold },
    Key { name: "memory_limit_mb", accepted: "a number of MiB, 0 or more", set: set_memory_limit_mb },
    Key { name: "memory_fraction", accepted: "a number larger than 0 and at most 1", set: set_memory_fraction },
    Key { name: "expandable_segments", accepted: TRUTH, set: set_expandable_segments },
    Key { name: "roundup_power2_divisions", accepted: roundup::ACCEPTED, set: set_roundup_power2_divisions },
    // torch_npu's keys.
    Key { name: "per_process_memory_fraction", accepted: "a number larger than 0 and at most 1", set: set_memory_fraction },
    // Accepted for torch_npu's strings; no effect here (see the module doc).
    Key { name: "pin_memory_expandable_segments", accepted: TRUTH, set: check_truth },
    Key { name: "pinned_mem_register", accepted: TRUTH, set: check_truth },
    Key { name: "pinned_use_background_threads", accepted: TRUTH, set: check_truth },
    Key { name: "pinned_reserve_segment_size_mb", accepted: "a whole number of MiB", set: check_whole },
    Key { name: "release_lock_on_npumalloc", accepted: TRUTH, set: check_truth },
    Key { name: "multi_stream_lazy_reclaim", accepted: TRUTH, set: check_truth },
    Key { name: "base_addr_aligned_kb", accepted: "a whole number from 0 to 16", set: check_base_addr_aligned_kb },
    Key { name: "page_size", accepted: "1g", set: check_page_size },
    // torch_npu's sizing keys: known, not implemented, refused with why.
    Key { name: "segment_size_mb", accepted: NOT_IMPLEMENTED, set: refuse },
    Key { name: "large_segment_size_mb", accepted: NOT_IMPLEMENTED, set: refuse },
    Key { name: "max_non_split_rounding_mb", accepted: NOT_IMPLEMENTED, set: refuse },
];

const TRUTH: &str = "a truth value: True, False, 1, 0, yes, no, on, off (any case)";
const NOT_IMPLEMENTED: &str = "no value: this torch_npu key is not implemented by aclalloc (its segments keep PyTorch's default sizes); remove it";

const KEY_NAMES: [&str; KEYS.len()] = env::key_names(KEYS);

const CONF: KeyList<PoolConfig> = KeyList {
    keys: KEYS,
    names: &KEY_NAMES,
    exclusive: &[
        ("memory_limit_mb", "memory_fraction", LIMIT_TWICE),
        (
            "memory_limit_mb",
            "per_process_memory_fraction",
            LIMIT_TWICE,
        ),
        (
            "memory_fraction",
            "per_process_memory_fraction",
            LIMIT_TWICE,
        ),
    ],
};

const LIMIT_TWICE: &str = "both set the pool's limit; give one of them";

fn mib(value: &str) -> Option<f64> {
    env::number(value).map(|mb| mb * MIB as f64)
}

fn set_max_split_size_mb(c: &mut PoolConfig, value: &str) -> Option<()> {
    c.max_split_size = mib(value).filter(|&b| b > MIB as f64)? as usize;
    Some(())
}

fn set_garbage_collection_threshold(c: &mut PoolConfig, value: &str) -> Option<()> {
    c.garbage_collection_threshold = env::number(value).filter(|t| *t > 0.0 && *t < 1.0)?;
    Some(())
}

fn set_memory_limit_mb(c: &mut PoolConfig, value: &str) -> Option<()> {
    c.limit = Limit::Bytes(mib(value).filter(|&b| b >= 0.0)? as usize);
    Some(())
}

fn set_memory_fraction(c: &mut PoolConfig, value: &str) -> Option<()> {
    c.limit = Limit::Fraction(env::number(value)?).validate().ok()?;
    Some(())
}

fn set_expandable_segments(c: &mut PoolConfig, value: &str) -> Option<()> {
    c.expandable_segments = env::truth(value)?;
    Some(())
}

fn set_roundup_power2_divisions(c: &mut PoolConfig, value: &str) -> Option<()> {
    c.roundup_power2_divisions = RoundupDivisions::parse(value)?;
    Some(())
}

fn check_truth(_: &mut PoolConfig, value: &str) -> Option<()> {
    env::truth(value).map(drop)
}

fn check_whole(_: &mut PoolConfig, value: &str) -> Option<()> {
    env::whole(value).map(drop)
}

fn check_base_addr_aligned_kb(_: &mut PoolConfig, value: &str) -> Option<()> {
    env::whole(value).filter(|&kb| kb <= 16).map(drop)
}

fn check_page_size(_: &mut PoolConfig, value: &str) -> Option<()> {
    value.eq_ignore_ascii_case("1g").then_some(())
}

fn refuse(_: &mut PoolConfig, _: &str) -> Option<()> {
    None
}

impl PoolConfig {
    /// This configuration with `conf` (`ACLALLOC_ALLOC_CONF` syntax) applied;
    /// on an error, nothing is applied.
    pub fn with_conf(self, conf: &str) -> Result<Self> {
        let mut updated = self;
        env::apply_key_values(ENV_VAR, conf, &CONF, &mut updated)?;
        Ok(updated)
    }

    /// This configuration with `ACLALLOC_ALLOC_CONF` applied, if it is set.
    pub fn from_env(self) -> Result<Self> {
        let raw = env::var(ENV_VAR);
        match env::text(ENV_VAR, raw.as_deref(), env::Accepted::Keys(&KEY_NAMES))? {
            Some(conf) => self.with_conf(conf),
            None => Ok(self),
        }
    }
}
