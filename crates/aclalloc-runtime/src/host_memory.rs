//! `aclrtMallocHost` / `aclrtFreeHost`: page-locked host memory in CANN, plain
//! host memory here, kept in a table of its own so that copies of every kind
//! accept it and a freed pointer is refused rather than touched.

use super::host::HostRuntime;
use crate::base::error::{Error, Result};
use crate::base::stats::Stat;
use crate::base::sync::Mutex;
use crate::history::clock;
use std::collections::HashMap;
use std::ptr::NonNull;

const NOT_HOST_MEMORY: Error = Error::InvalidParam {
    param: "hostPtr",
    reason: "It is not the start of live memory from aclrtMallocHost (it was not returned by aclrtMallocHost, or it was already freed)",
};

impl HostRuntime {
    /// `aclrtMallocHost`: `size` bytes, page-aligned and zeroed.
    pub fn malloc_host(&self, size: usize) -> Result<NonNull<u8>> {
        self.config()?;
        let start = clock::now_us();
        let ptr = self.host_memory.alloc(size).map_err(|e| match e {
            Error::InvalidParam { .. } => e,
            _ => Error::ReserveFailed { device: 0, size },
        })?;
        self.host_stats
            .allocated(ptr.as_ptr() as usize, size, clock::now_us() - start);
        Ok(ptr)
    }

    /// `aclrtFreeHost`: waits for every stream's pending work (a queued copy
    /// may still read the memory), then frees.
    pub fn free_host(&self, ptr: *mut u8) -> Result<()> {
        if !self.host_memory.owns(ptr) {
            return Err(NOT_HOST_MEMORY);
        }
        self.synchronize_all()?;
        let start = clock::now_us();
        let region = self.host_memory.region(ptr as usize, 1);
        self.host_memory.free(ptr).map_err(|_| NOT_HOST_MEMORY)?;
        if let Some((at, len)) = region {
            // Registrations of freed memory go with it (aclrtHostRegisterV2).
            super::host_register::forget_within(at, len);
        }
        self.host_stats.freed(ptr as usize, clock::now_us() - start);
        Ok(())
    }

    /// The statistics of `aclrtMallocHost` memory.
    pub fn host_memory_stats(&self) -> HostMemoryStats {
        self.host_stats.inner.lock().stats
    }

    /// Restarts every peak of the host-memory statistics from its current value.
    pub fn reset_peak_host_memory_stats(&self) {
        let mut inner = self.host_stats.inner.lock();
        let s = &mut inner.stats;
        for stat in [
            &mut s.allocations,
            &mut s.allocated_bytes,
            &mut s.active_requests,
            &mut s.active_bytes,
        ] {
            stat.peak = stat.current;
        }
    }

    /// Zeroes the accumulated host-memory statistics: the totals added and
    /// removed, the call counts and the timings.
    pub fn reset_accumulated_host_memory_stats(&self) {
        let mut inner = self.host_stats.inner.lock();
        let s = &mut inner.stats;
        for stat in [
            &mut s.allocations,
            &mut s.allocated_bytes,
            &mut s.active_requests,
            &mut s.active_bytes,
        ] {
            (stat.allocated, stat.freed) = (0, 0);
        }
        (s.num_host_alloc, s.num_host_free) = (0, 0);
        s.host_alloc_time = DurationStat::default();
        s.host_free_time = DurationStat::default();
    }
}

/// Timings of one kind of call, in microseconds (PyTorch's
/// `host_alloc_time` / `host_free_time`; the average is total / count).
/// They are accumulated statistics: only the accumulated reset clears them.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DurationStat {
    /// The time of every call added up.
    pub total: i64,
    /// The longest call.
    pub max: i64,
    /// The shortest call (0 before any).
    pub min: i64,
    /// The calls timed.
    pub count: i64,
}

impl DurationStat {
    fn add(&mut self, us: u64) {
        let us = i64::try_from(us).unwrap_or(i64::MAX);
        self.total = self.total.saturating_add(us);
        self.max = self.max.max(us);
        self.min = if self.count == 0 {
            us
        } else {
            self.min.min(us)
        };
        self.count += 1;
    }
}

/// The statistics of `aclrtMallocHost` memory with PyTorch's host-allocator
/// keys. Nothing is cached (a freed block goes back at once), so
/// `allocations` equals `active_requests` and `allocated_bytes` equals
/// `active_bytes`; bytes are the sizes requested.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostMemoryStats {
    /// Blocks held.
    pub allocations: Stat,
    /// Bytes held.
    pub allocated_bytes: Stat,
    /// Blocks handed out and not freed.
    pub active_requests: Stat,
    /// Bytes handed out and not freed.
    pub active_bytes: Stat,
    /// Successful `aclrtMallocHost` calls.
    pub num_host_alloc: i64,
    /// Successful `aclrtFreeHost` calls.
    pub num_host_free: i64,
    /// Time spent allocating.
    pub host_alloc_time: DurationStat,
    /// Time spent freeing.
    pub host_free_time: DurationStat,
}

/// The host-memory counters of a runtime, and each live block's size.
#[derive(Default)]
pub(crate) struct HostStats {
    inner: Mutex<HostBooks>,
}

#[derive(Default)]
struct HostBooks {
    stats: HostMemoryStats,
    sizes: HashMap<usize, usize>,
}

impl HostStats {
    fn allocated(&self, ptr: usize, size: usize, us: u64) {
        let mut inner = self.inner.lock();
        inner.sizes.insert(ptr, size);
        let s = &mut inner.stats;
        let bytes = i64::try_from(size).unwrap_or(i64::MAX);
        s.allocations.increase(1);
        s.active_requests.increase(1);
        s.allocated_bytes.increase(bytes);
        s.active_bytes.increase(bytes);
        s.num_host_alloc += 1;
        s.host_alloc_time.add(us);
    }

    fn freed(&self, ptr: usize, us: u64) {
        let mut inner = self.inner.lock();
        let size = inner.sizes.remove(&ptr).unwrap_or(0);
        let s = &mut inner.stats;
        let bytes = i64::try_from(size).unwrap_or(i64::MAX);
        s.allocations.decrease(1);
        s.active_requests.decrease(1);
        s.allocated_bytes.decrease(bytes);
        s.active_bytes.decrease(bytes);
        s.num_host_free += 1;
        s.host_free_time.add(us);
    }
}

#[cfg(test)]
mod tests {
    use crate::host::tests::runtime;
    use crate::memops::CopyKind;

    #[test]
    fn host_memory_serves_every_copy_kind_and_is_refused_once_freed() {
        let rt = runtime(1, 1 << 20);
        rt.set_device(0).unwrap();
        let h = rt.malloc_host(64).unwrap();
        let d = rt.malloc(64).unwrap();
        for kind in [0, 1, 2, 3, 4] {
            CopyKind::from_acl(kind).unwrap();
            // SAFETY: both ranges are 64 live bytes.
            unsafe { rt.memcpy(d, 64, h, 64, kind) }.unwrap();
            // SAFETY: as above.
            unsafe { rt.memcpy(h, 64, d, 64, kind) }.unwrap();
        }
        rt.free_host(h.as_ptr()).unwrap();
        assert!(rt.free_host(h.as_ptr()).is_err(), "double free");
        assert!(rt.free_host(d.as_ptr()).is_err(), "device memory");
        // SAFETY: refused before any byte is touched.
        assert!(unsafe { rt.memcpy(d, 64, h, 64, 1) }.is_err());
        assert!(rt.malloc_host(0).is_err());
    }

    #[test]
    fn host_memory_statistics_count_blocks_bytes_and_calls_and_reset() {
        let rt = runtime(1, 1 << 20);
        rt.set_device(0).unwrap();
        let a = rt.malloc_host(100).unwrap();
        let b = rt.malloc_host(5000).unwrap();
        let s = rt.host_memory_stats();
        assert_eq!((s.allocations.current, s.allocations.peak), (2, 2));
        assert_eq!(s.allocated_bytes.current, 5100);
        assert_eq!(s.active_bytes, s.allocated_bytes);
        assert_eq!(s.active_requests, s.allocations);
        assert_eq!((s.num_host_alloc, s.num_host_free), (2, 0));
        assert_eq!(s.host_alloc_time.count, 2);
        rt.free_host(b.as_ptr()).unwrap();
        assert!(rt.free_host(b.as_ptr()).is_err(), "double free");
        let s = rt.host_memory_stats();
        assert_eq!(s.allocated_bytes.current, 100);
        assert_eq!(s.allocated_bytes.peak, 5100);
        assert_eq!(s.allocated_bytes.freed, 5000);
        assert_eq!((s.num_host_free, s.host_free_time.count), (1, 1));
        rt.reset_peak_host_memory_stats();
        assert_eq!(rt.host_memory_stats().allocated_bytes.peak, 100);
        rt.reset_accumulated_host_memory_stats();
        let s = rt.host_memory_stats();
        assert_eq!(
            (s.allocated_bytes.allocated, s.allocated_bytes.freed),
            (0, 0)
        );
        assert_eq!((s.num_host_alloc, s.host_alloc_time.count), (0, 0));
        assert_eq!(s.allocated_bytes.current, 100, "current values stay");
        rt.free_host(a.as_ptr()).unwrap();
        assert_eq!(rt.host_memory_stats().allocations.current, 0);
    }
}
