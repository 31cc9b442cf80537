//! Placement and out-of-memory recovery on a device of limited capacity,
//! through the Rust API: where a large request goes decides which segments
//! stay releasable and how much the pool must reserve (docs/BENCHMARKS.md,
//! "Expandable segments", measures it on whole traces).

use aclalloc::pool::{HostMemory, Pool, PoolConfig, PoolStats, STAT_ALL};
use aclalloc::Error;
use std::sync::Arc;

const MIB: usize = 1 << 20;

fn pool_on(capacity: usize) -> (Pool, Arc<HostMemory>) {
    let device = Arc::new(HostMemory::new(capacity));
    (
        Pool::new(PoolConfig::default(), device.clone()).unwrap(),
        device,
    )
}

/// (segments, reserved bytes, device allocations, device frees, retries, out-of-memory errors)
fn counts(s: &PoolStats) -> (i64, usize, i64, i64, i64, i64) {
    (
        s.segment[STAT_ALL].current,
        s.reserved_bytes[STAT_ALL].current as usize,
        s.num_device_alloc,
        s.num_device_free,
        s.num_alloc_retries,
        s.num_ooms,
    )
}

#[test]
fn a_large_request_sees_a_segment_whose_blocks_were_all_freed_as_whole() {
    let (pool, device) = pool_on(100 * MIB);
    // A 64 MiB segment holding a 40 MiB block and a free 24 MiB tail.
    pool.free(pool.malloc(64 * MIB).unwrap().get()).unwrap();
    let x = pool.malloc(40 * MIB).unwrap().get();
    let seg = x;
    pool.free(x).unwrap();
    // The segment is wholly free again, though the 40 MiB block is only
    // binned: 20 MiB goes to its start, not into the 24 MiB tail, so the
    // rest stays one 44 MiB block.
    let y = pool.malloc(20 * MIB).unwrap().get();
    assert_eq!(y, seg);
    // Placed in the tail, y would have left 40 + 4 MiB: 42 MiB would need a
    // segment of its own, which this device cannot hold next to 64 MiB.
    let z = pool.malloc(42 * MIB).unwrap().get();
    assert_eq!(z, seg + 20 * MIB);
    assert_eq!(counts(&pool.stats()), (1, 64 * MIB, 1, 0, 0, 0));
    assert_eq!(device.used(), 64 * MIB);
    pool.free(y).unwrap();
    pool.free(z).unwrap();
    pool.check_invariants().unwrap();
}

#[test]
fn segments_of_like_size_are_packed_by_best_fit() {
    let (pool, _) = pool_on(110 * MIB);
    // P: 60 MiB with a 44 MiB block and a free 16 MiB tail.
    pool.free(pool.malloc(60 * MIB).unwrap().get()).unwrap();
    let a = pool.malloc(44 * MIB).unwrap().get();
    // Q: 40 MiB, wholly free (the tail cannot serve 40 MiB).
    let q = pool.malloc(40 * MIB).unwrap().get();
    pool.free(q).unwrap();
    // A small request nothing cached fits merges the bins: Q is a free block.
    let d = pool.malloc(MIB / 2).unwrap().get();
    assert_eq!(counts(&pool.stats()).0, 3);
    // 40 and 60 MiB are segments of one power of two: 16 MiB takes the
    // exact tail of P rather than a piece of Q, the smaller segment.
    let b = pool.malloc(16 * MIB).unwrap().get();
    assert_eq!(b, a + 44 * MIB);
    // So Q still serves 40 MiB whole; had b split it, 40 MiB would need a
    // third segment, beyond this device.
    let c = pool.malloc(40 * MIB).unwrap().get();
    assert_eq!(c, q);
    assert_eq!(counts(&pool.stats()), (3, 102 * MIB, 3, 0, 0, 0));
    for addr in [a, b, c, d] {
        pool.free(addr).unwrap();
    }
    pool.check_invariants().unwrap();
}

#[test]
fn a_segment_of_a_much_smaller_power_of_two_is_preferred_once_its_blocks_merge() {
    let (pool, _) = pool_on(1 << 30);
    // A wholly free 20 MiB segment, and a 64 MiB one with a free 40 MiB tail.
    let small = pool.malloc(9 * MIB).unwrap().get(); // a 20 MiB segment
    pool.free(pool.malloc(64 * MIB).unwrap().get()).unwrap();
    let a = pool.malloc(24 * MIB).unwrap().get();
    pool.free(small).unwrap();
    // Its 9 MiB block is only binned; merged, the 20 MiB segment is whole and
    // of a lower power of two than the 64 MiB one: 12 MiB goes there.
    let b = pool.malloc(12 * MIB).unwrap().get();
    assert_eq!(b, small);
    assert_eq!(counts(&pool.stats()).0, 2);
    pool.free(a).unwrap();
    pool.free(b).unwrap();
    pool.check_invariants().unwrap();
}

#[test]
fn a_device_that_refuses_a_standard_segment_gets_the_request_size_then_a_release_and_retry() {
    let (pool, device) = pool_on(30 * MIB);
    // Stream 1 caches a wholly free 20 MiB segment that stream 2 may not use.
    pool.free(pool.malloc_on(1, 20 * MIB).unwrap().get())
        .unwrap();
    // 3 MiB normally gets a 20 MiB segment; the device has 10 MiB left, so
    // it gets 4 MiB (3 MiB rounded to 2 MiB), without releasing anything.
    let a = pool.malloc_on(2, 3 * MIB).unwrap().get();
    assert_eq!(counts(&pool.stats()), (2, 24 * MIB, 2, 0, 0, 0));
    let seg = pool
        .segments()
        .into_iter()
        .find(|s| s.address == a)
        .unwrap();
    assert_eq!((seg.total_size, seg.stream), (4 * MIB, 2));
    // 10 MiB fits nowhere: the cached segment goes back and the pool
    // retries once.
    let b = pool.malloc_on(2, 10 * MIB).unwrap().get();
    assert_eq!(counts(&pool.stats()), (2, 14 * MIB, 3, 1, 1, 0));
    assert_eq!(device.used(), 14 * MIB);
    // Nothing left to release: out of memory, counted once, no retry.
    let e = pool.malloc_on(2, 20 * MIB).unwrap_err();
    assert!(matches!(e, Error::PoolOutOfMemory { .. }), "{e:?}");
    assert_eq!(counts(&pool.stats()), (2, 14 * MIB, 3, 1, 1, 1));
    pool.free(a).unwrap();
    pool.free(b).unwrap();
    pool.check_invariants().unwrap();
}
