//! What the tracking layer knows about one allocator object: its blocks
//! (in the shared tracked-allocations adaptor, with the tracking layer's
//! metadata), the address ranges they cover, its statistics, and the fault
//! rules applied to each alloc and free. The record is guarded by the lock
//! of [`super::owner::AllocState`].

use super::events::{record, record_with_stack, Fault, LeakSeen};
use super::history;
use super::owner::Inside;
use super::stats::AllocatorStats;
use super::syncclock;
use crate::base::tracked::{Block, Meta, Refused, META_WORDS};
use aclalloc_core::history::clock::{coarse_ns as now_ns, stamp};
use aclalloc_core::history::stacks::StackId;
use std::collections::BTreeMap;

/// How many freed blocks are remembered (for double-free and cross-stream
/// checks) before the ones whose stream has been synchronized are dropped.
const FREED_KEPT: usize = 1 << 14;

/// What the tracking layer keeps per block beside the adaptor's size,
/// stream and freed state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TrackMeta {
    device: i32,
    leak_reported: bool,
    /// The allocating stack (31 bits are kept: ids stay far below).
    stack: StackId,
    time_ns: u64,
    address: usize,
    get_addr: usize,
}

impl Meta for TrackMeta {
    #[inline]
    fn pack(&self) -> [usize; META_WORDS] {
        [
            self.device as u32 as usize
                | (self.leak_reported as usize) << 32
                | (self.stack as usize) << 33,
            self.time_ns as usize,
            self.address,
            self.get_addr,
        ]
    }
    #[inline]
    fn unpack(w: &[usize; META_WORDS]) -> Self {
        TrackMeta {
            device: w[0] as u32 as i32,
            leak_reported: w[0] >> 32 & 1 != 0,
            stack: (w[0] >> 33) as StackId,
            time_ns: w[1] as u64,
            address: w[2],
            get_addr: w[3],
        }
    }
}

impl TrackMeta {
    /// The user's getAddrFromBlock of the registration the block came from.
    #[inline]
    pub(crate) fn get_addr(&self) -> usize {
        self.get_addr
    }
}

/// One block the allocator handed out, as reports read it.
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
    /// The allocating stack.
    pub stack: StackId,
}

impl From<Block<TrackMeta>> for BlockRec {
    #[inline]
    fn from(b: Block<TrackMeta>) -> Self {
        BlockRec {
            size: b.size,
            stream: b.owner,
            device: b.meta.device,
            time_ns: b.meta.time_ns,
            address: b.meta.address,
            stack: b.meta.stack,
        }
    }
}

/// An address range in use or recently freed.
#[derive(Clone, Copy, Debug)]
struct Range {
    end: usize,
    block: usize,
    /// `Some((stream, generation))` once freed.
    freed: Option<(usize, u64)>,
}

/// What the tracking layer keeps per allocator beside its blocks, under the
/// same lock.
#[derive(Default)]
pub(crate) struct Inner {
    /// Keyed by (start address, block) so that two blocks starting at the
    /// same address (a broken allocator) both have an entry.
    ranges: BTreeMap<(usize, usize), Range>,
    /// Streams this allocator serves through the tracking layer, in the
    /// order their tracking objects were made: the live ones, and destroyed
    /// ones while the list is short.
    pub(crate) streams: Vec<usize>,
    /// Destroyed streams it served that are no longer listed.
    pub(crate) streams_destroyed: u64,
}

impl Inner {
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
}

impl Inside<'_> {
    /// The statistics, from the adaptor's exact counters.
    pub(crate) fn stats(&mut self) -> AllocatorStats {
        let c = self.g.counters();
        AllocatorStats {
            allocation: c.allocation,
            allocated_bytes: c.allocated_bytes,
            num_alloc_failures: c.failed_allocs,
        }
    }

    /// alloc on `stream` (of `device`) called from `stack` returned `block`
    /// for `size` bytes. Inlined into the tracking callbacks: this is the
    /// common path of every allocation.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_alloc(
        &mut self,
        allocator: usize,
        block: usize,
        size: usize,
        stream: usize,
        device: i32,
        get_addr: usize,
        stack: StackId,
    ) {
        if block == 0 {
            self.g.count_failure();
            history::alloc_failed(device, size, stream);
            return;
        }
        let meta = TrackMeta {
            device,
            leak_reported: false,
            stack,
            // The clock thread's word, not a clock read (see `clock`).
            time_ns: stamp(),
            address: 0,
            get_addr,
        };
        // A live record of the same block is replaced (and counted as
        // freed by the adaptor): it overlaps itself.
        if let Some(old) = self.g.replace(block, size, stream, meta) {
            self.handed_out_twice(allocator, block, &old.into(), stream, size);
        }
    }

    /// The same live block came back from alloc: it overlaps itself.
    #[cold]
    fn handed_out_twice(
        &mut self,
        allocator: usize,
        block: usize,
        old: &BlockRec,
        stream: usize,
        size: usize,
    ) {
        let fault = Fault::Overlap {
            stream,
            allocator,
            block,
            address: old.address,
            size,
            other_stream: old.stream,
            other_block: block,
            other_address: old.address,
            other_size: old.size,
        };
        record_with_stack(fault, old.stack);
        if old.address != 0 {
            self.ranges.remove(&(old.address, block));
            history::freed(old.device, old.address, old.size, old.stream);
        }
    }

    /// getAddrFromBlock(`block`) returned `address`. The first address of a
    /// block is checked against every other live and recently freed range.
    #[inline]
    pub(crate) fn on_get_addr(&mut self, allocator: usize, block: usize, address: usize) {
        // One probe: the record is read, and its address set when the block
        // is live and the address new and non-NULL.
        let found = self.g.read_and_update(block, |b| {
            (b.is_live() && address != 0 && b.meta.address != address)
                .then_some(TrackMeta { address, ..b.meta })
        });
        let Some(found) = found.filter(Block::is_live) else {
            record(Fault::UnknownBlock { allocator, block });
            return;
        };
        if address == 0 {
            let fault = Fault::NullAddress {
                stream: found.owner,
                allocator,
                block,
                size: found.size,
            };
            record_with_stack(fault, found.meta.stack);
            return;
        }
        let old = found.meta.address;
        if old == address {
            return;
        }
        let mut rec = BlockRec::from(found);
        rec.address = address;
        if old != 0 {
            // The same live block at another address: the timeline sees the
            // old range end.
            history::freed(rec.device, old, rec.size, rec.stream);
            self.ranges.remove(&(old, block));
        }
        // The block's memory begins here (see `history`: why not at alloc).
        history::allocated(rec.device, address, rec.size, rec.stream, rec.stack);
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
        if freed_on != rec.stream && !syncclock::ordered_after(rec.stream, freed_on, generation) {
            let fault = Fault::CrossStreamReuse {
                stream: rec.stream,
                allocator,
                block,
                address: rec.address,
                size: rec.size,
                freed_on,
                freed_block: block,
            };
            record_with_stack(fault, rec.stack);
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
                        let other = self.g.get(range.block).map(BlockRec::from);
                        record_with_stack(
                            Fault::Overlap {
                                stream: rec.stream,
                                allocator,
                                block,
                                address: start,
                                size: rec.size,
                                other_stream: other.map_or(0, |o| o.stream),
                                other_block: range.block,
                                other_address: key.0,
                                other_size: other.map_or(range.end - key.0, |o| o.size),
                            },
                            rec.stack,
                        );
                    }
                    None => {}
                    Some((freed_on, generation)) => {
                        if freed_on != rec.stream
                            && !syncclock::ordered_after(rec.stream, freed_on, generation)
                        {
                            record_with_stack(
                                Fault::CrossStreamReuse {
                                    stream: rec.stream,
                                    allocator,
                                    block,
                                    address: start,
                                    size: rec.size,
                                    freed_on,
                                    freed_block: range.block,
                                },
                                rec.stack,
                            );
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
        self.g.forget_freed(block);
    }

    /// free(`block`) on `stream`. Inlined into the tracking callbacks.
    #[inline]
    pub(crate) fn on_free(&mut self, allocator: usize, block: usize, stream: usize) {
        let generation = syncclock::generation();
        let live = match self.g.free(block, stream, generation) {
            Ok(live) => live,
            Err(refused) => return refused_free(refused, allocator, block, stream),
        };
        let (size, address) = (live.size, live.meta.address);
        if let Some(model) = super::graph::holder(block) {
            graph_held_free(
                allocator,
                block,
                stream,
                size,
                address,
                model,
                live.meta.stack,
            );
        }
        if address != 0 {
            history::freed(live.meta.device, address, size, stream);
            if let Some(range) = self.ranges.get_mut(&(address, block)) {
                range.freed = Some((stream, generation));
            }
        } else {
            history::freed_unaddressed(live.meta.device, size, stream, live.meta.stack);
        }
        if self.g.freed_count() > FREED_KEPT {
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
        let keep_unsynced = self.g.freed_count() / 2 < FREED_KEPT;
        self.g.retain(|_, b| match b.freed {
            Some(f) => keep_unsynced && !syncclock::synchronized_since(f.by, f.generation),
            None => true,
        });
        let mut ranges = std::mem::take(&mut self.ranges);
        ranges.retain(|_, r| r.freed.is_none() || self.g.get(r.block).is_some());
        self.ranges = ranges;
    }

    /// Reports every live block allocated on `stream` (every stream when
    /// `None`) that was not reported yet.
    pub(crate) fn report_leaks(&mut self, allocator: usize, stream: Option<usize>, seen: LeakSeen) {
        let now = now_ns();
        for (block, rec) in self.g.live() {
            // A block a model holds goes back when the model goes, not
            // with its stream's registration.
            let graph_holds = seen != LeakSeen::Exit && super::graph::holder(block).is_some();
            if !rec.meta.leak_reported && !graph_holds && stream.map_or(true, |s| s == rec.owner) {
                self.g.update_meta(block, |m| m.leak_reported = true);
                record_with_stack(
                    Fault::Leak {
                        stream: rec.owner,
                        allocator,
                        block,
                        address: rec.meta.address,
                        size: rec.size,
                        age_ns: now.saturating_sub(rec.meta.time_ns),
                        seen,
                    },
                    rec.meta.stack,
                );
            }
        }
    }

    /// Live blocks, ordered by address then block.
    pub(crate) fn live_blocks(&self) -> Vec<(usize, BlockRec)> {
        let mut live: Vec<(usize, BlockRec)> = self
            .g
            .live()
            .into_iter()
            .map(|(k, b)| (k, BlockRec::from(b)))
            .collect();
        live.sort_by_key(|(k, b)| (b.address, *k));
        live
    }
}

/// A free the adaptor refused: reported with what is known.
#[cold]
fn refused_free(refused: Refused<TrackMeta>, allocator: usize, block: usize, stream: usize) {
    match refused {
        Refused::Unknown => record(Fault::UnknownFree {
            stream,
            allocator,
            block,
        }),
        Refused::DoubleFree(first) => record_with_stack(
            Fault::DoubleFree {
                stream,
                allocator,
                block,
                size: first.size,
                first_freed_on: first.freed.map_or(0, |f| f.by),
            },
            first.meta.stack,
        ),
    }
}

/// A free of `block` while model `model` holds it: reported with the
/// stack that allocated it, once (the model's own free later is then a
/// double free).
#[cold]
#[inline(never)]
fn graph_held_free(
    allocator: usize,
    block: usize,
    stream: usize,
    size: usize,
    address: usize,
    model: usize,
    stack: StackId,
) {
    super::graph::released(block);
    record_with_stack(
        Fault::FreedWhileGraphHolds {
            stream,
            allocator,
            block,
            address,
            size,
            model,
        },
        stack,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events;
    use crate::owner::AllocState;

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
                | Fault::FreedWhileGraphHolds { allocator: a, .. }
                | Fault::Leak { allocator: a, .. } => a == allocator,
                Fault::UseAfterFreeAsync { .. } | Fault::FreeAsyncWhileUsed { .. } => false,
            })
            .collect()
    }

    #[test]
    fn a_clean_alloc_free_cycle_reports_nothing_and_counts() {
        let a = 0xA110_0001;
        let state = AllocState::new(a);
        let mut g = state.enter(0x10).unwrap();
        for _ in 0..3 {
            g.on_alloc(a, 0x1000, 64, 0x10, 0, 1, 0);
            g.on_get_addr(a, 0x1000, 0x9000);
            g.on_free(a, 0x1000, 0x10);
        }
        assert_eq!(g.stats().allocation.allocated, 3);
        assert_eq!(g.stats().allocation.current, 0);
        assert_eq!(g.stats().allocated_bytes.peak, 64);
        assert!(faults_of(a).is_empty(), "{:?}", faults_of(a));
    }

    #[test]
    fn double_free_and_unknown_free_are_told_apart() {
        let a = 0xA110_0002;
        let state = AllocState::new(a);
        let mut g = state.enter(0x10).unwrap();
        g.on_alloc(a, 0x1000, 64, 0x10, 0, 1, 0);
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
        assert_eq!(
            g.stats().allocation.freed,
            1,
            "faulty frees are not counted"
        );
    }

    #[test]
    fn overlapping_live_ranges_are_reported_but_adjacent_ones_are_not() {
        let a = 0xA110_0003;
        let state = AllocState::new(a);
        let mut g = state.enter(0x10).unwrap();
        g.on_alloc(a, 0x1, 100, 0x10, 0, 1, 0);
        g.on_get_addr(a, 0x1, 0x1000);
        g.on_alloc(a, 0x2, 100, 0x10, 0, 1, 0);
        g.on_get_addr(a, 0x2, 0x1064); // adjacent: 0x1000 + 100
        g.on_alloc(a, 0x3, 50, 0x10, 0, 1, 0);
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
        g.on_alloc(a, 0x1, 256, s1, 0, 1, 0);
        g.on_get_addr(a, 0x1, 0x4000);
        g.on_free(a, 0x1, s1);
        // Same stream: stream order makes the reuse safe.
        g.on_alloc(a, 0x1, 256, s1, 0, 1, 0);
        g.on_get_addr(a, 0x1, 0x4000);
        g.on_free(a, 0x1, s1);
        // Another stream, no synchronize: a fault, with the new stream and size.
        g.on_alloc(a, 0x2, 128, s2, 0, 1, 0);
        g.on_get_addr(a, 0x2, 0x4000);
        g.on_free(a, 0x2, s2);
        syncclock::stream_synchronized(s2);
        g.on_alloc(a, 0x3, 128, s1, 0, 1, 0);
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
        g.on_alloc(a, 0x1, 32, 0x10, 0, 1, 0);
        g.on_get_addr(a, 0x1, 0);
        g.on_alloc(a, 0x2, 48, 0x20, 0, 1, 0);
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
                let mut g = state.enter(0x20).unwrap();
                g.stats().allocation.current
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
