//! Blocks and segments, kept in slabs (vectors indexed by `u32`, with a list
//! of vacant slots) rather than boxed nodes: neighbours are indices, nothing
//! on the hot path allocates once the slabs have grown, and a block handle a
//! caller passes back is looked up, never dereferenced.

/// "No block": the end of a segment's block list.
pub(crate) const NIL: u32 = u32::MAX;

/// Which pool a segment belongs to, as an index into the statistics arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Small = 1,
    Large = 2,
}

impl Kind {
    pub(crate) fn index(self) -> usize {
        self as usize
    }
    /// Index into the per-kind free indices.
    pub(crate) fn set(self) -> usize {
        self as usize - 1
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// Handed out to a caller.
    Allocated,
    /// Freed by a caller and parked in its exact-size bin, not yet merged
    /// with free neighbours (the fast path of the next request of that size).
    Cached,
    /// Free, merged with its free neighbours, in the best-fit index.
    Free,
    /// Kept by a thread's cache (`crates/aclalloc-pool/src/thread_cache.rs`): handed out
    /// from it or parked in it; its statistics are the cache's.
    Lent,
}

/// A piece of a segment.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Block {
    pub addr: usize,
    pub size: usize,
    /// What the caller asked for (0 unless allocated).
    pub requested: usize,
    pub prev: u32,
    pub next: u32,
    /// Neighbours in the free list of its size class, while `Free`
    /// (`crates/aclalloc-pool/src/engine/tlsf.rs`); while `Cached`, `free_next` is the next
    /// older block of its bin (`crates/aclalloc-pool/src/engine/bins.rs`).
    pub free_prev: u32,
    pub free_next: u32,
    pub segment: u32,
    /// The segment's kind and stream, kept here so the hot path reads one cache line.
    pub kind: Kind,
    pub stream: usize,
    pub state: State,
    /// Counted in `inactive_split` right now.
    pub counted_split: bool,
}

impl Block {
    pub(crate) fn is_split(&self) -> bool {
        self.prev != NIL || self.next != NIL
    }
}

/// One device allocation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Segment {
    pub addr: usize,
    pub size: usize,
    pub kind: Kind,
    /// The stream it serves (0: unknown). Its blocks are reused only for
    /// that stream, as PyTorch's per-stream pools do.
    pub stream: usize,
    /// The block at the segment's start (never merged away: merges always remove the later block).
    pub first: u32,
    /// An expandable segment: a reservation mapped page by page (`crates/aclalloc-pool/src/engine/expandable.rs`).
    pub expandable: bool,
    /// The ordering generation of the latest free of one of its blocks
    /// (`crate::registry::order`): another stream ordered after it may take
    /// the segment once it is wholly free (`crates/aclalloc-pool/src/engine/adopt.rs`).
    pub freed_at: u64,
}

/// A vector of `T` addressed by `u32`, reusing vacated slots.
pub(crate) struct Slab<T> {
    items: Vec<T>,
    vacant: Vec<u32>,
}

impl<T: Copy> Slab<T> {
    pub(crate) fn new() -> Self {
        Slab {
            items: Vec::new(),
            vacant: Vec::new(),
        }
    }

    pub(crate) fn insert(&mut self, item: T) -> u32 {
        match self.vacant.pop() {
            Some(i) => {
                self.items[i as usize] = item;
                i
            }
            None => {
                self.items.push(item);
                (self.items.len() - 1) as u32
            }
        }
    }

    /// Marks `i` vacant; its contents are garbage from now on.
    pub(crate) fn remove(&mut self, i: u32) {
        self.vacant.push(i);
    }

    pub(crate) fn clear(&mut self) {
        self.items = Vec::new();
        self.vacant = Vec::new();
    }
}

impl<T> std::ops::Index<u32> for Slab<T> {
    type Output = T;
    #[inline]
    fn index(&self, i: u32) -> &T {
        &self.items[i as usize]
    }
}

impl<T> std::ops::IndexMut<u32> for Slab<T> {
    #[inline]
    fn index_mut(&mut self, i: u32) -> &mut T {
        &mut self.items[i as usize]
    }
}
