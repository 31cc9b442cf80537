//! Device memory: host memory, mapped lazily, with a table of live
//! allocations.
//!
//! Each allocation is its own anonymous `MAP_NORESERVE` mapping, so the
//! configured capacity is only a budget: nothing is reserved up front, and an
//! allocation costs host memory only for the pages that are touched.
//! Freeing gives the pages back but keeps the range as `PROT_NONE` address
//! space, recorded and reused by later allocations: the host never gets the
//! range back for its own memory, so a freed pointer stays recognisable and a
//! copy can refuse it instead of faulting. A pointer handed back is looked up
//! in the table of live allocations, never trusted.

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
    /// Start address → length of freed ranges kept as `PROT_NONE`.
    retired: BTreeMap<usize, usize>,
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
    /// The start is device address space with nothing live there (freed, or
    /// reserved and not mapped): touching it would fault.
    Dead,
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
        let reuse = state.retired.iter().find(|&(_, &len)| len >= mapped);
        let (at, fixed) = reuse.map_or((0, 0), |(&start, _)| (start, libc::MAP_FIXED));
        // SAFETY: an anonymous private mapping at an address of the kernel's
        // choice touches no existing memory; with MAP_FIXED it replaces part
        // of a retired range, which nothing uses.
        let addr = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                mapped,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | fixed,
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
        if fixed != 0 {
            let len = state.retired.remove(&at).unwrap_or(mapped);
            if len > mapped {
                state.retired.insert(at + mapped, len - mapped);
            }
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
        let (mut start, mut len) = (ptr as usize, region.mapped);
        // SAFETY: the range is a mapping this table created and just forgot;
        // a fresh PROT_NONE mapping drops its pages and keeps the range.
        let kept = unsafe {
            libc::mmap(
                ptr.cast(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if kept == libc::MAP_FAILED {
            // SAFETY: as above; the range goes back to the host.
            unsafe { libc::munmap(ptr.cast(), len) };
            return Ok(());
        }
        // Merge with retired neighbours, so reuse finds whole ranges.
        if let Some(after) = state.retired.remove(&(start + len)) {
            len += after;
        }
        if let Some((&before, &before_len)) = state.retired.range(..start).next_back() {
            if before + before_len == start {
                state.retired.remove(&before);
                (start, len) = (before, before_len + len);
            }
        }
        state.retired.insert(start, len);
        Ok(())
    }

    /// True when `ptr` is the start of a live allocation.
    pub fn owns(&self, ptr: *const u8) -> bool {
        self.state.lock().live.contains_key(&(ptr as usize))
    }

    /// The live allocation holding `[ptr, ptr + len)`: its start and mapped
    /// length (whole pages).
    pub(crate) fn region(&self, ptr: usize, len: usize) -> Option<(usize, usize)> {
        let state = self.state.lock();
        let (&start, region) = state.live.range(..=ptr).next_back()?;
        let end = ptr.checked_add(len)?;
        (end <= start + region.size).then_some((start, region.mapped))
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
            _ => match state.retired.range(..=addr).next_back() {
                Some((&start, &len)) if addr < start + len => Lookup::Dead,
                _ => Lookup::Outside,
            },
        }
    }
}

impl Drop for DeviceHeap {
    fn drop(&mut self) {
        let state = self.state.get_mut();
        let live = state
            .live
            .iter()
            .map(|(&start, region)| (start, region.mapped));
        for (start, len) in live.chain(state.retired.iter().map(|(&s, &l)| (s, l))) {
            // SAFETY: every live and retired range is a mapping this table created.
            unsafe { libc::munmap(start as *mut libc::c_void, len) };
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
        assert_eq!(
            mem.lookup(p.as_ptr(), 1),
            Lookup::Dead,
            "freed: kept, never touched"
        );
        let local = 0u8;
        assert_eq!(mem.lookup(&local, 1), Lookup::Outside);
    }

    #[test]
    fn freed_ranges_are_reused_zeroed_and_merged() {
        let mem = DeviceHeap::new(0, 1 << 30);
        let page = page_size();
        let a = mem.alloc(3 * page).unwrap();
        // SAFETY: the allocation is 3 pages long.
        unsafe { a.as_ptr().write_bytes(0xCD, 3 * page) };
        mem.free(a.as_ptr()).unwrap();
        let b = mem.alloc(page).unwrap();
        assert_eq!(b.as_ptr(), a.as_ptr(), "the freed range serves first");
        // SAFETY: one page was allocated.
        assert_eq!(unsafe { *b.as_ptr() }, 0, "reused memory is zeroed");
        // SAFETY: inside the freed tail of the first range.
        let tail = unsafe { a.as_ptr().add(page) };
        assert_eq!(mem.lookup(tail, 1), Lookup::Dead);
        mem.free(b.as_ptr()).unwrap();
        // The two retired pieces merged back into one range of three pages.
        let c = mem.alloc(3 * page).unwrap();
        assert_eq!(c.as_ptr(), a.as_ptr());
        mem.free(c.as_ptr()).unwrap();
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
