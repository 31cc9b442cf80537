//! The pool through its C ABI against a model of PyTorch's caching
//! allocator (`pool_model/pytorch.rs`) and glibc `malloc`/`free` of the same
//! sizes, timed in one run, interleaved, three times. Each workload runs on
//! each of 8 sizes from 512 B to 12 MiB alone (a line gives the range over
//! the sizes), then on the 8 sizes cycled ("mixed"). Figures are nanoseconds
//! per alloc+free (median of 5 samples); the two-thread line is throughput on
//! two threads, each on a stream of its own, over throughput on one.
//!
//! Run: `cargo bench --bench pool_model`

#[path = "pool_model/pytorch.rs"]
mod pytorch;

use aclalloc::ffi::cann::allocator::{aclrtAllocatorGetByStream, aclrtAllocatorRegister};
use aclalloc::ffi::cann::runtime::{aclInit, aclrtCreateStream, aclrtSetDevice};
use aclalloc::ffi::ext::pool::{
    aclallocPoolAlloc, aclallocPoolCreate, aclallocPoolCreateStreamDesc, aclallocPoolDestroy,
    aclallocPoolFree,
};
use aclalloc::pool::{HostMemory, Pool, PoolConfig};
use pytorch::TorchModel;
use std::ffi::c_void;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;
const SIZES: [usize; 8] = [
    512,
    4 * KIB,
    48 * KIB,
    320 * KIB,
    MIB,
    3 * MIB,
    7 * MIB,
    12 * MIB,
];

extern "C" {
    fn malloc(size: usize) -> *mut c_void;
    fn free(ptr: *mut c_void);
}

/// An allocator under test: alloc on a stream, free.
trait Alloc: Sync {
    fn alloc(&self, size: usize, stream: usize) -> usize;
    fn free(&self, addr: usize, stream: usize);
}

struct CPool(*mut c_void);
// SAFETY: a pool handle is an integer the C ABI looks up; any thread may pass it.
unsafe impl Sync for CPool {}

impl Alloc for CPool {
    #[inline]
    fn alloc(&self, size: usize, _stream: usize) -> usize {
        let addr = aclallocPoolAlloc(self.0, size) as usize;
        assert_ne!(addr, 0, "the pool is out of memory");
        addr
    }
    #[inline]
    fn free(&self, addr: usize, _stream: usize) {
        aclallocPoolFree(self.0, addr as *mut c_void)
    }
}

/// One pool through the C ABI with a descriptor per stream
/// (`aclallocPoolCreateStreamDesc`), as a program registers it on the
/// streams of its threads: stream `s` (from 1) calls through the object of
/// the `s`-th descriptor, as CANN's executor calls a stream's registration.
struct CPoolStreams(Vec<*mut c_void>);
// SAFETY: as `CPool`: the objects are handles the C ABI looks up.
unsafe impl Sync for CPoolStreams {}

impl Alloc for CPoolStreams {
    #[inline]
    fn alloc(&self, size: usize, stream: usize) -> usize {
        let addr = aclallocPoolAlloc(self.0[stream - 1], size) as usize;
        assert_ne!(addr, 0, "the pool is out of memory");
        addr
    }
    #[inline]
    fn free(&self, addr: usize, stream: usize) {
        aclallocPoolFree(self.0[stream - 1], addr as *mut c_void)
    }
}

/// The pool's Rust API, which takes a stream (the C callbacks carry none).
impl Alloc for Pool {
    #[inline]
    fn alloc(&self, size: usize, stream: usize) -> usize {
        self.malloc_on(stream, size).unwrap().get()
    }
    #[inline]
    fn free(&self, addr: usize, _stream: usize) {
        Pool::free(self, addr).unwrap()
    }
}

impl Alloc for TorchModel {
    #[inline]
    fn alloc(&self, size: usize, stream: usize) -> usize {
        self.malloc(size, stream)
    }
    #[inline]
    fn free(&self, addr: usize, _stream: usize) {
        TorchModel::free(self, addr)
    }
}

struct Glibc;
impl Alloc for Glibc {
    #[inline]
    fn alloc(&self, size: usize, _stream: usize) -> usize {
        // SAFETY: plain malloc; the address is freed by `free` below.
        unsafe { malloc(size) as usize }
    }
    #[inline]
    fn free(&self, addr: usize, _stream: usize) {
        // SAFETY: `addr` came from `malloc` above and is freed once.
        unsafe { free(addr as *mut c_void) }
    }
}

fn c_pool() -> CPool {
    // SAFETY: no configuration file; the host runtime.
    unsafe { aclInit(std::ptr::null()) };
    assert_eq!(aclrtSetDevice(0), 0);
    let (mut pool, mut desc) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: NULL config (the defaults); both outputs are writable.
    assert_eq!(
        unsafe { aclallocPoolCreate(std::ptr::null(), &mut pool, &mut desc) },
        0
    );
    CPool(pool)
}

/// A pool with a descriptor registered on each of `streams` new streams.
fn c_pool_streams(streams: usize) -> CPoolStreams {
    let CPool(pool) = c_pool();
    let objs = (0..streams)
        .map(|_| {
            let (mut stream, mut desc, mut obj) = (
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
            // SAFETY: each out-parameter is writable; the others are NULL.
            unsafe {
                assert_eq!(aclrtCreateStream(&mut stream), 0);
                assert_eq!(aclallocPoolCreateStreamDesc(pool, stream, &mut desc), 0);
                assert_eq!(aclrtAllocatorRegister(stream, desc), 0);
                let (alloc, free, advise, addr) = (
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                );
                assert_eq!(
                    aclrtAllocatorGetByStream(
                        stream, &mut desc, &mut obj, alloc, free, advise, addr
                    ),
                    0
                );
            }
            obj
        })
        .collect();
    CPoolStreams(objs)
}

/// A fixed permutation of `0..n` (xorshift Fisher-Yates): the free order.
fn shuffled(n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    order
}

/// Byte offsets added to each size in the unaligned sets: tensors are
/// rarely a multiple of 512 bytes.
const OFFSETS: [usize; 4] = [0, 100, 200, 300];
/// The small sizes of the "small" set: activations and norms.
const SMALL: [usize; 4] = [512, 4 * KIB, 48 * KIB, 128 * KIB];

/// `sizes`, each plus every one of `OFFSETS`, interleaved so that
/// consecutive requests differ in size and offset.
fn with_offsets(sizes: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(sizes.len() * OFFSETS.len());
    for k in 0..OFFSETS.len() {
        for (i, s) in sizes.iter().enumerate() {
            // Rotate the offsets by position so that no size keeps one.
            out.push(s + OFFSETS[(i + k) % OFFSETS.len()]);
        }
    }
    out
}

/// Allocates `n` blocks of `sizes` cycled, frees them in a shuffled
/// order; `rounds` times. Returns the number of alloc+free pairs.
fn batches(
    a: &dyn Alloc,
    n: usize,
    rounds: usize,
    stream: usize,
    order: &[usize],
    sizes: &[usize],
) -> usize {
    let mut live = vec![0usize; n];
    for _ in 0..rounds {
        for (i, slot) in live.iter_mut().enumerate() {
            *slot = a.alloc(black_box(sizes[i % sizes.len()]), stream);
        }
        for &i in order {
            a.free(black_box(live[i]), stream);
        }
    }
    n * rounds
}

fn pairs(a: &dyn Alloc, rounds: usize, sizes: &[usize]) -> usize {
    for r in 0..rounds {
        a.free(black_box(a.alloc(black_box(sizes[r % sizes.len()]), 0)), 0);
    }
    rounds
}

/// One decode token of a 7B-class model (as `benches/pool.rs`): 32 layers
/// of nested workspaces.
fn decode(a: &dyn Alloc, tokens: usize) -> usize {
    for _ in 0..tokens {
        let hidden = a.alloc(32 * KIB, 0);
        for _ in 0..32 {
            let norm = a.alloc(16 * KIB, 0);
            let attn = a.alloc(1536 * KIB, 0);
            let proj = a.alloc(256 * KIB, 0);
            a.free(black_box(proj), 0);
            let mlp = a.alloc(11 * MIB, 0);
            a.free(black_box(mlp), 0);
            a.free(black_box(attn), 0);
            a.free(black_box(norm), 0);
        }
        a.free(hidden, 0);
    }
    tokens * (1 + 4 * 32)
}

/// Nanoseconds per pair: the median of 5 samples of `work` (after one warm-up).
fn time(work: &dyn Fn() -> usize) -> f64 {
    work();
    let mut samples: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            let n = work();
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[2]
}

/// `measure()`, unless `POOL_MODEL_SIDE` names another side (model, pool,
/// glibc): then 1.0 and nothing is run, so that a profiler sees one side.
fn side(name: &str, measure: &dyn Fn() -> f64) -> f64 {
    match std::env::var("POOL_MODEL_SIDE") {
        Ok(only) if only != name => 1.0,
        _ => measure(),
    }
}

/// Pairs per second of `threads` threads, each doing batches of 64 blocks
/// of `sizes` cycled, on stream `t + 1` of `a` (the C callbacks carry no
/// stream: there every thread is on the pool's one).
fn throughput(a: &dyn Alloc, threads: usize, order: &[usize], sizes: &[usize]) -> f64 {
    let per_thread = 3000;
    let run = || {
        let t = Instant::now();
        std::thread::scope(|s| {
            for t in 0..threads {
                s.spawn(move || {
                    // The C ABI's pool takes device memory in the thread's context.
                    assert_eq!(aclrtSetDevice(0), 0);
                    batches(a, 64, per_thread, t + 1, order, sizes)
                });
            }
        });
        (threads * per_thread * 64) as f64 / t.elapsed().as_secs_f64()
    };
    run();
    let mut samples: Vec<f64> = (0..5).map(|_| run()).collect();
    samples.sort_by(f64::total_cmp);
    samples[2]
}

/// A two-thread row: its label, the pool, the model, the sizes.
type ThreadRow<'a> = (&'a str, &'a dyn Alloc, &'a dyn Alloc, &'a [usize]);

/// A workload: runs on an allocator, returns its number of pairs.
type Workload<'a> = dyn Fn(&dyn Alloc, &[usize]) -> usize + 'a;

fn main() {
    // 1,024 live blocks of 12 MiB: more than the host runtime's default 4 GiB
    // device (a budget: untouched pages cost nothing).
    std::env::set_var("ACLALLOC_DEVICE_MEMORY", "64GiB");
    let rust_pool = Pool::new(PoolConfig::default(), Arc::new(HostMemory::new(1 << 44))).unwrap();
    let threaded_model = TorchModel::new(Arc::new(HostMemory::new(1 << 44)));
    let (o64, o1024) = (shuffled(64), shuffled(1024));
    let (unaligned, small) = (with_offsets(&SIZES), with_offsets(&SMALL));
    let in_order: Vec<usize> = (0..64).collect();
    let workloads: [(&str, &Workload); 5] = [
        ("single pairs", &|a, sizes| pairs(a, 50_000, sizes)),
        ("batches of 64", &|a, sizes| {
            batches(a, 64, 300, 0, &o64, sizes)
        }),
        ("batches of 64 in order", &|a, sizes| {
            batches(a, 64, 300, 0, &in_order, sizes)
        }),
        ("batches of 1,024", &|a, sizes| {
            batches(a, 1024, 10, 0, &o1024, sizes)
        }),
        ("decode token", &|a, _| decode(a, 200)),
    ];
    println!("ns per alloc+free (median of 5); ratio = model / pool");
    println!(
        "{:<22} {:>9} {:>3} {:>15} {:>15} {:>15} {:>13}",
        "workload", "sizes", "run", "model", "pool", "glibc", "ratio"
    );
    // `cargo bench --bench pool_model -- batches` runs the rows whose workload
    // and sizes ("batches of 64 unaligned") contain "batches".
    let only = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let chosen = |name: &str| only.as_deref().map_or(true, |o| name.contains(o));
    let range = |v: &[f64]| {
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(0.0, f64::max);
        (min, max)
    };
    for (name, work) in workloads {
        let groups: Vec<(&str, Vec<&[usize]>)> = if name.starts_with("decode") {
            vec![("trace", vec![&SIZES[..1]])]
        } else {
            vec![
                ("each", SIZES.iter().map(std::slice::from_ref).collect()),
                ("mixed", vec![&SIZES[..]]),
                ("unaligned", vec![&unaligned[..]]),
                ("small", vec![&small[..]]),
            ]
        };
        for (label, sets) in groups {
            if !chosen(&format!("{name} {label}")) {
                continue;
            }
            for run in 1..=3 {
                let (mut m, mut p, mut g, mut r) = (vec![], vec![], vec![], vec![]);
                for sizes in &sets {
                    // Fresh allocators: what one size leaves cached does not
                    // crowd the device for the next.
                    let model = TorchModel::new(Arc::new(HostMemory::new(1 << 44)));
                    let pool = c_pool();
                    m.push(side("model", &|| time(&|| work(&model, sizes))));
                    p.push(side("pool", &|| time(&|| work(&pool, sizes))));
                    assert_eq!(aclallocPoolDestroy(pool.0), 0);
                    if std::env::var_os("POOL_MODEL_VERBOSE").is_some() {
                        println!(
                            "  {sizes:?}: model {:.0} pool {:.0}",
                            m[m.len() - 1],
                            p[p.len() - 1]
                        );
                    }
                    g.push(side("glibc", &|| time(&|| work(&Glibc, sizes))));
                    r.push(m[m.len() - 1] / p[p.len() - 1]);
                }
                let cell = |v: &[f64]| match range(v) {
                    (a, b) if a == b => format!("{a:.0}"),
                    (a, b) => format!("{a:.0}-{b:.0}"),
                };
                let (r0, r1) = range(&r);
                let ratio = if r0 == r1 {
                    format!("{r0:.2}x")
                } else {
                    format!("{r0:.2}-{r1:.2}x")
                };
                println!(
                    "{name:<22} {label:>9} {run:>3} {:>15} {:>15} {:>15} {ratio:>13}",
                    cell(&m),
                    cell(&p),
                    cell(&g)
                );
            }
        }
    }
    println!("pairs per second, batches of 64 per thread, each thread its own working set");
    println!(
        "{:<22} {:>3} {:>10} {:>10} {:>7} {:>10} {:>10} {:>7}",
        "", "run", "pool 1 th", "pool 2 th", "scale", "model 1", "model 2", "scale"
    );
    let four_k: &[usize] = &[4096];
    let threads: [ThreadRow; 3] = [
        ("4 KiB, Rust API", &rust_pool, &threaded_model, four_k),
        (
            "unaligned, C, 1 desc",
            &c_pool(),
            &threaded_model,
            &unaligned,
        ),
        (
            "unaligned, C, 2 descs",
            &c_pool_streams(2),
            &threaded_model,
            &unaligned,
        ),
    ];
    let rows = threads.into_iter();
    for (label, pool, model, sizes) in rows.filter(|row| chosen(&format!("two threads {}", row.0)))
    {
        for run in 1..=3 {
            let p1 = side("pool", &|| throughput(pool, 1, &o64, sizes));
            let p2 = side("pool", &|| throughput(pool, 2, &o64, sizes));
            let m1 = side("model", &|| throughput(model, 1, &o64, sizes));
            let m2 = side("model", &|| throughput(model, 2, &o64, sizes));
            println!(
                "{label:<22} {run:>3} {:>9.2}M {:>9.2}M {:>6.2}x {:>9.2}M {:>9.2}M {:>6.2}x",
                p1 / 1e6,
                p2 / 1e6,
                p2 / p1,
                m1 / 1e6,
                m2 / 1e6,
                m2 / m1
            );
        }
    }
}
