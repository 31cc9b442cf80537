//! What the tracking layer adds to an allocator call: the user's callbacks
//! called directly against the same callbacks called through the tracking
//! object and functions that `aclrtAllocatorGetByStream` hands out with
//! tracking on, in the same run.
//!
//!     cargo bench --bench tracking
//!
//! `alloc_free`: one alloc+free pair (the overhead target: at most 25 ns
//! added per pair). `launch`: alloc, getAddrFromBlock, free, what an
//! operator launch does (the address check against live and recently freed
//! ranges happens here). The user's allocator is a one-block LIFO, so the
//! numbers are the layer's cost, not the allocator's. The allocation profiler
//! counts heap allocations per iteration (zero in steady state).
//!
//! `recorded`: the tracked callbacks with the history on
//! (`aclallocTrackingRecordHistory`, a ring of 100,000 events, which wraps
//! during the run as a long-running service's would); the `tracked`
//! variants run with it off.

use aclalloc::registry::DescriptorHandle;
use aclalloc::{tracking, AllocatorObj, Callbacks, Registration, StreamKey};
use divan::{black_box, Bencher};
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

fn main() {
    divan::main();
}

/// The user's allocator: one 4 KiB block, handed out LIFO.
struct OneBlock {
    memory: Box<[u8; 4096]>,
    taken: AtomicUsize,
}

unsafe extern "C" fn user_alloc(obj: *mut c_void, _size: usize) -> *mut c_void {
    let a = unsafe { &*(obj as *const OneBlock) };
    a.taken.fetch_add(1, Ordering::Relaxed);
    a.memory.as_ptr() as *mut c_void
}
unsafe extern "C" fn user_free(obj: *mut c_void, _block: *mut c_void) {
    let a = unsafe { &*(obj as *const OneBlock) };
    a.taken.fetch_sub(1, Ordering::Relaxed);
}
unsafe extern "C" fn user_get_addr(block: *mut c_void) -> *mut c_void {
    block
}

fn user_callbacks() -> Callbacks {
    let allocator: &'static OneBlock = Box::leak(Box::new(OneBlock {
        memory: Box::new([0; 4096]),
        taken: AtomicUsize::new(0),
    }));
    Callbacks {
        obj: AllocatorObj::new(allocator as *const OneBlock as *mut c_void).unwrap(),
        alloc: user_alloc,
        free: user_free,
        alloc_advise: None,
        get_addr_from_block: user_get_addr,
    }
}

fn tracked_callbacks() -> Callbacks {
    tracking::set_enabled(true);
    let user = user_callbacks();
    // A stream handle as a runtime hands them out; nothing dereferences it.
    let stream = StreamKey::from_ptr(0x5555_0000_1000 as *mut c_void).unwrap();
    let registration = Registration {
        descriptor: DescriptorHandle::from_ptr(0xACA1_0000_0000_0001 as *mut c_void).unwrap(),
        callbacks: user,
    };
    tracking::callbacks_for(stream, &registration)
}

fn alloc_free(bencher: Bencher, c: Callbacks) {
    bencher.bench_local(|| {
        let c = black_box(c);
        // SAFETY: the callbacks with their own object.
        unsafe {
            let block = (c.alloc)(c.obj.as_ptr(), black_box(4096));
            (c.free)(c.obj.as_ptr(), black_box(block));
        }
    });
}

fn launch(bencher: Bencher, c: Callbacks) {
    bencher.bench_local(|| {
        let c = black_box(c);
        // SAFETY: the callbacks with their own object.
        unsafe {
            let block = (c.alloc)(c.obj.as_ptr(), black_box(4096));
            black_box((c.get_addr_from_block)(block));
            (c.free)(c.obj.as_ptr(), black_box(block));
        }
    });
}

#[divan::bench_group]
mod alloc_free {
    use super::*;

    #[divan::bench(sample_count = 1000, sample_size = 1000)]
    fn direct(bencher: Bencher) {
        alloc_free(bencher, user_callbacks());
    }

    #[divan::bench(sample_count = 1000, sample_size = 1000)]
    fn tracked(bencher: Bencher) {
        alloc_free(bencher, tracked_callbacks());
    }

    #[divan::bench(sample_count = 1000, sample_size = 1000)]
    fn recorded(bencher: Bencher) {
        let c = tracked_callbacks();
        recording(|| alloc_free(bencher, c));
    }
}

#[divan::bench_group]
mod launch {
    use super::*;

    #[divan::bench(sample_count = 1000, sample_size = 1000)]
    fn direct(bencher: Bencher) {
        launch(bencher, user_callbacks());
    }

    #[divan::bench(sample_count = 1000, sample_size = 1000)]
    fn tracked(bencher: Bencher) {
        launch(bencher, tracked_callbacks());
    }

    #[divan::bench(sample_count = 1000, sample_size = 1000)]
    fn recorded(bencher: Bencher) {
        let c = tracked_callbacks();
        recording(|| launch(bencher, c));
    }
}

/// Runs `f` with the tracking history on, then switches it off.
fn recording(f: impl FnOnce()) {
    tracking::record_history(100_000).expect("the ring's memory");
    f();
    tracking::record_history(0).expect("switching off");
}

/// The lookup a runtime makes before each launch: GetByStream with tracking
/// on (registration lookup plus the cached tracking object).
#[divan::bench(sample_count = 1000, sample_size = 1000)]
fn tracked_lookup(bencher: Bencher) {
    let _ = tracked_callbacks();
    let user = user_callbacks();
    let stream = StreamKey::from_ptr(0x5555_0000_2000 as *mut c_void).unwrap();
    let registration = Registration {
        descriptor: DescriptorHandle::from_ptr(0xACA1_0000_0000_0002 as *mut c_void).unwrap(),
        callbacks: user,
    };
    bencher.bench_local(|| {
        black_box(tracking::callbacks_for(
            black_box(stream),
            black_box(&registration),
        ))
    });
}
