//! Helpers shared by the integration tests: the message the last call left,
//! building C code against the library, descriptors made through the C ABI,
//! (`pool`) reading a pool through the C API, (`streams`) streams made
//! and synchronized through the C ABI, (`long_run`) the setup of the
//! long-running service tests, (`tracking`) the tracking callbacks a runtime
//! gets, and (`vendor`) the stand-in vendor runtime and its programs.
#![allow(dead_code)]

pub mod child;
pub mod long_run;
pub mod pool;
pub mod streams;
pub mod tracking;
pub mod vendor;

use std::ffi::CStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What `aclGetRecentErrMsg` returns now, if anything.
pub fn recent_message() -> Option<String> {
    let p = aclalloc::ffi::cann::errmsg::aclGetRecentErrMsg();
    // SAFETY: non-NULL, a NUL-terminated string the library keeps until the
    // thread's next call.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// Physical memory on device 0 as the virtual-memory tests ask for it
/// (`aclrtMallocPhysical`).
pub fn physical_prop() -> aclalloc::ffi::cann::types::aclrtPhysicalMemProp {
    use aclalloc::ffi::cann::types::*;
    aclrtPhysicalMemProp {
        handleType: ACL_MEM_HANDLE_TYPE_NONE,
        allocationType: ACL_MEM_ALLOCATION_TYPE_PINNED,
        memAttr: ACL_HBM_MEM_HUGE,
        location: aclrtMemLocation {
            id: 0,
            r#type: ACL_MEM_LOCATION_TYPE_DEVICE,
        },
        reserve: 0,
    }
}

/// A stream-ordered pool on device 0 with CANN's defaults
/// (`aclrtMemPoolCreate`; `maxSize` 0: the device's size).
pub fn mem_pool_props() -> aclalloc::ffi::cann::types::aclrtMemPoolProps {
    use aclalloc::ffi::cann::types::*;
    aclrtMemPoolProps {
        allocType: ACL_MEM_ALLOCATION_TYPE_PINNED,
        handleType: ACL_MEM_HANDLE_TYPE_NONE,
        location: aclrtMemLocation {
            id: 0,
            r#type: ACL_MEM_LOCATION_TYPE_DEVICE,
        },
        maxSize: 0,
        reserved: [0; 32],
    }
}

/// The message the last call left; there must be one.
pub fn message() -> String {
    recent_message().expect("a message was recorded")
}

/// The runtime initialized (once per process: a repeat is fine) and device
/// 0 current on the calling thread.
pub fn device0() {
    use aclalloc::ffi::cann::runtime::{aclInit, aclrtSetDevice};
    // SAFETY: a NULL configuration path is allowed.
    let rc = unsafe { aclInit(std::ptr::null()) };
    assert!(rc == 0 || rc == 100_002, "aclInit: {rc}");
    assert_eq!(aclrtSetDevice(0), 0);
}

/// The directory holding the `libaclalloc.so` this test run built
/// (`target/<profile>`): the test binary lives in `target/<profile>/deps`.
///
/// Programs linked against it record its SONAME (`libaclalloc.so.<major>`),
/// so that name is made to point at it here, as an install would.
pub fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf();
    let soname = dir.join(soname());
    if std::fs::symlink_metadata(&soname).is_err() {
        // Several tests may race here; whoever loses finds the link made.
        let _ = std::os::unix::fs::symlink("libaclalloc.so", &soname);
    }
    dir
}

/// The library's SONAME: the major version is the ABI version.
pub fn soname() -> String {
    format!("libaclalloc.so.{}", env!("CARGO_PKG_VERSION_MAJOR"))
}

/// The project root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh scratch directory under the target directory.
pub fn scratch(name: &str) -> PathBuf {
    let dir = lib_dir().join("c-tests").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// Compiles C or C++ `sources` into `output`, with the project's include
/// directory, warnings as errors, and linked against this run's library.
pub fn compile(compiler: &str, std: &str, sources: &[&Path], output: &Path, extra: &[&str]) {
    let lib = lib_dir();
    let status = Command::new(compiler)
        .arg(format!("-std={std}"))
        .args(["-Wall", "-Wextra", "-Werror", "-g"])
        .arg("-I")
        .arg(root().join("include"))
        .args(sources)
        .arg("-o")
        .arg(output)
        .arg("-L")
        .arg(&lib)
        .arg("-laclalloc")
        .arg("-lpthread")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(extra)
        .status()
        .unwrap_or_else(|e| panic!("could not run {compiler}: {e}"));
    assert!(status.success(), "{compiler} failed on {sources:?}");
}

/// A descriptor made through the C ABI with the object and the three required
/// functions set; every call must succeed.
pub fn descriptor(
    obj: *mut std::ffi::c_void,
    alloc: aclalloc::ffi::cann::types::aclrtAllocatorAllocFunc,
    free: aclalloc::ffi::cann::types::aclrtAllocatorFreeFunc,
    get_addr: aclalloc::ffi::cann::types::aclrtAllocatorGetAddrFromBlockFunc,
) -> aclalloc::ffi::cann::types::aclrtAllocatorDesc {
    use aclalloc::base::error::ACL_SUCCESS;
    use aclalloc::ffi::cann::allocator::*;
    let desc = aclrtAllocatorCreateDesc();
    assert!(!desc.is_null(), "aclrtAllocatorCreateDesc");
    assert_eq!(aclrtAllocatorSetObjToDesc(desc, obj), ACL_SUCCESS);
    assert_eq!(aclrtAllocatorSetAllocFuncToDesc(desc, alloc), ACL_SUCCESS);
    assert_eq!(aclrtAllocatorSetFreeFuncToDesc(desc, free), ACL_SUCCESS);
    assert_eq!(
        aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, get_addr),
        ACL_SUCCESS
    );
    desc
}

/// The descriptor `aclrtAllocatorGetByStream` finds registered on `stream`,
/// if any.
pub fn registered_descriptor(
    stream: aclalloc::ffi::cann::types::aclrtStream,
) -> Option<aclalloc::ffi::cann::types::aclrtAllocatorDesc> {
    let mut desc = std::ptr::null_mut();
    // SAFETY: a valid out-pointer; the others may be NULL.
    let rc = unsafe {
        aclalloc::ffi::cann::allocator::aclrtAllocatorGetByStream(
            stream,
            &mut desc,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    (rc == aclalloc::base::error::ACL_SUCCESS).then_some(desc)
}

/// Sets `desc`'s object to 0x1000 and its three required functions to ones
/// that hand back the requested size as the block and the block as its
/// address (for tests that only register, never touch memory).
pub fn complete_with_trivial_functions(desc: aclalloc::ffi::cann::types::aclrtAllocatorDesc) {
    use aclalloc::base::error::ACL_SUCCESS;
    use aclalloc::ffi::cann::allocator::*;
    use aclalloc::ffi::cann::types::{aclrtAllocator, aclrtAllocatorBlock};
    use std::ffi::c_void;
    unsafe extern "C" fn alloc(_: aclrtAllocator, size: usize) -> *mut c_void {
        size as *mut c_void
    }
    unsafe extern "C" fn free(_: aclrtAllocator, _: aclrtAllocatorBlock) {}
    unsafe extern "C" fn get_addr(block: aclrtAllocatorBlock) -> *mut c_void {
        block
    }
    assert_eq!(
        aclrtAllocatorSetObjToDesc(desc, 0x1000 as *mut c_void),
        ACL_SUCCESS
    );
    assert_eq!(
        aclrtAllocatorSetAllocFuncToDesc(desc, Some(alloc)),
        ACL_SUCCESS
    );
    assert_eq!(
        aclrtAllocatorSetFreeFuncToDesc(desc, Some(free)),
        ACL_SUCCESS
    );
    assert_eq!(
        aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, Some(get_addr)),
        ACL_SUCCESS
    );
}

/// Builds `fake` as a stand-in real runtime (`libfakert.so`) and `app`
/// against this library, linked in front of it, and checks that the app
/// prints "forwarded": the calls it makes reached the stand-in.
#[allow(dead_code)]
pub fn expect_forwarded(name: &str, fake: &str, app: &str) {
    let dir = scratch(name);
    let lib = lib_dir();
    std::fs::write(dir.join("fake.c"), fake).unwrap();
    std::fs::write(dir.join("app.c"), app).unwrap();
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(dir.join("libfakert.so"))
        .arg(dir.join("fake.c"))
        .status()
        .expect("cc");
    assert!(status.success());
    let status = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Werror", "-I"])
        .arg(root().join("include"))
        .arg(dir.join("app.c"))
        .arg("-o")
        .arg(dir.join("app"))
        // This library first, then the runtime: the runtime is next after it.
        .arg("-L")
        .arg(&lib)
        .arg("-laclalloc")
        .arg("-L")
        .arg(&dir)
        // Kept although the program calls nothing in it directly.
        .arg("-Wl,--no-as-needed")
        .arg("-lfakert")
        .arg(format!("-Wl,-rpath,{}:{}", lib.display(), dir.display()))
        .status()
        .expect("cc");
    assert!(status.success());
    let out = Command::new(dir.join("app")).output().expect("run");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "forwarded\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
