//! Which shard serves a stream: a fixed open-addressing table read without
//! locks, filled under the pool-wide lock on a stream's first allocation.
//!
//! Streams get shards round-robin as they first allocate; once the table is
//! full, further streams map by hash (a shared shard keys its bins by stream,
//! so blocks stay apart). An entry is never removed or changed, so a stream's
//! cached blocks stay in its shard. Not a [`crate::base::table::Table`]: it
//! must stay bounded (a stream per request must not grow it).

use crate::base::sync::{AtomicBool, AtomicUsize, Ordering};
use crate::base::table::hash;

/// How many shards a pool has.
pub(crate) const SHARDS: usize = 8;
const SLOTS: usize = 64;

/// Stream → shard, fixed size, entries never removed.
pub(crate) struct ShardMap {
    keys: [AtomicUsize; SLOTS],
    /// Shard index + 1; 0: the slot is empty.
    shards: [AtomicUsize; SLOTS],
    full: AtomicBool,
}

fn slot(stream: usize) -> usize {
    // Stream handles are pointers with equal low bits: spread them as the tables do.
    hash(stream)
}

impl ShardMap {
    pub(crate) fn new() -> Self {
        ShardMap {
            keys: std::array::from_fn(|_| AtomicUsize::new(0)),
            shards: std::array::from_fn(|_| AtomicUsize::new(0)),
            full: AtomicBool::new(false),
        }
    }

    /// The shard of `stream`, if it has one.
    #[inline]
    pub(crate) fn find(&self, stream: usize) -> Option<usize> {
        let mut i = slot(stream) % SLOTS;
        for _ in 0..SLOTS {
            let shard = self.shards[i].load(Ordering::Acquire);
            if shard == 0 {
                return None;
            }
            if self.keys[i].load(Ordering::Relaxed) == stream {
                return Some(shard - 1);
            }
            i = (i + 1) % SLOTS;
        }
        self.full
            .load(Ordering::Relaxed)
            .then(|| slot(stream) % SHARDS)
    }

    /// Gives `stream` a shard (`next` round-robin counter); call under the
    /// pool-wide lock, which serialises writers.
    pub(crate) fn assign(&self, stream: usize, next: &mut usize) -> usize {
        if let Some(shard) = self.find(stream) {
            return shard;
        }
        let mut i = slot(stream) % SLOTS;
        for _ in 0..SLOTS {
            if self.shards[i].load(Ordering::Relaxed) == 0 {
                let shard = *next % SHARDS;
                *next += 1;
                self.keys[i].store(stream, Ordering::Relaxed);
                // Publishes the key with the shard.
                self.shards[i].store(shard + 1, Ordering::Release);
                return shard;
            }
            i = (i + 1) % SLOTS;
        }
        self.full.store(true, Ordering::Relaxed);
        slot(stream) % SHARDS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_get_shards_round_robin_and_keep_them() {
        let t = ShardMap::new();
        let mut next = 0;
        let streams: Vec<usize> = (0..SLOTS + 10).map(|i| i * 0x240).collect();
        let shards: Vec<usize> = streams.iter().map(|&s| t.assign(s, &mut next)).collect();
        assert_eq!(&shards[..SHARDS], &(0..SHARDS).collect::<Vec<_>>()[..]);
        for (&s, &shard) in streams.iter().zip(&shards) {
            assert_eq!(t.find(s), Some(shard), "stream {s:#x}");
            assert_eq!(t.assign(s, &mut next), shard);
        }
    }
}
