//! The caching pool's behaviour through the Rust API: caching, segment sizes,
//! splitting and merging, max split size, out-of-memory with release and
//! retry, limits, garbage collection, allocAdvise, bad frees, statistics,
//! summary and snapshot.

use aclalloc::pool::{
    HostMemory, Limit, Pool, PoolConfig, PoolStats, Stat, STAT_ALL, STAT_LARGE_POOL,
    STAT_SMALL_POOL,
};
use aclalloc::Error;
use std::sync::Arc;

const MIB: usize = 1 << 20;

fn pool_with(config: PoolConfig, capacity: usize) -> (Pool, Arc<HostMemory>) {
    let device = Arc::new(HostMemory::new(capacity));
    (Pool::new(config, device.clone()).unwrap(), device)
}

fn pool() -> (Pool, Arc<HostMemory>) {
    pool_with(PoolConfig::default(), 1 << 30)
}

#[test]
fn a_freed_size_is_served_from_the_cache_without_the_device() {
    let (pool, device) = pool();
    let a = pool.malloc(3000).unwrap();
    pool.free(a.get()).unwrap();
    for _ in 0..100 {
        let b = pool.malloc(3000).unwrap();
        assert_eq!(a, b);
        pool.free(b.get()).unwrap();
    }
    assert_eq!(device.calls(), (1, 0));
    let s = pool.stats();
    assert_eq!(s.allocation[STAT_ALL].allocated, 101);
    assert_eq!(s.allocated_bytes[STAT_SMALL_POOL].peak, 3072);
    assert_eq!(s.requested_bytes[STAT_ALL].peak, 3000);
    pool.check_invariants().unwrap();
}

#[test]
fn segments_have_pytorchs_sizes() {
    let cases = [
        (1, 2 * MIB, true),
        (MIB, 2 * MIB, true),
        (MIB + 1, 20 * MIB, false),
        (9 * MIB, 20 * MIB, false),
        (11 * MIB, 12 * MIB, false),
        (12 * MIB + 1, 14 * MIB, false),
    ];
    for (size, segment, small) in cases {
        let (pool, _) = pool();
        let addr = pool.malloc(size).unwrap().get();
        let segments = pool.segments();
        assert_eq!(segments.len(), 1);
        assert_eq!(
            (segments[0].total_size, segments[0].small),
            (segment, small),
            "request of {size}"
        );
        let s = pool.stats();
        let (this, other) = if small {
            (STAT_SMALL_POOL, STAT_LARGE_POOL)
        } else {
            (STAT_LARGE_POOL, STAT_SMALL_POOL)
        };
        assert_eq!((s.segment[this].current, s.segment[other].current), (1, 0));
        assert_eq!(s.reserved_bytes[this].current as usize, segment);
        pool.free(addr).unwrap();
        assert_eq!(pool.empty_cache(), segment);
        assert_eq!(pool.memory_reserved(), 0);
    }
}

#[test]
fn blocks_split_and_free_neighbours_merge() {
    let (pool, _) = pool();
    let a = pool.malloc(100 << 10).unwrap().get();
    let b = pool.malloc(100 << 10).unwrap().get();
    let c = pool.malloc(100 << 10).unwrap().get();
    assert_eq!(
        (b - a, c - b),
        (100 << 10, 100 << 10),
        "carved from one segment, in order"
    );
    assert_eq!(pool.stats().segment[STAT_ALL].current, 1);
    assert_eq!(pool.stats().inactive_split[STAT_ALL].current, 1, "the tail");
    pool.free(b).unwrap();
    let s = pool.stats();
    assert_eq!(s.inactive_split[STAT_ALL].current, 2);
    assert_eq!(
        s.inactive_split_bytes[STAT_ALL].current as usize,
        2 * MIB - 200 * 1024
    );
    pool.free(a).unwrap();
    pool.free(c).unwrap();
    pool.check_invariants().unwrap();
    // empty_cache merges every binned block first; the segment is released
    // only because all four blocks became one.
    assert_eq!(pool.empty_cache(), 2 * MIB);
    assert_eq!(pool.stats().inactive_split[STAT_ALL].current, 0);
}

#[test]
fn a_request_the_free_blocks_cannot_serve_merges_binned_neighbours_before_growing() {
    let (pool, _) = pool();
    let blocks: Vec<_> = (0..4)
        .map(|_| pool.malloc(512 << 10).unwrap().get())
        .collect();
    assert_eq!(
        pool.stats().segment[STAT_ALL].current,
        1,
        "four 512 KiB blocks fill one 2 MiB segment"
    );
    for &b in &blocks {
        pool.free(b).unwrap();
    }
    let big = pool.malloc(MIB).unwrap().get();
    assert_eq!(big, blocks[0], "the merged blocks serve it");
    assert_eq!(pool.stats().num_device_alloc, 1, "no growth");
    pool.free(big).unwrap();
    pool.check_invariants().unwrap();
}

#[test]
fn large_requests_prefer_blocks_in_small_segments() {
    let (pool, _) = pool();
    let a = pool.malloc(9 * MIB).unwrap().get(); // 20 MiB segment, 11 MiB left over
    let b = pool.malloc(11 * MIB + MIB / 2).unwrap().get(); // its own 12 MiB segment
    pool.free(b).unwrap();
    // A small request nothing fits merges the bins (b joins the free set).
    let d = pool.malloc(MIB).unwrap().get();
    // 10.5 MiB fits the 11 MiB leftover (smaller block) and b's 12 MiB
    // segment; taking b's keeps the 20 MiB segment from being pinned further.
    let c = pool.malloc(10 * MIB + MIB / 2).unwrap().get();
    assert_eq!(c, b);
    assert_eq!(pool.stats().segment[STAT_ALL].current, 3);
    pool.free(c).unwrap();
    pool.free(d).unwrap();
    pool.free(a).unwrap();
    pool.check_invariants().unwrap();
}

#[test]
fn growing_for_a_larger_request_returns_smaller_free_segments_first() {
    let (pool, device) = pool();
    let small = pool.malloc(11 * MIB).unwrap().get();
    pool.free(small).unwrap();
    assert_eq!(device.used(), 12 * MIB);
    let big = pool.malloc(15 * MIB).unwrap().get();
    assert_eq!(
        device.used(),
        16 * MIB,
        "the free 12 MiB segment could not serve it and went back"
    );
    assert_eq!(pool.stats().num_device_free, 1);
    pool.free(big).unwrap();
    // The bigger segment now serves the smaller size by splitting.
    let again = pool.malloc(11 * MIB).unwrap().get();
    assert_eq!(again, big);
    assert_eq!(pool.stats().num_device_alloc, 2);
    pool.free(again).unwrap();
}

#[test]
fn blocks_freed_by_one_stream_are_reused_only_by_that_stream() {
    let (pool, _) = pool();
    let a = pool.malloc_on(1, 4096).unwrap().get();
    pool.free(a).unwrap();
    let b = pool.malloc_on(2, 4096).unwrap().get();
    assert_ne!(a, b, "stream 2 does not get stream 1's freed block");
    assert_eq!(pool.malloc_on(1, 4096).unwrap().get(), a);
    let segments = pool.segments();
    let mut streams: Vec<_> = segments.iter().map(|s| s.stream).collect();
    streams.sort_unstable();
    assert_eq!(streams, [1, 2], "each stream has its own segment");
    // allocAdvise does not cross streams either.
    pool.free(b).unwrap();
    assert_ne!(pool.malloc_at_on(1, 4096, b).unwrap().get(), b);
    assert_eq!(pool.malloc_at_on(2, 4096, b).unwrap().get(), b);
    pool.check_invariants().unwrap();
}

#[test]
fn max_split_size_keeps_oversize_blocks_whole_and_away_from_small_requests() {
    let config = PoolConfig {
        max_split_size: 8 * MIB,
        ..PoolConfig::default()
    };
    let (pool, _) = pool_with(config, 1 << 30);
    let big = pool.malloc(9 * MIB).unwrap().get();
    let s = pool.stats();
    assert_eq!(s.max_split_size as usize, 8 * MIB);
    assert_eq!(s.oversize_allocations.current, 1);
    assert_eq!(s.oversize_segments.current, 1);
    assert_eq!(
        s.reserved_bytes[STAT_ALL].current as usize,
        10 * MIB,
        "tight segment, never split"
    );
    pool.free(big).unwrap();
    let mid = pool.malloc(3 * MIB).unwrap().get();
    assert_ne!(
        mid, big,
        "a request under max_split_size does not take an oversize block"
    );
    let again = pool.malloc(9 * MIB + 512).unwrap().get();
    assert_eq!(again, big, "an oversize request reuses it");
    assert_eq!(pool.stats().oversize_allocations.allocated, 2);
    pool.free(mid).unwrap();
    pool.free(again).unwrap();
    pool.check_invariants().unwrap();
}

fn oom(e: Error) -> (usize, usize, usize, usize, &'static str) {
    match e {
        Error::PoolOutOfMemory {
            requested,
            allocated,
            reserved,
            limit,
            cause,
        } => (requested, allocated, reserved, limit, cause),
        other => panic!("expected out of memory, got {other:?}"),
    }
}

#[test]
fn out_of_memory_releases_cached_segments_and_retries_once() {
    let config = PoolConfig {
        max_split_size: 32 * MIB,
        ..PoolConfig::default()
    };
    let (pool, device) = pool_with(config, 64 * MIB);
    let cached = pool.malloc(40 * MIB).unwrap().get();
    pool.free(cached).unwrap();
    let small = pool.malloc(MIB).unwrap().get();
    // 30 MiB may not take the 40 MiB oversize block and does not fit next to
    // it: the pool releases it and retries.
    let b = pool.malloc(30 * MIB).unwrap().get();
    let s = pool.stats();
    assert_eq!(s.num_alloc_retries, 1);
    assert_eq!(s.num_device_free, 1);
    assert_eq!(s.num_ooms, 0);
    assert_eq!(device.used(), 32 * MIB);
    // Now nothing can be released: a real out-of-memory.
    let e = pool.malloc(40 * MIB).unwrap_err();
    assert_eq!(
        oom(e),
        (
            40 * MIB,
            31 * MIB,
            32 * MIB,
            usize::MAX,
            "the device is out of memory"
        )
    );
    assert_eq!(
        e.to_string(),
        format!(
            "Out of memory in the caching pool. Reason: tried to allocate {} bytes with {} bytes allocated and {} bytes reserved by the pool, limit none; the device is out of memory",
            40 * MIB,
            31 * MIB,
            32 * MIB
        )
    );
    assert_eq!(
        e.code(),
        aclalloc::base::error::ACL_ERROR_RT_MEMORY_ALLOCATION
    );
    assert_eq!(pool.stats().num_ooms, 1);
    let e = pool.malloc(usize::MAX).unwrap_err();
    assert_eq!(oom(e).4, "the size is too large");
    assert_eq!(pool.stats().num_ooms, 2);
    pool.free(small).unwrap();
    pool.free(b).unwrap();
    pool.check_invariants().unwrap();
}

#[test]
fn the_limit_is_enforced_and_named_in_the_message() {
    let config = PoolConfig {
        limit: Limit::Bytes(8 * MIB),
        ..PoolConfig::default()
    };
    let (pool, _) = pool_with(config, 1 << 30);
    // 3 MiB normally gets a 20 MiB segment; under the limit it gets 4 MiB
    // (and the whole of it: a 1 MiB rest is not worth a large-pool split).
    let a = pool.malloc(3 * MIB).unwrap().get();
    assert_eq!(pool.memory_reserved(), 4 * MIB);
    let e = pool.malloc(5 * MIB).unwrap_err();
    assert_eq!(
        oom(e),
        (
            5 * MIB,
            4 * MIB,
            4 * MIB,
            8 * MIB,
            "the pool's memory limit would be exceeded"
        )
    );
    assert!(e.to_string().contains("limit 8388608 bytes"), "{e}");
    pool.set_limit(Limit::Fraction(0.5)).unwrap();
    assert_eq!(pool.limit(), 512 * MIB);
    let b = pool.malloc(5 * MIB).unwrap().get();
    assert!(pool.set_limit(Limit::Fraction(1.5)).is_err());
    pool.free(a).unwrap();
    pool.free(b).unwrap();
}

#[test]
fn garbage_collection_releases_free_segments_before_growing_past_the_threshold() {
    let config = PoolConfig {
        limit: Limit::Bytes(100 * MIB),
        garbage_collection_threshold: 0.5,
        max_split_size: 16 * MIB,
        ..PoolConfig::default()
    };
    let (pool, _) = pool_with(config, 1 << 30);
    let a = pool.malloc(40 * MIB).unwrap().get();
    pool.free(a).unwrap();
    assert_eq!(pool.memory_reserved(), 40 * MIB);
    // 20 MiB more would pass 50 MiB: the free 40 MiB segment goes first.
    let b = pool.malloc(2 * MIB).unwrap().get();
    assert_eq!(pool.memory_reserved(), 20 * MIB);
    assert_eq!(pool.stats().num_device_free, 1);
    pool.free(b).unwrap();
}

#[test]
fn alloc_advise_is_honoured_when_the_address_is_free() {
    let (pool, _) = pool();
    let a = pool.malloc(64 << 10).unwrap().get();
    let b = pool.malloc(64 << 10).unwrap().get();
    pool.free(a).unwrap();
    assert_eq!(
        pool.malloc_at(64 << 10, a).unwrap().get(),
        a,
        "a binned block"
    );
    // Inside a free region: the front stays free, the block starts there.
    let inside = b + (256 << 10);
    assert_eq!(pool.malloc_at(4096, inside).unwrap().get(), inside);
    pool.check_invariants().unwrap();
    // A live address, an unaligned one and a foreign one fall back to a normal block.
    let other = pool.malloc_at(4096, b).unwrap().get();
    assert_ne!(other, b);
    assert_ne!(
        pool.malloc_at(4096, inside + 1000).unwrap().get(),
        inside + 1000
    );
    let on_stack = 0u64;
    assert!(pool
        .malloc_at(4096, &on_stack as *const u64 as usize)
        .is_ok());
    pool.check_invariants().unwrap();
    assert_eq!(pool.stats().allocation[STAT_ALL].current, 6);
}

#[test]
fn bad_frees_are_reported_and_change_nothing() {
    let (pool, _) = pool();
    let a = pool.malloc(1000).unwrap().get();
    let b = pool.malloc(1000).unwrap().get();
    pool.free(a).unwrap();
    let before = pool.stats();
    // Typed errors (callers tell a double free from a foreign address by
    // the variant), with the reason CANN-style messages print.
    let reason = |r: Result<(), Error>| match r {
        Err(e @ (Error::PoolDoubleFree | Error::PoolForeignBlock)) => {
            let m = e.to_string();
            m["Parameter block is invalid. Reason: ".len()..].to_string()
        }
        other => panic!("expected a refused block, got {other:?}"),
    };
    assert_eq!(
        reason(pool.free(a)),
        "The block was already freed (double free)"
    );
    let on_stack = 0u64;
    assert_eq!(
        reason(pool.free(&on_stack as *const u64 as usize)),
        "It is not a block of this pool"
    );
    assert_eq!(
        reason(pool.free(b + 512)),
        "It is not a block of this pool",
        "an interior address"
    );
    assert_eq!(reason(pool.free(0)), "It is not a block of this pool");
    assert_eq!(pool.stats(), before);
    pool.check_invariants().unwrap();
    pool.free(b).unwrap();
    let other = pool_with(PoolConfig::default(), 1 << 30).0;
    let c = other.malloc(1000).unwrap().get();
    assert_eq!(reason(pool.free(c)), "It is not a block of this pool");
}

#[test]
fn peak_and_accumulated_resets() {
    let (pool, _) = pool();
    let a = pool.malloc(5 * MIB).unwrap().get();
    pool.free(a).unwrap();
    let s = pool.stats();
    assert_eq!(pool.max_memory_allocated(), 5 * MIB);
    assert_eq!(pool.memory_allocated(), 0);
    assert_eq!(pool.max_memory_reserved(), 20 * MIB);
    assert_eq!(s.num_device_alloc, 1);
    pool.reset_peak_stats();
    assert_eq!(pool.max_memory_allocated(), 0);
    assert_eq!(pool.max_memory_reserved(), 20 * MIB, "still reserved");
    pool.reset_accumulated_stats();
    let s = pool.stats();
    assert_eq!(
        (
            s.num_device_alloc,
            s.allocation[STAT_ALL].allocated,
            s.allocation[STAT_ALL].freed
        ),
        (0, 0, 0)
    );
    assert_eq!(s.reserved_bytes[STAT_ALL].current as usize, 20 * MIB);
}

#[test]
fn totals_after_a_reset_count_what_came_after_across_blocks_live_at_the_reset() {
    let (pool, _) = pool();
    let live = pool.malloc(5 * MIB).unwrap().get();
    let gone = pool.malloc(4096).unwrap().get();
    pool.free(gone).unwrap();
    pool.reset_accumulated_stats();
    // Freed after the reset: counted, though allocated before it.
    pool.free(live).unwrap();
    let again = pool.malloc(4096).unwrap().get();
    let s = pool.stats();
    let totals = |stat: &Stat| (stat.current, stat.allocated, stat.freed);
    assert_eq!(totals(&s.allocation[STAT_ALL]), (1, 1, 1));
    assert_eq!(
        totals(&s.allocated_bytes[STAT_ALL]),
        (4096, 4096, 5 * MIB as i64)
    );
    pool.free(again).unwrap();
    let s = pool.stats();
    assert_eq!(totals(&s.allocation[STAT_ALL]), (0, 1, 2));
    let by_pool = s.allocation[STAT_SMALL_POOL].freed + s.allocation[STAT_LARGE_POOL].freed;
    assert_eq!(s.allocation[STAT_ALL].freed, by_pool);
}

#[test]
fn trim_keeps_at_most_what_it_is_told() {
    let (pool, _) = pool();
    let blocks: Vec<_> = [12, 14, 16]
        .iter()
        .map(|m| pool.malloc(m * MIB).unwrap().get())
        .collect();
    for b in blocks {
        pool.free(b).unwrap();
    }
    assert_eq!(pool.memory_reserved(), 42 * MIB);
    assert_eq!(pool.trim(30 * MIB), 16 * MIB, "largest first");
    assert_eq!(pool.trim(13 * MIB), 14 * MIB);
    assert_eq!(pool.memory_reserved(), 12 * MIB);
    assert_eq!(pool.trim(0), 12 * MIB);
}

#[test]
fn summary_and_snapshot_describe_the_pool() {
    let (pool, _) = pool();
    let a = pool.malloc(1000).unwrap().get();
    let text = pool.summary();
    assert!(
        text.contains(
            "| Allocated memory      |   1024 B   |   1024 B   |   1024 B   |      0 B   |"
        ),
        "{text}"
    );
    assert!(
        text.contains("| Requested memory      |   1000 B   |"),
        "{text}"
    );
    assert!(
        text.contains("| Reserved memory       |   2048 KiB |"),
        "{text}"
    );
    assert!(
        text.contains("| Allocations           |       1    |"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&pool.snapshot_json()).unwrap();
    let hex = |v: usize| format!("{v:#x}");
    let expected = serde_json::json!({
        "version": 2,
        "device": 0,
        "segments": [{
            "device": 0,
            "address": hex(a),
            "total_size": 2097152,
            "stream": "0x0",
            "segment_type": "small",
            "is_expandable": false,
            "mapped_size": 2097152,
            "unmapped_size": 0,
            "allocated_size": 1024,
            "active_size": 1024,
            "requested_size": 1000,
            "blocks": [
                {"address": hex(a), "size": 1024, "requested_size": 1000, "state": "active_allocated"},
                {"address": hex(a + 1024), "size": 2096128, "requested_size": 0, "state": "inactive"}
            ]
        }],
        "device_traces": [[]],
        "history": {"enabled": false, "max_entries": 0, "entries": 0, "dropped": 0}
    });
    assert_eq!(json, expected);
    pool.free(a).unwrap();
}

#[test]
fn threads_share_one_pool() {
    let (pool, device) = pool();
    let pool = Arc::new(pool);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let pool = pool.clone();
            std::thread::spawn(move || {
                let mut live = Vec::new();
                let mut x = 0x9E37_79B9u64 + t;
                for i in 0..20_000 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if live.len() < 32 && (x % 3 != 0 || live.is_empty()) {
                        let size = [512, 4000, 100 << 10, 3 << 20][(x >> 8) as usize % 4];
                        let a = pool.malloc(size).unwrap().get();
                        unsafe { (a as *mut u64).write(i) };
                        live.push((a, i));
                    } else {
                        let (a, v) = live.swap_remove((x >> 16) as usize % live.len());
                        assert_eq!(
                            unsafe { (a as *const u64).read() },
                            v,
                            "another thread wrote into my block"
                        );
                        pool.free(a).unwrap();
                    }
                }
                for (a, _) in live {
                    pool.free(a).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    pool.check_invariants().unwrap();
    assert_eq!(pool.memory_allocated(), 0);
    pool.empty_cache();
    assert_eq!(device.used(), 0);
}

#[test]
fn a_closed_pool_refuses_everything() {
    let (pool, device) = pool();
    let a = pool.malloc(1000).unwrap().get();
    assert_eq!(pool.close_if_idle(), Err(1));
    pool.free(a).unwrap();
    assert_eq!(pool.close_if_idle(), Ok(()));
    assert_eq!(device.used(), 0);
    assert!(pool.malloc(1000).is_err());
    assert!(pool.free(a).is_err());
}

/// `roundup_power2_divisions` from a `PYTORCH_NPU_ALLOC_CONF` string:
/// PyTorch's documented example (4 divisions: 1200 MiB becomes 1280 MiB),
/// and requests of nearby sizes then share one cached block.
#[test]
fn roundup_power2_divisions_round_requests_as_pytorch() {
    let config = PoolConfig::default()
        .with_conf("roundup_power2_divisions:4")
        .unwrap();
    let (pool, _) = pool_with(config, 2 << 30);
    let a = pool.malloc(1200 * MIB).unwrap().get();
    let s = pool.stats();
    assert_eq!(s.allocated_bytes[STAT_ALL].current, 1280 * MIB as i64);
    assert_eq!(s.requested_bytes[STAT_ALL].current, 1200 * MIB as i64);
    let block = pool
        .segments()
        .iter()
        .flat_map(|seg| seg.blocks.clone())
        .find(|b| b.address == a)
        .unwrap();
    assert_eq!(block.size, 1280 * MIB);
    pool.free(a).unwrap();
    // 1100 MiB rounds to 1280 MiB too: the cached block serves it.
    let b = pool.malloc(1100 * MIB).unwrap().get();
    assert_eq!(b, a);
    assert_eq!(pool.stats().num_device_alloc, 1);
    pool.free(b).unwrap();
    // Without divisions the same two requests need two segments.
    let (plain, _) = pool_with(PoolConfig::default(), 4 << 30);
    let a = plain.malloc(1100 * MIB).unwrap().get();
    plain.free(a).unwrap();
    let b = plain.malloc(1200 * MIB).unwrap().get();
    assert_ne!(a, b);
    assert_eq!(plain.stats().num_device_alloc, 2);
    plain.free(b).unwrap();

    // Per interval: [256:1,512:2,1024:4,>:8] leaves small sizes at 512
    // bytes and rounds 600 MiB to 768 MiB (2 divisions of [512, 1024)).
    let config = PoolConfig::default()
        .with_conf("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]")
        .unwrap();
    let (pool, _) = pool_with(config, 2 << 30);
    let small = pool.malloc(3000).unwrap().get();
    let big = pool.malloc(600 * MIB).unwrap().get();
    let s = pool.stats();
    assert_eq!(
        s.allocated_bytes[STAT_ALL].current,
        (3072 + 768 * MIB) as i64
    );
    pool.free(small).unwrap();
    pool.free(big).unwrap();
    assert_eq!(pool.check_invariants(), Ok(()));
}

/// `expandable_segments:True` in the configuration string chooses the
/// expandable pool.
#[test]
fn the_conf_string_chooses_expandable_segments() {
    for (conf, expandable) in [
        ("expandable_segments:True", true),
        ("expandable_segments:False", false),
    ] {
        let config = PoolConfig::default().with_conf(conf).unwrap();
        let (pool, device) = pool_with(config, 256 * MIB);
        assert_eq!(pool.config().expandable_segments, expandable);
        let a = pool.malloc(3 * MIB).unwrap().get();
        let segments = pool.segments();
        assert!(
            segments.iter().all(|s| s.is_expandable == expandable),
            "{conf}"
        );
        // Expandable: only the pages under the block are mapped (2 MiB
        // pages); fixed: a 20 MiB segment.
        let reserved = if expandable { 4 * MIB } else { 20 * MIB };
        assert_eq!(pool.memory_reserved(), reserved, "{conf}");
        assert_eq!(device.used(), reserved, "{conf}");
        pool.free(a).unwrap();
    }
}

/// A destroyed stream's cache goes back to the device at once, its live
/// blocks' segments once they are freed.
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

#[test]
fn stats_resets_touch_only_what_they_name() {
    let mut s = PoolStats::default();
    s.reserved_bytes[STAT_ALL].increase(100);
    s.reserved_bytes[STAT_ALL].decrease(60);
    s.num_device_alloc = 1;
    s.max_split_size = 7;
    s.reset_peak();
    assert_eq!(s.reserved_bytes[STAT_ALL].peak, 40);
    assert_eq!(s.reserved_bytes[STAT_ALL].allocated, 100);
    s.reset_accumulated();
    assert_eq!(
        s.reserved_bytes[STAT_ALL],
        Stat {
            current: 40,
            peak: 40,
            allocated: 0,
            freed: 0
        }
    );
    assert_eq!((s.num_device_alloc, s.max_split_size), (0, 7));
}

#[test]
fn stat_peak_follows_current_and_totals_accumulate() {
    let mut s = Stat::default();
    s.increase(10);
    s.increase(5);
    s.decrease(10);
    s.increase(2);
    assert_eq!(
        s,
        Stat {
            current: 7,
            peak: 15,
            allocated: 17,
            freed: 10
        }
    );
}

#[test]
fn blocks_are_found_by_address_across_released_and_new_segments() {
    let (pool, _) = pool();
    // Small and large segments, so the blocks span many 2 MiB ranges.
    let sizes = [512, 3 << 20, 12 << 20, 1 << 20, 4096, 48 << 10];
    for round in 0..3 {
        let live: Vec<usize> = sizes
            .iter()
            .cycle()
            .take(30)
            .map(|&s| pool.malloc(s).unwrap().get())
            .collect();
        assert_eq!(pool.live_blocks(), live.len());
        assert!(pool.free(live[0] + 1).is_err(), "an unaligned address");
        for &a in live.iter().rev() {
            pool.free(a).unwrap();
        }
        for &a in &live {
            assert!(pool.free(a).is_err(), "round {round}: {a:#x} freed twice");
        }
        assert_eq!(pool.live_blocks(), 0);
        pool.check_invariants().unwrap();
        // The next round's segments may reuse these addresses.
        assert!(pool.empty_cache() > 0);
    }
}
