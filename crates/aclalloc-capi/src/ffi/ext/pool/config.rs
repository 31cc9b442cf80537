//! The pool's configuration as C fills it: `aclallocPoolConfig`,
//! `aclallocPoolConfigInit`, and its conversion to the safe `PoolConfig`.

#![allow(non_snake_case, non_camel_case_types)]

use crate::base::boundary::ffi_boundary;
use crate::base::error::{Error, Result};
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args;
use crate::pool::roundup::RoundupDivisions;
use crate::pool::{Limit, PoolConfig};

/// How a pool behaves. Fill it with `aclallocPoolConfigInit`, then change fields.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct aclallocPoolConfig {
    /// Blocks of at least this many bytes are never split, and smaller
    /// requests never take them. 0: no limit.
    pub max_split_size: usize,
    /// In (0, 1): before a new segment would take reserved memory over this
    /// fraction of the limit, whole free segments are released first. 0: off.
    pub garbage_collection_threshold: f64,
    /// The most the pool may reserve, in bytes. 0: no byte limit.
    pub memory_limit: usize,
    /// The most the pool may reserve, as a fraction (0, 1] of the device's
    /// memory; used when `memory_limit` is 0. 0: no limit.
    pub memory_fraction: f64,
    /// 1: expandable segments (PyTorch's `expandable_segments:True`), one
    /// reservation per stream mapped page by page. 0: fixed segments.
    pub expandable_segments: i32,
    /// PyTorch's `roundup_power2_divisions`, per power-of-two size interval:
    /// entry 0 for requests below 2 MiB, entry i for [2^i, 2^(i+1)) MiB, the
    /// last one for 32 GiB and up. 0 or 1: requests rounded to 512 bytes; a
    /// power of two n: rounded up to one of n equal steps of the interval
    /// (with 4, 1200 MiB becomes 1280 MiB). All 0 (the default): off.
    pub roundup_power2_divisions: [usize; 16],
}

/// Number of entries of `aclallocPoolConfig.roundup_power2_divisions`.
pub const ACLALLOC_ROUNDUP_INTERVALS: usize = 16;
const _: () = assert!(ACLALLOC_ROUNDUP_INTERVALS == crate::pool::roundup::ROUNDUP_INTERVALS);

impl From<PoolConfig> for aclallocPoolConfig {
    fn from(c: PoolConfig) -> Self {
        let (memory_limit, memory_fraction) = match c.limit {
            Limit::None => (0, 0.0),
            Limit::Bytes(b) => (b, 0.0),
            Limit::Fraction(f) => (0, f),
        };
        aclallocPoolConfig {
            max_split_size: if c.max_split_size == usize::MAX {
                0
            } else {
                c.max_split_size
            },
            garbage_collection_threshold: c.garbage_collection_threshold,
            memory_limit,
            memory_fraction,
            expandable_segments: i32::from(c.expandable_segments),
            roundup_power2_divisions: c.roundup_power2_divisions.0,
        }
    }
}

impl TryFrom<aclallocPoolConfig> for PoolConfig {
    type Error = Error;
    fn try_from(c: aclallocPoolConfig) -> Result<Self> {
        let invalid = |param, reason| Error::InvalidParam { param, reason };
        if c.max_split_size != 0 && c.max_split_size <= crate::pool::SMALL_SIZE {
            return Err(invalid(
                "config->max_split_size",
                "It must be 0 or larger than 1 MiB",
            ));
        }
        let gc = c.garbage_collection_threshold;
        if !(gc == 0.0 || (gc > 0.0 && gc < 1.0)) {
            return Err(invalid(
                "config->garbage_collection_threshold",
                "It must be 0 or in (0, 1)",
            ));
        }
        let limit = if c.memory_limit != 0 {
            Limit::Bytes(c.memory_limit)
        } else if c.memory_fraction != 0.0 {
            Limit::Fraction(c.memory_fraction)
                .validate()
                .map_err(|_| invalid("config->memory_fraction", "It must be 0 or in (0, 1]"))?
        } else {
            Limit::None
        };
        let divisions = c.roundup_power2_divisions;
        if divisions.iter().any(|&d| d != 0 && !d.is_power_of_two()) {
            return Err(invalid(
                "config->roundup_power2_divisions",
                "Each entry must be 0 or a power of two (the divisions of one power-of-two size interval)",
            ));
        }
        Ok(PoolConfig {
            roundup_power2_divisions: RoundupDivisions(divisions),
            max_split_size: if c.max_split_size == 0 {
                usize::MAX
            } else {
                c.max_split_size
            },
            garbage_collection_threshold: gc,
            limit,
            expandable_segments: match c.expandable_segments {
                0 => false,
                1 => true,
                _ => {
                    return Err(invalid(
                        "config->expandable_segments",
                        "It must be 0 (fixed segments) or 1 (expandable segments)",
                    ))
                }
            },
        })
    }
}

/// Fills `config` with the defaults (PyTorch's: no max split size, no garbage
/// collection, no limit) and then the settings of the environment variable
/// `ACLALLOC_ALLOC_CONF`, e.g.
/// `max_split_size_mb:128,garbage_collection_threshold:0.8,memory_fraction:0.9`
/// (keys include max_split_size_mb, garbage_collection_threshold,
/// memory_limit_mb, memory_fraction, expandable_segments and
/// roundup_power2_divisions; a `PYTORCH_NPU_ALLOC_CONF` string works
/// unchanged). A malformed variable: `ACL_ERROR_INVALID_PARAM`, nothing written.
///
/// # Safety
/// `config` must be NULL or point to writable memory for an `aclallocPoolConfig`.
#[no_mangle]
pub unsafe extern "C" fn aclallocPoolConfigInit(config: *mut aclallocPoolConfig) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract.
        unsafe {
            args::write_out(config, "config", || {
                Ok(PoolConfig::default().from_env()?.into())
            })
        }
    })
}
