//! The host runtime's launch path, measured through the C ABI.
//!
//!     cargo bench --bench runtime
//!
//! `launch_*`: the cost on the launching thread of one `aclallocLaunchKernel`
//! with an empty kernel (stream lookup, registration lookup, alloc,
//! getAddrFromBlock, enqueue, free); the stream's worker runs the kernels
//! concurrently (`launch_registered_own_stream`: from 1 or 2 threads, each on
//! its own stream). Each sample times 100 consecutive launches, a burst as an
//! executor issues them, so the figures are per launch in steady state. `launches_to_completion`: 1000 launches and a
//! synchronize, reported as launches per second. The allocation columns
//! come from divan's `AllocProfiler`: a steady-state launch allocates nothing.

use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::ext::default_allocator::{aclallocDefaultFree, aclallocDefaultMalloc};
use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
use aclalloc::ffi::ext::pool::{aclallocPoolAlloc, aclallocPoolCreate, aclallocPoolFree};
use divan::counter::ItemsCount;
use divan::{AllocProfiler, Bencher};
use std::ffi::c_void;
use std::sync::OnceLock;

#[global_allocator]
static ALLOC: AllocProfiler = AllocProfiler::system();

fn main() {
    divan::main();
}

/// A stream-ordered allocator as simple as it gets: one block, handed out
/// again as soon as it comes back.
static mut WORKSPACE: [u8; 1 << 16] = [0; 1 << 16];

unsafe extern "C" fn one_block(_: *mut c_void, size: usize) -> *mut c_void {
    if size > 1 << 16 {
        return std::ptr::null_mut();
    }
    std::ptr::addr_of_mut!(WORKSPACE) as *mut c_void
}
unsafe extern "C" fn give_back(_: *mut c_void, _: *mut c_void) {}
unsafe extern "C" fn identity(block: *mut c_void) -> *mut c_void {
    block
}
unsafe extern "C" fn empty(_: *mut c_void, _: usize, _: *mut c_void) {}

struct Streams {
    registered: usize,
    unregistered: usize,
    /// A stream with a caching pool registered (`aclallocPoolCreate`'s
    /// descriptor, the library's defaults): the anchor of the default
    /// allocator, which is such a pool.
    pool_registered: usize,
    /// That pool's handle.
    pool: usize,
}

/// Streams on device 0, made once; `aclrtSetDevice` on the calling thread.
fn streams() -> &'static Streams {
    static STREAMS: OnceLock<Streams> = OnceLock::new();
    let s = STREAMS.get_or_init(|| unsafe {
        assert_eq!(aclrtSetDevice(0), 0);
        let mut registered: *mut c_void = std::ptr::null_mut();
        let mut unregistered: *mut c_void = std::ptr::null_mut();
        assert_eq!(aclrtCreateStream(&mut registered), 0);
        assert_eq!(aclrtCreateStream(&mut unregistered), 0);
        let desc = aclrtAllocatorCreateDesc();
        static OBJ: u8 = 0;
        aclrtAllocatorSetObjToDesc(desc, &OBJ as *const u8 as *mut c_void);
        aclrtAllocatorSetAllocFuncToDesc(desc, Some(one_block));
        aclrtAllocatorSetFreeFuncToDesc(desc, Some(give_back));
        aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, Some(identity));
        assert_eq!(aclrtAllocatorRegister(registered, desc), 0);
        let mut pool_registered: *mut c_void = std::ptr::null_mut();
        assert_eq!(aclrtCreateStream(&mut pool_registered), 0);
        let (mut pool, mut pool_desc) = (std::ptr::null_mut(), std::ptr::null_mut());
        assert_eq!(
            aclallocPoolCreate(std::ptr::null(), &mut pool, &mut pool_desc),
            0
        );
        assert_eq!(aclrtAllocatorRegister(pool_registered, pool_desc), 0);
        Streams {
            registered: registered as usize,
            unregistered: unregistered as usize,
            pool_registered: pool_registered as usize,
            pool: pool as usize,
        }
    });
    // Warm the stream up, so the benchmark sees the steady state.
    unsafe { aclrtSynchronizeStream(s.registered as *mut c_void) };
    s
}

fn launch(stream: usize, size: usize) {
    let rc = unsafe {
        aclallocLaunchKernel(
            stream as *mut c_void,
            size,
            Some(empty),
            std::ptr::null_mut(),
        )
    };
    debug_assert_eq!(rc, 0);
    divan::black_box(rc);
}

/// One launch with a 4 KiB workspace from the registered allocator.
#[divan::bench(sample_size = 100, sample_count = 1000)]
fn launch_registered_allocator(bencher: Bencher) {
    let s = streams().registered;
    bencher.bench_local(|| launch(s, 4096));
    unsafe { aclrtSynchronizeStream(s as *mut c_void) };
}

/// One launch without a workspace (lookup and enqueue only).
#[divan::bench(sample_size = 100, sample_count = 1000)]
fn launch_no_workspace(bencher: Bencher) {
    let s = streams().registered;
    bencher.bench_local(|| launch(s, 0));
    unsafe { aclrtSynchronizeStream(s as *mut c_void) };
}

/// One launch with a 4 KiB workspace from the default allocator (no
/// registration; the caching pool unless `ACLALLOC_DEFAULT_ALLOCATOR` says
/// otherwise): what most programs do. Its anchor is the next benchmark.
#[divan::bench(sample_size = 100, sample_count = 1000)]
fn launch_default_allocator(bencher: Bencher) {
    let s = streams().unregistered;
    bencher.bench_local(|| launch(s, 4096));
    unsafe { aclrtSynchronizeStream(s as *mut c_void) };
}

/// One launch with a 4 KiB workspace from a registered caching pool (its
/// C callbacks, as CANN's executor calls them): the anchor of the default
/// allocator's launch.
#[divan::bench(sample_size = 100, sample_count = 1000)]
fn launch_registered_pool(bencher: Bencher) {
    let s = streams().pool_registered;
    bencher.bench_local(|| launch(s, 4096));
    unsafe { aclrtSynchronizeStream(s as *mut c_void) };
}

/// `aclallocDefaultMalloc` + `aclallocDefaultFree` of 4 KiB (no stream):
/// the default allocator's raw functions. Anchor: the next benchmark.
#[divan::bench(sample_size = 1000, sample_count = 1000)]
fn default_raw_malloc_free(bencher: Bencher) {
    streams();
    bencher.bench_local(|| unsafe {
        let mut p: *mut c_void = std::ptr::null_mut();
        let rc = aclallocDefaultMalloc(&mut p, divan::black_box(4096), std::ptr::null_mut());
        debug_assert_eq!(rc, 0);
        divan::black_box(aclallocDefaultFree(p))
    });
}

/// `aclallocPoolAlloc` + `aclallocPoolFree` of 4 KiB on a pool of the
/// library's defaults: the pool's own pair through its C callbacks.
#[divan::bench(sample_size = 1000, sample_count = 1000)]
fn pool_c_callbacks_pair(bencher: Bencher) {
    let pool = streams().pool as *mut c_void;
    bencher.bench_local(|| aclallocPoolFree(pool, aclallocPoolAlloc(pool, divan::black_box(4096))));
}

/// 1000 launches with the registered allocator, then a synchronize.
#[divan::bench(sample_count = 50)]
fn launches_to_completion(bencher: Bencher) {
    let s = streams().registered;
    bencher.counter(ItemsCount::new(1000usize)).bench_local(|| {
        for _ in 0..1000 {
            launch(s, 4096);
        }
        unsafe { aclrtSynchronizeStream(s as *mut c_void) }
    });
}

/// A stream of this thread's own, with the registered-allocator callbacks:
/// each benchmark thread launches on a different stream, as an engine's
/// per-stream executor threads do.
fn own_stream() -> usize {
    thread_local! {
        static OWN: usize = unsafe {
            assert_eq!(aclrtSetDevice(0), 0);
            let mut stream: *mut c_void = std::ptr::null_mut();
            assert_eq!(aclrtCreateStream(&mut stream), 0);
            let desc = aclrtAllocatorCreateDesc();
            static OBJ: u8 = 0;
            aclrtAllocatorSetObjToDesc(desc, &OBJ as *const u8 as *mut c_void);
            aclrtAllocatorSetAllocFuncToDesc(desc, Some(one_block));
            aclrtAllocatorSetFreeFuncToDesc(desc, Some(give_back));
            aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, Some(identity));
            assert_eq!(aclrtAllocatorRegister(stream, desc), 0);
            stream as usize
        };
    }
    OWN.with(|s| *s)
}

/// One launch with a 4 KiB workspace from the registered allocator, from 1
/// or 2 threads at once, each on its own stream: whether launchers on
/// different streams hold each other up.
#[divan::bench(threads = [1, 2], sample_size = 100, sample_count = 1000)]
fn launch_registered_own_stream(bencher: Bencher) {
    bencher.bench(|| {
        let s = own_stream();
        launch(s, 4096);
    });
}
