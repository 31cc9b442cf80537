//! What a stream says about itself: `aclrtStreamQuery`, its priority, flags
//! and id, the priority range, and `aclrtSetStreamFailureMode`.

use super::host::HostRuntime;
use super::streams::MAX_PRIORITY;
use crate::base::error::{Error, Result};
use crate::registry::StreamKey;

/// `ACL_CONTINUE_ON_FAILURE` and `ACL_STOP_ON_FAILURE`.
const FAILURE_MODES: [u64; 2] = [0, 1];

impl HostRuntime {
    /// Reads `f` of the stream C named (NULL: the current context's default stream).
    fn stream_field<R>(
        &self,
        stream: Option<StreamKey>,
        f: impl FnOnce(&super::host::StreamEntry) -> R,
    ) -> Result<R> {
        let (key, _) = self.resolve_stream(stream)?;
        self.with_stream(key.get().get(), f)
            .ok_or(super::streams::NOT_A_STREAM)
    }

    /// `aclrtStreamQuery`: true once everything enqueued on the stream has run.
    pub fn stream_idle(&self, stream: Option<StreamKey>) -> Result<bool> {
        super::capture::refuse_if_capturing()?;
        Ok(self.resolve_stream(stream)?.1.is_idle())
    }

    /// `aclrtStreamGetPriority`.
    pub fn stream_priority(&self, stream: Option<StreamKey>) -> Result<u32> {
        self.stream_field(stream, |e| e.priority)
    }

    /// `aclrtStreamGetFlags`.
    pub fn stream_flags(&self, stream: Option<StreamKey>) -> Result<u32> {
        self.stream_field(stream, |e| e.flags)
    }

    /// `aclrtStreamGetId`: a number unique among the live streams.
    pub fn stream_id(&self, stream: Option<StreamKey>) -> Result<i32> {
        let (key, _) = self.resolve_stream(stream)?;
        Ok((key.get().get() & 0x7FFF_FFFF) as i32)
    }

    /// `aclrtDeviceGetStreamPriorityRange`: (least, greatest); a lower number
    /// is a higher priority, as in CANN.
    pub fn stream_priority_range(&self) -> Result<(i32, i32)> {
        self.current_context()?;
        Ok((MAX_PRIORITY as i32, 0))
    }

    /// `aclrtSetStreamFailureMode`: `ACL_CONTINUE_ON_FAILURE` or
    /// `ACL_STOP_ON_FAILURE`: after a failed task (a host kernel that
    /// called `aclallocFailCurrentTask`), the stream goes on, or drops its
    /// work until a synchronize reports the failure.
    pub fn set_stream_failure_mode(&self, stream: Option<StreamKey>, mode: u64) -> Result<()> {
        if !FAILURE_MODES.contains(&mode) {
            return Err(Error::InvalidParam {
                param: "mode",
                reason: "It must be ACL_CONTINUE_ON_FAILURE (0) or ACL_STOP_ON_FAILURE (1)",
            });
        }
        let (_, s) = self.resolve_stream(stream)?;
        s.set_stop_on_failure(mode == 1);
        Ok(())
    }
}
