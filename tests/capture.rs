//! Graph capture on the host runtime through the C ABI (`aclmdlRI*`): work
//! on a capturing stream is recorded, not run, and replays in order; other
//! streams join through events; what a capture forbids is refused with
//! `ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC` and fails the capture, where
//! the mode does not relax it; a capture that fails or is abandoned leaves
//! no model and gives its workspaces back; a model holds the workspaces its
//! capture took for every replay and gives them back when destroyed; host
//! functions are captured too.
//!
//! The tests run one at a time: a capture in global mode forbids calls to
//! every thread of the process.

mod common;

use common::streams::{destroy, new_stream, sync};

use aclalloc::base::error::*;
use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::events::*;
use aclalloc::ffi::cann::memory::*;
use aclalloc::ffi::cann::model_ri::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::stream_info::*;
use aclalloc::ffi::cann::types::*;
use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
use std::ffi::c_void;
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn setup() {
    // SAFETY: a NULL configuration path is allowed.
    let rc = unsafe { aclInit(null()) };
    assert!(rc == ACL_SUCCESS || rc == ACL_ERROR_REPEAT_INITIALIZE);
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
}

/// What the kernels ran, in order: their arguments.
static RAN: Mutex<Vec<usize>> = Mutex::new(Vec::new());

unsafe extern "C" fn note(_: *mut c_void, _: usize, data: *mut c_void) {
    RAN.lock().unwrap().push(data as usize);
}

fn ran() -> Vec<usize> {
    std::mem::take(&mut *RAN.lock().unwrap())
}

fn launch(s: aclrtStream, workspace: usize, tag: usize) -> aclError {
    // SAFETY: `note` only records its argument.
    unsafe { aclallocLaunchKernel(s, workspace, Some(note), tag as *mut c_void) }
}

fn begin(s: aclrtStream, mode: aclmdlRICaptureMode) {
    // SAFETY: a stream of this test.
    assert_eq!(unsafe { aclmdlRICaptureBegin(s, mode) }, ACL_SUCCESS);
}

fn end(s: aclrtStream) -> Result<aclmdlRI, aclError> {
    let mut model = null_mut();
    // SAFETY: a valid out-pointer.
    match unsafe { aclmdlRICaptureEnd(s, &mut model) } {
        ACL_SUCCESS => Ok(model),
        rc => {
            assert!(model.is_null(), "a failed end writes no model");
            Err(rc)
        }
    }
}

fn info(s: aclrtStream) -> (aclmdlRICaptureStatus, aclmdlRI) {
    let (mut status, mut model) = (-1, null_mut());
    // SAFETY: valid out-pointers.
    assert_eq!(
        unsafe { aclmdlRICaptureGetInfo(s, &mut status, &mut model) },
        ACL_SUCCESS
    );
    (status, model)
}

fn replay(model: aclmdlRI, s: aclrtStream) -> aclError {
    // SAFETY: handles of this test (a dead model is refused).
    unsafe { aclmdlRIExecuteAsync(model, s) }
}

fn exchange(mode: aclmdlRICaptureMode) -> aclmdlRICaptureMode {
    let mut m = mode;
    // SAFETY: a valid in/out pointer.
    assert_eq!(
        unsafe { aclmdlRICaptureThreadExchangeMode(&mut m) },
        ACL_SUCCESS
    );
    m
}

/// A registered allocator that counts its calls and serves blocks from the heap.
struct Counting {
    allocs: AtomicUsize,
    frees: AtomicUsize,
}

static COUNTS: Counting = Counting {
    allocs: AtomicUsize::new(0),
    frees: AtomicUsize::new(0),
};

unsafe extern "C" fn counted_alloc(_: aclrtAllocator, size: usize) -> *mut c_void {
    COUNTS.allocs.fetch_add(1, Ordering::SeqCst);
    // SAFETY: plain heap memory, given back in `counted_free`.
    unsafe { libc::malloc(size) }
}
unsafe extern "C" fn counted_free(_: aclrtAllocator, block: aclrtAllocatorBlock) {
    COUNTS.frees.fetch_add(1, Ordering::SeqCst);
    // SAFETY: a block `counted_alloc` returned, freed once.
    unsafe { libc::free(block) }
}
unsafe extern "C" fn block_addr(block: aclrtAllocatorBlock) -> *mut c_void {
    block
}

fn counts() -> (usize, usize) {
    (
        COUNTS.allocs.load(Ordering::SeqCst),
        COUNTS.frees.load(Ordering::SeqCst),
    )
}

/// A stream with the counting allocator registered.
fn counted_stream() -> (aclrtStream, aclrtAllocatorDesc) {
    let s = new_stream();
    let desc = common::descriptor(
        0x1000 as *mut c_void,
        Some(counted_alloc),
        Some(counted_free),
        Some(block_addr),
    );
    assert_eq!(aclrtAllocatorRegister(s, desc), ACL_SUCCESS);
    (s, desc)
}

#[test]
fn work_on_a_capturing_stream_is_recorded_then_replayed_in_order() {
    let _serial = serial();
    setup();
    let (s, other) = (new_stream(), new_stream());
    let mut dev = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtMalloc(&mut dev, 64, 0) }, ACL_SUCCESS);
    ran();
    begin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    let (status, during) = info(s);
    assert_eq!(status, ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE);
    assert!(!during.is_null());
    assert_eq!(launch(s, 0, 1), ACL_SUCCESS);
    // SAFETY: 64 bytes of device memory.
    assert_eq!(unsafe { aclrtMemsetAsync(dev, 64, 7, 64, s) }, ACL_SUCCESS);
    assert_eq!(launch(s, 0, 2), ACL_SUCCESS);
    let model = end(s).expect("the capture ends");
    assert_eq!(model, during, "the model GetInfo named");
    assert_eq!(info(s).0, ACL_MODEL_RI_CAPTURE_STATUS_NONE);
    sync(s);
    assert!(ran().is_empty(), "captured work did not run");
    // SAFETY: 64 bytes of device memory.
    assert_eq!(unsafe { *(dev as *const u8) }, 0);

    for _ in 0..3 {
        assert_eq!(replay(model, other), ACL_SUCCESS);
    }
    sync(other);
    assert_eq!(ran(), [1, 2, 1, 2, 1, 2]);
    // SAFETY: 64 bytes of device memory.
    assert_eq!(unsafe { *(dev as *const u8).add(63) }, 7);
    // The stream runs its own work again.
    assert_eq!(launch(s, 0, 9), ACL_SUCCESS);
    sync(s);
    assert_eq!(ran(), [9]);

    // SAFETY: handles of this test.
    unsafe {
        assert_eq!(aclmdlRIDestroy(model), ACL_SUCCESS);
        assert_eq!(aclmdlRIDestroy(model), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclrtFree(dev), ACL_SUCCESS);
    }
    assert_eq!(replay(model, other), ACL_ERROR_INVALID_PARAM);
    destroy(s);
    destroy(other);
}

#[test]
fn streams_join_a_capture_through_events_and_replay_in_call_order() {
    let _serial = serial();
    setup();
    let (a, b, run_on) = (new_stream(), new_stream(), new_stream());
    let (mut fork, mut join) = (null_mut(), null_mut());
    // SAFETY: valid out-pointers.
    unsafe {
        assert_eq!(aclrtCreateEvent(&mut fork), ACL_SUCCESS);
        assert_eq!(aclrtCreateEvent(&mut join), ACL_SUCCESS);
    }
    ran();
    begin(a, ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL);
    assert_eq!(launch(a, 0, 1), ACL_SUCCESS);
    // SAFETY: handles of this test.
    unsafe {
        assert_eq!(aclrtRecordEvent(fork, a), ACL_SUCCESS);
        assert_eq!(aclrtStreamWaitEvent(b, fork), ACL_SUCCESS);
    }
    assert_eq!(info(b).0, ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE, "b joined");
    assert_eq!(launch(b, 0, 2), ACL_SUCCESS);
    assert_eq!(end(b), Err(ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED));
    // SAFETY: handles of this test.
    unsafe {
        assert_eq!(aclrtRecordEvent(join, b), ACL_SUCCESS);
        assert_eq!(aclrtStreamWaitEvent(a, join), ACL_SUCCESS);
    }
    assert_eq!(launch(a, 0, 3), ACL_SUCCESS);
    let model = end(a).expect("the capture ends");
    assert_eq!(
        info(b).0,
        ACL_MODEL_RI_CAPTURE_STATUS_NONE,
        "b left with it"
    );
    sync(a);
    sync(b);
    assert!(ran().is_empty());
    assert_eq!(replay(model, run_on), ACL_SUCCESS);
    sync(run_on);
    assert_eq!(ran(), [1, 2, 3]);
    // A wait on the replay's record sees it.
    assert_eq!(replay(model, run_on), ACL_SUCCESS);
    // SAFETY: handles of this test.
    unsafe {
        assert_eq!(aclrtStreamWaitEvent(b, join), ACL_SUCCESS);
    }
    assert_eq!(launch(b, 0, 4), ACL_SUCCESS);
    sync(b);
    sync(run_on);
    // 4 runs after the replay's record of `join` (after 2); 3 may come
    // before or after it.
    let order = ran();
    let at = |tag: usize| order.iter().position(|&t| t == tag).unwrap();
    assert_eq!(order.len(), 4, "{order:?}");
    assert!(at(1) < at(2) && at(2) < at(3) && at(2) < at(4), "{order:?}");
    // SAFETY: handles of this test.
    unsafe {
        assert_eq!(aclmdlRIDestroy(model), ACL_SUCCESS);
        assert_eq!(aclrtDestroyEvent(fork), ACL_SUCCESS);
        assert_eq!(aclrtDestroyEvent(join), ACL_SUCCESS);
    }
    for s in [a, b, run_on] {
        destroy(s);
    }
}

/// A call a global capture forbids, made on the capturing thread.
type Call<'a> = (&'static str, Box<dyn Fn() -> aclError + 'a>);

/// Each call a global capture forbids.
fn forbidden_calls<'a>(
    s: aclrtStream,
    other: aclrtStream,
    event: aclrtEvent,
    dev: *mut c_void,
) -> Vec<Call<'a>> {
    let host = [0u8; 16];
    // SAFETY (every call): handles and buffers of this test.
    vec![
        (
            "aclrtSynchronizeStream(capturing)",
            Box::new(move || unsafe { aclrtSynchronizeStream(s) }),
        ),
        (
            "aclrtSynchronizeStream(other)",
            Box::new(move || unsafe { aclrtSynchronizeStream(other) }),
        ),
        (
            "aclrtSynchronizeStreamWithTimeout",
            Box::new(move || unsafe { aclrtSynchronizeStreamWithTimeout(other, 100) }),
        ),
        (
            "aclrtStreamQuery",
            Box::new(move || unsafe { aclrtStreamQuery(s, &mut 0) }),
        ),
        (
            "aclrtSynchronizeEvent",
            Box::new(move || unsafe { aclrtSynchronizeEvent(event) }),
        ),
        (
            "aclrtQueryEventStatus",
            Box::new(move || unsafe { aclrtQueryEventStatus(event, &mut 0) }),
        ),
        (
            "aclrtQueryEventWaitStatus",
            Box::new(move || unsafe { aclrtQueryEventWaitStatus(event, &mut 0) }),
        ),
        (
            "aclrtSynchronizeDevice",
            Box::new(|| aclrtSynchronizeDevice()),
        ),
        (
            "aclrtMemcpy",
            Box::new(move || unsafe {
                aclrtMemcpy(dev, 16, host.as_ptr().cast(), 16, ACL_MEMCPY_HOST_TO_DEVICE)
            }),
        ),
        (
            "aclrtMemset",
            Box::new(move || unsafe { aclrtMemset(dev, 16, 0, 16) }),
        ),
        (
            "aclrtMemcpyAsync on the default stream",
            Box::new(move || unsafe {
                let mut back = [0u8; 16];
                aclrtMemcpyAsync(
                    back.as_mut_ptr().cast(),
                    16,
                    dev,
                    16,
                    ACL_MEMCPY_DEVICE_TO_HOST,
                    null_mut(),
                )
            }),
        ),
        (
            "a launch on the default stream",
            Box::new(|| launch(null_mut(), 0, 5)),
        ),
    ]
}

#[test]
fn every_forbidden_call_is_refused_and_fails_the_capture() {
    let _serial = serial();
    setup();
    let (s, other) = new_streams();
    let mut event = null_mut();
    let mut dev = null_mut();
    // SAFETY: valid out-pointers.
    unsafe {
        assert_eq!(aclrtCreateEvent(&mut event), ACL_SUCCESS);
        assert_eq!(aclrtMalloc(&mut dev, 16, 0), ACL_SUCCESS);
        assert_eq!(aclrtRecordEvent(event, other), ACL_SUCCESS);
    }
    sync(other);
    for (name, call) in forbidden_calls(s, other, event, dev) {
        ran();
        begin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
        let (_, model) = info(s);
        assert_eq!(launch(s, 0, 1), ACL_SUCCESS);
        assert_eq!(call(), ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC, "{name}");
        let message = common::message();
        assert!(
            message.contains("operation not permitted when a stream is capturing"),
            "{name}: {message}"
        );
        assert_eq!(info(s).0, ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED, "{name}");
        assert_eq!(end(s), Err(ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC), "{name}");
        assert_eq!(
            replay(model, other),
            ACL_ERROR_INVALID_PARAM,
            "{name}: no model left"
        );
        assert_eq!(info(s).0, ACL_MODEL_RI_CAPTURE_STATUS_NONE);
        // The stream works as before, and the recorded launch never ran.
        assert_eq!(launch(s, 0, 2), ACL_SUCCESS);
        sync(s);
        assert_eq!(ran(), [2], "{name}");
    }
    // The default stream cannot be captured.
    // SAFETY: NULL is the default stream.
    let rc = unsafe { aclmdlRICaptureBegin(null_mut(), ACL_MODEL_RI_CAPTURE_MODE_GLOBAL) };
    assert_eq!(rc, ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC);
    // SAFETY: handles of this test.
    unsafe {
        assert_eq!(aclrtDestroyEvent(event), ACL_SUCCESS);
        assert_eq!(aclrtFree(dev), ACL_SUCCESS);
    }
    destroy(s);
    destroy(other);
}

fn new_streams() -> (aclrtStream, aclrtStream) {
    (new_stream(), new_stream())
}

#[test]
fn relaxed_and_thread_local_modes_allow_what_they_relax() {
    let _serial = serial();
    setup();
    let (s, other) = new_streams();
    // Threads are handed the stream as a number.
    let other_addr = other as usize;
    let mut dev = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtMalloc(&mut dev, 16, 0) }, ACL_SUCCESS);
    let host = [3u8; 16];
    // SAFETY: 16 bytes each side.
    let copy =
        || unsafe { aclrtMemcpy(dev, 16, host.as_ptr().cast(), 16, ACL_MEMCPY_HOST_TO_DEVICE) };

    // Relaxed: the capturing thread may copy synchronously; the copy runs at once.
    begin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED);
    assert_eq!(copy(), ACL_SUCCESS);
    // SAFETY: a stream of this test.
    assert_eq!(unsafe { aclrtSynchronizeStream(other) }, ACL_SUCCESS);
    let model = end(s).expect("a relaxed capture ends");
    // SAFETY: a model of this test.
    assert_eq!(unsafe { aclmdlRIDestroy(model) }, ACL_SUCCESS);

    // Global, with this thread relaxed: allowed; back in global mode: refused.
    begin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    assert_eq!(
        exchange(ACL_MODEL_RI_CAPTURE_MODE_RELAXED),
        ACL_MODEL_RI_CAPTURE_MODE_GLOBAL
    );
    assert_eq!(copy(), ACL_SUCCESS);
    assert_eq!(
        exchange(ACL_MODEL_RI_CAPTURE_MODE_GLOBAL),
        ACL_MODEL_RI_CAPTURE_MODE_RELAXED
    );
    // Another thread in global mode is bound by a global capture; one in
    // thread-local mode is not.
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                // SAFETY: a stream of this test.
                let rc = unsafe { aclrtSynchronizeStream(other_addr as aclrtStream) };
                assert_eq!(rc, ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC);
            })
            .join()
            .unwrap();
    });
    assert_eq!(
        end(s),
        Err(ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC),
        "the other thread's call failed it"
    );

    begin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                exchange(ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL);
                // SAFETY: a stream of this test.
                let rc = unsafe { aclrtSynchronizeStream(other_addr as aclrtStream) };
                assert_eq!(rc, ACL_SUCCESS);
            })
            .join()
            .unwrap();
    });
    let model = end(s).expect("nothing forbidden was called");
    // SAFETY: a model of this test.
    assert_eq!(unsafe { aclmdlRIDestroy(model) }, ACL_SUCCESS);

    // Thread-local: other threads, whatever their mode, are free.
    begin(s, ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL);
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                // SAFETY: a stream of this test.
                let rc = unsafe { aclrtSynchronizeStream(other_addr as aclrtStream) };
                assert_eq!(rc, ACL_SUCCESS);
            })
            .join()
            .unwrap();
    });
    assert_eq!(copy(), ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC);
    assert!(end(s).is_err());

    // SAFETY: memory of this test.
    assert_eq!(unsafe { aclrtFree(dev) }, ACL_SUCCESS);
    destroy(s);
    destroy(other);
}

#[test]
fn an_abandoned_capture_leaves_nothing_and_gives_its_workspaces_back() {
    let _serial = serial();
    setup();
    let before = counts();
    // The capturing stream is destroyed.
    let (s, _) = counted_stream();
    begin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    let (_, model) = info(s);
    for tag in 0..4 {
        assert_eq!(launch(s, 256, tag), ACL_SUCCESS);
    }
    let (allocs, frees) = counts();
    assert_eq!(
        (allocs - before.0, frees - before.1),
        (4, 0),
        "held while capturing"
    );
    destroy(s);
    let (allocs, frees) = counts();
    assert_eq!(
        (allocs - before.0, frees - before.1),
        (4, 4),
        "given back with the capture"
    );
    let other = new_stream();
    assert_eq!(
        replay(model, other),
        ACL_ERROR_INVALID_PARAM,
        "no model left"
    );

    // The end fails: a task group left open.
    let (s, _) = counted_stream();
    begin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED);
    let (_, model) = info(s);
    // SAFETY: a stream of this test.
    assert_eq!(unsafe { aclmdlRICaptureTaskGrpBegin(s) }, ACL_SUCCESS);
    assert_eq!(launch(s, 128, 1), ACL_SUCCESS);
    assert_eq!(end(s), Err(ACL_ERROR_STREAM_TASK_GROUP_STATUS));
    assert_eq!(replay(model, other), ACL_ERROR_INVALID_PARAM);
    let (allocs, frees) = counts();
    assert_eq!((allocs - before.0, frees - before.1), (5, 5));
    // The stream is an ordinary stream again.
    assert_eq!(launch(s, 128, 2), ACL_SUCCESS);
    sync(s);
    destroy(s);

    // A stream that joined is destroyed: the capture fails at its end.
    let (a, b) = new_streams();
    let mut e = null_mut();
    // SAFETY: valid handles and out-pointer.
    unsafe {
        assert_eq!(aclrtCreateEvent(&mut e), ACL_SUCCESS);
        begin(a, ACL_MODEL_RI_CAPTURE_MODE_RELAXED);
        assert_eq!(aclrtRecordEvent(e, a), ACL_SUCCESS);
        assert_eq!(aclrtStreamWaitEvent(b, e), ACL_SUCCESS);
    }
    destroy(b);
    assert_eq!(end(a), Err(ACL_ERROR_RT_STREAM_UNJOINED));
    // SAFETY: an event of this test.
    assert_eq!(unsafe { aclrtDestroyEvent(e) }, ACL_SUCCESS);
    destroy(a);
    destroy(other);
    ran();
}

#[test]
fn a_model_holds_its_workspaces_for_every_replay_until_destroyed() {
    let _serial = serial();
    setup();
    let (s, _) = counted_stream();
    let run_on = new_stream();
    let before = counts();
    begin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    for tag in 0..3 {
        assert_eq!(launch(s, 1024, tag), ACL_SUCCESS);
    }
    assert_eq!(launch(s, 0, 3), ACL_SUCCESS);
    let model = end(s).expect("the capture ends");
    for _ in 0..100 {
        assert_eq!(replay(model, run_on), ACL_SUCCESS);
    }
    sync(run_on);
    assert_eq!(ran().len(), 400);
    let (allocs, frees) = counts();
    assert_eq!(
        (allocs - before.0, frees - before.1),
        (3, 0),
        "one alloc per workspace, none during replay, no free before destroy"
    );
    // Queued replays keep the workspaces after the handle goes.
    for _ in 0..10 {
        assert_eq!(replay(model, run_on), ACL_SUCCESS);
    }
    // SAFETY: a model of this test.
    assert_eq!(unsafe { aclmdlRIDestroy(model) }, ACL_SUCCESS);
    sync(run_on);
    assert_eq!(ran().len(), 40);
    let (allocs, frees) = counts();
    assert_eq!((allocs - before.0, frees - before.1), (3, 3));
    destroy(s);
    destroy(run_on);
}

#[test]
fn a_task_group_is_replaced_by_an_update_of_the_same_shape() {
    let _serial = serial();
    setup();
    let (s, updater, run_on) = (new_stream(), new_stream(), new_stream());
    ran();
    begin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    assert_eq!(launch(s, 0, 1), ACL_SUCCESS);
    let mut group = null_mut();
    // SAFETY: handles and out-pointers of this test.
    unsafe {
        assert_eq!(aclmdlRICaptureTaskGrpBegin(s), ACL_SUCCESS);
        assert_eq!(
            aclmdlRICaptureTaskGrpBegin(s),
            ACL_ERROR_STREAM_TASK_GROUP_STATUS
        );
        assert_eq!(launch(s, 0, 2), ACL_SUCCESS);
        assert_eq!(aclmdlRICaptureTaskGrpEnd(s, &mut group), ACL_SUCCESS);
    }
    assert_eq!(launch(s, 0, 3), ACL_SUCCESS);
    let model = end(s).expect("the capture ends");
    assert_eq!(replay(model, run_on), ACL_SUCCESS);
    sync(run_on);
    assert_eq!(ran(), [1, 2, 3]);

    // SAFETY: handles of this test.
    unsafe {
        assert_eq!(aclmdlRICaptureTaskUpdateBegin(updater, group), ACL_SUCCESS);
        assert_eq!(launch(updater, 0, 20), ACL_SUCCESS);
        assert_eq!(aclmdlRICaptureTaskUpdateEnd(updater), ACL_SUCCESS);
    }
    assert_eq!(replay(model, run_on), ACL_SUCCESS);
    sync(run_on);
    assert_eq!(ran(), [1, 20, 3]);

    // An update of another shape is refused; the group keeps its tasks.
    // SAFETY: handles of this test.
    unsafe {
        assert_eq!(aclmdlRICaptureTaskUpdateBegin(updater, group), ACL_SUCCESS);
        assert_eq!(launch(updater, 0, 30), ACL_SUCCESS);
        assert_eq!(launch(updater, 0, 31), ACL_SUCCESS);
        assert_eq!(
            aclmdlRICaptureTaskUpdateEnd(updater),
            ACL_ERROR_RT_MODEL_UPDATE_FAILED
        );
    }
    assert_eq!(replay(model, run_on), ACL_SUCCESS);
    sync(run_on);
    assert_eq!(ran(), [1, 20, 3]);
    // SAFETY: handles of this test.
    unsafe {
        assert_eq!(aclmdlRIDestroy(model), ACL_SUCCESS);
        assert_eq!(
            aclmdlRICaptureTaskUpdateBegin(updater, group),
            ACL_ERROR_INVALID_PARAM
        );
    }
    for s in [s, updater, run_on] {
        destroy(s);
    }
}

unsafe extern "C" fn host_note(data: *mut c_void) {
    RAN.lock().unwrap().push(data as usize);
}

#[test]
fn host_functions_are_captured_and_run_at_each_replay() {
    let _serial = serial();
    setup();
    let (s, run_on) = new_streams();
    ran();
    begin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED);
    assert_eq!(launch(s, 0, 1), ACL_SUCCESS);
    // SAFETY: `host_note` only records its argument.
    let rc = unsafe { aclrtLaunchHostFunc(s, Some(host_note), 2 as *mut c_void) };
    assert_eq!(rc, ACL_SUCCESS);
    assert_eq!(launch(s, 0, 3), ACL_SUCCESS);
    let model = end(s).expect("the capture ends");
    sync(s);
    assert!(ran().is_empty(), "captured, not run");
    for _ in 0..2 {
        assert_eq!(replay(model, run_on), ACL_SUCCESS);
    }
    sync(run_on);
    assert_eq!(ran(), [1, 2, 3, 1, 2, 3]);
    // SAFETY: a model of this test.
    assert_eq!(unsafe { aclmdlRIDestroy(model) }, ACL_SUCCESS);
    destroy(s);
    destroy(run_on);
}

static DESTROYED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn on_destroy(data: *mut c_void) {
    DESTROYED.fetch_add(data as usize, Ordering::SeqCst);
}

#[test]
fn a_model_has_a_name_an_id_its_streams_and_destroy_callbacks() {
    let _serial = serial();
    setup();
    let (a, b) = new_streams();
    let mut e = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtCreateEvent(&mut e) }, ACL_SUCCESS);
    begin(a, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    // SAFETY: handles of this test.
    unsafe {
        assert_eq!(aclrtRecordEvent(e, a), ACL_SUCCESS);
        assert_eq!(aclrtStreamWaitEvent(b, e), ACL_SUCCESS);
    }
    assert_eq!(launch(b, 0, 1), ACL_SUCCESS);
    let model = end(a).expect("the capture ends");
    let (mut id, mut other_id, mut count) = (0u32, 0u32, 0u32);
    let mut name = [0 as std::ffi::c_char; 16];
    let mut streams = [null_mut(); 2];
    // SAFETY: handles and buffers of this test.
    unsafe {
        assert_eq!(aclmdlRIGetName(model, 16, name.as_mut_ptr()), ACL_SUCCESS);
        assert_eq!(name[0], 0, "no name yet");
        assert_eq!(aclmdlRISetName(model, c"decode-step".as_ptr()), ACL_SUCCESS);
        assert_eq!(aclmdlRIGetName(model, 7, name.as_mut_ptr()), ACL_SUCCESS);
        assert_eq!(std::ffi::CStr::from_ptr(name.as_ptr()), c"decode");
        assert_eq!(aclmdlRIGetId(model, &mut id), ACL_SUCCESS);
        assert_eq!(
            aclmdlRIGetStreams(model, null_mut(), &mut count),
            ACL_SUCCESS
        );
        assert_eq!(count, 2, "the stream that began it and the one that joined");
        count = 1;
        assert_eq!(
            aclmdlRIGetStreams(model, streams.as_mut_ptr(), &mut count),
            ACL_ERROR_RT_INSUFFICIENT_INPUT_ARRAY
        );
        assert!(streams[0].is_null(), "nothing written");
        count = 2;
        assert_eq!(
            aclmdlRIGetStreams(model, streams.as_mut_ptr(), &mut count),
            ACL_SUCCESS
        );
        assert_eq!(streams, [a, b]);
        assert_eq!(
            aclmdlRIDestroyRegisterCallback(model, Some(on_destroy), 5 as *mut c_void),
            ACL_SUCCESS
        );
        assert_eq!(
            aclmdlRIDestroyUnregisterCallback(model, Some(on_destroy)),
            ACL_SUCCESS
        );
        assert_eq!(
            aclmdlRIDestroyUnregisterCallback(model, Some(on_destroy)),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclmdlRIDestroyRegisterCallback(model, Some(on_destroy), 7 as *mut c_void),
            ACL_SUCCESS
        );
    }
    begin(a, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    let second = end(a).expect("an empty capture ends");
    // SAFETY: handles of this test.
    unsafe {
        assert_eq!(aclmdlRIGetId(second, &mut other_id), ACL_SUCCESS);
        assert_ne!(id, other_id);
        assert_eq!(aclmdlRIDestroy(second), ACL_SUCCESS);
    }
    let before = DESTROYED.load(Ordering::SeqCst);
    // SAFETY: a model of this test.
    assert_eq!(unsafe { aclmdlRIDestroy(model) }, ACL_SUCCESS);
    assert_eq!(DESTROYED.load(Ordering::SeqCst) - before, 7);
    // SAFETY: handles of this test.
    unsafe {
        assert_eq!(aclmdlRIGetId(model, &mut id), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclrtDestroyEvent(e), ACL_SUCCESS);
    }
    destroy(a);
    destroy(b);
    ran();
}

/// Spins until the flag it points to is set.
unsafe extern "C" fn gate(_: *mut c_void, _: usize, data: *mut c_void) {
    // SAFETY: the test's flag, alive until the stream is synchronized.
    let open = unsafe { &*(data as *const std::sync::atomic::AtomicBool) };
    while !open.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
}

#[test]
fn an_abort_stops_the_queued_replays_of_a_model() {
    let _serial = serial();
    setup();
    let (s, run_on) = new_streams();
    ran();
    begin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    assert_eq!(launch(s, 0, 1), ACL_SUCCESS);
    let model = end(s).expect("the capture ends");
    let open = std::sync::atomic::AtomicBool::new(false);
    // SAFETY: `gate` waits for `open`, which outlives the stream's work.
    let rc =
        unsafe { aclallocLaunchKernel(run_on, 0, Some(gate), (&open as *const _) as *mut c_void) };
    assert_eq!(rc, ACL_SUCCESS);
    for _ in 0..3 {
        assert_eq!(replay(model, run_on), ACL_SUCCESS);
    }
    // SAFETY: a model of this test.
    assert_eq!(unsafe { aclmdlRIAbort(model) }, ACL_SUCCESS);
    assert_eq!(replay(model, run_on), ACL_SUCCESS);
    open.store(true, Ordering::SeqCst);
    sync(run_on);
    assert_eq!(ran(), [1], "the replays queued before the abort stopped");
    // SAFETY: a model of this test.
    assert_eq!(unsafe { aclmdlRIDestroy(model) }, ACL_SUCCESS);
    destroy(s);
    destroy(run_on);
}

#[test]
fn captured_waits_on_outside_events_are_ordinary_or_external() {
    let _serial = serial();
    setup();
    let (s, run_on, other) = (new_stream(), new_stream(), new_stream());
    let (mut plain, mut external) = (null_mut(), null_mut());
    // SAFETY: valid out-pointers.
    unsafe {
        assert_eq!(aclrtCreateEvent(&mut plain), ACL_SUCCESS);
        assert_eq!(
            aclrtCreateEventWithFlag(&mut external, ACL_EVENT_EXTERNAL),
            ACL_SUCCESS
        );
    }
    ran();
    // An ordinary wait on an event never recorded: no wait at replay.
    begin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    // SAFETY: handles of this test.
    assert_eq!(unsafe { aclrtStreamWaitEvent(s, plain) }, ACL_SUCCESS);
    assert_eq!(launch(s, 0, 1), ACL_SUCCESS);
    let ordinary = end(s).expect("the capture ends");
    assert_eq!(replay(ordinary, run_on), ACL_SUCCESS);
    sync(run_on);
    assert_eq!(ran(), [1]);

    // An external event: the model waits for a record made after its launch,
    // and resets the event for the next replay.
    begin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    // SAFETY: handles of this test.
    unsafe {
        assert_eq!(aclrtStreamWaitEvent(s, external), ACL_SUCCESS);
        assert_eq!(aclrtResetEvent(external, s), ACL_SUCCESS);
    }
    assert_eq!(launch(s, 0, 2), ACL_SUCCESS);
    let waiting = end(s).expect("the capture ends");
    for round in 0..2 {
        assert_eq!(replay(waiting, run_on), ACL_SUCCESS);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(
            ran().is_empty(),
            "round {round}: the model waits for the record"
        );
        // SAFETY: handles of this test.
        assert_eq!(unsafe { aclrtRecordEvent(external, other) }, ACL_SUCCESS);
        sync(run_on);
        assert_eq!(ran(), [2], "round {round}");
    }
    // The same with an ordinary event waited with ACL_EVENT_WAIT_EXTERNAL.
    begin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    // SAFETY: handles of this test.
    unsafe {
        assert_eq!(
            aclrtStreamWaitEventWithFlag(s, plain, 0, ACL_EVENT_WAIT_EXTERNAL),
            ACL_SUCCESS
        );
    }
    assert_eq!(launch(s, 0, 3), ACL_SUCCESS);
    let flagged = end(s).expect("the capture ends");
    assert_eq!(replay(flagged, run_on), ACL_SUCCESS);
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert!(ran().is_empty(), "the model waits for the record");
    // SAFETY: handles of this test.
    assert_eq!(unsafe { aclrtRecordEvent(plain, other) }, ACL_SUCCESS);
    sync(run_on);
    assert_eq!(ran(), [3]);
    // SAFETY: handles of this test.
    unsafe {
        for m in [ordinary, waiting, flagged] {
            assert_eq!(aclmdlRIDestroy(m), ACL_SUCCESS);
        }
        assert_eq!(aclrtDestroyEvent(plain), ACL_SUCCESS);
        assert_eq!(aclrtDestroyEvent(external), ACL_SUCCESS);
    }
    for st in [s, run_on, other] {
        destroy(st);
    }
}

#[test]
fn notifies_on_a_capturing_stream_are_refused_and_the_capture_goes_on() {
    use aclalloc::ffi::cann::notify::*;
    let _serial = serial();
    setup();
    let (s, other) = new_streams();
    let mut n = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtCreateNotify(&mut n, 0) }, ACL_SUCCESS);
    begin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    assert_eq!(launch(s, 0, 1), ACL_SUCCESS);
    // SAFETY: handles of this test.
    let record = unsafe { aclrtRecordNotify(n, s) };
    assert_eq!(record, ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT);
    assert!(common::message().contains("notifies"));
    // SAFETY: as above.
    let wait = unsafe { aclrtWaitAndResetNotify(n, s, 0) };
    assert_eq!(wait, ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT);
    assert_eq!(info(s).0, ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE, "still valid");
    assert_eq!(launch(s, 0, 2), ACL_SUCCESS);
    let model = end(s).expect("the capture ends");
    assert_eq!(replay(model, other), ACL_SUCCESS);
    sync(other);
    assert_eq!(ran(), [1, 2], "the model holds the launches, no notify");
    // The stream records notifies again once its capture ended.
    // SAFETY: handles of this test.
    unsafe {
        assert_eq!(aclrtRecordNotify(n, s), ACL_SUCCESS);
        assert_eq!(aclrtWaitAndResetNotify(n, other, 0), ACL_SUCCESS);
    }
    sync(other);
    // SAFETY: handles of this test.
    unsafe {
        assert_eq!(aclmdlRIDestroy(model), ACL_SUCCESS);
        assert_eq!(aclrtDestroyNotify(n), ACL_SUCCESS);
    }
    destroy(s);
    destroy(other);
}

#[test]
fn a_replay_that_would_touch_freed_memory_fails_its_task_and_the_host_lives() {
    let _serial = serial();
    setup();
    let s = new_stream();
    let (mut src, mut dst) = (null_mut(), null_mut());
    // SAFETY: valid out-pointers.
    unsafe {
        assert_eq!(
            aclrtMalloc(&mut src, 4096, ACL_MEM_MALLOC_HUGE_FIRST),
            ACL_SUCCESS
        );
        assert_eq!(
            aclrtMalloc(&mut dst, 4096, ACL_MEM_MALLOC_HUGE_FIRST),
            ACL_SUCCESS
        );
    }
    begin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    // SAFETY: device memory of this test, 4 KiB each.
    unsafe {
        assert_eq!(aclrtMemsetAsync(src, 4096, 9, 4096, s), ACL_SUCCESS);
        assert_eq!(
            aclrtMemcpyAsync(dst, 4096, src, 4096, ACL_MEMCPY_DEVICE_TO_DEVICE, s),
            ACL_SUCCESS
        );
    }
    let model = end(s).unwrap();
    // While the memory lives, the replay runs.
    assert_eq!(replay(model, s), ACL_SUCCESS);
    sync(s);
    let mut back = [0u8; 16];
    // SAFETY: a host buffer of 16 bytes, device memory of 4 KiB.
    unsafe {
        assert_eq!(
            aclrtMemcpy(
                back.as_mut_ptr().cast(),
                16,
                dst,
                16,
                ACL_MEMCPY_DEVICE_TO_HOST
            ),
            ACL_SUCCESS
        );
    }
    assert_eq!(back, [9; 16]);
    // The copy's destination freed under the live model: the replay's set
    // still runs, its copy fails as the device's task would, and the
    // stream reports it; the process goes on.
    // SAFETY: memory of this test, no longer used by queued work.
    assert_eq!(unsafe { aclrtFree(dst) }, ACL_SUCCESS);
    assert_eq!(replay(model, s), ACL_SUCCESS);
    // SAFETY: a stream of this test.
    assert_eq!(
        unsafe { aclrtSynchronizeStream(s) },
        ACL_ERROR_RT_DEVICE_MEM_ERROR
    );
    // The set's memory freed too: that task fails first.
    // SAFETY: as above.
    assert_eq!(unsafe { aclrtFree(src) }, ACL_SUCCESS);
    assert_eq!(replay(model, s), ACL_SUCCESS);
    // SAFETY: a stream of this test.
    assert_eq!(
        unsafe { aclrtSynchronizeStream(s) },
        ACL_ERROR_RT_DEVICE_MEM_ERROR
    );
    // SAFETY: a model of this test.
    assert_eq!(unsafe { aclmdlRIDestroy(model) }, ACL_SUCCESS);
    destroy(s);
}
