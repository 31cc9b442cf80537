//! The runtime's default device allocator: what serves a launch's workspace
//! when its stream has no registered allocator.
//!
//! Behind [`WorkspaceAllocator`] it can be swapped (a caching pool, a
//! plug-in). An allocator that reuses blocks only for later work on the same
//! stream (`free_in_stream_order`) gets its block back right after the launch
//! is enqueued, as CANN does; any other once the kernel has finished.

use super::memory::DeviceHeap;
use crate::base::error::Result;
use crate::base::ids::StreamKey;
use std::ptr::NonNull;

/// A workspace an allocator handed out, and when it may be given back.
#[derive(Clone, Copy, Debug)]
pub struct Workspace {
    /// Its address.
    pub ptr: NonNull<u8>,
    /// True when it may be freed once its launch is enqueued (reused only by
    /// later work on the stream); otherwise the worker frees it after the kernel.
    pub free_in_stream_order: bool,
}

/// A device allocator that serves workspaces of launches on streams without a registered allocator.
pub trait WorkspaceAllocator: Send + Sync {
    /// A workspace of `size` (> 0) bytes in `memory`, for a kernel on `stream`.
    fn alloc(&self, memory: &DeviceHeap, stream: StreamKey, size: usize) -> Result<Workspace>;
    /// Gives back a workspace `alloc` returned.
    fn free(&self, memory: &DeviceHeap, workspace: NonNull<u8>);
}

/// Takes every workspace straight from device memory and returns it once its kernel has run.
#[derive(Debug, Default, Clone, Copy)]
pub struct DirectDeviceMemory;

impl WorkspaceAllocator for DirectDeviceMemory {
    fn alloc(&self, memory: &DeviceHeap, _stream: StreamKey, size: usize) -> Result<Workspace> {
        Ok(Workspace {
            ptr: memory.alloc(size)?,
            free_in_stream_order: false,
        })
    }

    fn free(&self, memory: &DeviceHeap, workspace: NonNull<u8>) {
        // Only ever called with a pointer `alloc` returned, so it cannot fail.
        let _ = memory.free(workspace.as_ptr());
    }
}

/// The allocator new streams use for workspaces when nothing is registered.
pub fn direct_device_memory() -> &'static dyn WorkspaceAllocator {
    static DIRECT: DirectDeviceMemory = DirectDeviceMemory;
    &DIRECT
}
