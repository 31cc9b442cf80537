//! The default allocator as the host runtime's workspace allocator: what
//! serves launches on streams without a registration.

use super::{global, Kind};
use crate::core::errlog;
use crate::core::error::Result;
use crate::core::serving;
use crate::runtime::memory::DeviceHeap;
use crate::runtime::workspace::{DirectDeviceMemory, WorkspaceAllocator};
use std::ptr::NonNull;

/// Serves workspaces from the default allocator. The first workspace fixes
/// the default allocator (no swap after it).
///
/// Blocks go back only once their kernel has run (not in stream order): the
/// default allocator serves every stream, and an allocator that is not known
/// to reuse blocks per stream must not see a block again while a kernel on
/// another stream may still write to it.
#[derive(Debug, Default, Clone, Copy)]
pub struct DefaultWorkspaces;

impl WorkspaceAllocator for DefaultWorkspaces {
    fn alloc(&self, memory: &DeviceHeap, size: usize) -> Result<NonNull<u8>> {
        let default = global();
        if default.serving()?.kind == Kind::Device {
            // The stream's own device memory, as the runtime always did.
            return DirectDeviceMemory.alloc(memory, size);
        }
        default.alloc(size, serving::current()).map(NonNull::cast)
    }

    fn free(&self, memory: &DeviceHeap, workspace: NonNull<u8>) {
        let default = global();
        // Frozen since `alloc`: the same allocator takes it back.
        if default.serving().is_ok_and(|s| s.kind == Kind::Device) {
            return DirectDeviceMemory.free(memory, workspace);
        }
        if let Err(e) = default.free(workspace.cast()) {
            errlog::record("aclalloc default workspace free", e);
        }
    }

    fn frees_in_stream_order(&self) -> bool {
        false
    }
}
