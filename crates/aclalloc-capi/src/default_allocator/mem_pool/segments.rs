//! Where a memory pool's per-device pool takes its segments: the device
//! (`aclrtMalloc` through the device port) or a pluggable allocator; and the
//! gate that lets a pool serve only from its cache while the default pool is
//! out of memory (`use_on_oom`).

use crate::plugin::{published, PluggableHandle};
use crate::pool::acl::AclMemory;
use crate::pool::virtual_memory::VirtualMemory;
use crate::pool::{DeviceMemory, SEGMENT_ALIGN};
use parking_lot::Mutex;
use std::cell::Cell;
use std::collections::HashMap;
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
///
/// A pool's segments start on a 512-byte boundary (its blocks are found by
/// address in 512-byte units); an allocator's block that does not is asked
/// for again 511 bytes larger and used from its first boundary, the start
/// it gave kept here to give back.
pub(super) struct Pluggable {
    pub(super) handle: PluggableHandle,
    pub(super) device: i32,
    pub(super) capacity: usize,
    /// Segment start → the allocator's block, for segments moved up to a boundary.
    moved: Mutex<HashMap<usize, usize>>,
}

impl Pluggable {
    pub(super) fn new(handle: PluggableHandle, device: i32, capacity: usize) -> Self {
        Pluggable {
            handle,
            device,
            capacity,
            moved: Mutex::new(HashMap::new()),
        }
    }

    fn give_back(&self, block: usize) {
        if let Some(block) = NonNull::new(block as *mut c_void) {
            let _ = published::free(self.handle, block);
        }
    }
}

impl DeviceMemory for Pluggable {
    fn malloc(&self, size: usize) -> Option<NonZeroUsize> {
        if growth_refused() {
            return None;
        }
        let block = published::alloc(self.handle, size, None).ok()?.as_ptr() as usize;
        if block % SEGMENT_ALIGN == 0 {
            return NonZeroUsize::new(block);
        }
        self.give_back(block);
        let larger = size.checked_add(SEGMENT_ALIGN - 1)?;
        let block = published::alloc(self.handle, larger, None).ok()?.as_ptr() as usize;
        let start = block.next_multiple_of(SEGMENT_ALIGN);
        let mut moved = self.moved.lock();
        if moved.try_reserve(1).is_err() {
            drop(moved);
            self.give_back(block);
            return None;
        }
        moved.insert(start, block);
        NonZeroUsize::new(start)
    }

    fn free(&self, addr: NonZeroUsize, _size: usize) {
        let block = self.moved.lock().remove(&addr.get()).unwrap_or(addr.get());
        self.give_back(block);
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn device(&self) -> i32 {
        self.device
    }
}
