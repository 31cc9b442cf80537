//! The caching allocator's state and algorithm for one shard of the pool,
//! without locking (what spans shards is in `sharded.rs`).
//!
//! PyTorch's CUDACachingAllocator: sizes rounded to 512 B; requests up to
//! 1 MiB from 2 MiB segments, larger ones from 20 MiB (from 10 MiB up, their
//! size rounded to 2 MiB); best fit, splitting, merging, a max split size,
//! release and one retry when the device refuses. Differences: large best fit
//! prefers segments of the lowest power of two; growing for a large request
//! first returns smaller free segments; an oversize request gets a segment of
//! its own; a refused standard segment is retried at the request's size.
//!
//! A freed block first goes, unmerged, into a LIFO bin for its requested
//! size (O(1) reuse). Bins are merged when best fit over the merged blocks
//! fails, so the pool never grows while merged memory could serve, and
//! before a large request's best fit, which weighs whole segments.

use super::block::{Block, Kind, Segment, Slab, State, NIL};
use super::config::PoolConfig;
use super::device::DeviceMemory;
use super::roundup::RoundupDivisions;
use super::stats::STAT_ALL;
use crate::base::error::{Error, Result};
use crate::history::{Action, Recorder};
use addresses::{LiveBlocks, SegmentIndex};
use bins::Bins;
use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::Arc;
use tlsf::Tlsf;

mod addresses;
mod adopt;
mod bins;
mod bookkeeping;
pub(crate) mod counters;
mod expandable;
mod introspect;
mod lend;
mod retire;
mod segments;
mod tlsf;

pub(crate) use self::counters::ShardStats;
pub(crate) use self::lend::{CacheStats, Loan};

/// Every block size is a multiple of this.
pub const MIN_BLOCK_SIZE: usize = 512;
/// Requests up to this size go to the small pool.
pub const SMALL_SIZE: usize = 1 << 20;
/// Size of a small-pool segment.
pub const SMALL_BUFFER: usize = 2 << 20;
/// Size of a large-pool segment for requests under [`MIN_LARGE_ALLOC`].
pub const LARGE_BUFFER: usize = 20 << 20;
/// From this size on, a segment is the request rounded up to [`ROUND_LARGE`].
pub const MIN_LARGE_ALLOC: usize = 10 << 20;
/// Granule of large segments.
pub const ROUND_LARGE: usize = 2 << 20;

/// How many further free blocks best fit looks at for a large request: a
/// bound on its work (on the fragmentation traces of `benches/expandable.rs`,
/// bounds from 8 up give the same capacities within 0.015).
const BEST_FIT_SCAN: usize = 24;

/// What a snapshot reports for one block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockView {
    /// Device address.
    pub address: usize,
    /// Size in bytes.
    pub size: usize,
    /// What the caller asked for (0 for free blocks).
    pub requested_size: usize,
    /// Handed out (true) or free in the cache (false).
    pub allocated: bool,
}

/// What a snapshot reports for one segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentView {
    /// Device address.
    pub address: usize,
    /// Size in bytes.
    pub total_size: usize,
    /// True for the small pool (2 MiB segments).
    pub small: bool,
    /// The stream whose requests it serves (0: unknown).
    pub stream: usize,
    /// Its blocks in address order; they tile the segment.
    pub blocks: Vec<BlockView>,
    /// An expandable segment (a reservation mapped page by page).
    pub is_expandable: bool,
    /// Bytes backed by physical memory (`total_size` for a fixed segment).
    pub mapped_size: usize,
}

/// PyTorch's `round_size`: to 512 bytes, or with `roundup_power2_divisions`
/// to the next of its steps (see `crates/aclalloc-pool/src/roundup.rs`). `None`: too large.
#[inline]
pub(crate) fn round_size(size: usize, divisions: &RoundupDivisions) -> Option<usize> {
    divisions.round(size).filter(|&s| s <= isize::MAX as usize)
}

pub(crate) fn kind_of(rounded: usize) -> Kind {
    if rounded <= SMALL_SIZE {
        Kind::Small
    } else {
        Kind::Large
    }
}

pub(crate) fn round_up(size: usize, to: usize) -> usize {
    size.div_ceil(to).saturating_mul(to)
}

/// The segment a request of `rounded` bytes gets when nothing cached fits.
pub(crate) fn segment_size(rounded: usize) -> usize {
    if rounded <= SMALL_SIZE {
        SMALL_BUFFER
    } else if rounded < MIN_LARGE_ALLOC {
        LARGE_BUFFER
    } else {
        round_up(rounded, ROUND_LARGE)
    }
}

pub(crate) const CLOSED: Error = Error::InvalidParam {
    param: "pool",
    reason: "The pool was destroyed",
};

pub(crate) struct Core {
    blocks: Slab<Block>,
    segments: Slab<Segment>,
    /// The segments by start, to find the segment of an address.
    by_addr: SegmentIndex,
    /// Free (merged) blocks of each kind, per stream.
    free: [Vec<(usize, Box<Tlsf>)>; 2],
    /// Bins of freed, not yet merged blocks, by stream and requested size.
    bins: Bins,
    /// Every allocated block, by address.
    live: LiveBlocks,
    pub(crate) stats: ShardStats,
    /// Expandable segment → its mapped pages.
    pages: HashMap<u32, expandable::PageMap>,
    /// A copy of the pool's configuration (the limit is kept pool-wide).
    pub(crate) config: PoolConfig,
    pub(crate) closed: bool,
    /// The pool's history, recorded under this shard's lock.
    pub(crate) history: Arc<Recorder>,
}

impl Core {
    pub(crate) fn new(config: PoolConfig, history: Arc<Recorder>) -> Self {
        Core {
            blocks: Slab::new(),
            segments: Slab::new(),
            by_addr: SegmentIndex::default(),
            free: [Vec::new(), Vec::new()],
            bins: Bins::default(),
            live: LiveBlocks::default(),
            stats: ShardStats::default(),
            pages: HashMap::new(),
            config,
            closed: false,
            history,
        }
    }

    // ---- allocation -------------------------------------------------------

    /// A block from the cache under this shard's lock alone, within its
    /// headroom. `None`: the pool-wide path must serve it.
    #[inline]
    pub(crate) fn malloc_local(&mut self, size: usize, stream: usize) -> Option<usize> {
        let rounded =
            round_size(size, &self.config.roundup_power2_divisions).filter(|_| !self.closed)?;
        match self.take_cached(size, rounded, stream, true, None) {
            Take::Got(addr) => Some(addr),
            Take::Miss | Take::NoRoom | Take::NoMemory => None,
        }
    }

    /// A cached block for `rounded` bytes: the exact-size bin, best fit, then
    /// best fit after merging the bins; with `checked`, within the headroom.
    /// `map`: what an expandable block needs to map its pages (else `NoRoom`).
    #[inline]
    pub(crate) fn take_cached(
        &mut self,
        size: usize,
        rounded: usize,
        stream: usize,
        checked: bool,
        map: Option<(&dyn crate::virtual_memory::VirtualMemory, usize)>,
    ) -> Take {
        if let Some(head) = self.bins.head_mut(stream, rounded) {
            let idx = *head;
            if idx != NIL {
                let b = &self.blocks[idx];
                let max_split = self.config.max_split_size;
                if checked && !room_to_hand_out(&self.stats, b.kind, b.size, size, max_split) {
                    return Take::NoRoom;
                }
                *head = b.free_next;
                self.bins.binned -= 1;
                self.unmark_split(idx);
                return Take::Got(self.hand_out(idx, size));
            }
        }
        self.take_best_fit(size, rounded, stream, checked, map)
    }

    #[cold]
    #[inline(never)]
    fn take_best_fit(
        &mut self,
        size: usize,
        rounded: usize,
        stream: usize,
        checked: bool,
        map: Option<(&dyn crate::virtual_memory::VirtualMemory, usize)>,
    ) -> Take {
        let kind = kind_of(rounded);
        if kind == Kind::Large {
            // Placement judges segments by their free blocks: unmerged bins
            // hide wholly free segments and make large requests pin big ones.
            self.flush_bins();
        }
        let idx = match self.best_fit(kind, rounded, stream) {
            Some(idx) => idx,
            None => {
                // Merging only lowers statistics: no headroom needed.
                self.flush_bins();
                match self.best_fit(kind, rounded, stream) {
                    Some(idx) => idx,
                    None => return Take::Miss,
                }
            }
        };
        let b = self.blocks[idx];
        if self.is_expandable(b.segment) {
            let handed = if self.tail_after(&b, rounded) > 0 {
                rounded
            } else {
                b.size
            };
            if !self.is_mapped(b.segment, b.addr, handed) {
                let Some((vm, room)) = map else {
                    return Take::NoRoom;
                };
                if !self.map_range(vm, b.segment, b.addr, handed, room) {
                    return Take::NoMemory;
                }
            }
        }
        if checked {
            let tail = self.tail_after(&b, rounded);
            let handed = if tail > 0 { rounded } else { b.size };
            let max_split = self.config.max_split_size;
            // Taking `b` uncounts it before its tail is counted.
            let (n, bytes) = if b.counted_split {
                (1, b.size as i64)
            } else {
                (0, 0)
            };
            let split_room = tail == 0
                || [STAT_ALL, kind.index()].iter().all(|&i| {
                    self.stats.inactive_split[i].room(1 - n)
                        && self.stats.inactive_split_bytes[i].room(tail as i64 - bytes)
                });
            if !split_room || !room_to_hand_out(&self.stats, kind, handed, size, max_split) {
                return Take::NoRoom;
            }
        }
        Take::Got(self.finish(idx, rounded, size))
    }

    /// Hands out free block `idx` for a request of `size` (`rounded`) bytes,
    /// splitting off what it does not need.
    pub(crate) fn finish(&mut self, idx: u32, rounded: usize, size: usize) -> usize {
        self.detach_free(idx);
        self.split_tail(idx, rounded);
        self.hand_out(idx, size)
    }

    /// `allocAdvise`: the block at `addr` when that range is free in this
    /// shard, for work on `stream`.
    pub(crate) fn malloc_at(&mut self, size: usize, addr: usize, stream: usize) -> Option<usize> {
        let rounded =
            round_size(size, &self.config.roundup_power2_divisions).filter(|_| !self.closed)?;
        let idx = self.carve_at(addr, rounded, stream)?;
        Some(self.hand_out(idx, size))
    }

    fn carve_at(&mut self, addr: usize, rounded: usize, stream: usize) -> Option<u32> {
        if addr % MIN_BLOCK_SIZE != 0 {
            return None;
        }
        let mut idx = self.block_containing(addr)?;
        if self.blocks[idx].state == State::Cached {
            self.flush_bins();
            idx = self.block_containing(addr)?;
        }
        let b = self.blocks[idx];
        let kind = b.kind;
        let max_split = self.config.max_split_size;
        // Only the pool-wide path maps pages.
        if self.is_expandable(b.segment)
            && !(addr >= b.addr
                && addr.checked_add(rounded)? <= b.addr + b.size
                && self.is_mapped(b.segment, addr, rounded))
        {
            return None;
        }
        if b.state != State::Free
            || kind != kind_of(rounded)
            || b.stream != stream
            || addr.checked_add(rounded)? > b.addr + b.size
            || (rounded < max_split && b.size >= max_split)
        {
            return None;
        }
        self.detach_free(idx);
        if addr > b.addr {
            // Keep the front as a free block; the rest starts at `addr`.
            let rest = self.split_off(idx, addr - b.addr);
            self.insert_free(idx);
            self.mark_split(idx);
            idx = rest;
        }
        self.split_tail(idx, rounded);
        Some(idx)
    }

    fn block_containing(&self, addr: usize) -> Option<u32> {
        let (_, seg) = self.by_addr.at_or_before(addr)?;
        let s = self.segments[seg];
        if addr >= s.addr + s.size {
            return None;
        }
        let mut idx = s.first;
        while idx != NIL {
            let b = &self.blocks[idx];
            if addr < b.addr + b.size {
                return Some(idx);
            }
            idx = b.next;
        }
        None
    }

    /// The free block to serve `rounded` bytes from: the smallest that fits; for
    /// the large pool, the smallest fitting block among segments of the lowest
    /// power of two, so a big segment is not pinned by what a much smaller one
    /// could serve, while segments of like size are packed by best fit.
    fn best_fit(&self, kind: Kind, rounded: usize, stream: usize) -> Option<u32> {
        let max_split = self.config.max_split_size;
        // PyTorch's oversize rules, except for an expandable pool's free ranges.
        let expandable = self.config.expandable_segments;
        let usable = |size: usize| {
            expandable
                || !(rounded < max_split && size >= max_split
                    || rounded >= max_split && size >= rounded.saturating_add(LARGE_BUFFER))
        };
        let index = self.free_index(kind, stream)?;
        let first = index.best_fit(&self.blocks, rounded)?;
        if !usable(self.blocks[first].size) {
            return None;
        }
        if kind == Kind::Small {
            return Some(first);
        }
        // Segments by power of two, then the smallest block, then the lowest
        // address. A block at or above the next power of two after the first
        // fit's segment is in a segment of a higher power: it cannot win.
        let key = |idx: u32| {
            let b = &self.blocks[idx];
            (self.segments[b.segment].size.ilog2(), b.size, b.addr, idx)
        };
        let mut best = key(first);
        let below = 1usize.checked_shl(best.0 + 1).unwrap_or(usize::MAX);
        index.for_each_fit(&self.blocks, rounded, below, BEST_FIT_SCAN, |idx| {
            let k = key(idx);
            if usable(k.1) && k < best {
                best = k;
            }
        });
        Some(best.3)
    }

    /// The bytes of free block `b` that a request of `rounded` leaves as a
    /// block of its own (0: none).
    #[inline]
    fn tail_after(&self, b: &Block, rounded: usize) -> usize {
        let remaining = b.size - rounded;
        // PyTorch's should_split.
        let split = match b.kind {
            _ if self.config.max_split_size == 0 => false,
            _ if self.config.expandable_segments => remaining >= MIN_BLOCK_SIZE,
            Kind::Small => remaining >= MIN_BLOCK_SIZE,
            Kind::Large => rounded < self.config.max_split_size && remaining > SMALL_SIZE,
        };
        if split {
            remaining
        } else {
            0
        }
    }

    /// Splits off the part of free block `idx` beyond `rounded` bytes when it
    /// is worth keeping as a block of its own.
    fn split_tail(&mut self, idx: u32, rounded: usize) {
        let b = self.blocks[idx];
        if self.tail_after(&b, rounded) == 0 {
            return;
        }
        let tail = self.split_off(idx, rounded);
        self.insert_free(tail);
        self.mark_split(tail);
    }

    /// Cuts block `idx` after `keep` bytes; returns the rest, a new free block
    /// after it, which the caller files.
    #[inline]
    fn split_off(&mut self, idx: u32, keep: usize) -> u32 {
        let b = self.blocks[idx];
        let rest = self.blocks.insert(Block {
            addr: b.addr + keep,
            size: b.size - keep,
            requested: 0,
            prev: idx,
            next: b.next,
            free_prev: NIL,
            free_next: NIL,
            segment: b.segment,
            kind: b.kind,
            stream: b.stream,
            state: State::Free,
            counted_split: false,
        });
        if b.next != NIL {
            self.blocks[b.next].prev = rest;
        }
        self.blocks[idx].next = rest;
        self.blocks[idx].size = keep;
        rest
    }

    #[inline]
    fn hand_out(&mut self, idx: u32, requested: usize) -> usize {
        let b = &mut self.blocks[idx];
        b.state = State::Allocated;
        b.requested = requested;
        let (addr, size, stream) = (b.addr, b.size, b.stream);
        let k = b.kind.index();
        self.set_live(idx);
        let s = &mut self.stats;
        let size_i = size as i64;
        for i in [STAT_ALL, k] {
            s.allocation[i].increase(1);
            s.allocated_bytes[i].increase(size_i);
            s.requested_bytes[i].increase(requested as i64);
        }
        if size >= self.config.max_split_size {
            s.oversize_allocations.increase(1);
        }
        self.history
            .record(Action::Alloc, addr, requested, size, stream);
        addr
    }

    // ---- free -------------------------------------------------------------

    /// Returns the block at `addr` to this shard's cache (with `checked`,
    /// only within the headroom).
    #[inline]
    pub(crate) fn free(&mut self, addr: usize, checked: bool) -> Freed {
        let Some(idx) = self.live_at(addr) else {
            return self.bad_free(addr);
        };
        let b = &mut self.blocks[idx];
        if checked && b.is_split() {
            let k = b.kind.index();
            let size = b.size as i64;
            let room = [STAT_ALL, k].iter().all(|&i| {
                self.stats.inactive_split[i].room(1)
                    && self.stats.inactive_split_bytes[i].room(size)
            });
            if !room {
                // Rare: left live for the pool-wide path.
                return Freed::NoRoom;
            }
        }
        self.unset_live(idx);
        let b = &mut self.blocks[idx];
        let (size, requested, b_stream) = (b.size, b.requested, b.stream);
        b.state = State::Cached;
        let segment = b.segment;
        self.segments[segment].freed_at = crate::registry::order::generation();
        b.requested = 0;
        let k = b.kind.index();
        let s = &mut self.stats;
        let size_i = size as i64;
        for i in [STAT_ALL, k] {
            s.allocation[i].decrease(1);
            s.allocated_bytes[i].decrease(size_i);
            s.requested_bytes[i].decrease(requested as i64);
        }
        if size >= self.config.max_split_size {
            s.oversize_allocations.decrease(1);
        }
        // Nothing defers a free here: it is requested and completed at once.
        self.history.record_free(addr, requested, size, b_stream);
        self.mark_split(idx);
        // Binned under the requested size, so a block with an unsplit rest
        // still serves the next identical request.
        let divisions = &self.config.roundup_power2_divisions;
        let key = round_size(requested, divisions).unwrap_or(size);
        self.bins.push(&mut self.blocks, idx, b_stream, key);
        Freed::Done
    }

    /// The allocated block at `addr`.
    #[inline]
    fn live_at(&self, addr: usize) -> Option<u32> {
        self.live.get(addr)
    }

    /// Records block `idx` as allocated.
    #[inline]
    fn set_live(&mut self, idx: u32) {
        self.live.insert(self.blocks[idx].addr, idx);
    }

    /// Forgets block `idx` as allocated.
    #[inline]
    fn unset_live(&mut self, idx: u32) {
        self.live.remove(self.blocks[idx].addr);
    }

    /// The stream block `addr` was allocated on, if it is a live block of
    /// this shard; a block lent to a cache is only said to be so.
    pub(crate) fn stream_of(&self, addr: usize) -> StreamOf {
        if let Some(idx) = self.live_at(addr) {
            return StreamOf::Live(self.blocks[idx].stream);
        }
        match self.bad_free(addr) {
            Freed::Lent => StreamOf::Lent,
            Freed::NotHere => StreamOf::NotHere,
            Freed::Bad(e) => StreamOf::Bad(e),
            Freed::Done | Freed::NoRoom => unreachable!("bad_free answers why not"),
        }
    }

    /// Why `addr` is not a live block here.
    #[cold]
    fn bad_free(&self, addr: usize) -> Freed {
        if self.closed {
            return Freed::Bad(CLOSED);
        }
        match self.block_containing(addr) {
            None => Freed::NotHere,
            Some(i) if self.blocks[i].addr != addr => Freed::Bad(Error::PoolForeignBlock),
            Some(i) if self.blocks[i].state == State::Lent => Freed::Lent,
            Some(_) => Freed::Bad(Error::PoolDoubleFree),
        }
    }
}

/// What [`Core::take_cached`] found.
pub(crate) enum Take {
    Got(usize),
    /// Nothing cached fits: the pool must grow.
    Miss,
    /// A block fits but needs the pool-wide path (headroom, or mapping).
    NoRoom,
    /// An expandable block fits, but its pages could not be mapped.
    NoMemory,
}

/// What [`Core::stream_of`] found.
pub(crate) enum StreamOf {
    /// Allocated, on this stream.
    Live(usize),
    /// Lent to a thread's cache, which may have handed it out or parked it.
    Lent,
    /// The address is in none of this shard's segments.
    NotHere,
    /// Not a live block (freed, or inside one).
    Bad(Error),
}

/// What [`Core::free`] did.
pub(crate) enum Freed {
    Done,
    /// The address is in none of this shard's segments.
    NotHere,
    /// The statistics lack the headroom (pool-wide path).
    NoRoom,
    /// The block is lent to a thread's cache, which frees it.
    Lent,
    Bad(Error),
}

/// True when handing out a `size`-byte block of `kind` for a request of
/// `requested` bytes stays within the shard's headroom.
#[inline]
fn room_to_hand_out(
    s: &ShardStats,
    kind: Kind,
    size: usize,
    requested: usize,
    max_split: usize,
) -> bool {
    [STAT_ALL, kind.index()].iter().all(|&i| {
        s.allocation[i].room(1)
            && s.allocated_bytes[i].room(size as i64)
            && s.requested_bytes[i].room(requested as i64)
    }) && (size < max_split || s.oversize_allocations.room(1))
}
