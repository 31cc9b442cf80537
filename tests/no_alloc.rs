//! Looking a stream's allocator up allocates nothing: not on a hit, not on a
//! miss (which also records a message for aclGetRecentErrMsg), through the
//! Rust API or the C ABI. Counted with a global allocator of this test binary.

use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::types::*;
use aclalloc::StreamKey;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ffi::c_void;
use std::ptr::null_mut;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the counter is a plain
// thread-local cell that never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

unsafe extern "C" fn alloc(_: *mut c_void, _: usize) -> *mut c_void {
    null_mut()
}
unsafe extern "C" fn free(_: *mut c_void, _: *mut c_void) {}
unsafe extern "C" fn get_addr(b: *mut c_void) -> *mut c_void {
    b
}

fn allocations_during(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

#[test]
fn lookups_hit_or_miss_allocate_nothing() {
    const STREAMS: usize = 10_000;
    let stream = |i: usize| (0x5555_0000_0000usize + i * 0x240) as aclrtStream;
    let d = aclrtAllocatorCreateDesc();
    aclrtAllocatorSetObjToDesc(d, 0x1000 as *mut c_void);
    aclrtAllocatorSetAllocFuncToDesc(d, Some(alloc));
    aclrtAllocatorSetFreeFuncToDesc(d, Some(free));
    aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, Some(get_addr));
    for i in 0..STREAMS {
        assert_eq!(aclrtAllocatorRegister(stream(i), d), 0);
    }
    let lookup = |s: aclrtStream| {
        let (mut desc, mut obj) = (null_mut(), null_mut());
        let (mut a, mut f, mut adv, mut g) = (None, None, None, None);
        unsafe {
            aclrtAllocatorGetByStream(s, &mut desc, &mut obj, &mut a, &mut f, &mut adv, &mut g)
        }
    };
    // Warm up this thread's error log and the process-wide instance.
    assert_eq!(lookup(stream(0)), 0);
    assert_ne!(lookup(stream(STREAMS + 1)), 0);

    let mut hits = 0;
    let mut misses = 0;
    let counted = allocations_during(|| {
        for round in 0..20 {
            for i in 0..STREAMS {
                let s = if (i + round) % 5 == 0 {
                    stream(STREAMS + i)
                } else {
                    stream(i)
                };
                match lookup(s) {
                    0 => hits += 1,
                    _ => misses += 1,
                }
                let key = StreamKey::from_ptr(s).unwrap();
                let _ = std::hint::black_box(aclalloc::global().get_by_stream(key));
            }
        }
    });
    assert_eq!(counted, 0, "lookups allocated {counted} times");
    assert!(
        hits > 0 && misses > 0,
        "both paths ran: {hits} hits, {misses} misses"
    );

    let _ = aclalloc::take_recent_error_messages();
    for i in 0..STREAMS {
        aclrtAllocatorUnregister(stream(i));
    }
    aclrtAllocatorDestroyDesc(d);
}

#[test]
fn recording_the_pool_history_allocates_nothing_per_event() {
    use aclalloc::pool::{HostMemory, Pool, PoolConfig};
    let pool = Pool::new(PoolConfig::default(), HostMemory::new(1 << 30)).unwrap();
    pool.record_history(64).unwrap(); // the ring is allocated here
    let sizes = [512usize, 3000, 70_000, 3 << 20];
    let mut blocks = Vec::with_capacity(sizes.len());
    let mut warm = |pool: &Pool| {
        blocks.clear();
        for &s in &sizes {
            blocks.push(pool.malloc(s).unwrap().get());
        }
        for &b in &blocks {
            pool.free(b).unwrap();
        }
    };
    warm(&pool); // segments, bins and maps reach their size
    warm(&pool);
    let n = allocations_during(|| {
        for _ in 0..100 {
            warm(&pool); // 800 events through a ring of 64: it wraps
        }
    });
    assert_eq!(n, 0, "allocations while recording");
    let h = pool.history();
    assert_eq!(h.events.len(), 64);
    assert!(h.dropped >= 100 * 12 - 64);
}
