//! CANN's virtual-memory API on the host (`aclrtReserveMemAddress` and
//! friends). A reservation is an anonymous `PROT_NONE` mapping aligned to the
//! granularity (2 MiB); physical memory is a `memfd_create` file counted
//! against its device's capacity; mapping puts the file over part of a
//! reservation, unmapping puts `PROT_NONE` back so a stray access faults.
//!
//! As in CANN: a mapping covers a whole physical allocation; freeing mapped
//! memory kills the handle at once and the memory goes with its last
//! mapping; a reservation with mappings cannot be released; unmapping does
//! not wait for streams.
//!
//! Handles are numbers ([`PhysicalHandle`], never reused) looked up under
//! the one state lock: freeing, mapping and unmapping change a physical
//! allocation and a reservation together.

use crate::base::error::{Error, Result};
use crate::base::handles::Handle;
use crate::base::ids::PhysicalHandle;
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, OnceLock};

/// The granularity of physical allocations, mappings and reservations (not
/// `pub`: it would become an unprefixed `#define` in the generated header).
pub(crate) const GRANULARITY: usize = 2 << 20;
const TAG_SHIFT: u32 = 48;

/// Part of a copy's destination: mapped physical memory, reached through
/// its file (see [`VirtualMemory::files_under`]).
pub(crate) struct FilePart {
    pub fd: Arc<OwnedFd>,
    pub offset: usize,
    pub addr: usize,
    pub len: usize,
}

/// What a virtual-memory lookup found (as [`super::memory::Lookup`]).
pub use super::memory::Lookup;

struct Physical {
    device: u32,
    size: usize,
    /// Shared with copies in flight ([`VirtualMemory::files_under`]).
    fd: Arc<OwnedFd>,
    /// Live mappings of this memory.
    mappings: usize,
    /// `aclrtFreePhysical` was called; the memory goes with its last mapping.
    freed: bool,
    /// Counted against its device's capacity (imported memory is the
    /// exporting process's and is not).
    charged: bool,
}

struct Reservation {
    size: usize,
    /// Mapping start → (size, physical id).
    mappings: BTreeMap<usize, (usize, usize)>,
}

#[derive(Default)]
struct State {
    next_id: usize,
    /// Physical id (handle without its tag) → memory.
    physical: HashMap<usize, Physical>,
    /// Reservation start → reservation.
    reservations: BTreeMap<usize, Reservation>,
}

/// The process's reservations, physical memory and mappings.
#[derive(Default)]
pub struct VirtualMemory {
    state: Mutex<State>,
}

/// The one instance behind the host runtime's exports.
pub fn virtual_memory() -> &'static VirtualMemory {
    static VM: OnceLock<VirtualMemory> = OnceLock::new();
    VM.get_or_init(VirtualMemory::default)
}

pub(super) const fn invalid(param: &'static str, reason: &'static str) -> Error {
    Error::InvalidParam { param, reason }
}

const NOT_PHYSICAL: Error = invalid(
    "handle",
    "It is not a live physical memory handle (it was not returned by aclrtMallocPhysical, or it was already freed with aclrtFreePhysical)",
);
const NOT_RESERVED: Error = invalid(
    "virPtr",
    "It is not the start of a live reservation (it was not returned by aclrtReserveMemAddress, or it was already released)",
);
pub(crate) const NOT_MAPPED: Error = invalid(
    "virPtr",
    "It is not the start of a live mapping made by aclrtMapMem (or it was already unmapped)",
);
const NOT_IN_RESERVATION: Error = invalid(
    "virPtr",
    "It is not inside a reservation made by aclrtReserveMemAddress",
);

pub(super) fn unaligned(param: &'static str) -> Error {
    invalid(
        param,
        "It must be a multiple of the allocation granularity (2097152 bytes; see aclrtMemGetAllocationGranularity)",
    )
}

pub(super) fn aligned(value: usize) -> bool {
    value % GRANULARITY == 0
}

/// Anonymous `PROT_NONE` address space: anywhere (`placement` 0), or at
/// `addr` with `MAP_FIXED` or `MAP_FIXED_NOREPLACE`.
fn map_none(addr: usize, size: usize, placement: libc::c_int) -> Option<usize> {
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | placement;
    // SAFETY: the kernel picks unused space, or never replaces a mapping
    // (NOREPLACE), or the range is part of a live reservation of this module.
    let p = unsafe { libc::mmap(addr as *mut _, size, libc::PROT_NONE, flags, -1, 0) };
    (p != libc::MAP_FAILED).then_some(p as usize)
}

fn unmap_range(addr: usize, size: usize) {
    if size > 0 {
        // SAFETY: the range is address space this module mapped and owns.
        unsafe { libc::munmap(addr as *mut _, size) };
    }
}

impl VirtualMemory {
    /// `aclrtReserveMemAddress`: `size` bytes of address space (rounded up to
    /// and aligned to the granularity, or `alignment` when larger), at `expect`
    /// when given.
    pub fn reserve(
        &self,
        size: usize,
        alignment: usize,
        expect: usize,
        flags: u64,
    ) -> Result<usize> {
        if size == 0 {
            return Err(invalid("size", "It must be greater than 0"));
        }
        if alignment != 0 && !alignment.is_power_of_two() {
            return Err(invalid("alignment", "It must be 0 or a power of two"));
        }
        // CANN's flags carry the page type (aclrtMemPgType: 0 normal, 1 huge,
        // 2 huge 1G); every one is the same memory on the host.
        if flags > 2 {
            return Err(invalid(
                "flags",
                "It must be a page type: 0 (normal), 1 (huge) or 2 (huge 1G)",
            ));
        }
        let align = alignment.max(GRANULARITY);
        let size = size
            .checked_next_multiple_of(GRANULARITY)
            .filter(|&s| s <= isize::MAX as usize / 2)
            .ok_or(Error::ReserveFailed { device: 0, size })?;
        let start = if expect != 0 {
            if expect % align != 0 {
                return Err(invalid(
                    "expectPtr",
                    "It must be aligned to the allocation granularity (2097152 bytes) and to alignment",
                ));
            }
            let p = map_none(expect, size, libc::MAP_FIXED_NOREPLACE);
            if p != Some(expect) {
                if let Some(p) = p {
                    unmap_range(p, size);
                }
                return Err(invalid(
                    "expectPtr",
                    "The requested address range is already in use; pass NULL to let the runtime choose",
                ));
            }
            expect
        } else {
            // Over-reserve by the alignment, then trim both ends.
            let total = size
                .checked_add(align)
                .ok_or(Error::ReserveFailed { device: 0, size })?;
            let raw = map_none(0, total, 0).ok_or(Error::ReserveFailed { device: 0, size })?;
            let start = raw.next_multiple_of(align);
            unmap_range(raw, start - raw);
            unmap_range(start + size, raw + total - (start + size));
            start
        };
        self.state.lock().reservations.insert(
            start,
            Reservation {
                size,
                mappings: BTreeMap::new(),
            },
        );
        Ok(start)
    }

    /// `aclrtReleaseMemAddress`: gives back a whole reservation that has no mappings left.
    pub fn release(&self, addr: usize) -> Result<()> {
        let mut state = self.state.lock();
        let r = state.reservations.get(&addr).ok_or(NOT_RESERVED)?;
        if !r.mappings.is_empty() {
            return Err(Error::StillInUse {
                what: "Mappings in the reservation (unmap them with aclrtUnmapMem first)",
                count: r.mappings.len(),
            });
        }
        let size = r.size;
        state.reservations.remove(&addr);
        drop(state);
        unmap_range(addr, size);
        Ok(())
    }

    /// `aclrtMallocPhysical`: `size` bytes (a multiple of the granularity)
    /// on `device`, counted against `memory`'s capacity. Returns the handle.
    pub fn malloc_physical(
        &self,
        memory: &super::memory::DeviceHeap,
        size: usize,
    ) -> Result<usize> {
        if size == 0 {
            return Err(invalid("size", "It must be greater than 0"));
        }
        if !aligned(size) {
            return Err(unaligned("size"));
        }
        memory.charge(size)?;
        let fd = match memfd(size) {
            Some(fd) => fd,
            None => {
                memory.uncharge(size);
                return Err(memory.exhausted(size, memory.used()));
            }
        };
        let mut state = self.state.lock();
        state.next_id += 1;
        let id = state.next_id;
        state.physical.insert(
            id,
            Physical {
                device: memory.device(),
                size,
                fd: Arc::new(fd),
                mappings: 0,
                freed: false,
                charged: true,
            },
        );
        Ok(((PhysicalHandle::TAG as usize) << TAG_SHIFT) | id)
    }

    /// A handle for `size` bytes of physical memory another process shares
    /// (`fd`), on `device`, not counted against its capacity.
    pub(crate) fn adopt(&self, device: u32, size: usize, fd: OwnedFd) -> usize {
        let mut state = self.state.lock();
        state.next_id += 1;
        let id = state.next_id;
        let physical = Physical {
            device,
            size,
            fd: Arc::new(fd),
            mappings: 0,
            freed: false,
            charged: false,
        };
        state.physical.insert(id, physical);
        ((PhysicalHandle::TAG as usize) << TAG_SHIFT) | id
    }

    /// A new descriptor of the live physical memory `handle`, its size and
    /// device: what another process needs to map the same pages.
    pub(crate) fn share(&self, handle: usize) -> Result<(OwnedFd, usize, u32)> {
        let id = physical_id(handle)?;
        let state = self.state.lock();
        let p = state
            .physical
            .get(&id)
            .filter(|p| !p.freed)
            .ok_or(NOT_PHYSICAL)?;
        let fd = p.fd.try_clone().map_err(|_| Error::Failure {
            reason: "The host refused to duplicate a file descriptor",
        })?;
        Ok((fd, p.size, p.device))
    }

    /// Maps `len` bytes of `fd` (memory another process shares) read-write
    /// into a reservation of its own, so copies see device memory there.
    /// Returns the start; [`Self::unmap_foreign`] undoes it.
    pub(crate) fn map_foreign(&self, fd: OwnedFd, len: usize, device: u32) -> Result<usize> {
        let size = len.next_multiple_of(GRANULARITY);
        let start = self.reserve(size, 0, 0, 0)?;
        // SAFETY: the range is a reservation this module just made; the
        // file is at least `len` bytes long (its exporter's allocation).
        let p = unsafe {
            libc::mmap(
                start as *mut _,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            let _ = self.release(start);
            return Err(Error::Failure {
                reason: "The host refused to map the shared memory",
            });
        }
        let handle = self.adopt(device, len, fd);
        let id = physical_id(handle)?;
        let mut state = self.state.lock();
        if let Some(r) = state.reservations.get_mut(&start) {
            r.mappings.insert(start, (len, id));
        }
        if let Some(p) = state.physical.get_mut(&id) {
            p.mappings = 1;
            p.freed = true;
        }
        Ok(start)
    }

    /// Undoes [`Self::map_foreign`]: the pages go, the address space too.
    pub(crate) fn unmap_foreign(&self, start: usize) -> Result<()> {
        self.unmap(start)?;
        self.release(start)
    }

    /// `aclrtFreePhysical`: the handle dies at once, mapped memory goes with its
    /// last mapping. Returns the device and bytes to uncharge now, if any.
    pub fn free_physical(&self, handle: usize) -> Result<Option<(u32, usize)>> {
        let id = physical_id(handle)?;
        let mut state = self.state.lock();
        let p = state
            .physical
            .get_mut(&id)
            .filter(|p| !p.freed)
            .ok_or(NOT_PHYSICAL)?;
        if p.mappings > 0 {
            p.freed = true;
            return Ok(None);
        }
        let p = state.physical.remove(&id).ok_or(NOT_PHYSICAL)?;
        Ok(p.charged.then_some((p.device, p.size)))
    }

    /// `aclrtMapMem`: maps all of physical `handle` at `addr`, inside one
    /// reservation, over no other mapping.
    pub fn map(
        &self,
        addr: usize,
        size: usize,
        offset: usize,
        handle: usize,
        flags: u64,
    ) -> Result<()> {
        if flags != 0 {
            return Err(invalid("flags", "It is reserved and must be 0"));
        }
        if offset != 0 {
            return Err(invalid(
                "offset",
                "It must be 0: a mapping covers the whole physical allocation",
            ));
        }
        if !aligned(addr) {
            return Err(unaligned("virPtr"));
        }
        if size == 0 || !aligned(size) {
            return Err(unaligned("size"));
        }
        let id = physical_id(handle)?;
        let mut state = self.state.lock();
        let p = state
            .physical
            .get(&id)
            .filter(|p| !p.freed)
            .ok_or(NOT_PHYSICAL)?;
        if p.size != size {
            return Err(invalid(
                "size",
                "It must equal the size of the physical allocation (as passed to aclrtMallocPhysical)",
            ));
        }
        let fd = p.fd.as_raw_fd();
        let (&start, r) = state
            .reservations
            .range_mut(..=addr)
            .next_back()
            .filter(|(&start, r)| addr < start + r.size)
            .ok_or(NOT_IN_RESERVATION)?;
        let end = addr
            .checked_add(size)
            .ok_or(invalid("size", "The range wraps around the address space"))?;
        if end > start + r.size {
            return Err(invalid(
                "size",
                "The range runs past the end of its reservation",
            ));
        }
        let overlaps_before = r
            .mappings
            .range(..addr)
            .next_back()
            .is_some_and(|(&m, &(msize, _))| m + msize > addr);
        let overlaps_after = r.mappings.range(addr..end).next().is_some();
        if overlaps_before || overlaps_after {
            return Err(invalid(
                "virPtr",
                "The range overlaps a live mapping; unmap it with aclrtUnmapMem first",
            ));
        }
        // SAFETY: the range lies in a reservation this module owns and no
        // mapping covers it; the file is at least `size` bytes long.
        let p = unsafe {
            libc::mmap(
                addr as *mut _,
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::Failure {
                reason: "The host refused to map the physical memory",
            });
        }
        r.mappings.insert(addr, (size, id));
        if let Some(p) = state.physical.get_mut(&id) {
            p.mappings += 1;
        }
        Ok(())
    }

    /// True when a mapping starts at `addr` (what [`Self::unmap`] takes).
    pub fn is_mapping(&self, addr: usize) -> bool {
        let state = self.state.lock();
        state
            .reservations
            .range(..=addr)
            .next_back()
            .is_some_and(|(_, r)| r.mappings.contains_key(&addr))
    }

    /// `aclrtUnmapMem`. Returns the device and bytes to uncharge when this was
    /// the last mapping of memory already freed.
    pub fn unmap(&self, addr: usize) -> Result<Option<(u32, usize)>> {
        let mut state = self.state.lock();
        let (_, r) = state
            .reservations
            .range_mut(..=addr)
            .next_back()
            .ok_or(NOT_MAPPED)?;
        let (size, id) = r.mappings.remove(&addr).ok_or(NOT_MAPPED)?;
        // Back to reserved address space (the kernel replaces the file
        // mapping atomically, so no other thread can take the range).
        if map_none(addr, size, libc::MAP_FIXED).is_none() {
            r.mappings.insert(addr, (size, id));
            return Err(Error::Failure {
                reason: "The host refused to restore the reserved address range",
            });
        }
        let p = state.physical.get_mut(&id).ok_or(Error::Internal {
            reason: "a mapping outlived its physical memory",
        })?;
        p.mappings -= 1;
        if p.freed && p.mappings == 0 {
            let p = state.physical.remove(&id).ok_or(NOT_PHYSICAL)?;
            return Ok(p.charged.then_some((p.device, p.size)));
        }
        Ok(None)
    }

    /// Where `[ptr, ptr + len)` lies relative to the live mappings
    /// (adjacent mappings of one reservation count as one range).
    pub fn lookup(&self, ptr: usize, len: usize) -> Lookup {
        let state = self.state.lock();
        let Some((&start, r)) = state.reservations.range(..=ptr).next_back() else {
            return Lookup::Outside;
        };
        if ptr >= start + r.size {
            return Lookup::Outside;
        }
        let end = ptr.saturating_add(len);
        let mut at = ptr;
        let mut first = true;
        // Walk the mappings covering [ptr, end) without gaps.
        loop {
            let covering = r
                .mappings
                .range(..=at)
                .next_back()
                .filter(|(&m, &(msize, _))| at < m + msize || (len == 0 && at < m + msize.max(1)));
            match covering {
                Some((&m, &(msize, _))) => {
                    if end <= m + msize {
                        return Lookup::Inside;
                    }
                    at = m + msize;
                    first = false;
                }
                None if first => return Lookup::Dead,
                None => return Lookup::Overruns,
            }
        }
    }

    /// The physical memory under `[ptr, ptr + len)` when mappings cover
    /// all of it: for each mapping it crosses, its file (shared, so the copy
    /// that follows runs without the lock and a concurrent free cannot close
    /// the descriptor under it), the file offset and the
    /// address and length of the part inside the range. `None` when part of
    /// the range is not mapped memory of this module.
    pub(crate) fn files_under(&self, ptr: usize, len: usize) -> Option<Vec<FilePart>> {
        let state = self.state.lock();
        let (&start, r) = state.reservations.range(..=ptr).next_back()?;
        let end = ptr.checked_add(len)?;
        if end > start + r.size {
            return None;
        }
        let mut parts = Vec::new();
        let mut at = ptr;
        while at < end {
            let (&m, &(msize, id)) = r.mappings.range(..=at).next_back()?;
            if at >= m + msize {
                return None;
            }
            let part_end = end.min(m + msize);
            let fd = state.physical.get(&id)?.fd.clone();
            parts.push(FilePart {
                fd,
                offset: at - m,
                addr: at,
                len: part_end - at,
            });
            at = part_end;
        }
        Some(parts)
    }

    /// Live reservations, physical allocations (freed-but-mapped included) and mappings: for tests.
    pub fn counts(&self) -> (usize, usize, usize) {
        let state = self.state.lock();
        let mappings = state.reservations.values().map(|r| r.mappings.len()).sum();
        (state.reservations.len(), state.physical.len(), mappings)
    }
}

fn physical_id(handle: usize) -> Result<usize> {
    if !PhysicalHandle::could_be(handle) {
        return Err(NOT_PHYSICAL);
    }
    Ok(handle & ((1 << TAG_SHIFT) - 1))
}

/// An anonymous file of `size` bytes: physical memory that can be mapped
/// at several addresses and is only backed once touched.
fn memfd(size: usize) -> Option<OwnedFd> {
    // SAFETY: a static NUL-terminated name; the flags are valid.
    let fd = unsafe { libc::memfd_create(c"aclalloc-physical".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` is a new descriptor owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = libc::off_t::try_from(size).ok()?;
    // SAFETY: `fd` is a valid memfd.
    (unsafe { libc::ftruncate(fd.as_raw_fd(), len) } == 0).then_some(fd)
}

#[cfg(test)]
mod tests {
    use super::super::memory::DeviceHeap;
    use super::*;

    const G: usize = GRANULARITY;

    #[test]
    fn reserve_map_write_unmap_release() {
        let vm = VirtualMemory::default();
        let mem = DeviceHeap::new(0, 8 * G);
        let va = vm.reserve(4 * G, 0, 0, 0).unwrap();
        assert_eq!(va % G, 0);
        let h = vm.malloc_physical(&mem, 2 * G).unwrap();
        assert_eq!(mem.used(), 2 * G);
        vm.map(va + G, 2 * G, 0, h, 0).unwrap();
        // SAFETY: the range is mapped read-write.
        unsafe {
            let p = (va + G) as *mut u8;
            p.write(7);
            p.add(2 * G - 1).write(9);
            assert_eq!(*p, 7);
        }
        assert_eq!(vm.lookup(va + G, 2 * G), Lookup::Inside);
        assert_eq!(vm.lookup(va + G, 2 * G + 1), Lookup::Overruns);
        assert_eq!(vm.lookup(va, 1), Lookup::Dead, "reserved, not mapped");
        // Mapped twice? Over a live mapping: refused.
        let h2 = vm.malloc_physical(&mem, 2 * G).unwrap();
        assert!(vm.map(va + 2 * G, 2 * G, 0, h2, 0).is_err());
        assert!(vm.release(va).is_err(), "a reservation with mappings stays");
        assert_eq!(vm.unmap(va + G).unwrap(), None);
        assert!(vm.unmap(va + G).is_err(), "double unmap");
        // The same physical memory keeps its data at another address.
        vm.map(va + 2 * G, 2 * G, 0, h, 0).unwrap();
        // SAFETY: mapped read-write.
        assert_eq!(unsafe { *((va + 2 * G) as *const u8) }, 7);
        vm.unmap(va + 2 * G).unwrap();
        assert_eq!(vm.free_physical(h).unwrap(), Some((0, 2 * G)));
        assert!(vm.free_physical(h).is_err(), "double free");
        assert_eq!(vm.free_physical(h2).unwrap(), Some((0, 2 * G)));
        vm.release(va).unwrap();
        assert!(vm.release(va).is_err(), "double release");
        assert_eq!(vm.counts(), (0, 0, 0));
    }

    #[test]
    fn misuse_is_refused() {
        let vm = VirtualMemory::default();
        let mem = DeviceHeap::new(0, 4 * G);
        assert!(vm.reserve(0, 0, 0, 0).is_err());
        assert!(vm.reserve(G, 3, 0, 0).is_err());
        assert!(vm.reserve(G, 0, 0, 7).is_err());
        let va = vm.reserve(G + 1, 0, 0, 1).unwrap(); // rounded up: 2 pages
        assert!(vm.malloc_physical(&mem, G + 512).is_err());
        assert!(vm.malloc_physical(&mem, 0).is_err());
        assert!(matches!(
            vm.malloc_physical(&mem, 6 * G),
            Err(Error::DeviceMemoryExhausted { .. })
        ));
        let h = vm.malloc_physical(&mem, G).unwrap();
        assert!(vm.map(va + 512, G, 0, h, 0).is_err(), "unaligned address");
        assert!(vm.map(va, 2 * G, 0, h, 0).is_err(), "size not the handle's");
        assert!(vm.map(va, G, G, h, 0).is_err(), "offset");
        assert!(vm.map(va, G, 0, h, 1).is_err(), "flags");
        assert!(vm.map(va + 2 * G, G, 0, h, 0).is_err(), "outside");
        assert!(vm.map(va, G, 0, h ^ 1, 0).is_err(), "foreign handle");
        assert!(vm.map(va, G, 0, 12345, 0).is_err(), "untagged handle");
        vm.map(va + G, G, 0, h, 0).unwrap();
        // Freed while mapped: the handle dies, the memory stays until unmapped.
        assert_eq!(vm.free_physical(h).unwrap(), None);
        assert!(vm.map(va, G, 0, h, 0).is_err(), "dead handle");
        assert_eq!(vm.unmap(va + G).unwrap(), Some((0, G)));
        vm.release(va).unwrap();
    }
}
