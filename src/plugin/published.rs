//! Pluggable allocators as C sees them: live handles, and the descriptor
//! callbacks through which CANN-style code reaches them.
//!
//! The descriptor's allocator object is the plugin's handle (a tagged number,
//! see [`HandleTable`]); every callback looks it up, so a callback through a
//! stale copy of the descriptor finds nothing and fails cleanly instead of
//! touching a destroyed allocator. A block is the device pointer itself.
//!
//! The callbacks are a hot path (one alloc and one free per launch), so they
//! find the allocator without a lock or a reference count: a lock-free table
//! from handle to allocator (`callable`), read under a per-thread pin
//! ([`crate::core::pin`]); destroy removes the handle from that table, waits
//! until no thread is pinned on it, and only then lets the allocator (and
//! its shared object) go.

use super::allocator::PluggableAllocator;
use super::context;
use crate::core::boundary::boundary;
use crate::core::descriptor::AllocatorObj;
use crate::core::error::{Error, Result};
use crate::core::handles::{Handle, HandleTable};
pub use crate::core::ids::PluggableHandle;
use crate::core::pin;
use crate::core::seq_table::{Packed, SeqTable, VALUE_WORDS};
use crate::core::serving;
use crate::registry::api::global;
use crate::registry::DescriptorHandle;
use std::ffi::c_void;
use std::ptr::NonNull;
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

/// Runs `f` on the allocator whose handle is `obj`, found lock-free and
/// used under a pin on the handle (so destroy waits for `f`).
#[inline(always)]
fn with_callable<R>(obj: *mut c_void, f: impl Fn(&PluggableAllocator) -> Result<R>) -> Result<R> {
    let key = obj as usize;
    if !PluggableHandle::could_be(key) {
        return Err(NOT_A_PLUGGABLE);
    }
    let Some(key_nz) = std::num::NonZeroUsize::new(key) else {
        return Err(NOT_A_PLUGGABLE);
    };
    pin::pinned_or(
        key,
        || {
            let Callable(allocator) = callable().get(key_nz).ok_or(NOT_A_PLUGGABLE)?;
            // SAFETY: the handle was in `callable` after this thread's pin
            // was set, so destroy has not passed `wait_unpinned` for it: the
            // allocator's `Arc` is alive until this closure returns.
            f(unsafe { &*allocator })
        },
        // A thread being torn down has no pin: the counted lookup.
        || f(&*lookup(obj).ok_or(NOT_A_PLUGGABLE)?),
    )
}

struct Entry {
    allocator: Arc<PluggableAllocator>,
    /// The descriptor made for it; destroyed with it if the caller has not.
    descriptor: DescriptorHandle,
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
    // The callbacks stop finding it, and the ones already inside finish,
    // before the allocator can be dropped (and its object unloaded).
    callable().remove(handle.value());
    pin::wait_unpinned(handle.get());
    let entry = plugins().remove(handle).ok_or(NOT_A_PLUGGABLE)?;
    // The caller may have destroyed it already; either way it is gone now.
    let _ = global().destroy_descriptor(entry.descriptor);
    Ok(())
}

/// `aclrtAllocatorAllocFunc` of a pluggable allocator's descriptor.
unsafe extern "C" fn desc_alloc(obj: *mut c_void, size: usize) -> *mut c_void {
    boundary("aclallocPluggable alloc callback", || {
        with_callable(obj, |allocator| {
            allocator
                .alloc(size, context::current_device(), serving::current())
                .map(NonNull::as_ptr)
        })
    })
}

/// `aclrtAllocatorFreeFunc` of a pluggable allocator's descriptor.
unsafe extern "C" fn desc_free(obj: *mut c_void, block: *mut c_void) {
    boundary("aclallocPluggable free callback", || {
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
}
