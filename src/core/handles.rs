//! Tables of live handles.
//!
//! A handle given to C is a number, not the address of anything: the library
//! finds the object by looking the number up, so a destroyed, forged or foreign
//! pointer is refused without ever being dereferenced. Numbers are never reused
//! (a stale handle cannot alias a newer object) and carry a per-kind tag in the
//! top 16 bits, above every user-space address on 64-bit Linux, so no real
//! pointer a caller holds can be mistaken for a handle.

use super::error::{Error, Result};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};

#[cfg(not(target_pointer_width = "64"))]
compile_error!("aclalloc supports 64-bit targets only, as CANN does");

/// The one list of handle tags, one per kind of handle handed to C: a
/// handle of one kind is never taken for another, whichever table holds it.
pub(crate) mod tags {
    /// Allocator descriptors (`aclrtAllocatorDesc`).
    pub(crate) const DESCRIPTOR: u16 = 0xACA1;
    /// Streams of the host runtime (`aclrtStream`).
    pub(crate) const STREAM: u16 = 0xACA3;
    /// Contexts of the host runtime (`aclrtContext`).
    pub(crate) const CONTEXT: u16 = 0xACA4;
    /// Caching pools (`aclallocPool`).
    pub(crate) const POOL: u16 = 0xACA5;
    /// Pluggable allocators (`aclallocPluggable`).
    pub(crate) const PLUGGABLE: u16 = 0xACA6;
}

/// Where the tag sits in a handle (every table, locked or lock-free).
pub(crate) const TAG_SHIFT: u32 = 48;
const ID_MASK: usize = (1 << TAG_SHIFT) - 1;

/// A table of objects of one kind, each reachable through its handle.
pub struct HandleTable<T> {
    tag: usize,
    next_id: AtomicUsize,
    live: Mutex<Option<HashMap<usize, T>>>,
}

impl<T> HandleTable<T> {
    /// An empty table whose handles carry `tag` (a 16-bit value, one per kind).
    pub const fn new(tag: u16) -> Self {
        HandleTable {
            tag: (tag as usize) << TAG_SHIFT,
            next_id: AtomicUsize::new(1),
            live: Mutex::new(None),
        }
    }

    /// Stores `value` and returns its new handle.
    pub fn insert(&self, value: T) -> Result<NonZeroUsize> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if id > ID_MASK {
            return Err(Error::Internal {
                reason: "the handle space is exhausted",
            });
        }
        let handle = self.tag | id;
        let mut live = self.live.lock();
        let map = live.get_or_insert_with(HashMap::new);
        map.try_reserve(1).map_err(|_| Error::BadAlloc {
            what: "the handle table",
        })?;
        map.insert(handle, value);
        NonZeroUsize::new(handle).ok_or(Error::Internal {
            reason: "a handle was zero",
        })
    }

    /// Runs `f` on the object behind `handle`, or returns `None` when the
    /// handle is not live.
    pub fn with<R>(&self, handle: usize, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        if !self.could_be_mine(handle) {
            return None;
        }
        self.live.lock().as_mut()?.get_mut(&handle).map(f)
    }

    /// Removes and returns the object behind `handle`.
    pub fn remove(&self, handle: usize) -> Option<T> {
        if !self.could_be_mine(handle) {
            return None;
        }
        self.live.lock().as_mut()?.remove(&handle)
    }

    /// `f` applied to every live handle and its object, keeping the `Some`s.
    pub fn collect<R>(&self, mut f: impl FnMut(usize, &T) -> Option<R>) -> Vec<R> {
        self.live.lock().as_ref().map_or_else(Vec::new, |map| {
            map.iter().filter_map(|(&h, v)| f(h, v)).collect()
        })
    }

    /// The number of live handles.
    pub fn len(&self) -> usize {
        self.live.lock().as_ref().map_or(0, HashMap::len)
    }

    /// True when no handle is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn could_be_mine(&self, handle: usize) -> bool {
        handle & !ID_MASK == self.tag && handle & ID_MASK != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_unique_tagged_and_dead_after_removal() {
        let table = HandleTable::new(0xACA1);
        let a = table.insert("a").unwrap().get();
        let b = table.insert("b").unwrap().get();
        assert_ne!(a, b);
        assert_eq!(a >> 48, 0xACA1);
        assert_eq!(table.with(a, |v| *v), Some("a"));
        assert_eq!(table.remove(a), Some("a"));
        assert_eq!(table.with(a, |v| *v), None);
        assert_eq!(table.remove(a), None);
        let c = table.insert("c").unwrap().get();
        assert!(c != a && c != b, "ids are never reused");
        assert_eq!(table.len(), 2);
        let mut live = table.collect(|h, v| (*v != "b").then_some((h, *v)));
        live.sort();
        assert_eq!(live, vec![(c, "c")]);
    }

    #[test]
    fn foreign_pointers_and_other_kinds_are_refused() {
        let descriptors = HandleTable::new(0xACA1);
        let pools = HandleTable::new(0xACA2);
        let d = descriptors.insert(1).unwrap().get();
        let p = pools.insert(2).unwrap().get();
        assert_eq!(pools.with(d, |v| *v), None);
        assert_eq!(descriptors.with(p, |v| *v), None);
        let on_stack = 42u32;
        assert_eq!(
            descriptors.with(&on_stack as *const u32 as usize, |v| *v),
            None
        );
        assert_eq!(descriptors.with(0, |v| *v), None);
    }
}
