//! What the tracking layer adds to an allocator call: the user's callbacks
//! called directly against the same callbacks called through the tracking
//! object and functions that `aclrtAllocatorGetByStream` hands out with
//! tracking on, in the same run.
//!
//!     cargo bench --bench tracking
//!
//! `alloc_free`: one alloc+free pair (the overhead target: at most 20 ns
//! added per pair). `launch`: alloc, getAddrFromBlock, free, what an
//! operator launch does (the address check against live and recently freed
//! ranges happens here). The user's allocator is a one-block LIFO, so the
//! numbers are the layer's cost, not the allocator's. The allocation profiler
//! counts heap allocations per iteration (zero in steady state).
//!
//! `alloc_free::floor`: the work tracking a pair cannot do without, inlined
//! into the loop with no call chain: the user's two calls (the anchor), the
//! allocator's lock around each (noting the owner inside: the "two streams
//! in one allocator" detector), one probe and one rewrite of the block's
//! record per call (`base::tracked`, four words of metadata as the tracking
//! layer keeps), and the counters. What `tracked` costs above it is the tracking
//! callbacks' own (calls, frames, the object's fields, the thread's last
//! allocation, the history switch, the block's time).
//!
//! `alloc_free::guarded`: the user's two calls through the foreign-call
//! trampoline only (`base::foreign_call`, what every call of a user's
//! function goes through), nothing else: the guard's own cost per pair.
//!
//! `two_workspaces`: a launch that takes two workspaces before asking their
//! addresses (alloc A, alloc B, getAddrFromBlock A, getAddrFromBlock B,
//! free B, free A): A is not the thread's last allocation, so its
//! getAddrFromBlock searches the allocator records.
//!
//! `stacks`: the tracked pair with allocating stacks on (16 frames, as
//! `aclalloc run --stacks`), against the tracked pair without and against
//! glibc's `backtrace()` of 16 frames alone, in the same run.
//!
//! `recorded`: the tracked callbacks with the history on
//! (`aclallocTrackingRecordHistory`, a ring of 100,000 events, which wraps
//! during the run as a long-running service's would); the `tracked`
//! variants run with it off.

use aclalloc::base::foreign_call::{self, Callback};
use aclalloc::base::tracked::{History, Meta, Tracked, META_WORDS};
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

/// The user's allocator for two workspaces: two 4 KiB blocks, LIFO.
struct TwoBlocks {
    memory: Box<[[u8; 4096]; 2]>,
    taken: AtomicUsize,
}

unsafe extern "C" fn two_alloc(obj: *mut c_void, _size: usize) -> *mut c_void {
    let a = unsafe { &*(obj as *const TwoBlocks) };
    let i = a.taken.fetch_add(1, Ordering::Relaxed) & 1;
    a.memory[i].as_ptr() as *mut c_void
}
unsafe extern "C" fn two_free(obj: *mut c_void, _block: *mut c_void) {
    let a = unsafe { &*(obj as *const TwoBlocks) };
    a.taken.fetch_sub(1, Ordering::Relaxed);
}

fn two_block_callbacks() -> Callbacks {
    let allocator: &'static TwoBlocks = Box::leak(Box::new(TwoBlocks {
        memory: Box::new([[0; 4096]; 2]),
        taken: AtomicUsize::new(0),
    }));
    Callbacks {
        obj: AllocatorObj::new(allocator as *const TwoBlocks as *mut c_void).unwrap(),
        alloc: two_alloc,
        free: two_free,
        alloc_advise: None,
        get_addr_from_block: user_get_addr,
    }
}

fn tracked_callbacks() -> Callbacks {
    tracked(user_callbacks(), 0x5555_0000_1000, 0xACA1_0000_0000_0001)
}

/// The tracking callbacks for `user` registered on `stream` (a number)
/// with `descriptor` (a number), as GetByStream hands them out.
fn tracked(user: Callbacks, stream: usize, descriptor: usize) -> Callbacks {
    tracking::set_enabled(true);
    // A stream handle as a runtime hands them out; nothing dereferences it.
    let stream = StreamKey::from_ptr(stream as *mut c_void).unwrap();
    let registration = Registration {
        descriptor: DescriptorHandle::from_ptr(descriptor as *mut c_void).unwrap(),
        callbacks: user,
    };
    tracking::callbacks_for(stream, &registration)
}

fn two_workspaces(bencher: Bencher, c: Callbacks) {
    bencher.bench_local(|| {
        let c = black_box(c);
        // SAFETY: the callbacks with their own object.
        unsafe {
            let a = (c.alloc)(c.obj.as_ptr(), black_box(4096));
            let b = (c.alloc)(c.obj.as_ptr(), black_box(4096));
            black_box((c.get_addr_from_block)(a));
            black_box((c.get_addr_from_block)(b));
            (c.free)(c.obj.as_ptr(), black_box(b));
            (c.free)(c.obj.as_ptr(), black_box(a));
        }
    });
}

/// The tracking layer's metadata per block, for the floor: four words.
#[derive(Clone, Copy)]
struct FloorMeta([usize; META_WORDS]);

impl Meta for FloorMeta {
    #[inline(always)]
    fn pack(&self) -> [usize; META_WORDS] {
        self.0
    }
    #[inline(always)]
    fn unpack(w: &[usize; META_WORDS]) -> Self {
        FloorMeta(*w)
    }
}

/// Stands for the block's time (the clock thread's word) and for the
/// synchronization generation a free records: one load each, as tracking.
static FLOOR_TIME: AtomicUsize = AtomicUsize::new(1);
static FLOOR_GENERATION: AtomicUsize = AtomicUsize::new(1);

fn floor(bencher: Bencher) {
    let c = user_callbacks();
    let books: &'static Tracked<FloorMeta> =
        Box::leak(Box::new(Tracked::new(History::UntilForgotten, ())));
    let get_addr = user_get_addr as *const () as usize;
    bencher.bench_local(|| {
        let c = black_box(c);
        let stream = black_box(0x5555_0000_1000usize);
        // SAFETY: the callbacks with their own object.
        unsafe {
            let mut g = books.enter(stream, |_| {}).unwrap();
            let block = (c.alloc)(c.obj.as_ptr(), black_box(4096)) as usize;
            let meta = FloorMeta([0, FLOOR_TIME.load(Ordering::Relaxed), 0, get_addr]);
            black_box(g.replace(block, 4096, stream, meta).is_some());
            drop(g);
            let mut g = books.enter(stream, |_| {}).unwrap();
            (c.free)(c.obj.as_ptr(), black_box(block as *mut c_void));
            let generation = FLOOR_GENERATION.load(Ordering::Relaxed) as u64;
            black_box(g.free(block, stream, generation).is_ok());
        }
    });
}

fn guarded(bencher: Bencher) {
    let c = user_callbacks();
    let (stream, descriptor) = (0, 0);
    let alloc_site = || Callback::Alloc { stream, descriptor };
    let free_site = || Callback::Free { stream, descriptor };
    bencher.bench_local(|| {
        let c = black_box(c);
        // SAFETY: the callbacks with their own object.
        unsafe {
            let block = foreign_call::alloc(c.alloc, c.obj.as_ptr(), black_box(4096), alloc_site);
            foreign_call::free(c.free, c.obj.as_ptr(), black_box(block), free_site);
        }
    });
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

    #[divan::bench(sample_count = 1000, sample_size = 1000)]
    fn floor(bencher: Bencher) {
        super::floor(bencher);
    }

    #[divan::bench(sample_count = 1000, sample_size = 1000)]
    fn guarded(bencher: Bencher) {
        super::guarded(bencher);
    }
}

#[divan::bench_group]
mod stacks {
    use super::*;

    #[divan::bench(sample_count = 200, sample_size = 100)]
    fn tracked(bencher: Bencher) {
        alloc_free(bencher, tracked_callbacks());
    }

    #[divan::bench(sample_count = 200, sample_size = 100)]
    fn tracked_with_stacks(bencher: Bencher) {
        let c = tracked_callbacks();
        tracking::set_stack_depth(16);
        alloc_free(bencher, c);
        tracking::set_stack_depth(0);
    }

    #[divan::bench(sample_count = 200, sample_size = 100)]
    fn libc_backtrace(bencher: Bencher) {
        bencher.bench_local(|| {
            let mut frames = [std::ptr::null_mut::<c_void>(); 16];
            // SAFETY: `frames` holds the 16 entries asked for.
            black_box(unsafe { libc::backtrace(frames.as_mut_ptr(), 16) });
        });
    }
}

#[divan::bench_group]
mod two_workspaces {
    use super::*;

    #[divan::bench(sample_count = 1000, sample_size = 1000)]
    fn direct(bencher: Bencher) {
        two_workspaces(bencher, two_block_callbacks());
    }

    #[divan::bench(sample_count = 1000, sample_size = 1000)]
    fn tracked(bencher: Bencher) {
        let c = super::tracked(
            two_block_callbacks(),
            0x5555_0000_3000,
            0xACA1_0000_0000_0003,
        );
        two_workspaces(bencher, c);
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
