//! Pools given to C, found from their handle (also the descriptor's
//! allocator object) in core's lock-free [`HandleMap`]. A handle is a tagged
//! number, never reused and never dereferenced, so a stale or forged one is
//! refused. A *stream view* handle names a pool and the one stream it serves
//! (`aclallocPoolCreateStreamDesc`), since CANN's callbacks carry no stream.
//!
//! A destroyed pool's host-side shell is never freed: a callback that
//! resolved the handle just before the destroy still gets a clean error.

use super::Pool;
use crate::base::error::{Error, Result};
use crate::base::handles::{Handle, HandleMap};
pub use crate::base::ids::PoolHandle;
use crate::base::table::{Packed, VALUE_WORDS};
use std::cell::Cell;
use std::num::NonZeroUsize;
use std::sync::OnceLock;

/// The tag in the top bits of every pool handle.
pub const POOL_TAG: u16 = PoolHandle::TAG;

/// What a handle names: a pool, and for a stream view its stream (0 for the pool itself).
#[derive(Clone, Copy)]
struct PoolRef {
    pool: &'static Pool,
    stream: usize,
}

// SAFETY: `unpack` only sees words from `pack`: word 0 is a `&'static Pool`.
unsafe impl Packed for PoolRef {
    fn pack(&self) -> [usize; VALUE_WORDS] {
        let mut words = [0; VALUE_WORDS];
        words[0] = self.pool as *const Pool as usize;
        words[1] = self.stream;
        words
    }
    unsafe fn unpack(words: [usize; VALUE_WORDS]) -> Self {
        PoolRef {
            // SAFETY: packed from a leaked, never-freed `&'static Pool`.
            pool: unsafe { &*(words[0] as *const Pool) },
            stream: words[1],
        }
    }
}

fn table() -> &'static HandleMap<PoolHandle, PoolRef> {
    static TABLE: OnceLock<HandleMap<PoolHandle, PoolRef>> = OnceLock::new();
    TABLE.get_or_init(|| HandleMap::with_capacity(8))
}

const NOT_A_POOL: Error = Error::InvalidParam {
    param: "pool",
    reason: "It is not a live pool (it was destroyed, or was never returned by aclallocPoolCreate)",
};

/// Makes `pool` reachable from C; returns its handle.
pub fn insert(pool: Pool) -> Result<NonZeroUsize> {
    let boxed = crate::base::handles::try_box(pool).ok_or(Error::BadAlloc {
        what: "a caching pool",
    })?;
    let pool: &'static Pool = Box::leak(boxed);
    insert_ref(PoolRef { pool, stream: 0 }).inspect_err(|_| {
        // SAFETY: leaked just above and published nowhere: the box is taken back.
        drop(unsafe { Box::from_raw(pool as *const Pool as *mut Pool) });
    })
}

/// A new handle for the pool behind `pool`, bound to `stream` (non-zero).
pub fn insert_view(pool: *mut std::ffi::c_void, stream: NonZeroUsize) -> Result<NonZeroUsize> {
    let target = lookup(pool)?;
    if target.stream != 0 {
        return Err(NOT_A_POOL);
    }
    insert_ref(PoolRef {
        pool: target.pool,
        stream: stream.get(),
    })
}

fn insert_ref(target: PoolRef) -> Result<NonZeroUsize> {
    table().insert(target).map(PoolHandle::value)
}

thread_local! {
    /// The last handle this thread resolved, its pool and its stream (safe
    /// past a destroy: handles are never reused, shells never freed).
    static LAST: Cell<(usize, usize, usize)> = const { Cell::new((0, 0, 0)) };
}

/// `handle`'s target from this thread's last lookup (inlined into every
/// callback: two words, no call), else from the table.
#[inline]
fn lookup(handle: *mut std::ffi::c_void) -> Result<PoolRef> {
    let (last, pool, stream) = LAST.with(Cell::get);
    if last == handle as usize && last != 0 {
        // SAFETY: cached from the table below: a leaked, never-freed pool.
        let pool = unsafe { &*(pool as *const Pool) };
        return Ok(PoolRef { pool, stream });
    }
    lookup_table(handle)
}

/// [`lookup`] in the table of live handles, remembering the answer.
#[inline(never)]
fn lookup_table(handle: *mut std::ffi::c_void) -> Result<PoolRef> {
    let key = PoolHandle::from_ptr(handle).ok_or(Error::NullPointer { param: "pool" })?;
    let found = table().get(key).ok_or(NOT_A_POOL)?;
    LAST.with(|c| c.set((key.get(), found.pool as *const Pool as usize, found.stream)));
    Ok(found)
}

/// The pool behind `handle`, a pool or a stream view (one that was destroyed
/// on another thread may still be returned; it refuses every call).
#[inline]
pub fn get(handle: *mut std::ffi::c_void) -> Result<&'static Pool> {
    lookup(handle).map(|r| r.pool)
}

/// The pool behind `handle` and the stream it is bound to (0: a pool handle, bound to no stream).
#[inline]
pub fn get_with_stream(handle: *mut std::ffi::c_void) -> Result<(&'static Pool, usize)> {
    lookup(handle).map(|r| (r.pool, r.stream))
}

/// True when `handle` is a stream view rather than a pool.
pub fn is_view(handle: *mut std::ffi::c_void) -> Result<bool> {
    lookup(handle).map(|r| r.stream != 0)
}

/// Tells every live pool that `stream` was destroyed (see
/// [`Pool::forget_stream`]): what they cached for it goes back to the device.
pub fn forget_stream(stream: NonZeroUsize) {
    for (_, target) in table().entries() {
        if target.stream == 0 {
            target.pool.forget_stream(stream.get());
        }
    }
}

/// Makes `handle` and every stream view of its pool dead (the pool must already be closed).
pub fn remove(handle: *mut std::ffi::c_void) -> Result<()> {
    let key = PoolHandle::from_ptr(handle).ok_or(Error::NullPointer { param: "pool" })?;
    LAST.with(|c| c.set((0, 0, 0)));
    let removed = table().remove(key).ok_or(NOT_A_POOL)?;
    for (view, target) in table().entries() {
        if std::ptr::eq(target.pool, removed.pool) {
            table().remove(view);
        }
    }
    retire(removed.pool);
    Ok(())
}

/// Keeps a destroyed pool's struct on a list: a caller may still hold the
/// `&'static Pool` (its memory has gone back to the device, only the struct
/// stays), and the list says so to leak checkers.
fn retire(pool: &'static Pool) {
    static RETIRED: parking_lot::Mutex<Vec<&'static Pool>> = parking_lot::Mutex::new(Vec::new());
    let mut retired = RETIRED.lock();
    if retired.try_reserve(1).is_ok() {
        retired.push(pool);
    }
}
