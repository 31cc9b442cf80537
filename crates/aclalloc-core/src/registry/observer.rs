//! What a runtime tells an observer about streams and their registrations,
//! so that the tracking layer can check allocators without the runtime
//! importing it: the composition root (`crate::ffi::wiring::process`) hands the
//! tracking layer's observer to the process-wide runtime.

use super::{Registration, StreamKey};
use crate::base::descriptor::Callbacks;
use crate::base::sync::statics::AtomicBool;
use crate::base::sync::Ordering;

/// Whether launches call [`StreamObserver::callbacks_for`] (set by tracking);
/// read inline on every launch, so the common case costs one load.
static INTERCEPTING: AtomicBool = AtomicBool::new(false);

/// Turns the launch-time interception on or off.
pub fn set_intercepting(on: bool) {
    INTERCEPTING.store(on, Ordering::Relaxed);
}

/// True while an observer intercepts launches' callbacks.
#[inline]
pub fn intercepting() -> bool {
    INTERCEPTING.load(Ordering::Relaxed)
}

/// Receives a runtime's stream events. Every method has a do-nothing default.
pub trait StreamObserver: Sync {
    /// The callbacks a launch on `stream` calls for `registration` (an observer
    /// may wrap the user's); asked only while [`intercepting`] is on.
    #[inline]
    fn callbacks_for(&self, _stream: StreamKey, registration: &Registration) -> Callbacks {
        registration.callbacks
    }
    /// All work submitted to `stream` so far has finished.
    #[inline]
    fn stream_synchronized(&self, _stream: StreamKey) {}
    /// `stream` was destroyed; `old` is the registration it had.
    #[inline]
    fn stream_destroyed(&self, _stream: StreamKey, _old: Option<&Registration>) {}
    /// An event was recorded on `stream`: returns a token that stands for
    /// "the work submitted to `stream` so far", handed back with
    /// [`StreamObserver::stream_waited`] (0: nothing to hand back). The host
    /// runtime keeps its records and waits in [`super::order`] itself; these
    /// two serve events recorded through a real runtime.
    #[inline]
    fn event_recorded(&self, _stream: StreamKey) -> u64 {
        0
    }
    /// `waiter` waits on an event whose record on `source` returned `token`:
    /// everything submitted to `waiter` from now on runs after the work
    /// `token` stands for.
    #[inline]
    fn stream_waited(&self, _waiter: StreamKey, _source: StreamKey, _token: u64) {}
    /// Captured model `model` (its handle) holds `block`, the workspace a
    /// registered allocator's tracked callbacks gave one of its launches,
    /// for its replays: a free of it before [`StreamObserver::workspace_released`]
    /// frees memory the model will use again.
    #[inline]
    fn workspace_held(&self, _block: usize, _model: usize) {}
    /// The model that held `block` gives it back now (its free follows).
    #[inline]
    fn workspace_released(&self, _block: usize) {}
}

/// The observer that observes nothing.
pub struct NoObserver;

impl StreamObserver for NoObserver {}
