//! Reading and resetting a pool's statistics: `aclallocPoolGetStats`, the
//! key/value form, one key, the PyTorch-named shortcuts.

#![allow(non_snake_case, non_camel_case_types)]

use super::aclallocPool;
use crate::base::boundary::ffi_boundary;
use crate::base::error::Error;
use crate::ffi::boundary::boundary;
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args::{self, Out, OutSlice};
use crate::pool::stats::{c_keys, PoolStats, KEY_COUNT};
use crate::pool::{handles, Pool};
use std::ffi::c_char;

/// Index of the aggregate entry in each `aclallocStat[3]` array.
pub const ACLALLOC_STAT_ALL: usize = 0;
/// Index of the small-pool entry (blocks of at most 1 MiB, from 2 MiB segments).
pub const ACLALLOC_STAT_SMALL_POOL: usize = 1;
/// Index of the large-pool entry.
pub const ACLALLOC_STAT_LARGE_POOL: usize = 2;
/// Number of entries `aclallocPoolGetStatsKeyValues` reports.
pub const ACLALLOC_STAT_KEY_COUNT: usize = 121;
const _: () = assert!(ACLALLOC_STAT_KEY_COUNT == KEY_COUNT);

/// One statistic of `aclallocPoolGetStatsKeyValues`: a PyTorch key name such
/// as `"allocated_bytes.all.peak"` (a static string) and its value.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct aclallocStatEntry {
    /// The key; valid for the life of the process.
    pub key: *const c_char,
    /// The value.
    pub value: i64,
}

/// Copies the pool's statistics (a consistent snapshot).
///
/// # Safety
/// `stats` must be NULL or point to writable memory for an `aclallocPoolStats`.
#[no_mangle]
pub unsafe extern "C" fn aclallocPoolGetStats(
    pool: aclallocPool,
    stats: *mut PoolStats,
) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract.
        unsafe { args::write_out(stats, "stats", || handles::with(pool, |p| p.stats())) }
    })
}

/// The statistics as key/value pairs with PyTorch's key names, sorted by key:
/// writes at most `capacity` entries to `entries` and the total number
/// (`ACLALLOC_STAT_KEY_COUNT`) to `count`. `entries` may be NULL when
/// `capacity` is 0, to ask for the count.
///
/// # Safety
/// `entries` must be valid for `capacity` writes; `count` must be writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocPoolGetStatsKeyValues(
    pool: aclallocPool,
    entries: *mut aclallocStatEntry,
    capacity: usize,
    count: *mut usize,
) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract.
        let count = unsafe { Out::required(count, "count") }?;
        // SAFETY: the caller's contract.
        let entries = unsafe { OutSlice::new(entries, capacity, "entries") }?;
        let kv = handles::with(pool, |p| p.stats())?.key_values();
        count.write(kv.len());
        entries.fill(
            c_keys()
                .iter()
                .zip(kv)
                .map(|(key, (_, value))| aclallocStatEntry {
                    key: key.as_ptr(),
                    value,
                }),
        );
        Ok(())
    })
}

/// One statistic by its PyTorch key name (e.g. `"reserved_bytes.all.peak"`).
/// An unknown key: `ACL_ERROR_INVALID_PARAM`.
///
/// # Safety
/// `key` must be a NUL-terminated string; `value` must be writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocPoolGetStat(
    pool: aclallocPool,
    key: *const c_char,
    value: *mut i64,
) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(value, "value") }?;
        // SAFETY: the caller's contract.
        let key = unsafe { args::c_str(key, "key") }?;
        let v = handles::with(pool, |p| p.stats())?
            .get(key)
            .ok_or(Error::InvalidParam {
                param: "key",
                reason: "It is not a statistic's name (see aclallocPoolGetStatsKeyValues)",
            })?;
        out.write(v);
        Ok(())
    })
}

/// Sets every peak statistic to its current value.
#[no_mangle]
pub extern "C" fn aclallocPoolResetPeakStats(pool: aclallocPool) -> aclError {
    ffi_boundary!(|| {
        handles::with(pool, |p| p.reset_peak_stats())?;
        Ok(())
    })
}

/// Zeroes the accumulated statistics (`allocated`, `freed` totals and the
/// retry, OOM and device call counters).
#[no_mangle]
pub extern "C" fn aclallocPoolResetAccumulatedStats(pool: aclallocPool) -> aclError {
    ffi_boundary!(|| {
        handles::with(pool, |p| p.reset_accumulated_stats())?;
        Ok(())
    })
}

/// The body of a byte-count export `$name(pool, bytes)`: `$f` of the pool.
macro_rules! shortcut {
    ($name:ident($pool:ident, $bytes:ident), $f:path) => {
        boundary(stringify!($name), || {
            // SAFETY: `bytes` is NULL or writable, the export's contract.
            unsafe { args::write_out($bytes, "bytes", || handles::with($pool, |p| $f(p))) }
        })
    };
}

/// Bytes handed out now.
///
/// # Safety
/// `bytes` must be writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocPoolMemoryAllocated(
    pool: aclallocPool,
    bytes: *mut usize,
) -> aclError {
    shortcut!(
        aclallocPoolMemoryAllocated(pool, bytes),
        Pool::memory_allocated
    )
}

/// The peak of the bytes handed out.
///
/// # Safety
/// `bytes` must be writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocPoolMaxMemoryAllocated(
    pool: aclallocPool,
    bytes: *mut usize,
) -> aclError {
    shortcut!(
        aclallocPoolMaxMemoryAllocated(pool, bytes),
        Pool::max_memory_allocated
    )
}

/// Bytes held from the device now.
///
/// # Safety
/// `bytes` must be writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocPoolMemoryReserved(
    pool: aclallocPool,
    bytes: *mut usize,
) -> aclError {
    shortcut!(
        aclallocPoolMemoryReserved(pool, bytes),
        Pool::memory_reserved
    )
}

/// The peak of the bytes held from the device.
///
/// # Safety
/// `bytes` must be writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocPoolMaxMemoryReserved(
    pool: aclallocPool,
    bytes: *mut usize,
) -> aclError {
    shortcut!(
        aclallocPoolMaxMemoryReserved(pool, bytes),
        Pool::max_memory_reserved
    )
}
