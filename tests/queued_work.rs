//! Memory that queued work will touch is never taken from under it: each
//! call that gives memory back (`aclrtUnmapMem`, `aclrtFreePhysical` of a
//! mapped handle, `aclrtReleaseMemAddress`, `aclrtFree`, `aclrtFreeHost`)
//! against a queued copy, set and kernel on that memory. The stream is held
//! by a host function that sleeps; the call must return only once the
//! queued work has run (a counter after it says so), and the process must
//! not fault. On a device such work would fail as a task; on the host it
//! would write pages the process no longer maps.

mod common;

use aclalloc::ffi::cann::host_memory::{aclrtFreeHost, aclrtMallocHost};
use aclalloc::ffi::cann::memory::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::stream_info::aclrtLaunchHostFunc;
use aclalloc::ffi::cann::types::*;
use aclalloc::ffi::cann::virtual_memory::*;
use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

const OK: aclError = 0;
const GRANULE: usize = 2 << 20;

/// The tests share the process-wide runtime and its counters.
static SERIAL: Mutex<()> = Mutex::new(());
/// Host functions run after the queued work, counted.
static AFTER: AtomicUsize = AtomicUsize::new(0);

fn setup() -> std::sync::MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: NULL is a valid config path.
    let init = unsafe { aclInit(null_mut()) };
    assert!(init == OK || init == 100_002, "aclInit: {init}");
    assert_eq!(aclrtSetDevice(0), OK);
    guard
}

extern "C" fn hold_the_stream(_: *mut c_void) {
    std::thread::sleep(Duration::from_millis(150));
}

extern "C" fn count_after(_: *mut c_void) {
    AFTER.fetch_add(1, Ordering::SeqCst);
}

/// A host "kernel" that writes its user data: the address of the memory.
extern "C" fn write_kernel(_: *mut c_void, _: usize, user: *mut c_void) {
    // SAFETY: the tests pass the start of at least 4 KiB of writable memory.
    unsafe { std::ptr::write_bytes(user.cast::<u8>(), 0x5a, 4096) };
}

#[derive(Clone, Copy, Debug)]
enum Work {
    Copy,
    Set,
    Kernel,
}

/// Queues on a new stream: a host function that holds it, `work` on
/// `[ptr, ptr + 4 KiB)`, then a counter. Returns the stream and the
/// counter's value before.
fn queue(work: Work, ptr: *mut c_void, source: &[u8]) -> (aclrtStream, usize) {
    let mut stream = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtCreateStream(&mut stream) }, OK);
    let before = AFTER.load(Ordering::SeqCst);
    // SAFETY: the functions and arguments outlive the stream's work (the
    // tests synchronize before returning); `ptr` is 4 KiB of live memory.
    unsafe {
        assert_eq!(
            aclrtLaunchHostFunc(stream, Some(hold_the_stream), null_mut()),
            OK
        );
        let rc = match work {
            Work::Copy => aclrtMemcpyAsync(
                ptr,
                4096,
                source.as_ptr().cast(),
                4096,
                ACL_MEMCPY_HOST_TO_DEVICE,
                stream,
            ),
            Work::Set => aclrtMemsetAsync(ptr, 4096, 0x11, 4096, stream),
            Work::Kernel => aclallocLaunchKernel(stream, 0, Some(write_kernel), ptr),
        };
        assert_eq!(rc, OK, "{work:?} queued");
        assert_eq!(
            aclrtLaunchHostFunc(stream, Some(count_after), null_mut()),
            OK
        );
    }
    (stream, before)
}

fn finish(stream: aclrtStream) {
    // SAFETY: a live stream of this test.
    unsafe {
        assert_eq!(aclrtSynchronizeStream(stream), OK);
        assert_eq!(aclrtDestroyStream(stream), OK);
    }
}

fn assert_waited(call: &str, work: Work, before: usize) {
    assert_eq!(
        AFTER.load(Ordering::SeqCst),
        before + 1,
        "{call} returned before the queued {work:?} had run"
    );
}

const WORK: [Work; 3] = [Work::Copy, Work::Set, Work::Kernel];

/// One granule of physical memory mapped at a new reservation.
fn mapped() -> (*mut c_void, aclrtDrvMemHandle) {
    let (mut va, mut handle) = (null_mut(), null_mut());
    // SAFETY: valid out-pointers and a valid property struct.
    unsafe {
        assert_eq!(
            aclrtReserveMemAddress(&mut va, GRANULE, 0, null_mut(), 0),
            OK
        );
        assert_eq!(
            aclrtMallocPhysical(&mut handle, GRANULE, &common::physical_prop(), 0),
            OK
        );
        assert_eq!(aclrtMapMem(va, GRANULE, 0, handle, 0), OK);
    }
    (va, handle)
}

#[test]
fn unmapping_waits_for_queued_work_on_the_range() {
    let _g = setup();
    let source = vec![7u8; 4096];
    for work in WORK {
        let (va, handle) = mapped();
        let (stream, before) = queue(work, va, &source);
        // SAFETY: a mapping of this test.
        assert_eq!(unsafe { aclrtUnmapMem(va) }, OK, "{work:?}");
        assert_waited("aclrtUnmapMem", work, before);
        // SAFETY: handles of this test, each released once.
        unsafe {
            assert_eq!(aclrtFreePhysical(handle), OK);
            assert_eq!(aclrtReleaseMemAddress(va), OK);
        }
        finish(stream);
    }
}

#[test]
fn freeing_mapped_physical_memory_keeps_it_until_the_last_unmap() {
    let _g = setup();
    let source = vec![7u8; 4096];
    for work in WORK {
        let (va, handle) = mapped();
        let (stream, before) = queue(work, va, &source);
        // The handle dies; the pages stay mapped until the unmap below,
        // which waits for the queued work.
        // SAFETY: handles of this test, each released once.
        unsafe {
            assert_eq!(aclrtFreePhysical(handle), OK, "{work:?}");
            assert_eq!(aclrtUnmapMem(va), OK);
        }
        assert_waited("aclrtFreePhysical then aclrtUnmapMem", work, before);
        // SAFETY: the reservation of this test, now without mappings.
        assert_eq!(unsafe { aclrtReleaseMemAddress(va) }, OK);
        finish(stream);
    }
}

#[test]
fn releasing_an_address_range_refuses_one_with_mappings_and_queued_work_runs() {
    let _g = setup();
    let source = vec![7u8; 4096];
    for work in WORK {
        let (va, handle) = mapped();
        let (stream, before) = queue(work, va, &source);
        // SAFETY: the reservation of this test.
        assert_ne!(
            unsafe { aclrtReleaseMemAddress(va) },
            OK,
            "{work:?}: still mapped"
        );
        // SAFETY: handles of this test, each released once.
        unsafe {
            assert_eq!(aclrtUnmapMem(va), OK);
            assert_waited("aclrtUnmapMem", work, before);
            assert_eq!(aclrtReleaseMemAddress(va), OK);
            assert_eq!(aclrtFreePhysical(handle), OK);
        }
        finish(stream);
    }
}

#[test]
fn freeing_device_memory_waits_for_queued_work_on_it() {
    let _g = setup();
    let source = vec![7u8; 4096];
    for work in WORK {
        let mut p = null_mut();
        // SAFETY: a valid out-pointer.
        assert_eq!(
            unsafe { aclrtMalloc(&mut p, 4096, ACL_MEM_MALLOC_HUGE_FIRST) },
            OK
        );
        let (stream, before) = queue(work, p, &source);
        // SAFETY: memory of this test, freed once.
        assert_eq!(unsafe { aclrtFree(p) }, OK, "{work:?}");
        assert_waited("aclrtFree", work, before);
        finish(stream);
    }
}

#[test]
fn freeing_host_memory_waits_for_queued_work_on_it() {
    let _g = setup();
    let source = vec![7u8; 4096];
    for work in WORK {
        let mut p = null_mut();
        // SAFETY: a valid out-pointer.
        assert_eq!(unsafe { aclrtMallocHost(&mut p, 4096) }, OK);
        let (stream, before) = queue(work, p, &source);
        // SAFETY: memory of this test, freed once.
        assert_eq!(unsafe { aclrtFreeHost(p) }, OK, "{work:?}");
        assert_waited("aclrtFreeHost", work, before);
        finish(stream);
    }
}

/// Released by the test once `aclrtMemset` returned.
static GATE: Mutex<bool> = Mutex::new(false);
static GATE_OPEN: std::sync::Condvar = std::sync::Condvar::new();

extern "C" fn wait_for_gate(_: *mut c_void) {
    let open = GATE.lock().unwrap_or_else(|p| p.into_inner());
    let _open = GATE_OPEN
        .wait_timeout_while(open, Duration::from_secs(30), |open| !*open)
        .unwrap_or_else(|p| p.into_inner());
}

/// CANN's reference: `aclrtMemset` "initializes the memory at once, with no
/// implicit device or stream synchronization". A stream held until the
/// memset returned must not hold the memset.
#[test]
fn a_synchronous_memset_waits_for_no_queued_work() {
    let _g = setup();
    *GATE.lock().unwrap() = false;
    let mut stream = null_mut();
    let mut dev = null_mut();
    // SAFETY: valid out-pointers, then live handles.
    unsafe {
        assert_eq!(aclrtCreateStream(&mut stream), OK);
        assert_eq!(aclrtMalloc(&mut dev, 4096, 0), OK);
        assert_eq!(
            aclrtLaunchHostFunc(stream, Some(wait_for_gate), null_mut()),
            OK
        );
    }
    let address = dev as usize;
    let memset = std::thread::spawn(move || {
        assert_eq!(aclrtSetDevice(0), OK);
        // SAFETY: 4 KiB of device memory.
        unsafe { aclrtMemset(address as *mut c_void, 4096, 0x33, 4096) }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !memset.is_finished() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let returned = memset.is_finished();
    *GATE.lock().unwrap() = true;
    GATE_OPEN.notify_all();
    assert!(returned, "aclrtMemset waited for the stream's queued work");
    assert_eq!(memset.join().unwrap(), OK);
    let mut back = [0u8; 16];
    // SAFETY: valid ranges; then live handles.
    unsafe {
        assert_eq!(
            aclrtMemcpy(
                back.as_mut_ptr().cast(),
                16,
                dev,
                16,
                ACL_MEMCPY_DEVICE_TO_HOST
            ),
            OK
        );
        assert_eq!(aclrtFree(dev), OK);
        assert_eq!(aclrtDestroyStream(stream), OK);
    }
    assert_eq!(back, [0x33; 16]);
}
