//! Streams end: a service creates a stream per request or session, and a
//! pool keeps each stream's freed blocks for that stream alone (a block
//! freed in stream order may still be in use by the stream's queued work).
//! Once a stream is destroyed nothing can use those blocks again, so
//! [`Pool::forget_stream`] gives them back to the device (and retires the
//! segments the stream still has blocks handed out in: they go back once
//! wholly free, at the next stream's end or the next release).

use super::Pool;

impl Pool {
    /// Tells the pool that `stream` (non-zero) was destroyed (its work has
    /// finished). Returns the bytes given back to the device.
    pub fn forget_stream(&self, stream: usize) -> usize {
        if stream == 0 {
            return 0;
        }
        self.exclusive(None, |ex| {
            self.drain_caches(&mut ex.shards[..], super::Retire::Stream(stream));
            ex.retire_stream(stream)
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::pool::{HostMemory, Pool, PoolConfig};

    #[test]
    fn a_destroyed_streams_cache_goes_back_and_its_live_blocks_follow_when_freed() {
        let pool = Pool::new(PoolConfig::default(), HostMemory::new(1 << 30)).unwrap();
        let (s1, s2, s3) = (0x1000, 0x2000, 0x3000);
        let a = pool.malloc_on(s1, 4 << 20).unwrap();
        let kept = pool.malloc_on(s2, 4 << 20).unwrap();
        let b = pool.malloc_on(s2, 1 << 20).unwrap();
        pool.free(a.get()).unwrap();
        pool.free(b.get()).unwrap();
        let other = pool.malloc_on(s3, 1000).unwrap();
        let before = pool.memory_reserved();
        assert!(before >= 20 << 20);
        // s1's only segment is wholly free: it goes back.
        assert_eq!(pool.forget_stream(s1), 20 << 20);
        assert_eq!(pool.memory_reserved(), before - (20 << 20));
        // s2 still has a block out: its segments stay (the small one, wholly
        // free, goes back) until the block is freed.
        pool.forget_stream(s2);
        let with_live = pool.memory_reserved();
        pool.free(kept.get()).unwrap();
        pool.check_invariants().unwrap();
        // The next stream's end (or a release) gives the retired segment back.
        pool.forget_stream(0x4000);
        assert!(pool.memory_reserved() < with_live);
        // s3 is untouched: its block and its cache are still there.
        assert_eq!(pool.memory_reserved(), 2 << 20);
        pool.free(other.get()).unwrap();
        let again = pool.malloc_on(s3, 1000).unwrap();
        assert_eq!(again, other, "s3's cache was kept");
        pool.free(again.get()).unwrap();
        pool.check_invariants().unwrap();
        assert_eq!(
            pool.stats().num_device_alloc,
            pool.stats().num_device_free + 1
        );
    }
}
