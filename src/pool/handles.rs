//! Pools given to C, found from their handle without taking a lock.
//!
//! The handle is also the allocator object (`obj`) of the pool's descriptor,
//! so every alloc/free callback resolves it: the lookup is a read of the
//! lock-free [`SeqTable`] the stream registry uses. A handle is a tagged
//! number (tag 0xACA5 in the top 16 bits, never reused), never a pointer, so a
//! stale or forged one is refused without being dereferenced.
//!
//! A destroyed pool's device memory is released and the pool refuses every
//! call, but its small host-side shell is intentionally never freed: a
//! callback on another thread that resolved the handle just before the
//! destroy still touches valid memory and gets a clean error.

use super::Pool;
use crate::core::error::{Error, Result};
use crate::registry::{Packed, SeqTable, VALUE_WORDS};
use std::cell::Cell;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The tag in the top bits of every pool handle.
pub const POOL_TAG: u16 = 0xACA5;
const TAG_SHIFT: u32 = 48;

#[derive(Clone, Copy)]
struct PoolRef(&'static Pool);

// SAFETY: `unpack` only sees words from `pack`: word 0 is a `&'static Pool`.
unsafe impl Packed for PoolRef {
    fn pack(&self) -> [usize; VALUE_WORDS] {
        let mut words = [0; VALUE_WORDS];
        words[0] = self.0 as *const Pool as usize;
        words
    }
    unsafe fn unpack(words: [usize; VALUE_WORDS]) -> Self {
        // SAFETY: packed from a leaked, never-freed `&'static Pool`.
        PoolRef(unsafe { &*(words[0] as *const Pool) })
    }
}

fn table() -> &'static SeqTable<PoolRef> {
    static TABLE: OnceLock<SeqTable<PoolRef>> = OnceLock::new();
    TABLE.get_or_init(|| SeqTable::with_capacity(16))
}

const NOT_A_POOL: Error = Error::InvalidParam {
    param: "pool",
    reason: "It is not a live pool (it was destroyed, or was never returned by aclallocPoolCreate)",
};

/// Makes `pool` reachable from C; returns its handle.
pub fn insert(pool: Pool) -> Result<NonZeroUsize> {
    static NEXT: AtomicUsize = AtomicUsize::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    if id >= 1 << TAG_SHIFT {
        return Err(Error::Internal {
            reason: "the pool handle space is exhausted",
        });
    }
    let handle =
        NonZeroUsize::new(((POOL_TAG as usize) << TAG_SHIFT) | id).ok_or(Error::Internal {
            reason: "a pool handle was zero",
        })?;
    let pool: &'static Pool = Box::leak(Box::new(pool));
    table().insert(handle, PoolRef(pool));
    Ok(handle)
}

thread_local! {
    /// The last handle this thread resolved and its pool. Safe to keep past a
    /// destroy: handles are never reused and pool shells are never freed, so
    /// a stale entry still names the right (closed) pool, which refuses
    /// every call.
    static LAST: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

/// The pool behind `handle` (one that was destroyed on another thread may
/// still be returned; it refuses every call).
#[inline]
pub fn get(handle: *mut std::ffi::c_void) -> Result<&'static Pool> {
    let (last, pool) = LAST.with(Cell::get);
    if last == handle as usize && last != 0 {
        // SAFETY: cached from the table below: a leaked, never-freed pool.
        return Ok(unsafe { &*(pool as *const Pool) });
    }
    let key = NonZeroUsize::new(handle as usize).ok_or(Error::NullPointer { param: "pool" })?;
    if key.get() >> TAG_SHIFT != POOL_TAG as usize {
        return Err(NOT_A_POOL);
    }
    let pool = table().get(key).map(|r| r.0).ok_or(NOT_A_POOL)?;
    LAST.with(|c| c.set((key.get(), pool as *const Pool as usize)));
    Ok(pool)
}

/// Makes `handle` dead (its pool must already be closed).
pub fn remove(handle: *mut std::ffi::c_void) -> Result<()> {
    let key = NonZeroUsize::new(handle as usize).ok_or(Error::NullPointer { param: "pool" })?;
    LAST.with(|c| {
        if c.get().0 == key.get() {
            c.set((0, 0));
        }
    });
    table().remove(key).map(drop).ok_or(NOT_A_POOL)
}
