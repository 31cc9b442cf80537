//! The records of region memory: each piece of physical memory a region
//! made (a *backing*), where it is mapped, and whether it sleeps; and the
//! program's calls on that memory (allocate, map, unmap, free).
//!
//! One lock guards the records and is held across the runtime calls of one
//! operation, so a sleep never sees half an allocation. It is never held
//! while waiting for the device: a stream's work may itself free memory.

use super::port::RegionPort;
use crate::base::asleep;
use crate::base::error::{Error, Result};
use crate::base::handles::{Handle, TAG_SHIFT};
use crate::base::ids::RegionPhysicalHandle;
use crate::base::types::aclrtPhysicalMemProp;
use crate::offload::HostCopy;
use parking_lot::{Mutex, MutexGuard};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Where a backing's contents are.
pub(super) enum Memory {
    /// In the runtime's physical memory `handle`.
    Awake(usize),
    /// Given back; offloaded to host memory, or discarded (`None`).
    Asleep(Option<HostCopy>),
}

/// One physical allocation made inside a region.
pub(super) struct Backing {
    pub(super) tag: Arc<str>,
    /// Bytes of physical memory (what `aclrtMallocPhysical` was asked for).
    pub(super) size: usize,
    pub(super) prop: aclrtPhysicalMemProp,
    pub(super) flags: u64,
    pub(super) memory: Memory,
    /// Where it is mapped, with the program's `aclrtMapMem` size, offset
    /// and flags (repeated at wake).
    pub(super) mapping: Option<Mapping>,
    /// Made by `aclrtMalloc` in a region: the reservation at the mapping's
    /// address is the region's, released by `aclrtFree`.
    pub(super) owns_reservation: bool,
    /// The program's handle (memory from `aclrtMallocPhysical`) is live.
    pub(super) handle_live: bool,
}

#[derive(Clone, Copy)]
pub(super) struct Mapping {
    pub(super) va: usize,
    pub(super) size: usize,
    pub(super) offset: usize,
    pub(super) flags: u64,
}

#[derive(Default)]
pub(super) struct Books {
    next_id: usize,
    /// Backing id → backing. A program's handle is the id under the tag.
    pub(super) backings: HashMap<usize, Backing>,
    /// Mapped address → backing id, awake or asleep.
    pub(super) mapped: BTreeMap<usize, usize>,
    /// The program's reservations: start → size (a release must not take
    /// away the range of a sleeping mapping).
    reservations: BTreeMap<usize, usize>,
    /// Tags put to sleep and not woken since: their regions allocate nothing.
    pub(super) asleep_tags: HashSet<Arc<str>>,
}

static BOOKS: Mutex<Option<Books>> = Mutex::new(None);

/// How many backings exist: the program's calls outside regions check
/// their addresses with one load while there are none.
static LIVE: AtomicUsize = AtomicUsize::new(0);

pub(super) fn books() -> MappedBooks {
    MutexGuard::map(BOOKS.lock(), |b| b.get_or_insert_with(Books::default))
}

pub(super) type MappedBooks = parking_lot::MappedMutexGuard<'static, Books>;

/// True when no region memory exists (the common case, one load).
#[inline]
pub(super) fn none_live() -> bool {
    LIVE.load(Ordering::Relaxed) == 0
}

const ID_MASK: usize = (1 << TAG_SHIFT) - 1;

const NOT_REGION_HANDLE: Error = Error::InvalidParam {
    param: "handle",
    reason:
        "It is not live physical memory of a region (it was already freed with aclrtFreePhysical)",
};

impl Books {
    fn insert(&mut self, backing: Backing) -> usize {
        self.next_id += 1;
        let id = self.next_id;
        if let Some(m) = backing.mapping {
            self.mapped.insert(m.va, id);
        }
        self.backings.insert(id, backing);
        LIVE.fetch_add(1, Ordering::Relaxed);
        id
    }

    /// Forgets backing `id`, giving its physical memory back; its mapping
    /// must be gone already.
    fn remove(&mut self, port: &dyn RegionPort, id: usize) -> Result<()> {
        let Some(b) = self.backings.remove(&id) else {
            return Ok(());
        };
        LIVE.fetch_sub(1, Ordering::Relaxed);
        match b.memory {
            Memory::Awake(handle) => port.free_physical(handle),
            Memory::Asleep(_) => Ok(()),
        }
    }

    fn refuse_if_asleep(&self, tag: &Arc<str>) -> Result<()> {
        if self.asleep_tags.contains(tag) {
            return Err(Error::InvalidParam {
                param: "region",
                reason: asleep::region_refusal(tag),
            });
        }
        Ok(())
    }

    /// Takes the mapping at `va` off backing `id`: unmapped if awake, its
    /// offloaded copy dropped if asleep.
    fn unmap_backing(&mut self, port: &dyn RegionPort, id: usize, va: usize) -> Result<()> {
        let Some(b) = self.backings.get_mut(&id) else {
            return Ok(());
        };
        match &mut b.memory {
            Memory::Awake(_) => port.unmap(va)?,
            Memory::Asleep(copy) => {
                asleep::take(va);
                *copy = None;
            }
        }
        b.mapping = None;
        self.mapped.remove(&va);
        Ok(())
    }
}

/// The handle the program holds for backing `id`.
fn handle_of(id: usize) -> usize {
    ((RegionPhysicalHandle::TAG as usize) << TAG_SHIFT) | id
}

/// True when `handle` is of the kind regions hand out (live or not).
#[inline]
pub fn is_region_handle(handle: usize) -> bool {
    RegionPhysicalHandle::could_be(handle)
}

/// True when `va` starts memory `aclrtMalloc` in a region gave out (one load while no
/// region memory exists).
#[inline]
pub fn is_allocation(va: usize) -> bool {
    !none_live() && owned_at(&books(), va)
}

/// True when region memory is mapped at `va` (one load while none exists).
#[inline]
pub fn is_mapping(va: usize) -> bool {
    !none_live() && books().mapped.contains_key(&va)
}

fn owned_at(books: &Books, va: usize) -> bool {
    books
        .mapped
        .get(&va)
        .and_then(|id| books.backings.get(id))
        .is_some_and(|b| b.owns_reservation)
}

/// `aclrtMalloc` inside the region tagged `tag`: reserved address space
/// with physical memory mapped over it, so sleep can take the memory and
/// keep the address. `size` is rounded up to the granularity.
pub fn malloc(port: &dyn RegionPort, tag: Arc<str>, size: usize) -> Result<usize> {
    if size == 0 {
        return Err(Error::InvalidParam {
            param: "size",
            reason: "It must be greater than 0",
        });
    }
    let prop = port.device_prop();
    let len = size
        .checked_next_multiple_of(port.granularity(&prop))
        .ok_or(Error::InvalidParam {
            param: "size",
            reason: "It is too large",
        })?;
    let mut books = books();
    books.refuse_if_asleep(&tag)?;
    let va = port.reserve(len)?;
    let handle = match port.malloc_physical(len, &prop, 0) {
        Ok(h) => h,
        Err(e) => {
            let _ = port.release(va);
            return Err(e);
        }
    };
    if let Err(e) = port.map(va, len, 0, handle, 0) {
        let _ = port.free_physical(handle);
        let _ = port.release(va);
        return Err(e);
    }
    books.insert(Backing {
        tag,
        size: len,
        prop,
        flags: 0,
        memory: Memory::Awake(handle),
        mapping: Some(Mapping {
            va,
            size: len,
            offset: 0,
            flags: 0,
        }),
        owns_reservation: true,
        handle_live: false,
    });
    Ok(va)
}

/// `aclrtFree` of `va`: `None` when it is not memory `malloc` gave out.
/// Waits for the device's queued work first, as `aclrtFree` does.
pub fn free(port: &dyn RegionPort, va: usize) -> Option<Result<()>> {
    if none_live() {
        return None;
    }
    if !owned_at(&books(), va) {
        return None;
    }
    // Waited for with no lock held: a stream's work may free memory too.
    if let Err(e) = port.synchronize() {
        return Some(Err(e));
    }
    let mut books = books();
    // Freed by another thread meanwhile: what the runtime would say.
    let id = match books.mapped.get(&va) {
        Some(&id) if owned_at(&books, va) => id,
        _ => return None,
    };
    Some((|| {
        books.unmap_backing(port, id, va)?;
        books.remove(port, id)?;
        port.release(va)
    })())
}

/// `aclrtMallocPhysical` inside the region tagged `tag`: the runtime's
/// physical memory behind a handle of aclalloc's, which stays the same
/// through sleep and wake while the memory behind it changes.
pub fn malloc_physical(
    port: &dyn RegionPort,
    tag: Arc<str>,
    size: usize,
    prop: &aclrtPhysicalMemProp,
    flags: u64,
) -> Result<usize> {
    let mut books = books();
    books.refuse_if_asleep(&tag)?;
    let handle = port.malloc_physical(size, prop, flags)?;
    let id = books.insert(Backing {
        tag,
        size,
        prop: *prop,
        flags,
        memory: Memory::Awake(handle),
        mapping: None,
        owns_reservation: false,
        handle_live: true,
    });
    Ok(handle_of(id))
}

/// The backing of the program's live region `handle`.
fn live_handle(books: &Books, handle: usize) -> Result<usize> {
    let id = handle & ID_MASK;
    match books.backings.get(&id) {
        Some(b) if b.handle_live => Ok(id),
        _ => Err(NOT_REGION_HANDLE),
    }
}

/// `aclrtFreePhysical` of a region handle: the handle dies at once; the
/// memory goes now, or with its mapping (as CANN frees mapped memory).
pub fn free_physical(port: &dyn RegionPort, handle: usize) -> Result<()> {
    let mut books = books();
    let id = live_handle(&books, handle)?;
    let b = books.backings.get_mut(&id).ok_or(NOT_REGION_HANDLE)?;
    b.handle_live = false;
    if b.mapping.is_none() {
        books.remove(port, id)?;
    }
    Ok(())
}

/// `aclrtMapMem` of a region handle at `va`. Region memory is mapped at
/// one address at a time (the address sleep keeps), and not while asleep.
pub fn map(
    port: &dyn RegionPort,
    va: usize,
    size: usize,
    offset: usize,
    handle: usize,
    flags: u64,
) -> Result<()> {
    let mut books = books();
    let id = live_handle(&books, handle)?;
    let b = books.backings.get_mut(&id).ok_or(NOT_REGION_HANDLE)?;
    if b.mapping.is_some() {
        return Err(Error::InvalidParam {
            param: "handle",
            reason: "Physical memory of a region is mapped at one address at a time: unmap it with aclrtUnmapMem first",
        });
    }
    let Memory::Awake(real) = b.memory else {
        return Err(Error::InvalidParam {
            param: "handle",
            reason: asleep::region_refusal(&b.tag),
        });
    };
    port.map(va, size, offset, real, flags)?;
    b.mapping = Some(Mapping {
        va,
        size,
        offset,
        flags,
    });
    books.mapped.insert(va, id);
    Ok(())
}

/// `aclrtUnmapMem` of `va`: `None` when no region memory is mapped there.
/// Sleeping memory is unmapped too (its offloaded copy dropped: a wake
/// gives its handle fresh memory).
pub fn unmap(port: &dyn RegionPort, va: usize) -> Option<Result<()>> {
    if none_live() {
        return None;
    }
    let mut books = books();
    let id = *books.mapped.get(&va)?;
    let b = books.backings.get(&id)?;
    if b.owns_reservation {
        return Some(Err(Error::InvalidParam {
            param: "virPtr",
            reason: "It is memory from aclrtMalloc in a region: free it with aclrtFree",
        }));
    }
    let handle_live = b.handle_live;
    Some((|| {
        books.unmap_backing(port, id, va)?;
        if !handle_live {
            books.remove(port, id)?;
        }
        Ok(())
    })())
}

/// Notes the program's reservation `[start, start + size)`.
pub fn reserved(start: usize, size: usize) {
    books().reservations.insert(start, size);
}

/// Checks that releasing the program's reservation at `start` takes no
/// sleeping region mapping with it (an awake one the runtime refuses itself).
pub fn check_release(start: usize) -> Result<()> {
    if none_live() {
        return Ok(());
    }
    let books = books();
    let Some(&size) = books.reservations.get(&start) else {
        return Ok(());
    };
    let sleeping = books
        .mapped
        .range(start..start.saturating_add(size))
        .filter(|(_, id)| {
            books
                .backings
                .get(id)
                .is_some_and(|b| matches!(b.memory, Memory::Asleep(_)))
        })
        .count();
    match sleeping {
        0 => Ok(()),
        count => Err(Error::StillInUse {
            what: "Sleeping region memory mapped in the reservation (unmap it with aclrtUnmapMem first)",
            count,
        }),
    }
}

/// Forgets the program's reservation at `start` (released).
pub fn released(start: usize) {
    books().reservations.remove(&start);
}

/// Bytes of region memory: `(awake, asleep, offloaded)`, over every tag.
pub fn bytes() -> (usize, usize, usize) {
    let books = books();
    let mut out = (0, 0, 0);
    for b in books.backings.values() {
        match &b.memory {
            Memory::Awake(_) => out.0 += b.size,
            Memory::Asleep(copy) => {
                out.1 += b.size;
                out.2 += copy.as_ref().map_or(0, HostCopy::len);
            }
        }
    }
    out
}
