//! Operator launches that take their workspace from the stream's allocator,
//! as CANN's executor does: the registration is read once, then `alloc`,
//! `getAddrFromBlock`, enqueue, and `free` right away on the launching
//! thread, so the block goes back in *stream order*.
//!
//! Without a registration the runtime's workspace allocator serves. Size 0
//! takes nothing. When alloc or getAddrFromBlock returns NULL nothing is
//! enqueued and the call fails with `ACL_ERROR_RT_MEMORY_ALLOCATION`.

use super::host::HostRuntime;
use super::model::Held;
use super::stream_worker::{KernelFn, Task};
use crate::base::error::{Error, Result};
use crate::base::foreign_call::{self, Callback};
use crate::base::serving::Serving;
use crate::registry::StreamKey;
use std::ffi::c_void;

impl HostRuntime {
    /// Launches `kernel(workspace, size, user_data)` on `stream` (NULL: the
    /// current context's default stream) with a workspace of `size` bytes.
    pub fn launch(
        &self,
        stream: Option<StreamKey>,
        size: usize,
        kernel: KernelFn,
        user_data: *mut c_void,
    ) -> Result<()> {
        // A kernel handed memory of a sleeping pool would fault on it.
        if let Some(reason) = crate::base::asleep::find(user_data as usize) {
            return Err(Error::InvalidAddress {
                param: "userData",
                addr: user_data as usize,
                len: 1,
                reason,
            });
        }
        let (key, stream) = self.resolve_stream(stream)?;
        // While capturing, the workspace is the model's (see `model::Held`).
        let capture = stream.capture().map(|(c, _)| c);
        let task = |workspace: *mut c_void, release: bool| Task::Kernel {
            kernel,
            workspace,
            size,
            user_data,
            release,
        };
        if size == 0 {
            return stream.enqueue(task(std::ptr::null_mut(), false));
        }
        // Allocators shared by streams read the stream being served.
        let _in_launch = Serving::enter(key.get().get());
        if let Ok(registration) = self.allocators().get_by_stream(key) {
            // With tracking on, the tracking layer's callbacks wrap the user's.
            let c = if crate::registry::observer::intercepting() {
                self.observer().callbacks_for(key, &registration)
            } else {
                registration.callbacks
            };
            let obj = c.obj.as_ptr();
            let stream_id = key.get().get();
            let descriptor = registration.descriptor.get();
            // SAFETY: `alloc` and its object were registered for this stream,
            // and are called as CANN calls them; a callback that throws ends
            // the process with its name (`foreign_call`).
            let block = unsafe {
                foreign_call::alloc(c.alloc, obj, size, || Callback::Alloc {
                    stream: stream_id,
                    descriptor,
                })
            };
            if block.is_null() {
                return Err(Error::WorkspaceAlloc {
                    stream: stream_id,
                    size,
                });
            }
            // SAFETY: `getAddrFromBlock` registered for this stream, called as CANN calls it
            // with the block its `alloc` just returned.
            let addr = unsafe {
                foreign_call::get_addr_from_block(c.get_addr_from_block, block, || {
                    Callback::GetAddrFromBlock {
                        stream: stream_id,
                        descriptor,
                    }
                })
            };
            let enqueued = if addr.is_null() {
                Err(Error::WorkspaceAddr {
                    stream: stream_id,
                    size,
                })
            } else {
                stream.enqueue(task(addr, false))
            };
            if let (Some(capture), Ok(())) = (&capture, enqueued) {
                // Given back with this `free` when the model goes; an
                // observer that wrapped the callbacks hears of the hold.
                let observer = crate::registry::observer::intercepting().then(|| self.observer());
                if let Some(o) = observer {
                    o.workspace_held(block as usize, capture.model_handle);
                }
                capture.hold(Held::Registered {
                    callbacks: c,
                    block,
                    stream: stream_id,
                    descriptor,
                    observer,
                });
                return Ok(());
            }
            // SAFETY: `free` registered for this stream, called as CANN calls it, once, with
            // the block its `alloc` returned.
            unsafe {
                foreign_call::free(c.free, obj, block, || Callback::Free {
                    stream: stream_id,
                    descriptor,
                })
            };
            return enqueued;
        }
        let allocator = stream.workspace_allocator();
        let workspace = allocator.alloc(stream.memory(), key, size)?;
        if let Some(capture) = capture {
            let enqueued = stream.enqueue(task(workspace.ptr.as_ptr().cast(), false));
            let held = Held::Default {
                allocator,
                memory: std::sync::Arc::clone(stream.memory()),
                ptr: workspace.ptr,
            };
            // Refused: the workspace goes back at once, with `held`.
            if enqueued.is_ok() {
                capture.hold(held);
            }
            return enqueued;
        }
        let in_order = workspace.free_in_stream_order;
        let enqueued = stream.enqueue(task(workspace.ptr.as_ptr().cast(), !in_order));
        if in_order || enqueued.is_err() {
            allocator.free(stream.memory(), workspace.ptr);
        }
        enqueued
    }
}
