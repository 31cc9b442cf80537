//! Where a memory pool's per-device pool takes its segments: the device
//! (`aclrtMalloc` through the device port) or a pluggable allocator; and the
//! gate that lets a pool serve only from its cache while the default pool is
//! out of memory (`use_on_oom`).

use crate::plugin::{published, PluggableHandle};
use crate::pool::acl::AclMemory;
use crate::pool::virtual_memory::VirtualMemory;
use crate::pool::DeviceMemory;
use std::cell::Cell;
use std::ffi::c_void;
use std::num::NonZeroUsize;
use std::ptr::NonNull;

thread_local! {
    /// Set while this thread asks memory pools for cached blocks only: a
    /// pool then gets no new segment.
    static CACHE_ONLY: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with growth refused to every memory pool on this thread.
pub(super) fn cache_only<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            CACHE_ONLY.set(self.0);
        }
    }
    let _restore = Restore(CACHE_ONLY.replace(true));
    f()
}

fn growth_refused() -> bool {
    CACHE_ONLY.get()
}

/// Segments from the device, as the default pools take them.
pub(super) struct Device(pub(super) AclMemory);

impl DeviceMemory for Device {
    fn malloc(&self, size: usize) -> Option<NonZeroUsize> {
        if growth_refused() {
            return None;
        }
        self.0.malloc(size)
    }

    fn free(&self, addr: NonZeroUsize, size: usize) {
        self.0.free(addr, size)
    }

    fn capacity(&self) -> usize {
        self.0.capacity()
    }

    fn device(&self) -> i32 {
        self.0.device()
    }

    fn virtual_memory(&self) -> Option<&dyn VirtualMemory> {
        self.0.virtual_memory()
    }
}

/// Segments from a pluggable allocator: each segment is one of its blocks.
/// The allocator cannot be destroyed while the pool holds a segment (it
/// refuses while blocks are live).
pub(super) struct Pluggable {
    pub(super) handle: PluggableHandle,
    pub(super) device: i32,
    pub(super) capacity: usize,
}

impl DeviceMemory for Pluggable {
    fn malloc(&self, size: usize) -> Option<NonZeroUsize> {
        if growth_refused() {
            return None;
        }
        let block = published::alloc(self.handle, size, None).ok()?;
        NonZeroUsize::new(block.as_ptr() as usize)
    }

    fn free(&self, addr: NonZeroUsize, _size: usize) {
        if let Some(block) = NonNull::new(addr.get() as *mut c_void) {
            let _ = published::free(self.handle, block);
        }
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn device(&self) -> i32 {
        self.device
    }
}
