//! The memory a captured graph holds, through the C ABI: stream-ordered
//! allocations made while capturing are the model's (valid at every
//! replay, reused within the capture after a free there, given back when
//! the model goes); a memory pool that serves every allocation on a
//! capturing stream (a capture pool), shared by two models, counted by its
//! statistics, giving its memory back once no model and no route uses it;
//! an abandoned or failed capture giving its pool's memory back; and a
//! tagged capture pool put to sleep and woken, after which the model
//! replays with the same results without being captured again.
//!
//! The tests run one at a time: they read device and pool figures that
//! every test moves, and a global capture forbids calls to every thread.

mod common;

use common::streams::{destroy, new_stream, sync};

use aclalloc::base::error::*;
use aclalloc::ffi::cann::memory::*;
use aclalloc::ffi::cann::model_ri::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::stream_ordered::*;
use aclalloc::ffi::cann::types::*;
use aclalloc::ffi::ext::default_allocator::*;
use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
use aclalloc::ffi::ext::mem_pool::*;
use aclalloc::ffi::ext::pool::*;
use common::message;
use std::ffi::{c_char, c_void};
use std::ptr::{null, null_mut};
use std::sync::{Mutex, MutexGuard};

const MIB: usize = 1 << 20;

static SERIAL: Mutex<()> = Mutex::new(());

fn setup() -> MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: a NULL configuration path is allowed.
    let rc = unsafe { aclInit(null()) };
    assert!(rc == ACL_SUCCESS || rc == ACL_ERROR_REPEAT_INITIALIZE);
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    guard
}

fn begin(s: aclrtStream) {
    // SAFETY: a stream of this test.
    assert_eq!(
        unsafe { aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL) },
        ACL_SUCCESS
    );
}

fn end(s: aclrtStream) -> Result<aclmdlRI, aclError> {
    let mut model = null_mut();
    // SAFETY: a valid out-pointer.
    match unsafe { aclmdlRICaptureEnd(s, &mut model) } {
        ACL_SUCCESS => Ok(model),
        rc => Err(rc),
    }
}

fn replay(model: aclmdlRI, s: aclrtStream) {
    // SAFETY: handles of this test.
    assert_eq!(unsafe { aclmdlRIExecuteAsync(model, s) }, ACL_SUCCESS);
}

fn destroy_model(model: aclmdlRI) {
    // SAFETY: a model of this test.
    assert_eq!(unsafe { aclmdlRIDestroy(model) }, ACL_SUCCESS);
}

fn device_free() -> usize {
    let (mut free, mut total) = (0, 0);
    // SAFETY: valid out-pointers.
    assert_eq!(
        unsafe { aclrtGetMemInfo(ACL_HBM_MEM, &mut free, &mut total) },
        ACL_SUCCESS
    );
    free
}

/// One step of a captured graph: `out[i] = in[i] * 3 + step`, through the
/// workspace (`scratch`) when the launch has one.
#[repr(C)]
struct Step {
    input: *const u64,
    output: *mut u64,
    count: usize,
    add: u64,
}

unsafe extern "C" fn step_kernel(workspace: *mut c_void, size: usize, data: *mut c_void) {
    // SAFETY: `data` is a `Step` of the test, alive while its model is.
    let step = unsafe { &*data.cast::<Step>() };
    for i in 0..step.count {
        // SAFETY: both buffers hold `count` values (device memory of the test).
        let v = unsafe { step.input.add(i).read() } * 3 + step.add;
        if size >= 8 {
            // SAFETY: the workspace holds at least 8 bytes.
            unsafe { workspace.cast::<u64>().write(v) };
        }
        // SAFETY: as above.
        unsafe { step.output.add(i).write(v) };
    }
}

fn launch(s: aclrtStream, workspace: usize, step: &Step) {
    // SAFETY: `step_kernel` reads `step`, which outlives the model's replays.
    let rc = unsafe {
        aclallocLaunchKernel(
            s,
            workspace,
            Some(step_kernel),
            step as *const Step as *mut c_void,
        )
    };
    assert_eq!(rc, ACL_SUCCESS, "{:?}", common::recent_message());
}

fn read(ptr: *const u64, count: usize) -> Vec<u64> {
    let mut out = vec![0u64; count];
    // SAFETY: `ptr` is device memory of `count` values; `out` holds as many.
    let rc = unsafe {
        aclrtMemcpy(
            out.as_mut_ptr().cast(),
            count * 8,
            ptr.cast(),
            count * 8,
            ACL_MEMCPY_DEVICE_TO_HOST,
        )
    };
    assert_eq!(rc, ACL_SUCCESS);
    out
}

fn write(ptr: *mut u64, values: &[u64]) {
    // SAFETY: `ptr` is device memory of `values.len()` values.
    let rc = unsafe {
        aclrtMemcpy(
            ptr.cast(),
            values.len() * 8,
            values.as_ptr().cast(),
            values.len() * 8,
            ACL_MEMCPY_HOST_TO_DEVICE,
        )
    };
    assert_eq!(rc, ACL_SUCCESS);
}

// ---- stream-ordered pools --------------------------------------------------

fn ordered_pool() -> aclrtMemPool {
    let props = common::mem_pool_props();
    let mut pool = null_mut();
    // SAFETY: valid pointers.
    assert_eq!(
        unsafe { aclrtMemPoolCreate(&mut pool, &props) },
        ACL_SUCCESS
    );
    pool
}

fn malloc_async(pool: aclrtMemPool, size: usize, s: aclrtStream) -> *mut u64 {
    let mut p = null_mut();
    // SAFETY: a valid out-pointer.
    let rc = unsafe { aclrtMemPoolMallocAsync(&mut p, size, pool, s) };
    assert_eq!(rc, ACL_SUCCESS, "{:?}", common::recent_message());
    p.cast()
}

fn free_async(p: *mut u64, s: aclrtStream) -> aclError {
    // SAFETY: the address is looked up, never dereferenced.
    unsafe { aclrtMemPoolFreeAsync(p.cast(), s) }
}

fn used(pool: aclrtMemPool) -> u64 {
    let mut v = 0u64;
    // SAFETY: a uint64_t attribute into a u64.
    let rc = unsafe {
        aclrtMemPoolGetAttr(
            pool,
            ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT,
            (&mut v as *mut u64).cast(),
        )
    };
    assert_eq!(rc, ACL_SUCCESS);
    v
}

#[test]
fn stream_ordered_allocations_in_a_capture_are_the_models_until_it_goes() {
    let _serial = setup();
    let pool = ordered_pool();
    let (s, run_on) = (new_stream(), new_stream());
    let input = malloc_async(pool, 64, s);
    write(input, &[1, 2, 3, 4, 5, 6, 7, 8]);
    sync(s);
    let before = used(pool);

    begin(s);
    // A temporary freed in the capture, then reused by the capture.
    let temp = malloc_async(pool, 64, s);
    let first = Step {
        input,
        output: temp,
        count: 8,
        add: 1,
    };
    launch(s, 0, &first);
    assert_eq!(free_async(temp, s), ACL_SUCCESS);
    let again = malloc_async(pool, 64, s);
    assert_eq!(again, temp, "a block freed in the capture serves it again");
    let output = malloc_async(pool, 64, s);
    assert_ne!(output, temp);
    let third = Step {
        input,
        output: again,
        count: 8,
        add: 0,
    };
    let last = Step {
        input: again,
        output,
        count: 8,
        add: 0,
    };
    launch(s, 0, &third);
    launch(s, 0, &last);
    // A block the capture did not allocate cannot be freed inside it.
    assert_eq!(free_async(input, s), ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT);
    assert!(message().contains("not allocated in this capture"));
    let model = end(s).expect("the capture ends");
    assert!(used(pool) > before, "the model's blocks count as used");

    for _ in 0..10 {
        write(output, &[0; 8]);
        replay(model, run_on);
        sync(run_on);
        assert_eq!(read(output, 8), [9, 18, 27, 36, 45, 54, 63, 72]);
    }
    // The model's memory is not the program's to free, and keeps the pool.
    assert_eq!(free_async(output, run_on), ACL_ERROR_INVALID_PARAM);
    assert!(message().contains("captured model owns"), "{}", message());
    // SAFETY: a pool of this test.
    assert_eq!(
        unsafe { aclrtMemPoolDestroy(pool) },
        ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED
    );

    // Queued replays run before the model's memory goes back.
    replay(model, run_on);
    destroy_model(model);
    sync(run_on);
    assert_eq!(used(pool), before, "every block of the model went back");
    assert_eq!(free_async(output, run_on), ACL_ERROR_INVALID_PARAM);

    // An abandoned capture gives its blocks back at once.
    let other = new_stream();
    begin(other);
    let lost = malloc_async(pool, 4 * MIB, other);
    assert!(!lost.is_null());
    assert!(used(pool) > before);
    destroy(other);
    assert_eq!(used(pool), before);

    assert_eq!(free_async(input, s), ACL_SUCCESS);
    sync(s);
    // SAFETY: a pool of this test, every block freed.
    assert_eq!(unsafe { aclrtMemPoolDestroy(pool) }, ACL_SUCCESS);
    destroy(s);
    destroy(run_on);
}

// ---- capture pools ---------------------------------------------------------

fn mem_pool(tag: Option<&'static std::ffi::CStr>) -> aclallocMemPool {
    let options = aclallocMemPoolOptions {
        allocator: null_mut(),
        useOnOom: 0,
        noSplit: 0,
        tag: tag.map_or(null(), std::ffi::CStr::as_ptr),
    };
    let mut pool = null_mut();
    // SAFETY: valid pointers; the tag is NUL-terminated.
    assert_eq!(
        unsafe { aclallocMemPoolCreate(&options, &mut pool) },
        ACL_SUCCESS
    );
    pool
}

fn to_pool(pool: aclallocMemPool, s: aclrtStream) {
    assert_eq!(
        aclallocMemPoolBeginAllocateToPool(pool, 0, s),
        ACL_SUCCESS,
        "{:?}",
        common::recent_message()
    );
}

fn end_to_pool(pool: aclallocMemPool, s: aclrtStream) {
    assert_eq!(aclallocMemPoolEndAllocateToPool(pool, 0, s), ACL_SUCCESS);
}

fn device_pool(pool: aclallocMemPool) -> aclallocPool {
    let mut p = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(
        unsafe { aclallocMemPoolGetDevicePool(pool, 0, &mut p) },
        ACL_SUCCESS
    );
    assert!(!p.is_null(), "the memory pool served on device 0");
    p
}

fn reserved(p: aclallocPool) -> usize {
    let mut n = 0;
    // SAFETY: a valid out-pointer.
    assert_eq!(
        unsafe { aclallocPoolMemoryReserved(p, &mut n) },
        ACL_SUCCESS
    );
    n
}

fn allocated(p: aclallocPool) -> usize {
    let mut n = 0;
    // SAFETY: a valid out-pointer.
    assert_eq!(
        unsafe { aclallocPoolMemoryAllocated(p, &mut n) },
        ACL_SUCCESS
    );
    n
}

fn graphs(pool: aclallocMemPool) -> u64 {
    let mut n = 0;
    // SAFETY: a valid out-pointer.
    assert_eq!(
        unsafe { aclallocMemPoolGraphCount(pool, &mut n) },
        ACL_SUCCESS
    );
    n
}

fn raw_malloc(size: usize, s: aclrtStream) -> *mut u64 {
    let mut p = null_mut();
    // SAFETY: a valid out-pointer.
    let rc = unsafe { aclallocDefaultMalloc(&mut p, size, s) };
    assert_eq!(rc, ACL_SUCCESS, "{:?}", common::recent_message());
    p.cast()
}

/// Captures on `s`, routed to `pool`: one launch with a workspace of
/// `workspace` bytes that computes `step`.
fn capture_step(pool: aclallocMemPool, s: aclrtStream, workspace: usize, step: &Step) -> aclmdlRI {
    to_pool(pool, s);
    begin(s);
    launch(s, workspace, step);
    let model = end(s).expect("the capture ends");
    end_to_pool(pool, s);
    model
}

#[test]
fn a_capture_pool_serves_the_capturing_stream_and_is_shared_by_two_models() {
    let _serial = setup();
    let (s, t, run_on) = (new_stream(), new_stream(), new_stream());
    let free_before = device_free();
    let pool = mem_pool(None);

    // The first graph's output is allocated on the capturing stream while
    // it is routed: from the pool.
    to_pool(pool, s);
    let input = raw_malloc(64, s);
    let output = raw_malloc(64, s);
    end_to_pool(pool, s);
    write(input, &[1, 2, 3, 4, 5, 6, 7, 8]);
    let p = device_pool(pool);
    let step = Step {
        input,
        output,
        count: 8,
        add: 1,
    };
    let one = capture_step(pool, s, 2 * MIB, &step);
    assert_eq!(graphs(pool), 1);
    assert!(
        allocated(p) >= 2 * MIB + 128,
        "the workspace and the raw blocks are the pool's"
    );
    // A second graph shares the pool.
    let out2 = {
        to_pool(pool, t);
        let o = raw_malloc(64, t);
        end_to_pool(pool, t);
        o
    };
    let step2 = Step {
        input,
        output: out2,
        count: 8,
        add: 2,
    };
    let two = capture_step(pool, t, 2 * MIB, &step2);
    assert_eq!(graphs(pool), 2);
    assert!(allocated(p) >= 4 * MIB + 192);
    assert!(reserved(p) >= allocated(p));
    assert!(
        free_before - device_free() >= reserved(p),
        "the device's figures count the pool's memory"
    );

    for _ in 0..5 {
        replay(one, run_on);
        replay(two, run_on);
    }
    sync(run_on);
    assert_eq!(read(output, 8), [4, 7, 10, 13, 16, 19, 22, 25]);
    assert_eq!(read(out2, 8), [5, 8, 11, 14, 17, 20, 23, 26]);

    // The pool keeps its memory while either model holds a use of it.
    destroy_model(one);
    sync(run_on);
    assert_eq!(graphs(pool), 1);
    assert!(
        allocated(p) >= 2 * MIB,
        "the second model's workspace stays"
    );
    replay(two, run_on);
    destroy_model(two);
    sync(run_on);
    assert_eq!(graphs(pool), 0);
    let raw = allocated(p);
    assert!(raw > 0 && raw < MIB, "the raw blocks stay until freed");
    for b in [input, output, out2] {
        assert_eq!(aclallocDefaultFree(b.cast()), ACL_SUCCESS);
    }
    assert_eq!(
        reserved(p),
        0,
        "nothing uses the pool: its memory went back"
    );
    assert_eq!(device_free(), free_before);

    // Routes are checked.
    assert_eq!(
        aclallocMemPoolEndAllocateToPool(pool, 0, s),
        ACL_ERROR_INVALID_PARAM
    );
    to_pool(pool, s);
    assert_eq!(
        aclallocMemPoolBeginAllocateToPool(pool, 0, s),
        ACL_ERROR_INVALID_PARAM
    );
    assert!(message().contains("already allocates"));
    assert_eq!(
        aclallocMemPoolDestroy(pool),
        ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED,
        "a route is a use"
    );
    end_to_pool(pool, s);
    assert_eq!(aclallocMemPoolDestroy(pool), ACL_SUCCESS);
    for x in [s, t, run_on] {
        destroy(x);
    }
}

#[test]
fn an_abandoned_or_failed_capture_gives_its_pools_memory_back() {
    let _serial = setup();
    let free_before = device_free();
    let pool = mem_pool(None);
    // The kernel touches no memory: only its workspace matters here.
    let step = Step {
        input: null(),
        output: null_mut(),
        count: 0,
        add: 0,
    };

    // Abandoned: the capturing stream is destroyed.
    let s = new_stream();
    to_pool(pool, s);
    begin(s);
    launch(s, 3 * MIB, &step);
    let p = device_pool(pool);
    assert!(reserved(p) >= 3 * MIB);
    assert_eq!(graphs(pool), 1);
    destroy(s);
    assert_eq!(graphs(pool), 0);
    end_to_pool(pool, s);
    assert_eq!(reserved(p), 0);

    // Failed: a forbidden call invalidates the capture, and its end fails.
    let s = new_stream();
    to_pool(pool, s);
    begin(s);
    launch(s, 3 * MIB, &step);
    assert!(reserved(p) >= 3 * MIB);
    // SAFETY: a stream of this test.
    assert_eq!(
        unsafe { aclrtSynchronizeStream(s) },
        ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC
    );
    assert_eq!(end(s), Err(ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC));
    end_to_pool(pool, s);
    assert_eq!(graphs(pool), 0);
    assert_eq!(reserved(p), 0, "the failed capture's memory went back");

    assert_eq!(aclallocMemPoolDestroy(pool), ACL_SUCCESS);
    destroy(s);
    assert_eq!(device_free(), free_before);
}

#[test]
fn a_tagged_capture_pool_sleeps_and_wakes_and_the_model_replays_the_same() {
    let _serial = setup();
    let pool = mem_pool(Some(c"graph"));
    let (s, run_on) = (new_stream(), new_stream());
    to_pool(pool, s);
    let input = raw_malloc(8 * 8, s);
    let output = raw_malloc(8 * 8, s);
    end_to_pool(pool, s);
    write(input, &[10, 20, 30, 40, 50, 60, 70, 80]);
    let step = Step {
        input,
        output,
        count: 8,
        add: 5,
    };
    let model = capture_step(pool, s, MIB, &step);
    replay(model, run_on);
    sync(run_on);
    let first = read(output, 8);
    assert_eq!(first, [35, 65, 95, 125, 155, 185, 215, 245]);
    let p = device_pool(pool);
    let held = reserved(p);
    let free_awake = device_free();

    let tags: [*const c_char; 1] = [c"graph".as_ptr()];
    for _ in 0..3 {
        // SAFETY: one NUL-terminated tag.
        assert_eq!(unsafe { aclallocSleep(tags.as_ptr(), 1) }, ACL_SUCCESS);
        assert!(
            device_free() >= free_awake + held,
            "asleep, the pool's physical memory is the device's again"
        );
        // SAFETY: as above.
        assert_eq!(unsafe { aclallocWakeUp(tags.as_ptr(), 1) }, ACL_SUCCESS);
        assert_eq!(read(input, 8), [10, 20, 30, 40, 50, 60, 70, 80]);
        write(output, &[0; 8]);
        replay(model, run_on);
        sync(run_on);
        assert_eq!(read(output, 8), first, "the same results after wake");
    }

    destroy_model(model);
    sync(run_on);
    for b in [input, output] {
        assert_eq!(aclallocDefaultFree(b.cast()), ACL_SUCCESS);
    }
    assert_eq!(reserved(p), 0);
    assert_eq!(aclallocMemPoolDestroy(pool), ACL_SUCCESS);
    destroy(s);
    destroy(run_on);
}

#[test]
fn the_graph_pool_exports_refuse_bad_input_and_write_nothing() {
    let _serial = setup();
    let pool = mem_pool(None);
    let s = new_stream();
    assert_eq!(
        aclallocMemPoolBeginAllocateToPool(pool, 0, null_mut()),
        ACL_ERROR_INVALID_PARAM
    );
    assert!(message().contains("stream"));
    assert_eq!(
        aclallocMemPoolBeginAllocateToPool(pool, 99, s),
        ACL_ERROR_RT_INVALID_DEVICEID
    );
    let garbage = 0x1234_5678 as aclallocMemPool;
    assert_eq!(
        aclallocMemPoolBeginAllocateToPool(garbage, 0, s),
        ACL_ERROR_INVALID_PARAM
    );
    assert_eq!(
        aclallocMemPoolEndAllocateToPool(garbage, 0, s),
        ACL_ERROR_INVALID_PARAM
    );
    let mut count = 7u64;
    // SAFETY: a valid out-pointer; the pool is refused first.
    assert_eq!(
        unsafe { aclallocMemPoolGraphCount(garbage, &mut count) },
        ACL_ERROR_INVALID_PARAM
    );
    assert_eq!(count, 7, "nothing written on failure");
    // SAFETY: NULL is refused.
    assert_eq!(
        unsafe { aclallocMemPoolGraphCount(pool, null_mut()) },
        ACL_ERROR_INVALID_PARAM
    );
    // Another stream's route does not serve this one.
    let other = new_stream();
    to_pool(pool, other);
    assert_eq!(
        aclallocMemPoolEndAllocateToPool(pool, 0, s),
        ACL_ERROR_INVALID_PARAM
    );
    end_to_pool(pool, other);
    assert_eq!(aclallocMemPoolDestroy(pool), ACL_SUCCESS);
    assert_eq!(
        aclallocMemPoolBeginAllocateToPool(pool, 0, s),
        ACL_ERROR_INVALID_PARAM,
        "a destroyed pool"
    );
    destroy(s);
    destroy(other);
}
