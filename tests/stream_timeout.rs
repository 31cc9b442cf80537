//! `aclrtSynchronizeStreamWithTimeout`: gives up with
//! `ACL_ERROR_RT_STREAM_SYNC_TIMEOUT` while the stream's work is still
//! running, leaves that work running, and succeeds once it has run. The
//! kernel blocks on a flag the test sets, so no outcome depends on timing.

use aclalloc::base::error::{ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, ACL_SUCCESS};
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::types::aclrtStream;
use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
use std::ffi::c_void;
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

static RELEASE: AtomicBool = AtomicBool::new(false);
static RAN: AtomicU32 = AtomicU32::new(0);

unsafe extern "C" fn blocked(_: *mut c_void, _: usize, _: *mut c_void) {
    while !RELEASE.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    RAN.fetch_add(1, Ordering::AcqRel);
}

#[test]
fn a_timed_synchronize_gives_up_on_running_work_and_returns_once_it_has_run() {
    // SAFETY: no configuration file.
    assert_eq!(unsafe { aclInit(null()) }, ACL_SUCCESS);
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    let mut stream: aclrtStream = null_mut();
    // SAFETY: a writable out-parameter.
    assert_eq!(unsafe { aclrtCreateStream(&mut stream) }, ACL_SUCCESS);
    // SAFETY: a kernel that ignores its arguments.
    let rc = unsafe { aclallocLaunchKernel(stream, 0, Some(blocked), null_mut()) };
    assert_eq!(rc, ACL_SUCCESS);

    for timeout_ms in [1, 20] {
        // SAFETY: a live stream.
        let rc = unsafe { aclrtSynchronizeStreamWithTimeout(stream, timeout_ms) };
        assert_eq!(
            rc, ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
            "timeout {timeout_ms} ms"
        );
        let message = aclalloc::base::errlog::take_recent().unwrap_or_default();
        assert!(
            message.contains(&format!("within {timeout_ms} ms")),
            "{message}"
        );
    }
    assert_eq!(
        RAN.load(Ordering::Acquire),
        0,
        "the kernel keeps running, not dropped"
    );

    RELEASE.store(true, Ordering::Release);
    // SAFETY: a live stream; the kernel can now finish, so no limit is reached.
    assert_eq!(
        unsafe { aclrtSynchronizeStreamWithTimeout(stream, 60_000) },
        ACL_SUCCESS
    );
    assert_eq!(RAN.load(Ordering::Acquire), 1);
    // SAFETY: as above; nothing queued: at once, for any limit.
    assert_eq!(
        unsafe { aclrtSynchronizeStreamWithTimeout(stream, 1) },
        ACL_SUCCESS
    );
    // SAFETY: as above.
    assert_eq!(
        unsafe { aclrtSynchronizeStreamWithTimeout(stream, -1) },
        ACL_SUCCESS
    );
    // SAFETY: a live stream, destroyed once.
    assert_eq!(unsafe { aclrtDestroyStream(stream) }, ACL_SUCCESS);
}
