//! The caching pool's C API (`aclallocPool*`).
//!
//! ```c
//! aclallocPoolConfig cfg;
//! aclallocPoolConfigInit(&cfg);            // defaults + ACLALLOC_ALLOC_CONF
//! cfg.memory_fraction = 0.9;
//! aclallocPool pool; aclrtAllocatorDesc desc;
//! aclallocPoolCreate(&cfg, &pool, &desc);  // desc is complete: obj + 4 callbacks
//! aclrtAllocatorRegister(stream_a, desc);
//! aclrtAllocatorRegister(stream_b, desc);  // one pool, several streams
//! ...
//! aclallocPoolGetStats(pool, &stats);
//! aclallocPoolEmptyCache(pool);
//! ```
//!
//! The pool's handle is the descriptor's allocator object; the callbacks look
//! it up in a lock-free table of live pools. A block handle is the block's
//! device address, so `getAddrFromBlock` is the identity, and `free` looks the
//! address up among the pool's live blocks: a foreign block or a double free
//! is reported through `aclGetRecentErrMsg` and changes nothing.
#![allow(non_snake_case, non_camel_case_types)]

use super::args::{self, write_text, Out, OutSlice};
use super::boundary::boundary;
use super::types::*;
use crate::core::descriptor::{AllocatorObj, Callbacks};
use crate::core::error::{Error, Result};
use crate::core::serving;
use crate::pool::roundup::RoundupDivisions;
use crate::pool::stats::{c_keys, PoolStats, KEY_COUNT};
use crate::pool::{handles, Limit, Pool, PoolConfig};
use crate::registry::api::global;
use std::ffi::{c_char, c_void};

/// A caching pool handle (also the allocator object of its descriptor).
pub type aclallocPool = *mut c_void;

/// Index of the aggregate entry in each `aclallocStat[3]` array.
pub const ACLALLOC_STAT_ALL: usize = 0;
/// Index of the small-pool entry (blocks of at most 1 MiB, from 2 MiB segments).
pub const ACLALLOC_STAT_SMALL_POOL: usize = 1;
/// Index of the large-pool entry.
pub const ACLALLOC_STAT_LARGE_POOL: usize = 2;
/// Number of entries `aclallocPoolGetStatsKeyValues` reports.
pub const ACLALLOC_STAT_KEY_COUNT: usize = 121;
const _: () = assert!(ACLALLOC_STAT_KEY_COUNT == KEY_COUNT);
/// The `"version"` of the JSON `aclallocPoolSnapshot` writes (2: hex
/// strings for addresses and streams, `device_traces` and `history`).
pub const ACLALLOC_SNAPSHOT_VERSION: u32 = 2;
const _: () = assert!(ACLALLOC_SNAPSHOT_VERSION == crate::pool::snapshot::SNAPSHOT_VERSION);

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
    /// 1: expandable segments (PyTorch's `expandable_segments:True`): per
    /// stream one reservation of address space mapped page by page, so
    /// memory freed anywhere can serve a request of any size. 0: fixed
    /// segments.
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
    boundary("aclallocPoolConfigInit", || {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(config, "config") }?;
        out.write(PoolConfig::default().from_env()?.into());
        Ok(())
    })
}

/// Creates a caching pool over the memory of the calling thread's current
/// device (`aclrtMalloc`/`aclrtFree`; no current device:
/// `ACL_ERROR_RT_CONTEXT_NULL`) and a complete allocator descriptor for it: its object is the pool and its
/// alloc, free, allocAdvise and getAddrFromBlock functions are
/// `aclallocPoolAlloc`, `aclallocPoolFree`, `aclallocPoolAllocAdvise` and
/// `aclallocPoolGetAddrFromBlock`. Pass it to `aclrtAllocatorRegister` for as
/// many streams as should share the pool; destroy it with
/// `aclrtAllocatorDestroyDesc` when no more registrations are needed.
/// `config` NULL: the defaults and `ACLALLOC_ALLOC_CONF`, as
/// `aclallocPoolConfigInit` gives. Nothing is written unless the call succeeds.
///
/// # Safety
/// `config` must be NULL or point to an `aclallocPoolConfig`; `pool` and
/// `allocatorDesc` must point to writable memory of their types.
#[no_mangle]
pub unsafe extern "C" fn aclallocPoolCreate(
    config: *const aclallocPoolConfig,
    pool: *mut aclallocPool,
    allocatorDesc: *mut aclrtAllocatorDesc,
) -> aclError {
    boundary("aclallocPoolCreate", || {
        // SAFETY: the caller's contract.
        let pool_out = unsafe { Out::required(pool, "pool") }?;
        let desc_out = unsafe { Out::required(allocatorDesc, "allocatorDesc") }?;
        // SAFETY: NULL or an `aclallocPoolConfig`, the caller's contract.
        let config = match unsafe { args::optional_input(config) } {
            None => PoolConfig::default().from_env()?,
            Some(config) => PoolConfig::try_from(config)?,
        };
        let device = crate::pool::acl::AclMemory::current()?;
        let new_pool = Pool::new(config, device)?;
        new_pool.record_history(crate::history::env::max_entries_from_env()?)?;
        let handle = handles::insert(new_pool)?;
        let obj = AllocatorObj::new(handle.get() as *mut c_void).ok_or(Error::Internal {
            reason: "a pool handle was zero",
        })?;
        let desc = pool_descriptor(obj).inspect_err(|_| {
            let _ = destroy(handle.get() as *mut c_void);
        })?;
        pool_out.write(handle.get() as *mut c_void);
        desc_out.write(desc.as_ptr());
        Ok(())
    })
}

/// Creates a descriptor for one stream's use of a pool: the same pool and
/// callbacks, but an allocator object that names `stream`, so the pool knows
/// which stream each block serves even when the runtime that calls the
/// callbacks is not this library's (CANN's callbacks carry no stream). Blocks
/// freed through it are reused only for `stream`, which keeps a block that
/// CANN frees in stream order away from kernels on other streams. Register it
/// on `stream`, and destroy it with `aclrtAllocatorDestroyDesc`; it stops
/// working when the pool is destroyed.
///
/// # Safety
/// `allocatorDesc` must point to writable memory for an `aclrtAllocatorDesc`.
#[no_mangle]
pub unsafe extern "C" fn aclallocPoolCreateStreamDesc(
    pool: aclallocPool,
    stream: aclrtStream,
    allocatorDesc: *mut aclrtAllocatorDesc,
) -> aclError {
    boundary("aclallocPoolCreateStreamDesc", || {
        // SAFETY: the caller's contract.
        let desc_out = unsafe { Out::required(allocatorDesc, "allocatorDesc") }?;
        let stream = args::stream(stream)?;
        let view = handles::insert_view(pool, stream.get())?;
        let obj = AllocatorObj::new(view.get() as *mut c_void).ok_or(Error::Internal {
            reason: "a pool handle was zero",
        })?;
        let desc = pool_descriptor(obj)?;
        desc_out.write(desc.as_ptr());
        Ok(())
    })
}

/// A descriptor whose object is `obj` and whose callbacks are the pool's.
fn pool_descriptor(obj: AllocatorObj) -> Result<crate::registry::DescriptorHandle> {
    let api = global();
    let desc = api.create_descriptor()?;
    api.update_descriptor(desc, |d| {
        d.obj = Some(obj);
        d.alloc = Some(aclallocPoolAlloc);
        d.free = Some(aclallocPoolFree);
        d.alloc_advise = Some(aclallocPoolAllocAdvise);
        d.get_addr_from_block = Some(aclallocPoolGetAddrFromBlock);
    })?;
    Ok(desc)
}

fn destroy(pool: aclallocPool) -> Result<()> {
    if handles::is_view(pool)? {
        return Err(Error::InvalidParam {
            param: "pool",
            reason: "It is a stream descriptor's object, not a pool (destroy the descriptor with aclrtAllocatorDestroyDesc)",
        });
    }
    let p = handles::get(pool)?;
    p.close_if_idle()
        .map_err(|blocks| Error::PoolInUse { blocks })?;
    handles::remove(pool)
}

/// Destroys a pool: returns all its memory to the device. Refused
/// (`ACL_ERROR_FAILURE`, nothing changes) while blocks are still allocated.
/// Streams registered with its descriptor must be unregistered first: from
/// now on its callbacks fail (alloc returns NULL).
#[no_mangle]
pub extern "C" fn aclallocPoolDestroy(pool: aclallocPool) -> aclError {
    boundary("aclallocPoolDestroy", || destroy(pool))
}

/// The pool's alloc callback: a block of at least `size` bytes (rounded up to
/// 512), or NULL with a message for `aclGetRecentErrMsg` that gives the bytes
/// requested, allocated, reserved and the limit.
///
/// Streams: CANN gives the callbacks no stream, and frees blocks in stream
/// order (right after the launch is enqueued), so a block freed by one
/// stream's launch must not go to another stream's kernel that may run at the
/// same time. When called from `aclallocLaunchKernel`, the pool knows the
/// launch's stream and keeps each stream's freed blocks for that stream
/// (PyTorch's per-stream pools); called from anywhere else, the stream is
/// unknown (0) and every such caller shares one set of blocks, which is right
/// for synchronous use and for one pool per stream. A descriptor from
/// `aclallocPoolCreateStreamDesc` names its stream itself, whoever calls.
#[no_mangle]
pub extern "C" fn aclallocPoolAlloc(allocator: aclrtAllocator, size: usize) -> *mut c_void {
    boundary("aclallocPoolAlloc", || {
        let (pool, bound) = handles::get_with_stream(allocator)?;
        let stream = if bound != 0 {
            bound
        } else {
            serving::current_raw()
        };
        Ok(pool.malloc_on(stream, size)?.get() as *mut c_void)
    })
}

/// The pool's free callback. A block that is not a live block of this pool
/// (foreign, or already freed) is reported through `aclGetRecentErrMsg` and
/// ignored.
#[no_mangle]
pub extern "C" fn aclallocPoolFree(allocator: aclrtAllocator, block: aclrtAllocatorBlock) {
    boundary("aclallocPoolFree", || {
        let pool = handles::get(allocator)?;
        if block.is_null() {
            return Err(Error::NullPointer { param: "block" });
        }
        pool.free(block as usize)
    })
}

/// The pool's allocAdvise callback: the block at `addr` if that range is free
/// in the pool, otherwise as `aclallocPoolAlloc`.
#[no_mangle]
pub extern "C" fn aclallocPoolAllocAdvise(
    allocator: aclrtAllocator,
    size: usize,
    addr: aclrtAllocatorAddr,
) -> *mut c_void {
    boundary("aclallocPoolAllocAdvise", || {
        Ok(handles::get(allocator)?
            .malloc_at(size, addr as usize)?
            .get() as *mut c_void)
    })
}

/// The pool's getAddrFromBlock callback: a pool block is its device address.
#[no_mangle]
pub extern "C" fn aclallocPoolGetAddrFromBlock(block: aclrtAllocatorBlock) -> *mut c_void {
    block
}

/// The pool's C callbacks for the pool whose handle is `obj`, as a
/// descriptor registers them (the default allocator's pool uses them; the
/// composition root hands this function down to it).
pub(crate) fn callbacks_of(obj: AllocatorObj) -> Callbacks {
    Callbacks {
        obj,
        alloc: aclallocPoolAlloc,
        free: aclallocPoolFree,
        alloc_advise: Some(aclallocPoolAllocAdvise),
        get_addr_from_block: aclallocPoolGetAddrFromBlock,
    }
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
    boundary("aclallocPoolGetStats", || {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(stats, "stats") }?;
        out.write(handles::get(pool)?.stats());
        Ok(())
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
    boundary("aclallocPoolGetStatsKeyValues", || {
        // SAFETY: the caller's contract.
        let count = unsafe { Out::required(count, "count") }?;
        let entries = unsafe { OutSlice::new(entries, capacity, "entries") }?;
        let kv = handles::get(pool)?.stats().key_values();
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
    boundary("aclallocPoolGetStat", || {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(value, "value") }?;
        let key = unsafe { args::c_str(key, "key") }?;
        let v = handles::get(pool)?
            .stats()
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
    boundary("aclallocPoolResetPeakStats", || {
        handles::get(pool)?.reset_peak_stats();
        Ok(())
    })
}

/// Zeroes the accumulated statistics (`allocated`, `freed` totals and the
/// retry, OOM and device call counters).
#[no_mangle]
pub extern "C" fn aclallocPoolResetAccumulatedStats(pool: aclallocPool) -> aclError {
    boundary("aclallocPoolResetAccumulatedStats", || {
        handles::get(pool)?.reset_accumulated_stats();
        Ok(())
    })
}

unsafe fn shortcut(
    function: &'static str,
    pool: aclallocPool,
    out: *mut usize,
    f: fn(&Pool) -> usize,
) -> aclError {
    boundary(function, || {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(out, "bytes") }?;
        out.write(f(handles::get(pool)?));
        Ok(())
    })
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
    unsafe {
        shortcut(
            "aclallocPoolMemoryAllocated",
            pool,
            bytes,
            Pool::memory_allocated,
        )
    }
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
    unsafe {
        shortcut(
            "aclallocPoolMaxMemoryAllocated",
            pool,
            bytes,
            Pool::max_memory_allocated,
        )
    }
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
    unsafe {
        shortcut(
            "aclallocPoolMemoryReserved",
            pool,
            bytes,
            Pool::memory_reserved,
        )
    }
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
    unsafe {
        shortcut(
            "aclallocPoolMaxMemoryReserved",
            pool,
            bytes,
            Pool::max_memory_reserved,
        )
    }
}

unsafe fn text(
    function: &'static str,
    pool: aclallocPool,
    buffer: *mut c_char,
    size: usize,
    length: *mut usize,
    make: fn(&Pool) -> String,
) -> aclError {
    boundary(function, || {
        // SAFETY: the caller's contract.
        let buffer = unsafe { OutSlice::new(buffer, size, "buffer") }?;
        let length = unsafe { Out::optional(length) };
        let text = make(handles::get(pool)?);
        args::write_optional(length, text.len());
        write_text(buffer, &text);
        Ok(())
    })
}

/// The statistics as a text table like PyTorch's `memory_summary()`. Works as
/// `snprintf`: writes at most `size - 1` bytes and a NUL to `buffer` and the
/// full length (without the NUL) to `length` (optional). `buffer` may be NULL
/// when `size` is 0, to ask for the length.
///
/// # Safety
/// `buffer` must be valid for `size` bytes; `length` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocPoolSummary(
    pool: aclallocPool,
    buffer: *mut c_char,
    size: usize,
    length: *mut usize,
) -> aclError {
    unsafe {
        text(
            "aclallocPoolSummary",
            pool,
            buffer,
            size,
            length,
            Pool::summary,
        )
    }
}

/// The segments, blocks and recorded history as JSON, like PyTorch's
/// `_snapshot()`: `{"version":2,"device":0,"segments":[{"device","address",
/// "total_size","stream","segment_type","is_expandable","mapped_size",
/// "unmapped_size","allocated_size","active_size",
/// "requested_size","blocks":[{"address","size","requested_size","state"}]}],
/// "device_traces":[[{"action","addr","size","block_size","stream",
/// "time_us"}]],"history":{"enabled","max_entries","entries","dropped"}}`
/// with `state` `"active_allocated"` or `"inactive"`, addresses and stream
/// handles as hex strings ("0x..."), one trace list per device index (see
/// `aclallocPoolRecordHistory`). `stream` is the handle of the stream whose launch
/// (`aclallocLaunchKernel`) made the segment; its blocks serve only that
/// stream. It is 0 for segments made by callback calls outside such a launch:
/// CANN's callbacks are not told the stream. Buffer handling as
/// `aclallocPoolSummary`.
///
/// # Safety
/// As `aclallocPoolSummary`.
#[no_mangle]
pub unsafe extern "C" fn aclallocPoolSnapshot(
    pool: aclallocPool,
    buffer: *mut c_char,
    size: usize,
    length: *mut usize,
) -> aclError {
    unsafe {
        text(
            "aclallocPoolSnapshot",
            pool,
            buffer,
            size,
            length,
            Pool::snapshot_json,
        )
    }
}

/// Records the pool's allocation history, like PyTorch's
/// `torch.cuda.memory._record_memory_history(max_entries=maxEntries)`: from
/// now on the last `maxEntries` events (`alloc`, `free_requested`,
/// `free_completed`, `segment_alloc`, `segment_free`, `oom`, each with
/// address, size, stream, device and time in microseconds) are kept in a
/// ring, older ones overwritten and counted as dropped. Every call discards
/// what was recorded before; `maxEntries` 0 switches recording off. The
/// ring (48 bytes per event) is allocated here, never while recording; when
/// it cannot be, `ACL_ERROR_BAD_ALLOC` and nothing changes.
/// `aclallocPoolSnapshot` writes the events as `device_traces`. Pools made by
/// `aclallocPoolCreate`, and the default pool, start recording at creation
/// when `ACLALLOC_RECORD_HISTORY=N` is set. A stream descriptor's object
/// names its pool here.
#[no_mangle]
pub extern "C" fn aclallocPoolRecordHistory(pool: aclallocPool, maxEntries: usize) -> aclError {
    boundary("aclallocPoolRecordHistory", || {
        handles::get(pool)?.record_history(maxEntries)
    })
}

/// Returns every wholly free cached segment to the device, and unmaps every
/// page of an expandable segment that holds no live block.
#[no_mangle]
pub extern "C" fn aclallocPoolEmptyCache(pool: aclallocPool) -> aclError {
    boundary("aclallocPoolEmptyCache", || {
        handles::get(pool)?.empty_cache();
        Ok(())
    })
}

/// Releases the address space of expandable segments that back no block
/// (torch_npu's `empty_virt_addr_cache`); their pages are unmapped first.
/// A pool with fixed segments has none: nothing happens.
#[no_mangle]
pub extern "C" fn aclallocPoolEmptyVirtAddrCache(pool: aclallocPool) -> aclError {
    boundary("aclallocPoolEmptyVirtAddrCache", || {
        handles::get(pool)?.empty_virt_addr_cache();
        Ok(())
    })
}

/// Returns wholly free cached segments, largest first, then unmaps pages of
/// expandable segments that hold no live block, until at most `keepBytes`
/// stay reserved (or nothing more can go).
#[no_mangle]
pub extern "C" fn aclallocPoolTrim(pool: aclallocPool, keepBytes: usize) -> aclError {
    boundary("aclallocPoolTrim", || {
        handles::get(pool)?.trim(keepBytes);
        Ok(())
    })
}

/// Limits what the pool may reserve to `bytes` (0: no limit). Memory already
/// reserved above it stays until freed and released.
#[no_mangle]
pub extern "C" fn aclallocPoolSetMemoryLimit(pool: aclallocPool, bytes: usize) -> aclError {
    boundary("aclallocPoolSetMemoryLimit", || {
        handles::get(pool)?.set_limit(if bytes == 0 {
            Limit::None
        } else {
            Limit::Bytes(bytes)
        })
    })
}

/// Limits what the pool may reserve to `fraction` (0, 1] of the device's
/// memory, like `torch.npu.set_per_process_memory_fraction`.
#[no_mangle]
pub extern "C" fn aclallocPoolSetMemoryFraction(pool: aclallocPool, fraction: f64) -> aclError {
    boundary("aclallocPoolSetMemoryFraction", || {
        let pool = handles::get(pool)?;
        pool.set_limit(Limit::Fraction(fraction))
            .map_err(|_| Error::InvalidParam {
                param: "fraction",
                reason: "It must be in (0, 1]",
            })
    })
}
