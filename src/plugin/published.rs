//! Pluggable allocators as C sees them: live handles, and the descriptor
//! callbacks through which CANN-style code reaches them.
//!
//! The descriptor's allocator object is the plugin's handle (a tagged number,
//! see [`HandleTable`]); every callback looks it up, so a callback through a
//! stale copy of the descriptor finds nothing and fails cleanly instead of
//! touching a destroyed allocator. A block is the device pointer itself.

use super::allocator::PluggableAllocator;
use super::context;
use crate::core::boundary::boundary;
use crate::core::descriptor::AllocatorObj;
use crate::core::error::{Error, Result};
use crate::core::handles::HandleTable;
use crate::core::serving;
use crate::registry::api::global;
use crate::registry::DescriptorHandle;
use std::ffi::c_void;
use std::num::NonZeroUsize;
use std::ptr::NonNull;
use std::sync::Arc;

/// The tag in the top bits of every pluggable-allocator handle.
const PLUGGABLE_TAG: u16 = crate::core::handles::tags::PLUGGABLE;

static PLUGINS: HandleTable<Entry> = HandleTable::new(PLUGGABLE_TAG);

struct Entry {
    allocator: Arc<PluggableAllocator>,
    /// The descriptor made for it; destroyed with it if the caller has not.
    descriptor: DescriptorHandle,
}

/// The handle of a live pluggable allocator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PluggableHandle(NonZeroUsize);

impl PluggableHandle {
    /// A handle from its C value; whether it is live is checked on use.
    pub fn from_ptr(ptr: *mut c_void) -> Option<Self> {
        NonZeroUsize::new(ptr as usize).map(PluggableHandle)
    }

    /// The handle as C sees it.
    pub fn as_ptr(self) -> *mut c_void {
        self.0.get() as *mut c_void
    }
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
    let inserted = PLUGINS.insert(Entry {
        allocator: Arc::clone(&allocator),
        descriptor,
    });
    let handle = match inserted {
        Ok(h) => PluggableHandle(h),
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
        PLUGINS.remove(handle.0.get());
        let _ = api.destroy_descriptor(descriptor);
        return Err(e);
    }
    allocator.init();
    Ok((handle, descriptor))
}

/// The allocator behind a live handle.
pub fn get(handle: PluggableHandle) -> Result<Arc<PluggableAllocator>> {
    lookup(handle.0.get()).ok_or(NOT_A_PLUGGABLE)
}

fn lookup(value: usize) -> Option<Arc<PluggableAllocator>> {
    PLUGINS.with(value, |e| Arc::clone(&e.allocator))
}

/// The pluggable allocator whose handle is `obj` (a registration's
/// allocator object), if it is one.
pub fn from_obj(obj: AllocatorObj) -> Option<Arc<PluggableAllocator>> {
    lookup(obj.as_ptr() as usize)
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
    let entry = PLUGINS.remove(handle.0.get()).ok_or(NOT_A_PLUGGABLE)?;
    // The caller may have destroyed it already; either way it is gone now.
    let _ = global().destroy_descriptor(entry.descriptor);
    Ok(())
}

/// `aclrtAllocatorAllocFunc` of a pluggable allocator's descriptor.
unsafe extern "C" fn desc_alloc(obj: *mut c_void, size: usize) -> *mut c_void {
    boundary("aclallocPluggable alloc callback", || {
        let allocator = lookup(obj as usize).ok_or(NOT_A_PLUGGABLE)?;
        allocator
            .alloc(size, context::current_device(), serving::current())
            .map(NonNull::as_ptr)
    })
}

/// `aclrtAllocatorFreeFunc` of a pluggable allocator's descriptor.
unsafe extern "C" fn desc_free(obj: *mut c_void, block: *mut c_void) {
    boundary("aclallocPluggable free callback", || {
        let allocator = lookup(obj as usize).ok_or(NOT_A_PLUGGABLE)?;
        allocator.free(NonNull::new(block).ok_or(Error::NullPointer { param: "block" })?)
    })
}

/// `aclrtAllocatorGetAddrFromBlockFunc`: a block is its address.
unsafe extern "C" fn desc_get_addr(block: *mut c_void) -> *mut c_void {
    block
}
