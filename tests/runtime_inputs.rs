//! Runtime inputs a hostile or careless caller gives: addresses the device
//! records refuse, registrations on stream values no stream holds yet, and
//! `aclrtDestroyStreamForce` with work still queued. Through the C ABI, on
//! the process-wide host runtime.

mod common;

use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::errmsg::aclGetRecentErrMsg;
use aclalloc::ffi::cann::memory::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::types::*;
use aclalloc::ffi::cann::virtual_memory::aclrtReserveMemAddress;
use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const OK: aclError = 0;
const INVALID_PARAM: aclError = 100_000;
const GRANULE: usize = 2 << 20;

/// The tests share the process-wide runtime and predict its stream handles.
static SERIAL: Mutex<()> = Mutex::new(());

fn setup() -> std::sync::MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: NULL is a valid config path.
    let init = unsafe { aclInit(std::ptr::null()) };
    assert!(init == OK || init == 100_002, "aclInit: {init}");
    assert_eq!(aclrtSetDevice(0), OK);
    guard
}

fn message() -> String {
    let text = aclGetRecentErrMsg();
    assert!(!text.is_null(), "no message");
    // SAFETY: a NUL-terminated string valid until this thread's next call.
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
}

fn create_stream() -> aclrtStream {
    let mut stream = std::ptr::null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtCreateStream(&mut stream) }, OK);
    stream
}

fn device_malloc(size: usize) -> *mut c_void {
    let mut p = std::ptr::null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(
        unsafe { aclrtMalloc(&mut p, size, ACL_MEM_MALLOC_HUGE_FIRST) },
        OK
    );
    p
}

/// Checks a refused call: the code, the function, the parameter and the address.
fn refused(rc: aclError, function: &str, param: &str, addr: *const c_void) {
    assert_eq!(rc, INVALID_PARAM, "{function} on {addr:?}");
    let text = message();
    assert!(
        text.starts_with(&format!("{function} failed. Parameter {param} is invalid.")),
        "{text}"
    );
    assert!(
        text.contains(&format!("address {:#x}", addr as usize)),
        "the message names the address: {text}"
    );
}

/// Every copy and fill on a reserved-but-unmapped range or a freed
/// `aclrtMalloc` pointer is refused with the address in the message, in
/// every kind and direction, instead of faulting; host memory still copies
/// with `ACL_MEMCPY_DEFAULT`.
#[test]
fn dead_device_addresses_are_refused_never_touched() {
    let _serial = setup();
    let mut reserved = std::ptr::null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(
        unsafe { aclrtReserveMemAddress(&mut reserved, GRANULE, 0, std::ptr::null_mut(), 0) },
        OK
    );
    // Allocated first: a later allocation may reuse the freed range.
    let live = device_malloc(4096);
    let freed = device_malloc(4096);
    // SAFETY: never used again but as an address.
    assert_eq!(unsafe { aclrtFree(freed) }, OK);
    let mut host = [0u8; 64];
    let host = host.as_mut_ptr() as *mut c_void;
    let stream = create_stream();
    for dead in [reserved, freed] {
        for kind in [
            ACL_MEMCPY_DEFAULT,
            ACL_MEMCPY_HOST_TO_DEVICE,
            ACL_MEMCPY_DEVICE_TO_DEVICE,
        ] {
            // SAFETY: the call must refuse `dead` before touching it.
            let rc = unsafe { aclrtMemcpy(dead, 64, live, 64, kind) };
            refused(rc, "aclrtMemcpy", "dst", dead);
            // SAFETY: as above.
            let rc = unsafe { aclrtMemcpyAsync(dead, 64, live, 64, kind, stream) };
            refused(rc, "aclrtMemcpyAsync", "dst", dead);
        }
        for kind in [
            ACL_MEMCPY_DEFAULT,
            ACL_MEMCPY_DEVICE_TO_HOST,
            ACL_MEMCPY_HOST_TO_DEVICE,
            ACL_MEMCPY_HOST_TO_HOST,
        ] {
            // SAFETY: as above; `host` is valid for 64 bytes.
            let rc = unsafe { aclrtMemcpy(host, 64, dead, 64, kind) };
            let dst_first = kind == ACL_MEMCPY_HOST_TO_DEVICE;
            if dst_first {
                refused(rc, "aclrtMemcpy", "dst", host);
            } else {
                refused(rc, "aclrtMemcpy", "src", dead);
            }
        }
        // SAFETY: as above.
        refused(
            unsafe { aclrtMemset(dead, 64, 0, 64) },
            "aclrtMemset",
            "devPtr",
            dead,
        );
        // SAFETY: as above.
        let rc = unsafe { aclrtMemsetAsync(dead, 64, 0, 64, stream) };
        refused(rc, "aclrtMemsetAsync", "devPtr", dead);
    }
    // Host memory and live device memory still copy with DEFAULT.
    let mut other = [7u8; 64];
    // SAFETY: both are valid host ranges of 64 bytes.
    let rc = unsafe { aclrtMemcpy(host, 64, other.as_mut_ptr() as *mut c_void, 64, 0) };
    assert_eq!(rc, OK);
    // SAFETY: `live` is device memory of 4096 bytes, `host` 64 bytes.
    unsafe {
        assert_eq!(aclrtMemcpy(live, 64, host, 64, ACL_MEMCPY_DEFAULT), OK);
        assert_eq!(aclrtMemcpy(host, 64, live, 64, ACL_MEMCPY_DEFAULT), OK);
        assert_eq!(aclrtSynchronizeStream(stream), OK);
        assert_eq!(aclrtDestroyStream(stream), OK);
        assert_eq!(aclrtFree(live), OK);
    }
    assert_eq!(other[0], 7);
}

fn complete_descriptor() -> aclrtAllocatorDesc {
    let desc = aclrtAllocatorCreateDesc();
    assert!(!desc.is_null());
    common::complete_with_trivial_functions(desc);
    desc
}

fn registered(stream: aclrtStream) -> bool {
    common::registered_descriptor(stream).is_some()
}

/// Stream handles are numbers issued in order, so the next one is easy to
/// guess: a registration on it before the stream exists is refused (the
/// stream would inherit it), as is one on a destroyed stream; a live
/// stream's registration goes with it; values outside the stream range
/// (a real runtime's streams, a caller's own keys) are still accepted.
#[test]
fn registrations_on_stream_values_no_stream_holds_are_refused() {
    let _serial = setup();
    let desc = complete_descriptor();
    let first = create_stream();
    let guessed = (first as usize + 1) as aclrtStream;
    assert_eq!(aclrtAllocatorRegister(guessed, desc), INVALID_PARAM);
    assert!(
        message().starts_with("aclrtAllocatorRegister failed. Parameter stream is invalid."),
        "{}",
        message()
    );
    let second = create_stream();
    assert_eq!(second, guessed, "the guess was right");
    assert!(!registered(second), "the new stream inherited nothing");

    assert_eq!(aclrtAllocatorRegister(second, desc), OK);
    assert!(registered(second));
    // SAFETY: a live stream.
    assert_eq!(unsafe { aclrtDestroyStream(second) }, OK);
    assert!(!registered(second), "destroying drops the registration");
    assert_eq!(aclrtAllocatorRegister(second, desc), INVALID_PARAM);
    assert!(!registered(second));

    let mut foreign = 0u64;
    let foreign = &mut foreign as *mut u64 as aclrtStream;
    assert_eq!(aclrtAllocatorRegister(foreign, desc), OK);
    assert!(registered(foreign));
    assert_eq!(aclrtAllocatorUnregister(foreign), OK);
    // SAFETY: a live stream.
    assert_eq!(unsafe { aclrtDestroyStream(first) }, OK);
    assert_eq!(aclrtAllocatorDestroyDesc(desc), OK);
}

static GATE: AtomicBool = AtomicBool::new(false);
static RAN: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn gated(_: *mut c_void, _: usize, _: *mut c_void) {
    while GATE.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_micros(50));
    }
}

/// Writes its index into device memory (`data`: the base of `u32`s).
unsafe extern "C" fn write_index(workspace: *mut c_void, _: usize, data: *mut c_void) {
    let index = RAN.fetch_add(1, Ordering::SeqCst);
    // SAFETY: the test passes device memory with room for every index; the
    // workspace is live while the kernel runs.
    unsafe {
        (data as *mut u32).add(index).write(index as u32);
        if !workspace.is_null() {
            (workspace as *mut u8).write(1);
        }
    }
}

/// The threads of this process whose name is `name`.
fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == name)
        .count()
}

/// `aclrtDestroyStreamForce` returns while a kernel still holds the stream
/// (it does not wait), and every kernel queued behind it still runs:
/// `aclrtSynchronizeDevice` waits for them, and the stream's registration is
/// gone once it returns; the thread that finished the destroy is joined by
/// a synchronize once it is done.
/// 20 runs of 20 kernels, every other run with
/// workspaces from the runtime (held until the kernels ran), the others with
/// an allocator registered.
#[test]
fn destroy_stream_force_returns_at_once_and_queued_work_still_runs() {
    let _serial = setup();
    const KERNELS: usize = 20;
    let out = device_malloc(KERNELS * 4) as *mut u32;
    let desc = complete_descriptor();
    for run in 0..20 {
        RAN.store(0, Ordering::SeqCst);
        GATE.store(true, Ordering::SeqCst);
        let stream = create_stream();
        let with_allocator = run % 2 == 1;
        // The registered allocator's blocks are not memory: no workspace then.
        let workspace = if with_allocator {
            assert_eq!(aclrtAllocatorRegister(stream, desc), OK);
            0
        } else {
            64
        };
        // SAFETY: kernels with the arguments they expect.
        unsafe {
            assert_eq!(aclrtMemset(out.cast(), KERNELS * 4, 0xFF, KERNELS * 4), OK);
            assert_eq!(
                aclallocLaunchKernel(stream, 0, Some(gated), std::ptr::null_mut()),
                OK
            );
            for _ in 0..KERNELS {
                assert_eq!(
                    aclallocLaunchKernel(stream, workspace, Some(write_index), out.cast()),
                    OK
                );
            }
        }
        let stream_value = stream as usize;
        let (done, returned) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // SAFETY: a live stream.
            let rc = unsafe { aclrtDestroyStreamForce(stream_value as aclrtStream) };
            let _ = done.send(rc);
        });
        let rc = returned.recv_timeout(Duration::from_secs(10));
        assert_eq!(
            rc,
            Ok(OK),
            "run {run}: the destroy waited for the gated kernel"
        );
        assert_eq!(RAN.load(Ordering::SeqCst), 0, "run {run}: nothing ran yet");
        GATE.store(false, Ordering::SeqCst);
        assert_eq!(aclrtSynchronizeDevice(), OK);
        assert_eq!(
            RAN.load(Ordering::SeqCst),
            KERNELS,
            "run {run}: every queued kernel ran"
        );
        assert!(!registered(stream), "run {run}: the registration went");
        // The finisher is joined once done, by the next synchronize (or
        // forced destroy, or reset): it may still be shutting the stream's
        // worker down when this synchronize looks, and a joined thread
        // leaves /proc a moment after the join returns. None is left for
        // good.
        let deadline = Instant::now() + Duration::from_secs(10);
        while threads_named("aclalloc-drain") > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
            assert_eq!(aclrtSynchronizeDevice(), OK);
        }
        assert_eq!(
            threads_named("aclalloc-drain"),
            0,
            "run {run}: the destroy's finisher thread was joined"
        );
        let mut seen = [0u32; KERNELS];
        // SAFETY: `out` is device memory of KERNELS u32s; `seen` as large.
        let rc = unsafe {
            aclrtMemcpy(
                seen.as_mut_ptr().cast(),
                KERNELS * 4,
                out.cast(),
                KERNELS * 4,
                ACL_MEMCPY_DEVICE_TO_HOST,
            )
        };
        assert_eq!(rc, OK);
        assert_eq!(seen, std::array::from_fn(|i| i as u32), "run {run}");
    }
    // SAFETY: device memory from aclrtMalloc.
    assert_eq!(unsafe { aclrtFree(out.cast()) }, OK);
    assert_eq!(aclrtAllocatorDestroyDesc(desc), OK);
}
