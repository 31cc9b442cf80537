//! GetByStream, the lookup on every operator launch: aclalloc's lock-free
//! table against a copy of the reference design (one global mutex over an
//! ordered map), in the same run.
//!
//!     cargo bench --bench registry
//!
//! Each iteration looks up `BATCH` streams, walking a fixed pseudo-random
//! permutation of the registered streams, so the per-lookup time is the
//! iteration time divided by `BATCH` (divan prints it as items/s; a batch
//! long enough that the 2-thread samples are not dominated by divan's own
//! synchronisation between threads). `threads`
//! runs the same lookups from 1 and 2 threads at once. The allocation
//! profiler counts heap allocations per iteration (it must be zero).

use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::types::*;
use aclalloc::{AllocatorApi, AllocatorObj, Registration, StreamKey};
use divan::counter::ItemsCount;
use divan::{black_box, Bencher};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::Mutex;

#[global_allocator]
static ALLOC: divan::AllocProfiler = divan::AllocProfiler::system();

fn main() {
    divan::main();
}

const BATCH: usize = 1024;
const SIZES: [usize; 2] = [16, 10_000];

unsafe extern "C" fn alloc(_: *mut c_void, _: usize) -> *mut c_void {
    null_mut()
}
unsafe extern "C" fn free(_: *mut c_void, _: *mut c_void) {}
unsafe extern "C" fn get_addr(b: *mut c_void) -> *mut c_void {
    b
}

/// Stream handles as a runtime hands them out: distinct heap-like addresses.
fn stream(i: usize) -> usize {
    0x5555_0000_0000 + i * 0x240
}

/// A fixed permutation of `0..n` (multiplication by a number coprime to n).
fn order(n: usize) -> Vec<usize> {
    let step = (1..).map(|k| 7919 * k).find(|s| gcd(*s, n) == 1).unwrap();
    (0..n).map(|i| (i * step) % n).collect()
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

thread_local! {
    static CURSOR: Cell<usize> = const { Cell::new(0) };
}

/// The next `BATCH` keys of this thread's walk through `keys`.
fn next_batch(keys: &[usize]) -> &[usize] {
    let start = CURSOR.with(|c| {
        let s = c.get() % (keys.len() - BATCH + 1);
        c.set(s + BATCH);
        s
    });
    &keys[start..start + BATCH]
}

fn walk(n: usize) -> Vec<usize> {
    let mut keys: Vec<usize> = order(n).into_iter().map(stream).collect();
    while keys.len() < BATCH * 2 {
        keys.extend_from_within(..);
    }
    keys
}

fn registration(api: &AllocatorApi) -> Registration {
    let desc = api.create_descriptor().unwrap();
    api.update_descriptor(desc, |d| {
        d.obj = AllocatorObj::new(0x1000 as *mut c_void);
        d.alloc = Some(alloc);
        d.free = Some(free);
        d.get_addr_from_block = Some(get_addr);
    })
    .unwrap();
    api.register(StreamKey::from_ptr(1 as *mut c_void).unwrap(), desc)
        .unwrap();
    api.get_by_stream(StreamKey::from_ptr(1 as *mut c_void).unwrap())
        .unwrap()
}

fn key(k: usize) -> StreamKey {
    StreamKey::from_ptr(k as *mut c_void).unwrap()
}

/// One iteration: `lookup` on each key of this thread's next batch.
fn bench_lookups(bencher: Bencher, keys: &[usize], lookup: impl Fn(usize) + Sync) {
    bencher.counter(ItemsCount::new(BATCH)).bench(|| {
        for &k in next_batch(keys) {
            lookup(black_box(k));
        }
    });
}

/// `n` streams registered through the safe Rust API.
fn rust_api(n: usize) -> AllocatorApi {
    let api = AllocatorApi::new();
    let r = registration(&api);
    for i in 0..n {
        api.streams().set(key(stream(i)), r);
    }
    api
}

/// The reference design holding `n` streams: one global mutex over an
/// ordered map.
fn mutex_btreemap(n: usize) -> Mutex<BTreeMap<usize, Registration>> {
    let r = registration(&AllocatorApi::new());
    Mutex::new((0..n).map(|i| (stream(i), r)).collect())
}

/// `n` streams registered through the C ABI with one descriptor;
/// unregistered, and the descriptor destroyed, when dropped.
struct CRegistered {
    desc: aclrtAllocatorDesc,
    streams: usize,
}

impl CRegistered {
    fn new(streams: usize) -> Self {
        let desc = aclrtAllocatorCreateDesc();
        aclrtAllocatorSetObjToDesc(desc, 0x1000 as *mut c_void);
        aclrtAllocatorSetAllocFuncToDesc(desc, Some(alloc));
        aclrtAllocatorSetFreeFuncToDesc(desc, Some(free));
        aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, Some(get_addr));
        for i in 0..streams {
            aclrtAllocatorRegister(stream(i) as aclrtStream, desc);
        }
        CRegistered { desc, streams }
    }
}

impl Drop for CRegistered {
    fn drop(&mut self) {
        for i in 0..self.streams {
            aclrtAllocatorUnregister(stream(i) as aclrtStream);
        }
        aclrtAllocatorDestroyDesc(self.desc);
    }
}

/// `aclrtAllocatorGetByStream` with only the required out-parameter.
fn c_abi_desc_only(k: usize) -> (aclError, aclrtAllocatorDesc) {
    let mut desc = null_mut();
    // SAFETY: the one out-parameter is a local.
    let rc = unsafe {
        aclrtAllocatorGetByStream(
            k as aclrtStream,
            &mut desc,
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
        )
    };
    (rc, desc)
}

/// The harness alone: the same walk, batches and `black_box` of the key and
/// of a result as every `hit_` row, with no lookup. What each row pays per
/// lookup besides the lookup itself. One thread.
#[divan::bench(args = SIZES)]
fn hit_harness_only(bencher: Bencher, n: usize) {
    bench_lookups(bencher, &walk(n), |k| {
        black_box(k);
    });
}

/// aclalloc's table through the safe Rust API.
#[divan::bench(args = SIZES, threads = [1, 2])]
fn hit_aclalloc(bencher: Bencher, n: usize) {
    let api = rust_api(n);
    bench_lookups(bencher, &walk(n), |k| {
        black_box(api.get_by_stream(key(k)).is_ok());
    });
}

/// The Rust API as the C ABI answers: every field of the registration
/// handed on (`black_box`), so that the difference to `hit_c_abi` is the C
/// wrapper alone (call, checks, boundary, out-parameter writes). One thread.
#[divan::bench(args = SIZES)]
fn hit_aclalloc_all_fields(bencher: Bencher, n: usize) {
    let api = rust_api(n);
    bench_lookups(bencher, &walk(n), |k| {
        if let Ok(r) = api.get_by_stream(key(k)) {
            let c = r.callbacks;
            black_box((
                r.descriptor,
                c.obj,
                c.alloc,
                c.free,
                c.alloc_advise,
                c.get_addr_from_block,
            ));
        }
    });
}

/// The C ABI with only the required out-parameter (`allocatorDesc`), the
/// five others NULL: the wrapper without five of its six writes. One thread.
#[divan::bench(args = SIZES)]
fn hit_c_abi_desc_only(bencher: Bencher, n: usize) {
    let _registered = CRegistered::new(n);
    bench_lookups(bencher, &walk(n), |k| {
        black_box(c_abi_desc_only(k));
    });
}

/// The reference design: one global mutex over an ordered map.
#[divan::bench(args = SIZES, threads = [1, 2])]
fn hit_mutex_btreemap(bencher: Bencher, n: usize) {
    let map = mutex_btreemap(n);
    bench_lookups(bencher, &walk(n), |k| {
        black_box(map.lock().unwrap().get(&k).copied().is_some());
    });
}

/// aclalloc through the exported C function, all six outputs requested.
#[divan::bench(args = SIZES, threads = [1, 2])]
fn hit_c_abi(bencher: Bencher, n: usize) {
    let _registered = CRegistered::new(n);
    bench_lookups(bencher, &walk(n), |k| {
        let (mut desc, mut obj) = (null_mut(), null_mut());
        let (mut a, mut f, mut adv, mut g) = (None, None, None, None);
        // SAFETY: every out-parameter is a local.
        let rc = unsafe {
            aclrtAllocatorGetByStream(
                k as aclrtStream,
                &mut desc,
                &mut obj,
                &mut a,
                &mut f,
                &mut adv,
                &mut g,
            )
        };
        black_box((rc, desc, obj, a, f, adv, g));
    });
}

/// Misses with 10,000 streams registered: the safe API, the C ABI (which also
/// records the failure for aclGetRecentErrMsg) and the reference design.
#[divan::bench_group]
mod miss {
    use super::*;

    const N: usize = 10_000;

    fn absent() -> Vec<usize> {
        walk(N).into_iter().map(|k| k + 0x20).collect()
    }

    #[divan::bench(threads = [1, 2])]
    fn aclalloc(bencher: Bencher) {
        let api = rust_api(N);
        bench_lookups(bencher, &absent(), |k| {
            black_box(api.get_by_stream(key(k)).is_err());
        });
    }

    #[divan::bench(threads = [1, 2])]
    fn c_abi(bencher: Bencher) {
        let _registered = CRegistered::new(N);
        bench_lookups(bencher, &absent(), |k| {
            black_box(c_abi_desc_only(k).0);
        });
    }

    #[divan::bench(threads = [1, 2])]
    fn mutex_btreemap(bencher: Bencher) {
        let map = super::mutex_btreemap(N);
        bench_lookups(bencher, &absent(), |k| {
            black_box(map.lock().unwrap().get(&k).is_some());
        });
    }
}
