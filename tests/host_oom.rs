//! Host out-of-memory on the create, register and grow paths: each case
//! runs in a child process of this test binary whose address space is capped
//! (RLIMIT_AS) a little above what it maps at the start, then creates or
//! registers until the host has no memory left. The failing call must return
//! its error (NULL for a handle), with a message naming what could not be
//! allocated, and everything made before it must keep working. Before these
//! paths were fallible, each case ended with an abort ("memory allocation of
//! N bytes failed").

mod common;

use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::errmsg::aclGetRecentErrMsg;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::types::*;
use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
use aclalloc::ffi::ext::pool::lifecycle::*;
use aclalloc::ffi::ext::pool::*;
use std::ffi::{c_void, CStr};
use std::process::Command;

const OK: aclError = 0;
const BAD_ALLOC: aclError = 200_000;
/// The child's flag: the name of the case it runs.
const CHILD: &str = "ACLALLOC_TEST_OOM_CASE";
/// More than any case makes before the host runs out under the cap.
const MAX_MADE: usize = 4 << 20;
/// Address space the child may map beyond what it maps when the cap is set.
const HEADROOM: usize = 48 << 20;

/// In the parent: runs `case` in a child and checks it reported success.
/// In the child (`true`): the caller runs the case.
fn in_child(case: &str) -> bool {
    if std::env::var(CHILD).as_deref() == Ok(case) {
        return true;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([case, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, case)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(&format!("{case}: ok")),
        "{case}: {}\n{stdout}\n{stderr}",
        out.status
    );
    print!("{stdout}");
    false
}

fn mapped_bytes() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmSize:")).unwrap();
    let kib: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib << 10
}

/// Caps the address space at `bytes` (the soft limit: it can be raised again).
fn cap_address_space(bytes: libc::rlim_t) {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: a valid rlimit.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) }, 0);
}

fn cap() {
    cap_address_space((mapped_bytes() + HEADROOM) as libc::rlim_t);
}

fn uncap() {
    cap_address_space(libc::RLIM_INFINITY);
}

fn message() -> String {
    let text = aclGetRecentErrMsg();
    assert!(!text.is_null(), "no message");
    // SAFETY: a NUL-terminated string valid until this thread's next call.
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
}

/// Checks the recent messages: `function` out of host memory, naming what.
fn says_out_of_memory(function: &str) -> String {
    let text = message();
    let said = format!("{function} failed. Out of host memory: ");
    let line = text.lines().find(|l| l.starts_with(&said));
    line.unwrap_or_else(|| panic!("{text}")).to_string()
}

/// `aclrtAllocatorCreateDesc` (a handle shell and the handle table's growth):
/// NULL, then the descriptors made keep working.
#[test]
fn descriptors() {
    if !in_child("descriptors") {
        return;
    }
    let mut made = Vec::with_capacity(MAX_MADE);
    cap();
    loop {
        let desc = aclrtAllocatorCreateDesc();
        if desc.is_null() {
            break;
        }
        made.push(desc);
        assert!(made.len() < MAX_MADE, "the host never ran out");
    }
    // Still under the cap: what exists works, and a destroyed descriptor's
    // room serves a new one.
    common::complete_with_trivial_functions(made[0]);
    assert_eq!(aclrtAllocatorDestroyDesc(made.pop().unwrap()), OK);
    let again = aclrtAllocatorCreateDesc();
    assert!(!again.is_null(), "the room a destroy freed serves again");
    made.push(again);
    assert!(aclrtAllocatorCreateDesc().is_null());
    uncap();
    let text = says_out_of_memory("aclrtAllocatorCreateDesc");
    let mut stream = 0u64;
    let stream = &mut stream as *mut u64 as aclrtStream;
    assert_eq!(aclrtAllocatorRegister(stream, made[0]), OK);
    assert_eq!(common::registered_descriptor(stream), Some(made[0]));
    assert_eq!(aclrtAllocatorUnregister(stream), OK);
    for desc in made.iter().rev() {
        assert_eq!(aclrtAllocatorDestroyDesc(*desc), OK);
    }
    println!("descriptors: ok ({} made; {text})", made.len());
}

/// `aclrtAllocatorRegister` on ever more streams (the registration table's
/// growth): `ACL_ERROR_BAD_ALLOC`, then every registration made is still
/// found and the table still takes a registration in the room it has.
#[test]
fn registrations() {
    if !in_child("registrations") {
        return;
    }
    let desc = aclrtAllocatorCreateDesc();
    common::complete_with_trivial_functions(desc);
    // Streams of a real runtime, as far as the registry can tell.
    let stream = |i: usize| ((i + 1) * 64) as aclrtStream;
    assert_eq!(aclrtAllocatorRegister(stream(0), desc), OK);
    cap();
    let mut count = 1;
    let rc = loop {
        let rc = aclrtAllocatorRegister(stream(count), desc);
        if rc != OK {
            break rc;
        }
        count += 1;
        assert!(count < MAX_MADE, "the host never ran out");
    };
    assert_eq!(rc, BAD_ALLOC);
    assert_eq!(common::registered_descriptor(stream(count)), None);
    assert_eq!(common::registered_descriptor(stream(0)), Some(desc));
    assert_eq!(common::registered_descriptor(stream(count - 1)), Some(desc));
    assert_eq!(aclrtAllocatorUnregister(stream(count - 1)), OK);
    assert_eq!(aclrtAllocatorRegister(stream(count - 1), desc), OK);
    uncap();
    let text = says_out_of_memory("aclrtAllocatorRegister");
    for i in 0..count {
        assert_eq!(
            common::registered_descriptor(stream(i)),
            Some(desc),
            "stream {i}"
        );
        assert_eq!(aclrtAllocatorUnregister(stream(i)), OK);
    }
    println!("registrations: ok ({count} made; {text})");
}

/// `aclallocPoolCreate` (the pool, its handle, its descriptor):
/// `ACL_ERROR_BAD_ALLOC` and nothing written, then the pools made serve.
#[test]
fn pools() {
    if !in_child("pools") {
        return;
    }
    assert_eq!(aclrtSetDevice(0), OK);
    let mut made = Vec::with_capacity(MAX_MADE);
    cap();
    let rc = loop {
        let (mut pool, mut desc) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: valid out-pointers; NULL asks for the default configuration.
        let rc = unsafe { aclallocPoolCreate(std::ptr::null(), &mut pool, &mut desc) };
        if rc != OK {
            assert!(pool.is_null() && desc.is_null(), "nothing written");
            break rc;
        }
        made.push((pool, desc));
        assert!(made.len() < MAX_MADE, "the host never ran out");
    };
    assert_eq!(rc, BAD_ALLOC);
    uncap();
    let text = says_out_of_memory("aclallocPoolCreate");
    for &(pool, desc) in [made[0], made[made.len() - 1]].iter() {
        let block = aclallocPoolAlloc(pool, 1 << 20);
        assert!(!block.is_null());
        aclallocPoolFree(pool, block);
        assert_eq!(aclallocPoolDestroy(pool), OK);
        assert_eq!(aclrtAllocatorDestroyDesc(desc), OK);
    }
    println!("pools: ok ({} made; {text})", made.len());
}

unsafe extern "C" fn count_run(_: *mut c_void, _: usize, ran: *mut c_void) {
    // SAFETY: the test passes an AtomicUsize that outlives the stream's work.
    unsafe { &*(ran as *const std::sync::atomic::AtomicUsize) }
        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

/// `aclrtCreateStream` (its queue and worker thread): `ACL_ERROR_BAD_ALLOC`,
/// then the streams made run work.
#[test]
fn streams() {
    if !in_child("streams") {
        return;
    }
    assert_eq!(aclrtSetDevice(0), OK);
    let mut made = Vec::with_capacity(MAX_MADE);
    cap();
    let rc = loop {
        let mut stream = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        let rc = unsafe { aclrtCreateStream(&mut stream) };
        if rc != OK {
            break rc;
        }
        made.push(stream);
        assert!(made.len() < MAX_MADE, "the host never ran out");
    };
    assert_eq!(rc, BAD_ALLOC);
    uncap();
    let text = says_out_of_memory("aclrtCreateStream");
    let ran = std::sync::atomic::AtomicUsize::new(0);
    for &stream in &made {
        // SAFETY: a kernel with the argument it expects, which outlives the work.
        unsafe {
            let data = &ran as *const _ as *mut c_void;
            assert_eq!(aclallocLaunchKernel(stream, 0, Some(count_run), data), OK);
            assert_eq!(aclrtSynchronizeStream(stream), OK);
            assert_eq!(aclrtDestroyStream(stream), OK);
        }
    }
    assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), made.len());
    println!("streams: ok ({} made; {text})", made.len());
}
