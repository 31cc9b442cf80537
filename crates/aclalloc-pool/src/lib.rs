//! A caching pool allocator with PyTorch-grade memory statistics.
//!
//! [`Pool`] is the safe Rust API; `aclallocPool*` in `aclalloc-capi` (`ffi::ext::pool`) is
//! the C API, which hands back a ready allocator descriptor for
//! `aclrtAllocatorRegister`.
//!
//! ```
//! use aclalloc_pool::{HostMemory, Pool, PoolConfig};
//!
//! let pool = Pool::new(PoolConfig::default(), HostMemory::new(1 << 30)).unwrap();
//! let a = pool.malloc(1000).unwrap();
//! assert_eq!(a.get() % 512, 0);
//! pool.free(a.get()).unwrap();
//! let b = pool.malloc(1000).unwrap(); // served from the cache
//! assert_eq!(a, b);
//! assert_eq!(pool.stats().num_device_alloc, 1);
//! pool.free(b.get()).unwrap();
//! assert!(pool.free(b.get()).is_err()); // double free: reported, nothing corrupted
//! pool.empty_cache();
//! assert_eq!(pool.memory_reserved(), 0);
//! ```

// Every unsafe operation sits in an `unsafe` block with its own `// SAFETY:` comment.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

use aclalloc_core::{base, history, registry};

pub mod acl;
mod block;
pub mod config;
pub mod device;
mod engine;
pub mod handles;
mod offload;
pub mod region;
pub mod roundup;
pub mod sleep;
pub mod snapshot;
pub mod stats;
pub mod summary;
pub mod virtual_memory;

pub use self::config::{Limit, PoolConfig, ENV_VAR};
pub use self::device::{DeviceMemory, HostMemory, SEGMENT_ALIGN};
pub use self::engine::{
    BlockView, SegmentView, LARGE_BUFFER, MIN_BLOCK_SIZE, MIN_LARGE_ALLOC, ROUND_LARGE,
    SMALL_BUFFER, SMALL_SIZE,
};
pub use self::free_on::FreedOn;
pub use self::stats::{PoolStats, Stat, STAT_ALL, STAT_LARGE_POOL, STAT_SMALL_POOL};

use self::engine::counters::{self as counters, PARTS};
use self::engine::{Core, Freed, CLOSED};
use self::streams::{ShardMap, SHARDS};
use self::thread_cache::{FastFree, Reclaim, Registry, Retire};
use crate::base::biased::BiasedMutex;
use crate::base::error::{Error, Result};
use crate::base::sync::Padded;
use crate::history::{History, Recorder};
use parking_lot::{Mutex, MutexGuard};
use std::cell::Cell;
use std::num::NonZeroUsize;
use std::sync::Arc;

mod cross_stream;
mod free_on;
mod sharded;
mod streams;
mod thread_cache;

/// A thread-safe caching allocator over a [`DeviceMemory`].
///
/// [`Pool::free`] looks an address up among the live blocks, so a foreign
/// address or a double free is an error and never corrupts the pool.
///
/// # Concurrency
///
/// A block freed by one stream is reused only for that stream, so streams
/// map to a few *shards*, each locking its own segments, blocks, bins and
/// share of the statistics: cached allocs and frees take one shard's lock.
///
/// What spans shards (growing, `empty_cache`, `trim`, `allocAdvise`,
/// statistics, a new peak) takes the pool-wide lock and every shard's, in
/// index order. Peaks stay exact through per-shard headroom.
pub struct Pool {
    global: Mutex<Global>,
    /// Each on cache lines of its own: threads on other shards' streams
    /// never write this one's lines.
    shards: [Padded<BiasedMutex<Core>>; SHARDS],
    streams: ShardMap,
    device: Box<dyn DeviceMemory>,
    /// Segments given back under the locks, freed once they are released.
    pending_frees: Mutex<Vec<(NonZeroUsize, usize)>>,
    /// The allocation history, shared with every shard (off by default).
    history: Arc<Recorder>,
    /// The threads' caches of this pool (`crates/aclalloc-pool/src/thread_cache.rs`).
    caches: Registry,
    /// The device memory behind `device`, which sleeps once tagged (`crates/aclalloc-pool/src/sleep.rs`).
    sleeper: Arc<sleep::Sleeper>,
}

/// What only the pool-wide lock guards.
/// Which orderings let a stream take memory another stream freed.
///
/// The default is event waits alone: a stream that waited on another asked
/// for its memory's order, while every stream of a serving loop is
/// synchronized all the time, and taking a synchronized stream's free
/// segment makes that stream grow again at its next step (the segments
/// would move back and forth). CANN's stream-ordered pools turn the second
/// on with `ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC`.
#[derive(Clone, Copy, Debug)]
pub struct CrossStreamReuse {
    /// It waited on an event recorded on the freeing stream after the frees.
    pub after_event_wait: bool,
    /// The freeing stream (or the device) was synchronized since the frees.
    pub after_synchronize: bool,
    /// Before growing, the pool makes the allocating stream wait for the
    /// stream whose wholly free segment would serve it, with this function
    /// (`waiter`, `source`; true once the wait is queued), then takes that
    /// segment: CANN's `ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES`.
    /// It runs with no lock of the pool held. The waits it queues count as
    /// event waits whether `after_event_wait` is on or not.
    pub insert_wait: Option<fn(waiter: usize, source: usize) -> bool>,
}

impl CrossStreamReuse {
    /// True when an event wait of the allocating stream orders it after a free.
    pub(crate) fn follows_waits(&self) -> bool {
        self.after_event_wait || self.insert_wait.is_some()
    }
}

impl Default for CrossStreamReuse {
    fn default() -> Self {
        CrossStreamReuse {
            after_event_wait: true,
            after_synchronize: false,
            insert_wait: None,
        }
    }
}

struct Global {
    config: PoolConfig,
    /// The limit in bytes (`usize::MAX`: none).
    limit: usize,
    /// Pool-wide peak of each statistic (order of `ShardStats::parts_mut`).
    peaks: [i64; PARTS],
    /// Each statistic's pool-wide `current` when the totals were last
    /// zeroed, from which its freed total follows (`engine/counters.rs`).
    freed_bases: [i64; PARTS],
    closed: bool,
    /// The shard the next new stream gets.
    next_shard: usize,
    /// Which orderings let a stream take memory another stream freed (see
    /// `cross_stream.rs`).
    cross_stream_reuse: CrossStreamReuse,
}

thread_local! {
    /// (pool address, shard) of this thread's last allocation: where a free
    /// on this thread looks first.
    static LAST_SHARD: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

const FOREIGN: Error = Error::PoolForeignBlock;

impl Pool {
    /// A pool taking its segments from `device`.
    pub fn new(config: PoolConfig, device: impl DeviceMemory + 'static) -> Result<Self> {
        Self::with_device(config, Box::new(device))
    }

    /// As [`Pool::new`], with a boxed device.
    pub fn with_device(mut config: PoolConfig, device: Box<dyn DeviceMemory>) -> Result<Self> {
        // Without virtual memory, fixed segments (torch_npu falls back the
        // same way when the runtime lacks aclrtReserveMemAddress).
        config.expandable_segments &= device.virtual_memory().is_some();
        let limit = config.limit.validate()?.bytes(device.capacity());
        let streams = ShardMap::new();
        let mut next_shard = 0;
        streams.assign(0, &mut next_shard);
        let history = Arc::new(Recorder::new(device.device()));
        let sleeper = Arc::new(sleep::Sleeper::new(device));
        Ok(Pool {
            global: Mutex::new(Global {
                config,
                limit,
                peaks: [0; PARTS],
                freed_bases: [0; PARTS],
                closed: false,
                cross_stream_reuse: CrossStreamReuse::default(),
                next_shard,
            }),
            shards: std::array::from_fn(|_| {
                Padded(BiasedMutex::new_biased(Core::new(config, history.clone())))
            }),
            streams,
            device: Box::new(sleeper.clone()),
            pending_frees: Mutex::new(Vec::new()),
            history,
            caches: Registry::new(),
            sleeper,
        })
    }

    /// A block of at least `size` bytes, 512-byte aligned, for work whose
    /// stream is unknown (stream 0).
    #[inline]
    pub fn malloc(&self, size: usize) -> Result<NonZeroUsize> {
        self.malloc_on(0, size)
    }

    /// A block of at least `size` bytes for work on `stream` (0: unknown);
    /// a stream's freed blocks are reused only for that stream, as PyTorch does.
    #[inline]
    pub fn malloc_on(&self, stream: usize, size: usize) -> Result<NonZeroUsize> {
        if let Some(addr) = self.cache_malloc(stream, size) {
            return Ok(NonZeroUsize::new(addr).expect("device addresses are not zero"));
        }
        self.malloc_shard(stream, size)
    }

    /// [`Pool::malloc_on`] past this thread's cache: from the stream's
    /// shard (the block is lent to the cache), or the pool-wide path.
    #[inline(never)]
    fn malloc_shard(&self, stream: usize, size: usize) -> Result<NonZeroUsize> {
        self.sleeper.check_awake()?;
        let shard = self.shard_of(stream);
        LAST_SHARD.with(|c| c.set((self as *const Pool as usize, shard)));
        let local = {
            let mut core = self.shards[shard].0.lock();
            if let Some(addr) = self.unpark_with_headroom(&mut core, stream, size) {
                return Ok(NonZeroUsize::new(addr).expect("device addresses are not zero"));
            }
            let kind = engine::round_size(size, &core.config.roundup_power2_divisions)
                .map_or(block::Kind::Large, engine::kind_of);
            let mut local = core.malloc_local(size, stream);
            let levels = [
                Reclaim::Spare,
                Reclaim::Headroom,
                Reclaim::Parked(kind.index() as u8),
                Reclaim::Blocks,
            ];
            for level in levels {
                if local.is_some() || !self.reclaim_from_own_caches(&mut core, shard, level) {
                    continue;
                }
                local = core.malloc_local(size, stream);
            }
            // A tagged pool lends nothing: a cached block would skip the
            // check that a sleeping pool hands out nothing.
            if let Some(addr) = local.filter(|_| !self.sleeper.is_tagged()) {
                self.lend_to_cache(&mut core, shard, stream, addr);
            }
            local
        };
        let addr = match local {
            Some(addr) => addr,
            None => self.malloc_slow(shard, stream, size)?,
        };
        Ok(NonZeroUsize::new(addr).expect("device addresses are not zero"))
    }

    #[inline]
    fn shard_of(&self, stream: usize) -> usize {
        if stream == 0 {
            return 0; // assigned first, in `with_device`
        }
        match self.streams.find(stream) {
            Some(shard) => shard,
            None => self.assign_shard(stream),
        }
    }

    #[cold]
    #[inline(never)]
    fn assign_shard(&self, stream: usize) -> usize {
        let mut g = self.global.lock();
        self.streams.assign(stream, &mut g.next_shard)
    }

    /// A block at `addr` if that range is free in the pool (CANN's
    /// `allocAdvise`), otherwise wherever [`Pool::malloc`] puts it.
    pub fn malloc_at(&self, size: usize, addr: usize) -> Result<NonZeroUsize> {
        self.malloc_at_on(0, size, addr)
    }

    /// [`Pool::malloc_at`] for work on `stream` (see [`Pool::malloc_on`]).
    pub fn malloc_at_on(&self, stream: usize, size: usize, addr: usize) -> Result<NonZeroUsize> {
        self.sleeper.check_awake()?;
        let shard = self.shard_of(stream);
        let addr = self.allocate_exclusive(shard, |ex, may_retry| {
            match ex.shards[shard].malloc_at(size, addr, stream) {
                Some(addr) => Ok(Some(addr)),
                None => ex.malloc(shard, stream, size, may_retry),
            }
        })?;
        Ok(NonZeroUsize::new(addr).expect("device addresses are not zero"))
    }

    /// Returns the block at `addr` to the cache.
    #[inline]
    pub fn free(&self, addr: usize) -> Result<()> {
        match self.cache_free(addr, None) {
            FastFree::Done => Ok(()),
            FastFree::Slow { shard } => {
                let answer = self.free_lent(shard, addr);
                self.free_slow(shard, addr, answer)
            }
            FastFree::Miss => self.free_shard(addr),
        }
    }

    /// The shard this thread allocated from last in this pool (0 when its
    /// last allocation was in another pool): where a freed block most
    /// likely lives.
    #[inline]
    fn likely_shard(&self) -> usize {
        let (pool, last) = LAST_SHARD.with(Cell::get);
        if pool == self as *const Pool as usize {
            last
        } else {
            0
        }
    }

    /// [`Pool::free`] of a block no cache of this thread handed out.
    #[inline(never)]
    fn free_shard(&self, addr: usize) -> Result<()> {
        let first = self.likely_shard();
        // The guard must be gone before the slow path locks anything.
        let answer = {
            let mut core = self.shards[first].0.lock();
            let mut answer = core.free(addr, true);
            // Headroom this thread's caches hold serves before the pool-wide path.
            for level in [Reclaim::Spare, Reclaim::AllHeadroom] {
                if matches!(answer, Freed::NoRoom)
                    && self.reclaim_from_own_caches(&mut core, first, level)
                {
                    answer = core.free(addr, true);
                }
            }
            answer
        };
        match answer {
            Freed::Done => Ok(()),
            other => self.free_slow(first, addr, other),
        }
    }

    /// The rest of [`Pool::free`] once shard `tried` answered `answer`.
    #[cold]
    #[inline(never)]
    fn free_slow(&self, tried: usize, addr: usize, answer: Freed) -> Result<()> {
        match answer {
            Freed::Done => Ok(()),
            Freed::Bad(e) => Err(e),
            Freed::NoRoom => self.free_exclusive(tried, addr),
            Freed::Lent => self.free_lent_elsewhere(tried, addr),
            Freed::NotHere => {
                for shard in (0..SHARDS).filter(|&s| s != tried) {
                    let answer = self.shards[shard].0.lock().free(addr, true);
                    match answer {
                        Freed::NotHere => continue,
                        Freed::NoRoom => return self.free_exclusive(shard, addr),
                        Freed::Lent => return self.free_lent_elsewhere(shard, addr),
                        Freed::Done => return Ok(()),
                        Freed::Bad(e) => return Err(e),
                    }
                }
                Err(if self.global.lock().closed {
                    CLOSED
                } else {
                    FOREIGN
                })
            }
        }
    }

    /// A free of a block of shard `shard` lent to a thread's cache: taken
    /// back, then freed in the shard. Parked in a cache: a double free.
    #[cold]
    #[inline(never)]
    fn free_lent_elsewhere(&self, shard: usize, addr: usize) -> Result<()> {
        match self.free_lent(shard, addr) {
            answer @ (Freed::Done | Freed::NoRoom | Freed::Bad(_)) => {
                self.free_slow(shard, addr, answer)
            }
            Freed::Lent | Freed::NotHere => Err(Error::PoolDoubleFree),
        }
    }

    #[cold]
    #[inline(never)]
    fn free_exclusive(&self, shard: usize, addr: usize) -> Result<()> {
        self.exclusive_in_shard(shard, |core| match core.free(addr, false) {
            Freed::Done => Ok(()),
            Freed::Bad(e) => Err(e),
            // Freed meanwhile by another thread: now a double free.
            Freed::NotHere | Freed::NoRoom | Freed::Lent => Err(FOREIGN),
        })
    }

    /// A consistent copy of the statistics (every shard locked meanwhile).
    pub fn stats(&self) -> PoolStats {
        let mut all = self.lock_all();
        let mut out = PoolStats {
            max_split_size: i64::try_from(all.global.config.max_split_size).unwrap_or(i64::MAX),
            ..PoolStats::default()
        };
        let mut shards: Vec<_> = all.shards.iter_mut().map(|c| &mut c.stats).collect();
        counters::sum(
            &mut shards,
            &all.global.peaks,
            &all.global.freed_bases,
            &mut out,
        );
        out
    }

    /// Sets every peak to its current value.
    pub fn reset_peak_stats(&self) {
        let mut all = self.lock_all();
        let mut peaks = [0; PARTS];
        for core in all.shards.iter_mut() {
            for (j, p) in core.stats.parts_mut().into_iter().enumerate() {
                peaks[j] += p.current;
                p.add_headroom(-p.headroom());
            }
        }
        all.global.peaks = peaks;
    }

    /// Zeroes the totals (`allocated`, `freed`) and the event counters.
    pub fn reset_accumulated_stats(&self) {
        let mut all = self.lock_all();
        let mut bases = [0; PARTS];
        for core in all.shards.iter_mut() {
            core.stats.reset_accumulated();
            for (base, p) in bases.iter_mut().zip(core.stats.parts_mut()) {
                *base += p.current;
            }
        }
        all.global.freed_bases = bases;
    }

    /// Bytes handed out now (`memory_allocated`).
    pub fn memory_allocated(&self) -> usize {
        self.stats().allocated_bytes[STAT_ALL].current as usize
    }

    /// Peak of [`Pool::memory_allocated`] (`max_memory_allocated`).
    pub fn max_memory_allocated(&self) -> usize {
        self.stats().allocated_bytes[STAT_ALL].peak as usize
    }

    /// Bytes held from the device now (`memory_reserved`).
    pub fn memory_reserved(&self) -> usize {
        self.stats().reserved_bytes[STAT_ALL].current as usize
    }

    /// Peak of [`Pool::memory_reserved`] (`max_memory_reserved`).
    pub fn max_memory_reserved(&self) -> usize {
        self.stats().reserved_bytes[STAT_ALL].peak as usize
    }

    /// Returns every wholly free segment to the device and unmaps every free
    /// expandable page. Returns the bytes released.
    pub fn empty_cache(&self) -> usize {
        self.synchronize_for_unmap();
        self.exclusive(None, |ex| {
            ex.release_free_segments(0) + ex.unmap_free_pages()
        })
    }

    /// torch_npu's `empty_virt_addr_cache`: releases expandable reservations
    /// backing no block. Returns how many.
    pub fn empty_virt_addr_cache(&self) -> usize {
        self.synchronize_for_unmap();
        self.exclusive(None, |ex| ex.release_reservations())
    }

    /// Before pages of expandable segments are unmapped: waits for the device with no lock held.
    fn synchronize_for_unmap(&self) {
        if self.global.lock().config.expandable_segments {
            if let Some(vm) = self.device.virtual_memory() {
                vm.synchronize();
            }
        }
    }

    /// Returns wholly free segments (largest first), then free expandable pages,
    /// until at most `keep` bytes stay reserved. Returns the bytes released.
    pub fn trim(&self, keep: usize) -> usize {
        self.synchronize_for_unmap();
        self.exclusive(None, |ex| {
            let released = ex.release_free_segments(keep);
            released + ex.unmap_free_pages_down_to(keep)
        })
    }

    /// Sets the most the pool may reserve. Memory already reserved above a
    /// new, lower limit stays until freed and released.
    pub fn set_limit(&self, limit: Limit) -> Result<()> {
        let bytes = limit.validate()?.bytes(self.device.capacity());
        let mut g = self.global.lock();
        g.config.limit = limit;
        g.limit = bytes;
        Ok(())
    }

    /// Which orderings let a stream take the wholly free segments another
    /// stream left: an event wait after the frees (the default), a
    /// synchronization of that stream since, both or neither.
    pub fn set_cross_stream_reuse(&self, reuse: CrossStreamReuse) {
        self.global.lock().cross_stream_reuse = reuse;
    }

    /// The limit in bytes (`usize::MAX`: none).
    pub fn limit(&self) -> usize {
        self.global.lock().limit
    }

    /// The configuration the pool runs with.
    pub fn config(&self) -> PoolConfig {
        self.global.lock().config
    }

    /// The segments and their blocks, in address order.
    pub fn segments(&self) -> Vec<SegmentView> {
        let all = self.lock_all();
        let mut out: Vec<SegmentView> = all.shards.iter().flat_map(|c| c.segments_view()).collect();
        out.sort_unstable_by_key(|s| s.address);
        out
    }

    /// True when `addr` lies in memory this pool holds from the device.
    pub fn holds(&self, addr: usize) -> bool {
        self.shards.iter().any(|s| s.0.lock().holds(addr))
    }

    /// Records the pool's last `max_entries` events from now on (0: off). The
    /// ring is allocated here; without the memory nothing changes.
    pub fn record_history(&self, max_entries: usize) -> Result<()> {
        self.history
            .set_max_entries(max_entries)
            .map_err(|_| Error::BadAlloc {
                what: "the allocation history's ring (56 bytes per event); ask for fewer events",
            })
    }

    /// Which recorded events carry a stack of up to `depth` native frames.
    pub fn record_stacks(&self, context: crate::history::StackContext, depth: usize) {
        self.history.set_stacks(context, depth);
    }

    /// A copy of the recorded events (see [`Pool::record_history`]).
    pub fn history(&self) -> History {
        self.history.history()
    }

    /// Blocks handed out and not yet freed.
    pub fn live_blocks(&self) -> usize {
        self.lock_all().live_blocks()
    }

    /// Frees all device memory, including blocks still handed out, and makes
    /// every later call fail. Returns how many blocks were still handed out.
    pub fn close(&self) -> usize {
        let leaked = self.exclusive(None, |ex| {
            self.drain_caches(&mut ex.shards[..], Retire::All);
            ex.close()
        });
        self.sleeper.closed();
        leaked
    }

    /// Like [`Pool::close`], but only when no block is handed out; otherwise
    /// nothing changes and the count of blocks still out is returned.
    pub fn close_if_idle(&self) -> std::result::Result<(), usize> {
        self.exclusive(None, |ex| match ex.live_blocks() {
            0 => {
                self.drain_caches(&mut ex.shards[..], Retire::All);
                ex.close();
                Ok(())
            }
            live => Err(live),
        })?;
        self.sleeper.closed();
        Ok(())
    }

    /// Tells the pool that `stream` (non-zero) was destroyed: its cache goes
    /// back to the device, its other segments once wholly free. Returns the
    /// bytes given back.
    pub fn forget_stream(&self, stream: usize) -> usize {
        if stream == 0 {
            return 0;
        }
        self.exclusive(None, |ex| {
            self.drain_caches(&mut ex.shards[..], Retire::Stream(stream));
            ex.retire_stream(stream)
        })
    }

    /// Recomputes every statistic and structural invariant from the block
    /// lists and compares with the pool's bookkeeping (for tests).
    #[doc(hidden)]
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        self.lock_all().check()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.close();
    }
}
