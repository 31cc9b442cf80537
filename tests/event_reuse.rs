//! A block freed on stream A and reused on stream B: the tracking layer
//! reports the reuse unless B is ordered after the free, by a synchronize
//! or, without one, by waiting on an event recorded on A after the free
//! (PyTorch's `record_stream` discipline). A wait on a record made before
//! the free does not order it. Its own process: tracking is process-wide.

mod common;

use aclalloc::base::error::ACL_SUCCESS;
use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::events::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::types::{aclrtAllocator, aclrtAllocatorBlock, aclrtStream};
use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
use aclalloc::ffi::ext::tracking::aclallocTrackingSetEnabled;
use common::tracking::cross_stream_reuses;
use std::ffi::c_void;
use std::ptr::{null, null_mut};

/// The one block this allocator has: every stream gets the same memory.
static mut BLOCK: [u64; 64] = [0; 64];

unsafe extern "C" fn alloc(_: aclrtAllocator, _: usize) -> *mut c_void {
    std::ptr::addr_of_mut!(BLOCK).cast()
}
unsafe extern "C" fn free(_: aclrtAllocator, _: aclrtAllocatorBlock) {}
unsafe extern "C" fn get_addr(block: aclrtAllocatorBlock) -> *mut c_void {
    block
}
unsafe extern "C" fn nothing(_: *mut c_void, _: usize, _: *mut c_void) {}

fn launch(stream: aclrtStream) {
    // SAFETY: a kernel that ignores its arguments.
    let rc = unsafe { aclallocLaunchKernel(stream, 256, Some(nothing), null_mut()) };
    assert_eq!(rc, ACL_SUCCESS);
}

fn sync(stream: aclrtStream) {
    // SAFETY: a live stream.
    assert_eq!(unsafe { aclrtSynchronizeStream(stream) }, ACL_SUCCESS);
}

#[test]
fn an_event_wait_after_the_free_orders_the_reuse_and_nothing_else_does() {
    // SAFETY: no configuration file.
    assert_eq!(unsafe { aclInit(null()) }, ACL_SUCCESS);
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    assert_eq!(aclallocTrackingSetEnabled(1), ACL_SUCCESS);
    let desc = common::descriptor(
        0x2000 as *mut c_void,
        Some(alloc),
        Some(free),
        Some(get_addr),
    );
    let (mut a, mut b) = (null_mut(), null_mut());
    // SAFETY: valid out-pointers.
    unsafe {
        assert_eq!(aclrtCreateStream(&mut a), ACL_SUCCESS);
        assert_eq!(aclrtCreateStream(&mut b), ACL_SUCCESS);
    }
    assert_eq!(aclrtAllocatorRegister(a, desc), ACL_SUCCESS);
    assert_eq!(aclrtAllocatorRegister(b, desc), ACL_SUCCESS);
    let mut event = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtCreateEvent(&mut event) }, ACL_SUCCESS);
    let settle = || {
        sync(a);
        sync(b);
    };

    // Freed on a, reused on b with nothing between: reported.
    let before = cross_stream_reuses();
    launch(a);
    launch(b);
    assert_eq!(cross_stream_reuses(), before + 1, "no ordering: reported");
    settle();

    // b waits on a record made on a after the free: not reported.
    let before = cross_stream_reuses();
    launch(a);
    // SAFETY: live handles.
    unsafe {
        assert_eq!(aclrtRecordEvent(event, a), ACL_SUCCESS);
        assert_eq!(aclrtStreamWaitEvent(b, event), ACL_SUCCESS);
    }
    launch(b);
    assert_eq!(cross_stream_reuses(), before, "ordered by the event");
    settle();

    // The record comes before the free: the wait does not order the reuse.
    let before = cross_stream_reuses();
    // SAFETY: live handles.
    unsafe { assert_eq!(aclrtRecordEvent(event, a), ACL_SUCCESS) };
    launch(a);
    // SAFETY: live handles.
    unsafe { assert_eq!(aclrtStreamWaitEvent(b, event), ACL_SUCCESS) };
    launch(b);
    assert_eq!(
        cross_stream_reuses(),
        before + 1,
        "recorded before the free"
    );
    settle();

    // The wait orders b after a, not a after b.
    let before = cross_stream_reuses();
    launch(b);
    // SAFETY: live handles.
    unsafe {
        assert_eq!(aclrtRecordEvent(event, a), ACL_SUCCESS);
        assert_eq!(aclrtStreamWaitEvent(b, event), ACL_SUCCESS);
    }
    launch(a);
    assert_eq!(cross_stream_reuses(), before + 1, "a did not wait for b");
    settle();

    // SAFETY: live handles.
    unsafe {
        assert_eq!(aclrtDestroyEvent(event), ACL_SUCCESS);
        assert_eq!(aclrtDestroyStream(a), ACL_SUCCESS);
        assert_eq!(aclrtDestroyStream(b), ACL_SUCCESS);
    }
}
