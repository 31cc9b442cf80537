//! Through the C API on the host runtime: a pool registered on two streams
//! hands stream b the memory stream a freed once b waits (aclrtStreamWaitEvent)
//! on an event recorded on a after the free, with no synchronize and no new
//! segment, and the tracking layer does not report that reuse. Without the
//! wait, with the record made before the free, or with a wait that has a
//! time limit (it may run out), b gets other memory. Its
//! own process: tracking and the stream ordering are process-wide.

mod common;

use common::streams::new_stream;

use aclalloc::base::error::ACL_SUCCESS;
use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::events::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::types::aclrtStream;
use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
use aclalloc::ffi::ext::pool::lifecycle::*;
use aclalloc::ffi::ext::pool::*;
use common::tracking::cross_stream_reuses;
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Notes the workspace it ran with in the `AtomicUsize` it is given.
unsafe extern "C" fn note_workspace(workspace: *mut c_void, _: usize, seen: *mut c_void) {
    // SAFETY: `launch` passes a leaked `AtomicUsize`.
    unsafe { &*seen.cast::<AtomicUsize>() }.store(workspace as usize, Ordering::SeqCst);
}

const SIZE: usize = 1 << 20;

/// Queues a kernel with a workspace from the pool on `stream`; where it
/// will note the workspace's address. Nothing synchronizes: a synchronize
/// would order the streams by itself.
fn launch(stream: aclrtStream) -> &'static AtomicUsize {
    let seen: &'static AtomicUsize = Box::leak(Box::new(AtomicUsize::new(0)));
    let data = seen as *const AtomicUsize as *mut c_void;
    // SAFETY: a kernel that only notes its workspace in `seen`.
    let rc = unsafe { aclallocLaunchKernel(stream, SIZE, Some(note_workspace), data) };
    assert_eq!(rc, ACL_SUCCESS);
    seen
}

/// The workspace a kernel queued on `streams` ran with, once they are done.
fn ran_with(seen: &AtomicUsize, streams: &[aclrtStream]) -> usize {
    for &s in streams {
        // SAFETY: a live stream.
        assert_eq!(unsafe { aclrtSynchronizeStream(s) }, ACL_SUCCESS);
    }
    seen.load(Ordering::SeqCst)
}

fn record(event: aclrtEvent, stream: aclrtStream) {
    // SAFETY: live handles.
    assert_eq!(unsafe { aclrtRecordEvent(event, stream) }, ACL_SUCCESS);
}

fn wait(stream: aclrtStream, event: aclrtEvent) {
    // SAFETY: live handles.
    assert_eq!(unsafe { aclrtStreamWaitEvent(stream, event) }, ACL_SUCCESS);
}

fn timed_wait(stream: aclrtStream, event: aclrtEvent, seconds: i32) {
    // SAFETY: live handles.
    let rc = unsafe { aclrtStreamWaitEventWithTimeout(stream, event, seconds) };
    assert_eq!(rc, ACL_SUCCESS);
}

fn reserved(pool: aclallocPool) -> usize {
    let mut bytes = 0;
    // SAFETY: a live pool and a valid out-pointer.
    assert_eq!(
        unsafe { aclallocPoolMemoryReserved(pool, &mut bytes) },
        ACL_SUCCESS
    );
    bytes
}

#[test]
fn a_wait_on_a_record_after_the_free_lets_the_pool_reuse_across_streams() {
    let (pool, desc) = common::long_run::tracked_pool();
    let streams: Vec<aclrtStream> = (0..8).map(|_| new_stream()).collect();
    for &s in &streams {
        assert_eq!(aclrtAllocatorRegister(s, desc), ACL_SUCCESS);
    }
    let mut event = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtCreateEvent(&mut event) }, ACL_SUCCESS);

    // b waits on a record made on a after the free: a's memory, no growth,
    // nothing reported.
    let (a, b) = (streams[0], streams[1]);
    let reports = cross_stream_reuses();
    let on_a = launch(a);
    let before = reserved(pool);
    record(event, a);
    wait(b, event);
    let on_b = launch(b);
    assert_eq!(reserved(pool), before, "no new segment");
    let freed = ran_with(on_a, &[a, b]);
    assert_eq!(ran_with(on_b, &[]), freed, "the block a freed");
    assert_eq!(cross_stream_reuses(), reports, "an ordered reuse");

    // No wait: other memory.
    let (c, d) = (streams[2], streams[3]);
    let on_c = launch(c);
    let before = reserved(pool);
    let on_d = launch(d);
    assert!(reserved(pool) > before, "d did not wait");
    assert_ne!(ran_with(on_d, &[c, d]), ran_with(on_c, &[]));

    // The record comes before the free: the wait orders nothing after it
    // (f may take what streams synchronized since freed, not e's memory).
    let (e, f) = (streams[4], streams[5]);
    record(event, e);
    let on_e = launch(e);
    wait(f, event);
    let on_f = launch(f);
    let freed = ran_with(on_e, &[e, f]);
    assert_ne!(ran_with(on_f, &[]), freed, "recorded before the free");
    assert_eq!(cross_stream_reuses(), reports);

    // A wait with a time limit may run out before the record runs, and its
    // stream then goes on: it orders nothing, h gets other memory.
    let (g, h) = (streams[6], streams[7]);
    let on_g = launch(g);
    let before = reserved(pool);
    record(event, g);
    timed_wait(h, event, 5);
    let on_h = launch(h);
    assert!(reserved(pool) > before, "a timed wait does not order");
    assert_ne!(ran_with(on_h, &[g, h]), ran_with(on_g, &[]));
    assert_eq!(cross_stream_reuses(), reports);

    // SAFETY: live handles.
    unsafe {
        assert_eq!(aclrtDestroyEvent(event), ACL_SUCCESS);
        for &s in &streams {
            assert_eq!(aclrtAllocatorUnregister(s), ACL_SUCCESS);
            assert_eq!(aclrtDestroyStream(s), ACL_SUCCESS);
        }
    }
    assert_eq!(aclallocPoolDestroy(pool), ACL_SUCCESS);
    aclrtAllocatorDestroyDesc(desc);
}
