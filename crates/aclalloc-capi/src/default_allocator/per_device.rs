//! The default caching pool is one pool per device, as torch_npu keeps one
//! per device: a block freed while device 0 was current is never handed out
//! while device 1 is, and each device's memory use is its own pool's.
//!
//! The pool of a device is created the first time the default allocator
//! serves a thread whose current device it is (a pool grows with
//! `aclrtMalloc` on the calling thread's current device, so it must only
//! ever serve that device). The default allocator's object stays the first
//! pool's handle (what `aclallocGetDefaultAllocator` handed out before);
//! its callbacks pick the pool of the calling thread's device. A free goes
//! to the pool that holds the block, whichever device is current (workspaces
//! are freed on stream workers, which have no current device).

use super::backends::installed_pool_callbacks;
use crate::base::descriptor::{AllocatorObj, Callbacks};
use crate::base::errlog;
use crate::base::error::{Error, Result};
use crate::base::sync::statics::{AtomicPtr, AtomicUsize};
use crate::base::sync::Ordering;
use crate::plugin::context;
use crate::pool::acl::AclMemory;
use crate::pool::handles as pool_handles;
use crate::pool::{Pool, PoolConfig};
use parking_lot::Mutex;
use std::ffi::c_void;
use std::ptr;

/// Devices with a pool of their own; a device id beyond is refused.
pub const MAX_DEVICES: usize = 64;

/// Pool handle per device (0: none yet), read without a lock.
static POOLS: [AtomicUsize; MAX_DEVICES] = [const { AtomicUsize::new(0) }; MAX_DEVICES];
/// The same pools, for the fast paths: each is pinned (`handles::pin`: a
/// reference count never given back), so a pool found here stays valid.
static REFS: [AtomicPtr<Pool>; MAX_DEVICES] =
    [const { AtomicPtr::new(ptr::null_mut()) }; MAX_DEVICES];
/// The one pool while only one device has one (a free then needs no search);
/// null before the first pool and once a second exists.
static ONLY: AtomicPtr<Pool> = AtomicPtr::new(ptr::null_mut());
/// Serialises creating pools.
static CREATING: Mutex<()> = Mutex::new(());

/// The device slot of the calling thread's current device.
#[inline]
fn current_slot() -> Result<usize> {
    let device = context::current_device();
    usize::try_from(device)
        .ok()
        .filter(|&d| d < MAX_DEVICES)
        .ok_or(Error::InvalidDevice {
            device: i64::from(device),
            count: MAX_DEVICES as u32,
        })
}

/// The pool of the calling thread's current device, created now if needed.
pub fn current() -> Result<usize> {
    let slot = current_slot()?;
    match POOLS[slot].load(Ordering::Acquire) {
        0 => create(slot),
        handle => Ok(handle),
    }
}

#[cold]
fn create(slot: usize) -> Result<usize> {
    let _creating = CREATING.lock();
    let existing = POOLS[slot].load(Ordering::Acquire);
    if existing != 0 {
        return Ok(existing);
    }
    let config = PoolConfig::default().from_env()?;
    let pool = Pool::new(config, AclMemory::current()?)?;
    crate::history::env::start_from_env("the default pool", |n| pool.record_history(n))?;
    let handle = pool_handles::insert(pool)?.get();
    // Kept for the rest of the process, as `REFS` says.
    let pool: *const Pool = pool_handles::pin(handle as *mut c_void)?;
    let first = POOLS.iter().all(|h| h.load(Ordering::Acquire) == 0);
    ONLY.store(
        if first {
            pool.cast_mut()
        } else {
            ptr::null_mut()
        },
        Ordering::Release,
    );
    REFS[slot].store(pool.cast_mut(), Ordering::Release);
    POOLS[slot].store(handle, Ordering::Release);
    Ok(handle)
}

/// The pool of the calling thread's current device, made now if needed.
#[inline]
pub fn current_pool() -> Result<&'static Pool> {
    let slot = current_slot()?;
    match REFS[slot].load(Ordering::Acquire) {
        // SAFETY: a leaked, never-freed pool (see `REFS`).
        pool if !pool.is_null() => Ok(unsafe { &*pool }),
        _ => {
            create(slot)?;
            // SAFETY: `create` set it: a pinned, never-freed pool (see `REFS`).
            Ok(unsafe { &*REFS[slot].load(Ordering::Acquire) })
        }
    }
}

/// The default pool that holds `addr`, if any; with a single pool (one
/// device used: the common case), that pool, which refuses and counts a
/// block it does not hold itself. Runs on every free of the default
/// allocator, so it allocates nothing and, with one pool, locks nothing.
#[inline]
pub fn holding(addr: usize) -> Option<&'static Pool> {
    let only = ONLY.load(Ordering::Acquire);
    if !only.is_null() {
        // SAFETY: a leaked, never-freed pool (see `REFS`).
        return Some(unsafe { &*only });
    }
    let handle = holding_handle(addr)?;
    let slot = POOLS
        .iter()
        .position(|h| h.load(Ordering::Acquire) == handle)?;
    let pool = REFS[slot].load(Ordering::Acquire);
    // SAFETY: a pinned, never-freed pool (see `REFS`).
    (!pool.is_null()).then(|| unsafe { &*pool })
}

/// The handle of the pool [`holding`] returns.
fn holding_handle(addr: usize) -> Option<usize> {
    let mut made = POOLS
        .iter()
        .map(|h| h.load(Ordering::Acquire))
        .filter(|&h| h != 0);
    let first = made.next()?;
    let Some(second) = made.next() else {
        return Some(first);
    };
    [first, second]
        .into_iter()
        .chain(made)
        .find(|&h| pool_handles::with(h as *mut c_void, |p| p.holds(addr)) == Ok(true))
}

/// True when `callbacks` are the per-device pools' own.
pub(super) fn are_ours(callbacks: &Callbacks) -> bool {
    callbacks.alloc as usize == alloc as *const () as usize
        && callbacks.free as usize == free as *const () as usize
}

/// The pools made so far, as (device, handle).
pub fn pools() -> Vec<(usize, usize)> {
    POOLS
        .iter()
        .enumerate()
        .filter_map(|(d, h)| match h.load(Ordering::Acquire) {
            0 => None,
            h => Some((d, h)),
        })
        .collect()
}

/// The default allocator's callbacks: `obj` (the first pool's handle) and
/// functions that pick the calling thread's device's pool.
pub(super) fn callbacks(obj: AllocatorObj) -> Callbacks {
    Callbacks {
        obj,
        alloc,
        free,
        alloc_advise: Some(alloc_advise),
        get_addr_from_block,
    }
}

/// The C callbacks of the pool of the calling thread's device.
fn current_callbacks() -> Result<Callbacks> {
    let handle = current()?;
    installed_pool_callbacks(
        AllocatorObj::new(handle as *mut c_void).ok_or(Error::Internal {
            reason: "a pool handle was zero",
        })?,
    )
}

unsafe extern "C" fn alloc(_obj: *mut c_void, size: usize) -> *mut c_void {
    match current_callbacks() {
        // SAFETY: the pool's own alloc callback with its own handle.
        Ok(c) => unsafe { (c.alloc)(c.obj.as_ptr(), size) },
        Err(e) => {
            errlog::record("aclalloc default pool", e);
            std::ptr::null_mut()
        }
    }
}

unsafe extern "C" fn alloc_advise(
    _obj: *mut c_void,
    size: usize,
    addr: *mut c_void,
) -> *mut c_void {
    match current_callbacks() {
        Ok(c) => match c.alloc_advise {
            Some(advise) => {
                // SAFETY: the pool's own allocAdvise callback with its own handle.
                unsafe { advise(c.obj.as_ptr(), size, addr) }
            }
            None => {
                // SAFETY: the pool's own alloc callback with its own handle.
                unsafe { (c.alloc)(c.obj.as_ptr(), size) }
            }
        },
        Err(e) => {
            errlog::record("aclalloc default pool", e);
            std::ptr::null_mut()
        }
    }
}

/// A free goes to the pool that holds `block`, whichever device is current.
unsafe extern "C" fn free(_obj: *mut c_void, block: *mut c_void) {
    let callbacks = holding_handle(block as usize).map(|handle| {
        installed_pool_callbacks(
            AllocatorObj::new(handle as *mut c_void).expect("pool handles are not 0"),
        )
    });
    match callbacks {
        // SAFETY: the holding pool's own free callback with its own handle.
        Some(Ok(c)) => unsafe { (c.free)(c.obj.as_ptr(), block) },
        Some(Err(e)) => errlog::record("aclalloc default pool free", e),
        None => errlog::record("aclalloc default pool free", super::pool_refusal(None)),
    }
}

unsafe extern "C" fn get_addr_from_block(block: *mut c_void) -> *mut c_void {
    // A pool block is its device address (as `aclallocPoolGetAddrFromBlock`).
    block
}
