//! `aclrtSubscribeHostFunc` / `aclrtProcessHostFunc` /
//! `aclrtUnSubscribeHostFunc` through the C ABI: a host function launched on
//! a subscribed stream runs on the subscribed thread, inside its
//! `aclrtProcessHostFunc`, in order with the stream's work; unsubscribed, it
//! runs on the stream's own thread again; bad input is refused with a message.

use aclalloc::base::error::*;
use aclalloc::ffi::cann::errmsg::aclGetRecentErrMsg;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::stream_info::*;
use aclalloc::ffi::cann::types::*;
use std::ffi::{c_void, CStr};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

fn setup() -> aclrtStream {
    // SAFETY: a NULL configuration path is allowed.
    let rc = unsafe { aclInit(std::ptr::null()) };
    assert!(rc == ACL_SUCCESS || rc == ACL_ERROR_REPEAT_INITIALIZE);
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    let mut s = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtCreateStream(&mut s) }, ACL_SUCCESS);
    s
}

fn me() -> u64 {
    // SAFETY: no preconditions.
    unsafe { libc::pthread_self() as u64 }
}

fn last_message() -> String {
    let p = aclGetRecentErrMsg();
    assert!(!p.is_null(), "a failure leaves a message");
    // SAFETY: a NUL-terminated string valid until the next read.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// (thread that ran it, its argument), in the order run.
static RAN: Mutex<Vec<(u64, usize)>> = Mutex::new(Vec::new());

unsafe extern "C" fn note(arg: *mut c_void) {
    RAN.lock().unwrap().push((me(), arg as usize));
}

#[test]
fn host_functions_run_on_the_subscribed_thread_in_stream_order() {
    let s = setup();
    let processor = AtomicU64::new(0);
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let h = scope.spawn(|| {
            processor.store(me(), Ordering::SeqCst);
            let mut ran = 0;
            while !stop.load(Ordering::SeqCst) {
                match aclrtProcessHostFunc(50) {
                    ACL_SUCCESS => ran += 1,
                    // Not subscribed yet, or nothing posted in time.
                    ACL_ERROR_INVALID_PARAM | ACL_ERROR_RT_REPORT_TIMEOUT => {}
                    rc => panic!("aclrtProcessHostFunc: {rc}"),
                }
            }
            ran
        });
        while processor.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        let thread = processor.load(Ordering::SeqCst);
        // SAFETY: a live stream; `note` may run on any thread.
        unsafe {
            assert_eq!(aclrtSubscribeHostFunc(thread, s), ACL_SUCCESS);
            // One thread per stream.
            assert_eq!(aclrtSubscribeHostFunc(me(), s), ACL_ERROR_INVALID_PARAM);
            assert!(last_message().contains("already subscribed"));
            for i in 1..=3usize {
                assert_eq!(
                    aclrtLaunchHostFunc(s, Some(note), i as *mut c_void),
                    ACL_SUCCESS
                );
            }
            assert_eq!(aclrtSynchronizeStream(s), ACL_SUCCESS);
        }
        // Ran on the subscribed thread, in order, before the synchronize returned.
        let ran = std::mem::take(&mut *RAN.lock().unwrap());
        assert_eq!(ran, vec![(thread, 1), (thread, 2), (thread, 3)]);
        // SAFETY: as above.
        unsafe {
            assert_eq!(aclrtUnSubscribeHostFunc(thread, s), ACL_SUCCESS);
            // Twice: not subscribed any more.
            assert_eq!(aclrtUnSubscribeHostFunc(thread, s), ACL_ERROR_INVALID_PARAM);
            assert!(last_message().contains("not subscribed"));
            // Unsubscribed: the stream's own thread runs it again.
            assert_eq!(
                aclrtLaunchHostFunc(s, Some(note), 4 as *mut c_void),
                ACL_SUCCESS
            );
            assert_eq!(aclrtSynchronizeStream(s), ACL_SUCCESS);
        }
        let ran = std::mem::take(&mut *RAN.lock().unwrap());
        assert_eq!(ran.len(), 1);
        assert_eq!(ran[0].1, 4);
        assert_ne!(ran[0].0, thread);
        assert_ne!(ran[0].0, me());
        stop.store(true, Ordering::SeqCst);
        assert_eq!(h.join().unwrap(), 3);
    });
    // SAFETY: a live stream.
    assert_eq!(unsafe { aclrtDestroyStream(s) }, ACL_SUCCESS);
}

#[test]
fn report_and_host_function_subscriptions_are_separate() {
    let s = setup();
    // SAFETY: a live stream.
    unsafe {
        assert_eq!(aclrtSubscribeReport(me(), s), ACL_SUCCESS);
        // The thread subscribed for callbacks is not one for host functions.
        assert_eq!(aclrtProcessHostFunc(10), ACL_ERROR_INVALID_PARAM);
        assert!(last_message().contains("aclrtSubscribeHostFunc"));
        assert_eq!(aclrtSubscribeHostFunc(me(), s), ACL_SUCCESS);
        // Nothing posted: a timeout.
        assert_eq!(aclrtProcessHostFunc(10), ACL_ERROR_RT_REPORT_TIMEOUT);
        assert_eq!(aclrtUnSubscribeHostFunc(me(), s), ACL_SUCCESS);
        assert_eq!(aclrtUnSubscribeReport(me(), s), ACL_SUCCESS);
        assert_eq!(aclrtDestroyStream(s), ACL_SUCCESS);
    }
}

#[test]
fn bad_input_is_refused_with_a_message() {
    let _ = setup();
    for timeout in [0, -2] {
        assert_eq!(aclrtProcessHostFunc(timeout), ACL_ERROR_INVALID_PARAM);
        assert!(last_message().contains("timeout"));
    }
    // SAFETY: garbage handles are looked up, never dereferenced.
    unsafe {
        let garbage = 0x1234_5678usize as aclrtStream;
        assert_ne!(aclrtSubscribeHostFunc(me(), garbage), ACL_SUCCESS);
        assert!(!aclGetRecentErrMsg().is_null());
        assert_ne!(aclrtUnSubscribeHostFunc(me(), garbage), ACL_SUCCESS);
        assert!(!aclGetRecentErrMsg().is_null());
    }
}
