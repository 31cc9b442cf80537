//! Model-based property tests of the pool with expandable segments: random
//! alloc/free/empty_cache/empty_virt_addr_cache sequences over several
//! streams on a small host "device". After every step: no two live blocks
//! overlap and each keeps the bytes written into it (so each is mapped,
//! read-write, and not shared); the statistics equal the model and the
//! pool's own recount; the mapped memory (`reserved_bytes`) is exactly what
//! the device has handed out; a stream gets another reservation only when
//! none of its own has a free range for the request. After a release, the
//! mapped pages are exactly the pages under live blocks; `trim(keep)` unmaps
//! free pages only down to `keep`; with garbage collection, an allocation
//! that maps new pages leaves at most the threshold (plus the block's last
//! page) mapped unless live blocks need more. An allocation fails only when
//! the device truly lacks the pages it needs.

use aclalloc::pool::{HostMemory, Limit, Pool, PoolConfig, STAT_ALL};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

const MIB: usize = 1 << 20;
const PAGE: usize = 2 * MIB;
const CAPACITY: usize = 96 * MIB;

#[derive(Clone, Debug)]
enum Op {
    Alloc(usize, usize),
    Free(usize),
    EmptyCache,
    EmptyVirtAddrCache,
    Trim(usize),
    /// `n` allocations of one size on a stream, all freed, then `n` again
    /// with no read in between: the thread's cache parks and serves them.
    Churn(usize, usize, usize),
}

fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => 1usize..4096,
        2 => 4096usize..=MIB,
        3 => (MIB + 1)..24 * MIB,
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (0usize..3, size()).prop_map(|(st, s)| Op::Alloc(st, s)),
        8 => any::<usize>().prop_map(Op::Free),
        1 => Just(Op::EmptyCache),
        1 => Just(Op::EmptyVirtAddrCache),
        1 => (0usize..64 * MIB).prop_map(Op::Trim),
        3 => (0usize..3, size(), 1usize..12).prop_map(|(st, s, n)| Op::Churn(st, s, n)),
    ]
}

struct Live {
    size: usize,
    tag: u8,
}

fn pattern(addr: usize, size: usize, tag: u8) {
    // SAFETY: the block is live and at least `size` bytes long.
    unsafe {
        ((addr + size - 1) as *mut u8).write(tag.wrapping_add(1));
        (addr as *mut u8).write(tag); // a 1-byte block holds only this
    }
}

fn intact(addr: usize, size: usize, tag: u8) -> bool {
    // SAFETY: as in `pattern`.
    unsafe {
        *(addr as *const u8) == tag
            && (size == 1 || *((addr + size - 1) as *const u8) == tag.wrapping_add(1))
    }
}

/// Pages (by address) under the live blocks, from the pool's own view.
fn pages_under_live_blocks(pool: &Pool) -> BTreeSet<usize> {
    let mut pages = BTreeSet::new();
    for seg in pool.segments() {
        assert!(
            seg.is_expandable,
            "an expandable pool has only expandable segments"
        );
        for b in seg.blocks.iter().filter(|b| b.allocated) {
            let first = b.address / PAGE;
            let last = (b.address + b.size - 1) / PAGE;
            pages.extend((first..=last).map(|p| p * PAGE));
        }
    }
    pages
}

/// A pool configured by `config` on a host "device" of `capacity` bytes,
/// and the device (to see what is mapped).
fn pool_on(capacity: usize, config: PoolConfig) -> (Pool, Arc<HostMemory>) {
    let device = Arc::new(HostMemory::new(capacity));
    (Pool::new(config, Arc::clone(&device)).unwrap(), device)
}

/// The defaults with expandable segments.
fn expandable() -> PoolConfig {
    PoolConfig {
        expandable_segments: true,
        ..PoolConfig::default()
    }
}

/// A block the pool just handed out enters the model: it overlaps no live
/// block, and is marked with the next tag.
fn take_in(
    live: &mut BTreeMap<usize, Live>,
    next_tag: &mut u8,
    addr: usize,
    size: usize,
) -> Result<(), TestCaseError> {
    if let Some((&a, l)) = live.range(..addr + size).next_back() {
        prop_assert!(a + l.size <= addr, "overlap at {:#x}", addr);
    }
    *next_tag = next_tag.wrapping_add(2);
    pattern(addr, size, *next_tag);
    live.insert(
        addr,
        Live {
            size,
            tag: *next_tag,
        },
    );
    Ok(())
}

/// The size the pool rounds a request to with the default configuration.
fn rounded(size: usize) -> usize {
    size.max(1).next_multiple_of(512)
}

/// The largest free range on `stream`'s reservations of the pool (small or
/// large) that a request of `size` bytes is taken from: a request gets a new
/// reservation only when this is smaller than the rounded request.
fn largest_free_range(pool: &Pool, stream: usize, size: usize) -> usize {
    let small = rounded(size) <= MIB;
    pool.segments()
        .iter()
        .filter(|s| s.stream == stream && s.small == small)
        .flat_map(|s| s.blocks.iter())
        .filter(|b| !b.allocated)
        .map(|b| b.size)
        .max()
        .unwrap_or(0)
}

/// Garbage collection's threshold in the `gc` runs: half the device.
const GC_TARGET: usize = CAPACITY / 2;

fn run(ops: Vec<Op>, gc: bool) -> Result<(), TestCaseError> {
    let config = PoolConfig {
        expandable_segments: true,
        // The limit is the device: out of memory means the same either way.
        limit: if gc {
            Limit::Bytes(CAPACITY)
        } else {
            Limit::None
        },
        garbage_collection_threshold: if gc { 0.5 } else { 0.0 },
        ..PoolConfig::default()
    };
    let (pool, device) = pool_on(CAPACITY, config);
    prop_assert!(pool.config().expandable_segments);
    let mut live: BTreeMap<usize, Live> = BTreeMap::new();
    let mut requested = 0usize;
    let mut next_tag = 0u8;
    for op in ops {
        let used_before = device.used();
        match op {
            Op::Alloc(stream, size) => {
                let stream = stream + 1;
                let room_before = largest_free_range(&pool, stream, size);
                let reservations_before = pool.segments().len();
                match pool.malloc_on(stream, size) {
                    Ok(addr) => {
                        let addr = addr.get();
                        if pool.segments().len() > reservations_before {
                            prop_assert!(
                                room_before < rounded(size),
                                "new reservation for {size} B on stream {stream}: \
                                 a free range of {room_before} B was there"
                            );
                        }
                        if gc && device.used() > used_before {
                            let live_pages = pages_under_live_blocks(&pool).len() * PAGE;
                            prop_assert!(
                                device.used() <= (GC_TARGET + PAGE).max(live_pages),
                                "{} bytes mapped, {} under live blocks",
                                device.used(),
                                live_pages
                            );
                        }
                        prop_assert_eq!(addr % 512, 0);
                        take_in(&mut live, &mut next_tag, addr, size)?;
                        requested += size;
                    }
                    Err(e) => {
                        // Out of memory only when the device truly lacks the pages:
                        // a block of `size` bytes needs at most its size in new
                        // pages plus one (a large block may keep up to 1 MiB more).
                        let free = CAPACITY - device.used();
                        let need = (size.div_ceil(PAGE) + 1) * PAGE;
                        prop_assert!(free < need, "{e}: {free} bytes free, {need} needed");
                        // The out-of-memory path unmapped every page without a
                        // live block first.
                        let pages = pages_under_live_blocks(&pool);
                        prop_assert_eq!(device.used(), pages.len() * PAGE);
                    }
                }
            }
            Op::Free(i) => {
                if live.is_empty() {
                    continue;
                }
                let addr = *live.keys().nth(i % live.len()).unwrap();
                let l = live.remove(&addr).unwrap();
                prop_assert!(
                    intact(addr, l.size, l.tag),
                    "block {:#x} was overwritten",
                    addr
                );
                pool.free(addr).unwrap();
                prop_assert!(pool.free(addr).is_err(), "double free refused");
                requested -= l.size;
            }
            Op::Churn(stream, size, n) => {
                let stream = stream + 1; // as `Alloc`'s streams
                let got: Vec<usize> = (0..n)
                    .map_while(|_| pool.malloc_on(stream, size).ok())
                    .map(|a| a.get())
                    .collect();
                for &a in &got {
                    pool.free(a).unwrap();
                }
                for _ in 0..got.len() {
                    let a = pool.malloc_on(stream, size);
                    prop_assert!(
                        a.is_ok(),
                        "memory freed just before is not served again: {:?}",
                        a
                    );
                    let addr = a.unwrap().get();
                    take_in(&mut live, &mut next_tag, addr, size)?;
                    requested += size;
                }
            }
            Op::EmptyCache => {
                pool.empty_cache();
                let pages = pages_under_live_blocks(&pool);
                prop_assert_eq!(pool.memory_reserved(), pages.len() * PAGE);
            }
            Op::EmptyVirtAddrCache => {
                pool.empty_virt_addr_cache();
                let streams_in_use: BTreeSet<usize> = pool
                    .segments()
                    .iter()
                    .inspect(|s| assert!(s.blocks.iter().any(|b| b.allocated)))
                    .map(|s| s.stream)
                    .collect();
                prop_assert!(streams_in_use.len() <= 3);
            }
            Op::Trim(keep) => {
                let before = pool.memory_reserved();
                pool.trim(keep);
                let after = pool.memory_reserved();
                if before <= keep {
                    prop_assert_eq!(after, before, "nothing to trim");
                } else {
                    // Down to `keep`, one page past it at most, or as far as
                    // the live blocks allow.
                    let live_pages = pages_under_live_blocks(&pool).len() * PAGE;
                    prop_assert!(
                        after <= keep || after == live_pages,
                        "trim({}) left {} reserved, {} under live blocks",
                        keep,
                        after,
                        live_pages
                    );
                    prop_assert!(after + PAGE > keep, "trim({}) went down to {}", keep, after);
                }
            }
        }
        for (&addr, l) in &live {
            prop_assert!(
                intact(addr, l.size, l.tag),
                "block {:#x} was overwritten",
                addr
            );
        }
        let s = pool.stats();
        prop_assert_eq!(s.allocation[STAT_ALL].current as usize, live.len());
        prop_assert_eq!(s.requested_bytes[STAT_ALL].current as usize, requested);
        prop_assert_eq!(s.reserved_bytes[STAT_ALL].current as usize, device.used());
        prop_assert!(s.reserved_bytes[STAT_ALL].current % PAGE as i64 == 0);
        prop_assert_eq!(pool.check_invariants(), Ok(()));
    }
    for &addr in live.keys() {
        pool.free(addr).unwrap();
    }
    pool.empty_cache();
    prop_assert_eq!(device.used(), 0, "nothing mapped once everything is free");
    // How many reservations a stream needs depends on how its live blocks
    // fragmented the address space (each new one was checked to be needed
    // when it was made): all of them go back.
    let reservations = pool.segments().len();
    prop_assert_eq!(pool.empty_virt_addr_cache(), reservations);
    prop_assert!(pool.segments().is_empty(), "every reservation released");
    drop(pool);
    prop_assert_eq!(device.used(), 0);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn expandable_pool_matches_its_model(ops in prop::collection::vec(op(), 1..120)) {
        run(ops, false)?;
    }

    #[test]
    fn garbage_collection_unmaps_down_to_the_threshold(ops in prop::collection::vec(op(), 1..120)) {
        run(ops, true)?;
    }
}

/// Free ranges anywhere serve a larger request: with fixed segments this
/// trace runs out of memory, with expandable segments it fits.
#[test]
fn freed_ranges_are_reused_for_larger_requests() {
    for expandable in [false, true] {
        let config = PoolConfig {
            expandable_segments: expandable,
            ..PoolConfig::default()
        };
        let (pool, _device) = pool_on(64 * MIB, config);
        // Twelve 4.5 MiB blocks, then free every other one: 27 MiB free in
        // 4.5 MiB holes.
        let blocks: Vec<usize> = (0..12)
            .map(|_| pool.malloc(9 * MIB / 2).unwrap().get())
            .collect();
        for b in blocks.iter().step_by(2) {
            pool.free(*b).unwrap();
        }
        let big = pool.malloc(24 * MIB);
        assert_eq!(big.is_ok(), expandable, "expandable: {expandable}");
        if expandable {
            // Every page under a live block is mapped, and no more.
            let s = pool.stats();
            assert!(s.reserved_bytes[STAT_ALL].current as usize <= 64 * MIB);
            assert_eq!(s.num_alloc_retries, 1);
        }
    }
}

/// Snapshot and statistics show the mapped and unmapped parts.
#[test]
fn snapshot_shows_mapped_and_unmapped_parts() {
    let (pool, device) = pool_on(64 * MIB, expandable());
    let a = pool.malloc(3 * MIB).unwrap().get();
    let json = pool.snapshot_json();
    assert!(
        json.contains("\"segment_type\":\"large\",\"is_expandable\":true,\"mapped_size\":4194304,"),
        "{json}"
    );
    let total = pool.segments()[0].total_size;
    assert!(
        json.contains(&format!("\"unmapped_size\":{}", total - 4 * MIB)),
        "{json}"
    );
    assert_eq!(pool.memory_reserved(), 4 * MIB);
    assert_eq!(pool.stats().segment[STAT_ALL].current, 1);
    let summary = pool.summary();
    // The reservation is 72 MiB (1 1/8 of the device): 68 MiB unmapped,
    // shown in KiB below 768 MiB as PyTorch's summary does.
    assert_eq!(total, 72 * MIB);
    let line = "| Expandable segments: 1, mapped 4096 KiB, unmapped 69632 KiB";
    assert!(summary.contains(line), "{summary}");
    assert!(
        summary.lines().all(|l| l.chars().count() == 77),
        "{summary}"
    );
    pool.free(a).unwrap();
    assert_eq!(pool.memory_reserved(), 4 * MIB, "cached, still mapped");
    assert_eq!(pool.empty_virt_addr_cache(), 1);
    assert_eq!(pool.memory_reserved(), 0);
    assert_eq!(device.used(), 0);
    assert!(pool.segments().is_empty());
}

/// Threads on their own streams allocate, write, check and free under memory
/// pressure, so that mapping, the out-of-memory unmapping and the retry run
/// while other threads hold live blocks: no block loses its contents, every
/// failure is an out-of-memory error, and everything is given back.
#[test]
fn threads_under_memory_pressure_keep_their_blocks() {
    // Four threads keep up to six blocks of up to 8 MiB each: about 80 MiB
    // live on average, more than the device holds.
    let (pool, device) = pool_on(64 * MIB, expandable());
    let pool = Arc::new(pool);
    // Halfway, every thread waits for the others: on a loaded machine the
    // threads could otherwise run one after another and never press.
    let halfway = std::sync::Barrier::new(4);
    let ooms: usize = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4u64)
            .map(|t| {
                let pool = Arc::clone(&pool);
                let halfway = &halfway;
                scope.spawn(move || {
                    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (t + 1);
                    let mut next = move || {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x
                    };
                    let mut live: Vec<(usize, usize, u8)> = Vec::new();
                    let mut ooms = 0;
                    for i in 0..2000u32 {
                        if i == 1000 {
                            halfway.wait();
                        }
                        if live.len() >= 6 || (!live.is_empty() && next() % 3 == 0) {
                            let (addr, size, tag) = live.swap_remove(next() as usize % live.len());
                            assert!(intact(addr, size, tag), "thread {t}: block overwritten");
                            pool.free(addr).unwrap();
                        } else {
                            let size = 1 + next() as usize % (8 * MIB);
                            match pool.malloc_on(t as usize + 1, size) {
                                Ok(a) => {
                                    let tag = (i % 200) as u8;
                                    pattern(a.get(), size, tag);
                                    live.push((a.get(), size, tag));
                                }
                                Err(e) => {
                                    assert!(e.to_string().contains("Out of memory"), "{e}");
                                    ooms += 1;
                                }
                            }
                        }
                        for &(addr, size, tag) in &live {
                            assert!(intact(addr, size, tag), "thread {t}: block overwritten");
                        }
                    }
                    for (addr, _, _) in live {
                        pool.free(addr).unwrap();
                    }
                    ooms
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(pool.check_invariants(), Ok(()));
    pool.empty_cache();
    assert_eq!(device.used(), 0);
    assert_eq!(pool.memory_reserved(), 0);
    println!("out-of-memory failures under pressure: {ooms}");
    assert!(
        ooms > 0,
        "the device was never short: the test did not test"
    );
}

/// `trim(keep)` unmaps pages holding no live block until `keep` bytes stay
/// mapped, and never a page under a live block.
#[test]
fn trim_unmaps_free_pages_down_to_keep() {
    let (pool, device) = pool_on(64 * MIB, expandable());
    let blocks: Vec<usize> = (0..4)
        .map(|_| pool.malloc(8 * MIB).unwrap().get())
        .collect();
    for &b in &blocks[1..] {
        pool.free(b).unwrap();
    }
    assert_eq!(pool.memory_reserved(), 32 * MIB, "freeing unmaps nothing");
    assert_eq!(pool.trim(40 * MIB), 0, "already under keep");
    assert_eq!(pool.trim(20 * MIB), 12 * MIB);
    assert_eq!(pool.memory_reserved(), 20 * MIB);
    assert_eq!(device.used(), 20 * MIB);
    // Not below the live block's pages.
    assert_eq!(pool.trim(0), 12 * MIB);
    assert_eq!(pool.memory_reserved(), 8 * MIB);
    // SAFETY: the live block has 8 MiB of mapped memory.
    unsafe { ((blocks[0] + 8 * MIB - 1) as *mut u8).write(7) };
    assert_eq!(pool.stats().num_device_free, 12);
    assert_eq!(pool.check_invariants(), Ok(()));
    pool.free(blocks[0]).unwrap();
    assert_eq!(pool.trim(0), 8 * MIB);
    assert_eq!(device.used(), 0);
}

/// With `garbage_collection_threshold`, mapping new pages past the
/// threshold first unmaps pages holding no live block, in any stream.
#[test]
fn garbage_collection_unmaps_free_pages_before_mapping_past_the_threshold() {
    for gc in [0.0, 0.5] {
        let config = PoolConfig {
            limit: Limit::Bytes(64 * MIB),
            garbage_collection_threshold: gc,
            ..expandable()
        };
        let (pool, device) = pool_on(128 * MIB, config);
        let a = pool.malloc_on(1, 24 * MIB).unwrap().get();
        pool.free(a).unwrap();
        assert_eq!(pool.memory_reserved(), 24 * MIB);
        // Another stream: its own reservation, new pages.
        let b = pool.malloc_on(2, 16 * MIB).unwrap().get();
        let s = pool.stats();
        if gc > 0.0 {
            // 24 + 16 would pass 32 MiB: 8 MiB of stream 1's free pages go.
            assert_eq!(s.reserved_bytes[STAT_ALL].current as usize, 32 * MIB);
            assert_eq!(s.num_device_free, 4);
        } else {
            assert_eq!(s.reserved_bytes[STAT_ALL].current as usize, 40 * MIB);
            assert_eq!(s.num_device_free, 0);
        }
        assert_eq!(
            s.num_alloc_retries, 0,
            "collection is not an out-of-memory retry"
        );
        assert_eq!(s.num_ooms, 0);
        // A cached, mapped block is served without collecting.
        let a = pool.malloc_on(1, 8 * MIB).unwrap().get();
        assert_eq!(pool.stats().num_device_free, s.num_device_free);
        assert_eq!(device.used(), pool.memory_reserved());
        assert_eq!(pool.check_invariants(), Ok(()));
        pool.free(a).unwrap();
        pool.free(b).unwrap();
    }
}
