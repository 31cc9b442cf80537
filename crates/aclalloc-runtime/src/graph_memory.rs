//! Memory a capture hands to its model besides launch workspaces: blocks of
//! stream-ordered pools allocated while the stream captured, and the use a
//! graph makes of a private memory pool. The layer that made the memory
//! gives the runtime a [`Release`]; the capture keeps it, then its model,
//! and it runs once, when the model goes (after its queued replays) or when
//! the capture fails or is abandoned.
//!
//! A model drops its workspaces before its releases, so a release that
//! empties a pool sees the workspaces of that pool already given back.

use super::capture::{Capture, Target};
use super::host::HostRuntime;
use crate::base::error::{Error, Result, ACL_ERROR_RT_STREAM_NOT_CAPTURED};
use crate::registry::StreamKey;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// What runs when the memory it stands for goes back.
pub struct Release(Option<Box<dyn FnOnce() + Send>>);

impl Release {
    /// A release that runs `f` once, when dropped.
    pub fn new(f: Box<dyn FnOnce() + Send>) -> Self {
        Release(Some(f))
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

/// Captures alive (begun, not yet dropped): while 0, no stream captures, and
/// the allocation paths ask nothing more.
pub(crate) static CAPTURES: AtomicUsize = AtomicUsize::new(0);

const NOT_CAPTURING: Error = Error::Capture {
    code: ACL_ERROR_RT_STREAM_NOT_CAPTURED,
    reason: "The stream is not capturing",
};

impl HostRuntime {
    /// The capture `stream` records into, if it is an `aclmdlRICaptureBegin`
    /// capture (not a task update or a model build).
    fn graph_capture(&self, stream: Option<StreamKey>) -> Result<Option<Arc<Capture>>> {
        if CAPTURES.load(Ordering::Acquire) == 0 {
            return Ok(None);
        }
        let (_, s) = self.resolve_stream(stream)?;
        Ok(s.capture()
            .map(|(c, _)| c)
            .filter(|c| matches!(c.target, Target::Capture)))
    }

    /// The handle of the model `stream` (NULL: the default stream) is being
    /// captured into, or `None` when it is not capturing. One atomic load
    /// while no capture is alive.
    #[inline]
    pub fn capturing_model(&self, stream: Option<StreamKey>) -> Result<Option<usize>> {
        if CAPTURES.load(Ordering::Acquire) == 0 {
            return Ok(None);
        }
        Ok(self.graph_capture(stream)?.map(|c| c.model_handle))
    }

    /// Makes the capture `stream` records into keep `release` until its
    /// model goes (or the capture fails). Not capturing:
    /// `ACL_ERROR_RT_STREAM_NOT_CAPTURED`, and `release` runs at once.
    pub fn hold_in_capture(&self, stream: Option<StreamKey>, release: Release) -> Result<()> {
        match self.graph_capture(stream)? {
            Some(capture) => {
                capture.keep_release(release);
                Ok(())
            }
            None => Err(NOT_CAPTURING),
        }
    }
}
