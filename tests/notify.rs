//! Notifies: a wait holds its stream at that point until a record (on
//! another stream, or in another process through a key) has run, and
//! clears the notify. The other process is this test binary again, in the
//! role `NOTIFY_ROLE` names (see `child_role`).

mod common;

use aclalloc::base::error::*;
use aclalloc::ffi::cann::memory::*;
use aclalloc::ffi::cann::notify::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::types::*;
use common::child::{self, init};
use std::ffi::{c_char, CStr, CString};
use std::io::Read;
use std::ptr::null_mut;

fn stream() -> aclrtStream {
    let mut s = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtCreateStream(&mut s) }, ACL_SUCCESS);
    s
}

fn notify() -> aclrtNotify {
    let mut n = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtCreateNotify(&mut n, 0) }, ACL_SUCCESS);
    n
}

/// One device byte, and a memset of it queued on `s` after whatever is there.
fn byte() -> *mut u8 {
    let mut p = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtMalloc(&mut p, 1, 0) }, ACL_SUCCESS);
    p.cast()
}

fn set_later(p: *mut u8, s: aclrtStream) {
    // SAFETY: one byte of device memory.
    assert_eq!(
        unsafe { aclrtMemsetAsync(p.cast(), 1, 7, 1, s) },
        ACL_SUCCESS
    );
}

fn sync(s: aclrtStream) {
    // SAFETY: a live stream.
    assert_eq!(unsafe { aclrtSynchronizeStream(s) }, ACL_SUCCESS);
}

fn read(p: *mut u8) -> u8 {
    // SAFETY: device memory is host memory on the host runtime.
    unsafe { p.read_volatile() }
}

fn key_of(n: aclrtNotify, flags: u64) -> String {
    let mut key = [0 as c_char; 65];
    // SAFETY: a 65-byte buffer.
    let rc = unsafe { aclrtNotifyGetExportKey(n, key.as_mut_ptr(), key.len(), flags) };
    assert_eq!(rc, ACL_SUCCESS);
    // SAFETY: NUL-terminated by the call.
    unsafe { CStr::from_ptr(key.as_ptr()) }
        .to_str()
        .unwrap()
        .to_owned()
}

/// The child process: imports the key, records on its own stream.
#[test]
#[ignore = "the entry of the child processes the other tests start"]
fn child_role() {
    let Some((_, key)) = child::role("NOTIFY") else {
        return;
    };
    let _serial = init();
    let key = CString::new(key).unwrap();
    let mut n = null_mut();
    // SAFETY: a valid out-pointer and key.
    match unsafe { aclrtNotifyImportByKey(&mut n, key.as_ptr(), 0) } {
        ACL_SUCCESS => {
            let s = stream();
            // SAFETY: live handles.
            assert_eq!(unsafe { aclrtRecordNotify(n, s) }, ACL_SUCCESS);
            sync(s);
            println!("RECORDED 1");
        }
        rc => println!("REFUSED {rc}"),
    }
}

fn run_child(key: &str) -> String {
    let (mut c, mut out) = child::spawn("NOTIFY", "recorder", key);
    let mut text = String::new();
    out.read_to_string(&mut text).unwrap();
    assert!(c.wait().unwrap().success());
    text.lines()
        .find_map(|l| {
            ["RECORDED ", "REFUSED "]
                .iter()
                .find_map(|t| l.find(t).map(|at| l[at..].trim().to_owned()))
        })
        .unwrap_or(text)
}

#[test]
fn a_wait_holds_its_stream_until_a_record_on_another_stream() {
    let _serial = init();
    let (waiter, recorder) = (stream(), stream());
    let n = notify();
    let p = byte();
    // SAFETY: live handles.
    unsafe {
        assert_eq!(aclrtWaitAndResetNotify(n, waiter, 0), ACL_SUCCESS);
        set_later(p, waiter);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(read(p), 0, "the memset waits behind the notify");
        assert_eq!(aclrtRecordNotify(n, recorder), ACL_SUCCESS);
        sync(waiter);
        assert_eq!(read(p), 7);
        // Reset by the wait: a second wait times out (1 s) and the stream goes on.
        assert_eq!(aclrtWaitAndResetNotify(n, waiter, 1), ACL_SUCCESS);
        sync(waiter);
        let mut id = u32::MAX;
        assert_eq!(aclrtGetNotifyId(n, &mut id), ACL_SUCCESS);
        assert_ne!(id, u32::MAX);
        assert_eq!(aclrtDestroyNotify(n), ACL_SUCCESS);
        assert_eq!(aclrtDestroyNotify(n), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclrtRecordNotify(n, recorder), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclrtCreateNotify(null_mut(), 0), ACL_ERROR_INVALID_PARAM);
        let mut m = null_mut();
        assert_eq!(aclrtCreateNotify(&mut m, 2), ACL_ERROR_INVALID_PARAM);
        assert!(m.is_null());
        assert_eq!(
            aclrtGetNotifyId(null_mut(), &mut id),
            ACL_ERROR_INVALID_PARAM
        );
        aclrtFree(p.cast());
    }
}

#[test]
fn a_record_in_another_process_releases_the_wait_here() {
    let _serial = init();
    let waiter = stream();
    let n = notify();
    let p = byte();
    let key = key_of(n, ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION);
    assert_eq!(key_of(n, 0), key, "one key per notify");
    // SAFETY: live handles.
    assert_eq!(
        unsafe { aclrtWaitAndResetNotify(n, waiter, 0) },
        ACL_SUCCESS
    );
    set_later(p, waiter);
    assert_eq!(read(p), 0);
    assert_eq!(run_child(&key), "RECORDED 1");
    sync(waiter);
    assert_eq!(read(p), 7);
    // SAFETY: live handle; device memory.
    unsafe {
        assert_eq!(aclrtDestroyNotify(n), ACL_SUCCESS);
        aclrtFree(p.cast());
    }
    assert_eq!(
        run_child(&key),
        format!("REFUSED {ACL_ERROR_INVALID_PARAM}"),
        "destroyed with its export"
    );
}

#[test]
fn pid_validation_refuses_a_process_not_whitelisted() {
    let _serial = init();
    let n = notify();
    let key = key_of(n, ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT);
    assert_eq!(
        run_child(&key),
        format!("REFUSED {ACL_ERROR_RT_NO_PERMISSION}")
    );
    assert_eq!(
        run_child("aclalloc-0000040000000001"),
        format!("REFUSED {ACL_ERROR_INVALID_PARAM}")
    );
    // SAFETY: bad arguments are refused.
    unsafe {
        assert_eq!(
            aclrtNotifySetImportPid(n, null_mut(), 1),
            ACL_ERROR_INVALID_PARAM
        );
        let pid = 1;
        assert_eq!(
            aclrtNotifySetImportPid(n, &pid as *const i32 as *mut i32, 1),
            ACL_SUCCESS
        );
        let mut key = [0 as c_char; 8];
        assert_eq!(
            aclrtNotifyGetExportKey(n, key.as_mut_ptr(), key.len(), 0),
            ACL_ERROR_INVALID_PARAM,
            "too short"
        );
        assert_eq!(aclrtDestroyNotify(n), ACL_SUCCESS);
    }
}

#[test]
fn a_batch_reset_clears_set_notifies_and_inter_server_whitelists_are_not_supported() {
    let _serial = init();
    let (a, b) = (notify(), notify());
    let (s, waiter) = (stream(), stream());
    let p = byte();
    // SAFETY: live handles; bad arguments are refused.
    unsafe {
        assert_eq!(aclrtRecordNotify(a, s), ACL_SUCCESS);
        sync(s);
        let mut both = [a, b];
        assert_eq!(aclrtNotifyBatchReset(both.as_mut_ptr(), 2), ACL_SUCCESS);
        // Reset: a wait now times out (1 s) and the memset after it runs.
        assert_eq!(aclrtWaitAndResetNotify(a, waiter, 1), ACL_SUCCESS);
        set_later(p, waiter);
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_eq!(read(p), 0, "held: the record was cleared");
        sync(waiter);
        assert_eq!(
            aclrtNotifyBatchReset(null_mut(), 1),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtNotifyBatchReset(both.as_mut_ptr(), 0),
            ACL_ERROR_INVALID_PARAM
        );
        let mut pid = 1;
        let mut server = aclalloc::ffi::cann::ipc_memory::aclrtServerPid {
            sdid: 0,
            pid: &mut pid,
            num: 1,
        };
        assert_eq!(
            aclrtNotifySetImportPidInterServer(a, &mut server, 1),
            ACL_ERROR_API_NOT_SUPPORT
        );
        assert_eq!(
            aclrtNotifySetImportPidInterServer(a, null_mut(), 1),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(aclrtDestroyNotify(b), ACL_SUCCESS);
        assert_eq!(
            aclrtNotifyBatchReset(both.as_mut_ptr(), 2),
            ACL_ERROR_INVALID_PARAM,
            "b is destroyed"
        );
        assert_eq!(
            aclrtNotifySetImportPidInterServer(b, &mut server, 1),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(aclrtDestroyNotify(a), ACL_SUCCESS);
        aclrtFree(p.cast());
    }
}
