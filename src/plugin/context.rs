//! Which device and stream a plugin is told about.
//!
//! torch_npu's plugin functions take `(size, device, stream)`, but CANN's
//! allocator callbacks carry neither device nor stream. The choice, made here
//! and documented in the C header:
//! - device: the device current on the calling thread, from the runtime (0
//!   when the thread has no current context);
//! - stream: the stream being served, when the caller is known to serve one
//!   (the raw alloc functions take it as an argument; a launch publishes its
//!   stream around the allocator calls it makes: `crate::core::serving`);
//!   otherwise NULL, which a plugin must read as "any stream".
//!
//! Free always passes what alloc passed: the table of live blocks keeps it.

use crate::core::device_port::{self, port};

/// The device current on the calling thread (0 when it has none), as the
/// plugin receives it (kept per thread by the port when it can be).
#[inline]
pub fn current_device() -> i32 {
    device_port::current_device().unwrap_or(0)
}

/// How many devices the plugin's init hook is told about (at least 1).
pub fn device_count() -> i32 {
    port()
        .device_count()
        .map_or(1, |n| i32::try_from(n).unwrap_or(i32::MAX).max(1))
}
