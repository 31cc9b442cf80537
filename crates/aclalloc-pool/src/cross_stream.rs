//! A request that nothing of its own stream's cache serves may take a
//! wholly free segment another stream left, once it is ordered after that
//! stream's last free in it (an event wait, or a synchronize: see
//! `engine/adopt.rs`), before the pool grows. The segment moves to the
//! request's shard and stream whole; reserved memory stays as it was.

use super::engine::kind_of;
use super::sharded::All;
use crate::registry::order;

impl All<'_> {
    /// Serves `size` bytes (`rounded`) for `stream` in shard `s` from a
    /// segment another stream freed and `stream` is ordered after.
    pub(super) fn take_ordered(
        &mut self,
        s: usize,
        stream: usize,
        size: usize,
        rounded: usize,
    ) -> Option<usize> {
        // Without an ordering fact that could apply, nothing is taken (the
        // common case: a lookup or two, no scan of the segments).
        let reuse = self.global.cross_stream_reuse;
        let by_wait = reuse.follows_waits() && order::has_waited(stream);
        let by_sync = reuse.after_synchronize && order::synchronized_any();
        if !by_wait && !by_sync {
            return None;
        }
        let reuse = crate::CrossStreamReuse {
            after_event_wait: by_wait,
            after_synchronize: by_sync,
            insert_wait: None,
        };
        let kind = kind_of(rounded);
        // The smallest fitting segment of any shard.
        let (_, t, seg) = self
            .shards
            .iter_mut()
            .enumerate()
            .filter_map(|(t, core)| {
                let (bytes, seg) = core.ordered_segment(kind, rounded, stream, reuse)?;
                Some((bytes, t, seg))
            })
            .min()?;
        let (addr, bytes, kind) = self.shards[t].give_segment(seg);
        let idx = self.shards[s].adopt_segment(addr, bytes, kind, stream);
        Some(self.shards[s].finish(idx, rounded, size))
    }
}

/// What an allocation that may make its stream wait does under the locks.
pub(super) enum BeforeGrowing {
    /// Served from the cache, or a segment the stream is ordered after.
    Got(usize),
    /// Nothing cached serves it but a wholly free segment this stream left:
    /// wait for it, then allocate again.
    WaitFor(usize),
    /// Nothing to wait for: the pool grows.
    Grow,
}

impl All<'_> {
    /// The cached paths of [`All::malloc`], and if they miss, the stream
    /// whose wholly free segment would serve the request (the smallest),
    /// for the pool's `insert_wait` to order `stream` after.
    pub(super) fn before_growing(
        &mut self,
        s: usize,
        stream: usize,
        size: usize,
    ) -> crate::Result<BeforeGrowing> {
        if self.global.closed {
            return Err(crate::engine::CLOSED);
        }
        let rounded = crate::engine::round_size(size, &self.global.config.roundup_power2_divisions);
        let Some(rounded) = rounded.filter(|_| !self.global.config.expandable_segments) else {
            return Ok(BeforeGrowing::Grow); // `malloc` says why, or maps pages
        };
        if let Some(addr) = self.take_without_growing(s, stream, size, rounded) {
            return Ok(BeforeGrowing::Got(addr));
        }
        let kind = kind_of(rounded);
        let source = self
            .shards
            .iter_mut()
            .filter_map(|core| core.unordered_segment_source(kind, rounded, stream))
            .min()
            .map(|(_, source)| source);
        Ok(source.map_or(BeforeGrowing::Grow, BeforeGrowing::WaitFor))
    }
}

#[cfg(test)]
mod tests {
    use crate::registry::order;
    use crate::{HostMemory, Pool, PoolConfig, STAT_ALL};

    fn pool() -> Pool {
        Pool::new(PoolConfig::default(), HostMemory::new(1 << 30)).unwrap()
    }

    /// `waiter` waits on an event recorded on `source` now.
    fn wait(waiter: usize, source: usize) {
        order::stream_waited(waiter, source, order::event_recorded());
    }

    /// What the pool counts that a move must leave as it was.
    fn counts(pool: &Pool) -> (i64, i64, i64) {
        let s = pool.stats();
        (
            s.reserved_bytes[STAT_ALL].current,
            s.segment[STAT_ALL].current,
            s.num_device_alloc,
        )
    }

    #[test]
    fn a_wait_after_the_free_hands_the_segment_to_the_waiter() {
        let (a, b) = (0x7a01_0000, 0x7a01_0100);
        let pool = pool();
        let x = pool.malloc_on(a, 1 << 20).unwrap();
        pool.free(x.get()).unwrap();
        let before = counts(&pool);
        wait(b, a);
        let y = pool.malloc_on(b, 1 << 20).unwrap();
        assert_eq!(y, x, "the block a freed");
        assert_eq!(counts(&pool), before, "no new segment, reserved unchanged");
        let segs = pool.segments();
        assert_eq!(segs.len(), 1);
        assert_eq!(segs[0].stream, b, "the snapshot shows the new stream");
        assert_eq!(pool.stats().allocated_bytes[STAT_ALL].current, 1 << 20);
        pool.check_invariants().unwrap();
        // The segment is b's now: freed on b, reused on b; a grows.
        pool.free(y.get()).unwrap();
        assert_eq!(pool.malloc_on(b, 1 << 20).unwrap(), x);
        let z = pool.malloc_on(a, 1 << 20).unwrap();
        assert_ne!(z, x);
        assert_eq!(pool.stats().num_device_alloc, before.2 + 1);
        pool.check_invariants().unwrap();
    }

    #[test]
    fn each_ordering_hands_the_segment_over_only_when_the_pool_counts_it() {
        for (i, (after_event_wait, after_synchronize)) in
            [(true, true), (true, false), (false, true), (false, false)]
                .into_iter()
                .enumerate()
        {
            let reuse = crate::CrossStreamReuse {
                after_event_wait,
                after_synchronize,
                insert_wait: None,
            };
            // Stream keys of their own: the order is process-wide.
            let base = 0x7a05_0000 + i * 0x1000;
            let (a, b, c, d) = (base, base + 0x100, base + 0x200, base + 0x300);
            let pool = pool();
            pool.set_cross_stream_reuse(reuse);
            // a's free, then a synchronize of a: b may take it.
            let x = pool.malloc_on(a, 1 << 20).unwrap();
            pool.free(x.get()).unwrap();
            order::stream_synchronized(a);
            let y = pool.malloc_on(b, 1 << 20).unwrap();
            assert_eq!(y == x, after_synchronize, "{reuse:?}: after a synchronize");
            // c's free, then d waits on a record of c: d may take it.
            let z = pool.malloc_on(c, 1 << 20).unwrap();
            pool.free(z.get()).unwrap();
            wait(d, c);
            let w = pool.malloc_on(d, 1 << 20).unwrap();
            assert_eq!(w == z, after_event_wait, "{reuse:?}: after an event wait");
            pool.check_invariants().unwrap();
        }
    }

    /// The waits `insert_wait` was asked for, as (waiter, source).
    static INSERTED: std::sync::Mutex<Vec<(usize, usize)>> = std::sync::Mutex::new(Vec::new());

    fn insert_wait(waiter: usize, source: usize) -> bool {
        INSERTED.lock().unwrap().push((waiter, source));
        wait(waiter, source);
        true
    }

    #[test]
    fn with_insert_wait_the_pool_orders_the_stream_itself_instead_of_growing() {
        let (a, b, c) = (0x7a06_0000, 0x7a06_0100, 0x7a06_0200);
        let pool = pool();
        pool.set_cross_stream_reuse(crate::CrossStreamReuse {
            after_event_wait: false,
            after_synchronize: false,
            insert_wait: Some(insert_wait),
        });
        let mid = pool.malloc_on(a, 9 << 20).unwrap();
        let large = pool.malloc_on(a, 30 << 20).unwrap();
        // Served from b's own cache: nothing to wait for.
        let own = pool.malloc_on(b, 4096).unwrap();
        pool.free(own.get()).unwrap();
        assert_eq!(pool.malloc_on(b, 4096).unwrap(), own);
        assert!(INSERTED.lock().unwrap().iter().all(|&(w, _)| w != b));
        pool.free(mid.get()).unwrap();
        pool.free(large.get()).unwrap();
        let before = counts(&pool);
        // b needs 9 MiB: a's smallest wholly free segment that serves it.
        let y = pool.malloc_on(b, 9 << 20).unwrap();
        assert_eq!(y, mid, "a's free 20 MiB segment, after a wait");
        assert_eq!(INSERTED.lock().unwrap().last(), Some(&(b, a)));
        assert_eq!(counts(&pool), before, "no new segment");
        // A request nothing free serves grows, without asking for a wait.
        let waits = INSERTED.lock().unwrap().len();
        let z = pool.malloc_on(c, 64 << 20).unwrap();
        assert_ne!(z, large);
        assert_eq!(INSERTED.lock().unwrap().len(), waits);
        pool.check_invariants().unwrap();
    }

    #[test]
    fn without_a_wait_or_with_a_record_before_the_free_nothing_moves() {
        let (a, b, c) = (0x7a02_0000, 0x7a02_0100, 0x7a02_0200);
        let pool = pool();
        let x = pool.malloc_on(a, 4096).unwrap();
        // c waits on a record of a made while x is still allocated.
        wait(c, a);
        pool.free(x.get()).unwrap();
        let (reserved, ..) = counts(&pool);
        let on_b = pool.malloc_on(b, 4096).unwrap();
        assert_ne!(on_b, x, "b did not wait");
        let on_c = pool.malloc_on(c, 4096).unwrap();
        assert_ne!(on_c, x, "c's wait is on a record made before the free");
        assert_eq!(counts(&pool).0, reserved + 2 * (2 << 20), "both grew");
        // A wait of a on b orders a after b, not b after a.
        wait(a, b);
        assert_ne!(pool.malloc_on(b, 4096).unwrap(), x);
        assert_eq!(pool.segments().iter().filter(|s| s.stream == a).count(), 1);
        pool.check_invariants().unwrap();
    }

    #[test]
    fn a_block_parked_in_a_threads_cache_carries_its_free() {
        let (a, b) = (0x7a03_0000, 0x7a03_0100);
        let pool = pool();
        let x = pool.malloc_on(a, 4096).unwrap();
        pool.free(x.get()).unwrap();
        // The second round is served from the shard and lent to this thread's cache.
        assert_eq!(pool.malloc_on(a, 4096).unwrap(), x);
        pool.free(x.get()).unwrap();
        let before = counts(&pool);
        wait(b, a);
        assert_eq!(pool.malloc_on(b, 4096).unwrap(), x);
        assert_eq!(counts(&pool), before);
        pool.check_invariants().unwrap();

        // Parked again, on b, after the record a later wait stands for: stays.
        let (c, d) = (0x7a03_0200, 0x7a03_0300);
        let y = pool.malloc_on(c, 4096).unwrap();
        pool.free(y.get()).unwrap();
        assert_eq!(pool.malloc_on(c, 4096).unwrap(), y);
        let token = order::event_recorded();
        pool.free(y.get()).unwrap();
        order::stream_waited(d, c, token);
        assert_ne!(
            pool.malloc_on(d, 4096).unwrap(),
            y,
            "recorded before the free"
        );
        pool.check_invariants().unwrap();
    }

    #[test]
    fn a_segment_with_a_block_still_in_use_stays() {
        let (a, b) = (0x7a04_0000, 0x7a04_0100);
        let pool = pool();
        let kept = pool.malloc_on(a, 4096).unwrap();
        let x = pool.malloc_on(a, 4096).unwrap();
        pool.free(x.get()).unwrap();
        wait(b, a);
        let y = pool.malloc_on(b, 4096).unwrap();
        assert_ne!(y, x, "the segment still serves a");
        assert_eq!(pool.segments().len(), 2);
        pool.free(kept.get()).unwrap();
        pool.check_invariants().unwrap();
    }

    #[test]
    fn the_smallest_fitting_segment_moves_and_peaks_stay_exact() {
        let (a, b) = (0x7a05_0000, 0x7a05_0100);
        let pool = pool();
        let small = pool.malloc_on(a, 4096).unwrap();
        let large = pool.malloc_on(a, 4 << 20).unwrap();
        pool.free(small.get()).unwrap();
        pool.free(large.get()).unwrap();
        let peak = pool.stats().reserved_bytes[STAT_ALL].peak;
        wait(b, a);
        assert_eq!(pool.malloc_on(b, 3 << 20).unwrap(), large);
        assert_eq!(pool.malloc_on(b, 8192).unwrap(), small);
        let s = pool.stats();
        assert_eq!(s.reserved_bytes[STAT_ALL].peak, peak);
        assert_eq!(s.reserved_bytes[STAT_ALL].current, peak);
        assert!(pool.segments().iter().all(|s| s.stream == b));
        pool.check_invariants().unwrap();
    }
}
