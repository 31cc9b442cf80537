//! The default allocator as the host runtime's workspace allocator: what
//! serves launches on streams without a registration.

use super::{global, Kind};
use crate::base::errlog;
use crate::base::error::Result;
use crate::registry::StreamKey;
use crate::runtime::memory::DeviceHeap;
use crate::runtime::workspace::{DirectDeviceMemory, Workspace, WorkspaceAllocator};
use std::ptr::NonNull;

/// Serves workspaces from the default allocator. The first workspace fixes
/// the default allocator (no swap after it).
///
/// The caching pool (its fast path, [`super::InUse::pool`]) reuses a block
/// freed by work on one stream only for that stream, so its workspaces go
/// back in stream order, on the launching thread, as with a registered
/// pool. Other allocators get their blocks back only once the kernel has run:
/// the default allocator serves every stream, and an allocator that is not
/// known to reuse blocks per stream must not see a block again while a
/// kernel on another stream may still write to it.
#[derive(Debug, Default, Clone, Copy)]
pub struct DefaultWorkspaces;

impl WorkspaceAllocator for DefaultWorkspaces {
    #[inline]
    fn alloc(&self, memory: &DeviceHeap, stream: StreamKey, size: usize) -> Result<Workspace> {
        // A capture pool the stream is routed to serves first.
        if let Some(routed) = super::mem_pool::route_stream(size, stream.get().get()) {
            return Ok(Workspace {
                ptr: NonNull::new(routed?.get() as *mut u8).expect("non-zero"),
                free_in_stream_order: true,
            });
        }
        let default = global();
        let in_use = default.frozen()?;
        if let Some(pool) = in_use.fast_pool() {
            let addr = pool.malloc_on(stream.get().get(), size)?;
            return Ok(Workspace {
                ptr: NonNull::new(addr.get() as *mut u8).expect("non-zero"),
                free_in_stream_order: true,
            });
        }
        if in_use.source.kind == Kind::Device {
            // The stream's own device memory, as the runtime always did.
            return DirectDeviceMemory.alloc(memory, stream, size);
        }
        Ok(Workspace {
            ptr: default.alloc(size, Some(stream))?.cast(),
            free_in_stream_order: false,
        })
    }

    #[inline]
    fn free(&self, memory: &DeviceHeap, workspace: NonNull<u8>) {
        // A memory pool's block (a capture pool's) goes back there.
        if let Some(freed) = super::mem_pool::route_free(workspace.as_ptr() as usize) {
            if let Err(e) = freed {
                errlog::record("aclalloc default workspace free", e);
            }
            return;
        }
        let default = global();
        // Frozen since `alloc`: the same allocator takes it back.
        let direct = default
            .frozen()
            .is_ok_and(|u| u.pool.is_none() && !u.per_device && u.source.kind == Kind::Device);
        if direct {
            return DirectDeviceMemory.free(memory, workspace);
        }
        if let Err(e) = default.free(workspace.cast()) {
            errlog::record("aclalloc default workspace free", e);
        }
    }
}
