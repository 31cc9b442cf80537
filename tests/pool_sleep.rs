//! Sleep and wake of tagged pools on a host "device" (`HostMemory`, whose
//! `used()` is the device's memory in use): offload restores contents
//! byte-exact at the same addresses, discard gives usable memory, the
//! device gets back exactly the mapped memory, a sleeping pool allocates
//! nothing, statistics do not move, repeated cycles do not grow, and a
//! pool closed asleep gives everything back. With fixed and expandable
//! segments.

use aclalloc::pool::{sleep, HostMemory, Pool, PoolConfig};
use std::sync::{Arc, Mutex};

const MIB: usize = 1 << 20;

/// `sleep_all` reaches every tagged pool of the process: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn tagged(expandable: bool, tag: &str) -> (Pool, Arc<HostMemory>) {
    let device = Arc::new(HostMemory::new(512 * MIB));
    let config = PoolConfig {
        expandable_segments: expandable,
        ..PoolConfig::default()
    };
    let pool = Pool::new(config, device.clone()).unwrap();
    pool.set_tag(Some(tag)).unwrap();
    assert_eq!(pool.tag().as_deref(), Some(tag));
    (pool, device)
}

fn fill(addr: usize, len: usize, seed: u8) {
    // SAFETY: `addr` is a live block of at least `len` bytes.
    let bytes = unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, len) };
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(31).wrapping_add(seed);
    }
}

fn holds(addr: usize, len: usize, seed: u8) -> bool {
    // SAFETY: `addr` is a live, mapped block of at least `len` bytes.
    let bytes = unsafe { std::slice::from_raw_parts(addr as *const u8, len) };
    bytes
        .iter()
        .enumerate()
        .all(|(i, &b)| b == (i as u8).wrapping_mul(31).wrapping_add(seed))
}

/// Blocks of a small, a large and an oversize size, filled.
fn blocks(pool: &Pool) -> Vec<(usize, usize, u8)> {
    [(4096, 1u8), (3 * MIB, 2), (24 * MIB + 512, 3)]
        .into_iter()
        .map(|(len, seed)| {
            let addr = pool.malloc(len).unwrap().get();
            fill(addr, len, seed);
            (addr, len, seed)
        })
        .collect()
}

fn offload_restores_contents_at_the_same_addresses(expandable: bool) {
    let _g = serial();
    let (pool, device) = tagged(expandable, "weights");
    let live = blocks(&pool);
    let used = device.used();
    let stats = pool.stats();
    assert!(used > 0);

    let given = pool.sleep(true).unwrap();
    assert_eq!(given, used, "every mapped byte goes back");
    assert_eq!(device.used(), 0, "the device's memory is free");
    assert!(pool.is_asleep());
    assert_eq!(pool.sleeping_bytes(), used);
    assert_eq!(pool.offloaded_bytes(), used);
    assert_eq!(pool.stats(), stats, "statistics do not move while asleep");
    assert!(
        pool.malloc(4096).is_err(),
        "a sleeping pool allocates nothing"
    );
    assert!(pool.malloc(64 * MIB).is_err());
    assert_eq!(
        pool.stats().num_ooms,
        stats.num_ooms,
        "a refusal is not an oom"
    );

    assert_eq!(pool.wake().unwrap(), used);
    assert!(!pool.is_asleep());
    assert_eq!(device.used(), used);
    assert_eq!((pool.sleeping_bytes(), pool.offloaded_bytes()), (0, 0));
    assert_eq!(pool.stats(), stats);
    for &(addr, len, seed) in &live {
        assert!(
            holds(addr, len, seed),
            "block {addr:#x} restored byte-exact"
        );
    }
    for (addr, _, _) in live {
        pool.free(addr).unwrap();
    }
    pool.check_invariants().unwrap();
}

#[test]
fn offload_restores_contents_fixed() {
    offload_restores_contents_at_the_same_addresses(false);
}

#[test]
fn offload_restores_contents_expandable() {
    offload_restores_contents_at_the_same_addresses(true);
}

fn discard_gives_fresh_usable_memory(expandable: bool) {
    let _g = serial();
    let (pool, device) = tagged(expandable, "kv_cache");
    let live = blocks(&pool);
    let used = device.used();
    assert_eq!(pool.sleep(false).unwrap(), used);
    assert_eq!(
        pool.offloaded_bytes(),
        0,
        "discarded: nothing kept on the host"
    );
    assert_eq!(device.used(), 0);
    pool.wake().unwrap();
    for &(addr, len, _) in &live {
        assert!(holds(addr, 0, 0));
        fill(addr, len, 9);
        assert!(holds(addr, len, 9), "woken memory is usable");
    }
    // Allocation works again, and frees reuse the blocks.
    let more = pool.malloc(MIB).unwrap();
    fill(more.get(), MIB, 4);
    pool.free(more.get()).unwrap();
    for (addr, _, _) in live {
        pool.free(addr).unwrap();
    }
    pool.check_invariants().unwrap();
}

#[test]
fn discard_gives_fresh_usable_memory_fixed() {
    discard_gives_fresh_usable_memory(false);
}

#[test]
fn discard_gives_fresh_usable_memory_expandable() {
    discard_gives_fresh_usable_memory(true);
}

#[test]
fn a_hundred_cycles_leave_no_growth_with_expandable_segments() {
    let _g = serial();
    let (pool, device) = tagged(true, "cycles");
    let live = blocks(&pool);
    let mut after_first = None;
    for cycle in 0..100 {
        pool.sleep(cycle % 2 == 0).unwrap();
        let asleep = (device.used(), pool.offloaded_bytes() > 0);
        assert_eq!(asleep.0, 0, "cycle {cycle}: all given back");
        pool.wake().unwrap();
        let awake = (device.used(), pool.offloaded_bytes(), pool.stats());
        assert_eq!(awake.1, 0, "cycle {cycle}: offload copies released");
        match &after_first {
            None => after_first = Some(awake),
            Some(first) => assert_eq!(&awake, first, "cycle {cycle}: growth"),
        }
    }
    for &(addr, len, seed) in &live[..1] {
        // Odd cycles discarded it last: rewrite, then check one offload cycle.
        fill(addr, len, seed);
        pool.sleep(true).unwrap();
        pool.wake().unwrap();
        assert!(holds(addr, len, seed));
    }
    for (addr, _, _) in live {
        pool.free(addr).unwrap();
    }
}

#[test]
fn sleep_twice_and_wake_while_awake_are_harmless() {
    let _g = serial();
    let (pool, device) = tagged(false, "twice");
    let (addr, len, seed) = blocks(&pool)[1];
    let used = device.used();
    assert_eq!(pool.wake().unwrap(), 0, "awake: nothing to do");
    assert_eq!(pool.sleep(true).unwrap(), used);
    assert_eq!(
        pool.sleep(false).unwrap(),
        0,
        "already asleep: nothing more"
    );
    assert_eq!(
        pool.offloaded_bytes(),
        used,
        "the first sleep's copy is kept"
    );
    assert_eq!(pool.wake().unwrap(), used);
    assert_eq!(pool.wake().unwrap(), 0);
    assert!(holds(addr, len, seed));
}

#[test]
fn frees_and_empty_cache_while_asleep_and_close_release_everything() {
    let _g = serial();
    for expandable in [false, true] {
        let (pool, device) = tagged(expandable, "close");
        let live = blocks(&pool);
        pool.sleep(true).unwrap();
        // Frees work while asleep; empty_cache then gives the segments back.
        pool.free(live[0].0).unwrap();
        pool.free(live[2].0).unwrap();
        pool.empty_cache();
        assert!(pool.offloaded_bytes() < live[2].1 + 2 * MIB);
        assert_eq!(device.used(), 0);
        // Closed while asleep, with a block still out: everything goes.
        assert_eq!(pool.close(), 1);
        assert_eq!((pool.sleeping_bytes(), pool.offloaded_bytes()), (0, 0));
        assert_eq!(device.used(), 0);
        assert_eq!(device.calls().0, device.calls().1, "every malloc freed");
        drop(pool);
    }
}

#[test]
fn tags_are_set_before_the_first_segment_and_only_tagged_pools_sleep() {
    let _g = serial();
    let device = Arc::new(HostMemory::new(64 * MIB));
    let pool = Pool::new(PoolConfig::default(), device).unwrap();
    assert!(pool.sleep(true).is_err(), "untagged");
    assert!(pool.wake().is_err(), "untagged");
    assert!(pool.set_tag(Some("")).is_err(), "empty");
    let a = pool.malloc(100).unwrap();
    let e = pool.set_tag(Some("late")).unwrap_err();
    assert!(e.to_string().contains("before its first allocation"), "{e}");
    pool.free(a.get()).unwrap();
    pool.empty_cache();
    pool.set_tag(Some("now")).unwrap();
    pool.set_tag(None).unwrap();
    assert_eq!(pool.tag(), None);
}

#[test]
fn the_process_wide_calls_offload_the_named_tags_and_wake_the_named_ones() {
    let _g = serial();
    let (weights, dw) = tagged(true, "w-all");
    let (cache, dc) = tagged(false, "kv-all");
    let (w, c) = (blocks(&weights), blocks(&cache));
    let (uw, uc) = (dw.used(), dc.used());
    assert!(sleep::sleep_all(&["w-all"]).unwrap() >= uw + uc);
    assert_eq!((dw.used(), dc.used()), (0, 0));
    assert_eq!(weights.offloaded_bytes(), uw);
    assert_eq!(cache.offloaded_bytes(), 0, "not named: discarded");
    sleep::wake_all(Some(&["kv-all"])).unwrap();
    assert!(weights.is_asleep() && !cache.is_asleep());
    let e = weights.malloc(100).unwrap_err();
    assert!(e.to_string().contains("\"w-all\""), "{e}");
    sleep::wake_all(None).unwrap();
    assert!(!weights.is_asleep());
    for &(addr, len, seed) in &w {
        assert!(holds(addr, len, seed));
    }
    for (addr, _, _) in w.into_iter().chain(c) {
        let pool = if weights.holds(addr) {
            &weights
        } else {
            &cache
        };
        pool.free(addr).unwrap();
    }
}

#[test]
fn a_wake_short_of_memory_fails_and_a_later_wake_finishes() {
    let _g = serial();
    let device = Arc::new(HostMemory::new(64 * MIB));
    let make = |tag: &str| {
        let pool = Pool::new(PoolConfig::default(), device.clone()).unwrap();
        pool.set_tag(Some(tag)).unwrap();
        pool
    };
    let (sleeper, other) = (make("short-a"), make("short-b"));
    let a = sleeper.malloc(40 * MIB).unwrap().get();
    fill(a, 40 * MIB, 5);
    sleeper.sleep(true).unwrap();
    // Another pool takes what sleep gave back: the wake cannot finish.
    let b = other.malloc(40 * MIB).unwrap().get();
    let e = sleeper.wake().unwrap_err();
    assert!(e.to_string().contains("out of memory"), "{e}");
    assert!(sleeper.is_asleep(), "the pages not mapped stay asleep");
    assert!(sleeper.sleeping_bytes() > 0);
    assert!(sleeper.malloc(512).is_err());
    other.free(b).unwrap();
    other.empty_cache();
    sleeper.wake().unwrap();
    assert!(!sleeper.is_asleep());
    assert!(holds(a, 40 * MIB, 5), "restored across both wakes");
    assert_eq!(sleeper.offloaded_bytes(), 0);
    sleeper.free(a).unwrap();
}

#[test]
fn an_empty_tagged_pool_sleeps_and_a_new_tag_starts_awake() {
    let _g = serial();
    let (pool, _device) = tagged(false, "empty");
    assert_eq!(pool.sleep(true).unwrap(), 0);
    assert!(
        pool.malloc(512).is_err(),
        "asleep, even with nothing mapped"
    );
    pool.set_tag(None).unwrap();
    let a = pool.malloc(512).unwrap();
    pool.free(a.get()).unwrap();
}
