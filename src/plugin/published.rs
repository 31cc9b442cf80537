//! Pluggable allocators as C sees them: live handles, and the descriptor
//! callbacks through which CANN-style code reaches them.
//!
//! The descriptor's allocator object is the plugin's handle (a tagged number,
//! see [`HandleTable`]); every callback looks it up, so a callback through a
//! stale copy of the descriptor finds nothing and fails cleanly instead of
//! touching a destroyed allocator. A block is the device pointer itself.
//!
//! The callbacks are a hot path (one alloc and one free per launch), and so
//! are `aclallocPluggableMalloc` / `aclallocPluggableFree`, so they find the
//! allocator without a lock or a reference count, under a per-thread pin
//! ([`crate::core::pin`]): first in a small direct-mapped table indexed by
//! the handle's low bits (`direct`: one load and one compare for the
//! handle, one load for the allocator), then, for a handle that shares its
//! slot with an older live one, in a lock-free hash table of every live
//! handle (`callable`). Destroy removes the handle from both, waits until no
//! thread is pinned on it, and only then lets the allocator (and its shared
//! object) go and its direct slot be reused.

use super::allocator::PluggableAllocator;
use super::context;
use crate::core::boundary::{self, boundary, Answer};
use crate::core::descriptor::AllocatorObj;
use crate::core::error::{aclError, Error, Result};
use crate::core::handles::{Handle, HandleTable};
pub use crate::core::ids::PluggableHandle;
use crate::core::pin;
use crate::core::seq_table::{Packed, SeqTable, VALUE_WORDS};
use crate::core::serving;
use crate::registry::api::global;
use crate::registry::{DescriptorHandle, StreamKey};
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// Every live pluggable allocator.
fn plugins() -> &'static HandleTable<PluggableHandle, Entry> {
    static PLUGINS: OnceLock<HandleTable<PluggableHandle, Entry>> = OnceLock::new();
    PLUGINS.get_or_init(HandleTable::new)
}

/// The live pluggable allocators as the descriptor callbacks reach them,
/// by handle: the allocator's address, valid while its handle is in this
/// table and for as long as a thread pinned on the handle uses it.
fn callable() -> &'static SeqTable<Callable> {
    static CALLABLE: OnceLock<SeqTable<Callable>> = OnceLock::new();
    CALLABLE.get_or_init(SeqTable::default)
}

/// An allocator's address (its `Arc`'s), as one word of a [`SeqTable`].
#[derive(Clone, Copy)]
struct Callable(*const PluggableAllocator);

// SAFETY: any word is a valid raw pointer value; it is only dereferenced
// under the rules of `callable`.
unsafe impl Packed for Callable {
    fn pack(&self) -> [usize; VALUE_WORDS] {
        let mut words = [0; VALUE_WORDS];
        words[0] = self.0 as usize;
        words
    }
    unsafe fn unpack(words: [usize; VALUE_WORDS]) -> Self {
        Callable(words[0] as *const PluggableAllocator)
    }
}

// SAFETY: a `PluggableAllocator` is `Sync`; the address is shared, not owned.
unsafe impl Send for Callable {}

/// How many handles the direct table holds (a power of two): a process
/// rarely has more pluggable allocators alive at once, and handles are
/// numbered in sequence, so live ones rarely share a slot.
const DIRECT_SLOTS: usize = 64;

/// One slot of the direct table. The protocol (every write is in
/// [`publish`] or [`destroy`], lock-free):
/// - a slot is free when `allocator` is null; `publish` claims it with a
///   compare-exchange of `allocator` from null, then stores `handle`
///   (release), so a reader that sees the handle sees its allocator;
/// - `destroy` stores 0 in `handle` when it starts to decide ([`close`]:
///   from then on the hot paths miss and the slow paths refuse new
///   allocations), before it waits for the pinned callers, and nulls
///   `allocator` (freeing the slot) only after its last wait; a destroy
///   that refuses stores the handle back ([`reopen`]). So while a pinned
///   caller that read its handle here runs, the slot cannot be claimed for
///   another allocator: `allocator` is read once, no re-check.
struct DirectSlot {
    handle: AtomicUsize,
    allocator: AtomicPtr<PluggableAllocator>,
}

#[allow(clippy::declare_interior_mutable_const)] // Only as the array's initialiser.
const FREE_SLOT: DirectSlot = DirectSlot {
    handle: AtomicUsize::new(0),
    allocator: AtomicPtr::new(std::ptr::null_mut()),
};

static DIRECT: [DirectSlot; DIRECT_SLOTS] = [FREE_SLOT; DIRECT_SLOTS];

/// The direct slot `handle` would sit in.
#[inline(always)]
fn direct(handle: usize) -> &'static DirectSlot {
    &DIRECT[handle & (DIRECT_SLOTS - 1)]
}

/// Runs `f` on the allocator whose handle is `obj`, found lock-free and
/// used under a pin on the handle (so destroy waits for `f`).
///
/// `f` is called from one place only, so that it is inlined here.
#[inline(always)]
fn with_callable<R>(
    obj: *mut c_void,
    f: impl FnOnce(&PluggableAllocator) -> Result<R>,
) -> Result<R> {
    let key = obj as usize;
    if !PluggableHandle::could_be(key) {
        return Err(NOT_A_PLUGGABLE);
    }
    let counted: Arc<PluggableAllocator>;
    let pin = pin::enter(key);
    let allocator: &PluggableAllocator = if pin.is_some() {
        let slot = direct(key);
        if slot.handle.load(Ordering::Acquire) == key {
            // SAFETY: this thread pinned `key` before it read the handle in
            // the slot, so `destroy` had not stored 0 there when it began
            // to wait for the pins: it waits until `pin` drops, and until
            // then neither frees the slot (so `allocator` is still this
            // handle's) nor drops the allocator.
            unsafe { &*slot.allocator.load(Ordering::Relaxed) }
        } else {
            // SAFETY: pinned on `key` (`shared_slot`'s contract); `pin`
            // drops after `f` returns.
            unsafe { &*shared_slot(key)? }
        }
    } else {
        // A thread being torn down has no pin: the counted lookup.
        counted = lookup(obj).ok_or(NOT_A_PLUGGABLE)?;
        &counted
    };
    let result = f(allocator);
    drop(pin);
    result
}

/// The allocator of a handle that is not in its direct slot: one that
/// shares it with an older live handle, or one that is not live.
///
/// # Safety
/// The caller is pinned on `key` from before this call until it no longer
/// uses the allocator.
#[cold]
#[inline(never)]
unsafe fn shared_slot(key: usize) -> Result<*const PluggableAllocator> {
    let key = std::num::NonZeroUsize::new(key).ok_or(NOT_A_PLUGGABLE)?;
    // The handle was in `callable` after the caller's pin was set, so
    // destroy has not passed `wait_unpinned` for it: the allocator's `Arc`
    // is alive while the caller stays pinned.
    let Callable(allocator) = callable().get(key).ok_or(NOT_A_PLUGGABLE)?;
    Ok(allocator)
}

/// Runs `f` on the live pluggable allocator `handle`, without a lock or a
/// reference count (as the descriptor callbacks find theirs): destroy waits
/// until `f` returns, and refuses from inside `f` on this thread.
#[inline]
pub fn with_allocator<R>(
    handle: PluggableHandle,
    f: impl FnOnce(&PluggableAllocator) -> Result<R>,
) -> Result<R> {
    with_callable(handle.as_ptr(), f)
}

/// The hit of the hot paths (the descriptor callbacks,
/// `aclallocPluggableMalloc` / `aclallocPluggableFree`): `f` on the
/// allocator of `key`, pinned on `key`, when `key` sits in its direct slot
/// and this thread has its pin slot already. `None`, having done nothing,
/// otherwise: the caller then goes on by its slow path ([`with_allocator`],
/// which finds any live allocator and names what is wrong). Makes no call
/// of its own, so that a caller whose `f` makes none that can unwind has a
/// boundary that compiles to nothing.
#[inline(always)]
pub(crate) fn with_direct<R>(key: usize, f: impl FnOnce(&PluggableAllocator) -> R) -> Option<R> {
    if key == 0 {
        // A free direct slot holds handle 0.
        return None;
    }
    let pin = pin::enter_claimed(key)?;
    let slot = direct(key);
    if slot.handle.load(Ordering::Acquire) != key {
        return None;
    }
    // SAFETY: as in `with_callable`: pinned on `key` before its handle was
    // read in the slot, so destroy neither frees the slot nor drops the
    // allocator until `pin` drops, after `f` returns.
    let allocator = unsafe { &*slot.allocator.load(Ordering::Relaxed) };
    let result = f(allocator);
    drop(pin);
    Some(result)
}

/// The allocation of the hot paths, pinned on the allocator's handle
/// (inside [`with_direct`]): `None`, having done nothing, for a size
/// `ssize_t` cannot hold; otherwise the block, or the failure's code with
/// its message recorded under `function` (the plugin was called; `boundary::fail`).
#[inline(always)]
pub(crate) fn alloc_pinned(
    function: &'static str,
    allocator: &PluggableAllocator,
    size: usize,
    stream: Option<StreamKey>,
) -> Option<std::result::Result<NonNull<c_void>, aclError>> {
    // No closing check: a destroy that decides has taken the handle out of
    // its direct slot (`close`), so a hit is not closing.
    if isize::try_from(size).is_err() {
        return None;
    }
    Some(
        match allocator.alloc(size, context::current_device(), stream) {
            Ok(block) => Ok(block),
            Err(error) => Err(boundary::fail(function, error)),
        },
    )
}

/// The free of the hot paths, pinned on the allocator's handle (inside
/// [`with_direct`]): `Err` with the failure's code and its message recorded
/// under `function`.
#[inline(always)]
pub(crate) fn free_pinned(
    function: &'static str,
    allocator: &PluggableAllocator,
    block: NonNull<c_void>,
) -> std::result::Result<(), aclError> {
    match allocator.free(block) {
        Ok(()) => Ok(()),
        Err(error) => Err(boundary::fail(function, error)),
    }
}

struct Entry {
    allocator: Arc<PluggableAllocator>,
    /// The descriptor made for it; destroyed with it if the caller has not.
    descriptor: DescriptorHandle,
}

const BEING_DESTROYED: Error = Error::InvalidParam {
    param: "allocator",
    reason: "It is being destroyed (aclallocPluggableDestroy is running on another thread)",
};

/// Refuses a new allocation from an allocator a destroy is deciding about
/// (see [`destroy`]). Call it pinned, after finding the allocator: the pin
/// and the flag form a Dekker pair with destroy's flag and wait.
#[inline(always)]
pub fn refuse_if_closing(allocator: &PluggableAllocator) -> Result<()> {
    if allocator.closing.load(Ordering::Relaxed) {
        return Err(BEING_DESTROYED);
    }
    Ok(())
}

const NOT_A_PLUGGABLE: Error = Error::InvalidParam {
    param: "allocator",
    reason: "It is not a live pluggable allocator (it was destroyed, or was never returned by aclallocPluggableCreate)",
};

/// Publishes `allocator` under a new handle with a complete descriptor ready
/// for `aclrtAllocatorRegister`, then runs its init hook. On failure nothing
/// is left: no handle, no descriptor.
pub fn publish(allocator: PluggableAllocator) -> Result<(PluggableHandle, DescriptorHandle)> {
    let allocator = Arc::new(allocator);
    let api = global();
    let descriptor = api.create_descriptor()?;
    let inserted = plugins().insert(Entry {
        allocator: Arc::clone(&allocator),
        descriptor,
    });
    let handle = match inserted {
        Ok(h) => h,
        Err(e) => {
            let _ = api.destroy_descriptor(descriptor);
            return Err(e);
        }
    };
    let filled = api.update_descriptor(descriptor, |d| {
        d.obj = AllocatorObj::new(handle.as_ptr());
        d.alloc = Some(desc_alloc);
        d.free = Some(desc_free);
        d.get_addr_from_block = Some(desc_get_addr);
    });
    if let Err(e) = filled {
        plugins().remove(handle);
        let _ = api.destroy_descriptor(descriptor);
        return Err(e);
    }
    callable().insert(handle.value(), Callable(Arc::as_ptr(&allocator)));
    let slot = direct(handle.get());
    let claimed = slot
        .allocator
        .compare_exchange(
            std::ptr::null_mut(),
            Arc::as_ptr(&allocator).cast_mut(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        )
        .is_ok();
    if claimed {
        slot.handle.store(handle.get(), Ordering::Release);
    }
    allocator.init();
    Ok((handle, descriptor))
}

/// The allocator behind a live handle.
pub fn get(handle: PluggableHandle) -> Result<Arc<PluggableAllocator>> {
    lookup(handle.as_ptr()).ok_or(NOT_A_PLUGGABLE)
}

fn lookup(handle: *mut c_void) -> Option<Arc<PluggableAllocator>> {
    plugins().with(PluggableHandle::from_ptr(handle)?, |e| {
        Arc::clone(&e.allocator)
    })
}

/// The pluggable allocator whose handle is `obj` (a registration's
/// allocator object), if it is one.
pub fn from_obj(obj: AllocatorObj) -> Option<Arc<PluggableAllocator>> {
    lookup(obj.as_ptr())
}

/// Starts a destroy's decision on `allocator` (the allocator of `handle`):
/// sets its closing flag, which the slow paths check, and takes the handle
/// out of its direct slot, so that the hot paths, which do not read the
/// flag (one load fewer on their chain), go to the slow paths. The slot
/// keeps its allocator, so no other handle can claim it meanwhile. `None`
/// when another destroy has the claim; otherwise whether the handle was
/// in its direct slot (for [`reopen`] and the final release of the slot).
///
/// The hot path pins, then reads the slot's handle; this stores the
/// handle, and the caller then waits the pins out (`pin::wait_unpinned`):
/// an allocation that saw the handle is waited for, and its block counted.
pub(crate) fn close(handle: PluggableHandle, allocator: &PluggableAllocator) -> Option<bool> {
    allocator
        .closing
        .compare_exchange(false, true, Ordering::Relaxed, Ordering::Relaxed)
        .ok()?;
    let slot = direct(handle.get());
    let in_direct_slot = slot.handle.load(Ordering::Relaxed) == handle.get();
    if in_direct_slot {
        slot.handle.store(0, Ordering::Relaxed);
    }
    Some(in_direct_slot)
}

/// Ends a destroy's decision that refused: the allocator serves new
/// allocations again, through its direct slot if it had it.
pub(crate) fn reopen(
    handle: PluggableHandle,
    allocator: &PluggableAllocator,
    in_direct_slot: bool,
) {
    if in_direct_slot {
        direct(handle.get())
            .handle
            .store(handle.get(), Ordering::Release);
    }
    allocator.closing.store(false, Ordering::Relaxed);
}

/// Destroys a pluggable allocator and the descriptor made for it. Refused
/// while blocks are live, a stream is still registered with it, or
/// `is_default` says it serves as the default allocator, since any of them
/// would later reach an unloaded plugin. (The default allocator is a layer
/// above this one: the caller asks it.)
pub fn destroy(
    handle: PluggableHandle,
    is_default: impl FnOnce(AllocatorObj) -> bool,
) -> Result<()> {
    if pin::held_here(handle.get()) {
        // Destroying it would unload the code this thread is running.
        return Err(Error::StillInUse {
            what: "One of its own callbacks is running on this thread (destroy it after the callback returns)",
            count: 1,
        });
    }
    let allocator = get(handle)?;
    let live = allocator.live_blocks();
    if live > 0 {
        return Err(Error::StillInUse {
            what: "Blocks it handed out that were not freed",
            count: live,
        });
    }
    let registered = global()
        .streams()
        .entries()
        .iter()
        .filter(|(_, r)| r.callbacks.obj.as_ptr() == handle.as_ptr())
        .count();
    if registered > 0 {
        return Err(Error::StillInUse {
            what: "Streams registered with it (unregister them first)",
            count: registered,
        });
    }
    if AllocatorObj::new(handle.as_ptr()).is_some_and(is_default) {
        return Err(Error::StillInUse {
            what: "It is the default allocator",
            count: 1,
        });
    }
    // New allocations are refused from here on (frees go on), and the ones
    // already inside finish; then no block can appear any more, and the
    // count of live blocks is final. Closing is also the claim: of two
    // destroys at once, one goes ahead.
    let Some(in_direct_slot) = close(handle, &allocator) else {
        return Err(BEING_DESTROYED);
    };
    pin::wait_unpinned(handle.get());
    let live = allocator.live_blocks();
    if live > 0 {
        // An allocation that was inside when the checks above ran left a
        // block: refused, as if the block had been live at the check.
        reopen(handle, &allocator, in_direct_slot);
        return Err(Error::StillInUse {
            what: "Blocks it handed out that were not freed",
            count: live,
        });
    }
    // The callbacks stop finding it, and the ones already inside (frees
    // finishing in the plugin) return, before the allocator can be dropped
    // (and its object unloaded). (The direct slot stopped serving it at
    // `close`.)
    callable().remove(handle.value());
    let slot = direct(handle.get());
    pin::wait_unpinned(handle.get());
    if in_direct_slot {
        // No caller can be using it through the slot any more: free it.
        slot.allocator
            .store(std::ptr::null_mut(), Ordering::Release);
    }
    let entry = plugins().remove(handle).ok_or(NOT_A_PLUGGABLE)?;
    // The caller may have destroyed it already; either way it is gone now.
    let _ = global().destroy_descriptor(entry.descriptor);
    Ok(())
}

const ALLOC_CALLBACK: &str = "aclallocPluggable alloc callback";
const FREE_CALLBACK: &str = "aclallocPluggable free callback";

/// `aclrtAllocatorAllocFunc` of a pluggable allocator's descriptor.
///
/// The hit (the allocator in its direct slot, not closing, this thread's
/// pin slot claimed) is answered by a body whose failures are recorded out
/// of line (no `Error` in its frame); anything else goes, unpinned and
/// before the plugin is called, to [`desc_alloc_slow`], which runs its own
/// boundary.
unsafe extern "C" fn desc_alloc(obj: *mut c_void, size: usize) -> *mut c_void {
    boundary::<Answer<*mut c_void>>(ALLOC_CALLBACK, || {
        let hit = with_direct(obj as usize, |allocator| {
            alloc_pinned(ALLOC_CALLBACK, allocator, size, serving::current())
        })
        .flatten()
        .map(|r| r.map_or(std::ptr::null_mut(), NonNull::as_ptr));
        Ok(Answer(hit.unwrap_or_else(|| {
            // SAFETY: the caller's contract, handed on.
            unsafe { desc_alloc_slow(obj, size) }
        })))
    })
    .0
}

/// [`desc_alloc`] when the hit does not answer: any live allocator, the
/// closing check, the failure named.
#[cold]
#[inline(never)]
unsafe extern "C" fn desc_alloc_slow(obj: *mut c_void, size: usize) -> *mut c_void {
    boundary(ALLOC_CALLBACK, || {
        with_callable(obj, |allocator| {
            refuse_if_closing(allocator)?;
            allocator
                .alloc(size, context::current_device(), serving::current())
                .map(NonNull::as_ptr)
        })
    })
}

/// `aclrtAllocatorFreeFunc` of a pluggable allocator's descriptor: the hit
/// as in [`desc_alloc`], the rest by [`desc_free_slow`].
unsafe extern "C" fn desc_free(obj: *mut c_void, block: *mut c_void) {
    boundary::<Answer<()>>(FREE_CALLBACK, || {
        let hit = NonNull::new(block).and_then(|block| {
            with_direct(obj as usize, |allocator| {
                let _ = free_pinned(FREE_CALLBACK, allocator, block);
            })
        });
        if hit.is_none() {
            // SAFETY: the caller's contract, handed on.
            unsafe { desc_free_slow(obj, block) }
        }
        Ok(Answer(()))
    })
    .0
}

/// [`desc_free`] when the hit does not answer.
#[cold]
#[inline(never)]
unsafe extern "C" fn desc_free_slow(obj: *mut c_void, block: *mut c_void) {
    boundary(FREE_CALLBACK, || {
        let block = NonNull::new(block).ok_or(Error::NullPointer { param: "block" })?;
        with_callable(obj, |allocator| allocator.free(block))
    })
}

/// `aclrtAllocatorGetAddrFromBlockFunc`: a block is its address.
unsafe extern "C" fn desc_get_addr(block: *mut c_void) -> *mut c_void {
    block
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::errlog;
    use crate::plugin::PluginFunctions;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    static SELF: AtomicUsize = AtomicUsize::new(0);
    static SEEN: Mutex<Option<Result<()>>> = Mutex::new(None);
    static MEMORY: [u8; 64] = [0; 64];

    unsafe extern "C" fn alloc_destroying_itself(
        _size: isize,
        _device: i32,
        _stream: *mut c_void,
    ) -> *mut c_void {
        let handle = PluggableHandle::from_raw(SELF.load(Ordering::SeqCst)).unwrap();
        *SEEN.lock().unwrap() = Some(destroy(handle, |_| false));
        MEMORY.as_ptr() as *mut c_void
    }
    unsafe extern "C" fn free_nothing(_: *mut c_void, _: isize, _: i32, _: *mut c_void) {}

    #[test]
    fn a_callback_cannot_destroy_its_own_allocator_and_destroy_works_after() {
        let (handle, descriptor) = publish(PluggableAllocator::from_functions(PluginFunctions {
            alloc: alloc_destroying_itself,
            free: free_nothing,
            init: None,
            empty_cache: None,
            memory_fraction: None,
        }))
        .unwrap();
        SELF.store(handle.get(), Ordering::SeqCst);
        let c = global()
            .descriptor(descriptor)
            .unwrap()
            .callbacks()
            .unwrap();
        // SAFETY: the descriptor's callbacks with its own object.
        let block = unsafe { (c.alloc)(c.obj.as_ptr(), 16) };
        assert_eq!(block as usize, MEMORY.as_ptr() as usize);
        assert!(matches!(
            SEEN.lock().unwrap().take(),
            Some(Err(Error::StillInUse { count: 1, .. }))
        ));
        // SAFETY: as above; the block it returned.
        unsafe { (c.free)(c.obj.as_ptr(), block) };
        assert_eq!(destroy(handle, |_| false), Ok(()));
        // The callbacks of a destroyed allocator find nothing.
        // SAFETY: as above.
        assert!(unsafe { (c.alloc)(c.obj.as_ptr(), 16) }.is_null());
    }

    /// Addresses never dereferenced: a plugin that only counts.
    static NEXT_ADDRESS: AtomicUsize = AtomicUsize::new(0x5EED_0000);
    unsafe extern "C" fn alloc_address(_: isize, _: i32, _: *mut c_void) -> *mut c_void {
        NEXT_ADDRESS.fetch_add(64, Ordering::Relaxed) as *mut c_void
    }

    fn counting() -> PluggableAllocator {
        PluggableAllocator::from_functions(PluginFunctions {
            alloc: alloc_address,
            free: free_nothing,
            init: None,
            empty_cache: None,
            memory_fraction: None,
        })
    }

    fn callbacks(descriptor: DescriptorHandle) -> crate::core::descriptor::Callbacks {
        global()
            .descriptor(descriptor)
            .unwrap()
            .callbacks()
            .unwrap()
    }

    /// True when `handle` is the one its direct slot serves.
    fn in_direct_slot(handle: PluggableHandle) -> bool {
        direct(handle.get()).handle.load(Ordering::SeqCst) == handle.get()
    }

    /// Publishes counting allocators (destroying the others) until one's
    /// handle maps to the direct slot of `like`; `claimed`: whether it must
    /// also be the one that slot serves.
    fn publish_in_slot_of(
        like: PluggableHandle,
        claimed: bool,
    ) -> (PluggableHandle, DescriptorHandle) {
        // Other tests may hold the slot for a while: try for some time.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            let (h, d) = publish(counting()).unwrap();
            if std::ptr::eq(direct(h.get()), direct(like.get())) && in_direct_slot(h) == claimed {
                return (h, d);
            }
            destroy(h, |_| false).unwrap();
        }
        let s = direct(like.get());
        panic!(
            "no handle landed in the slot of {like:?}: it serves {:#x} ({:?})",
            s.handle.load(Ordering::SeqCst),
            s.allocator.load(Ordering::SeqCst)
        );
    }

    #[test]
    fn a_stale_callback_is_refused_after_its_direct_slot_serves_another_allocator() {
        let (a, da) = publish_in_slot_of(
            PluggableHandle::from_raw(0xACA6_0000_0000_0001).unwrap(),
            true,
        );
        let stale = callbacks(da);
        destroy(a, |_| false).unwrap();
        let (b, db) = publish_in_slot_of(a, true);
        assert_ne!(a, b);

        // SAFETY: a copy of the destroyed allocator's callbacks, with its
        // object: what a caller holding a stale descriptor does.
        assert!(unsafe { (stale.alloc)(stale.obj.as_ptr(), 16) }.is_null());
        // SAFETY: as above; the pointer is refused before anything uses it.
        unsafe { (stale.free)(stale.obj.as_ptr(), 0x5EED_0040 as *mut c_void) };
        assert_eq!(
            with_allocator(a, |x| Ok(x.stats())).unwrap_err(),
            NOT_A_PLUGGABLE
        );
        let s = get(b).unwrap().stats();
        assert_eq!(
            (s.alloc_count, s.refused_free_count),
            (0, 0),
            "nothing reached the allocator now in the slot"
        );

        let c = callbacks(db);
        // SAFETY: the live allocator's own callbacks and object.
        let block = unsafe { (c.alloc)(c.obj.as_ptr(), 16) };
        assert!(!block.is_null());
        assert_eq!(get(b).unwrap().stats().alloc_count, 1);
        // SAFETY: as above; the block it returned.
        unsafe { (c.free)(c.obj.as_ptr(), block) };
        assert_eq!(get(b).unwrap().stats().free_count, 1);
        destroy(b, |_| false).unwrap();
        // SAFETY: as above, now stale too.
        assert!(unsafe { (c.alloc)(c.obj.as_ptr(), 16) }.is_null());
    }

    #[test]
    fn handles_that_share_a_direct_slot_are_each_served_by_their_own_allocator() {
        let (a, da) = publish_in_slot_of(
            PluggableHandle::from_raw(0xACA6_0000_0000_0002).unwrap(),
            true,
        );
        let (b, db) = publish_in_slot_of(a, false);
        assert!(in_direct_slot(a) && !in_direct_slot(b));
        for (handle, descriptor, rounds) in [(a, da, 1u64), (b, db, 2)] {
            let c = callbacks(descriptor);
            for _ in 0..rounds {
                // SAFETY: each allocator's own callbacks and object.
                let block = unsafe { (c.alloc)(c.obj.as_ptr(), 16) };
                assert!(!block.is_null());
                // SAFETY: as above; the block it returned.
                unsafe { (c.free)(c.obj.as_ptr(), block) };
                let p = with_allocator(handle, |x| x.alloc(8, 0, None)).unwrap();
                with_allocator(handle, |x| x.free(p)).unwrap();
            }
        }
        let count = |h| get(h).unwrap().stats().alloc_count;
        assert_eq!((count(a), count(b)), (2, 4), "each call reached its own");
        destroy(a, |_| false).unwrap();
        let p = with_allocator(b, |x| x.alloc(8, 0, None)).unwrap();
        with_allocator(b, |x| x.free(p)).unwrap();
        assert_eq!(count(b), 5);
        destroy(b, |_| false).unwrap();
        assert!(with_allocator(a, |_| Ok(())).is_err());
        assert!(with_allocator(b, |_| Ok(())).is_err());
    }

    /// A callback's answer on a new thread, twice: the thread's first pin
    /// (which the hot path leaves to the slow path), then the hot path.
    /// Each with the message it left.
    fn first_and_hot<T: Send>(call: impl Fn() -> T + Send + Sync) -> [(T, Option<String>); 2] {
        std::thread::scope(|s| {
            s.spawn(|| {
                [0, 1].map(|_| {
                    let _ = errlog::take_recent();
                    let answer = call();
                    (answer, errlog::take_recent())
                })
            })
            .join()
            .unwrap()
        })
    }

    #[test]
    fn the_callbacks_hot_path_and_a_threads_first_call_answer_the_same() {
        let (h, d) = publish(counting()).unwrap();
        let c = callbacks(d);
        let obj = c.obj.as_ptr() as usize;
        let (alloc_fn, free_fn) = (c.alloc, c.free);
        // SAFETY: the allocator's own callbacks with its object (live or
        // destroyed); every pointer passed is refused before it is used, or
        // is a block alloc returned, freed once.
        let alloc = move |size: usize| unsafe { alloc_fn(obj as *mut c_void, size) } as usize;
        // SAFETY: as for `alloc`.
        let free = move |block: usize| unsafe { free_fn(obj as *mut c_void, block as *mut c_void) };
        for (block, message) in first_and_hot(|| {
            let block = alloc(16);
            free(block);
            block
        }) {
            assert!(block != 0 && message.is_none(), "{message:?}");
        }
        assert_eq!(get(h).unwrap().stats().free_count, 2);
        let refused = |text: &str, answers: [(usize, Option<String>); 2]| {
            for (i, (answer, message)) in answers.into_iter().enumerate() {
                assert_eq!(answer, 0, "call {i}");
                let message = message.unwrap_or_else(|| panic!("call {i}: no message"));
                assert!(message.contains(text), "call {i}: {message}");
            }
        };
        let free_refused = |block: usize| {
            free(block);
            0
        };
        refused(
            "not allocated here",
            first_and_hot(|| free_refused(0x5EED_0001)),
        );
        refused("block", first_and_hot(|| free_refused(0)));
        refused("larger than ssize_t", first_and_hot(|| alloc(usize::MAX)));
        let allocator = get(h).unwrap();
        let was_direct = in_direct_slot(h);
        // What a destroy does while it decides.
        let closed_in_slot = close(h, &allocator).unwrap();
        assert_eq!(closed_in_slot, was_direct);
        refused("being destroyed", first_and_hot(|| alloc(16)));
        assert_eq!(allocator.stats().alloc_count, 2, "the plugin was not asked");
        assert!(!in_direct_slot(h), "the hot paths no longer find it");
        reopen(h, &allocator, closed_in_slot);
        assert_eq!(in_direct_slot(h), was_direct, "back in its slot");
        drop(allocator);
        destroy(h, |_| false).unwrap();
        refused(
            "not a live pluggable allocator",
            first_and_hot(|| alloc(16)),
        );
        refused(
            "not a live pluggable allocator",
            first_and_hot(|| free_refused(0x5EED_0001)),
        );
    }

    static HOLD_ALLOC: AtomicUsize = AtomicUsize::new(0);
    static INSIDE_ALLOC: AtomicUsize = AtomicUsize::new(0);

    /// Waits while `HOLD_ALLOC` is set, saying so in `INSIDE_ALLOC`.
    unsafe extern "C" fn alloc_held(_: isize, _: i32, _: *mut c_void) -> *mut c_void {
        INSIDE_ALLOC.store(1, Ordering::SeqCst);
        while HOLD_ALLOC.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
        INSIDE_ALLOC.store(0, Ordering::SeqCst);
        NEXT_ADDRESS.fetch_add(64, Ordering::Relaxed) as *mut c_void
    }

    #[test]
    fn destroy_waits_for_a_call_inside_refuses_new_ones_and_refuses_if_a_block_was_left() {
        let (h, _) = publish(PluggableAllocator::from_functions(PluginFunctions {
            alloc: alloc_held,
            free: free_nothing,
            init: None,
            empty_cache: None,
            memory_fraction: None,
        }))
        .unwrap();
        let was_direct = in_direct_slot(h);
        HOLD_ALLOC.store(1, Ordering::SeqCst);
        let user = std::thread::spawn(move || {
            with_allocator(h, |a| a.alloc(16, 0, None))
                .unwrap()
                .as_ptr() as usize
        });
        while INSIDE_ALLOC.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        let done = Arc::new(AtomicUsize::new(0));
        let destroyer = {
            let done = done.clone();
            std::thread::spawn(move || {
                let result = destroy(h, |_| false);
                done.store(1, Ordering::SeqCst);
                result
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(30));
        assert_eq!(done.load(Ordering::SeqCst), 0, "destroy waits for the call");
        // Meanwhile a new allocation is refused (no block may appear after
        // destroy has counted them).
        let refused = with_allocator(h, |a| {
            refuse_if_closing(a)?;
            a.alloc(16, 0, None)
        });
        assert_eq!(refused, Err(BEING_DESTROYED));
        HOLD_ALLOC.store(0, Ordering::SeqCst);
        let block = user.join().unwrap();
        assert_eq!(
            destroyer.join().unwrap(),
            Err(Error::StillInUse {
                what: "Blocks it handed out that were not freed",
                count: 1
            }),
            "the block the call left makes destroy refuse"
        );
        assert_eq!(
            in_direct_slot(h),
            was_direct,
            "served by its direct slot again"
        );
        // Still served, through its direct slot or the shared table.
        let p = NonNull::new(block as *mut c_void).unwrap();
        with_allocator(h, |a| a.free(p)).unwrap();
        assert_eq!(get(h).unwrap().stats().free_count, 1);
        destroy(h, |_| false).unwrap();
        assert!(with_allocator(h, |_| Ok(())).is_err());
    }

    static EMPTYING: AtomicUsize = AtomicUsize::new(0);
    static EMPTY_SEEN: Mutex<Vec<Result<()>>> = Mutex::new(Vec::new());

    unsafe extern "C" fn empty_cache_destroying_itself() {
        if let Some(handle) = PluggableHandle::from_raw(EMPTYING.load(Ordering::SeqCst)) {
            EMPTY_SEEN.lock().unwrap().push(destroy(handle, |_| false));
        }
    }

    #[test]
    fn a_hook_called_through_the_handle_cannot_destroy_its_own_allocator() {
        let (h, _) = publish(PluggableAllocator::from_functions(PluginFunctions {
            alloc: alloc_address,
            free: free_nothing,
            init: None,
            empty_cache: Some(empty_cache_destroying_itself),
            memory_fraction: None,
        }))
        .unwrap();
        EMPTYING.store(h.get(), Ordering::SeqCst);
        // What aclallocPluggableEmptyCache does.
        with_allocator(h, |a| {
            a.empty_cache();
            Ok(())
        })
        .unwrap();
        assert!(matches!(
            EMPTY_SEEN.lock().unwrap().pop(),
            Some(Err(Error::StillInUse { count: 1, .. }))
        ));
        assert!(with_allocator(h, |_| Ok(())).is_ok(), "still live");
        // Destroyed from outside; the hook runs once more before the unload
        // (its destroy then finds nothing to destroy).
        destroy(h, |_| false).unwrap();
        assert_eq!(EMPTY_SEEN.lock().unwrap().pop(), Some(Err(NOT_A_PLUGGABLE)));
        EMPTYING.store(0, Ordering::SeqCst);
    }

    /// Four plugins whose addresses carry their number in bits 40..42, so
    /// that a call that reaches the wrong allocator is seen.
    static TAGGED_NEXT: AtomicUsize = AtomicUsize::new(0x1000);
    fn tagged(tag: usize) -> *mut c_void {
        ((tag << 40) | TAGGED_NEXT.fetch_add(64, Ordering::Relaxed)) as *mut c_void
    }
    unsafe extern "C" fn alloc_tag0(_: isize, _: i32, _: *mut c_void) -> *mut c_void {
        tagged(0)
    }
    unsafe extern "C" fn alloc_tag1(_: isize, _: i32, _: *mut c_void) -> *mut c_void {
        tagged(1)
    }
    unsafe extern "C" fn alloc_tag2(_: isize, _: i32, _: *mut c_void) -> *mut c_void {
        tagged(2)
    }
    unsafe extern "C" fn alloc_tag3(_: isize, _: i32, _: *mut c_void) -> *mut c_void {
        tagged(3)
    }

    /// Threads call the callbacks of live and destroyed allocators while
    /// another publishes and destroys allocators (their direct slots are
    /// reused all the time): a call through a handle destroyed before it
    /// began fails cleanly, every other call reaches its own allocator.
    #[test]
    fn callbacks_racing_publish_and_destroy_reach_their_own_allocator_or_nothing() {
        const ALLOCS: [crate::plugin::library::PluginAllocFn; 4] =
            [alloc_tag0, alloc_tag1, alloc_tag2, alloc_tag3];
        struct Published {
            handle: PluggableHandle,
            callbacks: crate::core::descriptor::Callbacks,
            tag: usize,
            destroyed: std::sync::atomic::AtomicBool,
        }
        let all: Arc<Mutex<Vec<Arc<Published>>>> = Arc::default();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let publish_one = |i: usize| {
            let (handle, descriptor) =
                publish(PluggableAllocator::from_functions(PluginFunctions {
                    alloc: ALLOCS[i % 4],
                    free: free_nothing,
                    init: None,
                    empty_cache: None,
                    memory_fraction: None,
                }))
                .unwrap();
            Arc::new(Published {
                handle,
                callbacks: callbacks(descriptor),
                tag: i % 4,
                destroyed: std::sync::atomic::AtomicBool::new(false),
            })
        };
        for i in 0..8 {
            all.lock().unwrap().push(publish_one(i));
        }
        let callers: Vec<_> = (0..3)
            .map(|t| {
                let (all, stop) = (all.clone(), stop.clone());
                std::thread::spawn(move || {
                    let (mut served, mut refused, mut at) = (0u64, 0u64, t * 7usize);
                    while !stop.load(Ordering::Relaxed) {
                        let target = {
                            let all = all.lock().unwrap();
                            at = at.wrapping_mul(31).wrapping_add(17);
                            all[at % all.len()].clone()
                        };
                        let was_destroyed = target.destroyed.load(Ordering::SeqCst);
                        let c = &target.callbacks;
                        // SAFETY: an allocator's callbacks with its own
                        // object, the allocator live or destroyed.
                        let block = unsafe { (c.alloc)(c.obj.as_ptr(), 64) };
                        if block.is_null() {
                            refused += 1;
                            continue;
                        }
                        assert!(!was_destroyed, "a destroyed allocator served a call");
                        assert_eq!(
                            block as usize >> 40,
                            target.tag,
                            "another allocator served it"
                        );
                        // SAFETY: as above; the block it returned.
                        unsafe { (c.free)(c.obj.as_ptr(), block) };
                        served += 1;
                    }
                    (served, refused)
                })
            })
            .collect();
        let mut next = 8;
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(400);
        let give_up = deadline + std::time::Duration::from_secs(20);
        let mut stuck = None;
        'churn: while std::time::Instant::now() < deadline {
            let victim = {
                let all = all.lock().unwrap();
                all.iter()
                    .find(|p| !p.destroyed.load(Ordering::SeqCst))
                    .cloned()
            };
            if let Some(victim) = victim {
                // A caller's block may be live for a moment: retry.
                while let Err(e) = destroy(victim.handle, |_| false) {
                    // A caller that failed (its panic is reported below) or
                    // a destroy that never succeeds ends the churn.
                    if callers.iter().any(|c| c.is_finished())
                        || std::time::Instant::now() > give_up
                    {
                        stuck = Some(e);
                        break 'churn;
                    }
                    std::thread::yield_now();
                }
                victim.destroyed.store(true, Ordering::SeqCst);
            }
            let fresh = publish_one(next);
            next += 1;
            let mut all = all.lock().unwrap();
            all.push(fresh);
            if all.len() > 4 * DIRECT_SLOTS {
                // The destroyed ones go. Until then they stay to be called
                // while allocators published after them (64 handles on)
                // take their direct slots.
                all.retain(|p| !p.destroyed.load(Ordering::SeqCst));
            }
        }
        stop.store(true, Ordering::Relaxed);
        let (mut served, mut refused) = (0, 0);
        for c in callers {
            let (s, r) = c.join().unwrap();
            served += s;
            refused += r;
        }
        assert_eq!(stuck, None, "a destroy never succeeded");
        assert!(
            served > 0 && refused > 0,
            "served {served}, refused {refused}"
        );
        for p in all.lock().unwrap().iter() {
            if !p.destroyed.load(Ordering::SeqCst) {
                let s = get(p.handle).unwrap().stats();
                assert_eq!(
                    (s.alloc_count, s.free_count),
                    (s.alloc_count, s.alloc_count)
                );
                destroy(p.handle, |_| false).unwrap();
            }
        }
    }
}
