//! A captured step replayed against the same step queued eagerly, through
//! the C ABI on the host runtime.
//!
//!     cargo bench --bench graph
//!
//! The step: 100 launches of an empty kernel, each with a 4 KiB workspace
//! from the allocator registered on the stream (as an executor issues a
//! decode step). `*_issue`: the cost on the launching thread of issuing one
//! step (100 `aclallocLaunchKernel`, or one `aclmdlRIExecuteAsync` of the
//! captured step); the stream's worker runs the kernels meanwhile, and is
//! synchronized outside the timing before each sample of 8 steps (800
//! launches at most: the queue, 1024 tasks, never makes the issuer wait).
//! `*_to_completion`: one step issued and synchronized. The allocation
//! columns come from divan's `AllocProfiler`; `ALLOCATOR CALLS` below is
//! the registered allocator's, counted around each benchmark and printed
//! at the end.

use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::model_ri::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
use divan::{AllocProfiler, Bencher};
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

#[global_allocator]
static ALLOC: AllocProfiler = AllocProfiler::system();

const STEP: usize = 100;
const WORKSPACE: usize = 4096;

fn main() {
    divan::main();
    println!(
        "registered allocator calls during the replay benchmarks: {}",
        REPLAY_ALLOCS.load(Ordering::Relaxed)
    );
}

static ALLOCS: AtomicUsize = AtomicUsize::new(0);
static REPLAY_ALLOCS: AtomicUsize = AtomicUsize::new(0);

/// A stream-ordered allocator as simple as it gets: one block per size
/// class, handed out again as soon as it comes back.
static mut BLOCK: [u8; WORKSPACE] = [0; WORKSPACE];
unsafe extern "C" fn one_block(_: *mut c_void, size: usize) -> *mut c_void {
    ALLOCS.fetch_add(1, Ordering::Relaxed);
    if size > WORKSPACE {
        return std::ptr::null_mut();
    }
    std::ptr::addr_of_mut!(BLOCK) as *mut c_void
}
unsafe extern "C" fn give_back(_: *mut c_void, _: *mut c_void) {}
unsafe extern "C" fn identity(block: *mut c_void) -> *mut c_void {
    block
}
unsafe extern "C" fn empty(_: *mut c_void, _: usize, _: *mut c_void) {}

struct Setup {
    stream: usize,
    model: usize,
}

/// A stream with the allocator registered, and the step captured on it.
fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    let s = SETUP.get_or_init(|| unsafe {
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
        assert_eq!(
            aclmdlRICaptureBegin(stream, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL),
            0
        );
        issue_eager(stream as usize);
        let mut model = std::ptr::null_mut();
        assert_eq!(aclmdlRICaptureEnd(stream, &mut model), 0);
        Setup {
            stream: stream as usize,
            model: model as usize,
        }
    });
    // The current context is per thread: divan may run on another thread.
    assert_eq!(aclrtSetDevice(0), 0);
    s
}

fn issue_eager(stream: usize) {
    for _ in 0..STEP {
        // SAFETY: an empty kernel, a live stream.
        let rc = unsafe {
            aclallocLaunchKernel(
                stream as *mut c_void,
                WORKSPACE,
                Some(empty),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(rc, 0);
    }
}

fn issue_replay(s: &Setup) {
    // SAFETY: the captured model, a live stream.
    let rc = unsafe { aclmdlRIExecuteAsync(s.model as *mut c_void, s.stream as *mut c_void) };
    assert_eq!(rc, 0);
}

fn sync(stream: usize) {
    // SAFETY: a live stream.
    assert_eq!(unsafe { aclrtSynchronizeStream(stream as *mut c_void) }, 0);
}

#[divan::bench(sample_size = 8)]
fn eager_step_issue(bencher: Bencher) {
    let s = setup();
    bencher
        .with_inputs(|| sync(s.stream))
        .bench_local_values(|()| issue_eager(s.stream));
    sync(s.stream);
}

#[divan::bench(sample_size = 8)]
fn replay_step_issue(bencher: Bencher) {
    let s = setup();
    let before = ALLOCS.load(Ordering::Relaxed);
    bencher
        .with_inputs(|| sync(s.stream))
        .bench_local_values(|()| issue_replay(s));
    sync(s.stream);
    REPLAY_ALLOCS.fetch_add(ALLOCS.load(Ordering::Relaxed) - before, Ordering::Relaxed);
}

#[divan::bench]
fn eager_step_to_completion(bencher: Bencher) {
    let s = setup();
    bencher.bench_local(|| {
        issue_eager(s.stream);
        sync(s.stream);
    });
}

#[divan::bench]
fn replay_step_to_completion(bencher: Bencher) {
    let s = setup();
    let before = ALLOCS.load(Ordering::Relaxed);
    bencher.bench_local(|| {
        issue_replay(s);
        sync(s.stream);
    });
    REPLAY_ALLOCS.fetch_add(ALLOCS.load(Ordering::Relaxed) - before, Ordering::Relaxed);
}
