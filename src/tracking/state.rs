//! What the tracking layer knows about one allocator object: its blocks, the
//! address ranges they cover, its statistics, and the fault rules applied
//! to each alloc and free. The record is guarded by the owner word of
//! [`super::owner::AllocState`].

use super::clock::now_ns;
use super::events::{record, Fault, LeakSeen};
use super::history;
use super::ptr_map::PtrMap;
use super::stats::AllocatorStats;
use super::syncclock;
use std::collections::hash_map::Entry;
use std::collections::BTreeMap;

/// How many freed blocks are remembered (for double-free and cross-stream
/// checks) before the ones whose stream has been synchronized are dropped.
const FREED_KEPT: usize = 1 << 14;

/// Whether a block is in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockState {
    /// Handed out and not freed. `leak_reported` is set once it was reported
    /// as a leak, so it is never reported twice.
    Live { leak_reported: bool },
    /// Freed on `stream` at sync generation `generation`.
    Freed { stream: usize, generation: u64 },
}

/// One block the allocator handed out.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockRec {
    /// The size requested from alloc.
    pub size: usize,
    /// The stream it was handed out on.
    pub stream: usize,
    /// The device of that stream (for the history).
    pub device: i32,
    /// When (coarse monotonic ns).
    pub time_ns: u64,
    /// Its device address, once getAddrFromBlock was called (0 before).
    pub address: usize,
    /// The user's getAddrFromBlock that serves it.
    pub get_addr: usize,
    pub state: BlockState,
}

/// An address range in use or recently freed.
#[derive(Clone, Copy, Debug)]
struct Range {
    end: usize,
    block: usize,
    /// `Some((stream, generation))` once freed.
    freed: Option<(usize, u64)>,
}

/// The guarded part of an [`AllocState`].
#[derive(Default)]
pub(crate) struct Inner {
    pub(crate) blocks: PtrMap<BlockRec>,
    /// Keyed by (start address, block) so that two blocks starting at the
    /// same address (a broken allocator) both have an entry.
    ranges: BTreeMap<(usize, usize), Range>,
    pub(crate) stats: AllocatorStats,
    freed: usize,
    /// Streams this allocator serves through the tracking layer, in the
    /// order their tracking objects were made: the live ones, and destroyed
    /// ones while the list is short.
    pub(crate) streams: Vec<usize>,
    /// Destroyed streams it served that are no longer listed.
    pub(crate) streams_destroyed: u64,
}

impl Inner {
    /// alloc on `stream` (of `device`) returned `block` for `size` bytes.
    /// Inlined into the tracking callbacks: this is the common path of every
    /// allocation.
    #[inline(always)]
    pub(crate) fn on_alloc(
        &mut self,
        allocator: usize,
        block: usize,
        size: usize,
        stream: usize,
        device: i32,
        get_addr: usize,
    ) {
        if block == 0 {
            self.stats.num_alloc_failures += 1;
            history::alloc_failed(device, size, stream);
            return;
        }
        let time_ns = now_ns();
        let fresh = BlockState::Live {
            leak_reported: false,
        };
        // Updated field by field in place (no record built on the stack and
        // copied, which stalls on store forwarding): in a launch loop the
        // block is usually one this allocator handed out and got back before.
        let twice = match self.blocks.entry(block) {
            Entry::Occupied(mut slot) => {
                let held = slot.get_mut();
                let old = matches!(held.state, BlockState::Live { .. }).then_some(*held);
                held.size = size;
                held.stream = stream;
                held.device = device;
                held.time_ns = time_ns;
                held.address = 0;
                held.get_addr = get_addr;
                held.state = fresh;
                if old.is_none() {
                    self.freed -= 1;
                }
                old
            }
            Entry::Vacant(slot) => {
                slot.insert(BlockRec {
                    size,
                    stream,
                    device,
                    time_ns,
                    address: 0,
                    get_addr,
                    state: fresh,
                });
                None
            }
        };
        if let Some(old) = twice {
            self.handed_out_twice(allocator, block, &old, stream, size);
        }
        self.stats.allocation.increase(1);
        self.stats.allocated_bytes.increase(size as i64);
    }

    /// The same live block came back from alloc: it overlaps itself. The old
    /// record is replaced, so it is counted as freed.
    #[cold]
    fn handed_out_twice(
        &mut self,
        allocator: usize,
        block: usize,
        old: &BlockRec,
        stream: usize,
        size: usize,
    ) {
        record(Fault::Overlap {
            stream,
            allocator,
            block,
            address: old.address,
            size,
            other_stream: old.stream,
            other_block: block,
            other_address: old.address,
            other_size: old.size,
        });
        if old.address != 0 {
            self.ranges.remove(&(old.address, block));
            history::freed(old.device, old.address, old.size, old.stream);
        }
        self.stats.allocation.decrease(1);
        self.stats.allocated_bytes.decrease(old.size as i64);
    }

    /// `stream`, which this allocator served, was destroyed: it stays
    /// listed while the list is short (a report names the streams of a
    /// small program), otherwise it is only counted.
    pub(crate) fn stream_ended(&mut self, stream: usize) {
        const LISTED: usize = 16;
        if self.streams.len() > LISTED {
            if let Some(i) = self.streams.iter().position(|&s| s == stream) {
                self.streams.remove(i);
                self.streams_destroyed += 1;
            }
        }
    }

    /// `stream` now reaches this allocator through the tracking layer.
    pub(crate) fn note_stream(&mut self, stream: usize) {
        if !self.streams.contains(&stream) {
            self.streams.push(stream);
        }
    }

    /// The user's getAddrFromBlock function that serves `block`, if it is known.
    #[inline]
    pub(crate) fn get_addr_of(&self, block: usize) -> Option<usize> {
        self.blocks.get(&block).map(|b| b.get_addr)
    }

    /// getAddrFromBlock(`block`) returned `address`. The first address of a
    /// block is checked against every other live and recently freed range.
    #[inline]
    pub(crate) fn on_get_addr(&mut self, allocator: usize, block: usize, address: usize) {
        let Some(rec) = self.blocks.get_mut(&block) else {
            record(Fault::UnknownBlock { allocator, block });
            return;
        };
        if !matches!(rec.state, BlockState::Live { .. }) {
            record(Fault::UnknownBlock { allocator, block });
            return;
        }
        if address == 0 {
            let (stream, size) = (rec.stream, rec.size);
            record(Fault::NullAddress {
                stream,
                allocator,
                block,
                size,
            });
            return;
        }
        if rec.address == address {
            return;
        }
        let old = rec.address;
        rec.address = address;
        let rec = *rec;
        if old != 0 {
            // The same live block at another address: the timeline sees the
            // old range end.
            history::freed(rec.device, old, rec.size, rec.stream);
            self.ranges.remove(&(old, block));
        }
        // The block's memory begins here (see `history`: why not at alloc).
        history::allocated(rec.device, address, rec.size, rec.stream);
        if old == 0 && self.reuse_own_range(allocator, block, &rec) {
            return;
        }
        // Under C frames: a bug in the range walk must not unwind.
        let this = std::panic::AssertUnwindSafe(&mut *self);
        let _ = std::panic::catch_unwind(move || {
            let this = this;
            this.0.check_range(allocator, block, &rec)
        });
        self.ranges.insert(
            (address, block),
            Range {
                end: address.saturating_add(rec.size.max(1)),
                block,
                freed: None,
            },
        );
    }

    /// The common case of a launch loop: a block comes back at the address
    /// of its own previous life, no larger. Its freed range still being in
    /// the map means no range inserted since overlaps it (it would have been
    /// superseded), and ranges are disjoint, so only the stream that freed it
    /// needs checking, and the entry is updated in place.
    #[inline]
    fn reuse_own_range(&mut self, allocator: usize, block: usize, rec: &BlockRec) -> bool {
        let Some(range) = self.ranges.get_mut(&(rec.address, block)) else {
            return false;
        };
        let Some((freed_on, generation)) = range.freed else {
            return false;
        };
        let end = rec.address.saturating_add(rec.size.max(1));
        if end > range.end {
            return false;
        }
        range.end = end;
        range.freed = None;
        if freed_on != rec.stream && !syncclock::synchronized_since(freed_on, generation) {
            record(Fault::CrossStreamReuse {
                stream: rec.stream,
                allocator,
                block,
                address: rec.address,
                size: rec.size,
                freed_on,
                freed_block: block,
            });
        }
        true
    }

    fn check_range(&mut self, allocator: usize, block: usize, rec: &BlockRec) {
        let start = rec.address;
        let end = start.saturating_add(rec.size.max(1));
        // Superseded freed ranges are collected into a small array, not a
        // Vec: reusing a freed range is what every launch does.
        let mut first_pass = true;
        loop {
            let mut superseded = [(0usize, 0usize); 8];
            let mut found = 0;
            // Ranges are disjoint while the allocator is correct, so walking
            // down from `end` stops at the first range that ends at or before
            // `start`.
            for (&key, range) in self.ranges.range(..(end, 0)).rev() {
                if range.end <= start {
                    break;
                }
                match range.freed {
                    None if first_pass => {
                        let other = self.blocks.get(&range.block);
                        record(Fault::Overlap {
                            stream: rec.stream,
                            allocator,
                            block,
                            address: start,
                            size: rec.size,
                            other_stream: other.map_or(0, |o| o.stream),
                            other_block: range.block,
                            other_address: key.0,
                            other_size: other.map_or(range.end - key.0, |o| o.size),
                        });
                    }
                    None => {}
                    Some((freed_on, generation)) => {
                        if freed_on != rec.stream
                            && !syncclock::synchronized_since(freed_on, generation)
                        {
                            record(Fault::CrossStreamReuse {
                                stream: rec.stream,
                                allocator,
                                block,
                                address: start,
                                size: rec.size,
                                freed_on,
                                freed_block: range.block,
                            });
                        }
                        superseded[found] = key;
                        found += 1;
                        if found == superseded.len() {
                            break;
                        }
                    }
                }
            }
            for &key in &superseded[..found] {
                self.ranges.remove(&key);
                self.forget_freed(key.1);
            }
            if found < superseded.len() {
                return;
            }
            first_pass = false;
        }
    }

    fn forget_freed(&mut self, block: usize) {
        if let Some(rec) = self.blocks.get(&block) {
            if matches!(rec.state, BlockState::Freed { .. }) {
                self.blocks.remove(&block);
                self.freed -= 1;
            }
        }
    }

    /// free(`block`) on `stream`. Inlined into the tracking callbacks.
    #[inline(always)]
    pub(crate) fn on_free(&mut self, allocator: usize, block: usize, stream: usize) {
        let Some(rec) = self.blocks.get_mut(&block) else {
            record(Fault::UnknownFree {
                stream,
                allocator,
                block,
            });
            return;
        };
        if let BlockState::Freed {
            stream: first_freed_on,
            ..
        } = rec.state
        {
            let size = rec.size;
            record(Fault::DoubleFree {
                stream,
                allocator,
                block,
                size,
                first_freed_on,
            });
            return;
        }
        let generation = syncclock::generation();
        rec.state = BlockState::Freed { stream, generation };
        let (size, address) = (rec.size, rec.address);
        if address != 0 {
            history::freed(rec.device, address, size, stream);
            if let Some(range) = self.ranges.get_mut(&(address, block)) {
                range.freed = Some((stream, generation));
            }
        }
        self.stats.allocation.decrease(1);
        self.stats.allocated_bytes.decrease(size as i64);
        self.freed += 1;
        if self.freed > FREED_KEPT {
            let this = std::panic::AssertUnwindSafe(&mut *self);
            let _ = std::panic::catch_unwind(move || {
                let this = this;
                this.0.prune_freed()
            });
        }
    }

    /// Drops freed records whose stream has been synchronized since (they
    /// can no longer cause a cross-stream fault); when that is not enough,
    /// drops them all, giving up double-free detection on those blocks.
    #[cold]
    pub(crate) fn prune_freed(&mut self) {
        let keep_unsynced = self.freed / 2 < FREED_KEPT;
        self.blocks.retain(|_, b| match b.state {
            BlockState::Freed { stream, generation } => {
                keep_unsynced && !syncclock::synchronized_since(stream, generation)
            }
            BlockState::Live { .. } => true,
        });
        let blocks = &self.blocks;
        self.ranges
            .retain(|_, r| r.freed.is_none() || blocks.contains_key(&r.block));
        self.freed = self
            .blocks
            .values()
            .filter(|b| matches!(b.state, BlockState::Freed { .. }))
            .count();
    }

    /// Reports every live block allocated on `stream` (every stream when
    /// `None`) that was not reported yet.
    pub(crate) fn report_leaks(&mut self, allocator: usize, stream: Option<usize>, seen: LeakSeen) {
        let now = now_ns();
        for (&block, rec) in self.blocks.iter_mut() {
            if let BlockState::Live { leak_reported } = &mut rec.state {
                if !*leak_reported && stream.map_or(true, |s| s == rec.stream) {
                    *leak_reported = true;
                    record(Fault::Leak {
                        stream: rec.stream,
                        allocator,
                        block,
                        address: rec.address,
                        size: rec.size,
                        age_ns: now.saturating_sub(rec.time_ns),
                        seen,
                    });
                }
            }
        }
    }

    /// Live blocks, ordered by address then block.
    pub(crate) fn live_blocks(&self) -> Vec<(usize, BlockRec)> {
        let mut live: Vec<(usize, BlockRec)> = self
            .blocks
            .iter()
            .filter(|(_, b)| matches!(b.state, BlockState::Live { .. }))
            .map(|(&k, b)| (k, *b))
            .collect();
        live.sort_by_key(|(k, b)| (b.address, *k));
        live
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracking::events;
    use crate::tracking::owner::AllocState;

    // Each test uses its own allocator value so that parallel tests can pick
    // out their own events from the process-wide log.
    fn faults_of(allocator: usize) -> Vec<Fault> {
        events::events()
            .0
            .into_iter()
            .map(|e| e.fault)
            .filter(|f| match *f {
                Fault::UnknownFree { allocator: a, .. }
                | Fault::DoubleFree { allocator: a, .. }
                | Fault::NullAddress { allocator: a, .. }
                | Fault::UnknownBlock { allocator: a, .. }
                | Fault::Overlap { allocator: a, .. }
                | Fault::CrossStreamReuse { allocator: a, .. }
                | Fault::ConcurrentUse { allocator: a, .. }
                | Fault::Leak { allocator: a, .. } => a == allocator,
            })
            .collect()
    }

    #[test]
    fn a_clean_alloc_free_cycle_reports_nothing_and_counts() {
        let a = 0xA110_0001;
        let state = AllocState::new(a);
        let mut g = state.enter(0x10).unwrap();
        for _ in 0..3 {
            g.on_alloc(a, 0x1000, 64, 0x10, 0, 1);
            g.on_get_addr(a, 0x1000, 0x9000);
            g.on_free(a, 0x1000, 0x10);
        }
        assert_eq!(g.stats.allocation.allocated, 3);
        assert_eq!(g.stats.allocation.current, 0);
        assert_eq!(g.stats.allocated_bytes.peak, 64);
        assert!(faults_of(a).is_empty(), "{:?}", faults_of(a));
    }

    #[test]
    fn double_free_and_unknown_free_are_told_apart() {
        let a = 0xA110_0002;
        let state = AllocState::new(a);
        let mut g = state.enter(0x10).unwrap();
        g.on_alloc(a, 0x1000, 64, 0x10, 0, 1);
        g.on_free(a, 0x1000, 0x10);
        g.on_free(a, 0x1000, 0x20);
        g.on_free(a, 0x2000, 0x20);
        assert_eq!(
            faults_of(a),
            vec![
                Fault::DoubleFree {
                    stream: 0x20,
                    allocator: a,
                    block: 0x1000,
                    size: 64,
                    first_freed_on: 0x10
                },
                Fault::UnknownFree {
                    stream: 0x20,
                    allocator: a,
                    block: 0x2000
                }
            ]
        );
        assert_eq!(g.stats.allocation.freed, 1, "faulty frees are not counted");
    }

    #[test]
    fn overlapping_live_ranges_are_reported_but_adjacent_ones_are_not() {
        let a = 0xA110_0003;
        let state = AllocState::new(a);
        let mut g = state.enter(0x10).unwrap();
        g.on_alloc(a, 0x1, 100, 0x10, 0, 1);
        g.on_get_addr(a, 0x1, 0x1000);
        g.on_alloc(a, 0x2, 100, 0x10, 0, 1);
        g.on_get_addr(a, 0x2, 0x1064); // adjacent: 0x1000 + 100
        g.on_alloc(a, 0x3, 50, 0x10, 0, 1);
        g.on_get_addr(a, 0x3, 0x1080); // inside block 2
        let faults = faults_of(a);
        assert_eq!(faults.len(), 1, "{faults:?}");
        assert!(matches!(
            faults[0],
            Fault::Overlap {
                block: 0x3,
                other_block: 0x2,
                size: 50,
                other_size: 100,
                ..
            }
        ));
    }

    #[test]
    fn reuse_on_another_stream_needs_a_synchronize_in_between() {
        let a = 0xA110_0004;
        let (s1, s2) = (0xA110_0400, 0xA110_0408);
        let state = AllocState::new(a);
        let mut g = state.enter(s1).unwrap();
        g.on_alloc(a, 0x1, 256, s1, 0, 1);
        g.on_get_addr(a, 0x1, 0x4000);
        g.on_free(a, 0x1, s1);
        // Same stream: stream order makes the reuse safe.
        g.on_alloc(a, 0x1, 256, s1, 0, 1);
        g.on_get_addr(a, 0x1, 0x4000);
        g.on_free(a, 0x1, s1);
        // Another stream, no synchronize: a fault, with the new stream and size.
        g.on_alloc(a, 0x2, 128, s2, 0, 1);
        g.on_get_addr(a, 0x2, 0x4000);
        g.on_free(a, 0x2, s2);
        syncclock::stream_synchronized(s2);
        g.on_alloc(a, 0x3, 128, s1, 0, 1);
        g.on_get_addr(a, 0x3, 0x4040);
        assert_eq!(
            faults_of(a),
            vec![Fault::CrossStreamReuse {
                stream: s2,
                allocator: a,
                block: 0x2,
                address: 0x4000,
                size: 128,
                freed_on: s1,
                freed_block: 0x1
            }]
        );
    }

    #[test]
    fn null_addresses_and_leaks_are_reported_once() {
        let a = 0xA110_0005;
        let state = AllocState::new(a);
        let mut g = state.enter(0x10).unwrap();
        g.on_alloc(a, 0x1, 32, 0x10, 0, 1);
        g.on_get_addr(a, 0x1, 0);
        g.on_alloc(a, 0x2, 48, 0x20, 0, 1);
        g.report_leaks(a, Some(0x20), LeakSeen::Unregister);
        g.report_leaks(a, None, LeakSeen::Exit);
        let faults = faults_of(a);
        assert_eq!(faults.len(), 3, "{faults:?}");
        assert!(matches!(
            faults[0],
            Fault::NullAddress {
                stream: 0x10,
                size: 32,
                ..
            }
        ));
        assert!(matches!(
            faults[1],
            Fault::Leak {
                stream: 0x20,
                size: 48,
                seen: LeakSeen::Unregister,
                ..
            }
        ));
        assert!(matches!(
            faults[2],
            Fault::Leak {
                stream: 0x10,
                size: 32,
                seen: LeakSeen::Exit,
                ..
            }
        ));
    }

    #[test]
    fn a_second_stream_inside_the_allocator_is_reported_and_waits() {
        let a = 0xA110_0006;
        let state = std::sync::Arc::new(AllocState::new(a));
        let g = state.enter(0x10).unwrap();
        let other = {
            let state = state.clone();
            std::thread::spawn(move || {
                let g = state.enter(0x20).unwrap();
                g.stats.allocation.current
            })
        };
        while faults_of(a).is_empty() {
            std::thread::yield_now();
        }
        drop(g);
        other.join().unwrap();
        assert_eq!(
            faults_of(a),
            vec![Fault::ConcurrentUse {
                allocator: a,
                stream: 0x20,
                other_stream: 0x10
            }]
        );
        assert!(state.enter(0x10).is_some());
    }

    #[test]
    fn a_report_gives_up_on_an_allocator_that_stays_busy() {
        let state = AllocState::new(0xA110_0008);
        let held = std::sync::Arc::new(std::sync::Barrier::new(2));
        let release = std::sync::Arc::new(std::sync::Barrier::new(2));
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let _g = state.enter(0x10).unwrap();
                held.wait();
                release.wait();
            });
            held.wait();
            let patience = std::time::Duration::from_millis(20);
            assert!(state.enter_for_report(patience).is_none());
            release.wait();
        });
        assert!(state
            .enter_for_report(std::time::Duration::from_millis(20))
            .is_some());
    }

    #[test]
    fn reentry_from_the_same_thread_is_not_a_deadlock() {
        let state = AllocState::new(0xA110_0007);
        let _g = state.enter(0x10).unwrap();
        assert!(state.enter(0x10).is_none());
    }
}
