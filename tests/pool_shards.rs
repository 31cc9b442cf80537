//! The pool split into per-stream shards: peaks stay the exact pool-wide
//! maxima when streams in different shards take turns, frees find their
//! block from any thread, and threads on different streams keep every
//! invariant while statistics are read concurrently.

use aclalloc::pool::{HostMemory, Pool, PoolConfig, PoolStats};
use proptest::prelude::*;
use std::sync::Arc;

const MIB: usize = 1 << 20;

/// Every (current, peak) pair of the flat key export.
fn currents_and_peaks(s: &PoolStats) -> Vec<(&'static str, i64, i64)> {
    let kv = s.key_values();
    kv.iter()
        .filter_map(|&(k, v)| {
            let base = k.strip_suffix(".current")?;
            let peak = s.get(&format!("{base}.peak"))?;
            Some((k, v, peak))
        })
        .collect()
}

#[derive(Clone, Debug)]
enum Op {
    Alloc(usize, usize),
    Free(usize),
    EmptyCache,
    ResetPeaks,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0usize..12, prop_oneof![0usize..8192, 8192usize..3 * MIB]).prop_map(|(st, s)| Op::Alloc(st, s)),
        8 => any::<usize>().prop_map(Op::Free),
        1 => Just(Op::EmptyCache),
        1 => Just(Op::ResetPeaks),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Each operation moves a statistic down before it moves it up, so on one
    /// thread the peak must be the running maximum of the values read after
    /// each operation: no more (a shard's headroom counted twice), no less.
    #[test]
    fn peaks_are_the_running_maxima_across_streams(ops in prop::collection::vec(op(), 1..200)) {
        let pool = Pool::new(PoolConfig::default(), HostMemory::new(1 << 30)).unwrap();
        let mut live: Vec<usize> = Vec::new();
        let mut max: Vec<i64> = currents_and_peaks(&pool.stats()).iter().map(|c| c.1).collect();
        for op in ops {
            match op {
                Op::Alloc(stream, size) => live.push(pool.malloc_on(stream * 0x240, size).unwrap().get()),
                Op::Free(i) if !live.is_empty() => pool.free(live.swap_remove(i % live.len())).unwrap(),
                Op::Free(_) => {}
                Op::EmptyCache => { pool.empty_cache(); }
                Op::ResetPeaks => {
                    pool.reset_peak_stats();
                    max = currents_and_peaks(&pool.stats()).iter().map(|c| c.1).collect();
                }
            }
            pool.check_invariants().map_err(TestCaseError::fail)?;
            for (m, (key, current, peak)) in max.iter_mut().zip(currents_and_peaks(&pool.stats())) {
                *m = (*m).max(current);
                prop_assert_eq!(peak, *m, "{}", key);
            }
        }
    }
}

#[test]
fn a_block_is_freed_from_any_thread_and_double_frees_are_caught() {
    let pool = Arc::new(Pool::new(PoolConfig::default(), HostMemory::new(1 << 30)).unwrap());
    let blocks: Vec<usize> = (1..=10)
        .map(|stream| pool.malloc_on(stream, 4096).unwrap().get())
        .collect();
    let p = pool.clone();
    let freer = std::thread::spawn(move || {
        for &b in &blocks {
            p.free(b).unwrap();
        }
        for &b in &blocks {
            let e = p.free(b).unwrap_err().to_string();
            assert!(e.contains("double free"), "{e}");
        }
    });
    freer.join().unwrap();
    assert!(pool.free(12345 * 512).is_err());
    assert_eq!(pool.live_blocks(), 0);
    let s = pool.stats();
    assert_eq!(s.allocation[0].peak, 10);
    assert_eq!(s.allocated_bytes[0].peak, 10 * 4096);
    pool.check_invariants().unwrap();
}

#[test]
fn threads_on_different_streams_with_a_concurrent_reader() {
    let pool = Arc::new(Pool::new(PoolConfig::default(), HostMemory::new(1 << 32)).unwrap());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (pool, stop) = (pool.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut reads = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let s = pool.stats();
                for (key, current, peak) in currents_and_peaks(&s) {
                    assert!(current <= peak, "{key}: {current} > {peak}");
                }
                assert!(s.allocated_bytes[0].current <= s.reserved_bytes[0].current);
                reads += 1;
            }
            reads
        })
    };
    let workers: Vec<_> = (0..4usize)
        .map(|t| {
            let pool = pool.clone();
            std::thread::spawn(move || {
                let stream = (t + 1) * 0x1000;
                let mut held = Vec::new();
                for i in 0..20_000usize {
                    let size = 512 * (1 + (i * 7 + t) % 64) + (i % 3) * MIB;
                    held.push(pool.malloc_on(stream, size).unwrap().get());
                    if held.len() > 8 || i % 5 == 0 {
                        pool.free(held.swap_remove(i % held.len())).unwrap();
                    }
                }
                // Freed on another stream's thread below.
                held
            })
        })
        .collect();
    let held: Vec<Vec<usize>> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    pool.check_invariants().unwrap();
    for b in held.into_iter().rev().flatten() {
        pool.free(b).unwrap();
    }
    pool.check_invariants().unwrap();
    let s = pool.stats();
    assert_eq!(s.allocation[0].current, 0);
    assert_eq!(s.allocation[0].allocated, s.allocation[0].freed);
    assert!(s.allocation[0].peak <= 4 * 9);
    pool.empty_cache();
    assert_eq!(pool.memory_reserved(), 0);
}

/// Stress of the threads' caches (crates/aclalloc-pool/src/thread_cache.rs) and their
/// lock-free fast path: threads on their own streams churn blocks of a few
/// sizes (parked and handed out by their caches), hand some to a neighbour
/// who frees them (taken back from the owner's cache while the owner runs),
/// and exit holding blocks, while a reader drains every cache through
/// `stats`, `empty_cache` and `reset_peak_stats` the whole time. Every
/// total is exact at the end and every block is served once.
#[test]
fn thread_caches_under_concurrent_drains_and_foreign_frees() {
    use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
    use std::sync::mpsc;
    let pool = Arc::new(Pool::new(PoolConfig::default(), HostMemory::new(1 << 32)).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let allocs = Arc::new(AtomicI64::new(0));
    let reader = {
        let (pool, stop) = (pool.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let s = pool.stats();
                for (key, current, peak) in currents_and_peaks(&s) {
                    assert!(current <= peak, "{key}: {current} > {peak}");
                }
                assert!(s.allocated_bytes[0].current <= s.reserved_bytes[0].current);
                assert_eq!(
                    s.allocation[0].allocated - s.allocation[0].freed,
                    s.allocation[0].current
                );
                match reads % 16 {
                    0 => {
                        pool.empty_cache();
                    }
                    1 => pool.reset_peak_stats(),
                    _ => {}
                }
                reads += 1;
            }
            reads
        })
    };
    const THREADS: usize = 4;
    let (senders, receivers): (Vec<_>, Vec<_>) =
        (0..THREADS).map(|_| mpsc::channel::<usize>()).unzip();
    let workers: Vec<_> = receivers
        .into_iter()
        .enumerate()
        .map(|(t, from_neighbour)| {
            let (pool, allocs) = (pool.clone(), allocs.clone());
            let to_neighbour = senders[(t + 1) % THREADS].clone();
            std::thread::spawn(move || {
                let stream = (t + 1) * 0x1000;
                let mut held: Vec<(usize, u64)> = Vec::new();
                for i in 0..30_000usize {
                    let size = 4096 * (1 + (i + t) % 3);
                    let addr = pool.malloc_on(stream, size).unwrap().get();
                    allocs.fetch_add(1, Ordering::Relaxed);
                    let tag = ((t as u64) << 32) | i as u64;
                    // SAFETY: host memory of at least `size` bytes, ours now.
                    unsafe { (addr as *mut u64).write(tag) };
                    held.push((addr, tag));
                    if i % 7 == 0 {
                        let (addr, tag) = held.swap_remove(0);
                        assert_eq!(unsafe { (addr as *const u64).read() }, tag);
                        to_neighbour.send(addr).unwrap();
                    }
                    while held.len() > 4 {
                        let (addr, tag) = held.swap_remove(i % held.len());
                        // A block served twice would have been overwritten.
                        assert_eq!(unsafe { (addr as *const u64).read() }, tag);
                        pool.free(addr).unwrap();
                    }
                    while let Ok(addr) = from_neighbour.try_recv() {
                        // (No second free here: the owner may already have
                        // the block again; tests/pool_model.rs checks those.)
                        pool.free(addr).unwrap();
                    }
                }
                drop(to_neighbour);
                // Exits holding blocks (its cache is given up).
                (
                    held.into_iter().map(|h| h.0).collect::<Vec<_>>(),
                    from_neighbour,
                )
            })
        })
        .collect();
    drop(senders);
    // Every worker joined before any receiver is dropped.
    let results: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    let mut leftovers = Vec::new();
    for (held, rx) in results {
        leftovers.extend(held);
        leftovers.extend(rx.try_iter());
    }
    stop.store(true, Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    pool.check_invariants().unwrap();
    let s = pool.stats();
    assert_eq!(s.allocation[0].current as usize, leftovers.len());
    for b in leftovers {
        pool.free(b).unwrap();
    }
    pool.check_invariants().unwrap();
    let s = pool.stats();
    let n = allocs.load(Ordering::Relaxed);
    assert_eq!(s.allocation[0].current, 0);
    assert_eq!((s.allocation[0].allocated, s.allocation[0].freed), (n, n));
    pool.empty_cache();
    assert_eq!(pool.memory_reserved(), 0);
}
