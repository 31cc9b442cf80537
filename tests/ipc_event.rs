//! IPC events between real processes: an `ACL_EVENT_IPC` event recorded in
//! one process and waited on by a stream of another orders the waiter's
//! later work after the recorder's work up to the record; either side may
//! record; made-up and withdrawn handles are refused; a killed recorder
//! frees the waits on its record. The other processes are this test binary
//! again, in the role `IPCEV_ROLE` names (see `child_role`).

mod common;

use aclalloc::base::error::*;
use aclalloc::ffi::cann::events::*;
use aclalloc::ffi::cann::ipc_events::*;
use aclalloc::ffi::cann::memory::*;
use aclalloc::ffi::cann::notify::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::types::*;
use common::child::{self, expect, init, say, wait_line};
use std::ptr::null_mut;

fn stream() -> aclrtStream {
    let mut s = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtCreateStream(&mut s) }, ACL_SUCCESS);
    s
}

fn sync(s: aclrtStream) {
    // SAFETY: a live stream.
    assert_eq!(unsafe { aclrtSynchronizeStream(s) }, ACL_SUCCESS);
}

fn ipc_event() -> aclrtEvent {
    let mut e = null_mut();
    // SAFETY: a valid out-pointer.
    let rc = unsafe { aclrtCreateEventExWithFlag(&mut e, ACL_EVENT_IPC) };
    assert_eq!(rc, ACL_SUCCESS);
    e
}

fn handle_of(e: aclrtEvent) -> Result<String, aclError> {
    let mut h = aclrtIpcEventHandle { reserved: [0; 64] };
    // SAFETY: a valid out-pointer.
    match unsafe { aclrtIpcGetEventHandle(e, &mut h) } {
        ACL_SUCCESS => Ok(h
            .reserved
            .iter()
            .map(|&b| format!("{:02x}", b as u8))
            .collect()),
        rc => Err(rc),
    }
}

fn open(hex: &str) -> Result<aclrtEvent, aclError> {
    let mut h = aclrtIpcEventHandle { reserved: [0; 64] };
    for (i, b) in h.reserved.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap() as _;
    }
    let mut e = null_mut();
    // SAFETY: a valid out-pointer.
    match unsafe { aclrtIpcOpenEventHandle(h, &mut e) } {
        ACL_SUCCESS => Ok(e),
        rc => {
            assert!(e.is_null(), "nothing written on failure");
            Err(rc)
        }
    }
}

fn complete(e: aclrtEvent) -> bool {
    let mut status = -1;
    // SAFETY: a valid out-pointer.
    assert_eq!(
        unsafe { aclrtQueryEventStatus(e, &mut status) },
        ACL_SUCCESS
    );
    status == ACL_EVENT_RECORDED_STATUS_COMPLETE
}

/// One device byte.
fn byte() -> *mut u8 {
    let mut p = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtMalloc(&mut p, 1, 0) }, ACL_SUCCESS);
    p.cast()
}

fn read(p: *mut u8) -> u8 {
    // SAFETY: device memory is host memory on the host runtime.
    unsafe { p.read_volatile() }
}

/// A memset of `p` to 7, queued on `s` after whatever is there.
fn set_later(p: *mut u8, s: aclrtStream) {
    // SAFETY: one byte of device memory.
    assert_eq!(
        unsafe { aclrtMemsetAsync(p.cast(), 1, 7, 1, s) },
        ACL_SUCCESS
    );
}

/// A stream held by a notify wait until `release` is called.
struct Held {
    stream: aclrtStream,
    notify: aclrtNotify,
}

impl Held {
    fn new() -> Self {
        let stream = stream();
        let mut notify = null_mut();
        // SAFETY: a valid out-pointer; live handles.
        unsafe {
            assert_eq!(aclrtCreateNotify(&mut notify, 0), ACL_SUCCESS);
            assert_eq!(aclrtWaitAndResetNotify(notify, stream, 0), ACL_SUCCESS);
        }
        Held { stream, notify }
    }

    fn release(&self) {
        // SAFETY: live handles.
        assert_eq!(
            unsafe { aclrtRecordNotify(self.notify, stream()) },
            ACL_SUCCESS
        );
    }
}

/// The roles of the child processes; in the parent test run it does nothing.
#[test]
#[ignore = "the entry of the child processes the other tests start"]
fn child_role() {
    let Some((role, arg)) = child::role("IPCEV") else {
        return;
    };
    let _serial = init();
    match role.as_str() {
        // Opens the handle; its stream waits on the event, then sets a byte;
        // reports the byte before and after the parent's record has run;
        // then records the event itself.
        "waiter" => {
            let e = match open(&arg) {
                Ok(e) => e,
                Err(rc) => {
                    println!("REFUSED {rc}");
                    return;
                }
            };
            let s = stream();
            let p = byte();
            // SAFETY: live handles.
            assert_eq!(unsafe { aclrtStreamWaitEvent(s, e) }, ACL_SUCCESS);
            set_later(p, s);
            println!("QUEUED {}", u8::from(complete(e)));
            assert_eq!(wait_line(), "check");
            std::thread::sleep(std::time::Duration::from_millis(50));
            println!("BEFORE {}", read(p));
            assert_eq!(wait_line(), "sync");
            sync(s);
            println!("AFTER {} {}", read(p), u8::from(complete(e)));
            // What an opened event refuses, as a created IPC event does.
            let mut stamp = 0;
            // SAFETY: live handles, valid out-pointers.
            unsafe {
                assert_eq!(aclrtResetEvent(e, s), ACL_ERROR_INVALID_PARAM);
                assert_eq!(
                    aclrtEventGetTimestamp(e, &mut stamp),
                    ACL_ERROR_INVALID_PARAM
                );
            }
            assert_eq!(handle_of(e), Err(ACL_ERROR_INVALID_PARAM));
            // This side records now; the parent waits for it.
            let held = Held::new();
            // SAFETY: live handles.
            assert_eq!(unsafe { aclrtRecordEvent(e, held.stream) }, ACL_SUCCESS);
            println!("RECORDED 1");
            assert_eq!(wait_line(), "release");
            held.release();
            sync(held.stream);
            // SAFETY: a live event, destroyed once.
            unsafe {
                assert_eq!(aclrtSynchronizeEvent(e), ACL_SUCCESS);
                assert_eq!(aclrtDestroyEvent(e), ACL_SUCCESS);
            }
            println!("DONE 1");
        }
        // Creates an IPC event, records it behind a wait that never ends,
        // and waits to be killed.
        "recorder" => {
            let e = ipc_event();
            let held = Held::new();
            // SAFETY: live handles.
            assert_eq!(unsafe { aclrtRecordEvent(e, held.stream) }, ACL_SUCCESS);
            println!("HANDLE {}", handle_of(e).unwrap());
            wait_line();
        }
        other => panic!("unknown role {other}"),
    }
}

#[test]
fn a_record_here_orders_a_waiting_stream_of_another_process_and_back() {
    let _serial = init();
    let e = ipc_event();
    let held = Held::new();
    // SAFETY: live handles.
    assert_eq!(unsafe { aclrtRecordEvent(e, held.stream) }, ACL_SUCCESS);
    let handle = handle_of(e).unwrap();
    assert_eq!(handle_of(e).unwrap(), handle, "one handle per event");
    let (mut child, mut out) = child::spawn("IPCEV", "waiter", &handle);
    assert_eq!(expect(&mut out, "QUEUED"), "0", "the record has not run");
    say(&mut child, "check");
    assert_eq!(
        expect(&mut out, "BEFORE"),
        "0",
        "the waiter's stream is held"
    );
    assert!(!complete(e));
    held.release();
    sync(held.stream);
    assert!(complete(e));
    say(&mut child, "sync");
    assert_eq!(expect(&mut out, "AFTER"), "7 1");
    // The child's record, behind its own held stream, orders this side.
    assert_eq!(expect(&mut out, "RECORDED"), "1");
    assert!(!complete(e), "the child's record has not run");
    let waiter = stream();
    let p = byte();
    // SAFETY: live handles.
    assert_eq!(unsafe { aclrtStreamWaitEvent(waiter, e) }, ACL_SUCCESS);
    set_later(p, waiter);
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(read(p), 0, "held by the child's record");
    say(&mut child, "release");
    sync(waiter);
    assert_eq!(read(p), 7);
    assert!(complete(e));
    assert_eq!(expect(&mut out, "DONE"), "1");
    assert!(child.wait().unwrap().success());
    // SAFETY: a live event, destroyed once; then refused.
    unsafe {
        assert_eq!(aclrtSynchronizeEvent(e), ACL_SUCCESS);
        assert_eq!(aclrtDestroyEvent(e), ACL_SUCCESS);
        aclrtFree(p.cast());
    }
    let (mut child, mut out) = child::spawn("IPCEV", "waiter", &handle);
    assert_eq!(
        expect(&mut out, "REFUSED"),
        ACL_ERROR_INVALID_PARAM.to_string(),
        "destroyed with its export"
    );
    assert!(child.wait().unwrap().success());
}

#[test]
fn made_up_handles_and_events_without_the_flag_are_refused() {
    let _serial = init();
    let made_up = format!("{}{}", hex(b"aclaIPCE"), "ab".repeat(8) + &"00".repeat(48));
    assert_eq!(open(&made_up).unwrap_err(), ACL_ERROR_INVALID_PARAM);
    assert_eq!(
        open(&"00".repeat(64)).unwrap_err(),
        ACL_ERROR_INVALID_PARAM,
        "zeroes"
    );
    let mut plain = null_mut();
    // SAFETY: valid out-pointers; bad flags and NULL are refused.
    unsafe {
        assert_eq!(aclrtCreateEventWithFlag(&mut plain, 0), ACL_SUCCESS);
        assert_eq!(handle_of(plain), Err(ACL_ERROR_INVALID_PARAM));
        let mut e = null_mut();
        assert_eq!(
            aclrtCreateEventExWithFlag(&mut e, ACL_EVENT_IPC | ACL_EVENT_SYNC),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(e.is_null());
        let ipc = ipc_event();
        assert_eq!(
            aclrtIpcGetEventHandle(ipc, null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        let h = aclrtIpcEventHandle { reserved: [0; 64] };
        assert_eq!(
            aclrtIpcOpenEventHandle(h, null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        let mut status = 0;
        assert_eq!(
            aclrtQueryEventWaitStatus(ipc, &mut status),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(complete(ipc), "never recorded");
        assert_eq!(aclrtDestroyEvent(ipc), ACL_SUCCESS);
        assert_eq!(handle_of(ipc), Err(ACL_ERROR_INVALID_PARAM));
        assert_eq!(aclrtDestroyEvent(plain), ACL_SUCCESS);
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_killed_recorder_frees_the_waits_on_its_record() {
    let _serial = init();
    let (mut recorder, mut out) = child::spawn("IPCEV", "recorder", "");
    let handle = expect(&mut out, "HANDLE");
    let e = open(&handle).unwrap();
    assert!(!complete(e));
    let (s, p) = (stream(), byte());
    // SAFETY: live handles.
    assert_eq!(unsafe { aclrtStreamWaitEvent(s, e) }, ACL_SUCCESS);
    set_later(p, s);
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(read(p), 0);
    recorder.kill().unwrap();
    recorder.wait().unwrap();
    sync(s);
    assert_eq!(read(p), 7, "the record will never run: the wait is over");
    assert!(complete(e));
    assert_eq!(
        open(&handle).unwrap_err(),
        ACL_ERROR_INVALID_PARAM,
        "its process is gone"
    );
    // The opened event still works in this process.
    // SAFETY: live handles.
    unsafe {
        assert_eq!(aclrtRecordEvent(e, s), ACL_SUCCESS);
        assert_eq!(aclrtSynchronizeEvent(e), ACL_SUCCESS);
        assert_eq!(aclrtDestroyEvent(e), ACL_SUCCESS);
        aclrtFree(p.cast());
    }
}
