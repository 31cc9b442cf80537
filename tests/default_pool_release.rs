//! The default allocator's pool gives segments back to the device while
//! another stream still has a default-allocator workspace pending.
//!
//! The host runtime's aclrtFree waits for every stream; that stream's worker
//! gives its workspace back to the same pool when its kernel ends. The pool
//! used to free segments while holding its locks, so the two waited for each
//! other for good (found by fuzz/fuzz_targets/runtime_sequence.rs). Its own
//! binary: the device size is set before the runtime first reads it.

use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::types::*;
use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
use std::ffi::c_void;
use std::sync::mpsc;
use std::time::Duration;

unsafe extern "C" fn quick(_: *mut c_void, _: usize, _: *mut c_void) {}
unsafe extern "C" fn slow(_: *mut c_void, _: usize, _: *mut c_void) {
    std::thread::sleep(Duration::from_millis(200));
}

#[test]
fn releasing_a_cached_segment_while_another_stream_works_does_not_hang() {
    std::env::set_var("ACLALLOC_DEVICE_MEMORY", "64MiB");
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || unsafe {
        assert_eq!(aclInit(std::ptr::null()), 0);
        assert_eq!(aclrtSetDevice(0), 0);
        // The default pool caches a 12 MiB segment.
        assert_eq!(
            aclallocLaunchKernel(
                std::ptr::null_mut(),
                12 << 20,
                Some(quick),
                std::ptr::null_mut()
            ),
            0
        );
        assert_eq!(aclrtSynchronizeDevice(), 0);
        let mut stream: aclrtStream = std::ptr::null_mut();
        assert_eq!(aclrtCreateStream(&mut stream), 0);
        // A workspace from the default pool stays pending on `stream`...
        assert_eq!(
            aclallocLaunchKernel(stream, 4096, Some(slow), std::ptr::null_mut()),
            0
        );
        // ...while a larger request makes the pool release the 12 MiB one.
        let rc = aclallocLaunchKernel(
            std::ptr::null_mut(),
            14 << 20,
            Some(quick),
            std::ptr::null_mut(),
        );
        assert_eq!(aclrtSynchronizeDevice(), 0);
        assert_eq!(aclrtDestroyStream(stream), 0);
        done.send(rc).unwrap();
    });
    let rc = finished
        .recv_timeout(Duration::from_secs(30))
        .expect("the launch hung: the pool freed device memory while holding its locks");
    assert_eq!(
        rc, 0,
        "the 14 MiB launch fits once the 12 MiB segment is released"
    );
}
