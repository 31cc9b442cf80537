//! Device memory: host memory, mapped lazily, with a table of live
//! allocations.
//!
//! Each allocation is its own anonymous `MAP_NORESERVE` mapping, so the
//! configured capacity is only a budget: nothing is reserved up front, and an
//! allocation costs host memory only for the pages that are touched.
//! Freeing unmaps, so a use after free faults as on a device. A pointer
//! handed back is looked up in the table of live allocations, never trusted.

use crate::base::error::{Error, Result};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::OnceLock;

pub(crate) const NOT_ALLOCATED: Error = Error::InvalidParam {
    param: "devPtr",
    reason: "It is not the start of live device memory (it was not returned by aclrtMalloc, or it was already freed)",
};

/// One device's memory.
pub struct DeviceHeap {
    device: u32,
    capacity: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Bytes mapped (whole pages) by live allocations.
    used: usize,
    /// Start address → allocation.
    live: BTreeMap<usize, Region>,
}

#[derive(Clone, Copy)]
struct Region {
    /// The size the caller asked for: the bytes it may use.
    size: usize,
    /// The mapped length, whole pages.
    mapped: usize,
}

/// What a device-memory lookup found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The range lies inside one live allocation.
    Inside,
    /// The start is inside a live allocation but the range runs past its end.
    Overruns,
    /// The start is not in any live allocation of this device.
    Outside,
}

fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(page).unwrap_or(4096).max(4096)
    })
}

impl DeviceHeap {
    /// Memory of `device` with room for `capacity` bytes.
    pub fn new(device: u32, capacity: usize) -> Self {
        DeviceHeap {
            device,
            capacity,
            state: Mutex::new(State::default()),
        }
    }

    /// The device this memory belongs to.
    pub fn device(&self) -> u32 {
        self.device
    }

    /// The capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes taken by live allocations (whole pages).
    pub fn used(&self) -> usize {
        self.state.lock().used
    }

    /// The number of live allocations.
    pub fn live_allocations(&self) -> usize {
        self.state.lock().live.len()
    }

    /// Allocates `size` bytes, page-aligned (so also 32-byte aligned), zeroed.
    pub fn alloc(&self, size: usize) -> Result<NonNull<u8>> {
        if size == 0 {
            return Err(Error::InvalidParam {
                param: "size",
                reason: "It must be greater than 0",
            });
        }
        let page = page_size();
        let mut state = self.state.lock();
        let mapped = size
            .checked_add(page - 1)
            .map(|s| s & !(page - 1))
            .filter(|&mapped| mapped <= self.capacity - state.used)
            .ok_or_else(|| self.exhausted(size, state.used))?;
        // SAFETY: an anonymous private mapping at an address of the kernel's
        // choice touches no existing memory.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(Error::ReserveFailed {
                device: self.device,
                size,
            });
        }
        state.used += mapped;
        state.live.insert(addr as usize, Region { size, mapped });
        NonNull::new(addr.cast()).ok_or(Error::Internal {
            reason: "mmap returned NULL",
        })
    }

    /// Why `size` bytes do not fit with `used` bytes taken.
    pub(crate) fn exhausted(&self, size: usize, used: usize) -> Error {
        Error::DeviceMemoryExhausted {
            device: self.device,
            size,
            free: self.capacity - used,
            capacity: self.capacity,
        }
    }

    /// Counts `size` bytes of physical memory (`aclrtMallocPhysical`)
    /// against the capacity: both draw from the one device memory.
    pub(crate) fn charge(&self, size: usize) -> Result<()> {
        let mut state = self.state.lock();
        if size > self.capacity - state.used {
            return Err(self.exhausted(size, state.used));
        }
        state.used += size;
        Ok(())
    }

    /// Gives back what [`DeviceHeap::charge`] counted.
    pub(crate) fn uncharge(&self, size: usize) {
        let mut state = self.state.lock();
        state.used = state.used.saturating_sub(size);
    }

    /// Frees an allocation by its start address; anything else is refused.
    pub fn free(&self, ptr: *mut u8) -> Result<()> {
        let mut state = self.state.lock();
        let region = state.live.remove(&(ptr as usize)).ok_or(NOT_ALLOCATED)?;
        state.used -= region.mapped;
        drop(state);
        // SAFETY: the range is a mapping this table created and just forgot.
        unsafe { libc::munmap(ptr.cast(), region.mapped) };
        Ok(())
    }

    /// True when `ptr` is the start of a live allocation.
    pub fn owns(&self, ptr: *const u8) -> bool {
        self.state.lock().live.contains_key(&(ptr as usize))
    }

    /// Where `[ptr, ptr + len)` lies relative to the live allocations.
    pub fn lookup(&self, ptr: *const u8, len: usize) -> Lookup {
        let addr = ptr as usize;
        let state = self.state.lock();
        match state.live.range(..=addr).next_back() {
            Some((&start, region)) if addr < start + region.size.max(1) => {
                if addr
                    .checked_add(len)
                    .is_some_and(|end| end <= start + region.size)
                {
                    Lookup::Inside
                } else {
                    Lookup::Overruns
                }
            }
            _ => Lookup::Outside,
        }
    }
}

impl Drop for DeviceHeap {
    fn drop(&mut self) {
        for (&start, region) in &self.state.get_mut().live {
            // SAFETY: every live region is a mapping this table created.
            unsafe { libc::munmap(start as *mut libc::c_void, region.mapped) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_writable_zeroed_aligned_and_counted() {
        let mem = DeviceHeap::new(0, 1 << 20);
        let p = mem.alloc(100).unwrap();
        assert_eq!(p.as_ptr() as usize % 32, 0);
        // SAFETY: 100 bytes were allocated.
        unsafe {
            assert_eq!(*p.as_ptr().add(99), 0);
            p.as_ptr().write_bytes(0xAB, 100);
        }
        assert_eq!(mem.used(), page_size());
        assert_eq!(mem.lookup(p.as_ptr(), 100), Lookup::Inside);
        // SAFETY: pointer arithmetic inside the allocation.
        let inner = unsafe { p.as_ptr().add(50) };
        assert_eq!(mem.lookup(inner, 51), Lookup::Overruns);
        assert_eq!(mem.lookup(inner, 50), Lookup::Inside);
        mem.free(p.as_ptr()).unwrap();
        assert_eq!(mem.used(), 0);
        assert_eq!(mem.lookup(p.as_ptr(), 1), Lookup::Outside);
    }

    #[test]
    fn foreign_interior_and_double_frees_are_errors() {
        let mem = DeviceHeap::new(0, 1 << 20);
        let p = mem.alloc(4096).unwrap();
        let mut local = 0u8;
        assert_eq!(mem.free(&mut local), Err(NOT_ALLOCATED));
        // SAFETY: pointer arithmetic inside the allocation.
        assert_eq!(mem.free(unsafe { p.as_ptr().add(8) }), Err(NOT_ALLOCATED));
        mem.free(p.as_ptr()).unwrap();
        assert_eq!(mem.free(p.as_ptr()), Err(NOT_ALLOCATED));
        assert_eq!(mem.live_allocations(), 0);
    }

    #[test]
    fn capacity_is_enforced_and_a_large_one_costs_nothing_up_front() {
        let mem = DeviceHeap::new(3, 1 << 40); // 1 TiB: only touched pages cost
        let big = mem.alloc(64 << 30).unwrap();
        assert_eq!(mem.used(), 64 << 30);
        mem.free(big.as_ptr()).unwrap();

        let small = DeviceHeap::new(1, 2 * page_size());
        let a = small.alloc(page_size() + 1).unwrap();
        match small.alloc(1) {
            Err(Error::DeviceMemoryExhausted {
                device: 1,
                size: 1,
                free: 0,
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
        small.free(a.as_ptr()).unwrap();
        assert!(small.alloc(2 * page_size()).is_ok());
        assert!(matches!(
            small.alloc(usize::MAX),
            Err(Error::DeviceMemoryExhausted { .. })
        ));
        assert!(matches!(small.alloc(0), Err(Error::InvalidParam { .. })));
    }
}
