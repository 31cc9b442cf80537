//! Stream-ordered allocations (CANN's `aclrtMemPoolMallocAsync` and
//! `aclrtMemPoolFreeAsync`) as the tracking layer sees them: the runtime's
//! pool hands out addresses, so the records are kept by address, per pool.
//!
//! Two misuses are particular to memory that follows streams:
//! - work queued on any stream touches a block after its `FreeAsync`
//!   ([`Fault::UseAfterFreeAsync`]);
//! - a block is freed on one stream while work another stream queued on it
//!   is not ordered before the free (no synchronize of that stream, no wait
//!   of the freeing stream on an event recorded after the use), so the
//!   memory may go to new work while the old still runs
//!   ([`Fault::FreeAsyncWhileUsed`]).
//!
//! Uses are the copies and fills queued on a stream (`aclrtMemcpyAsync`,
//! `aclrtMemsetAsync`, and their synchronous forms): the runtime does not
//! say which memory a kernel reads. A freed range stops counting as freed
//! once any allocation (of a pool, `aclrtMalloc`, a reserved range) hands
//! it out again, or its pool is trimmed or destroyed.

use super::events::{record_with_stack, Fault, LeakSeen};
use super::history;
use super::stats::Stat;
use super::syncclock;
use aclalloc_core::history::clock::coarse_ns as now_ns;
use aclalloc_core::history::stacks::{self, StackId};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// The streams whose latest use a live block remembers; an older use is
/// forgotten (the freeing stream is then checked against the newer ones).
const USES_KEPT: usize = 16;
/// Freed ranges remembered; beyond, the oldest half is forgotten.
const FREED_KEPT: usize = 1 << 16;

struct Live {
    pool: usize,
    size: usize,
    stream: usize,
    device: i32,
    stack: StackId,
    time_ns: u64,
    /// (stream, generation of its latest use), streams other than `stream`.
    uses: Vec<(usize, u64)>,
}

struct Freed {
    pool: usize,
    size: usize,
    freed_on: usize,
    stack: StackId,
    /// Order of freeing, to forget the oldest first.
    serial: u64,
}

/// What the tracking layer counts for one stream-ordered pool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OrderedPoolStats {
    /// The pool's handle.
    pub pool: usize,
    /// Streams it allocated on, in order of first use.
    pub streams: Vec<usize>,
    /// Blocks.
    pub allocation: Stat,
    /// Bytes requested.
    pub allocated_bytes: Stat,
}

#[derive(Default)]
struct Records {
    live: BTreeMap<usize, Live>,
    freed: BTreeMap<usize, Freed>,
    pools: BTreeMap<usize, OrderedPoolStats>,
    serial: u64,
}

static RECORDS: Mutex<Option<Records>> = Mutex::new(None);
/// Set at the first stream-ordered allocation: until then every hook returns at once.
static ANY: AtomicBool = AtomicBool::new(false);

fn with<R>(f: impl FnOnce(&mut Records) -> R) -> R {
    let mut guard = RECORDS.lock().unwrap_or_else(|p| p.into_inner());
    f(guard.get_or_insert_with(Records::default))
}

/// The first record at or before `end - 1` whose range overlaps `[start, end)`.
fn overlapping<T>(
    map: &BTreeMap<usize, T>,
    start: usize,
    end: usize,
    size: impl Fn(&T) -> usize,
) -> Vec<usize> {
    map.range(..end)
        .rev()
        .take_while(|(&a, t)| a.saturating_add(size(t).max(1)) > start || a >= start)
        .filter(|(&a, t)| a.saturating_add(size(t).max(1)) > start)
        .map(|(&a, _)| a)
        .collect()
}

/// `aclrtMemPoolMallocAsync` on `stream` handed out `size` bytes at `address` from `pool`.
pub fn ordered_alloc(pool: usize, address: usize, size: usize, stream: usize) {
    ANY.store(true, Ordering::Relaxed);
    let stack = stacks::capture();
    let device = aclalloc_core::base::device_port::port()
        .current_device()
        .unwrap_or(0);
    let time_ns = now_ns();
    let end = address.saturating_add(size.max(1));
    let overlap = with(|r| {
        for a in overlapping(&r.freed, address, end, |f| f.size) {
            r.freed.remove(&a);
        }
        let overlap = overlapping(&r.live, address, end, |l| l.size)
            .first()
            .and_then(|a| r.live.get(a).map(|l| (*a, l.size, l.stream)));
        r.live.insert(
            address,
            Live {
                pool,
                size,
                stream,
                device,
                stack,
                time_ns,
                uses: Vec::new(),
            },
        );
        let stats = r.pools.entry(pool).or_insert_with(|| OrderedPoolStats {
            pool,
            ..Default::default()
        });
        if !stats.streams.contains(&stream) {
            stats.streams.push(stream);
        }
        stats.allocation.increase(1);
        stats.allocated_bytes.increase(size as i64);
        overlap
    });
    history::allocated(device, address, size, stream, stack);
    if let Some((other_address, other_size, other_stream)) = overlap {
        record_with_stack(
            Fault::Overlap {
                stream,
                allocator: pool,
                block: address,
                address,
                size,
                other_stream,
                other_block: other_address,
                other_address,
                other_size,
            },
            stack,
        );
    }
}

/// `aclrtMemPoolFreeAsync(address, stream)` succeeded.
pub fn ordered_free(address: usize, stream: usize) {
    if !ANY.load(Ordering::Relaxed) {
        return;
    }
    let mut faults = Vec::new();
    let freed = with(|r| {
        let Some(live) = r.live.remove(&address) else {
            if let Some(f) = r.freed.get(&address) {
                faults.push((
                    Fault::DoubleFree {
                        stream,
                        allocator: f.pool,
                        block: address,
                        size: f.size,
                        first_freed_on: f.freed_on,
                    },
                    f.stack,
                ));
            }
            return None;
        };
        for &(used_on, at) in &live.uses {
            if used_on != stream && !syncclock::ordered_after(stream, used_on, at) {
                faults.push((
                    Fault::FreeAsyncWhileUsed {
                        stream,
                        pool: live.pool,
                        address,
                        size: live.size,
                        used_on,
                    },
                    live.stack,
                ));
            }
        }
        if let Some(stats) = r.pools.get_mut(&live.pool) {
            stats.allocation.decrease(1);
            stats.allocated_bytes.decrease(live.size as i64);
        }
        r.serial += 1;
        let serial = r.serial;
        r.freed.insert(
            address,
            Freed {
                pool: live.pool,
                size: live.size,
                freed_on: stream,
                stack: live.stack,
                serial,
            },
        );
        if r.freed.len() > FREED_KEPT {
            let keep_after = serial - (FREED_KEPT / 2) as u64;
            r.freed.retain(|_, f| f.serial > keep_after);
        }
        Some((live.device, live.size))
    });
    if let Some((device, size)) = freed {
        history::freed(device, address, size, stream);
    }
    for (fault, stack) in faults {
        record_with_stack(fault, stack);
    }
}

/// Work queued on `stream` (0: a synchronous call) touches `[address, address + len)`.
pub fn ordered_use(stream: usize, address: usize, len: usize) {
    if !ANY.load(Ordering::Relaxed) || address == 0 {
        return;
    }
    let end = address.saturating_add(len.max(1));
    let fault = with(|r| {
        if let Some(a) = overlapping(&r.live, address, end, |l| l.size).first() {
            if let Some(live) = r.live.get_mut(a) {
                if stream != 0 && stream != live.stream {
                    let now = syncclock::generation();
                    match live.uses.iter_mut().find(|(s, _)| *s == stream) {
                        Some(u) => u.1 = now,
                        None => {
                            if live.uses.len() == USES_KEPT {
                                live.uses.remove(0);
                            }
                            live.uses.push((stream, now));
                        }
                    }
                }
            }
        }
        let a = *overlapping(&r.freed, address, end, |f| f.size).first()?;
        let f = r.freed.get(&a)?;
        Some((
            Fault::UseAfterFreeAsync {
                stream,
                pool: f.pool,
                address: a,
                size: f.size,
                used_address: address,
                freed_on: f.freed_on,
            },
            f.stack,
        ))
    });
    if let Some((fault, stack)) = fault {
        record_with_stack(fault, stack);
    }
}

/// An allocation other than a pool's (`aclrtMalloc`, a reserved range)
/// handed out `[address, address + size)`: freed ranges in it are new memory.
pub fn device_range_reissued(address: usize, size: usize) {
    if !ANY.load(Ordering::Relaxed) {
        return;
    }
    let end = address.saturating_add(size.max(1));
    with(|r| {
        for a in overlapping(&r.freed, address, end, |f| f.size) {
            r.freed.remove(&a);
        }
    });
}

/// `pool` gave its free memory back to the device (a trim), or was
/// destroyed (`destroyed`): its freed ranges may be handed out by anything.
pub fn ordered_pool_released(pool: usize, destroyed: bool) {
    if !ANY.load(Ordering::Relaxed) {
        return;
    }
    with(|r| {
        r.freed.retain(|_, f| f.pool != pool);
        if destroyed {
            r.live.retain(|_, l| l.pool != pool);
        }
    });
}

/// Forgets the uses a synchronization already orders before any free
/// (before the synchronization records they rely on are forgotten).
pub(crate) fn forget_ordered_uses() {
    if !ANY.load(Ordering::Relaxed) {
        return;
    }
    with(|r| {
        for live in r.live.values_mut() {
            live.uses
                .retain(|&(s, at)| !syncclock::synchronized_since(s, at));
        }
    });
}

/// The statistics of every stream-ordered pool seen, by handle.
pub fn ordered_pool_stats() -> Vec<OrderedPoolStats> {
    if !ANY.load(Ordering::Relaxed) {
        return Vec::new();
    }
    with(|r| r.pools.values().cloned().collect())
}

/// A live stream-ordered block, for the snapshot.
pub(crate) struct LiveOrdered {
    pub pool: usize,
    pub address: usize,
    pub size: usize,
    pub stream: usize,
    pub device: i32,
    pub stack: StackId,
    pub time_ns: u64,
}

/// Every live stream-ordered block, by address.
pub(crate) fn live_ordered() -> Vec<LiveOrdered> {
    if !ANY.load(Ordering::Relaxed) {
        return Vec::new();
    }
    with(|r| {
        r.live
            .iter()
            .map(|(&address, l)| LiveOrdered {
                pool: l.pool,
                address,
                size: l.size,
                stream: l.stream,
                device: l.device,
                stack: l.stack,
                time_ns: l.time_ns,
            })
            .collect()
    })
}

/// Reports every live stream-ordered block as a leak (at exit).
pub(crate) fn report_ordered_leaks(seen: LeakSeen) {
    let now = now_ns();
    for l in live_ordered() {
        record_with_stack(
            Fault::Leak {
                stream: l.stream,
                allocator: l.pool,
                block: l.address,
                address: l.address,
                size: l.size,
                age_ns: now.saturating_sub(l.time_ns),
                seen,
            },
            l.stack,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events;

    // Each test uses its own pool and addresses: the records are process-wide.
    fn faults_of(pool: usize) -> Vec<Fault> {
        events::events()
            .0
            .into_iter()
            .map(|e| e.fault)
            .filter(|f| match *f {
                Fault::UseAfterFreeAsync { pool: p, .. }
                | Fault::FreeAsyncWhileUsed { pool: p, .. }
                | Fault::DoubleFree { allocator: p, .. }
                | Fault::Overlap { allocator: p, .. } => p == pool,
                _ => false,
            })
            .collect()
    }

    #[test]
    fn a_use_after_the_free_is_reported_until_the_range_is_handed_out_again() {
        let (pool, a, s1, s2) = (0x50_0001, 0x7100_0000, 0x51, 0x52);
        ordered_alloc(pool, a, 1000, s1);
        ordered_use(s1, a + 10, 20);
        ordered_free(a, s1);
        assert!(faults_of(pool).is_empty());
        ordered_use(s2, a + 999, 1);
        ordered_use(s2, a + 1000, 8); // past the block: not a use of it
        let faults = faults_of(pool);
        assert_eq!(faults.len(), 1, "{faults:?}");
        assert!(matches!(
            faults[0],
            Fault::UseAfterFreeAsync { stream: 0x52, freed_on: 0x51, size: 1000, used_address, .. }
                if used_address == a + 999
        ));
        device_range_reissued(a, 4096);
        ordered_use(s2, a, 8);
        assert_eq!(
            faults_of(pool).len(),
            1,
            "reissued memory is not freed memory"
        );
    }

    #[test]
    fn a_free_unordered_after_another_streams_use_is_reported_and_an_ordered_one_is_not() {
        let (pool, a, b, s1, s2) = (0x50_0002, 0x7200_0000, 0x7200_1000, 0x61, 0x62);
        ordered_alloc(pool, a, 512, s1);
        ordered_alloc(pool, b, 512, s1);
        ordered_use(s2, a, 512);
        ordered_use(s2, b, 512);
        // s1 waits on an event s2 recorded after its use of b.
        let token = syncclock::event_recorded();
        syncclock::stream_waited(s1, s2, token);
        ordered_free(b, s1);
        assert!(faults_of(pool).is_empty(), "{:?}", faults_of(pool));
        // A use of a after that wait: nothing orders it before the free.
        ordered_use(s2, a + 100, 4);
        ordered_free(a, s1);
        let faults = faults_of(pool);
        assert_eq!(faults.len(), 1, "{faults:?}");
        assert!(matches!(
            faults[0],
            Fault::FreeAsyncWhileUsed {
                stream: 0x61,
                used_on: 0x62,
                size: 512,
                ..
            }
        ));
        assert_eq!(
            ordered_pool_stats()
                .into_iter()
                .find(|p| p.pool == pool)
                .map(|p| (p.allocation.allocated, p.allocation.current, p.streams)),
            Some((2, 0, vec![s1]))
        );
    }

    #[test]
    fn a_second_free_is_a_double_free_and_a_trim_forgets_the_freed_ranges() {
        let (pool, a, s) = (0x50_0003, 0x7300_0000, 0x71);
        ordered_alloc(pool, a, 64, s);
        ordered_free(a, s);
        ordered_free(a, s);
        assert!(matches!(
            faults_of(pool)[..],
            [Fault::DoubleFree {
                first_freed_on: 0x71,
                size: 64,
                ..
            }]
        ));
        ordered_pool_released(pool, false);
        ordered_use(s, a, 64);
        assert_eq!(faults_of(pool).len(), 1);
    }
}
