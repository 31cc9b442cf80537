//! CANN's stream-ordered pool pair against its two anchors, in one run,
//! through the C ABI on the host runtime:
//!
//!     cargo bench --bench stream_ordered
//!
//! `mem_pool_async_pair`: `aclrtMemPoolMallocAsync` + `aclrtMemPoolFreeAsync`
//! on one stream, steady state (the block is reused). Anchors:
//! `malloc_synchronize_free`, what a program without the pool does
//! (`aclrtMalloc`, `aclrtSynchronizeStream`, `aclrtFree`), and
//! `aclalloc_pool_pair`, aclalloc's own caching pool through its C
//! callbacks. Sizes: 4 KiB, 1 MiB + 300 bytes (not a multiple of 512) and
//! 9 MiB (a large block).

use aclalloc::ffi::cann::memory::{aclrtFree, aclrtMalloc};
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::stream_ordered::*;
use aclalloc::ffi::cann::types::*;
use aclalloc::ffi::ext::pool::*;
use divan::{black_box, Bencher};
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::OnceLock;

fn main() {
    divan::main();
}

const SIZES: [usize; 3] = [4096, (1 << 20) + 300, 9 << 20];

/// The runtime, a stream and a stream-ordered pool, made once.
fn setup() -> (usize, usize) {
    static SETUP: OnceLock<(usize, usize)> = OnceLock::new();
    *SETUP.get_or_init(|| {
        // SAFETY: NULL is a valid config path; valid out-pointers below.
        unsafe {
            aclInit(std::ptr::null());
            assert_eq!(aclrtSetDevice(0), 0);
            let mut stream = null_mut();
            assert_eq!(aclrtCreateStream(&mut stream), 0);
            let props = aclrtMemPoolProps {
                allocType: ACL_MEM_ALLOCATION_TYPE_PINNED,
                handleType: ACL_MEM_HANDLE_TYPE_NONE,
                location: aclrtMemLocation {
                    id: 0,
                    r#type: ACL_MEM_LOCATION_TYPE_DEVICE,
                },
                maxSize: 0,
                reserved: [0; 32],
            };
            let mut pool = null_mut();
            assert_eq!(aclrtMemPoolCreate(&mut pool, &props), 0);
            (stream as usize, pool as usize)
        }
    })
}

#[divan::bench(args = SIZES)]
fn mem_pool_async_pair(bencher: Bencher, size: usize) {
    let (stream, pool) = setup();
    let (stream, pool) = (stream as aclrtStream, pool as aclrtMemPool);
    bencher.bench_local(|| {
        let mut p = null_mut();
        // SAFETY: a valid out-pointer, a live pool and stream.
        unsafe {
            assert_eq!(
                aclrtMemPoolMallocAsync(&mut p, black_box(size), pool, stream),
                0
            );
            assert_eq!(aclrtMemPoolFreeAsync(p, stream), 0);
        }
    });
}

#[divan::bench(args = SIZES)]
fn malloc_synchronize_free(bencher: Bencher, size: usize) {
    let (stream, _) = setup();
    let stream = stream as aclrtStream;
    bencher.bench_local(|| {
        let mut p: *mut c_void = null_mut();
        // SAFETY: a valid out-pointer, a live stream, memory from aclrtMalloc.
        unsafe {
            assert_eq!(
                aclrtMalloc(&mut p, black_box(size), ACL_MEM_MALLOC_HUGE_FIRST),
                0
            );
            assert_eq!(aclrtSynchronizeStream(stream), 0);
            assert_eq!(aclrtFree(p), 0);
        }
    });
}

#[divan::bench(args = SIZES)]
fn aclalloc_pool_pair(bencher: Bencher, size: usize) {
    setup();
    static POOL: OnceLock<usize> = OnceLock::new();
    let pool = *POOL.get_or_init(|| {
        let (mut pool, mut desc) = (null_mut(), null_mut());
        // SAFETY: NULL config (the defaults), valid out-pointers.
        assert_eq!(
            unsafe { aclallocPoolCreate(std::ptr::null(), &mut pool, &mut desc) },
            0
        );
        pool as usize
    }) as aclallocPool;
    bencher.bench_local(|| aclallocPoolFree(pool, aclallocPoolAlloc(pool, black_box(size))));
}
