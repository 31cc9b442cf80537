//! "The stream being served": the one thread-local that says which stream
//! the allocator calls on this thread are for.
//!
//! CANN's allocator callbacks do not receive the stream: a launch (and the
//! default allocator's raw alloc) publishes it around the callbacks, and an
//! allocator shared by several streams reads it here.

use crate::base::ids::StreamKey;
use std::cell::Cell;
use std::ffi::c_void;

thread_local! {
    /// The stream being served on this thread, 0 for none.
    static SERVING: Cell<usize> = const { Cell::new(0) };
}

/// The stream the calling thread is serving, as a number (0 outside a launch or a published call).
#[inline]
pub fn current_raw() -> usize {
    SERVING.with(Cell::get)
}

/// The stream the calling thread is serving, if it is known.
#[inline]
pub fn current() -> Option<StreamKey> {
    StreamKey::from_ptr(current_raw() as *mut c_void)
}

/// Publishes a stream for the life of the guard (nesting: the previous one
/// comes back when it drops).
pub struct Serving(usize);

impl Serving {
    /// Publishes `stream` (0: none) until the guard drops.
    #[inline]
    pub fn enter(stream: usize) -> Self {
        Serving(SERVING.with(|s| s.replace(stream)))
    }
}

impl Drop for Serving {
    #[inline]
    fn drop(&mut self) {
        SERVING.with(|s| s.set(self.0));
    }
}

/// Runs `f` with `stream` published as the stream this thread serves.
#[inline]
pub fn serving<R>(stream: Option<StreamKey>, f: impl FnOnce() -> R) -> R {
    let _serving = Serving::enter(stream.map_or(0, |k| k.get().get()));
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serving_publishes_the_stream_for_the_call_only_and_nests() {
        assert!(current().is_none());
        let a = StreamKey::from_ptr(0x1000 as *mut c_void);
        let b = StreamKey::from_ptr(0x2000 as *mut c_void);
        serving(a, || {
            assert_eq!(current(), a);
            serving(b, || assert_eq!(current(), b));
            assert_eq!(current(), a);
            std::thread::spawn(|| assert!(current().is_none()))
                .join()
                .unwrap();
        });
        assert!(current().is_none());
    }
}
