//! Contexts: `aclrtCreateContext`, `aclrtDestroyContext`,
//! `aclrtSetCurrentContext`, `aclrtGetCurrentContext`.
//!
//! A context belongs to one device and owns the streams created while it is
//! current, plus a default stream (the stream a NULL `aclrtStream` means),
//! made on first use. The current context is per thread, as in CANN. A
//! thread's current context may be destroyed by another thread; the handle is
//! then simply no longer live and the thread has no current context.

use super::host::HostRuntime;
use crate::base::error::{Error, Result};
use crate::base::ids::ContextHandle;
use std::cell::Cell;

/// One context.
pub struct Context {
    pub(crate) device: u32,
    pub(crate) is_default: bool,
    /// Handles of the streams created in this context (the default stream too).
    pub(crate) streams: Vec<usize>,
    /// The default stream's handle, once made.
    pub(crate) default_stream: Option<usize>,
}

impl Context {
    pub(crate) fn new(device: u32, is_default: bool) -> Self {
        Context {
            device,
            is_default,
            streams: Vec::new(),
            default_stream: None,
        }
    }
}

pub(crate) const NOT_A_CONTEXT: Error = Error::InvalidParam {
    param: "context",
    reason: "It is not a live context (it was destroyed, or was never returned by aclrtCreateContext or aclrtGetCurrentContext)",
};

thread_local! {
    /// (runtime instance, context handle) current on this thread.
    static CURRENT: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    /// The last context this thread resolved, as (instance, context, the port's
    /// device stamp, device): looked up again only after a context was released.
    static RESOLVED: Cell<(usize, usize, usize, u32)> = const { Cell::new((0, 0, usize::MAX, 0)) };
}

pub(crate) fn set_current(rt: &HostRuntime, ctx: usize) {
    CURRENT.with(|c| c.set((rt.instance(), ctx)));
    crate::base::device_port::current_device_changed_here();
}

fn current_handle(rt: &HostRuntime) -> Option<usize> {
    let (instance, ctx) = CURRENT.with(Cell::get);
    (instance == rt.instance() && ctx != 0).then_some(ctx)
}

impl HostRuntime {
    /// `aclrtCreateContext`: a new context on `device`, made current on this thread.
    pub fn create_context(&self, device: i32) -> Result<usize> {
        let device = self.device(device)?.id();
        let ctx = self.contexts.insert(Context::new(device, false))?.get();
        set_current(self, ctx);
        Ok(ctx)
    }

    /// `aclrtDestroyContext`: destroys the context and its streams, after their
    /// pending work. A device's default context goes with `aclrtResetDevice`.
    pub fn destroy_context(&self, ctx: usize) -> Result<()> {
        super::waits::refuse_teardown_in_kernel()?;
        let is_default = self
            .with_context(ctx, |c| c.is_default)
            .ok_or(NOT_A_CONTEXT)?;
        if is_default {
            return Err(Error::InvalidParam {
                param: "context",
                reason: "It is a device's default context; aclrtResetDevice releases it",
            });
        }
        self.release_context(ctx);
        Ok(())
    }

    /// `aclrtSetCurrentContext`.
    pub fn set_current_context(&self, ctx: usize) -> Result<()> {
        self.with_context(ctx, |_| ()).ok_or(NOT_A_CONTEXT)?;
        set_current(self, ctx);
        Ok(())
    }

    /// This thread's current context and its device.
    pub fn current_context(&self) -> Result<(usize, u32)> {
        let ctx = current_handle(self).ok_or(Error::NoContext)?;
        let instance = self.instance();
        // Read before the lookup, so the answer is never newer than its stamp.
        let released = crate::base::device_port::device_stamp();
        let (i, c, r, device) = RESOLVED.with(Cell::get);
        if (i, c, r) == (instance, ctx, released) {
            return Ok((ctx, device));
        }
        let device = self
            .with_context(ctx, |c| c.device)
            .ok_or(Error::NoContext)?;
        RESOLVED.with(|cell| cell.set((instance, ctx, released, device)));
        Ok((ctx, device))
    }

    /// The contexts of `device`.
    pub(crate) fn contexts_of_device(&self, device: u32) -> Vec<usize> {
        self.contexts
            .collect(|h, c| (c.device == device).then_some(h.get()))
    }

    /// Removes a context and destroys its streams, waiting for their work.
    pub(crate) fn release_context(&self, ctx: usize) {
        let Some(context) = ContextHandle::from_raw(ctx).and_then(|h| self.contexts.remove(h))
        else {
            return;
        };
        // Every thread's `RESOLVED` and the port's kept device go stale.
        crate::base::device_port::current_device_changed_everywhere();
        for stream in context.streams {
            let _ = self.destroy_stream_handle(stream, false);
        }
        if current_handle(self) == Some(ctx) {
            CURRENT.with(|c| c.set((0, 0)));
        }
    }
}
