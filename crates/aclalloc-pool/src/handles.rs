//! Pools given to C, found from their handle (also the descriptor's
//! allocator object) in core's lock-free [`HandleMap`]. A handle is a tagged
//! number, never reused and never dereferenced, so a stale or forged one is
//! refused. A *stream view* handle names a pool and the one stream it serves
//! (`aclallocPoolCreateStreamDesc`), since CANN's callbacks carry no stream.
//!
//! Each entry owns a reference count of its pool, so a destroyed pool's
//! host-side struct is freed once nothing uses it. Each thread caches its
//! last lookup with a count of its own: the lookup that hits it (every
//! callback of a pool in a loop) reads three words and takes no atomic
//! operation. A count the thread stops caching is given back only when no
//! call on that thread runs on a pool ([`with`] counts them), since a call
//! further up the stack may be using it; a pool destroyed on another thread
//! is freed at this thread's next lookup of another handle, or its exit. A
//! miss takes the count under a read lock that `remove` takes for writing,
//! so no count is taken from a pool whose entry is being dropped.

use super::Pool;
use crate::base::error::{Error, Result};
use crate::base::handles::{Handle, HandleMap};
pub use crate::base::ids::PoolHandle;
use crate::base::table::{Packed, VALUE_WORDS};
use parking_lot::RwLock;
use std::cell::{Cell, RefCell};
use std::num::NonZeroUsize;
use std::sync::{Arc, OnceLock};

/// The tag in the top bits of every pool handle.
pub const POOL_TAG: u16 = PoolHandle::TAG;

/// A reference count of a pool: its struct lives as long as one is held.
/// (The struct is boxed so that making it can fail cleanly.)
#[derive(Clone)]
// The Arc's own allocation is the small one, on purpose (above).
#[allow(clippy::redundant_allocation)]
pub struct SharedPool(Arc<Box<Pool>>);

impl std::ops::Deref for SharedPool {
    type Target = Pool;
    #[inline]
    fn deref(&self) -> &Pool {
        &self.0
    }
}

/// What the table and the counts hold.
type Counted = Box<Pool>;

/// What a handle names: a pool (one reference count of it, owned by the
/// table), and for a stream view its stream (0 for the pool itself).
#[derive(Clone, Copy)]
struct PoolRef {
    pool: *const Counted,
    stream: usize,
}

// SAFETY: `unpack` only sees words from `pack`.
unsafe impl Packed for PoolRef {
    fn pack(&self) -> [usize; VALUE_WORDS] {
        let mut words = [0; VALUE_WORDS];
        words[0] = self.pool as usize;
        words[1] = self.stream;
        words
    }
    unsafe fn unpack(words: [usize; VALUE_WORDS]) -> Self {
        PoolRef {
            pool: words[0] as *const Counted,
            stream: words[1],
        }
    }
}

// SAFETY: the pointer is a count of an `Arc<Box<Pool>>`, and `Pool` is Sync.
unsafe impl Send for PoolRef {}

fn table() -> &'static HandleMap<PoolHandle, PoolRef> {
    static TABLE: OnceLock<HandleMap<PoolHandle, PoolRef>> = OnceLock::new();
    TABLE.get_or_init(|| HandleMap::with_capacity(8))
}

/// Held for reading while a count is taken from an entry (or entries are
/// walked), for writing while entries are removed: a count is never taken
/// from a pool whose last count is being dropped.
static REMOVING: RwLock<()> = RwLock::new(());

const NOT_A_POOL: Error = Error::InvalidParam {
    param: "pool",
    reason: "It is not a live pool (it was destroyed, or was never returned by aclallocPoolCreate)",
};

/// Makes `pool` reachable from C; returns its handle.
pub fn insert(pool: Pool) -> Result<NonZeroUsize> {
    // The pool's struct is a fallible allocation: the Arc's own is two
    // counts and a pointer, which the allocator always has at hand.
    let boxed = crate::base::handles::try_box(pool).ok_or(Error::BadAlloc {
        what: "a caching pool",
    })?;
    let pool = Arc::into_raw(Arc::new(boxed));
    insert_ref(PoolRef { pool, stream: 0 }).inspect_err(|_| {
        // SAFETY: the count made just above, published nowhere.
        drop(unsafe { Arc::from_raw(pool) });
    })
}

/// A new handle for the pool behind `pool`, bound to `stream` (non-zero).
pub fn insert_view(pool: *mut std::ffi::c_void, stream: NonZeroUsize) -> Result<NonZeroUsize> {
    let target = lookup_table(pool)?;
    if target.stream != 0 {
        return Err(NOT_A_POOL);
    }
    let pool = Arc::into_raw(target.pool.0);
    insert_ref(PoolRef {
        pool,
        stream: stream.get(),
    })
    .inspect_err(|_| {
        // SAFETY: the count taken by the lookup, published nowhere.
        drop(unsafe { Arc::from_raw(pool) });
    })
}

fn insert_ref(target: PoolRef) -> Result<NonZeroUsize> {
    table().insert(target).map(PoolHandle::value)
}

/// A resolved handle: its pool (a count of it) and its stream.
struct Found {
    handle: usize,
    pool: SharedPool,
    stream: usize,
}

/// A thread's last resolved handle: (handle, its pool, its stream), owning
/// one count of the pool; the handle is 0 while empty.
type Cached = (usize, *const Counted, usize);
const EMPTY: Cached = (0, std::ptr::null(), 0);

/// What the lookup that hits reads and writes: plain words in a thread
/// local without a destructor, so no check of the thread's state.
struct Hot {
    last: Cell<Cached>,
    /// Calls running on a resolved pool on this thread (nested ones
    /// included): while any runs, no count of this thread is given back,
    /// since the pool it stands for may be in use further up the stack.
    depth: Cell<usize>,
    /// Counts put aside while `depth` was not 0 (in [`LastOwner`]).
    deferred: Cell<bool>,
}

thread_local! {
    static HOT: Hot = const {
        Hot {
            last: Cell::new(EMPTY),
            depth: Cell::new(0),
            deferred: Cell::new(false),
        }
    };
    /// Gives this thread's counts back when it exits (registered at the
    /// first lookup that caches one), and keeps the deferred ones.
    static LAST_OWNER: LastOwner = const { LastOwner { deferred: RefCell::new(Vec::new()) } };
}

struct LastOwner {
    deferred: RefCell<Vec<*const Counted>>,
}

impl Drop for LastOwner {
    fn drop(&mut self) {
        release(hot().last.replace(EMPTY));
        for pool in self.deferred.take() {
            release((1, pool, 0));
        }
    }
}

/// Gives back the count a cached entry owns.
fn release((handle, pool, _): Cached) {
    if handle != 0 {
        // SAFETY: a filled entry owns one count of `pool`, given back once.
        drop(unsafe { Arc::from_raw(pool) });
    }
}

/// Gives back a count this thread no longer caches: now, or once no call
/// on this thread runs on a pool (it may be that pool, further up).
fn retire(hot: &Hot, entry: Cached) {
    if entry.0 == 0 {
        return;
    }
    if hot.depth.get() == 0 {
        return release(entry);
    }
    let kept = LAST_OWNER.try_with(|owner| owner.deferred.borrow_mut().push(entry.1));
    // A thread that is exiting keeps the count: one pool's struct, once.
    if kept.is_ok() {
        hot.deferred.set(true);
    }
}

/// Ends a call on a resolved pool; the last one gives the deferred counts back.
#[inline]
fn leave(hot: &Hot) {
    let depth = hot.depth.get() - 1;
    hot.depth.set(depth);
    if depth == 0 && hot.deferred.get() {
        release_deferred(hot);
    }
}

#[cold]
fn release_deferred(hot: &Hot) {
    hot.deferred.set(false);
    let deferred = LAST_OWNER
        .try_with(|owner| owner.deferred.take())
        .unwrap_or_default();
    for pool in deferred {
        release((1, pool, 0));
    }
}

/// Runs `f` on what `handle` resolves to (its pool's entry and stream),
/// from this thread's cache or the table.
#[inline]
fn with_found<R>(
    handle: *mut std::ffi::c_void,
    f: impl FnOnce(*const Counted, usize) -> R,
) -> Result<R> {
    let hot = hot();
    let last = hot.last.get();
    if last.0 == handle as usize && last.0 != 0 {
        hot.depth.set(hot.depth.get() + 1);
        // The cached count keeps the pool: nothing gives it back while
        // `depth` is not 0.
        let result = f(last.1, last.2);
        leave(hot);
        return Ok(result);
    }
    with_found_in_table(hot, handle, f)
}

/// This thread's [`Hot`] words.
#[inline(always)]
fn hot() -> &'static Hot {
    // SAFETY: a thread local without a destructor lives as long as its
    // thread, and `Hot` is not `Sync`: the reference never leaves it.
    HOT.with(|hot| unsafe { &*(hot as *const Hot) })
}

/// [`with_found`] when the cache has another handle: the table's entry,
/// cached for the next call.
#[inline(never)]
fn with_found_in_table<R>(
    hot: &Hot,
    handle: *mut std::ffi::c_void,
    f: impl FnOnce(*const Counted, usize) -> R,
) -> Result<R> {
    let found = lookup_table(handle)?;
    let entry: Cached = (found.handle, Arc::into_raw(found.pool.0), found.stream);
    // A thread that is exiting caches nothing: its count goes back after `f`.
    let cached = LAST_OWNER.try_with(|_| ()).is_ok();
    if cached {
        retire(hot, hot.last.replace(entry));
    }
    hot.depth.set(hot.depth.get() + 1);
    let result = f(entry.1, entry.2);
    leave(hot);
    if !cached {
        release(entry);
    }
    Ok(result)
}

/// Runs `f` on the pool behind `handle` (a pool or a stream view) and the
/// stream it is bound to (0: a pool handle). A pool destroyed on another
/// thread while this thread held its handle may still be run on: it
/// refuses every call.
#[inline]
pub fn with_stream<R>(
    handle: *mut std::ffi::c_void,
    f: impl FnOnce(&Pool, usize) -> R,
) -> Result<R> {
    // SAFETY: `with_found` holds a count of the entry while `f` runs.
    with_found(handle, |pool, stream| f(unsafe { &*pool }, stream))
}

/// Runs `f` on the pool behind `handle`, a pool or a stream view.
#[inline]
pub fn with<R>(handle: *mut std::ffi::c_void, f: impl FnOnce(&Pool) -> R) -> Result<R> {
    with_stream(handle, |pool, _| f(pool))
}

/// A new count of the entry `with_found` holds.
fn count_of(pool: *const Counted) -> SharedPool {
    // SAFETY: `with_found` holds a count of `pool` while this runs.
    SharedPool(unsafe {
        Arc::increment_strong_count(pool);
        Arc::from_raw(pool)
    })
}

/// A count of the pool behind `handle`, for a holder that keeps it past
/// the call (the pool's struct lives as long as the count).
pub fn get(handle: *mut std::ffi::c_void) -> Result<SharedPool> {
    with_found(handle, |pool, _| count_of(pool))
}

/// The pool behind `handle`, kept for the rest of the process: for holders
/// that live as long as it (the default allocator's pools), which a
/// destroy through the handle then cannot free.
pub fn pin(handle: *mut std::ffi::c_void) -> Result<&'static Pool> {
    let pool = Arc::into_raw(get(handle)?.0);
    // SAFETY: the count is never given back: the pool is never freed.
    Ok(unsafe { &**pool })
}

/// [`with_stream`]'s lookup in the table of live handles.
#[inline(never)]
fn lookup_table(handle: *mut std::ffi::c_void) -> Result<Found> {
    let key = PoolHandle::from_ptr(handle).ok_or(Error::NullPointer { param: "pool" })?;
    let _reading = REMOVING.read();
    let found = table().get(key).ok_or(NOT_A_POOL)?;
    // SAFETY: the entry owns a count, and it cannot be dropped while the
    // read lock is held: this takes one more.
    let pool = unsafe {
        Arc::increment_strong_count(found.pool);
        Arc::from_raw(found.pool)
    };
    Ok(Found {
        handle: key.get(),
        pool: SharedPool(pool),
        stream: found.stream,
    })
}

/// True when `handle` is a stream view rather than a pool.
pub fn is_view(handle: *mut std::ffi::c_void) -> Result<bool> {
    with_stream(handle, |_, stream| stream != 0)
}

/// Tells every live pool that `stream` was destroyed (see
/// [`Pool::forget_stream`]): what they cached for it goes back to the device.
pub fn forget_stream(stream: NonZeroUsize) {
    let _reading = REMOVING.read();
    for (_, target) in table().entries() {
        if target.stream == 0 {
            // SAFETY: the entry's count keeps it while the read lock is held.
            unsafe { &*target.pool }.forget_stream(stream.get());
        }
    }
}

/// Makes `handle` and every stream view of its pool dead (the pool must
/// already be closed); the pool's struct is freed once nothing holds it.
pub fn remove(handle: *mut std::ffi::c_void) -> Result<()> {
    let key = PoolHandle::from_ptr(handle).ok_or(Error::NullPointer { param: "pool" })?;
    let mut counts = Vec::new();
    {
        let _writing = REMOVING.write();
        let removed = table().remove(key).ok_or(NOT_A_POOL)?;
        counts.push(removed.pool);
        for (view, target) in table().entries() {
            if std::ptr::eq(target.pool, removed.pool) && table().remove(view).is_some() {
                counts.push(target.pool);
            }
        }
    }
    // This thread's cache lets go of it now (others at their next lookup).
    let hot = hot();
    let last = hot.last.get();
    if last.0 != 0 && counts.iter().any(|&p| std::ptr::eq(p, last.1)) {
        hot.last.set(EMPTY);
        retire(hot, last);
    }
    for pool in counts {
        // SAFETY: each removed entry's count, given back once.
        drop(unsafe { Arc::from_raw(pool) });
    }
    Ok(())
}
