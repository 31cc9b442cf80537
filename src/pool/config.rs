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
//!
//! Example: `ACLALLOC_ALLOC_CONF="max_split_size_mb:128,garbage_collection_threshold:0.8,memory_fraction:0.9"`.
//! The syntax is [`crate::core::env`]'s: keys in any case, unknown keys,
//! malformed values, a key given twice and `memory_limit_mb` together with
//! `memory_fraction` are errors naming them, never silently ignored.
//!
//! Adding a key is one line in `KEYS` (plus its setter when no existing
//! one fits).

use crate::core::env::{self, Key, KeyList};
use crate::core::error::{Error, Result};

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
    /// Blocks of at least this many bytes are not split (`usize::MAX`: no limit).
    pub max_split_size: usize,
    /// Fraction of the limit above which free segments are released before a
    /// new one is allocated (0: off).
    pub garbage_collection_threshold: f64,
    /// The most the pool may reserve.
    pub limit: Limit,
    /// PyTorch's `expandable_segments`: per stream, one large reservation of
    /// address space backed page by page (see `src/pool/expandable.rs`),
    /// when the device offers virtual memory; otherwise fixed segments.
    pub expandable_segments: bool,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            max_split_size: usize::MAX,
            garbage_collection_threshold: 0.0,
            limit: Limit::None,
            expandable_segments: false,
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
];

const KEY_NAMES: [&str; KEYS.len()] = env::key_names(KEYS);

const CONF: KeyList<PoolConfig> = KeyList {
    keys: KEYS,
    names: &KEY_NAMES,
    exclusive: &[(
        "memory_limit_mb",
        "memory_fraction",
        "both set the pool's limit; give one of them",
    )],
};

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

impl PoolConfig {
    /// This configuration with the settings of `conf` (the
    /// `ACLALLOC_ALLOC_CONF` syntax) applied on top; on an error, nothing is
    /// applied.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_documented_key() {
        let c = PoolConfig::default()
            .with_conf(
                " max_split_size_mb:128, garbage_collection_threshold:0.8 ,memory_fraction:0.5",
            )
            .unwrap();
        assert_eq!(c.max_split_size, 128 * MIB);
        assert_eq!(c.garbage_collection_threshold, 0.8);
        assert_eq!(c.limit, Limit::Fraction(0.5));
        assert_eq!(c.limit.bytes(1000), 500);
        let c = PoolConfig::default()
            .with_conf("memory_limit_mb:64")
            .unwrap();
        assert_eq!(c.limit.bytes(usize::MAX), 64 * MIB);
        assert_eq!(
            PoolConfig::default().with_conf("").unwrap(),
            PoolConfig::default()
        );
    }

    fn refusal(conf: &str) -> String {
        match PoolConfig::default().with_conf(conf) {
            Err(e @ Error::Config(c)) => {
                assert_eq!(c.variable, "ACLALLOC_ALLOC_CONF");
                e.to_string()
            }
            other => panic!("{conf}: {other:?}"),
        }
    }

    #[test]
    fn errors_name_the_key_the_value_and_what_is_accepted() {
        assert_eq!(
            refusal("max_split_sizemb:128"),
            "Environment variable ACLALLOC_ALLOC_CONF is invalid. Reason: unknown key \"max_split_sizemb\" in \"max_split_sizemb:128\"; accepted keys: max_split_size_mb, garbage_collection_threshold, memory_limit_mb, memory_fraction"
        );
        assert_eq!(
            refusal("memory_fraction:2"),
            "Environment variable ACLALLOC_ALLOC_CONF is invalid. Reason: the value \"2\" of memory_fraction is not accepted; accepted: a number larger than 0 and at most 1"
        );
        assert_eq!(
            refusal("memory_limit_mb:100,memory_fraction:0.5"),
            "Environment variable ACLALLOC_ALLOC_CONF is invalid. Reason: memory_limit_mb and memory_fraction contradict each other: both set the pool's limit; give one of them"
        );
        assert_eq!(
            refusal("max_split_size_mb:64,max_split_size_mb:128"),
            "Environment variable ACLALLOC_ALLOC_CONF is invalid. Reason: max_split_size_mb is given more than once; give each key once"
        );
    }

    #[test]
    fn refuses_unknown_keys_and_bad_values() {
        for bad in [
            "max_split_size_mb",
            "max_split_size_mb:0.5",
            "max_split_size_mb:abc",
            "garbage_collection_threshold:1.5",
            "memory_fraction:0",
            "memory_fraction:2",
            "memory_limit_mb:-3",
            "memory_limit_mb:inf",
            "garbage_collection_threshold:",
            "expandable_segments:True",
            "memory_fraction:0.5,memory_limit_mb:1",
            "memory_fraction:0.5,memory_fraction:0.5",
        ] {
            refusal(bad);
        }
    }
}
