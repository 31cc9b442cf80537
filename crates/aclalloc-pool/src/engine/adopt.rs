//! Cached memory another stream freed, handed to a stream ordered after the
//! free: it waited on an event recorded on the freeing stream after the
//! free, or that stream was synchronized since (`crate::registry::order`,
//! the ordering the tracking layer checks reuses against). Only wholly free
//! fixed segments move, whole: a segment keeps serving one stream, so its
//! blocks never merge across streams, and an expandable segment's pages
//! stay with its reservation.

use super::retire::RETIRED;
use super::*;
use crate::registry::order;

impl Core {
    /// The smallest wholly free fixed segment of `kind`, of a stream other
    /// than `stream`, that a request of `rounded` bytes may use and whose
    /// last free `stream` is ordered after: (its size, the segment).
    pub(crate) fn ordered_segment(
        &mut self,
        kind: Kind,
        rounded: usize,
        stream: usize,
        reuse: crate::CrossStreamReuse,
    ) -> Option<(usize, u32)> {
        let ordered_after = |freed_on: usize, freed_at: u64| {
            (reuse.after_synchronize && order::synchronized_since(freed_on, freed_at))
                || (reuse.follows_waits() && order::waited_after(stream, freed_on, freed_at))
        };
        self.free_segment_of_another_stream(kind, rounded, stream, |s| {
            ordered_after(s.stream, s.freed_at)
        })
    }

    /// The stream that left the smallest wholly free fixed segment a request
    /// of `rounded` bytes on `stream` may use, ordered after its frees or
    /// not: (the segment's size, that stream).
    pub(crate) fn unordered_segment_source(
        &mut self,
        kind: Kind,
        rounded: usize,
        stream: usize,
    ) -> Option<(usize, usize)> {
        let (size, seg) = self.free_segment_of_another_stream(kind, rounded, stream, |_| true)?;
        Some((size, self.segments[seg].stream))
    }

    /// The smallest wholly free fixed segment of `kind`, of a stream other
    /// than `stream`, that a request of `rounded` bytes may use and `admit`
    /// accepts: (its size, the segment).
    fn free_segment_of_another_stream(
        &mut self,
        kind: Kind,
        rounded: usize,
        stream: usize,
        admit: impl Fn(&Segment) -> bool,
    ) -> Option<(usize, u32)> {
        let max_split = self.config.max_split_size;
        // PyTorch's oversize rules, as best fit applies them.
        let usable = |size: usize| {
            size >= rounded
                && !(rounded < max_split && size >= max_split
                    || rounded >= max_split && size >= rounded.saturating_add(LARGE_BUFFER))
        };
        let candidate = |s: &Segment| {
            !s.expandable
                && s.kind == kind
                && s.stream != stream
                && s.stream != RETIRED
                && usable(s.size)
        };
        // The order is asked before the bins are merged, so a shard with
        // nothing to give keeps its bins.
        let admitted: Vec<u32> = self
            .by_addr
            .values()
            .filter(|&seg| {
                let s = self.segments[seg];
                candidate(&s) && self.nothing_handed_out(&s) && admit(&s)
            })
            .collect();
        if admitted.is_empty() {
            return None;
        }
        self.flush_bins();
        admitted
            .into_iter()
            .filter(|&seg| {
                let s = self.segments[seg];
                let b = &self.blocks[s.first];
                b.state == State::Free && b.next == NIL
            })
            .map(|seg| (self.segments[seg].size, seg))
            .min()
    }

    /// True when every block of segment `s` is free or binned (none is
    /// allocated or kept by a thread's cache).
    fn nothing_handed_out(&self, s: &Segment) -> bool {
        let mut idx = s.first;
        while idx != NIL {
            let b = &self.blocks[idx];
            if !matches!(b.state, State::Free | State::Cached) {
                return false;
            }
            idx = b.next;
        }
        true
    }

    /// Takes wholly free segment `seg` out of this shard, with its share of
    /// the statistics, for another shard to adopt: (address, size, kind).
    pub(crate) fn give_segment(&mut self, seg: u32) -> (usize, usize, Kind) {
        let s = self.unlink_segment(seg);
        (s.addr, s.size, s.kind)
    }

    /// Files a segment another shard gave up as this shard's, serving
    /// `stream`; returns its one free block. The device allocation is not
    /// counted again: the pool still holds it once.
    pub(crate) fn adopt_segment(
        &mut self,
        addr: usize,
        size: usize,
        kind: Kind,
        stream: usize,
    ) -> u32 {
        let idx = self.insert_segment(addr, size, kind, stream, false);
        let st = &mut self.stats;
        for i in [STAT_ALL, kind.index()] {
            st.reserved_bytes[i].increase(size as i64);
        }
        if size >= self.config.max_split_size {
            st.oversize_segments.increase(1);
        }
        idx
    }
}
