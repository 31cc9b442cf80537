//! Lending blocks to a thread's cache and taking them back, under the
//! shard's lock. A lent block stays in its segment (state `Lent`: never
//! merged, split or released) but leaves the live tree, and its share of
//! `current` moves from the shard to the cache, which keeps every pool-wide
//! sum (and so the peak) unchanged.

use super::counters::Part;
use super::*;

/// The statistics a thread's cache changes on its own.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CacheStats {
    pub allocation: [CachePart; 3],
    pub allocated_bytes: [CachePart; 3],
    pub requested_bytes: [CachePart; 3],
    pub inactive_split: [CachePart; 3],
    pub inactive_split_bytes: [CachePart; 3],
    pub pairs: Pairs,
}

/// Blocks a cache handed out again and parked back, counted once per pair:
/// a pair adds the same to `allocated` and `freed` and leaves `current` and
/// the headroom as they were, so only the totals need it, when drained.
/// Indexed by statistics index (1 or 2; the sum is the pool-wide index 0).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Pairs {
    pub count: [i64; 3],
    pub bytes: [i64; 3],
    pub requested: [i64; 3],
    /// Of `count` and `bytes`, the blocks that share their segment
    /// (counted in `inactive_split` while parked).
    pub split_count: [i64; 3],
    pub split_bytes: [i64; 3],
}

impl Pairs {
    /// Adds the pairs to `shard`'s totals.
    fn fold_into(&self, shard: &mut ShardStats) {
        // Allocated and freed alike: `current` stays, and the freed total
        // follows from `allocated` (engine/counters.rs).
        let both = |p: &mut Part, amount: i64| {
            p.allocated += amount;
        };
        for k in 1..3 {
            for i in [STAT_ALL, k] {
                both(&mut shard.allocation[i], self.count[k]);
                both(&mut shard.allocated_bytes[i], self.bytes[k]);
                both(&mut shard.requested_bytes[i], self.requested[k]);
                both(&mut shard.inactive_split[i], self.split_count[k]);
                both(&mut shard.inactive_split_bytes[i], self.split_bytes[k]);
            }
        }
    }
}

/// A cache's part of one statistic, so that each fast-path change writes one
/// field: `current` is `moved + allocated - freed`, the headroom `given`
/// minus the same difference.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CachePart {
    pub moved: i64,
    pub allocated: i64,
    pub freed: i64,
    pub given: i64,
}

impl CacheStats {
    /// Each statistic of the cache beside the shard's same statistic, in
    /// field order.
    fn paired_with<'a>(
        &'a mut self,
        shard: &'a mut ShardStats,
    ) -> [(&'a mut [CachePart; 3], &'a mut [Part; 3]); 5] {
        [
            (&mut self.allocation, &mut shard.allocation),
            (&mut self.allocated_bytes, &mut shard.allocated_bytes),
            (&mut self.requested_bytes, &mut shard.requested_bytes),
            (&mut self.inactive_split, &mut shard.inactive_split),
            (
                &mut self.inactive_split_bytes,
                &mut shard.inactive_split_bytes,
            ),
        ]
    }
}

impl CachePart {
    #[inline]
    pub(crate) fn increase(&mut self, amount: i64) {
        self.allocated += amount;
    }

    #[inline]
    pub(crate) fn decrease(&mut self, amount: i64) {
        self.freed += amount;
    }

    /// True when `current` may rise by `amount` within the cache's headroom.
    #[inline]
    pub(crate) fn room(&self, amount: i64) -> bool {
        self.headroom() >= amount
    }

    #[inline]
    fn current(&self) -> i64 {
        self.moved + self.allocated - self.freed
    }

    #[inline]
    fn headroom(&self) -> i64 {
        self.given - self.allocated + self.freed
    }
}

/// One block kept by a thread's cache.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Loan {
    pub addr: usize,
    pub size: usize,
    pub idx: u32,
    /// Statistics index of the block's kind (1 or 2).
    pub kind: u8,
    /// Counted in `inactive_split` while parked (it shares its segment).
    pub split: bool,
    /// Handed out: the bytes asked for. Parked: the request size rounded,
    /// which the next request must round to (the bin's key in a shard).
    pub size_key: usize,
}

/// Moves `amount` of `current` from a shard's part to a cache's.
#[inline]
fn shift_in(from: &mut Part, to: &mut CachePart, amount: i64) {
    from.move_out(amount);
    to.moved += amount;
}

/// Moves `amount` of `current` from a cache's part back to a shard's.
#[inline]
fn shift_out(from: &mut CachePart, to: &mut Part, amount: i64) {
    from.moved -= amount;
    to.move_out(-amount);
}

/// Gives `to` up to `want` headroom from `from`'s.
#[inline]
fn give_headroom(from: &mut Part, to: &mut CachePart, want: i64) {
    let give = (want - to.headroom()).clamp(0, from.headroom().max(0));
    from.add_headroom(-give);
    to.given += give;
}

impl Core {
    /// Lends the block just handed out at `addr` to a cache, with its statistics
    /// and the headroom its parking needs. `admit` says from the block's size
    /// whether the cache takes it (`None`: no) and whether it joins a batch of
    /// blocks of that size. `None`: an oversize block, or one not admitted.
    pub(crate) fn lend(
        &mut self,
        addr: usize,
        to: &mut CacheStats,
        admit: impl FnOnce(usize) -> Option<bool>,
    ) -> Option<Loan> {
        let idx = self.live_at(addr)?;
        let b = self.blocks[idx];
        if b.size >= self.config.max_split_size {
            return None;
        }
        let batch = admit(b.size)?;
        self.unset_live(idx);
        self.blocks[idx].state = State::Lent;
        let (size, req) = (b.size as i64, b.requested as i64);
        let split = b.is_split();
        let s = &mut self.stats;
        for i in [STAT_ALL, b.kind.index()] {
            shift_in(&mut s.allocation[i], &mut to.allocation[i], 1);
            shift_in(&mut s.allocated_bytes[i], &mut to.allocated_bytes[i], size);
            shift_in(&mut s.requested_bytes[i], &mut to.requested_bytes[i], req);
            if split {
                // In a batch, one block's more, not up to one block: the
                // batch lent from the shard then parks without the lock.
                let (n, bytes) = (&mut to.inactive_split[i], &mut to.inactive_split_bytes[i]);
                let (base_n, base_bytes) = if batch {
                    (n.headroom(), bytes.headroom())
                } else {
                    (0, 0)
                };
                give_headroom(&mut s.inactive_split[i], n, base_n + 1);
                give_headroom(&mut s.inactive_split_bytes[i], bytes, base_bytes + size);
            }
        }
        Some(Loan {
            addr,
            idx,
            size: b.size,
            kind: b.kind.index() as u8,
            split,
            size_key: b.requested,
        })
    }

    /// Takes back a block the cache handed out: it is live here again.
    pub(crate) fn take_back_handed_out(&mut self, loan: Loan, from: &mut CacheStats) {
        let b = &mut self.blocks[loan.idx];
        debug_assert!(b.state == State::Lent && b.addr == loan.addr);
        b.state = State::Allocated;
        b.requested = loan.size_key;
        self.set_live(loan.idx);
        let (size, req) = (loan.size as i64, loan.size_key as i64);
        let s = &mut self.stats;
        for i in [STAT_ALL, loan.kind as usize] {
            shift_out(&mut from.allocation[i], &mut s.allocation[i], 1);
            shift_out(
                &mut from.allocated_bytes[i],
                &mut s.allocated_bytes[i],
                size,
            );
            shift_out(&mut from.requested_bytes[i], &mut s.requested_bytes[i], req);
        }
    }

    /// Takes back a block parked in the cache: it goes to its bin here.
    /// `freed_at`: the ordering generation of the cache's latest park, no
    /// earlier than this block's free (`Segment::freed_at`).
    pub(crate) fn take_back_parked(&mut self, loan: Loan, from: &mut CacheStats, freed_at: u64) {
        let b = &mut self.blocks[loan.idx];
        debug_assert!(b.state == State::Lent && b.addr == loan.addr);
        b.state = State::Cached;
        b.requested = 0;
        b.counted_split = loan.split;
        let stream = b.stream;
        let segment = &mut self.segments[b.segment];
        segment.freed_at = segment.freed_at.max(freed_at);
        if loan.split {
            let s = &mut self.stats;
            for i in [STAT_ALL, loan.kind as usize] {
                shift_out(&mut from.inactive_split[i], &mut s.inactive_split[i], 1);
                let size = loan.size as i64;
                shift_out(
                    &mut from.inactive_split_bytes[i],
                    &mut s.inactive_split_bytes[i],
                    size,
                );
            }
        }
        self.bins
            .push(&mut self.blocks, loan.idx, stream, loan.size_key);
    }

    /// Gives a cache the headroom it lacks to hand out a parked block of
    /// `size` bytes (statistics index `kind`) for a request of `requested`
    /// bytes, from this shard's. True when it now has all of it.
    pub(crate) fn top_up(
        &mut self,
        to: &mut CacheStats,
        kind: usize,
        size: usize,
        requested: usize,
    ) -> bool {
        let s = &mut self.stats;
        let mut enough = true;
        for i in [STAT_ALL, kind] {
            for (from, to, want) in [
                (&mut s.allocation[i], &mut to.allocation[i], 1),
                (
                    &mut s.allocated_bytes[i],
                    &mut to.allocated_bytes[i],
                    size as i64,
                ),
                (
                    &mut s.requested_bytes[i],
                    &mut to.requested_bytes[i],
                    requested as i64,
                ),
            ] {
                give_headroom(from, to, want);
                enough &= to.room(want);
            }
        }
        enough
    }

    /// Gives a cache the `inactive_split` headroom it lacks to park a split
    /// block of `size` bytes (statistics index `kind`). True when it now has
    /// all of it.
    pub(crate) fn top_up_split(&mut self, to: &mut CacheStats, kind: usize, size: usize) -> bool {
        let s = &mut self.stats;
        let mut enough = true;
        for i in [STAT_ALL, kind] {
            for (from, to, want) in [
                (&mut s.inactive_split[i], &mut to.inactive_split[i], 1),
                (
                    &mut s.inactive_split_bytes[i],
                    &mut to.inactive_split_bytes[i],
                    size as i64,
                ),
            ] {
                give_headroom(from, to, want);
                enough &= to.room(want);
            }
        }
        enough
    }

    /// Moves a cache's headroom beyond `keep` (what its parked and handed-out
    /// blocks may still need, in the order of [`CacheStats`]' fields) back to
    /// this shard. True if any moved.
    pub(crate) fn reclaim_headroom(&mut self, from: &mut CacheStats, keep: &[[i64; 3]; 5]) -> bool {
        let pairs = from.paired_with(&mut self.stats);
        let mut moved = false;
        for ((from, to), keep) in pairs.into_iter().zip(keep) {
            for ((f, t), &keep) in from.iter_mut().zip(to.iter_mut()).zip(keep) {
                let h = (f.headroom() - keep).max(0);
                f.given -= h;
                t.add_headroom(h);
                moved |= h > 0;
            }
        }
        moved
    }

    /// Adds what is left of a drained cache's statistics (its totals and
    /// headroom; its `current` is zero once every block is taken back).
    pub(crate) fn absorb(&mut self, from: &mut CacheStats) {
        std::mem::take(&mut from.pairs).fold_into(&mut self.stats);
        let pairs = from.paired_with(&mut self.stats);
        for (from, to) in pairs {
            for (f, t) in from.iter_mut().zip(to.iter_mut()) {
                debug_assert_eq!(f.current(), 0, "a drained cache still counts blocks");
                t.move_out(-f.current());
                t.allocated += f.allocated;
                t.add_headroom(f.headroom());
                *f = CachePart::default();
            }
        }
    }
}
