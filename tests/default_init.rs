//! `aclallocDefaultInit` and `aclallocDefaultGetDevice`: the default pool
//! built before any allocation, on the calling thread's device, configured,
//! and the swap refused afterwards. Its own process: the default allocator is
//! process-wide.

mod common;

use aclalloc::base::error::*;
use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::errmsg::aclGetRecentErrMsg;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::ext::default_allocator::*;
use aclalloc::ffi::ext::default_init::*;
use aclalloc::ffi::ext::pool::*;
use std::ffi::c_void;
use std::ptr::null_mut;

unsafe extern "C" fn alloc(_: *mut c_void, _: usize) -> *mut c_void {
    null_mut()
}
unsafe extern "C" fn free(_: *mut c_void, _: *mut c_void) {}
unsafe extern "C" fn addr(b: *mut c_void) -> *mut c_void {
    b
}

#[test]
fn the_default_pool_is_built_on_the_calling_threads_device_and_then_frozen() {
    std::env::remove_var("ACLALLOC_DEFAULT_ALLOCATOR");
    std::env::set_var("ACLALLOC_DEVICE_COUNT", "2");
    assert_eq!(unsafe { aclInit(std::ptr::null()) }, ACL_SUCCESS);

    // Not built yet: no device, nothing written; a NULL out-pointer refused.
    let mut device = -7;
    assert_eq!(
        unsafe { aclallocDefaultGetDevice(&mut device) },
        ACL_ERROR_UNINITIALIZE
    );
    assert_eq!(device, -7);
    assert!(common::message().contains("aclallocDefaultGetDevice failed"));
    assert_eq!(
        unsafe { aclallocDefaultGetDevice(std::ptr::null_mut()) },
        ACL_ERROR_INVALID_PARAM
    );
    assert!(common::message().contains("deviceId"));

    // The pool needs a current device: without one, the build fails and
    // leaves the default allocator open.
    assert_eq!(aclallocDefaultInit(), ACL_ERROR_RT_CONTEXT_NULL);
    assert!(common::message().contains("aclallocDefaultInit failed"));
    assert_eq!(
        unsafe { aclallocDefaultGetDevice(&mut device) },
        ACL_ERROR_UNINITIALIZE
    );
    let _ = aclGetRecentErrMsg();

    assert_eq!(aclrtSetDevice(1), ACL_SUCCESS);
    assert_eq!(aclallocDefaultInit(), ACL_SUCCESS);
    assert_eq!(
        aclallocDefaultInit(),
        ACL_SUCCESS,
        "a second call is a no-op"
    );
    assert_eq!(
        unsafe { aclallocDefaultGetDevice(&mut device) },
        ACL_SUCCESS
    );
    assert_eq!(device, 1, "built on the calling thread's device");

    // The pool exists before any allocation and can be configured.
    let mut pool = null_mut();
    assert_eq!(
        unsafe { aclallocGetDefaultAllocator(&mut pool) },
        ACL_SUCCESS
    );
    assert_eq!(aclallocPoolSetMemoryFraction(pool, 0.5), ACL_SUCCESS);
    let mut reserved = usize::MAX;
    assert_eq!(
        unsafe { aclallocPoolMemoryReserved(pool, &mut reserved) },
        ACL_SUCCESS
    );
    assert_eq!(reserved, 0, "nothing was allocated");

    // Frozen: a swap is refused as after a first allocation.
    let desc = common::descriptor(0x10 as *mut c_void, Some(alloc), Some(free), Some(addr));
    assert_eq!(
        aclallocSetDefaultAllocator(desc),
        ACL_ERROR_REPEAT_INITIALIZE
    );
    assert!(common::message().contains("can't swap an already initialized allocator"));
    assert_eq!(aclrtAllocatorDestroyDesc(desc), ACL_SUCCESS);

    // One default pool per device: a thread on device 0 reads device 0, and
    // its default allocator object is device 0's own pool.
    let pool1 = pool as usize;
    std::thread::spawn(move || {
        assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
        let mut d = -1;
        assert_eq!(unsafe { aclallocDefaultGetDevice(&mut d) }, ACL_SUCCESS);
        assert_eq!(d, 0);
        let mut pool0 = std::ptr::null_mut();
        assert_eq!(
            unsafe { aclallocGetDefaultAllocator(&mut pool0) },
            ACL_SUCCESS
        );
        assert!(!pool0.is_null() && pool0 as usize != pool1);
    })
    .join()
    .unwrap();
}
