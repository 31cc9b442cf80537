//! Pluggable allocators as C sees them: live handles, and the descriptor
//! callbacks through which CANN-style code reaches them.
//!
//! The descriptor's allocator object is the plugin's handle (a tagged number,
//! see [`HandleMap`]); every call looks it up in the table of live pluggable
//! allocators, so a stale or forged handle (or a stale copy of the
//! descriptor) finds nothing and fails cleanly. A block is the device
//! pointer itself.
//!
//! A call marks its thread as inside before it looks the allocator up
//! (`inside`: a store to the thread's own record, no locked instruction),
//! and destroy, having taken the allocator out of the table, waits until
//! every call then in progress has returned before it is dropped. A thread
//! inside a call of any pluggable allocator cannot wait for that (it would
//! wait for itself), so destroy refuses there.

use super::allocator::PluggableAllocator;
use super::context;
use super::inside::{self, wait_for_calls_inside};
use crate::base::boundary::boundary;
use crate::base::descriptor::AllocatorObj;
use crate::base::error::{Error, Result};
use crate::base::handles::HandleMap;
pub use crate::base::ids::PluggableHandle;
use crate::base::serving;
use crate::base::sync::Ordering;
use crate::base::table::Packed;
use crate::registry::api::global;
use crate::registry::{DescriptorHandle, StreamKey};
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::OnceLock;

struct Entry {
    allocator: PluggableAllocator,
    /// The descriptor made for it; destroyed with it if the caller has not.
    descriptor: DescriptorHandle,
}

/// A published entry's address (a leaked box, taken back by [`unpublish`]).
#[derive(Clone, Copy)]
struct EntryRef(*const Entry);

// SAFETY: an entry is `Send + Sync` (a pluggable allocator is); the address
// is dereferenced only as `with_entry` and `unpublish` say.
unsafe impl Send for EntryRef {}
// SAFETY: as for `Send`.
unsafe impl Sync for EntryRef {}

// SAFETY: `unpack` only sees words `pack` produced: word 0 is an entry's
// address; every bit pattern is a valid raw pointer anyway (dereferenced
// only inside a call, while the entry is published).
unsafe impl Packed<1> for EntryRef {
    fn pack(&self) -> [usize; 1] {
        [self.0 as usize]
    }
    unsafe fn unpack([entry]: [usize; 1]) -> Self {
        EntryRef(entry as *const Entry)
    }
}

/// Every live pluggable allocator.
fn plugins() -> &'static HandleMap<PluggableHandle, EntryRef, 1> {
    static PLUGINS: OnceLock<HandleMap<PluggableHandle, EntryRef, 1>> = OnceLock::new();
    PLUGINS.get_or_init(|| HandleMap::with_capacity(8))
}

/// Takes `handle` out of the table and returns its entry once no call uses
/// it any more.
fn unpublish(handle: PluggableHandle) -> Option<Box<Entry>> {
    let entry = plugins().remove(handle)?;
    wait_for_calls_inside();
    // SAFETY: the address of a box leaked by `publish`, now out of the table
    // (no call can find it) and out of every call (the grace period above):
    // this is its one owner.
    Some(unsafe { Box::from_raw(entry.0 as *mut Entry) })
}

/// Runs `f` on the live entry `handle`; `None` when it is not live.
#[inline]
fn with_entry<R>(handle: PluggableHandle, f: impl FnOnce(&Entry) -> R) -> Option<R> {
    let _inside = inside::enter();
    let entry = plugins().get(handle)?;
    // SAFETY: found in the table while this thread is inside a call:
    // `unpublish` frees it only after every call then inside returned.
    Some(f(unsafe { &*entry.0 }))
}

/// Runs `f` on the live pluggable allocator `handle`; destroy waits until
/// `f` returns, and refuses from inside `f` on this thread.
#[inline]
pub fn with_allocator<R>(
    handle: PluggableHandle,
    f: impl FnOnce(&PluggableAllocator) -> Result<R>,
) -> Result<R> {
    // Not through `with_entry`: `f`'s result is passed on as it is, not
    // wrapped and unwrapped again (an error is several words).
    let _inside = inside::enter();
    match plugins().get(handle) {
        // SAFETY: as in `with_entry`.
        Some(entry) => f(unsafe { &(*entry.0).allocator }),
        None => Err(NOT_A_PLUGGABLE),
    }
}

/// Allocates from the allocator `handle` for the calling thread's device;
/// refused while a destroy decides about it.
pub fn alloc(
    handle: PluggableHandle,
    size: usize,
    stream: Option<StreamKey>,
) -> Result<NonNull<c_void>> {
    with_allocator(handle, |a| {
        if a.closing.load(Ordering::Relaxed) {
            return Err(BEING_DESTROYED);
        }
        a.alloc(size, context::current_device(), stream)
    })
}

/// Frees a block of the allocator `handle`.
pub fn free(handle: PluggableHandle, block: NonNull<c_void>) -> Result<()> {
    with_allocator(handle, |a| a.free(block))
}

const BEING_DESTROYED: Error = Error::InvalidParam {
    param: "allocator",
    reason: "It is being destroyed (aclallocPluggableDestroy is running on another thread)",
};

const NOT_A_PLUGGABLE: Error = Error::InvalidParam {
    param: "allocator",
    reason: "It is not a live pluggable allocator (it was destroyed, or was never returned by aclallocPluggableCreate)",
};

/// Publishes `allocator` under a new handle with a complete descriptor ready
/// for `aclrtAllocatorRegister`, then runs its init hook. On failure nothing
/// is left: no handle, no descriptor.
pub fn publish(allocator: PluggableAllocator) -> Result<(PluggableHandle, DescriptorHandle)> {
    let api = global();
    let descriptor = api.create_descriptor()?;
    let entry = Box::new(Entry {
        allocator,
        descriptor,
    });
    let entry = EntryRef(Box::into_raw(entry));
    let handle = match plugins().insert(entry) {
        Ok(handle) => handle,
        Err(e) => {
            // SAFETY: the box leaked just above, never published.
            drop(unsafe { Box::from_raw(entry.0 as *mut Entry) });
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
        unpublish(handle);
        let _ = api.destroy_descriptor(descriptor);
        return Err(e);
    }
    if let Err(e) = with_allocator(handle, |a| a.init()) {
        unpublish(handle);
        let _ = api.destroy_descriptor(descriptor);
        return Err(e);
    }
    Ok((handle, descriptor))
}

/// True when `obj` (a registration's allocator object) is a live pluggable
/// allocator's handle.
pub fn is_pluggable(obj: AllocatorObj) -> bool {
    PluggableHandle::from_ptr(obj.as_ptr()).is_some_and(|h| with_entry(h, |_| ()).is_some())
}

/// Starts a destroy's decision: from now on new allocations are refused
/// (frees go on). `BEING_DESTROYED` when another destroy has the claim.
pub fn close(handle: PluggableHandle) -> Result<()> {
    let claimed = with_allocator(handle, |a| {
        Ok(a.closing
            .compare_exchange(false, true, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok())
    })?;
    claimed.then_some(()).ok_or(BEING_DESTROYED)
}

/// Ends a refused destroy's decision: allocations are served again.
pub fn reopen(handle: PluggableHandle) {
    let _ = with_allocator(handle, |a| {
        a.closing.store(false, Ordering::Relaxed);
        Ok(())
    });
}

fn blocks_left(live: usize) -> Result<()> {
    if live > 0 {
        return Err(Error::StillInUse {
            what: "Blocks it handed out that were not freed",
            count: live,
        });
    }
    Ok(())
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
    if inside::is_inside() {
        // Inside a call of a pluggable allocator (perhaps this one, whose
        // code would be unloaded under it): the wait below would wait for
        // this thread.
        return Err(Error::StillInUse {
            what: "A pluggable allocator's function is running on this thread (destroy it after the function returns)",
            count: 1,
        });
    }
    blocks_left(with_allocator(handle, |a| Ok(a.live_blocks()))?)?;
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
    close(handle)?;
    // The calls that began before `close` have returned after this (an
    // allocation among them may have left a block); the ones after it see
    // `closing`. So the count taken now is final.
    wait_for_calls_inside();
    let live = with_allocator(handle, |a| Ok(a.live_blocks()))?;
    if let Err(e) = blocks_left(live) {
        reopen(handle);
        return Err(e);
    }
    // Waits for the frees still inside; the allocator (and its shared
    // object) goes when `entry` is dropped, on this thread.
    let entry = unpublish(handle).ok_or(NOT_A_PLUGGABLE)?;
    // The caller may have destroyed it already; either way it is gone now.
    let _ = global().destroy_descriptor(entry.descriptor);
    Ok(())
}

const ALLOC_CALLBACK: &str = "aclallocPluggable alloc callback";
const FREE_CALLBACK: &str = "aclallocPluggable free callback";

/// The handle a descriptor callback was given as its allocator object.
fn handle_of(obj: *mut c_void) -> Result<PluggableHandle> {
    PluggableHandle::from_ptr(obj).ok_or(NOT_A_PLUGGABLE)
}

/// `aclrtAllocatorAllocFunc` of a pluggable allocator's descriptor: the
/// plugin is told the stream being served, if any.
unsafe extern "C" fn desc_alloc(obj: *mut c_void, size: usize) -> *mut c_void {
    boundary(ALLOC_CALLBACK, || {
        alloc(handle_of(obj)?, size, serving::current()).map(NonNull::as_ptr)
    })
}

/// `aclrtAllocatorFreeFunc` of a pluggable allocator's descriptor.
unsafe extern "C" fn desc_free(obj: *mut c_void, block: *mut c_void) {
    boundary(FREE_CALLBACK, || {
        let block = NonNull::new(block).ok_or(Error::NullPointer { param: "block" })?;
        free(handle_of(obj)?, block)
    })
}

/// `aclrtAllocatorGetAddrFromBlockFunc`: a block is its address.
unsafe extern "C" fn desc_get_addr(block: *mut c_void) -> *mut c_void {
    block
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::errlog;
    use crate::base::sync::{AtomicBool, AtomicUsize};
    use crate::PluginFunctions;
    use std::sync::{Arc, Mutex};

    static SELF: AtomicUsize = AtomicUsize::new(0);
    static SEEN: Mutex<Vec<Result<()>>> = Mutex::new(Vec::new());
    static MEMORY: [u8; 64] = [0; 64];

    unsafe extern "C" fn alloc_destroying_itself(_: isize, _: i32, _: *mut c_void) -> *mut c_void {
        let handle = PluggableHandle::from_raw(SELF.load(Ordering::SeqCst)).unwrap();
        let mut seen = SEEN.lock().unwrap();
        // A call back into its own allocator is served (no second reader
        // lock: a waiting destroy would make it wait forever).
        seen.push(with_allocator(handle, |a| Ok(a.stats())).map(|_| ()));
        seen.push(destroy(handle, |_| false));
        MEMORY.as_ptr() as *mut c_void
    }
    unsafe extern "C" fn free_nothing(_: *mut c_void, _: isize, _: i32, _: *mut c_void) {}

    /// Addresses never dereferenced: a plugin that only counts.
    static NEXT_ADDRESS: AtomicUsize = AtomicUsize::new(0x5EED_0000);
    unsafe extern "C" fn alloc_address(_: isize, _: i32, _: *mut c_void) -> *mut c_void {
        NEXT_ADDRESS.fetch_add(64, Ordering::Relaxed) as *mut c_void
    }

    fn plugin(alloc: crate::library::PluginAllocFn) -> PluggableAllocator {
        PluggableAllocator::from_functions(PluginFunctions {
            alloc,
            free: free_nothing,
            init: None,
            empty_cache: None,
            memory_fraction: None,
        })
    }

    fn callbacks(descriptor: DescriptorHandle) -> crate::base::descriptor::Callbacks {
        global()
            .descriptor(descriptor)
            .unwrap()
            .callbacks()
            .unwrap()
    }

    fn stats(h: PluggableHandle) -> crate::Stats {
        with_allocator(h, |a| Ok(a.stats())).unwrap()
    }

    #[test]
    fn a_callback_cannot_destroy_its_own_allocator_and_destroy_works_after() {
        let (handle, descriptor) = publish(plugin(alloc_destroying_itself)).unwrap();
        SELF.store(handle.get(), Ordering::SeqCst);
        let c = callbacks(descriptor);
        // SAFETY: the descriptor's callbacks with its own object.
        let block = unsafe { (c.alloc)(c.obj.as_ptr(), 16) };
        assert_eq!(block as usize, MEMORY.as_ptr() as usize);
        let seen = std::mem::take(&mut *SEEN.lock().unwrap());
        assert_eq!(seen[0], Ok(()));
        assert!(matches!(seen[1], Err(Error::StillInUse { count: 1, .. })));
        // SAFETY: as above; the block it returned.
        unsafe { (c.free)(c.obj.as_ptr(), block) };
        assert_eq!(destroy(handle, |_| false), Ok(()));
        // The callbacks of a destroyed allocator find nothing.
        // SAFETY: as above.
        assert!(unsafe { (c.alloc)(c.obj.as_ptr(), 16) }.is_null());
    }

    static OTHER: AtomicUsize = AtomicUsize::new(0);
    static OTHER_SEEN: Mutex<Vec<Result<()>>> = Mutex::new(Vec::new());

    unsafe extern "C" fn alloc_destroying_another(_: isize, _: i32, _: *mut c_void) -> *mut c_void {
        let other = PluggableHandle::from_raw(OTHER.load(Ordering::SeqCst)).unwrap();
        OTHER_SEEN.lock().unwrap().push(destroy(other, |_| false));
        NEXT_ADDRESS.fetch_add(64, Ordering::Relaxed) as *mut c_void
    }

    #[test]
    fn a_callback_cannot_destroy_another_allocator_either() {
        // Its wait for the calls inside would wait for the call it runs in.
        let (a, _) = publish(plugin(alloc_destroying_another)).unwrap();
        let (b, _) = publish(plugin(alloc_address)).unwrap();
        OTHER.store(b.get(), Ordering::SeqCst);
        free(a, alloc(a, 16, None).unwrap()).unwrap();
        assert!(matches!(
            OTHER_SEEN.lock().unwrap().pop(),
            Some(Err(Error::StillInUse { count: 1, .. }))
        ));
        assert_eq!(with_allocator(b, |_| Ok(())), Ok(()), "still live");
        destroy(b, |_| false).unwrap();
        destroy(a, |_| false).unwrap();
    }

    #[test]
    fn stale_callbacks_reach_nothing_and_live_ones_their_own_allocator() {
        let (a, da) = publish(plugin(alloc_address)).unwrap();
        let stale = callbacks(da);
        destroy(a, |_| false).unwrap();
        // Likely in the entry `a` had.
        let (b, db) = publish(plugin(alloc_address)).unwrap();
        let (c, dc) = publish(plugin(alloc_address)).unwrap();
        // SAFETY: a copy of the destroyed allocator's callbacks, with its
        // object: what a caller holding a stale descriptor does.
        assert!(unsafe { (stale.alloc)(stale.obj.as_ptr(), 16) }.is_null());
        // SAFETY: as above; the pointer is refused before anything uses it.
        unsafe { (stale.free)(stale.obj.as_ptr(), 0x5EED_0040 as *mut c_void) };
        assert_eq!(with_allocator(a, |_| Ok(())), Err(NOT_A_PLUGGABLE));
        for (handle, descriptor, rounds) in [(b, db, 1u64), (c, dc, 2)] {
            let cb = callbacks(descriptor);
            for _ in 0..rounds {
                // SAFETY: each allocator's own callbacks and object.
                let block = unsafe { (cb.alloc)(cb.obj.as_ptr(), 16) };
                assert!(!block.is_null());
                // SAFETY: as above; the block it returned.
                unsafe { (cb.free)(cb.obj.as_ptr(), block) };
            }
            let s = stats(handle);
            let counts = (s.alloc_count, s.free_count, s.refused_free_count);
            assert_eq!(counts, (rounds, rounds, 0), "each call reached its own");
        }
        for h in [b, c] {
            destroy(h, |_| false).unwrap();
            assert_eq!(with_allocator(h, |_| Ok(())), Err(NOT_A_PLUGGABLE));
        }
    }

    /// What `call` answered and the message it left.
    fn answer<T>(call: impl FnOnce() -> T) -> (T, Option<String>) {
        let _ = errlog::take_recent();
        let answer = call();
        (answer, errlog::take_recent())
    }

    #[test]
    fn the_callbacks_answer_failures_with_a_message_and_refuse_while_closing() {
        let (h, d) = publish(plugin(alloc_address)).unwrap();
        let c = callbacks(d);
        let obj = c.obj.as_ptr();
        // SAFETY: the allocator's own callbacks with its object (live or
        // destroyed); every pointer passed is refused before it is used, or
        // is a block alloc returned, freed once.
        let alloc = |size: usize| unsafe { (c.alloc)(obj, size) } as usize;
        // SAFETY: as for `alloc`.
        let free = |block: usize| unsafe { (c.free)(obj, block as *mut c_void) };
        let (block, message) = answer(|| alloc(16));
        assert!(block != 0 && message.is_none(), "{message:?}");
        assert_eq!(answer(|| free(block)).1, None);
        let refused = |text: &str, (answer, message): (usize, Option<String>)| {
            assert_eq!(answer, 0);
            let message = message.expect("a message");
            assert!(message.contains(text), "{message}");
        };
        refused("not allocated here", answer(|| (free(0x5EED_0001), 0).1));
        refused("block", answer(|| (free(0), 0).1));
        refused("larger than ssize_t", answer(|| alloc(usize::MAX)));
        // What a destroy does while it decides: one claim, allocations
        // refused without the plugin, frees go on.
        let block = alloc(16);
        close(h).unwrap();
        assert_eq!(close(h), Err(BEING_DESTROYED), "one claim");
        refused("being destroyed", answer(|| alloc(16)));
        assert_eq!(stats(h).alloc_count, 2, "the plugin was not asked");
        free(block);
        assert_eq!(stats(h).free_count, 2);
        reopen(h);
        free(alloc(16));
        assert_eq!(stats(h).alloc_count, 3, "served again");
        destroy(h, |_| false).unwrap();
        refused("not a live pluggable allocator", answer(|| alloc(16)));
        refused(
            "not a live pluggable allocator",
            answer(|| (free(0x5EED_0001), 0).1),
        );
    }

    static HOLD_ALLOC: AtomicBool = AtomicBool::new(false);
    static INSIDE_ALLOC: AtomicBool = AtomicBool::new(false);

    /// Waits while `HOLD_ALLOC` is set, saying so in `INSIDE_ALLOC`.
    unsafe extern "C" fn alloc_held(_: isize, _: i32, _: *mut c_void) -> *mut c_void {
        INSIDE_ALLOC.store(true, Ordering::SeqCst);
        while HOLD_ALLOC.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        NEXT_ADDRESS.fetch_add(64, Ordering::Relaxed) as *mut c_void
    }

    #[test]
    fn destroy_waits_for_a_call_inside_and_refuses_if_it_left_a_block() {
        let (h, _) = publish(plugin(alloc_held)).unwrap();
        HOLD_ALLOC.store(true, Ordering::SeqCst);
        let user = std::thread::spawn(move || alloc(h, 16, None).unwrap().as_ptr() as usize);
        while !INSIDE_ALLOC.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        let done = Arc::new(AtomicBool::new(false));
        let destroyer = {
            let done = done.clone();
            std::thread::spawn(move || {
                let result = destroy(h, |_| false);
                done.store(true, Ordering::SeqCst);
                result
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(30));
        assert!(!done.load(Ordering::SeqCst), "destroy waits for the call");
        HOLD_ALLOC.store(false, Ordering::SeqCst);
        let block = user.join().unwrap();
        assert_eq!(
            destroyer.join().unwrap(),
            Err(Error::StillInUse {
                what: "Blocks it handed out that were not freed",
                count: 1
            }),
            "the block the call left makes destroy refuse"
        );
        free(h, NonNull::new(block as *mut c_void).unwrap()).unwrap();
        free(h, alloc(h, 16, None).unwrap()).unwrap();
        assert_eq!(stats(h).free_count, 2, "served again");
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
        with_allocator(h, |a| a.empty_cache()).unwrap();
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
    /// another publishes and destroys allocators (their table entries are
    /// reused all the time): a call through a handle destroyed before it
    /// began fails cleanly, every other call reaches its own allocator.
    #[test]
    fn callbacks_racing_publish_and_destroy_reach_their_own_allocator_or_nothing() {
        const ALLOCS: [crate::library::PluginAllocFn; 4] =
            [alloc_tag0, alloc_tag1, alloc_tag2, alloc_tag3];
        struct Published {
            handle: PluggableHandle,
            callbacks: crate::base::descriptor::Callbacks,
            tag: usize,
            destroyed: AtomicBool,
        }
        let all: Arc<Mutex<Vec<Arc<Published>>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let publish_one = |i: usize| {
            let (handle, descriptor) = publish(plugin(ALLOCS[i % 4])).unwrap();
            Arc::new(Published {
                handle,
                callbacks: callbacks(descriptor),
                tag: i % 4,
                destroyed: AtomicBool::new(false),
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
            if all.len() > 256 {
                // The destroyed ones go; until then they stay to be called
                // while newer allocators take their entries.
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
                let s = stats(p.handle);
                assert_eq!(s.alloc_count, s.free_count);
                destroy(p.handle, |_| false).unwrap();
            }
        }
    }
}
