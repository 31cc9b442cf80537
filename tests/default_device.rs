//! The default allocator chosen as direct device memory, serving the
//! workspaces of launches on a stream without a registration and the raw
//! functions; once it has served, swapping it fails. Its own process: the
//! default allocator is process-wide.

mod common;

use aclalloc::base::error::*;
use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::memory::aclrtMemset;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::ext::default_allocator::*;
use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
use common::message;
use std::ffi::{c_void, CStr};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};

static RAN: AtomicUsize = AtomicUsize::new(0);
static DEVICE_MEMORY: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn kernel(workspace: *mut c_void, size: usize, _: *mut c_void) {
    // The workspace is device memory: aclrtMemset accepts only that.
    if unsafe { aclrtMemset(workspace, size, 0x5A, size) } == ACL_SUCCESS {
        DEVICE_MEMORY.fetch_add(1, Ordering::SeqCst);
    }
    RAN.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn never(_: *mut c_void, _: usize) -> *mut c_void {
    null_mut()
}
unsafe extern "C" fn never_free(_: *mut c_void, _: *mut c_void) {}
unsafe extern "C" fn addr(b: *mut c_void) -> *mut c_void {
    b
}

#[test]
fn direct_device_memory_serves_unregistered_streams_and_then_cannot_be_swapped() {
    std::env::set_var("ACLALLOC_DEFAULT_ALLOCATOR", "device");
    assert_eq!(unsafe { aclInit(std::ptr::null()) }, ACL_SUCCESS);
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    let name = unsafe { CStr::from_ptr(aclallocGetDefaultAllocatorName()) };
    assert_eq!(name.to_str().unwrap(), "device");

    // Creating a stream does not use the default allocator. A complete
    // descriptor to try a swap with later:
    let mut stream = null_mut();
    assert_eq!(unsafe { aclrtCreateStream(&mut stream) }, ACL_SUCCESS);
    let desc = aclrtAllocatorCreateDesc();
    let mut token = 0u8;
    aclrtAllocatorSetObjToDesc(desc, &mut token as *mut u8 as *mut c_void);
    aclrtAllocatorSetAllocFuncToDesc(desc, Some(never));
    aclrtAllocatorSetFreeFuncToDesc(desc, Some(never_free));
    aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, Some(addr));

    // Zero-size launches take nothing from any allocator.
    let rc = unsafe { aclallocLaunchKernel(stream, 0, Some(kernel), null_mut()) };
    assert_eq!(rc, ACL_SUCCESS);
    assert_eq!(unsafe { aclrtSynchronizeStream(stream) }, ACL_SUCCESS);

    for size in [512usize, 4096, 3 << 20] {
        let rc = unsafe { aclallocLaunchKernel(stream, size, Some(kernel), null_mut()) };
        assert_eq!(rc, ACL_SUCCESS);
    }
    assert_eq!(unsafe { aclrtSynchronizeStream(stream) }, ACL_SUCCESS);
    assert_eq!(RAN.load(Ordering::SeqCst), 4);
    assert_eq!(
        DEVICE_MEMORY.load(Ordering::SeqCst),
        3,
        "workspaces were device memory"
    );

    assert_eq!(
        aclallocSetDefaultAllocator(desc),
        ACL_ERROR_REPEAT_INITIALIZE
    );
    assert_eq!(
        message(),
        "aclallocSetDefaultAllocator failed. can't swap an already initialized allocator."
    );

    // The raw functions: device memory of the current device.
    let mut p = null_mut();
    assert_eq!(
        unsafe { aclallocDefaultMalloc(&mut p, 10_000, stream) },
        ACL_SUCCESS
    );
    assert_eq!(unsafe { aclrtMemset(p, 10_000, 1, 10_000) }, ACL_SUCCESS);
    assert_eq!(aclallocDefaultFree(p), ACL_SUCCESS);
    assert_eq!(aclallocDefaultFree(p), ACL_ERROR_INVALID_PARAM);
    assert!(message().contains("double free"));
    assert_eq!(
        unsafe { aclallocDefaultMalloc(&mut p, 1 << 50, stream) },
        ACL_ERROR_RT_MEMORY_ALLOCATION
    );
    let m = message();
    assert!(m.contains("The default allocator returned NULL"), "{m}");
    assert!(
        m.contains("out of memory"),
        "the device's own reason is kept: {m}"
    );

    assert_eq!(unsafe { aclrtDestroyStream(stream) }, ACL_SUCCESS);
    assert_eq!(aclrtAllocatorDestroyDesc(desc), ACL_SUCCESS);
    assert_eq!(aclrtResetDevice(0), ACL_SUCCESS);
    assert_eq!(aclFinalize(), ACL_SUCCESS);
}
