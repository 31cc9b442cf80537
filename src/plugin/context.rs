//! Which device and stream a plugin is told about.
//!
//! torch_npu's plugin functions take `(size, device, stream)`, but CANN's
//! allocator callbacks carry neither device nor stream. The choice, made here
//! and documented in the C header:
//! - device: the device current on the calling thread, from the runtime (0
//!   when the thread has no current context);
//! - stream: the stream being served, when the caller is known to serve one
//!   (the raw alloc functions take it as an argument; a launch publishes its
//!   stream with [`serving`] around the allocator calls it makes); otherwise
//!   NULL, which a plugin must read as "any stream".
//!
//! Free always passes what alloc passed: the table of live blocks keeps it.

use crate::registry::StreamKey;
use crate::runtime::backend::{active, Backend};
use crate::runtime::host;
use crate::runtime::launch::{current_launch_stream, LaunchStream};
use std::ffi::c_void;

/// The device current on the calling thread (0 when it has none), as the
/// plugin receives it.
pub fn current_device() -> i32 {
    match active().backend {
        Backend::Host => host()
            .current_device()
            .map_or(0, |d| i32::try_from(d).unwrap_or(0)),
        Backend::Forward => {
            let mut device = 0;
            // SAFETY: the real runtime's aclrtGetDevice with a valid out-pointer.
            let rc = unsafe { (active().aclrtGetDevice)(&mut device) };
            if rc == crate::core::error::ACL_SUCCESS {
                device
            } else {
                0
            }
        }
    }
}

/// How many devices the plugin's init hook is told about (at least 1).
pub fn device_count() -> i32 {
    match active().backend {
        Backend::Host => host()
            .device_count()
            .map_or(1, |n| i32::try_from(n).unwrap_or(i32::MAX).max(1)),
        Backend::Forward => {
            let mut count = 0u32;
            // SAFETY: the real runtime's aclrtGetDeviceCount with a valid out-pointer.
            let rc = unsafe { (active().aclrtGetDeviceCount)(&mut count) };
            if rc == crate::core::error::ACL_SUCCESS {
                i32::try_from(count).unwrap_or(i32::MAX).max(1)
            } else {
                1
            }
        }
    }
}

/// The stream the calling thread is serving, if it is known: the stream of
/// the launch in progress (the runtime's [`current_launch_stream`]), or the
/// one a caller published with [`serving`].
pub fn serving_stream() -> Option<StreamKey> {
    StreamKey::from_ptr(current_launch_stream() as *mut c_void)
}

/// Runs `f` with `stream` published as the stream this thread serves, so an
/// allocator called through CANN's stream-less callbacks can pass it on.
pub fn serving<R>(stream: Option<StreamKey>, f: impl FnOnce() -> R) -> R {
    let _serving = LaunchStream::enter(stream.map_or(0, |k| k.get().get()));
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serving_publishes_the_stream_for_the_call_only_and_nests() {
        assert!(serving_stream().is_none());
        let a = StreamKey::from_ptr(0x1000 as *mut c_void);
        let b = StreamKey::from_ptr(0x2000 as *mut c_void);
        serving(a, || {
            assert_eq!(serving_stream(), a);
            serving(b, || assert_eq!(serving_stream(), b));
            assert_eq!(serving_stream(), a);
            std::thread::spawn(|| assert!(serving_stream().is_none()))
                .join()
                .unwrap();
        });
        assert!(serving_stream().is_none());
    }
}
