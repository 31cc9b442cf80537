//! Property tests of the caching pool against a simple model: random
//! alloc/free/advise/empty_cache/trim sequences never hand out overlapping
//! blocks, every block is 512-byte aligned and inside a segment, the
//! statistics always equal what the model and the block lists say, failures
//! are real out-of-memory conditions, and freeing everything then
//! `empty_cache` leaves nothing reserved.
//!
//! Runs of frees and allocations without a read in between, frees on
//! another thread and threads that exit holding blocks exercise the
//! threads' caches (crates/aclalloc-pool/src/thread_cache.rs); the totals and peaks of the
//! counts and requested bytes must stay exactly the model's.
//!
//! A stream that waits on an event recorded on another stream after its
//! frees takes that stream's wholly free segments instead of growing
//! (`registry::order`); blocks still come only from their stream's segments.

use aclalloc::pool::{
    HostMemory, Limit, Pool, PoolConfig, STAT_ALL, STAT_LARGE_POOL, STAT_SMALL_POOL,
};
use aclalloc::registry::order;
use proptest::prelude::*;
use std::sync::Arc;

const MIB: usize = 1 << 20;

#[derive(Clone, Debug)]
enum Op {
    Alloc(usize, usize),
    Free(usize),
    AllocAt(usize, usize, usize),
    EmptyCache,
    Trim(usize),
    /// `n` allocations of one size on a stream, all freed, then `n` again
    /// (from this thread's cache), with no read in between.
    Churn(usize, usize, usize),
    /// `n` rounds of one alloc+free of each of two sizes on a stream, with
    /// no read in between (the sizes take turns in this thread's cache).
    Alternate(usize, usize, usize, usize),
    /// A live block freed on another thread.
    FreeElsewhere(usize),
    /// A thread allocates `n` blocks on a stream, frees every other one
    /// and exits; the rest stay live.
    ThreadLeaves(usize, usize, usize),
    /// The first stream waits on an event recorded now on the second, then
    /// allocates on the first.
    WaitThenAlloc(usize, usize, usize),
}

/// What the model counts of every allocation and free.
#[derive(Default)]
struct Totals {
    allocs: i64,
    frees: i64,
    peak_blocks: i64,
    requested_in: i64,
    requested_out: i64,
    peak_requested: i64,
}

impl Totals {
    fn alloc(&mut self, requested: usize) {
        self.allocs += 1;
        self.requested_in += requested as i64;
        self.peak_blocks = self.peak_blocks.max(self.allocs - self.frees);
        self.peak_requested = self
            .peak_requested
            .max(self.requested_in - self.requested_out);
    }
    fn free(&mut self, requested: usize) {
        self.frees += 1;
        self.requested_out += requested as i64;
    }
}

/// The totals and peaks are exactly the model's.
fn check_totals(pool: &Pool, t: &Totals) -> Result<(), TestCaseError> {
    let s = pool.stats();
    let (a, r) = (s.allocation[STAT_ALL], s.requested_bytes[STAT_ALL]);
    prop_assert_eq!(
        (a.allocated, a.freed, a.peak),
        (t.allocs, t.frees, t.peak_blocks)
    );
    prop_assert_eq!(
        (r.allocated, r.freed, r.peak),
        (t.requested_in, t.requested_out, t.peak_requested)
    );
    prop_assert_eq!(s.active, s.allocation);
    prop_assert_eq!(s.active_bytes, s.allocated_bytes);
    Ok(())
}

fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => 0usize..4096,
        3 => 4096usize..=MIB,
        2 => (MIB + 1)..12 * MIB,
        1 => (12 * MIB)..40 * MIB,
        // Near a boundary of the free index's size classes (16 per power of
        // two, in 512-byte units; crates/aclalloc-pool/src/engine/tlsf.rs), a unit either side.
        2 => (0usize..13, 0usize..16, 0usize..3)
            .prop_map(|(f, s, d)| (((16 + s) << f) + d - 1) * 512),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (0usize..3, size()).prop_map(|(st, s)| Op::Alloc(st, s)),
        8 => any::<usize>().prop_map(Op::Free),
        2 => (0usize..3, size(), any::<usize>()).prop_map(|(st, s, i)| Op::AllocAt(st, s, i)),
        1 => Just(Op::EmptyCache),
        1 => (0usize..64 * MIB).prop_map(Op::Trim),
        3 => (0usize..3, size(), 1usize..24).prop_map(|(st, s, n)| Op::Churn(st, s, n)),
        2 => any::<usize>().prop_map(Op::FreeElsewhere),
        2 => (0usize..3, size(), size(), 1usize..6).prop_map(|(st, a, b, n)| Op::Alternate(st, a, b, n)),
        1 => (0usize..3, size(), 1usize..12).prop_map(|(st, s, n)| Op::ThreadLeaves(st, s, n)),
        3 => (0usize..3, 0usize..3, size()).prop_map(|(w, s, n)| Op::WaitThenAlloc(w, s, n)),
    ]
}

fn config() -> impl Strategy<Value = PoolConfig> {
    (
        prop_oneof![Just(usize::MAX), Just(4 * MIB), Just(16 * MIB)],
        prop_oneof![
            Just(Limit::None),
            Just(Limit::Bytes(96 * MIB)),
            Just(Limit::Fraction(0.5))
        ],
        prop_oneof![Just(0.0), Just(0.6)],
    )
        .prop_map(
            |(max_split_size, limit, garbage_collection_threshold)| PoolConfig {
                max_split_size,
                limit,
                garbage_collection_threshold,
                expandable_segments: false,
                ..PoolConfig::default()
            },
        )
}

struct Live {
    addr: usize,
    requested: usize,
    tag: u64,
    stream: usize,
}

fn round512(n: usize) -> usize {
    n.max(1).div_ceil(512) * 512
}

/// Writes a tag at both ends of a block; overlapping blocks would clobber it.
fn stamp(l: &Live) {
    let len = round512(l.requested);
    unsafe {
        (l.addr as *mut u64).write(l.tag);
        ((l.addr + len - 8) as *mut u64).write(l.tag);
    }
}

fn stamp_ok(l: &Live) -> bool {
    let len = round512(l.requested);
    unsafe {
        (l.addr as *const u64).read() == l.tag && ((l.addr + len - 8) as *const u64).read() == l.tag
    }
}

fn check(pool: &Pool, device: &HostMemory, live: &[Live]) -> Result<(), TestCaseError> {
    pool.check_invariants().map_err(TestCaseError::fail)?;
    let segments = pool.segments();
    let stats = pool.stats();
    // No overlap, alignment, inside a segment, and the block is big enough.
    let mut spans: Vec<(usize, usize)> = live
        .iter()
        .map(|l| (l.addr, round512(l.requested)))
        .collect();
    spans.sort_unstable();
    for w in spans.windows(2) {
        prop_assert!(
            w[0].0 + w[0].1 <= w[1].0,
            "blocks {:#x} and {:#x} overlap",
            w[0].0,
            w[1].0
        );
    }
    for l in live {
        prop_assert_eq!(l.addr % 512, 0);
        prop_assert!(stamp_ok(l), "block {:#x} was overwritten", l.addr);
        let block = segments
            .iter()
            .filter(|s| s.address <= l.addr && l.addr < s.address + s.total_size)
            .flat_map(|s| s.blocks.iter())
            .find(|b| b.address == l.addr);
        let block =
            block.ok_or_else(|| TestCaseError::fail(format!("{:#x} is in no segment", l.addr)))?;
        prop_assert!(block.allocated && block.size >= round512(l.requested));
        let seg = segments
            .iter()
            .find(|s| s.address <= l.addr && l.addr < s.address + s.total_size)
            .unwrap();
        prop_assert_eq!(
            seg.stream,
            l.stream,
            "a block came from another stream's segment"
        );
        prop_assert_eq!(block.requested_size, l.requested);
    }
    // Statistics equal the model.
    let allocated_blocks: usize = segments
        .iter()
        .flat_map(|s| &s.blocks)
        .filter(|b| b.allocated)
        .count();
    prop_assert_eq!(allocated_blocks, live.len());
    prop_assert_eq!(stats.allocation[STAT_ALL].current as usize, live.len());
    prop_assert_eq!(
        stats.requested_bytes[STAT_ALL].current as usize,
        live.iter().map(|l| l.requested).sum::<usize>()
    );
    let small_live = live.iter().filter(|l| round512(l.requested) <= MIB).count();
    prop_assert_eq!(
        stats.allocation[STAT_SMALL_POOL].current as usize,
        small_live
    );
    prop_assert_eq!(
        stats.allocation[STAT_LARGE_POOL].current as usize,
        live.len() - small_live
    );
    let reserved: usize = segments.iter().map(|s| s.total_size).sum();
    prop_assert_eq!(stats.reserved_bytes[STAT_ALL].current as usize, reserved);
    prop_assert_eq!(device.used(), reserved);
    prop_assert!(reserved <= pool.limit());
    let (mallocs, frees) = device.calls();
    prop_assert_eq!(stats.num_device_alloc as u64, mallocs);
    prop_assert_eq!(stats.num_device_free as u64, frees);
    prop_assert_eq!(stats.segment[STAT_ALL].current as usize, segments.len());
    prop_assert!(stats.allocated_bytes[STAT_ALL].peak >= stats.allocated_bytes[STAT_ALL].current);
    prop_assert!(stats.reserved_bytes[STAT_ALL].peak >= stats.reserved_bytes[STAT_ALL].current);
    Ok(())
}

/// After a failed allocation, the failure must be real: no cached block that
/// the request may use, and no room for the segment it needs.
fn failure_is_real(
    pool: &Pool,
    device: &HostMemory,
    size: usize,
    stream: usize,
) -> Result<(), TestCaseError> {
    let rounded = round512(size);
    let small = rounded <= MIB;
    let max_split = pool.config().max_split_size;
    for s in pool
        .segments()
        .iter()
        .filter(|s| s.small == small && s.stream == stream)
    {
        for b in s
            .blocks
            .iter()
            .filter(|b| !b.allocated && b.size >= rounded)
        {
            let usable = if rounded < max_split {
                b.size < max_split
            } else {
                b.size < rounded + 20 * MIB
            };
            prop_assert!(
                !usable,
                "a cached block of {} bytes could serve {}",
                b.size,
                rounded
            );
        }
        prop_assert!(
            s.blocks.len() > 1 || s.blocks[0].allocated,
            "a wholly free segment was kept through an out-of-memory"
        );
    }
    let tight = if small {
        2 * MIB
    } else {
        rounded.div_ceil(2 * MIB) * 2 * MIB
    };
    let room = device
        .capacity_left()
        .min(pool.limit().saturating_sub(pool.memory_reserved()));
    prop_assert!(tight > room, "{tight} bytes needed, {room} available");
    Ok(())
}

/// True when `source` has a wholly free segment a request of `size` bytes
/// may take whole (its kind, no smaller, within the oversize rules).
fn movable_segment(pool: &Pool, source: usize, size: usize) -> bool {
    let rounded = round512(size);
    let max_split = pool.config().max_split_size;
    pool.segments().iter().any(|s| {
        s.stream == source
            && s.small == (rounded <= MIB)
            && s.total_size >= rounded
            && s.blocks.iter().all(|b| !b.allocated)
            && !(rounded < max_split && s.total_size >= max_split
                || rounded >= max_split && s.total_size >= rounded + 20 * MIB)
    })
}

trait Left {
    fn capacity_left(&self) -> usize;
}
impl Left for HostMemory {
    fn capacity_left(&self) -> usize {
        use aclalloc::pool::DeviceMemory;
        self.capacity() - self.used()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn pool_matches_the_model(config in config(), ops in prop::collection::vec(op(), 1..160)) {
        let device = Arc::new(HostMemory::new(160 * MIB));
        let pool = Pool::new(config, device.clone()).unwrap();
        let mut live: Vec<Live> = Vec::new();
        let mut tag = 0u64;
        let mut totals = Totals::default();
        for op in ops {
            match op {
                Op::Alloc(stream, size) | Op::AllocAt(stream, size, _) => {
                    let hint = match op {
                        Op::AllocAt(_, _, i) if !live.is_empty() => Some(live[i % live.len()].addr + 512 * (i % 8)),
                        _ => None,
                    };
                    let result = match hint {
                        Some(addr) => pool.malloc_at_on(stream, size, addr),
                        None => pool.malloc_on(stream, size),
                    };
                    match result {
                        Ok(addr) => {
                            tag += 1;
                            let l = Live { addr: addr.get(), requested: size, tag, stream };
                            stamp(&l);
                            live.push(l);
                            totals.alloc(size);
                        }
                        Err(e) => {
                            let text = e.to_string();
                            prop_assert!(text.contains(&format!("tried to allocate {size} bytes")), "{text}");
                            failure_is_real(&pool, &device, size, stream)?;
                        }
                    }
                }
                Op::Free(i) if !live.is_empty() => {
                    let l = live.swap_remove(i % live.len());
                    prop_assert!(stamp_ok(&l));
                    pool.free(l.addr).unwrap();
                    totals.free(l.requested);
                    prop_assert!(pool.free(l.addr).is_err(), "a double free was accepted");
                }
                Op::Free(_) => {}
                Op::Churn(stream, size, n) => {
                    let mut got = Vec::new();
                    for _ in 0..n {
                        if let Ok(a) = pool.malloc_on(stream, size) {
                            totals.alloc(size);
                            got.push(a.get());
                        }
                    }
                    for &a in &got {
                        pool.free(a).unwrap();
                        totals.free(size);
                    }
                    prop_assert!(pool.free(got.first().copied().unwrap_or(1)).is_err(), "a double free was accepted");
                    for _ in 0..got.len() {
                        let a = pool.malloc_on(stream, size);
                        prop_assert!(a.is_ok(), "memory freed just before is not served again: {a:?}");
                        tag += 1;
                        let l = Live { addr: a.unwrap().get(), requested: size, tag, stream };
                        stamp(&l);
                        live.push(l);
                        totals.alloc(size);
                    }
                }
                Op::Alternate(stream, a, b, n) => {
                    for _ in 0..n {
                        for size in [a, b] {
                            if let Ok(got) = pool.malloc_on(stream, size) {
                                totals.alloc(size);
                                pool.free(got.get()).unwrap();
                                totals.free(size);
                                prop_assert!(pool.free(got.get()).is_err(), "a double free was accepted");
                            }
                        }
                    }
                }
                Op::FreeElsewhere(i) if !live.is_empty() => {
                    let l = live.swap_remove(i % live.len());
                    prop_assert!(stamp_ok(&l));
                    let pool = &pool;
                    let addr = l.addr;
                    std::thread::scope(|s| {
                        s.spawn(move || {
                            pool.free(addr).unwrap();
                            assert!(pool.free(addr).is_err(), "a double free was accepted");
                        });
                    });
                    totals.free(l.requested);
                    prop_assert!(pool.free(l.addr).is_err(), "a double free was accepted");
                }
                Op::FreeElsewhere(_) => {}
                Op::ThreadLeaves(stream, size, n) => {
                    let pool = &pool;
                    let (made, kept): (usize, Vec<usize>) = std::thread::scope(|s| {
                        s.spawn(move || {
                            let got: Vec<usize> = (0..n)
                                .filter_map(|_| pool.malloc_on(stream, size).ok())
                                .map(|a| a.get())
                                .collect();
                            for &a in got.iter().step_by(2) {
                                pool.free(a).unwrap();
                            }
                            (got.len(), got.into_iter().skip(1).step_by(2).collect())
                        })
                        .join()
                        .unwrap()
                    });
                    // All allocated first, then every other one freed.
                    for _ in 0..made {
                        totals.alloc(size);
                    }
                    for _ in 0..made - kept.len() {
                        totals.free(size);
                    }
                    for a in kept {
                        tag += 1;
                        let l = Live { addr: a, requested: size, tag, stream };
                        stamp(&l);
                        live.push(l);
                    }
                }
                Op::WaitThenAlloc(waiter, source, size) => {
                    // Stream words are process-wide in the order: an earlier
                    // case's waits are on records older than any free here.
                    order::stream_waited(waiter, source, order::event_recorded());
                    let movable = waiter != source && movable_segment(&pool, source, size);
                    let before = pool.stats();
                    match pool.malloc_on(waiter, size) {
                        Ok(addr) => {
                            tag += 1;
                            let l = Live { addr: addr.get(), requested: size, tag, stream: waiter };
                            stamp(&l);
                            live.push(l);
                            totals.alloc(size);
                        }
                        Err(e) => {
                            prop_assert!(!movable, "a segment of stream {source} could serve: {e}");
                            failure_is_real(&pool, &device, size, waiter)?;
                        }
                    }
                    if movable {
                        let after = pool.stats();
                        prop_assert_eq!(after.num_device_alloc, before.num_device_alloc, "grew instead of taking the waited-on stream's segment");
                    }
                }
                Op::EmptyCache => {
                    pool.empty_cache();
                    for s in pool.segments() {
                        prop_assert!(s.blocks.iter().any(|b| b.allocated), "empty_cache kept a free segment");
                    }
                }
                Op::Trim(keep) => {
                    pool.trim(keep);
                    let free_segments = pool.segments().iter().filter(|s| s.blocks.iter().all(|b| !b.allocated)).count();
                    prop_assert!(pool.memory_reserved() <= keep || free_segments == 0);
                }
            }
            check(&pool, &device, &live)?;
            check_totals(&pool, &totals)?;
        }
        for l in live.drain(..) {
            pool.free(l.addr).unwrap();
            totals.free(l.requested);
        }
        check(&pool, &device, &live)?;
        check_totals(&pool, &totals)?;
        pool.empty_cache();
        prop_assert_eq!(pool.memory_reserved(), 0);
        prop_assert_eq!(device.used(), 0);
        prop_assert_eq!(pool.stats().inactive_split[STAT_ALL].current, 0);
        prop_assert!(pool.segments().is_empty());
    }
}
