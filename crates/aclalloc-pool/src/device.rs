//! Where a pool's segments come from: [`DeviceMemory`], implemented by the
//! runtime's `aclrtMalloc`/`aclrtFree` and by plain host memory for tests.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::num::NonZeroUsize;

/// A source of device memory.
pub trait DeviceMemory: Send + Sync {
    /// Allocates `size` bytes (a multiple of 512), aligned to at least 512
    /// bytes. `None` when the device is out of memory.
    fn malloc(&self, size: usize) -> Option<NonZeroUsize>;
    /// Returns memory that [`DeviceMemory::malloc`] gave out, with its size.
    fn free(&self, addr: NonZeroUsize, size: usize);
    /// The device's total memory in bytes (the base of a fractional limit).
    fn capacity(&self) -> usize;
    /// The device's id, as snapshots and histories name it.
    fn device(&self) -> i32 {
        0
    }

    /// The device's virtual memory, for expandable segments (`None`: the pool uses fixed segments).
    fn virtual_memory(&self) -> Option<&dyn super::virtual_memory::VirtualMemory> {
        None
    }

    /// The device's free memory now, when known (a failed wake reports it).
    fn free_memory(&self) -> Option<usize> {
        None
    }
}

/// Alignment of every segment: the device allocator's granule.
pub const SEGMENT_ALIGN: usize = 512;

/// Host memory standing in for a device, with a capacity and call counts;
/// each segment is its own lazily backed anonymous `mmap`.
pub struct HostMemory {
    capacity: usize,
    inner: Mutex<HostInner>,
}

#[derive(Default)]
struct HostInner {
    used: usize,
    live: HashMap<usize, usize>,
    mallocs: u64,
    frees: u64,
}

impl HostMemory {
    /// A "device" of `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        HostMemory {
            capacity,
            inner: Mutex::new(HostInner::default()),
        }
    }

    /// Bytes currently allocated.
    pub fn used(&self) -> usize {
        self.inner.lock().used
    }

    /// `(mallocs, frees)` made so far.
    pub fn calls(&self) -> (u64, u64) {
        let inner = self.inner.lock();
        (inner.mallocs, inner.frees)
    }

    /// Counts `size` bytes of mapped pages against the capacity.
    pub(super) fn charge(&self, size: usize) -> bool {
        let mut inner = self.inner.lock();
        if size > self.capacity - inner.used {
            return false;
        }
        inner.used += size;
        true
    }

    /// Gives back what [`HostMemory::charge`] counted.
    pub(super) fn uncharge(&self, size: usize) {
        self.inner.lock().used -= size;
    }
}

impl DeviceMemory for HostMemory {
    fn malloc(&self, size: usize) -> Option<NonZeroUsize> {
        let mut inner = self.inner.lock();
        if size == 0 || size > self.capacity - inner.used {
            return None;
        }
        // SAFETY: an anonymous private mapping touches no existing memory.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return None;
        }
        let addr = NonZeroUsize::new(ptr as usize)?;
        inner.used += size;
        inner.mallocs += 1;
        inner.live.insert(addr.get(), size);
        Some(addr)
    }

    fn free(&self, addr: NonZeroUsize, size: usize) {
        let mut inner = self.inner.lock();
        match inner.live.remove(&addr.get()) {
            Some(recorded) => {
                assert_eq!(recorded, size, "a segment was freed with the wrong size");
                inner.used -= size;
                inner.frees += 1;
                unmap(addr.get(), size);
            }
            None => panic!("HostMemory::free of memory it did not allocate"),
        }
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn virtual_memory(&self) -> Option<&dyn super::virtual_memory::VirtualMemory> {
        Some(self)
    }

    fn free_memory(&self) -> Option<usize> {
        Some(self.capacity - self.used())
    }
}

fn unmap(addr: usize, size: usize) {
    // SAFETY: `addr` is a live mapping of `size` bytes made by `malloc`.
    let rc = unsafe { libc::munmap(addr as *mut libc::c_void, size) };
    debug_assert_eq!(rc, 0, "munmap failed");
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        for (addr, size) in self.inner.get_mut().live.drain() {
            unmap(addr, size);
        }
    }
}

impl<D: DeviceMemory + ?Sized> DeviceMemory for std::sync::Arc<D> {
    fn malloc(&self, size: usize) -> Option<NonZeroUsize> {
        (**self).malloc(size)
    }
    fn free(&self, addr: NonZeroUsize, size: usize) {
        (**self).free(addr, size)
    }
    fn capacity(&self) -> usize {
        (**self).capacity()
    }
    fn device(&self) -> i32 {
        (**self).device()
    }

    fn virtual_memory(&self) -> Option<&dyn super::virtual_memory::VirtualMemory> {
        (**self).virtual_memory()
    }

    fn free_memory(&self) -> Option<usize> {
        (**self).free_memory()
    }
}
