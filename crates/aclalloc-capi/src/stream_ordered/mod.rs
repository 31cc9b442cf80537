//! CANN's stream-ordered memory pools (`acl/acl_rt_memory_soma.h`) on the
//! host runtime, each served by one of aclalloc's caching pools.
//!
//! An `aclrtMemPool` handle is the caching pool's own handle, so aclalloc's
//! pool API (statistics, snapshots, history) reads it too. This module keeps
//! what CANN adds: the device, the reuse switches and the release
//! threshold. The caching pool knows each live block's stream
//! (`Pool::free_on`), so a free, which names only the address, asks the
//! pool this thread allocated from last, then the others.
//!
//! Stream order without waiting: a block is allocated at once for work that
//! the stream runs later. A free on the stream it was allocated on gives it
//! back at once, to that stream only: the pool hands a stream's freed
//! blocks to that stream alone, and its later work runs after the work that
//! used the block. A free on another stream is queued on that stream (the
//! export queues [`complete_free`]), so the block comes back when the stream
//! reaches the free. Another stream takes memory a stream freed once it is
//! ordered after the free: it waited on an event recorded after it, or the
//! freeing stream was synchronized since (the pool's cross-stream reuse,
//! `aclalloc-pool`'s `cross_stream.rs`, by whole free segments). With
//! internal dependencies on, the pool makes the allocating stream wait for
//! the freeing one before it would grow ([`set_insert_wait`]), and then
//! takes that memory. Allocations made while their stream captures are the
//! captured model's ([`graph`]).

pub mod graph;

use crate::base::error::{Error, Result};
use crate::base::table::WordMap;
use crate::base::types::*;
use crate::pool::acl::AclMemory;
use crate::pool::{handles, CrossStreamReuse, DeviceMemory, FreedOn, Limit, Pool, PoolConfig};
use parking_lot::{Mutex, RwLock};
use std::cell::Cell;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// What CANN's pool has beyond aclalloc's caching pool.
struct StreamOrdered {
    device: i32,
    follow_events: AtomicBool,
    opportunistic: AtomicBool,
    internal: AtomicBool,
    release_threshold: AtomicU64,
}

/// Live pools by handle (rarely written: create and destroy).
static POOLS: RwLock<Option<WordMap<Arc<StreamOrdered>>>> = RwLock::new(None);

const NOT_A_POOL: Error = Error::InvalidParam {
    param: "memPool",
    reason: "It is not a live memory pool (destroyed, or never returned by aclrtMemPoolCreate)",
};

/// How the runtime makes one stream wait for the work queued on another so
/// far (`waiter`, `source`; true once the wait is queued): the composition
/// root's, over the host runtime's events.
static INSERT_WAIT: std::sync::OnceLock<fn(usize, usize) -> bool> = std::sync::OnceLock::new();

/// Sets how a pool with internal dependencies on makes the allocating stream
/// wait for the freeing one (set once, at load).
pub fn set_insert_wait(insert_wait: fn(waiter: usize, source: usize) -> bool) {
    let _ = INSERT_WAIT.set(insert_wait);
}

/// The caching pool's cross-stream reuse for CANN's three switches.
fn reuse_of(s: &StreamOrdered) -> CrossStreamReuse {
    CrossStreamReuse {
        after_event_wait: s.follow_events.load(Ordering::Relaxed),
        after_synchronize: s.opportunistic.load(Ordering::Relaxed),
        insert_wait: INSERT_WAIT
            .get()
            .copied()
            .filter(|_| s.internal.load(Ordering::Relaxed)),
    }
}

fn invalid(param: &'static str, reason: &'static str) -> Error {
    Error::InvalidParam { param, reason }
}

thread_local! {
    /// The pool this thread allocated from last and its device (handles are
    /// never reused, so a destroyed pool's entry only ever names it).
    static LAST_POOL: Cell<(usize, i32)> = const { Cell::new((0, 0)) };
}

/// The device of live pool `pool`, from this thread's last allocation when
/// it was the same pool.
#[inline]
fn device_of(pool: usize) -> Result<i32> {
    let (last, device) = LAST_POOL.with(Cell::get);
    if last == pool && last != 0 {
        return Ok(device);
    }
    let device = state(pool)?.device;
    LAST_POOL.with(|c| c.set((pool, device)));
    Ok(device)
}

/// The caching pool behind live handle `pool`, refused in CANN's terms.
fn live_pool(pool: usize) -> Result<handles::SharedPool> {
    handles::get(pool as *mut std::ffi::c_void).map_err(|_| NOT_A_POOL)
}

/// Runs `f` on the caching pool behind live handle `pool`, refused in CANN's terms.
fn with_live_pool<R>(pool: usize, f: impl FnOnce(&Pool) -> R) -> Result<R> {
    handles::with(pool as *mut std::ffi::c_void, f).map_err(|_| NOT_A_POOL)
}

fn state(pool: usize) -> Result<Arc<StreamOrdered>> {
    POOLS
        .read()
        .as_ref()
        .and_then(|m| m.get(&pool).cloned())
        .ok_or(NOT_A_POOL)
}

/// Checks `props` as CANN does, field by field, and creates the pool on the
/// calling thread's current device, which must be the one `props` names.
pub fn create(props: &aclrtMemPoolProps) -> Result<usize> {
    if props.allocType != ACL_MEM_ALLOCATION_TYPE_PINNED {
        return Err(invalid(
            "poolProps.allocType",
            "It must be ACL_MEM_ALLOCATION_TYPE_PINNED",
        ));
    }
    if props.handleType != ACL_MEM_HANDLE_TYPE_NONE {
        return Err(invalid(
            "poolProps.handleType",
            "It must be ACL_MEM_HANDLE_TYPE_NONE (a pool's memory is not exported)",
        ));
    }
    if props.location.r#type != ACL_MEM_LOCATION_TYPE_DEVICE {
        return Err(invalid(
            "poolProps.location.type",
            "It must be ACL_MEM_LOCATION_TYPE_DEVICE",
        ));
    }
    if props.reserved.iter().any(|&b| b != 0) {
        return Err(invalid("poolProps.reserved", "Every byte of it must be 0"));
    }
    let memory = AclMemory::current()?;
    let device = props.location.id as i32;
    if memory.device() != device {
        return Err(invalid(
            "poolProps.location.id",
            "It is not the current device: the host runtime grows a pool on the current device, so set it first (aclrtSetDevice)",
        ));
    }
    let mut config = PoolConfig::default();
    if props.maxSize != 0 {
        config.limit = Limit::Bytes(props.maxSize);
    }
    let pool = Pool::new(config, memory)?;
    // The three reuse switches start on (CUDA's defaults; CANN gives none).
    let new = Arc::new(StreamOrdered {
        device,
        follow_events: AtomicBool::new(true),
        opportunistic: AtomicBool::new(true),
        internal: AtomicBool::new(true),
        release_threshold: AtomicU64::new(0),
    });
    pool.set_cross_stream_reuse(reuse_of(&new));
    crate::history::env::start_from_env("the memory pool", |n| pool.record_history(n))?;
    let handle = handles::insert(pool)?.get();
    POOLS
        .write()
        .get_or_insert_with(WordMap::default)
        .insert(handle, new);
    Ok(handle)
}

/// Destroys `pool`; refused while blocks allocated from it are not freed
/// (a free queued on a stream counts until the stream runs it).
pub fn destroy(pool: usize) -> Result<()> {
    state(pool)?;
    let forget = || {
        if let Some(m) = POOLS.write().as_mut() {
            m.remove(&pool);
        }
    };
    // Destroyed through aclalloc's own API (the handle is a caching pool's):
    // nothing is left but this module's entry.
    let p = live_pool(pool).inspect_err(|_| forget())?;
    p.close_if_idle().map_err(|count| Error::StillInUse {
        what: "Blocks allocated from the pool and not freed",
        count,
    })?;
    forget();
    handles::remove(pool as *mut std::ffi::c_void)
}

/// A block of `size` bytes from `pool` for work queued on `stream` after
/// this call (`stream`: the value of a live stream, resolved by the caller).
pub fn malloc_async(pool: usize, stream: NonZeroUsize, size: usize) -> Result<NonZeroUsize> {
    if size == 0 {
        return Err(invalid("size", "It must be greater than 0"));
    }
    let device = device_of(pool)?;
    if crate::base::device_port::current_device() != Some(device) {
        return Err(invalid(
            "memPool",
            "Its device is not the current device (set it with aclrtSetDevice first)",
        ));
    }
    // A pool destroyed since this thread cached its device is refused here.
    let addr = with_live_pool(pool, |p| p.malloc_on(stream.get(), size))??;
    if PENDING_COUNT.load(Ordering::Acquire) != 0 {
        // The pool handed the address out again, so a queued free that was
        // giving it back has: its entry goes (see `complete_free`).
        let mut pending = PENDING.lock();
        if let Some(m) = pending.as_mut() {
            if m.get(&addr.get()).is_some_and(|e| e.returning) {
                m.remove(&addr.get());
                PENDING_COUNT.fetch_sub(1, Ordering::Release);
            }
        }
    }
    Ok(addr)
}

/// What [`free_async`] decided.
pub enum Freed {
    /// Back in the pool now: the free is on the block's own stream.
    Now,
    /// Queue [`complete_free`] with this token on the freeing stream.
    WhenReached(usize),
}

const NOT_LIVE: Error = Error::InvalidParam {
    param: "ptr",
    reason: "It is not a live block of a memory pool (not from aclrtMemPoolMallocAsync, or already freed)",
};

/// Frees `ptr` on `stream` in whichever pool handed it out: at once on the
/// stream it was allocated on, else (a free on another stream) it stays
/// live until [`complete_free`]. A second free of one block, an address no
/// pool handed out (`aclrtMalloc`'s included) and a destroyed pool's block
/// are refused; nothing changes then.
pub fn free_async(ptr: NonZeroUsize, stream: NonZeroUsize) -> Result<Freed> {
    let addr = ptr.get();
    // Still live in its pool, but already freed on a stream that has not
    // reached the free.
    if PENDING_COUNT.load(Ordering::Acquire) != 0
        && PENDING
            .lock()
            .as_ref()
            .is_some_and(|m| m.get(&addr).is_some())
    {
        return Err(NOT_LIVE);
    }
    let (last, _) = LAST_POOL.with(Cell::get);
    let free_in = |pool: usize| -> Option<FreedOn> {
        if pool == 0 {
            return None;
        }
        handles::with(pool as *mut std::ffi::c_void, |p| {
            p.free_on(addr, stream.get())
        })
        .ok()?
        .ok()
    };
    let (pool, freed) = match free_in(last) {
        Some(freed) => (last, freed),
        None => {
            let others: Vec<usize> = POOLS
                .read()
                .as_ref()
                .map(|m| m.iter().map(|(&k, _)| k).filter(|&k| k != last).collect())
                .unwrap_or_default();
            others
                .into_iter()
                .find_map(|pool| free_in(pool).map(|freed| (pool, freed)))
                .ok_or(NOT_LIVE)?
        }
    };
    match freed {
        FreedOn::Freed => Ok(Freed::Now),
        FreedOn::LiveOn(_) => {
            // Kept until the stream runs the free; the address is the token.
            let entry = Pending {
                pool,
                number: NUMBERS.fetch_add(1, Ordering::Relaxed),
                returning: false,
            };
            PENDING
                .lock()
                .get_or_insert_with(WordMap::default)
                .insert(addr, entry);
            PENDING_COUNT.fetch_add(1, Ordering::Release);
            Ok(Freed::WhenReached(addr))
        }
    }
}

/// A free queued on another stream than the block's.
#[derive(Clone, Copy)]
struct Pending {
    /// The pool's handle.
    pool: usize,
    /// Unique in the process: tells this free from a later one of the
    /// same address.
    number: u64,
    /// The freeing stream has begun giving the block back.
    returning: bool,
}

/// Blocks whose free is queued on a stream and has not completed: address
/// → the free. An entry stays until the pool has the block back, so that a
/// second free is refused at every moment before.
static PENDING: Mutex<Option<WordMap<Pending>>> = Mutex::new(None);
/// How many entries `PENDING` has, so a free reads it only when some exist.
static PENDING_COUNT: AtomicUsize = AtomicUsize::new(0);
/// The next free's number.
static NUMBERS: AtomicU64 = AtomicU64::new(1);

/// Takes `token`'s entry out of the queued frees when `keep` says so.
fn take_pending_if(token: usize, keep: impl FnOnce(&Pending) -> bool) {
    let mut pending = PENDING.lock();
    let Some(m) = pending.as_mut() else {
        return;
    };
    if m.get(&token).is_some_and(keep) {
        m.remove(&token);
        PENDING_COUNT.fetch_sub(1, Ordering::Release);
    }
}

/// Undoes [`free_async`]'s [`Freed::WhenReached`] when the free could not be
/// queued: the block is live again.
pub fn undo_free(token: usize) {
    take_pending_if(token, |_| true);
}

/// The queued part of a free on another stream than the block's: run by
/// that stream when it reaches the free, it gives the block back to its
/// pool (to the stream it was allocated on).
///
/// The entry is marked, not removed, while the pool takes the block, and
/// goes after: removed first, a second free in between found the block
/// still live and was accepted (a double free). Once the pool has the
/// block it may hand the address out again before the entry goes:
/// `malloc_async` then removes it, and a free of the new block queued
/// meanwhile has a new entry, which the number keeps from going here.
pub fn complete_free(token: usize) {
    let marked = PENDING.lock().as_mut().and_then(|m| {
        let entry = m.get_mut(&token)?;
        entry.returning = true;
        Some((entry.pool, entry.number))
    });
    let Some((pool, number)) = marked else {
        return;
    };
    let _ = handles::with(pool as *mut std::ffi::c_void, |p| p.free(token));
    take_pending_if(token, |e| e.number == number);
}

/// `aclrtMemPoolTrimTo`: gives free memory back to the device until at
/// most `keep` bytes stay reserved (queued work on freed blocks runs first:
/// the device frees wait for it).
pub fn trim_to(pool: usize, keep: usize) -> Result<()> {
    state(pool)?;
    with_live_pool(pool, |p| p.trim(keep))?;
    Ok(())
}

/// At a synchronize: every pool keeps at most its release threshold of
/// free memory (CANN: "at the next synchronize, free memory above the
/// threshold goes back to the device").
pub fn synchronized() {
    let pools: Vec<(usize, u64)> = match POOLS.read().as_ref() {
        Some(m) => m
            .iter()
            .map(|(&h, s)| (h, s.release_threshold.load(Ordering::Relaxed)))
            .collect(),
        None => return,
    };
    for (handle, threshold) in pools {
        let _ = handles::with(handle as *mut std::ffi::c_void, |p| {
            let keep = p
                .memory_allocated()
                .saturating_add(threshold.min(usize::MAX as u64) as usize);
            if p.memory_reserved() > keep {
                p.trim(keep);
            }
        });
    }
}

/// The value of an attribute: a `uint32_t` switch or a `uint64_t` figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrValue {
    /// `uint32_t`.
    Switch(u32),
    /// `uint64_t`.
    Bytes(u64),
}

/// Whether `attr` is a `uint32_t` attribute (else `uint64_t`); unknown
/// values are refused.
pub fn attr_is_switch(attr: aclrtMemPoolAttr) -> Result<bool> {
    match attr {
        ACL_RT_MEM_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES
        | ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC
        | ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES => Ok(true),
        ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD..=ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH => Ok(false),
        _ => Err(invalid("attr", "It is not an aclrtMemPoolAttr value")),
    }
}

/// `aclrtMemPoolGetAttr`.
pub fn get_attr(pool: usize, attr: aclrtMemPoolAttr) -> Result<AttrValue> {
    let s = state(pool)?;
    let p = live_pool(pool)?;
    let flag = |b: &AtomicBool| AttrValue::Switch(b.load(Ordering::Relaxed) as u32);
    let bytes = |n: usize| AttrValue::Bytes(n as u64);
    Ok(match attr {
        ACL_RT_MEM_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES => flag(&s.follow_events),
        ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC => flag(&s.opportunistic),
        ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES => flag(&s.internal),
        ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD => {
            AttrValue::Bytes(s.release_threshold.load(Ordering::Relaxed))
        }
        ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT => bytes(p.memory_reserved()),
        ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_HIGH => bytes(p.max_memory_reserved()),
        ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT => bytes(p.memory_allocated()),
        ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH => bytes(p.max_memory_allocated()),
        _ => return Err(invalid("attr", "It is not an aclrtMemPoolAttr value")),
    })
}

/// `aclrtMemPoolSetAttr`. A switch takes 0 or 1; the two `HIGH` figures
/// take only 0, which resets both peaks to the current figures (the pool
/// keeps its peaks together); the `CURRENT` figures are read-only.
pub fn set_attr(pool: usize, attr: aclrtMemPoolAttr, value: AttrValue) -> Result<()> {
    let s = state(pool)?;
    let p = live_pool(pool)?;
    let switch = |b: &AtomicBool| match value {
        AttrValue::Switch(v @ (0 | 1)) => {
            b.store(v == 1, Ordering::Relaxed);
            Ok(())
        }
        _ => Err(invalid("value", "A reuse switch takes 0 or 1")),
    };
    match attr {
        ACL_RT_MEM_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES => switch(&s.follow_events)?,
        ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC => switch(&s.opportunistic)?,
        ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES => switch(&s.internal)?,
        ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD => match value {
            AttrValue::Bytes(v) => s.release_threshold.store(v, Ordering::Relaxed),
            AttrValue::Switch(_) => return Err(invalid("value", "It must be a uint64_t")),
        },
        ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_HIGH | ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH => match value {
            AttrValue::Bytes(0) => p.reset_peak_stats(),
            _ if attr == ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH => {
                return Err(invalid(
                    "value",
                    "ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH (a peak) can only be reset, by writing 0",
                ))
            }
            _ => return Err(invalid(
                "value",
                "ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_HIGH (a peak) can only be reset, by writing 0",
            )),
        },
        ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT | ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT => {
            return Err(invalid("attr", "It is read-only"))
        }
        _ => return Err(invalid("attr", "It is not an aclrtMemPoolAttr value")),
    }
    p.set_cross_stream_reuse(reuse_of(&s));
    Ok(())
}
