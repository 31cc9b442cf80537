//! Segments: growing (with garbage collection, release and retry),
//! releasing, closing.

use super::*;

impl Core {
    /// Gets a new segment for a request of `rounded` bytes, releasing cached
    /// segments and retrying once if the first attempt fails. Returns its
    /// (free) block.
    pub(super) fn grow(
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

    pub(super) fn oom(&self, size: usize, cause: &'static str) -> Error {
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
    pub(super) fn new_segment(
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

    pub(super) fn add_segment(
        &mut self,
        addr: NonZeroUsize,
        size: usize,
        kind: Kind,
        stream: usize,
    ) -> u32 {
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
    pub(super) fn release_unfit_segments(&mut self, dev: &dyn DeviceMemory, rounded: usize) {
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

    pub(super) fn release_segment(&mut self, dev: &dyn DeviceMemory, seg: u32) {
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
}
