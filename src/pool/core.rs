//! The caching allocator's state and algorithm, without locking (the
//! [`Pool`](super::Pool) wraps it in a mutex).
//!
//! The design follows PyTorch's CUDACachingAllocator (and torch_npu's copy of
//! it): sizes rounded to 512 B; requests of at most 1 MiB served from 2 MiB
//! "small" segments, larger ones from 20 MiB segments (or their size rounded to
//! 2 MiB from 10 MiB up); best fit over free blocks ordered by (size, address);
//! splitting of the chosen block; merging of free neighbours; a max split
//! size; release of cached segments and one retry when the device refuses;
//! per-stream pools (a segment serves the stream that made it grow, and its
//! blocks are reused only for that stream).
//!
//! Differences from PyTorch, each measured in benches/pool.rs: large best
//! fit prefers the fitting block in the smallest segment; growing for a large
//! request first returns smaller wholly free segments; an oversize request
//! (>= max split size) gets a segment of its own size rounded to 2 MiB, not
//! 20 MiB, since it is never split; a standard segment refused by the limit or
//! the device is retried at the request's size rounded to 2 MiB.
//!
//! One addition for the hot path: a freed block first goes into a bin for
//! the exact size it was requested with (LIFO), without being merged. The
//! next request of that size takes it back in O(1) without touching the
//! ordered set. A request the bins cannot serve goes to best fit over the
//! merged free blocks; only when that fails are all binned blocks merged
//! (so the pool never grows while merged memory could serve the request) —
//! each binned block is merged at most once, O(1) amortised per free.
//! Merging on every miss instead would make two alternating sizes evict
//! each other from the bins on every call.

use super::block::{Block, FastMap, Kind, Segment, Slab, State, NIL};
use super::config::PoolConfig;
use super::device::DeviceMemory;
use super::stats::{PoolStats, STAT_ALL};
use crate::core::error::{Error, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroUsize;

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

/// How many further free blocks best fit looks at for a large request.
const BEST_FIT_SCAN: usize = 32;

/// Bins are dropped (not just emptied) past this many distinct sizes, so a
/// workload with ever-new sizes does not grow the bin map without bound.
const MAX_BIN_SIZES: usize = 4096;

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
}

pub(crate) fn round_size(size: usize) -> Option<usize> {
    let size = size.max(1);
    size.checked_add(MIN_BLOCK_SIZE - 1)
        .map(|s| s & !(MIN_BLOCK_SIZE - 1))
        .filter(|&s| s <= isize::MAX as usize)
}

fn kind_of(rounded: usize) -> Kind {
    if rounded <= SMALL_SIZE {
        Kind::Small
    } else {
        Kind::Large
    }
}

fn round_up(size: usize, to: usize) -> usize {
    size.div_ceil(to).saturating_mul(to)
}

/// The segment a request of `rounded` bytes gets when nothing cached fits.
fn segment_size(rounded: usize) -> usize {
    if rounded <= SMALL_SIZE {
        SMALL_BUFFER
    } else if rounded < MIN_LARGE_ALLOC {
        LARGE_BUFFER
    } else {
        round_up(rounded, ROUND_LARGE)
    }
}

const CLOSED: Error = Error::InvalidParam {
    param: "pool",
    reason: "The pool was destroyed",
};

type FreeKey = (usize, usize, usize, u32);

/// Freed blocks of one (stream, size), newest last.
#[derive(Default)]
struct Bin {
    blocks: Vec<u32>,
    /// The key is in `bins_used` (until the next flush).
    listed: bool,
}

pub(crate) struct Core {
    blocks: Slab<Block>,
    segments: Slab<Segment>,
    /// Segment start → segment, to find the segment of an address.
    by_addr: BTreeMap<usize, u32>,
    /// Free (merged) blocks of each kind, by (stream, size, address).
    free: [BTreeSet<FreeKey>; 2],
    /// Bins of freed, not yet merged blocks, by (stream, requested size).
    bins: FastMap<(usize, usize), Bin>,
    /// Keys of bins that may be non-empty, so a flush visits only those.
    bins_used: Vec<(usize, usize)>,
    binned: usize,
    /// Address → block, for every allocated block.
    live: FastMap<usize, u32>,
    pub(crate) stats: PoolStats,
    pub(crate) config: PoolConfig,
    /// The limit in bytes (`usize::MAX`: none).
    pub(crate) limit: usize,
    closed: bool,
}

impl Core {
    pub(crate) fn new(config: PoolConfig, limit: usize) -> Self {
        let stats = PoolStats {
            max_split_size: i64::try_from(config.max_split_size).unwrap_or(i64::MAX),
            ..PoolStats::default()
        };
        Core {
            blocks: Slab::new(),
            segments: Slab::new(),
            by_addr: BTreeMap::new(),
            free: [BTreeSet::new(), BTreeSet::new()],
            bins: FastMap::default(),
            bins_used: Vec::new(),
            binned: 0,
            live: FastMap::default(),
            stats,
            config,
            limit,
            closed: false,
        }
    }

    // ---- allocation -------------------------------------------------------

    /// A block of at least `size` bytes for work on `stream` (0: unknown).
    #[inline]
    pub(crate) fn malloc(
        &mut self,
        dev: &dyn DeviceMemory,
        size: usize,
        stream: usize,
    ) -> Result<usize> {
        let rounded = match round_size(size) {
            Some(r) if !self.closed => r,
            _ => return self.malloc_slow(dev, size, 0, stream),
        };
        if let Some(idx) = self
            .bins
            .get_mut(&(stream, rounded))
            .and_then(|b| b.blocks.pop())
        {
            self.binned -= 1;
            self.unmark_split(idx);
            return Ok(self.hand_out(idx, size));
        }
        self.malloc_slow(dev, size, rounded, stream)
    }

    #[cold]
    #[inline(never)]
    fn malloc_slow(
        &mut self,
        dev: &dyn DeviceMemory,
        size: usize,
        rounded: usize,
        stream: usize,
    ) -> Result<usize> {
        if self.closed {
            return Err(CLOSED);
        }
        if rounded == 0 {
            self.stats.num_ooms += 1;
            return Err(self.oom(size, "the size is too large"));
        }
        let kind = kind_of(rounded);
        let idx = match self.best_fit(kind, rounded, stream) {
            Some(idx) => idx,
            None => {
                self.flush_bins();
                match self.best_fit(kind, rounded, stream) {
                    Some(idx) => idx,
                    None => self.grow(dev, kind, size, rounded, stream)?,
                }
            }
        };
        self.detach_free(idx);
        self.split_tail(idx, rounded);
        Ok(self.hand_out(idx, size))
    }

    /// `allocAdvise`: a block at `addr` when that range is free in the pool,
    /// otherwise an ordinary allocation.
    pub(crate) fn malloc_at(
        &mut self,
        dev: &dyn DeviceMemory,
        size: usize,
        addr: usize,
        stream: usize,
    ) -> Result<usize> {
        if let Some(rounded) = round_size(size).filter(|_| !self.closed) {
            if let Some(idx) = self.carve_at(addr, rounded, stream) {
                return Ok(self.hand_out(idx, size));
            }
        }
        self.malloc(dev, size, stream)
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
            let front = addr - b.addr;
            let rest = self.blocks.insert(Block {
                addr,
                size: b.size - front,
                requested: 0,
                prev: idx,
                next: b.next,
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
            self.blocks[idx].size = front;
            self.insert_free(idx);
            self.mark_split(idx);
            idx = rest;
        }
        self.split_tail(idx, rounded);
        Some(idx)
    }

    fn block_containing(&self, addr: usize) -> Option<u32> {
        let (_, &seg) = self.by_addr.range(..=addr).next_back()?;
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

    /// The free block to serve `rounded` bytes from.
    ///
    /// PyTorch takes the smallest free block that fits. For the large pool
    /// this takes, among the blocks that fit, the one in the smallest
    /// segment (then the smallest block): a request placed in the leftover of
    /// a big segment pins that segment, so the next big request cannot use
    /// it and the pool grows, while a nearly equal block in a small segment
    /// was free. On a prefill trace this cut peak reserved memory by a
    /// quarter (benches/pool.rs). The scan stops once a block is as large as
    /// the best segment found (no later block can be in a smaller segment).
    fn best_fit(&self, kind: Kind, rounded: usize, stream: usize) -> Option<u32> {
        let max_split = self.config.max_split_size;
        // PyTorch's rules: small requests do not take oversize blocks, and
        // oversize requests do not take blocks much larger than themselves.
        let usable = |size: usize| {
            !(rounded < max_split && size >= max_split
                || rounded >= max_split && size >= rounded.saturating_add(LARGE_BUFFER))
        };
        let mut fits = self.free[kind.set()]
            .range((stream, rounded, 0, 0)..)
            .take_while(|k| k.0 == stream);
        let &(_, size, _, first) = fits.next()?;
        if !usable(size) {
            return None;
        }
        if kind == Kind::Small {
            return Some(first);
        }
        let segment_size = |idx: u32| self.segments[self.blocks[idx].segment].size;
        let mut best = (segment_size(first), first);
        for &(_, size, _, idx) in fits.take(BEST_FIT_SCAN) {
            if size >= best.0 || !usable(size) {
                break;
            }
            let seg = segment_size(idx);
            if seg < best.0 {
                best = (seg, idx);
            }
        }
        Some(best.1)
    }

    /// Splits off the part of free block `idx` beyond `rounded` bytes when it
    /// is worth keeping as a block of its own.
    fn split_tail(&mut self, idx: u32, rounded: usize) {
        let b = self.blocks[idx];
        let remaining = b.size - rounded;
        let split = match b.kind {
            Kind::Small => remaining >= MIN_BLOCK_SIZE,
            Kind::Large => rounded < self.config.max_split_size && remaining > SMALL_SIZE,
        };
        if !split {
            return;
        }
        let tail = self.blocks.insert(Block {
            addr: b.addr + rounded,
            size: remaining,
            requested: 0,
            prev: idx,
            next: b.next,
            segment: b.segment,
            kind: b.kind,
            stream: b.stream,
            state: State::Free,
            counted_split: false,
        });
        if b.next != NIL {
            self.blocks[b.next].prev = tail;
        }
        self.blocks[idx].next = tail;
        self.blocks[idx].size = rounded;
        self.insert_free(tail);
        self.mark_split(tail);
    }

    #[inline]
    fn hand_out(&mut self, idx: u32, requested: usize) -> usize {
        let b = &mut self.blocks[idx];
        b.state = State::Allocated;
        b.requested = requested;
        let (addr, size) = (b.addr, b.size);
        let k = b.kind.index();
        self.live.insert(addr, idx);
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
        addr
    }

    // ---- free -------------------------------------------------------------

    #[inline]
    pub(crate) fn free(&mut self, addr: usize) -> Result<()> {
        let Some(idx) = self.live.remove(&addr) else {
            return Err(self.bad_free(addr));
        };
        let b = &mut self.blocks[idx];
        let (size, requested, b_stream) = (b.size, b.requested, b.stream);
        b.state = State::Cached;
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
        self.mark_split(idx);
        // Binned under the size that was asked for, not the block's size: a
        // block larger than the request (a rest too small to split off) then
        // serves the next identical request from the bin.
        let key = (b_stream, round_size(requested).unwrap_or(size));
        let bin = self.bins.entry(key).or_default();
        if !bin.listed {
            bin.listed = true;
            self.bins_used.push(key);
        }
        bin.blocks.push(idx);
        self.binned += 1;
        Ok(())
    }

    #[cold]
    fn bad_free(&self, addr: usize) -> Error {
        if self.closed {
            return CLOSED;
        }
        let reason = if self
            .block_containing(addr)
            .is_some_and(|i| self.blocks[i].addr == addr)
        {
            "The block was already freed (double free)"
        } else {
            "It is not a block of this pool"
        };
        Error::InvalidParam {
            param: "block",
            reason,
        }
    }

    // ---- free-block bookkeeping --------------------------------------------

    fn insert_free(&mut self, idx: u32) {
        let b = self.blocks[idx];
        self.free[b.kind.set()].insert((b.stream, b.size, b.addr, idx));
    }

    /// Takes free block `idx` out of the best-fit set and the split count.
    fn detach_free(&mut self, idx: u32) {
        let b = self.blocks[idx];
        self.free[b.kind.set()].remove(&(b.stream, b.size, b.addr, idx));
        self.unmark_split(idx);
    }

    #[inline]
    fn mark_split(&mut self, idx: u32) {
        let b = &mut self.blocks[idx];
        if b.is_split() {
            b.counted_split = true;
            let size = b.size as i64;
            let k = b.kind.index();
            for i in [STAT_ALL, k] {
                self.stats.inactive_split[i].increase(1);
                self.stats.inactive_split_bytes[i].increase(size);
            }
        }
    }

    #[inline]
    fn unmark_split(&mut self, idx: u32) {
        let b = &mut self.blocks[idx];
        if b.counted_split {
            b.counted_split = false;
            let size = b.size as i64;
            let k = b.kind.index();
            for i in [STAT_ALL, k] {
                self.stats.inactive_split[i].decrease(1);
                self.stats.inactive_split_bytes[i].decrease(size);
            }
        }
    }

    /// Merges every binned block with its free neighbours.
    fn flush_bins(&mut self) {
        if self.binned == 0 {
            return;
        }
        let mut used = std::mem::take(&mut self.bins_used);
        for key in used.drain(..) {
            let Some(mut blocks) = self.bins.get_mut(&key).map(|b| {
                b.listed = false;
                std::mem::take(&mut b.blocks)
            }) else {
                continue;
            };
            for idx in blocks.drain(..) {
                self.merge(idx);
            }
            // Keep the vector's capacity for the next free of this size.
            if let Some(bin) = self.bins.get_mut(&key) {
                bin.blocks = blocks;
            }
        }
        self.bins_used = used;
        let bins = std::mem::take(&mut self.bins);
        self.binned = 0;
        if bins.len() <= MAX_BIN_SIZES {
            self.bins = bins;
        }
    }

    /// Turns binned block `idx` into a free block merged with free neighbours.
    fn merge(&mut self, mut idx: u32) {
        self.unmark_split(idx);
        let prev = self.blocks[idx].prev;
        if prev != NIL && self.blocks[prev].state == State::Free {
            self.detach_free(prev);
            self.absorb_next(prev);
            idx = prev;
        }
        let next = self.blocks[idx].next;
        if next != NIL && self.blocks[next].state == State::Free {
            self.detach_free(next);
            self.absorb_next(idx);
        }
        let b = &mut self.blocks[idx];
        b.state = State::Free;
        b.requested = 0;
        self.insert_free(idx);
        self.mark_split(idx);
    }

    /// Appends block `idx`'s successor to it and drops the successor.
    fn absorb_next(&mut self, idx: u32) {
        let next = self.blocks[idx].next;
        let n = self.blocks[next];
        self.blocks[idx].size += n.size;
        self.blocks[idx].next = n.next;
        if n.next != NIL {
            self.blocks[n.next].prev = idx;
        }
        self.blocks.remove(next);
    }

    // ---- segments -----------------------------------------------------------

    /// Gets a new segment for a request of `rounded` bytes, releasing cached
    /// segments and retrying once if the first attempt fails. Returns its
    /// (free) block.
    fn grow(
        &mut self,
        dev: &dyn DeviceMemory,
        kind: Kind,
        size: usize,
        rounded: usize,
        stream: usize,
    ) -> Result<u32> {
        let gc = self.config.garbage_collection_threshold;
        if gc > 0.0 && self.limit != usize::MAX {
            let target = (self.limit as f64 * gc) as usize;
            let reserved = self.reserved();
            if reserved.saturating_add(segment_size(rounded)) > target {
                self.release_free_segments(dev, target.saturating_sub(segment_size(rounded)));
            }
        }
        if kind == Kind::Large {
            self.release_unfit_segments(dev, rounded);
        }
        let mut cause = match self.new_segment(dev, kind, rounded, stream) {
            Ok(idx) => return Ok(idx),
            Err(cause) => cause,
        };
        if self.release_free_segments(dev, 0) > 0 {
            self.stats.num_alloc_retries += 1;
            match self.new_segment(dev, kind, rounded, stream) {
                Ok(idx) => return Ok(idx),
                Err(again) => cause = again,
            }
        }
        self.stats.num_ooms += 1;
        Err(self.oom(size, cause))
    }

    fn oom(&self, size: usize, cause: &'static str) -> Error {
        Error::PoolOutOfMemory {
            requested: size,
            allocated: self.stats.allocated_bytes[STAT_ALL].current as usize,
            reserved: self.reserved(),
            limit: self.limit,
            cause,
        }
    }

    /// A fresh segment for `rounded` bytes: the standard size first, then,
    /// if that is refused, the request rounded to 2 MiB (a 20 MiB segment can
    /// fail where the 4 MiB one the request needs would fit).
    fn new_segment(
        &mut self,
        dev: &dyn DeviceMemory,
        kind: Kind,
        rounded: usize,
        stream: usize,
    ) -> Result<u32, &'static str> {
        let tight = match kind {
            Kind::Small => SMALL_BUFFER,
            Kind::Large => round_up(rounded, ROUND_LARGE),
        };
        // An oversize block is never split, so a 20 MiB segment for it would
        // only waste the rest (PyTorch does that; the tight size does not).
        let standard = if rounded >= self.config.max_split_size {
            tight
        } else {
            segment_size(rounded)
        };
        let sizes = [standard, tight];
        let sizes = if tight == standard {
            &sizes[..1]
        } else {
            &sizes[..]
        };
        let mut cause = "the device is out of memory";
        for &seg_size in sizes {
            if self.reserved().saturating_add(seg_size) > self.limit {
                cause = "the pool's memory limit would be exceeded";
            } else if let Some(addr) = dev.malloc(seg_size) {
                return Ok(self.add_segment(addr, seg_size, kind, stream));
            } else {
                cause = "the device is out of memory";
            }
        }
        Err(cause)
    }

    fn add_segment(&mut self, addr: NonZeroUsize, size: usize, kind: Kind, stream: usize) -> u32 {
        let addr = addr.get();
        let seg = self.segments.insert(Segment {
            addr,
            size,
            kind,
            stream,
            first: NIL,
        });
        let idx = self.blocks.insert(Block {
            addr,
            size,
            requested: 0,
            prev: NIL,
            next: NIL,
            segment: seg,
            kind,
            stream,
            state: State::Free,
            counted_split: false,
        });
        self.segments[seg].first = idx;
        self.by_addr.insert(addr, seg);
        self.insert_free(idx);
        let s = &mut self.stats;
        for i in [STAT_ALL, kind.index()] {
            s.segment[i].increase(1);
            s.reserved_bytes[i].increase(size as i64);
        }
        s.num_device_alloc += 1;
        if size >= self.config.max_split_size {
            s.oversize_segments.increase(1);
        }
        idx
    }

    /// Returns whole free segments to the device, largest first, until at
    /// most `target` bytes stay reserved. Returns the bytes released.
    pub(crate) fn release_free_segments(&mut self, dev: &dyn DeviceMemory, target: usize) -> usize {
        self.flush_bins();
        let mut candidates: Vec<(usize, u32)> = self
            .by_addr
            .values()
            .filter_map(|&seg| {
                let s = self.segments[seg];
                let b = &self.blocks[s.first];
                (b.state == State::Free && b.next == NIL).then_some((s.size, seg))
            })
            .collect();
        candidates.sort_unstable_by(|a, b| b.cmp(a));
        let mut released = 0;
        for (size, seg) in candidates {
            if self.reserved() <= target {
                break;
            }
            self.release_segment(dev, seg);
            released += size;
        }
        released
    }

    /// Before the pool grows for a large request, wholly free large segments
    /// smaller than the request go back to the device: they could not serve
    /// it, and the new segment can serve (by splitting) what they would have.
    /// Without this, every new largest request keeps the smaller segments
    /// cached beside it and reserved memory climbs well above the peak in use
    /// (PyTorch's behaviour; see the prefill trace in benches/pool.rs).
    fn release_unfit_segments(&mut self, dev: &dyn DeviceMemory, rounded: usize) {
        let unfit: Vec<u32> = self
            .by_addr
            .values()
            .copied()
            .filter(|&seg| {
                let s = self.segments[seg];
                let b = &self.blocks[s.first];
                s.kind == Kind::Large && s.size < rounded && b.state == State::Free && b.next == NIL
            })
            .collect();
        for seg in unfit {
            self.release_segment(dev, seg);
        }
    }

    fn release_segment(&mut self, dev: &dyn DeviceMemory, seg: u32) {
        let s = self.segments[seg];
        self.detach_free(s.first);
        self.blocks.remove(s.first);
        self.segments.remove(seg);
        self.by_addr.remove(&s.addr);
        if let Some(addr) = NonZeroUsize::new(s.addr) {
            dev.free(addr, s.size);
        }
        let st = &mut self.stats;
        for i in [STAT_ALL, s.kind.index()] {
            st.segment[i].decrease(1);
            st.reserved_bytes[i].decrease(s.size as i64);
        }
        st.num_device_free += 1;
        if s.size >= self.config.max_split_size {
            st.oversize_segments.decrease(1);
        }
    }

    /// Frees every segment, allocated blocks included, and refuses all later
    /// calls. Returns how many blocks were still allocated.
    pub(crate) fn close(&mut self, dev: &dyn DeviceMemory) -> usize {
        let leaked = self.live.len();
        for (&addr, &seg) in &self.by_addr {
            if let Some(addr) = NonZeroUsize::new(addr) {
                dev.free(addr, self.segments[seg].size);
            }
        }
        self.stats.num_device_free += self.by_addr.len() as i64;
        self.by_addr.clear();
        self.blocks.clear();
        self.segments.clear();
        self.free = [BTreeSet::new(), BTreeSet::new()];
        self.bins_used = Vec::new();
        self.bins = FastMap::default();
        self.live = FastMap::default();
        self.binned = 0;
        self.closed = true;
        leaked
    }

    /// The statistics; `active` equals `allocation` (blocks are returned
    /// synchronously, there is no pending-free state), so it is filled in here
    /// instead of being counted twice on the hot path.
    pub(crate) fn stats(&self) -> PoolStats {
        let mut s = self.stats;
        s.active = s.allocation;
        s.active_bytes = s.allocated_bytes;
        s
    }

    pub(crate) fn live_blocks(&self) -> usize {
        self.live.len()
    }

    pub(crate) fn reserved(&self) -> usize {
        self.stats.reserved_bytes[STAT_ALL].current as usize
    }

    // ---- introspection --------------------------------------------------------

    pub(crate) fn segments_view(&self) -> Vec<SegmentView> {
        self.by_addr
            .values()
            .map(|&seg| {
                let s = self.segments[seg];
                let mut blocks = Vec::new();
                let mut idx = s.first;
                while idx != NIL {
                    let b = &self.blocks[idx];
                    blocks.push(BlockView {
                        address: b.addr,
                        size: b.size,
                        requested_size: b.requested,
                        allocated: b.state == State::Allocated,
                    });
                    idx = b.next;
                }
                SegmentView {
                    address: s.addr,
                    total_size: s.size,
                    small: s.kind == Kind::Small,
                    stream: s.stream,
                    blocks,
                }
            })
            .collect()
    }

    /// Recomputes everything from the block lists and compares it with the
    /// incremental bookkeeping. For tests.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        let mut expect = [[0i64; 3]; 6]; // alloc, alloc bytes, req bytes, split, split bytes, seg/reserved
        let mut segs = [0i64; 3];
        let mut reserved = [0i64; 3];
        let mut free_count = 0;
        let mut live = 0;
        let mut binned = 0;
        for &seg in self.by_addr.values() {
            let s = self.segments[seg];
            let k = s.kind.index();
            segs[0] += 1;
            segs[k] += 1;
            reserved[0] += s.size as i64;
            reserved[k] += s.size as i64;
            let mut idx = s.first;
            let mut at = s.addr;
            let mut prev = NIL;
            let mut last_free = false;
            while idx != NIL {
                let b = self.blocks[idx];
                if b.addr != at || b.prev != prev || b.segment != seg {
                    return Err(format!(
                        "block list of segment {:#x} is broken at {:#x}",
                        s.addr, b.addr
                    ));
                }
                if b.size == 0 || b.size % MIN_BLOCK_SIZE != 0 {
                    return Err(format!("block {:#x} has size {}", b.addr, b.size));
                }
                let is_free = b.state == State::Free;
                if is_free && last_free {
                    return Err(format!(
                        "free block {:#x} was not merged with its neighbour",
                        b.addr
                    ));
                }
                last_free = is_free;
                match b.state {
                    State::Allocated => {
                        live += 1;
                        if self.live.get(&b.addr) != Some(&idx) {
                            return Err(format!(
                                "allocated block {:#x} is not in the live map",
                                b.addr
                            ));
                        }
                        for i in [0, k] {
                            expect[0][i] += 1;
                            expect[1][i] += b.size as i64;
                            expect[2][i] += b.requested as i64;
                        }
                    }
                    State::Free => {
                        free_count += 1;
                        if !self.free[s.kind.set()].contains(&(s.stream, b.size, b.addr, idx)) {
                            return Err(format!("free block {:#x} is not in the free set", b.addr));
                        }
                    }
                    State::Cached => binned += 1,
                }
                if b.state != State::Allocated && b.is_split() {
                    for i in [0, k] {
                        expect[3][i] += 1;
                        expect[4][i] += b.size as i64;
                    }
                }
                if b.counted_split != (b.state != State::Allocated && b.is_split()) {
                    return Err(format!(
                        "block {:#x} is miscounted as inactive split",
                        b.addr
                    ));
                }
                at += b.size;
                prev = idx;
                idx = b.next;
            }
            if at != s.addr + s.size {
                return Err(format!("blocks of segment {:#x} do not tile it", s.addr));
            }
        }
        let st = &self.stats();
        let cur = |a: &[super::stats::Stat; 3]| [a[0].current, a[1].current, a[2].current];
        let checks = [
            ("allocation", cur(&st.allocation), expect[0]),
            ("active", cur(&st.active), expect[0]),
            ("allocated_bytes", cur(&st.allocated_bytes), expect[1]),
            ("active_bytes", cur(&st.active_bytes), expect[1]),
            ("requested_bytes", cur(&st.requested_bytes), expect[2]),
            ("inactive_split", cur(&st.inactive_split), expect[3]),
            (
                "inactive_split_bytes",
                cur(&st.inactive_split_bytes),
                expect[4],
            ),
            ("segment", cur(&st.segment), segs),
            ("reserved_bytes", cur(&st.reserved_bytes), reserved),
        ];
        for (name, got, want) in checks {
            if got != want {
                return Err(format!("{name}: stats say {got:?}, blocks say {want:?}"));
            }
        }
        if live != self.live.len() {
            return Err("the live map holds blocks that are not allocated".into());
        }
        if free_count != self.free[0].len() + self.free[1].len() {
            return Err("the free sets hold blocks that are not free".into());
        }
        let in_bins: usize = self.bins.values().map(|b| b.blocks.len()).sum();
        if binned != self.binned || in_bins != binned {
            return Err("the bins and the cached blocks disagree".into());
        }
        Ok(())
    }
}
