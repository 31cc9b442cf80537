//! A caching pool allocator with PyTorch-grade memory statistics.
//!
//! [`Pool`] is the safe Rust API; `aclallocPool*` in [`crate::ffi::pool`] is
//! the C API, which hands back a ready allocator descriptor for
//! `aclrtAllocatorRegister`.
//!
//! ```
//! use aclalloc::pool::{HostMemory, Pool, PoolConfig};
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

pub mod acl;
mod block;
pub mod config;
mod core;
pub mod device;
pub mod handles;
pub mod snapshot;
pub mod stats;
pub mod summary;

pub use self::config::{Limit, PoolConfig, ENV_VAR};
pub use self::core::{
    BlockView, SegmentView, LARGE_BUFFER, MIN_BLOCK_SIZE, MIN_LARGE_ALLOC, ROUND_LARGE,
    SMALL_BUFFER, SMALL_SIZE,
};
pub use self::device::{DeviceMemory, HostMemory};
pub use self::stats::{PoolStats, Stat, STAT_ALL, STAT_LARGE_POOL, STAT_SMALL_POOL};

use self::core::Core;
use crate::core::error::Result;
use parking_lot::Mutex;
use std::num::NonZeroUsize;

/// A thread-safe caching allocator over a [`DeviceMemory`].
///
/// Blocks are identified by their device address; [`Pool::free`] looks the
/// address up among the pool's live blocks, so freeing a foreign address or
/// freeing twice is an error and never corrupts the pool.
pub struct Pool {
    core: Mutex<Core>,
    device: Box<dyn DeviceMemory>,
}

impl Pool {
    /// A pool taking its segments from `device`.
    pub fn new(config: PoolConfig, device: impl DeviceMemory + 'static) -> Result<Self> {
        Self::with_device(config, Box::new(device))
    }

    /// As [`Pool::new`], with a boxed device.
    pub fn with_device(config: PoolConfig, device: Box<dyn DeviceMemory>) -> Result<Self> {
        let limit = config.limit.validate()?.bytes(device.capacity());
        Ok(Pool {
            core: Mutex::new(Core::new(config, limit)),
            device,
        })
    }

    /// A block of at least `size` bytes, 512-byte aligned, for work whose
    /// stream is unknown (stream 0).
    #[inline]
    pub fn malloc(&self, size: usize) -> Result<NonZeroUsize> {
        self.malloc_on(0, size)
    }

    /// A block of at least `size` bytes for work on `stream` (any non-zero
    /// number naming a stream; 0: unknown). Blocks freed by work on one
    /// stream are reused only for that stream, as with PyTorch's per-stream
    /// pools: a block freed in stream order may still be in use by a kernel
    /// queued on its stream, so another stream must not get it.
    #[inline]
    pub fn malloc_on(&self, stream: usize, size: usize) -> Result<NonZeroUsize> {
        let addr = self.core.lock().malloc(&*self.device, size, stream)?;
        Ok(NonZeroUsize::new(addr).expect("device addresses are not zero"))
    }

    /// A block at `addr` if that range is free in the pool (CANN's
    /// `allocAdvise`), otherwise wherever [`Pool::malloc`] puts it.
    pub fn malloc_at(&self, size: usize, addr: usize) -> Result<NonZeroUsize> {
        self.malloc_at_on(0, size, addr)
    }

    /// [`Pool::malloc_at`] for work on `stream` (see [`Pool::malloc_on`]).
    pub fn malloc_at_on(&self, stream: usize, size: usize, addr: usize) -> Result<NonZeroUsize> {
        let addr = self
            .core
            .lock()
            .malloc_at(&*self.device, size, addr, stream)?;
        Ok(NonZeroUsize::new(addr).expect("device addresses are not zero"))
    }

    /// Returns the block at `addr` to the cache.
    #[inline]
    pub fn free(&self, addr: usize) -> Result<()> {
        self.core.lock().free(addr)
    }

    /// A consistent copy of the statistics (taken in well under a microsecond).
    pub fn stats(&self) -> PoolStats {
        self.core.lock().stats()
    }

    /// Sets every peak to its current value.
    pub fn reset_peak_stats(&self) {
        self.core.lock().stats.reset_peak();
    }

    /// Zeroes the totals (`allocated`, `freed`) and the event counters.
    pub fn reset_accumulated_stats(&self) {
        self.core.lock().stats.reset_accumulated();
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

    /// Returns every wholly free segment to the device. Returns the bytes released.
    pub fn empty_cache(&self) -> usize {
        self.core.lock().release_free_segments(&*self.device, 0)
    }

    /// Returns wholly free segments (largest first) until at most `keep`
    /// bytes stay reserved or none is left. Returns the bytes released.
    pub fn trim(&self, keep: usize) -> usize {
        self.core.lock().release_free_segments(&*self.device, keep)
    }

    /// Sets the most the pool may reserve. Memory already reserved above a
    /// new, lower limit stays until freed and released.
    pub fn set_limit(&self, limit: Limit) -> Result<()> {
        let bytes = limit.validate()?.bytes(self.device.capacity());
        let mut core = self.core.lock();
        core.config.limit = limit;
        core.limit = bytes;
        Ok(())
    }

    /// The limit in bytes (`usize::MAX`: none).
    pub fn limit(&self) -> usize {
        self.core.lock().limit
    }

    /// The configuration the pool runs with.
    pub fn config(&self) -> PoolConfig {
        self.core.lock().config
    }

    /// The device's capacity in bytes.
    pub fn device_capacity(&self) -> usize {
        self.device.capacity()
    }

    /// The segments and their blocks, in address order.
    pub fn segments(&self) -> Vec<SegmentView> {
        self.core.lock().segments_view()
    }

    /// Blocks handed out and not yet freed.
    pub fn live_blocks(&self) -> usize {
        self.core.lock().live_blocks()
    }

    /// Frees all device memory, including blocks still handed out, and makes
    /// every later call fail. Returns how many blocks were still handed out.
    pub fn close(&self) -> usize {
        self.core.lock().close(&*self.device)
    }

    /// Like [`Pool::close`], but only when no block is handed out; otherwise
    /// nothing changes and the count of blocks still out is returned.
    pub fn close_if_idle(&self) -> std::result::Result<(), usize> {
        let mut core = self.core.lock();
        match core.live_blocks() {
            0 => {
                core.close(&*self.device);
                Ok(())
            }
            live => Err(live),
        }
    }

    /// Recomputes every statistic and structural invariant from the block
    /// lists and compares with the pool's bookkeeping (for tests).
    #[doc(hidden)]
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        self.core.lock().check()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.core.get_mut().close(&*self.device);
    }
}
