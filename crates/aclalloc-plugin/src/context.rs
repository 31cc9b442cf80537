//! Which device and stream a plugin is told about: CANN's callbacks carry
//! neither, torch_npu's plugin functions take both.
//! - device: the calling thread's current device (0 without a context);
//! - stream: the stream being served (`crate::base::serving`), else NULL,
//!   which a plugin must read as "any stream".
//!
//! Free always passes what alloc passed: the table of live blocks keeps it.

use crate::base::device_port::{self, port};

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
