//! Driving the tracking layer as a runtime does, through the Rust API.

use aclalloc::base::error::ACL_SUCCESS;
use aclalloc::ffi::cann::runtime::aclInit;
use aclalloc::registry::DescriptorHandle;
use aclalloc::{tracking, Callbacks, Registration, StreamKey};
use std::ffi::c_void;

/// The tracking callbacks for the user's `callbacks` registered on
/// `stream` (a non-zero number; the descriptor handle is the same number),
/// as a runtime gets them from `aclrtAllocatorGetByStream` with tracking
/// on. The runtime is initialised once per process, and tracking turned on.
pub fn tracked_callbacks(stream: usize, callbacks: Callbacks) -> Callbacks {
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| assert_eq!(unsafe { aclInit(std::ptr::null()) }, ACL_SUCCESS));
    tracking::set_enabled(true);
    let registration = Registration {
        descriptor: DescriptorHandle::from_ptr(stream as *mut c_void).unwrap(),
        callbacks,
    };
    let stream = StreamKey::from_ptr(stream as *mut c_void).unwrap();
    tracking::callbacks_for(stream, &registration)
}

/// How many cross-stream reuses the tracking layer has reported so far.
pub fn cross_stream_reuses() -> u64 {
    let (events, _) = tracking::faults();
    events
        .iter()
        .filter(|e| matches!(e.fault, tracking::events::Fault::CrossStreamReuse { .. }))
        .map(|e| e.count)
        .sum()
}
