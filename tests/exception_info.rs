//! Task ids and exception callbacks through the C ABI:
//! `aclrtGetThreadLastTaskId` gives each thread its last task's id (ids
//! increase and are distinct); a task that fails calls the exception
//! callback once, in the synchronize that reports it, with its task id,
//! stream, thread, device and error code; the getters refuse NULL with a
//! message; an unset callback is not called.

use aclalloc::base::error::*;
use aclalloc::ffi::cann::errmsg::aclGetRecentErrMsg;
use aclalloc::ffi::cann::exceptions::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::stream_info::*;
use aclalloc::ffi::cann::types::*;
use aclalloc::ffi::ext::task_failure::aclallocFailCurrentTask;
use std::ffi::{c_void, CStr};
use std::ptr::{null, null_mut};
use std::sync::Mutex;

/// The callbacks are process-wide: the tests that set them take turns.
static TURN: Mutex<()> = Mutex::new(());

fn setup() -> aclrtStream {
    // SAFETY: a NULL configuration path is allowed.
    let rc = unsafe { aclInit(null()) };
    assert!(rc == ACL_SUCCESS || rc == ACL_ERROR_REPEAT_INITIALIZE);
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    let mut s = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtCreateStream(&mut s) }, ACL_SUCCESS);
    s
}

fn last_task_id() -> u32 {
    let mut id = 0;
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtGetThreadLastTaskId(&mut id) }, ACL_SUCCESS);
    id
}

fn last_message() -> String {
    let p = aclGetRecentErrMsg();
    assert!(!p.is_null(), "a failure leaves a message");
    // SAFETY: a NUL-terminated string valid until the next read.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

unsafe extern "C" fn nothing(_: *mut c_void) {}

unsafe extern "C" fn fail(_: *mut c_void) {
    assert_eq!(
        aclallocFailCurrentTask(ACL_ERROR_RT_VECTOR_CORE_EXCEPTION),
        ACL_SUCCESS
    );
}

fn launch(s: aclrtStream, f: unsafe extern "C" fn(*mut c_void)) {
    // SAFETY: a live stream; `f` ignores its argument.
    assert_eq!(
        unsafe { aclrtLaunchHostFunc(s, Some(f), null_mut()) },
        ACL_SUCCESS
    );
}

/// (task id, stream id, thread id, device id, error code) per call.
static SEEN: Mutex<Vec<[u32; 5]>> = Mutex::new(Vec::new());

unsafe extern "C" fn record(info: *mut aclrtExceptionInfo) {
    // SAFETY: the information the runtime gave the callback.
    let fields = unsafe {
        [
            aclrtGetTaskIdFromExceptionInfo(info),
            aclrtGetStreamIdFromExceptionInfo(info),
            aclrtGetThreadIdFromExceptionInfo(info),
            aclrtGetDeviceIdFromExceptionInfo(info),
            aclrtGetErrorCodeFromExceptionInfo(info),
        ]
    };
    SEEN.lock().unwrap().push(fields);
}

fn gettid() -> u32 {
    // SAFETY: no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

#[test]
fn task_ids_increase_per_thread_and_are_distinct() {
    let s = setup();
    let mut ids = Vec::new();
    for _ in 0..4 {
        launch(s, nothing);
        ids.push(last_task_id());
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let handle = s as usize;
    let theirs = std::thread::scope(|scope| {
        scope
            .spawn(move || {
                let s = handle as aclrtStream;
                assert_eq!(last_task_id(), 0, "a thread with no task yet");
                let mut ids = Vec::new();
                for _ in 0..4 {
                    launch(s, nothing);
                    ids.push(last_task_id());
                }
                ids
            })
            .join()
            .unwrap()
    });
    assert!(theirs.windows(2).all(|w| w[0] < w[1]), "{theirs:?}");
    assert!(
        theirs.iter().all(|id| !ids.contains(id)),
        "{ids:?} {theirs:?}"
    );
    // The other thread's tasks leave this thread's last id alone.
    assert_eq!(last_task_id(), ids[3]);
    // SAFETY: a live stream.
    unsafe {
        assert_eq!(aclrtSynchronizeStream(s), ACL_SUCCESS);
        assert_eq!(aclrtDestroyStream(s), ACL_SUCCESS);
    }
}

#[test]
fn a_failed_task_calls_the_callback_once_with_its_information() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let s = setup();
    SEEN.lock().unwrap().clear();
    assert_eq!(aclrtSetExceptionInfoCallback(Some(record)), ACL_SUCCESS);
    launch(s, nothing);
    launch(s, fail);
    let failed = last_task_id();
    launch(s, nothing);
    // SAFETY: a live stream.
    let rc = unsafe { aclrtSynchronizeStream(s) };
    assert_eq!(rc, ACL_ERROR_RT_VECTOR_CORE_EXCEPTION);
    let mut stream_id = 0;
    // SAFETY: a live stream, a valid out-pointer.
    assert_eq!(unsafe { aclrtStreamGetId(s, &mut stream_id) }, ACL_SUCCESS);
    let mut device = -1;
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtGetDevice(&mut device) }, ACL_SUCCESS);
    assert_eq!(
        *SEEN.lock().unwrap(),
        vec![[
            failed,
            stream_id as u32,
            gettid(),
            device as u32,
            ACL_ERROR_RT_VECTOR_CORE_EXCEPTION as u32
        ]],
        "called once, before the synchronize returned"
    );
    // Reported once: the next synchronize succeeds and calls nothing.
    // SAFETY: a live stream.
    unsafe {
        assert_eq!(aclrtSynchronizeStream(s), ACL_SUCCESS);
    }
    assert_eq!(SEEN.lock().unwrap().len(), 1);
    assert_eq!(aclrtSetExceptionInfoCallback(None), ACL_SUCCESS);
    // SAFETY: a live stream.
    unsafe { assert_eq!(aclrtDestroyStream(s), ACL_SUCCESS) };
}

#[test]
fn an_unset_or_unregistered_callback_is_not_called() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let s = setup();
    SEEN.lock().unwrap().clear();
    assert_eq!(aclrtSetExceptionInfoCallback(Some(record)), ACL_SUCCESS);
    assert_eq!(aclrtSetExceptionInfoCallback(None), ACL_SUCCESS);
    assert_eq!(
        aclrtExceptionInfoCallbackRegister(Some(record)),
        ACL_SUCCESS
    );
    assert_eq!(
        aclrtExceptionInfoCallbackRegister(Some(record)),
        ACL_SUCCESS
    );
    launch(s, fail);
    // SAFETY: a live stream.
    let rc = unsafe { aclrtSynchronizeStream(s) };
    assert_eq!(rc, ACL_ERROR_RT_VECTOR_CORE_EXCEPTION);
    assert_eq!(
        SEEN.lock().unwrap().len(),
        1,
        "registered twice, called once"
    );
    assert_eq!(
        aclrtExceptionInfoCallbackUnregister(Some(record)),
        ACL_SUCCESS
    );
    launch(s, fail);
    // SAFETY: a live stream.
    let rc = unsafe { aclrtSynchronizeStream(s) };
    assert_eq!(rc, ACL_ERROR_RT_VECTOR_CORE_EXCEPTION);
    assert_eq!(
        SEEN.lock().unwrap().len(),
        1,
        "not called once unregistered"
    );
    // SAFETY: a live stream.
    unsafe { assert_eq!(aclrtDestroyStream(s), ACL_SUCCESS) };
}

#[test]
fn getters_refuse_null_with_a_message() {
    // SAFETY: NULL is what is being refused.
    unsafe {
        for getter in [
            aclrtGetTaskIdFromExceptionInfo,
            aclrtGetStreamIdFromExceptionInfo,
            aclrtGetThreadIdFromExceptionInfo,
            aclrtGetDeviceIdFromExceptionInfo,
            aclrtGetErrorCodeFromExceptionInfo,
        ] {
            assert_eq!(getter(null()), 0xFFFF_FFFF);
            assert!(last_message().contains("info"), "{}", last_message());
        }
        let mut args = null_mut();
        let mut len = 0;
        assert_eq!(
            aclrtGetArgsFromExceptionInfo(null(), &mut args, &mut len),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(last_message().contains("info"), "{}", last_message());
        let mut func = null_mut();
        assert_eq!(
            aclrtGetFuncHandleFromExceptionInfo(null(), &mut func),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(last_message().contains("info"), "{}", last_message());
        assert_eq!(
            aclrtGetThreadLastTaskId(null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(last_message().contains("taskId"), "{}", last_message());
    }
    assert_eq!(
        aclrtExceptionInfoCallbackRegister(None),
        ACL_ERROR_INVALID_PARAM
    );
    assert!(last_message().contains("callback"), "{}", last_message());
}
