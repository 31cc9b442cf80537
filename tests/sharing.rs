//! Physical memory shared between real processes through shareable handles:
//! the same pages on both sides, the pid whitelist, refused handles, and a
//! process killed on either side. The other processes are this test binary
//! again, run as the role named by `SHARING_ROLE` (see `child_role`).

mod common;

use aclalloc::base::error::*;
use aclalloc::ffi::cann::sharing::*;
use aclalloc::ffi::cann::types::*;
use aclalloc::ffi::cann::virtual_memory::*;
use common::child::{self, expect, init, say, wait_line};
use std::ffi::c_void;
use std::io::BufReader;
use std::process::{Child, ChildStdout};
use std::ptr::null_mut;

const G: usize = 2 << 20;

/// Physical memory of one granule mapped at a new reservation.
struct Mapped {
    handle: aclrtDrvMemHandle,
    va: *mut c_void,
}

impl Mapped {
    fn new() -> Self {
        let mut handle = null_mut();
        // SAFETY: valid out-pointer and properties.
        assert_eq!(
            unsafe { aclrtMallocPhysical(&mut handle, G, &common::physical_prop(), 0) },
            ACL_SUCCESS
        );
        Self::of(handle)
    }

    fn of(handle: aclrtDrvMemHandle) -> Self {
        let mut va = null_mut();
        // SAFETY: valid out-pointer; a live handle of one granule.
        unsafe {
            assert_eq!(
                aclrtReserveMemAddress(&mut va, G, 0, null_mut(), 0),
                ACL_SUCCESS
            );
            assert_eq!(aclrtMapMem(va, G, 0, handle, 0), ACL_SUCCESS);
        }
        Mapped { handle, va }
    }

    fn word(&self, i: usize) -> *mut u64 {
        // SAFETY: inside the mapped granule.
        unsafe { self.va.cast::<u64>().add(i) }
    }

    fn read(&self, i: usize) -> u64 {
        // SAFETY: mapped read-write; other processes write it too.
        unsafe { self.word(i).read_volatile() }
    }

    fn write(&self, i: usize, v: u64) {
        // SAFETY: as above.
        unsafe { self.word(i).write_volatile(v) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping, reservation and handle made by `new`.
        unsafe {
            assert_eq!(aclrtUnmapMem(self.va), ACL_SUCCESS);
            assert_eq!(aclrtReleaseMemAddress(self.va), ACL_SUCCESS);
            assert_eq!(aclrtFreePhysical(self.handle), ACL_SUCCESS);
        }
    }
}

fn export(handle: aclrtDrvMemHandle, flags: u64) -> u64 {
    let mut shared = 0u64;
    // SAFETY: a live handle; a valid out-pointer.
    let rc = unsafe {
        aclrtMemExportToShareableHandle(handle, ACL_MEM_HANDLE_TYPE_NONE, flags, &mut shared)
    };
    assert_eq!(rc, ACL_SUCCESS);
    shared
}

fn import(shared: u64) -> Result<aclrtDrvMemHandle, aclError> {
    let mut handle = null_mut();
    // SAFETY: a valid out-pointer.
    match unsafe { aclrtMemImportFromShareableHandle(shared, 0, &mut handle) } {
        ACL_SUCCESS => Ok(handle),
        rc => Err(rc),
    }
}

/// This test binary run as `role` with `arg`; it talks over stdin/stdout.
fn spawn(role: &str, arg: u64) -> (Child, BufReader<ChildStdout>) {
    child::spawn("SHARING", role, &arg.to_string())
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// The roles of the child processes; in the parent test run it does nothing.
#[test]
#[ignore = "the entry of the child processes the other tests start"]
fn child_role() {
    let Some((role, arg)) = child::role("SHARING") else {
        return;
    };
    let arg: u64 = arg.parse().unwrap();
    let _serial = init();
    match role.as_str() {
        // Imports `arg` once told to, reads word 0, writes word 1.
        "importer" => {
            let mut pid = 0;
            // SAFETY: a valid out-pointer.
            assert_eq!(unsafe { aclrtDeviceGetBareTgid(&mut pid) }, ACL_SUCCESS);
            println!("PID {pid}");
            assert_eq!(wait_line(), "go");
            match import(arg) {
                Ok(h) => {
                    let m = Mapped::of(h);
                    println!("READ {}", m.read(0));
                    m.write(1, 77);
                    println!("WROTE 1");
                    // Held until told: a test may kill this process now.
                    wait_line();
                }
                Err(rc) => println!("REFUSED {rc}"),
            }
        }
        // Exports memory holding 123 to anyone and waits to be killed.
        "exporter" => {
            let m = Mapped::new();
            m.write(0, 123);
            println!(
                "HANDLE {}",
                export(m.handle, ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION)
            );
            wait_line();
            std::mem::forget(m);
        }
        other => panic!("unknown role {other}"),
    }
}

#[test]
fn a_whitelisted_process_shares_the_pages_and_another_is_refused() {
    let _serial = init();
    let m = Mapped::new();
    m.write(0, 123);
    let shared = export(m.handle, ACL_RT_VMM_EXPORT_FLAG_DEFAULT);
    // SAFETY: a live handle; a valid out-pointer.
    let again =
        unsafe { aclrtMemExportToShareableHandle(m.handle, ACL_MEM_HANDLE_TYPE_NONE, 0, &mut 0) };
    assert_eq!(
        again, ACL_ERROR_INVALID_PARAM,
        "one shareable handle per allocation"
    );
    assert_eq!(
        import(shared).unwrap_err(),
        ACL_ERROR_INVALID_PARAM,
        "not in the exporting process"
    );

    let (mut allowed, mut allowed_out) = spawn("importer", shared);
    let (mut other, mut other_out) = spawn("importer", shared);
    let pid: i32 = expect(&mut allowed_out, "PID").parse().unwrap();
    assert_eq!(pid as u32, allowed.id());
    expect(&mut other_out, "PID");
    // SAFETY: one readable pid.
    let rc = unsafe { aclrtMemSetPidToShareableHandle(shared, &pid as *const i32 as *mut i32, 1) };
    assert_eq!(rc, ACL_SUCCESS);
    say(&mut allowed, "go");
    say(&mut other, "go");
    assert_eq!(expect(&mut allowed_out, "READ"), "123");
    expect(&mut allowed_out, "WROTE");
    assert_eq!(
        m.read(1),
        77,
        "the importer's write is in the exporter's pages"
    );
    assert_eq!(
        expect(&mut other_out, "REFUSED"),
        ACL_ERROR_RT_NO_PERMISSION.to_string()
    );
    say(&mut allowed, "done");
    assert!(allowed.wait().unwrap().success());
    assert!(other.wait().unwrap().success());
}

#[test]
fn without_pid_validation_anyone_imports() {
    let _serial = init();
    let m = Mapped::new();
    m.write(0, 5);
    let shared = export(m.handle, ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION);
    let (mut child, mut out) = spawn("importer", shared);
    expect(&mut out, "PID");
    say(&mut child, "go");
    assert_eq!(expect(&mut out, "READ"), "5");
    expect(&mut out, "WROTE");
    assert_eq!(m.read(1), 77);
    say(&mut child, "done");
    assert!(child.wait().unwrap().success());
}

#[test]
fn made_up_freed_and_foreign_handles_are_refused() {
    let _serial = init();
    let m = Mapped::new();
    let shared = export(m.handle, 1);
    // Another token of this process (a handle of an earlier run looks so).
    for made_up in [shared ^ 1, shared ^ (1 << 41), 12345, 0] {
        let (mut child, mut out) = spawn("importer", made_up);
        expect(&mut out, "PID");
        say(&mut child, "go");
        assert_eq!(
            expect(&mut out, "REFUSED"),
            ACL_ERROR_INVALID_PARAM.to_string(),
            "{made_up:#x}"
        );
        assert!(child.wait().unwrap().success());
    }
    // Freed by its exporter: the handle dies with it.
    drop(m);
    let (mut child, mut out) = spawn("importer", shared);
    expect(&mut out, "PID");
    say(&mut child, "go");
    assert_eq!(
        expect(&mut out, "REFUSED"),
        ACL_ERROR_INVALID_PARAM.to_string()
    );
    assert!(child.wait().unwrap().success());
    // Bad arguments.
    let mut h = null_mut();
    // SAFETY: NULL out-pointers are refused before any write.
    unsafe {
        assert_eq!(
            aclrtMemImportFromShareableHandle(shared, 0, null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtMemImportFromShareableHandle(shared, 999, &mut h),
            ACL_ERROR_RT_INVALID_DEVICEID
        );
        assert_eq!(
            aclrtMemSetPidToShareableHandle(shared, null_mut(), 1),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(aclrtDeviceGetBareTgid(null_mut()), ACL_ERROR_INVALID_PARAM);
    }
    assert!(h.is_null());
}

#[test]
fn a_killed_exporter_leaves_the_importer_its_mapping_and_nothing_leaks() {
    let _serial = init();
    let (mut exporter, mut out) = spawn("exporter", 0);
    let shared: u64 = expect(&mut out, "HANDLE").parse().unwrap();
    let m = Mapped::of(import(shared).unwrap());
    assert_eq!(m.read(0), 123);
    exporter.kill().unwrap();
    exporter.wait().unwrap();
    // The pages stay while mapped here; the dead exporter's handle is gone.
    m.write(2, 9);
    assert_eq!((m.read(0), m.read(2)), (123, 9));
    assert_eq!(import(shared).unwrap_err(), ACL_ERROR_INVALID_PARAM);
    let fds = open_fds();
    drop(m);
    assert_eq!(
        open_fds(),
        fds - 1,
        "the imported memory's descriptor is closed"
    );
}

#[test]
fn a_killed_importer_leaves_the_exporter_whole() {
    let _serial = init();
    let m = Mapped::new();
    m.write(0, 42);
    let shared = export(m.handle, 1);
    let (mut child, mut out) = spawn("importer", shared);
    expect(&mut out, "PID");
    say(&mut child, "go");
    assert_eq!(expect(&mut out, "READ"), "42");
    expect(&mut out, "WROTE");
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!((m.read(0), m.read(1)), (42, 77));
    let live = aclalloc::runtime::sharing::live_exports();
    drop(m);
    assert_eq!(
        aclalloc::runtime::sharing::live_exports(),
        live - 1,
        "freeing ends the export"
    );
}

#[test]
fn v2_handles_and_access_flags() {
    let _serial = init();
    let m = Mapped::new();
    let mut fabric = aclrtMemFabricHandle { data: [0; 128] };
    // SAFETY: live handle, writable handle of the type named.
    unsafe {
        assert_eq!(
            aclrtMemExportToShareableHandleV2(m.handle, 0, 7, (&raw mut fabric).cast()),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtMemExportToShareableHandleV2(
                m.handle,
                0,
                ACL_MEM_SHARE_HANDLE_TYPE_FABRIC,
                (&raw mut fabric).cast()
            ),
            ACL_SUCCESS
        );
        let pid = 1i32;
        assert_eq!(
            aclrtMemSetPidToShareableHandleV2(
                (&raw mut fabric).cast(),
                ACL_MEM_SHARE_HANDLE_TYPE_FABRIC,
                &pid as *const i32 as *mut i32,
                1
            ),
            ACL_SUCCESS
        );
        let mut h = null_mut();
        assert_eq!(
            aclrtMemImportFromShareableHandleV2(
                (&raw mut fabric).cast(),
                ACL_MEM_SHARE_HANDLE_TYPE_FABRIC,
                1,
                &mut h
            ),
            ACL_ERROR_INVALID_PARAM,
            "flags are reserved"
        );
        let loc = aclrtMemLocation {
            id: 0,
            r#type: ACL_MEM_LOCATION_TYPE_DEVICE,
        };
        let mut desc = aclrtMemAccessDesc {
            flags: ACL_RT_MEM_ACCESS_FLAGS_READ,
            location: loc,
            rsv: [0; 12],
        };
        let mut flag = 0u64;
        let mut l = loc;
        assert_eq!(aclrtMemGetAccess(m.va, &mut l, &mut flag), ACL_SUCCESS);
        assert_eq!(flag, ACL_RT_MEM_ACCESS_FLAGS_READWRITE as u64);
        assert_eq!(aclrtMemSetAccess(m.va, G, &mut desc, 1), ACL_SUCCESS);
        assert_eq!(aclrtMemGetAccess(m.va, &mut l, &mut flag), ACL_SUCCESS);
        assert_eq!(flag, ACL_RT_MEM_ACCESS_FLAGS_READ as u64);
        assert_eq!(
            aclrtMemSetAccess(m.va, G, &mut desc, 0),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtMemSetAccess(m.va, G + 1, &mut desc, 1),
            ACL_ERROR_INVALID_PARAM
        );
        desc.flags = 2;
        assert_eq!(
            aclrtMemSetAccess(m.va, G, &mut desc, 1),
            ACL_ERROR_INVALID_PARAM
        );
        desc.flags = ACL_RT_MEM_ACCESS_FLAGS_READWRITE;
        desc.location.id = 999;
        assert_eq!(
            aclrtMemSetAccess(m.va, G, &mut desc, 1),
            ACL_ERROR_RT_INVALID_DEVICEID
        );
        assert_eq!(
            aclrtMemGetAccess(m.va, null_mut(), &mut flag),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtMemGetAccess(0x1000 as *mut c_void, &mut l, &mut flag),
            ACL_ERROR_INVALID_PARAM
        );
    }
}
