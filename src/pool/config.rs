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
//! Unknown keys and malformed values are errors, not silently ignored.

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

const BAD_CONF: &str = "ACLALLOC_ALLOC_CONF";

fn invalid(reason: &'static str) -> Error {
    Error::InvalidParam {
        param: BAD_CONF,
        reason,
    }
}

impl PoolConfig {
    /// This configuration with the settings of `conf` (the
    /// `ACLALLOC_ALLOC_CONF` syntax) applied on top.
    pub fn with_conf(mut self, conf: &str) -> Result<Self> {
        for item in conf.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = item
                .split_once(':')
                .ok_or(invalid("Each setting must be key:value"))?;
            let number = |reason| value.trim().parse::<f64>().map_err(|_| invalid(reason));
            match key.trim() {
                "max_split_size_mb" => {
                    let mb = number("max_split_size_mb must be a number of MiB")?;
                    if !(mb > 1.0 && mb.is_finite()) {
                        return Err(invalid("max_split_size_mb must be larger than 1"));
                    }
                    self.max_split_size = (mb * MIB as f64) as usize;
                }
                "garbage_collection_threshold" => {
                    let t = number("garbage_collection_threshold must be a number")?;
                    if !(t > 0.0 && t < 1.0) {
                        return Err(invalid("garbage_collection_threshold must be in (0, 1)"));
                    }
                    self.garbage_collection_threshold = t;
                }
                "memory_limit_mb" => {
                    let mb = number("memory_limit_mb must be a number of MiB")?;
                    if !(mb >= 0.0 && mb.is_finite()) {
                        return Err(invalid("memory_limit_mb must not be negative"));
                    }
                    self.limit = Limit::Bytes((mb * MIB as f64) as usize);
                }
                "memory_fraction" => {
                    let f = number("memory_fraction must be a number")?;
                    self.limit = Limit::Fraction(f).validate().map_err(|_| {
                        invalid("memory_fraction must be in (0, 1]")
                    })?;
                }
                _ => return Err(invalid(
                    "Unknown key; known keys: max_split_size_mb, garbage_collection_threshold, memory_limit_mb, memory_fraction",
                )),
            }
        }
        Ok(self)
    }

    /// This configuration with `ACLALLOC_ALLOC_CONF` applied, if it is set.
    pub fn from_env(self) -> Result<Self> {
        match std::env::var(ENV_VAR) {
            Ok(conf) => self.with_conf(&conf),
            Err(std::env::VarError::NotPresent) => Ok(self),
            Err(std::env::VarError::NotUnicode(_)) => Err(invalid("The value is not UTF-8")),
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
            "expandable_segments:True",
        ] {
            assert!(
                matches!(
                    PoolConfig::default().with_conf(bad),
                    Err(Error::InvalidParam {
                        param: "ACLALLOC_ALLOC_CONF",
                        ..
                    })
                ),
                "{bad} accepted"
            );
        }
    }
}
