//! Frees that name the stream they happen on, for CANN's stream-ordered
//! pools: `aclrtMemPoolFreeAsync(ptr, stream)` gives a block back at once
//! when `stream` is the one it was allocated on, and only when that stream
//! reaches the free otherwise. The pool knows each block's stream, so the
//! caller needs no table of its own.

use super::engine::StreamOf;
use super::streams::SHARDS;
use super::thread_cache::FastFree;
use super::{Pool, CLOSED, FOREIGN};
use crate::base::error::{Error, Result};

/// What [`Pool::free_on`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FreedOn {
    /// The block was allocated on the freeing stream: it is free now.
    Freed,
    /// The block was allocated on this other stream: it stays live, for
    /// the caller to free when the freeing stream reaches the free.
    LiveOn(usize),
}

impl Pool {
    /// Frees live block `addr` if it was allocated on `stream`; a live
    /// block of another stream stays live and that stream is returned.
    /// Anything else (a freed block, an address inside one, an address of
    /// no segment) is refused as [`Pool::free`] refuses it.
    pub fn free_on(&self, addr: usize, stream: usize) -> Result<FreedOn> {
        // The usual case: the block this thread's cache of `stream` lent.
        match self.cache_free(addr, Some(stream)) {
            FastFree::Done => return Ok(FreedOn::Freed),
            FastFree::Slow { .. } => return self.free(addr).map(|()| FreedOn::Freed),
            FastFree::Miss => {}
        }
        let owner = self.stream_of(addr)?;
        if owner != stream {
            return Ok(FreedOn::LiveOn(owner));
        }
        self.free(addr).map(|()| FreedOn::Freed)
    }

    /// The stream live block `addr` was allocated on.
    fn stream_of(&self, addr: usize) -> Result<usize> {
        let first = self.likely_shard();
        for shard in std::iter::once(first).chain((0..SHARDS).filter(|&s| s != first)) {
            let found = self.shards[shard].0.lock().stream_of(addr);
            match found {
                StreamOf::Live(s) => return Ok(s),
                // Handed out by a cache: live; parked in one: freed.
                StreamOf::Lent => {
                    return self.lent_stream(shard, addr).ok_or(Error::PoolDoubleFree)
                }
                StreamOf::NotHere => continue,
                StreamOf::Bad(e) => return Err(e),
            }
        }
        Err(if self.global.lock().closed {
            CLOSED
        } else {
            FOREIGN
        })
    }
}

#[cfg(test)]
mod tests {
    use super::FreedOn;
    use crate::base::error::Error;
    use crate::{HostMemory, Pool, PoolConfig};

    fn pool() -> Pool {
        Pool::new(PoolConfig::default(), HostMemory::new(1 << 30)).unwrap()
    }

    #[test]
    fn a_block_is_freed_on_its_own_stream_and_left_live_on_another() {
        let pool = pool();
        for size in [4000, 3 << 20] {
            // Twice: the second block is the first one again, from the cache.
            for _ in 0..2 {
                let a = pool.malloc_on(7, size).unwrap().get();
                assert_eq!(pool.free_on(a, 9).unwrap(), FreedOn::LiveOn(7));
                assert_eq!(pool.stats().allocation[0].current, 1);
                assert_eq!(pool.free_on(a, 7).unwrap(), FreedOn::Freed);
                assert_eq!(pool.stats().allocation[0].current, 0);
            }
        }
        pool.check_invariants().unwrap();
    }

    #[test]
    fn a_block_lent_to_another_threads_cache_is_found_there() {
        let pool = pool();
        let a = std::thread::scope(|s| {
            s.spawn(|| {
                let a = pool.malloc_on(7, 4000).unwrap().get();
                // Freed and taken again: lent to this thread's cache.
                pool.free(a).unwrap();
                pool.malloc_on(7, 4000).unwrap().get()
            })
            .join()
            .unwrap()
        });
        assert_eq!(pool.free_on(a, 8).unwrap(), FreedOn::LiveOn(7));
        assert_eq!(pool.free_on(a, 7).unwrap(), FreedOn::Freed);
        pool.check_invariants().unwrap();
    }

    #[test]
    fn freed_foreign_and_inner_addresses_are_refused() {
        let pool = pool();
        let a = pool.malloc_on(7, 4000).unwrap().get();
        assert!(matches!(
            pool.free_on(a + 512, 7),
            Err(Error::PoolForeignBlock)
        ));
        assert_eq!(pool.free_on(a, 7).unwrap(), FreedOn::Freed);
        // Parked in this thread's cache, then freed again: on either stream.
        assert!(matches!(pool.free_on(a, 7), Err(Error::PoolDoubleFree)));
        assert!(matches!(pool.free_on(a, 8), Err(Error::PoolDoubleFree)));
        assert!(matches!(
            pool.free_on(1 << 50, 7),
            Err(Error::PoolForeignBlock)
        ));
        assert_eq!(pool.stats().allocation[0].current, 0);
        pool.check_invariants().unwrap();
    }
}
