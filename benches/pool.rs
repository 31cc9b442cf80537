//! The caching pool against two anchors written here, all on the same
//! device-memory backing (`HostMemory`, whose malloc is far cheaper than a
//! real `aclrtMalloc`, so the anchors' device calls are under-priced):
//!
//! - `MallocPerBlock`: every alloc is a fresh device malloc and every free a
//!   device free, as in CANN's custom-allocator sample;
//! - `SlotPool`: a 256-slot best-fit buffer pool with 5 % look-ahead and no
//!   splitting, as llama.cpp's CANN backend (`ggml_cann_pool_leg`).
//!
//! Timed: (1) alloc+free of a cached size, (2) a decode-like trace, (3) a
//! prefill-like trace, (4) alloc+free on 1 and 2 threads sharing one pool,
//! all on stream 0 (one shard) or each thread on a stream of its own, (5)
//! the pair of (1) with the allocation history off and on.
//! Printed to stderr before the timings: device allocations after the first
//! decode token, and peak reserved / peak requested on the prefill trace.
//!
//! Run: `cargo bench --bench pool`

use aclalloc::pool::{DeviceMemory, HostMemory, Pool, PoolConfig};
use parking_lot::Mutex;
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

const MIB: usize = 1 << 20;
const KIB: usize = 1 << 10;

fn device() -> Arc<HostMemory> {
    Arc::new(HostMemory::new(1 << 40))
}

#[derive(Clone, Copy)]
struct Blk {
    addr: usize,
    size: usize,
}

/// What the traces need from an allocator.
trait Alloc: Sync {
    fn alloc(&self, size: usize) -> Blk;
    fn free(&self, b: Blk);
    fn peak_reserved(&self) -> usize;
    fn device_allocs(&self) -> u64;
}

// ---- the pool ---------------------------------------------------------------

struct PoolAlloc {
    pool: Pool,
    device: Arc<HostMemory>,
}

impl PoolAlloc {
    fn new() -> Self {
        let device = device();
        PoolAlloc {
            pool: Pool::new(PoolConfig::default(), device.clone()).unwrap(),
            device,
        }
    }
}

impl Alloc for PoolAlloc {
    #[inline]
    fn alloc(&self, size: usize) -> Blk {
        Blk {
            addr: self.pool.malloc(size).unwrap().get(),
            size,
        }
    }
    #[inline]
    fn free(&self, b: Blk) {
        self.pool.free(b.addr).unwrap()
    }
    fn peak_reserved(&self) -> usize {
        self.pool.max_memory_reserved()
    }
    fn device_allocs(&self) -> u64 {
        self.device.calls().0
    }
}

// ---- anchor 1: one device malloc per block (CANN's sample) ---------------------

struct MallocPerBlock {
    device: Arc<HostMemory>,
    reserved: AtomicUsize,
    peak: AtomicUsize,
}

impl MallocPerBlock {
    fn new() -> Self {
        MallocPerBlock {
            device: device(),
            reserved: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }
}

fn round512(n: usize) -> usize {
    n.max(1).div_ceil(512) * 512
}

impl Alloc for MallocPerBlock {
    fn alloc(&self, size: usize) -> Blk {
        let size = round512(size);
        let addr = self.device.malloc(size).unwrap().get();
        let now = self.reserved.fetch_add(size, Ordering::Relaxed) + size;
        self.peak.fetch_max(now, Ordering::Relaxed);
        Blk { addr, size }
    }
    fn free(&self, b: Blk) {
        self.device
            .free(std::num::NonZeroUsize::new(b.addr).unwrap(), b.size);
        self.reserved.fetch_sub(b.size, Ordering::Relaxed);
    }
    fn peak_reserved(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }
    fn device_allocs(&self) -> u64 {
        self.device.calls().0
    }
}

// ---- anchor 2: 256-slot best-fit buffer pool (llama.cpp's ggml_cann_pool_leg) --

const MAX_BUFFERS: usize = 256;

struct SlotPool {
    device: Arc<HostMemory>,
    inner: Mutex<SlotInner>,
}

struct SlotInner {
    slots: [(usize, usize); MAX_BUFFERS], // (ptr, size); ptr 0 = empty
    pool_size: usize,
    peak: usize,
}

impl SlotPool {
    fn new() -> Self {
        SlotPool {
            device: device(),
            inner: Mutex::new(SlotInner {
                slots: [(0, 0); MAX_BUFFERS],
                pool_size: 0,
                peak: 0,
            }),
        }
    }
}

impl Alloc for SlotPool {
    fn alloc(&self, size: usize) -> Blk {
        let size = size.max(1).div_ceil(128) * 128;
        let mut p = self.inner.lock();
        let mut best = None;
        let mut best_size = usize::MAX;
        for (i, &(ptr, s)) in p.slots.iter().enumerate() {
            if ptr != 0 && s >= size && s < best_size {
                best = Some(i);
                best_size = s;
                if s == size {
                    break;
                }
            }
        }
        if let Some(i) = best {
            let (ptr, s) = p.slots[i];
            p.slots[i] = (0, 0);
            return Blk { addr: ptr, size: s };
        }
        let look_ahead = (size as f64 * 1.05) as usize;
        let addr = self.device.malloc(look_ahead).unwrap().get();
        p.pool_size += look_ahead;
        p.peak = p.peak.max(p.pool_size);
        Blk {
            addr,
            size: look_ahead,
        }
    }
    fn free(&self, b: Blk) {
        let mut p = self.inner.lock();
        if let Some(slot) = p.slots.iter_mut().find(|s| s.0 == 0) {
            *slot = (b.addr, b.size);
            return;
        }
        p.pool_size -= b.size;
        drop(p);
        self.device
            .free(std::num::NonZeroUsize::new(b.addr).unwrap(), b.size);
    }
    fn peak_reserved(&self) -> usize {
        self.inner.lock().peak
    }
    fn device_allocs(&self) -> u64 {
        self.device.calls().0
    }
}

// ---- traces -------------------------------------------------------------------

const LAYERS: usize = 32;
/// Per-layer workspaces of a 7B-class model decoding one token (norm,
/// attention, projection, MLP), nested LIFO.
const DECODE_SIZES: [usize; 4] = [16 * KIB, 1536 * KIB, 256 * KIB, 11 * MIB];

fn decode_token(a: &dyn Alloc) {
    let hidden = a.alloc(32 * KIB);
    for _ in 0..LAYERS {
        let norm = a.alloc(DECODE_SIZES[0]);
        let attn = a.alloc(DECODE_SIZES[1]);
        let proj = a.alloc(DECODE_SIZES[2]);
        a.free(black_box(proj));
        let mlp = a.alloc(DECODE_SIZES[3]);
        a.free(black_box(mlp));
        a.free(black_box(attn));
        a.free(black_box(norm));
    }
    a.free(hidden);
}

/// Seeded sequence lengths with a heavy (Pareto, alpha 1.2) tail, 16..=8192.
fn sequence_lengths(n: usize) -> Vec<usize> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let u = ((x >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
            ((32.0 / u.powf(1.0 / 1.2)) as usize).clamp(16, 8192)
        })
        .collect()
}

/// One prefill request of `len` tokens (hidden 4096, 2-byte elements): a
/// hidden-state buffer for the whole request and per-layer activations,
/// nested LIFO. Returns the peak of requested bytes inside it.
fn prefill(a: &dyn Alloc, len: usize, live: &mut usize, peak: &mut usize) {
    let h = len * 4096 * 2;
    let mut take = |a: &dyn Alloc, size: usize, live: &mut usize| {
        *live += size;
        *peak = (*peak).max(*live);
        a.alloc(size)
    };
    let hidden = take(a, h, live);
    for _ in 0..4 {
        let qkv = take(a, 3 * h, live);
        let attn = take(a, h, live);
        *live -= qkv.size.min(3 * h);
        a.free(qkv);
        let mlp = take(a, 4 * h, live);
        *live -= 4 * h;
        a.free(mlp);
        *live -= h;
        a.free(attn);
    }
    *live -= h;
    a.free(hidden);
}

fn prefill_trace(a: &dyn Alloc) -> usize {
    let (mut live, mut peak) = (0, 0);
    for len in sequence_lengths(PREFILL_REQUESTS) {
        prefill(a, len, &mut live, &mut peak);
    }
    peak
}

const PREFILL_REQUESTS: usize = 200;

fn anchors() -> [(&'static str, Box<dyn Alloc>); 3] {
    [
        ("pool", Box::new(PoolAlloc::new())),
        ("malloc-per-block", Box::new(MallocPerBlock::new())),
        ("slot-pool", Box::new(SlotPool::new())),
    ]
}

fn report() {
    eprintln!("decode trace ({LAYERS} layers, 20 tokens): device allocations");
    for (name, a) in anchors() {
        decode_token(&*a);
        let first = a.device_allocs();
        for _ in 0..19 {
            decode_token(&*a);
        }
        eprintln!(
            "  {name:<17} first token {first:>4}, next 19 tokens {:>5}",
            a.device_allocs() - first
        );
    }
    eprintln!("prefill trace ({PREFILL_REQUESTS} requests, Pareto lengths): peak reserved / peak requested");
    for (name, a) in anchors() {
        let requested = prefill_trace(&*a);
        let reserved = a.peak_reserved();
        eprintln!(
            "  {name:<17} {:>8.1} MiB / {:>8.1} MiB = {:.3}  (device allocations {})",
            reserved as f64 / MIB as f64,
            requested as f64 / MIB as f64,
            reserved as f64 / requested as f64,
            a.device_allocs()
        );
    }
}

fn main() {
    report();
    divan::main();
}

// ---- (1) alloc+free of a cached size ---------------------------------------------

#[divan::bench_group(sample_size = 4000)]
mod pair {
    use super::*;

    fn run(bencher: divan::Bencher, a: &dyn Alloc) {
        a.free(a.alloc(4096));
        bencher.bench_local(|| a.free(a.alloc(black_box(4096))));
    }

    #[divan::bench]
    fn pool(bencher: divan::Bencher) {
        run(bencher, &PoolAlloc::new());
    }

    /// The host's own allocator, glibc `malloc` + `free` of the same size:
    /// the anchor of a cached pair (a per-thread cache in front of arenas).
    #[divan::bench]
    fn glibc_malloc_free(bencher: divan::Bencher) {
        extern "C" {
            fn malloc(size: usize) -> *mut std::ffi::c_void;
            fn free(ptr: *mut std::ffi::c_void);
        }
        bencher.bench_local(|| unsafe { free(black_box(malloc(black_box(4096)))) });
    }

    /// Through the C ABI: the registered callbacks, handle lookup included,
    /// on a pool created by `aclallocPoolCreate`.
    #[divan::bench]
    fn pool_c_callbacks(bencher: divan::Bencher) {
        use aclalloc::ffi::cann::runtime::{aclInit, aclrtSetDevice};
        use aclalloc::ffi::ext::pool::*;
        // The C API's pool takes its segments from aclrtMalloc on the
        // current device (the host runtime here).
        unsafe { aclInit(std::ptr::null()) };
        assert_eq!(aclrtSetDevice(0), 0);
        let (mut pool, mut desc) = (std::ptr::null_mut(), std::ptr::null_mut());
        let cfg = aclallocPoolConfig {
            max_split_size: 0,
            garbage_collection_threshold: 0.0,
            memory_limit: 0,
            memory_fraction: 0.0,
            expandable_segments: 0,
            roundup_power2_divisions: [0; 16],
        };
        assert_eq!(unsafe { aclallocPoolCreate(&cfg, &mut pool, &mut desc) }, 0);
        bencher.bench_local(|| aclallocPoolFree(pool, aclallocPoolAlloc(pool, black_box(4096))));
    }

    /// torch_npu's path: `aclallocTorchMalloc` / `aclallocTorchFree`, the
    /// functions `NPUPluggableAllocator(<libaclalloc>, ...)` calls, served
    /// by device 0's default pool (the device and stream arguments checked
    /// on each call). Compare with `pool_c_callbacks`.
    #[divan::bench]
    fn torch_npu_exports(bencher: divan::Bencher) {
        use aclalloc::ffi::cann::runtime::{aclInit, aclrtSetDevice};
        use aclalloc::ffi::ext::torch_allocator::{aclallocTorchFree, aclallocTorchMalloc};
        unsafe { aclInit(std::ptr::null()) };
        assert_eq!(aclrtSetDevice(0), 0);
        let stream = std::ptr::null_mut();
        bencher.bench_local(|| {
            let p = aclallocTorchMalloc(black_box(4096), 0, stream);
            aclallocTorchFree(black_box(p), 4096, 0, stream);
        });
    }

    #[divan::bench]
    fn malloc_per_block(bencher: divan::Bencher) {
        run(bencher, &MallocPerBlock::new());
    }

    #[divan::bench]
    fn slot_pool_full(bencher: divan::Bencher) {
        // Steady state of a serving process: every slot holds a buffer.
        let a = SlotPool::new();
        let held: Vec<_> = (0..MAX_BUFFERS).map(|i| a.alloc(8192 + i * 512)).collect();
        held.into_iter().for_each(|b| a.free(b));
        run(bencher, &a);
    }
}

/// A pool from `aclallocPoolCreate` with the defaults, on device 0 of the
/// host runtime.
fn c_pool() -> aclalloc::ffi::ext::pool::aclallocPool {
    use aclalloc::ffi::cann::runtime::{aclInit, aclrtSetDevice};
    // SAFETY: no configuration file; the host runtime.
    unsafe { aclInit(std::ptr::null()) };
    assert_eq!(aclrtSetDevice(0), 0);
    let (mut pool, mut desc) = (std::ptr::null_mut(), std::ptr::null_mut());
    assert_eq!(
        // SAFETY: NULL config (the defaults); both outputs are writable.
        unsafe {
            aclalloc::ffi::ext::pool::aclallocPoolCreate(std::ptr::null(), &mut pool, &mut desc)
        },
        0
    );
    pool
}

/// 64 blocks of `size` allocated through the C callbacks, then freed in a
/// fixed shuffled order (multiplication by an odd number modulo 64).
fn batch_of_64(pool: aclalloc::ffi::ext::pool::aclallocPool, size: usize) {
    let mut live = [std::ptr::null_mut(); 64];
    for slot in live.iter_mut() {
        *slot = aclalloc::ffi::ext::pool::aclallocPoolAlloc(pool, black_box(size));
    }
    for i in (0..64).map(|i| (i * 37 + 11) % 64) {
        aclalloc::ffi::ext::pool::aclallocPoolFree(pool, black_box(live[i]));
    }
}

/// 64 live blocks of one size allocated through the C callbacks, then freed
/// in a shuffled order (a thread's cache holds 64 blocks of one size, so a
/// warm batch stays in it); one iteration is the batch of 64 pairs.
#[divan::bench(args = [4096, 1 << 20, 12 << 20], sample_size = 50)]
fn batch_of_64_c_callbacks(bencher: divan::Bencher, size: usize) {
    let pool = c_pool();
    bencher.bench_local(|| batch_of_64(pool, size));
    assert_eq!(aclalloc::ffi::ext::pool::aclallocPoolDestroy(pool), 0);
}

/// The batch above of 64 blocks of 4 KiB, then one of 64 blocks of 48 KiB
/// (layers of different shapes, one after the other); one iteration is both
/// batches, 128 pairs.
#[divan::bench(sample_size = 50)]
fn batches_of_64_in_two_sizes_c_callbacks(bencher: divan::Bencher) {
    let pool = c_pool();
    bencher.bench_local(|| {
        for size in [4096, 48 << 10] {
            batch_of_64(pool, size);
        }
    });
    assert_eq!(aclalloc::ffi::ext::pool::aclallocPoolDestroy(pool), 0);
}

// ---- (2) decode-like trace ------------------------------------------------------------

#[divan::bench_group]
mod decode {
    use super::*;

    fn run(bencher: divan::Bencher, a: &dyn Alloc) {
        decode_token(a);
        bencher.bench_local(|| decode_token(a));
    }

    #[divan::bench]
    fn pool(bencher: divan::Bencher) {
        run(bencher, &PoolAlloc::new());
    }

    #[divan::bench]
    fn malloc_per_block(bencher: divan::Bencher) {
        run(bencher, &MallocPerBlock::new());
    }

    #[divan::bench]
    fn slot_pool(bencher: divan::Bencher) {
        run(bencher, &SlotPool::new());
    }
}

// ---- (3) prefill-like trace -------------------------------------------------------------

#[divan::bench_group(sample_count = 10, sample_size = 1)]
mod prefill_trace {
    use super::*;

    #[divan::bench]
    fn pool(bencher: divan::Bencher) {
        let a = PoolAlloc::new();
        bencher.bench_local(|| prefill_trace(&a));
    }

    #[divan::bench]
    fn malloc_per_block(bencher: divan::Bencher) {
        let a = MallocPerBlock::new();
        bencher.bench_local(|| prefill_trace(&a));
    }

    #[divan::bench]
    fn slot_pool(bencher: divan::Bencher) {
        let a = SlotPool::new();
        bencher.bench_local(|| prefill_trace(&a));
    }
}

// ---- (4) threads sharing one pool ------------------------------------------------------------

fn shared_pool() -> &'static PoolAlloc {
    static POOL: OnceLock<PoolAlloc> = OnceLock::new();
    POOL.get_or_init(PoolAlloc::new)
}

#[divan::bench(threads = [1, 2], sample_size = 1000)]
fn shared_pool_pair(bencher: divan::Bencher) {
    let a = shared_pool();
    bencher.bench(|| a.free(a.alloc(black_box(4096))));
}

#[divan::bench(threads = [1, 2], sample_size = 1000)]
fn shared_pool_decode_token(bencher: divan::Bencher) {
    let a = shared_pool();
    bencher.bench(|| decode_token(a));
}

/// Aggregate throughput: `threads` threads each doing 100,000 alloc+free
/// pairs of their own size on one shared pool; one iteration is the batch.
#[divan::bench(args = [1, 2], sample_count = 20, sample_size = 1)]
fn shared_pool_batch_of_100k_pairs_per_thread(bencher: divan::Bencher, threads: usize) {
    let a = shared_pool();
    bencher.bench_local(|| {
        std::thread::scope(|s| {
            for t in 0..threads {
                s.spawn(move || {
                    for _ in 0..100_000 {
                        a.free(a.alloc(black_box(4096 + 512 * t)));
                    }
                });
            }
        })
    });
}

/// The pairs above with each thread on a stream of its own (streams 1, 2, ...
/// in the order the threads first run), so each thread works in its own
/// shard of the pool; stream-0 callers share one.
#[divan::bench(threads = [1, 2], sample_size = 1000)]
fn shared_pool_pair_own_stream(bencher: divan::Bencher) {
    let a = shared_pool();
    bencher.bench(|| {
        let stream = own_stream();
        a.pool
            .free(a.pool.malloc_on(stream, black_box(4096)).unwrap().get())
            .unwrap()
    });
}

fn own_stream() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(1);
    thread_local! {
        static STREAM: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    STREAM.with(|s| *s)
}

/// The batch above with thread `t` on stream `t + 1`.
#[divan::bench(args = [1, 2], sample_count = 20, sample_size = 1)]
fn shared_pool_batch_of_100k_pairs_per_thread_own_stream(bencher: divan::Bencher, threads: usize) {
    let a = shared_pool();
    bencher.bench_local(|| {
        std::thread::scope(|s| {
            for t in 0..threads {
                s.spawn(move || {
                    for _ in 0..100_000 {
                        let b = a.pool.malloc_on(t + 1, black_box(4096 + 512 * t));
                        a.pool.free(b.unwrap().get()).unwrap();
                    }
                });
            }
        })
    });
}

// ---- (5) the allocation history: alloc+free with recording off and on ---------

/// The pair of (1) on a pool whose history is off (the default) or on
/// (a ring of 100,000 events, full and wrapping while timed: three events
/// per pair, alloc, free_requested and free_completed).
#[divan::bench_group(sample_size = 4000)]
mod history {
    use super::*;

    fn run(bencher: divan::Bencher, max_entries: usize) {
        let pool = Pool::new(PoolConfig::default(), device()).unwrap();
        pool.record_history(max_entries).unwrap();
        for _ in 0..max_entries {
            pool.free(pool.malloc(4096).unwrap().get()).unwrap();
        }
        bencher.bench_local(|| {
            pool.free(pool.malloc(black_box(4096)).unwrap().get())
                .unwrap()
        });
        assert_eq!(pool.history().events.len(), max_entries);
    }

    #[divan::bench]
    fn pair_recording_off(bencher: divan::Bencher) {
        run(bencher, 0);
    }

    #[divan::bench]
    fn pair_recording_on(bencher: divan::Bencher) {
        run(bencher, 100_000);
    }
}

// ---- (6) blocks freed on another thread than the one that allocated them -----

/// A service's request thread allocates and a completion thread frees: 16
/// blocks of 4 KiB allocated on a helper thread (not timed) and freed on the
/// benchmark's thread (timed, per batch of 16). Anchor: glibc `malloc` on
/// the helper thread and `free` here, the same pattern.
#[divan::bench_group(sample_size = 100, sample_count = 500)]
mod free_on_other_thread {
    use super::*;
    use std::sync::mpsc;

    const BATCH: usize = 16;

    fn run(bencher: divan::Bencher, alloc: fn(usize) -> usize, free: fn(usize)) {
        let (ask, asked) = mpsc::channel::<()>();
        let (give, given) = mpsc::channel::<Vec<usize>>();
        let helper = std::thread::spawn(move || {
            for () in asked {
                let batch = (0..BATCH).map(|_| alloc(4096)).collect();
                if give.send(batch).is_err() {
                    break;
                }
            }
        });
        bencher
            .with_inputs(|| {
                ask.send(()).unwrap();
                given.recv().unwrap()
            })
            .bench_local_values(|batch: Vec<usize>| {
                for &addr in &batch {
                    free(black_box(addr));
                }
                batch
            });
        drop(ask);
        helper.join().unwrap();
    }

    fn pool() -> &'static Pool {
        static POOL: OnceLock<Pool> = OnceLock::new();
        POOL.get_or_init(|| Pool::new(PoolConfig::default(), device()).unwrap())
    }

    #[divan::bench]
    fn pool_freed_here(bencher: divan::Bencher) {
        run(
            bencher,
            |size| pool().malloc(size).unwrap().get(),
            |addr| pool().free(addr).unwrap(),
        );
    }

    #[divan::bench]
    fn glibc_freed_here(bencher: divan::Bencher) {
        extern "C" {
            fn malloc(size: usize) -> *mut std::ffi::c_void;
            fn free(ptr: *mut std::ffi::c_void);
        }
        run(
            bencher,
            |size| unsafe { malloc(size) as usize },
            |addr| unsafe { free(addr as *mut std::ffi::c_void) },
        );
    }
}
