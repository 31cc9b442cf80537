//! A shard's segments: adding, releasing, closing. Growing (with the limit,
//! garbage collection, release and retry) is pool-wide: `Pool` in
//! `crates/aclalloc-pool/src/sharded.rs`.

use super::*;
use crate::device::SEGMENT_ALIGN;

impl Core {
    /// A fresh segment for `rounded` bytes: the standard size, else the
    /// request rounded to 2 MiB, else (under a tight limit) what the limit
    /// still allows. `room`: the bytes the limit still allows.
    pub(crate) fn new_segment(
        &mut self,
        dev: &dyn DeviceMemory,
        kind: Kind,
        rounded: usize,
        stream: usize,
        room: usize,
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
        // A limit below the tight size (a stream-ordered pool's `maxSize` of
        // 1 MiB) still serves what fits: one segment of all the room left.
        let within_limit = room / SEGMENT_ALIGN * SEGMENT_ALIGN;
        let mut sizes = vec![standard];
        if tight != standard {
            sizes.push(tight);
        }
        if within_limit < tight && within_limit >= rounded {
            sizes.push(within_limit);
        }
        let mut cause = "the device is out of memory";
        for seg_size in sizes {
            if seg_size > room {
                cause = "the pool's memory limit would be exceeded";
            } else if let Some(addr) = dev.malloc(seg_size) {
                // Blocks are found by address in 512-byte units: a segment
                // off that grid would make them unfindable.
                if addr.get() % SEGMENT_ALIGN != 0 {
                    dev.free(addr, seg_size);
                    cause = "the device's memory is not aligned to 512 bytes";
                    continue;
                }
                return Ok(self.add_segment(addr, seg_size, kind, stream));
            } else {
                cause = "the device is out of memory";
            }
        }
        Err(cause)
    }

    pub(super) fn add_segment(
        &mut self,
        addr: NonZeroUsize,
        size: usize,
        kind: Kind,
        stream: usize,
    ) -> u32 {
        let idx = self.insert_segment(addr.get(), size, kind, stream, false);
        let s = &mut self.stats;
        for i in [STAT_ALL, kind.index()] {
            s.reserved_bytes[i].increase(size as i64);
        }
        s.num_device_alloc += 1;
        if size >= self.config.max_split_size {
            s.oversize_segments.increase(1);
        }
        self.history
            .record(Action::SegmentAlloc, addr.get(), size, 0, stream);
        idx
    }

    /// Files a new segment at `addr` whose whole range is one free block, returned, and counts it.
    pub(super) fn insert_segment(
        &mut self,
        addr: usize,
        size: usize,
        kind: Kind,
        stream: usize,
        expandable: bool,
    ) -> u32 {
        let seg = self.segments.insert(Segment {
            addr,
            size,
            kind,
            stream,
            first: NIL,
            expandable,
            freed_at: 0,
        });
        let idx = self.blocks.insert(Block {
            addr,
            size,
            requested: 0,
            prev: NIL,
            next: NIL,
            free_prev: NIL,
            free_next: NIL,
            segment: seg,
            kind,
            stream,
            state: State::Free,
            counted_split: false,
        });
        self.segments[seg].first = idx;
        self.by_addr.insert(addr, seg);
        self.insert_free(idx);
        for i in [STAT_ALL, kind.index()] {
            self.stats.segment[i].increase(1);
        }
        idx
    }

    /// This shard's wholly free segments, as (size, segment), after merging the bins.
    pub(crate) fn free_segments(&mut self) -> Vec<(usize, u32)> {
        self.flush_bins();
        self.by_addr
            .values()
            .filter_map(|seg| {
                let s = self.segments[seg];
                let b = &self.blocks[s.first];
                (!s.expandable && b.state == State::Free && b.next == NIL).then_some((s.size, seg))
            })
            .collect()
    }

    /// Before the pool grows for a large request, wholly free smaller large
    /// segments go back: they cannot serve it, and the new one serves what they
    /// would (otherwise reserved memory climbs far above the peak in use).
    pub(crate) fn release_unfit_segments(&mut self, dev: &dyn DeviceMemory, rounded: usize) {
        let unfit: Vec<u32> = self
            .by_addr
            .values()
            .filter(|&seg| {
                let s = self.segments[seg];
                let b = &self.blocks[s.first];
                !s.expandable
                    && s.kind == Kind::Large
                    && s.size < rounded
                    && b.state == State::Free
                    && b.next == NIL
            })
            .collect();
        for seg in unfit {
            self.release_segment(dev, seg);
        }
    }

    pub(crate) fn release_segment(&mut self, dev: &dyn DeviceMemory, seg: u32) {
        let s = self.unlink_segment(seg);
        if let Some(addr) = NonZeroUsize::new(s.addr) {
            dev.free(addr, s.size);
        }
        self.history
            .record(Action::SegmentFree, s.addr, s.size, 0, s.stream);
        self.stats.num_device_free += 1;
    }

    /// Takes wholly free segment `seg` and its one free block out of this
    /// shard's records and its share of the statistics; the memory itself
    /// is the caller's (freed, or handed to another shard).
    pub(crate) fn unlink_segment(&mut self, seg: u32) -> Segment {
        let s = self.segments[seg];
        self.detach_free(s.first);
        self.blocks.remove(s.first);
        self.segments.remove(seg);
        self.by_addr.remove(s.addr);
        self.live.release(s.addr, s.size);
        let st = &mut self.stats;
        for i in [STAT_ALL, s.kind.index()] {
            st.segment[i].decrease(1);
            st.reserved_bytes[i].decrease(s.size as i64);
        }
        if s.size >= self.config.max_split_size {
            st.oversize_segments.decrease(1);
        }
        s
    }

    /// Frees every segment, allocated blocks included, and refuses all later
    /// calls. Returns how many blocks were still allocated.
    pub(crate) fn close(&mut self, dev: &dyn DeviceMemory) -> usize {
        let leaked = self.live.len();
        if let Some(vm) = dev.virtual_memory() {
            self.release_reservations(vm, true);
        }
        for (addr, seg) in self.by_addr.iter() {
            let s = self.segments[seg];
            if let Some(addr) = NonZeroUsize::new(addr) {
                dev.free(addr, s.size);
            }
            self.history
                .record(Action::SegmentFree, addr, s.size, 0, s.stream);
        }
        self.stats.num_device_free += self.by_addr.len() as i64;
        self.by_addr = SegmentIndex::default();
        self.blocks.clear();
        self.segments.clear();
        self.free = [Vec::new(), Vec::new()];
        self.bins = Bins::default();
        self.live = LiveBlocks::default();
        self.pages = HashMap::new();
        self.closed = true;
        leaked
    }
}
