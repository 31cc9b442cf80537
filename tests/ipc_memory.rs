//! IPC memory between real processes: `aclrtMalloc` memory exported by key,
//! imported by another process as device memory of its own, the pid
//! whitelist, refused keys, and a killed exporter. The other processes are
//! this test binary again, in the role `IPC_ROLE` names (see `child_role`).

mod common;

use aclalloc::base::error::*;
use aclalloc::ffi::cann::ipc_memory::*;
use aclalloc::ffi::cann::memory::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::sharing::aclrtDeviceGetBareTgid;
use aclalloc::ffi::cann::types::*;
use common::child::{self, expect, init, say, wait_line};
use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr::null_mut;

const SIZE: usize = 3 * 4096 + 100;

fn malloc(size: usize) -> *mut u64 {
    let mut p = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtMalloc(&mut p, size, 0) }, ACL_SUCCESS);
    p.cast()
}

fn export(p: *mut c_void, flags: u64) -> Result<String, aclError> {
    let mut key = [0 as c_char; 65];
    // SAFETY: a 65-byte key buffer.
    match unsafe { aclrtIpcMemGetExportKey(p, 8, key.as_mut_ptr(), key.len(), flags) } {
        ACL_SUCCESS => {
            // SAFETY: the call wrote a NUL-terminated key.
            Ok(unsafe { CStr::from_ptr(key.as_ptr()) }
                .to_str()
                .unwrap()
                .to_owned())
        }
        rc => Err(rc),
    }
}

fn import(key: &str) -> Result<*mut u64, aclError> {
    let key = CString::new(key).unwrap();
    let mut p = null_mut();
    // SAFETY: a valid out-pointer and key.
    match unsafe { aclrtIpcMemImportByKey(&mut p, key.as_ptr(), 0) } {
        ACL_SUCCESS => Ok(p.cast()),
        rc => Err(rc),
    }
}

fn close(key: &str) -> aclError {
    let key = CString::new(key).unwrap();
    // SAFETY: a valid key string.
    unsafe { aclrtIpcMemClose(key.as_ptr()) }
}

/// The roles of the child processes; in the parent test run it does nothing.
#[test]
#[ignore = "the entry of the child processes the other tests start"]
fn child_role() {
    let Some((role, arg)) = child::role("IPC") else {
        return;
    };
    let _serial = init();
    match role.as_str() {
        // Imports the key once told to; copies word 0 out with aclrtMemcpy,
        // writes word 1, closes.
        "importer" => {
            let mut pid = 0;
            // SAFETY: a valid out-pointer.
            assert_eq!(unsafe { aclrtDeviceGetBareTgid(&mut pid) }, ACL_SUCCESS);
            println!("PID {pid}");
            assert_eq!(wait_line(), "go");
            match import(&arg) {
                Ok(p) => {
                    let mut word = 0u64;
                    // SAFETY: 8 bytes of imported device memory to a host word.
                    let rc = unsafe {
                        aclrtMemcpy(
                            (&raw mut word).cast(),
                            8,
                            p.cast(),
                            8,
                            ACL_MEMCPY_DEVICE_TO_HOST,
                        )
                    };
                    assert_eq!(rc, ACL_SUCCESS, "imported memory is device memory here");
                    println!("READ {word}");
                    // SAFETY: inside the imported allocation.
                    unsafe { p.add(1).write_volatile(77) };
                    println!("WROTE 1");
                    wait_line();
                    assert_eq!(close(&arg), ACL_SUCCESS);
                    assert_ne!(close(&arg), ACL_SUCCESS, "closed once");
                }
                Err(rc) => println!("REFUSED {rc}"),
            }
        }
        // Exports memory holding 123 to anyone and waits to be killed.
        "exporter" => {
            let p = malloc(SIZE);
            // SAFETY: device memory is host memory on the host runtime.
            unsafe { p.write(123) };
            println!(
                "KEY {}",
                export(p.cast(), ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION).unwrap()
            );
            wait_line();
        }
        other => panic!("unknown role {other}"),
    }
}

#[test]
fn a_whitelisted_process_shares_the_memory_and_another_is_refused() {
    let _serial = init();
    let base = malloc(SIZE);
    // An export of a word inside: the key maps the whole allocation.
    // SAFETY: inside the allocation.
    let p = unsafe { base.add(512) };
    // SAFETY: as above.
    unsafe { p.write(123) };
    let key = export(p.cast(), ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT).unwrap();
    // SAFETY: the allocation keeps its contents and stays writable.
    assert_eq!(unsafe { p.read() }, 123);
    assert_eq!(
        export(p.cast(), 0).unwrap_err(),
        ACL_ERROR_INVALID_PARAM,
        "exported once"
    );

    let (mut allowed, mut allowed_out) = child::spawn("IPC", "importer", &key);
    let (mut other, mut other_out) = child::spawn("IPC", "importer", &key);
    let pid: i32 = expect(&mut allowed_out, "PID").parse().unwrap();
    expect(&mut other_out, "PID");
    let ckey = CString::new(key.clone()).unwrap();
    // SAFETY: a key string and one readable pid.
    let rc = unsafe { aclrtIpcMemSetImportPid(ckey.as_ptr(), &pid as *const i32 as *mut i32, 1) };
    assert_eq!(rc, ACL_SUCCESS);
    say(&mut allowed, "go");
    say(&mut other, "go");
    assert_eq!(expect(&mut allowed_out, "READ"), "123");
    expect(&mut allowed_out, "WROTE");
    // SAFETY: inside the allocation, written by the other process.
    assert_eq!(unsafe { p.add(1).read_volatile() }, 77);
    assert_eq!(
        expect(&mut other_out, "REFUSED"),
        ACL_ERROR_RT_NO_PERMISSION.to_string()
    );
    say(&mut allowed, "done");
    assert!(allowed.wait().unwrap().success());
    assert!(other.wait().unwrap().success());
    assert_eq!(close(&key), ACL_SUCCESS);
    assert_eq!(close(&key), ACL_ERROR_INVALID_PARAM, "closed already");
    // SAFETY: the allocation is still this process's until freed.
    assert_eq!(unsafe { p.read() }, 123);
    // SAFETY: memory from aclrtMalloc.
    assert_eq!(unsafe { aclrtFree(base.cast()) }, ACL_SUCCESS);
}

#[test]
fn made_up_and_closed_keys_are_refused() {
    let _serial = init();
    let p = malloc(64);
    let key = export(p.cast(), ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION).unwrap();
    assert!(key.len() < 65);
    let handle = u64::from_str_radix(key.strip_prefix("aclalloc-").unwrap(), 16).unwrap();
    let made_up = [
        format!("aclalloc-{:016x}", handle ^ 1),
        "aclalloc-0000000000000001".to_owned(),
        "not a key".to_owned(),
    ];
    for k in made_up {
        let (mut child, mut out) = child::spawn("IPC", "importer", &k);
        expect(&mut out, "PID");
        say(&mut child, "go");
        assert_eq!(
            expect(&mut out, "REFUSED"),
            ACL_ERROR_INVALID_PARAM.to_string(),
            "{k}"
        );
        assert!(child.wait().unwrap().success());
    }
    assert_eq!(close(&key), ACL_SUCCESS);
    let (mut child, mut out) = child::spawn("IPC", "importer", &key);
    expect(&mut out, "PID");
    say(&mut child, "go");
    assert_eq!(
        expect(&mut out, "REFUSED"),
        ACL_ERROR_INVALID_PARAM.to_string(),
        "closed"
    );
    assert!(child.wait().unwrap().success());
    let mut key_buf = [0 as c_char; 65];
    // SAFETY: bad arguments are refused before any write.
    unsafe {
        assert_eq!(
            aclrtIpcMemGetExportKey(p.cast(), 8, key_buf.as_mut_ptr(), 64, 0),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtIpcMemGetExportKey(p.cast(), 8, key_buf.as_mut_ptr(), 65, 2),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtIpcMemGetExportKey(p.cast(), 65, key_buf.as_mut_ptr(), 65, 0),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtIpcMemGetExportKey(p.cast(), 8, null_mut(), 65, 0),
            ACL_ERROR_INVALID_PARAM
        );
        let mut on_stack = 0u64;
        assert_eq!(
            aclrtIpcMemGetExportKey((&raw mut on_stack).cast(), 8, key_buf.as_mut_ptr(), 65, 0),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtIpcMemImportByKey(null_mut(), c"x".as_ptr(), 0),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(aclrtIpcMemClose(std::ptr::null()), ACL_ERROR_INVALID_PARAM);
        assert_eq!(
            aclrtIpcMemSetImportPid(c"x".as_ptr(), &mut 1, 1),
            ACL_ERROR_INVALID_PARAM
        );
    }
    assert_eq!(key_buf[0], 0, "nothing written on failure");
    // SAFETY: memory from aclrtMalloc.
    assert_eq!(unsafe { aclrtFree(p.cast()) }, ACL_SUCCESS);
}

#[test]
fn a_killed_exporter_leaves_the_importer_its_memory() {
    let _serial = init();
    let (mut exporter, mut out) = child::spawn("IPC", "exporter", "");
    let key = expect(&mut out, "KEY");
    let p = import(&key).unwrap();
    assert_eq!(
        import(&key).unwrap(),
        p,
        "a second import: the same address"
    );
    // SAFETY: imported memory.
    assert_eq!(unsafe { p.read_volatile() }, 123);
    exporter.kill().unwrap();
    exporter.wait().unwrap();
    // SAFETY: still mapped here.
    unsafe {
        p.add(2).write_volatile(9);
        assert_eq!((p.read_volatile(), p.add(2).read_volatile()), (123, 9));
    }
    let fds = std::fs::read_dir("/proc/self/fd").unwrap().count();
    assert_eq!(close(&key), ACL_SUCCESS);
    assert_eq!(
        std::fs::read_dir("/proc/self/fd").unwrap().count(),
        fds,
        "mapped until the last close"
    );
    assert_eq!(close(&key), ACL_SUCCESS);
    assert_eq!(close(&key), ACL_ERROR_INVALID_PARAM);
    let mut word = 0u64;
    // SAFETY: a copy from an address no longer mapped is refused, not made.
    let rc = unsafe {
        aclrtMemcpy(
            (&raw mut word).cast(),
            8,
            p.cast(),
            8,
            ACL_MEMCPY_DEVICE_TO_HOST,
        )
    };
    assert_eq!(rc, ACL_ERROR_INVALID_PARAM);
    assert_eq!(
        import(&key).unwrap_err(),
        ACL_ERROR_INVALID_PARAM,
        "its exporter is gone"
    );
}

#[test]
fn export_keeps_what_queued_work_wrote() {
    let _serial = init();
    let p = malloc(1 << 20);
    let mut s = null_mut();
    // SAFETY: valid out-pointer; device memory of the size given.
    unsafe {
        assert_eq!(aclrtCreateStream(&mut s), ACL_SUCCESS);
        assert_eq!(
            aclrtMemsetAsync(p.cast(), 1 << 20, 5, 1 << 20, s),
            ACL_SUCCESS
        );
    }
    let key = export(p.cast(), ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION).unwrap();
    // SAFETY: the allocation, now shared memory.
    let last = unsafe { p.cast::<u8>().add((1 << 20) - 1).read_volatile() };
    assert_eq!(
        last, 5,
        "the memset queued before the export is in the shared pages"
    );
    assert_eq!(close(&key), ACL_SUCCESS);
    // SAFETY: live stream; memory from aclrtMalloc.
    unsafe {
        assert_eq!(aclrtDestroyStream(s), ACL_SUCCESS);
        assert_eq!(aclrtFree(p.cast()), ACL_SUCCESS);
    }
}

#[test]
fn set_attr_takes_an_exported_key_and_inter_server_whitelists_are_not_supported() {
    let _serial = init();
    let p = malloc(SIZE);
    let key = export(p.cast(), 0).unwrap();
    let k = CString::new(key.clone()).unwrap();
    let mut pid = 1;
    let mut server = aclrtServerPid {
        sdid: 0,
        pid: &mut pid,
        num: 1,
    };
    // SAFETY: valid strings and pointers; bad values are refused.
    unsafe {
        for link in [
            ACL_RT_IPC_MEM_ATTR_ACCESS_LINK_SIO,
            ACL_RT_IPC_MEM_ATTR_ACCESS_LINK_HCCS,
            ACL_RT_IPC_MEM_ATTR_ACCESS_LINK_UB_MULTI_PORT_PATH,
        ] {
            assert_eq!(
                aclrtIpcMemSetAttr(k.as_ptr(), ACL_RT_IPC_MEM_ATTR_ACCESS_LINK, link),
                ACL_SUCCESS
            );
        }
        assert_eq!(
            aclrtIpcMemSetAttr(k.as_ptr(), ACL_RT_IPC_MEM_ATTR_ACCESS_LINK, 4),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtIpcMemSetAttr(k.as_ptr(), 1, 0),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtIpcMemSetAttr(c"aclalloc-0000040000000001".as_ptr(), 0, 0),
            ACL_ERROR_INVALID_PARAM,
            "not exported here"
        );
        assert_eq!(
            aclrtIpcMemSetAttr(std::ptr::null(), 0, 0),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtIpcMemImportPidInterServer(k.as_ptr(), &mut server, 1),
            ACL_ERROR_API_NOT_SUPPORT
        );
        assert_eq!(
            aclrtIpcMemImportPidInterServer(k.as_ptr(), null_mut(), 1),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtIpcMemImportPidInterServer(k.as_ptr(), &mut server, 0),
            ACL_ERROR_INVALID_PARAM
        );
    }
    assert_eq!(close(&key), ACL_SUCCESS);
    // SAFETY: closed; then memory from aclrtMalloc.
    unsafe {
        assert_eq!(
            aclrtIpcMemSetAttr(k.as_ptr(), 0, 0),
            ACL_ERROR_INVALID_PARAM,
            "closed"
        );
        assert_eq!(aclrtFree(p.cast()), ACL_SUCCESS);
    }
}
