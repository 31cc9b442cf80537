//! The stream functions the tracking layer and the interposer must see:
//! synchronization (memory freed on a stream may go to another stream only
//! after it) and destruction (the stream's registration goes with it).
//!
//! In front of a real runtime they forward (see [`super::forward`]). Without
//! one, streams are opaque handles with no work queued on them, so
//! synchronizing completes at once and destroying drops the stream's
//! registration.
#![allow(non_snake_case)]

use super::boundary::boundary;
use super::forward;
use super::types::*;
use crate::core::api::global;
use crate::interpose::Sym;
use crate::registry::StreamKey;
use crate::tracking;

/// Blocks until all work submitted to `stream` is complete.
#[no_mangle]
pub extern "C" fn aclrtSynchronizeStream(stream: aclrtStream) -> aclError {
    if let Some(rc) = forward::synchronize_stream(stream) {
        return rc;
    }
    boundary("aclrtSynchronizeStream", || {
        if let Some(key) = StreamKey::from_ptr(stream) {
            tracking::stream_synchronized(key);
        }
        Ok(())
    })
}

/// As `aclrtSynchronizeStream`, giving up after `timeout` ms (-1: never).
#[no_mangle]
pub extern "C" fn aclrtSynchronizeStreamWithTimeout(stream: aclrtStream, timeout: i32) -> aclError {
    if let Some(rc) = forward::synchronize_stream_with_timeout(stream, timeout) {
        return rc;
    }
    aclrtSynchronizeStream(stream)
}

/// Blocks until all work on every stream of the current device is complete.
#[no_mangle]
pub extern "C" fn aclrtSynchronizeDevice() -> aclError {
    if let Some(rc) = forward::synchronize_device() {
        return rc;
    }
    boundary("aclrtSynchronizeDevice", || {
        tracking::device_synchronized();
        Ok(())
    })
}

fn destroy(sym: Sym, function: &'static str, stream: aclrtStream) -> aclError {
    if let Some(rc) = forward::destroy_stream(sym, function, stream) {
        return rc;
    }
    boundary(function, || {
        let key = super::args::stream(stream)?;
        let old = global().unregister(key)?;
        tracking::stream_destroyed(key, old.as_ref());
        Ok(())
    })
}

/// Destroys `stream` once its work is complete, and drops its allocator
/// registration, so that a later stream at the same address does not inherit
/// it (CANN keeps the stale entry).
#[no_mangle]
pub extern "C" fn aclrtDestroyStream(stream: aclrtStream) -> aclError {
    destroy(Sym::aclrtDestroyStream, "aclrtDestroyStream", stream)
}

/// Destroys `stream` without waiting for its work, and drops its allocator
/// registration.
#[no_mangle]
pub extern "C" fn aclrtDestroyStreamForce(stream: aclrtStream) -> aclError {
    destroy(
        Sym::aclrtDestroyStreamForce,
        "aclrtDestroyStreamForce",
        stream,
    )
}
