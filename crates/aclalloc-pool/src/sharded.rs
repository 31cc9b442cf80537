//! The pool-wide path: the pool-wide lock and every shard's lock held at
//! once, for what spans shards (growing from the device, releasing, reading,
//! and settling a statistic that rose above its peak).

use super::block::Kind;
use super::cross_stream::BeforeGrowing;
use super::engine::{kind_of, round_size, round_up, segment_size, Take};
use super::virtual_memory::VirtualMemory;
use super::*;
use crate::base::biased::BiasedGuard;
use std::mem::ManuallyDrop;

/// The pool-wide lock and every shard's, in that order; device memory given
/// back meanwhile is freed once they are released ([`DeferredFree`]).
pub(super) struct All<'a> {
    pub(super) global: ManuallyDrop<MutexGuard<'a, Global>>,
    pub(super) shards: ManuallyDrop<[BiasedGuard<'a, Core>; SHARDS]>,
    device: DeferredFree<'a>,
}

/// The device under the pool's locks: frees wait until the locks are
/// released, since `aclrtFree` may wait for a worker needing these locks.
pub(super) struct DeferredFree<'a> {
    pub(super) device: &'a dyn DeviceMemory,
    pending: &'a Mutex<Vec<(NonZeroUsize, usize)>>,
}

impl DeferredFree<'_> {
    fn has_pending(&self) -> bool {
        !self.pending.lock().is_empty()
    }
}

impl DeviceMemory for DeferredFree<'_> {
    fn malloc(&self, size: usize) -> Option<NonZeroUsize> {
        self.device.malloc(size)
    }
    fn free(&self, addr: NonZeroUsize, size: usize) {
        self.pending.lock().push((addr, size));
    }
    fn capacity(&self) -> usize {
        self.device.capacity()
    }
    fn virtual_memory(&self) -> Option<&dyn super::virtual_memory::VirtualMemory> {
        self.device.virtual_memory()
    }
}

impl Drop for All<'_> {
    fn drop(&mut self) {
        // SAFETY: the guards are dropped here, once, and not used again.
        unsafe {
            ManuallyDrop::drop(&mut self.shards);
            ManuallyDrop::drop(&mut self.global);
        }
        let released = std::mem::take(&mut *self.device.pending.lock());
        for (addr, size) in released {
            self.device.device.free(addr, size);
        }
    }
}

impl Pool {
    pub(super) fn lock_all(&self) -> All<'_> {
        let mut all = self.lock_shards();
        // Everything pool-wide runs on the state a pool without thread
        // caches would have (crates/aclalloc-pool/src/thread_cache.rs).
        self.drain_caches(&mut all.shards[..], super::Retire::None);
        all
    }

    /// Every lock, the thread caches left as they are.
    fn lock_shards(&self) -> All<'_> {
        All {
            global: ManuallyDrop::new(self.global.lock()),
            shards: ManuallyDrop::new(std::array::from_fn(|i| self.shards[i].0.lock())),
            device: DeferredFree {
                device: &*self.device,
                pending: &self.pending_frees,
            },
        }
    }

    /// Runs `f`, an operation of shard `shard`'s own path (which runs beside
    /// the thread caches) that may leave its headroom short, with every
    /// lock, then settles it. This thread's caches give their blocks back
    /// first, as a drain would (they can merge; this thread owns them, so no
    /// fence), and when the other shards' headroom covers the shortfall, the
    /// other threads' caches stay as they are; only a statistic that may
    /// pass its peak drains them, since their headroom counts before the
    /// peak rises. A drain stops every cache's owner (`fence::heavy`), and
    /// two threads on shards of their own pass headroom back and forth here
    /// whenever their live sets rise in turns.
    pub(super) fn exclusive_in_shard<R>(&self, shard: usize, f: impl FnOnce(&mut Core) -> R) -> R {
        let mut all = self.lock_shards();
        for (t, core) in all.shards.iter_mut().enumerate() {
            self.reclaim_from_own_caches(core, t, super::Reclaim::Blocks);
        }
        let r = f(&mut all.shards[shard]);
        if !all.settle_from_shards(shard) {
            self.drain_caches(&mut all.shards[..], super::Retire::None);
            all.settle(shard);
        }
        r
    }

    /// Runs `f` with everything locked, then settles what shard `settle` raised
    /// above its headroom (the other shards only lower theirs).
    pub(super) fn exclusive<R>(&self, settle: Option<usize>, f: impl FnOnce(&mut All) -> R) -> R {
        let mut all = self.lock_all();
        let r = f(&mut all);
        if let Some(shard) = settle {
            all.settle(shard);
        }
        debug_assert!(all.check_headroom().is_ok(), "{:?}", all.check_headroom());
        r
    }

    #[cold]
    #[inline(never)]
    pub(super) fn malloc_slow(&self, shard: usize, stream: usize, size: usize) -> Result<usize> {
        let insert_wait = self.global.lock().cross_stream_reuse.insert_wait;
        if let Some(insert_wait) = insert_wait.filter(|_| stream != 0) {
            // The wait is queued with no lock held: it runs the runtime's
            // stream code, which may call back into pools.
            match self.exclusive(Some(shard), |ex| ex.before_growing(shard, stream, size))? {
                BeforeGrowing::Got(addr) => return Ok(addr),
                BeforeGrowing::WaitFor(source) => {
                    insert_wait(stream, source);
                }
                BeforeGrowing::Grow => {}
            }
        }
        self.allocate_exclusive(shard, |ex, retry| ex.malloc(shard, stream, size, retry))
    }

    /// Runs an allocation under every lock, and once more when it released
    /// cached segments (`Ok(None)`), whose memory is back once the locks drop.
    pub(super) fn allocate_exclusive(
        &self,
        shard: usize,
        attempt: impl Fn(&mut All, bool) -> Result<Option<usize>>,
    ) -> Result<usize> {
        if let Some(addr) = self.exclusive(Some(shard), |ex| attempt(ex, true))? {
            return Ok(addr);
        }
        // An expandable pool unmaps on the retry: wait for queued work with no lock held.
        self.synchronize_for_unmap();
        self.exclusive(Some(shard), |ex| attempt(ex, false))?
            .ok_or(Error::Internal {
                reason: "a pool allocation asked to be retried twice",
            })
    }
}

impl All<'_> {
    /// Covers what shard `s` took beyond its headroom from the other shards'
    /// headroom if theirs covers every statistic it is short of; false, and
    /// nothing moved, if not.
    fn settle_from_shards(&mut self, s: usize) -> bool {
        let mut deficits = [0i64; PARTS];
        for (j, p) in self.shards[s].stats.parts_mut().into_iter().enumerate() {
            deficits[j] = (-p.headroom()).max(0);
        }
        let mut spare = [0i64; PARTS];
        for (t, core) in self.shards.iter_mut().enumerate() {
            if t != s {
                for (j, p) in core.stats.parts_mut().into_iter().enumerate() {
                    spare[j] += p.headroom();
                }
            }
        }
        if deficits.iter().zip(spare).any(|(&d, spare)| d > spare) {
            return false;
        }
        self.settle(s);
        true
    }

    /// Covers what shard `s` took beyond its headroom: from the other shards'
    /// headroom, then by raising the peak (then the exact pool-wide maximum).
    fn settle(&mut self, s: usize) {
        let mut taken = [0i64; PARTS];
        for (j, p) in self.shards[s].stats.parts_mut().into_iter().enumerate() {
            let deficit = (-p.headroom()).max(0);
            taken[j] = deficit;
            p.add_headroom(deficit);
        }
        for (t, core) in self.shards.iter_mut().enumerate() {
            if t == s {
                continue;
            }
            for (j, p) in core.stats.parts_mut().into_iter().enumerate() {
                let give = p.headroom().min(taken[j]);
                p.add_headroom(-give);
                taken[j] -= give;
            }
        }
        for (peak, rise) in self.global.peaks.iter_mut().zip(taken) {
            *peak += rise;
        }
    }

    /// The accounting behind exact peaks holds: no headroom is negative, and each peak is the shards' currents plus headrooms.
    pub(super) fn check_headroom(&mut self) -> std::result::Result<(), String> {
        let mut sums = [0i64; PARTS];
        for (t, core) in self.shards.iter_mut().enumerate() {
            for (j, p) in core.stats.parts_mut().into_iter().enumerate() {
                if p.headroom() < 0 {
                    return Err(format!(
                        "shard {t} statistic {j}: headroom {}",
                        p.headroom()
                    ));
                }
                sums[j] += p.current + p.headroom();
            }
        }
        if sums != self.global.peaks {
            return Err(format!(
                "peaks {:?} are not currents plus headrooms {sums:?}",
                self.global.peaks
            ));
        }
        Ok(())
    }

    fn reserved(&self) -> usize {
        self.shards.iter().map(|c| c.reserved()).sum()
    }

    fn allocated(&self) -> usize {
        self.shards
            .iter()
            .map(|c| c.stats.allocated_bytes[STAT_ALL].current as usize)
            .sum()
    }

    pub(super) fn live_blocks(&self) -> usize {
        self.shards.iter().map(|c| c.live_blocks()).sum()
    }

    /// An allocation for `stream` in shard `s`, growing the pool if nothing
    /// cached fits. `Ok(None)` (only with `may_retry`): segments were released;
    /// retry once the locks are dropped.
    pub(super) fn malloc(
        &mut self,
        s: usize,
        stream: usize,
        size: usize,
        may_retry: bool,
    ) -> Result<Option<usize>> {
        if self.global.closed {
            return Err(CLOSED);
        }
        let Some(rounded) = round_size(size, &self.global.config.roundup_power2_divisions) else {
            return Err(self.fail(s, size, stream, "the size is too large"));
        };
        if self.global.config.expandable_segments {
            if let Some(vm) = self.device.device.virtual_memory() {
                return self.malloc_expandable(vm, s, stream, size, rounded, may_retry);
            }
        }
        if let Some(addr) = self.take_without_growing(s, stream, size, rounded) {
            return Ok(Some(addr));
        }
        match self.grow(s, size, rounded, stream, may_retry)? {
            Some(idx) => Ok(Some(self.shards[s].finish(idx, rounded, size))),
            None => Ok(None),
        }
    }

    /// `rounded` bytes for `stream` from shard `s`'s cache, else from a
    /// segment another stream freed and `stream` is ordered after.
    pub(super) fn take_without_growing(
        &mut self,
        s: usize,
        stream: usize,
        size: usize,
        rounded: usize,
    ) -> Option<usize> {
        if let Take::Got(addr) = self.shards[s].take_cached(size, rounded, stream, false, None) {
            return Some(addr);
        }
        self.take_ordered(s, stream, size, rounded)
    }

    /// A new segment for shard `s` and its free block. On failure with
    /// `may_retry`, releases every shard's cached segments and returns `None`.
    fn grow(
        &mut self,
        s: usize,
        size: usize,
        rounded: usize,
        stream: usize,
        may_retry: bool,
    ) -> Result<Option<u32>> {
        let kind = kind_of(rounded);
        if let Some(target) = self.gc_target() {
            if self.reserved().saturating_add(segment_size(rounded)) > target {
                self.release_free_segments(target.saturating_sub(segment_size(rounded)));
            }
        }
        if kind == Kind::Large {
            for core in self.shards.iter_mut() {
                core.release_unfit_segments(&self.device, rounded);
            }
        }
        let cause = match self.new_segment(s, kind, rounded, stream) {
            Ok(idx) => return Ok(Some(idx)),
            Err(cause) => cause,
        };
        if may_retry {
            self.release_free_segments(0);
            // Whatever this call gave back (here, or above: unfit segments,
            // garbage collection) reaches the device once the locks drop.
            if self.device.has_pending() {
                self.shards[s].stats.num_alloc_retries += 1;
                return Ok(None);
            }
        }
        Err(self.fail(s, size, stream, cause))
    }

    /// A failed allocation: counted, recorded as an `oom` event (its address is
    /// the bytes the pool could still take, as PyTorch's), and its error.
    fn fail(&mut self, s: usize, size: usize, stream: usize, cause: &'static str) -> Error {
        self.shards[s].stats.num_ooms += 1;
        let room = self
            .global
            .limit
            .min(self.device.capacity())
            .saturating_sub(self.reserved());
        self.shards[s]
            .history
            .record(crate::history::Action::Oom, room, size, 0, stream);
        Error::PoolOutOfMemory {
            requested: size,
            allocated: self.allocated(),
            reserved: self.reserved(),
            limit: self.global.limit,
            cause,
        }
    }

    /// Where garbage collection (`garbage_collection_threshold`) starts, if on.
    fn gc_target(&self) -> Option<usize> {
        let (gc, limit) = (
            self.global.config.garbage_collection_threshold,
            self.global.limit,
        );
        (gc > 0.0 && limit != usize::MAX).then_some((limit as f64 * gc) as usize)
    }

    /// [`All::malloc`] for an expandable pool: a cached block with its pages
    /// mapped, else a new reservation; out of memory, a retry, then every free
    /// page is unmapped and the block tried once more.
    fn malloc_expandable(
        &mut self,
        vm: &dyn VirtualMemory,
        s: usize,
        stream: usize,
        size: usize,
        rounded: usize,
        may_retry: bool,
    ) -> Result<Option<usize>> {
        let mut unmapped = false;
        // Past the garbage collection threshold, free pages are unmapped down to it.
        let mut gc_target = self.gc_target();
        // Each pass either succeeds, adds a reservation that fits the
        // request, collects once, or unmaps once: a few passes always settle.
        for _ in 0..6 {
            let room = self.global.limit.saturating_sub(self.reserved());
            let gc_room = gc_target.map(|t| t.saturating_sub(self.reserved()));
            let map = Some((vm, gc_room.map_or(room, |g| g.min(room))));
            let cause = match self.shards[s].take_cached(size, rounded, stream, false, map) {
                Take::Got(addr) => return Ok(Some(addr)),
                Take::NoRoom | Take::NoMemory if gc_room.is_some_and(|g| g < room) => {
                    if may_retry {
                        return Ok(None);
                    }
                    let target = gc_target.take().unwrap_or(0);
                    let need = round_up(rounded, vm.page_size());
                    self.unmap_free_pages_down_to(target.saturating_sub(need));
                    continue;
                }
                Take::Miss => {
                    let capacity = self.device.capacity();
                    let kind = kind_of(rounded);
                    match self.shards[s].new_reservation(vm, kind, rounded, stream, capacity) {
                        Ok(_) => continue,
                        Err(cause) => cause,
                    }
                }
                Take::NoRoom | Take::NoMemory => {
                    if room < round_up(rounded, vm.page_size()) {
                        "the pool's memory limit would be exceeded"
                    } else {
                        "the device is out of memory"
                    }
                }
            };
            if may_retry {
                self.shards[s].stats.num_alloc_retries += 1;
                return Ok(None);
            }
            if !unmapped {
                unmapped = true;
                if self.unmap_free_pages() > 0 {
                    continue;
                }
            }
            return Err(self.fail(s, size, stream, cause));
        }
        Err(Error::Internal {
            reason: "an expandable pool allocation did not settle",
        })
    }

    /// Unmaps the pages holding no live block in every shard's expandable
    /// segments. Returns the bytes unmapped.
    pub(super) fn unmap_free_pages(&mut self) -> usize {
        let Some(vm) = self.device.device.virtual_memory() else {
            return 0;
        };
        self.shards
            .iter_mut()
            .map(|core| core.unmap_free_pages(vm))
            .sum()
    }

    /// Unmaps free pages of expandable segments, shard by shard, until at most
    /// `target` bytes stay reserved. Returns the bytes unmapped.
    pub(super) fn unmap_free_pages_down_to(&mut self, target: usize) -> usize {
        let Some(vm) = self.device.device.virtual_memory() else {
            return 0;
        };
        let mut unmapped = 0;
        for s in 0..self.shards.len() {
            let excess = self.reserved().saturating_sub(target);
            if excess == 0 {
                break;
            }
            unmapped += self.shards[s].unmap_free_pages_up_to(vm, excess);
        }
        unmapped
    }

    /// Releases every expandable segment that backs no block. Returns how many.
    pub(super) fn release_reservations(&mut self) -> usize {
        let Some(vm) = self.device.device.virtual_memory() else {
            return 0;
        };
        self.shards
            .iter_mut()
            .map(|core| core.release_reservations(vm, false))
            .sum()
    }

    fn new_segment(
        &mut self,
        s: usize,
        kind: Kind,
        rounded: usize,
        stream: usize,
    ) -> std::result::Result<u32, &'static str> {
        let room = self.global.limit.saturating_sub(self.reserved());
        self.shards[s].new_segment(&self.device, kind, rounded, stream, room)
    }

    /// Returns wholly free segments to the device, largest first, until at most
    /// `target` bytes stay reserved. Returns the bytes released.
    pub(super) fn release_free_segments(&mut self, target: usize) -> usize {
        let mut candidates: Vec<(usize, usize, u32)> = Vec::new();
        for (s, core) in self.shards.iter_mut().enumerate() {
            candidates.extend(
                core.free_segments()
                    .into_iter()
                    .map(|(size, seg)| (size, s, seg)),
            );
        }
        candidates.sort_unstable_by(|a, b| b.cmp(a));
        let mut reserved = self.reserved();
        let mut released = 0;
        for (size, s, seg) in candidates {
            if reserved <= target {
                break;
            }
            self.shards[s].release_segment(&self.device, seg);
            reserved -= size;
            released += size;
        }
        released
    }

    /// Every shard forgets destroyed `stream` (see `crates/aclalloc-pool/src/engine/retire.rs`).
    pub(super) fn retire_stream(&mut self, stream: usize) -> usize {
        let device = &self.device;
        self.shards
            .iter_mut()
            .map(|c| c.retire_stream(device, stream))
            .sum()
    }

    pub(super) fn close(&mut self) -> usize {
        self.global.closed = true;
        let device = &self.device;
        self.shards.iter_mut().map(|c| c.close(device)).sum()
    }

    pub(super) fn check(&mut self) -> std::result::Result<(), String> {
        for core in self.shards.iter() {
            core.check()?;
        }
        self.check_headroom()
    }
}

#[cfg(test)]
mod tests {
    use super::super::engine::counters::Part;
    use super::super::{HostMemory, Pool, PoolConfig, STAT_ALL};

    fn pool() -> Pool {
        Pool::new(PoolConfig::default(), HostMemory::new(1 << 30)).unwrap()
    }

    /// `inactive_split` (all blocks) in `ShardStats::parts_mut`'s order,
    /// the index of its peak.
    const INACTIVE_SPLIT: usize = 2 * 3 + STAT_ALL;

    /// `part` risen by `short` beyond its headroom.
    fn short_of(part: &mut Part, short: i64) {
        part.increase(part.headroom() + short);
    }

    #[test]
    fn headroom_of_other_shards_covers_a_shortfall_and_the_peak_stays() {
        let pool = pool();
        let mut all = pool.lock_shards();
        all.global.peaks[INACTIVE_SPLIT] = 5;
        all.shards[2].stats.inactive_split[STAT_ALL].add_headroom(5);
        short_of(&mut all.shards[1].stats.inactive_split[STAT_ALL], 3);
        assert!(all.settle_from_shards(1));
        assert_eq!(all.shards[1].stats.inactive_split[STAT_ALL].headroom(), 0);
        assert_eq!(all.shards[2].stats.inactive_split[STAT_ALL].headroom(), 2);
        assert_eq!(all.global.peaks[INACTIVE_SPLIT], 5);
        all.check_headroom().unwrap();
    }

    #[test]
    fn a_shortfall_beyond_the_other_shards_moves_nothing() {
        let pool = pool();
        let mut all = pool.lock_shards();
        all.global.peaks[INACTIVE_SPLIT] = 2;
        all.shards[2].stats.inactive_split[STAT_ALL].add_headroom(2);
        short_of(&mut all.shards[1].stats.inactive_split[STAT_ALL], 3);
        assert!(!all.settle_from_shards(1));
        assert_eq!(all.shards[1].stats.inactive_split[STAT_ALL].headroom(), -3);
        assert_eq!(all.shards[2].stats.inactive_split[STAT_ALL].headroom(), 2);
        // The full settle raises the peak by what is missing: 3 - 2.
        all.settle(1);
        assert_eq!(all.global.peaks[INACTIVE_SPLIT], 3);
        all.check_headroom().unwrap();
    }
}
