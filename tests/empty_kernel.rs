//! `aclallocEmptyKernel`: a valid kernel for `aclallocLaunchKernel` that
//! does nothing; the workspace is still taken and given back.

mod common;

use aclalloc::base::error::*;
use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::ext::empty_kernel::aclallocEmptyKernel;
use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

static ALLOCS: AtomicUsize = AtomicUsize::new(0);
static FREES: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn alloc(_: *mut c_void, size: usize) -> *mut c_void {
    ALLOCS.fetch_add(1, Ordering::SeqCst);
    Box::into_raw(vec![0u8; size].into_boxed_slice()) as *mut u8 as *mut c_void
}
unsafe extern "C" fn free(_: *mut c_void, block: *mut c_void) {
    FREES.fetch_add(1, Ordering::SeqCst);
    // SAFETY: every block is a boxed slice of 4096 bytes (the only size used).
    drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(block as *mut u8, 4096)) });
}
unsafe extern "C" fn addr(block: *mut c_void) -> *mut c_void {
    block
}

#[test]
fn the_empty_kernel_launches_and_the_workspace_goes_back() {
    assert_eq!(unsafe { aclInit(std::ptr::null()) }, ACL_SUCCESS);
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    let mut stream = std::ptr::null_mut();
    assert_eq!(unsafe { aclrtCreateStream(&mut stream) }, ACL_SUCCESS);
    let desc = common::descriptor(0x10 as *mut c_void, Some(alloc), Some(free), Some(addr));
    assert_eq!(aclrtAllocatorRegister(stream, desc), ACL_SUCCESS);
    for _ in 0..100 {
        let rc = unsafe {
            aclallocLaunchKernel(
                stream,
                4096,
                Some(aclallocEmptyKernel),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(rc, ACL_SUCCESS);
    }
    assert_eq!(unsafe { aclrtSynchronizeStream(stream) }, ACL_SUCCESS);
    assert_eq!(ALLOCS.load(Ordering::SeqCst), 100);
    assert_eq!(FREES.load(Ordering::SeqCst), 100);
    // Called directly with anything, it reads nothing.
    unsafe { aclallocEmptyKernel(0x1 as *mut c_void, usize::MAX, 0x2 as *mut c_void) };
    assert_eq!(aclrtAllocatorDestroyDesc(desc), ACL_SUCCESS);
    assert_eq!(unsafe { aclrtDestroyStream(stream) }, ACL_SUCCESS);
}
