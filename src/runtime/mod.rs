//! A small, honest ACL runtime on the host.
//!
//! Lets programs written against CANN run on any Linux machine: a device is
//! a budget of host memory, a stream an in-order queue run by a host worker
//! thread, and [`launch`](HostRuntime::launch) (`aclallocLaunchKernel`)
//! consumes a stream's registered allocator the way CANN's executor does.
//!
//! | module | concern |
//! | --- | --- |
//! | [`config`] | `ACLALLOC_DEVICE_COUNT`, `ACLALLOC_DEVICE_MEMORY` |
//! | [`mod@host`] | the runtime's state, `aclInit` / `aclFinalize` |
//! | [`device`] | devices and their set/reset counting |
//! | [`context`] | contexts and the per-thread current context |
//! | [`stream_worker`] | one stream: the bounded queue and its worker thread |
//! | [`streams`] | the live streams, the default stream, destroy semantics |
//! | `launch_cache` | the per-thread cache that keeps launches off the stream table's lock |
//! | `fork` | streams inherited through `fork()`: refused, never waited for |
//! | `waits` | kernels that wait for streams: no two wait for each other |
//! | [`memory`] | one device's memory: lazy mappings, the live-allocation table |
//! | [`memops`] | malloc, free, memcpy, memset, meminfo |
//! | [`launch`] | launches with workspaces from the stream's allocator |
//! | [`workspace`] | the workspace allocator interface, and direct device memory behind it |
//! | [`virtual_memory`] | reservations, physical memory, mappings (`aclrtReserveMemAddress`, ...) |
//! | `virtual_memory_calls` | the virtual-memory calls: CANN's argument rules, device accounting |
//!
//! Handles given to C (streams: tag `0xACA3`, contexts: tag `0xACA4`) are
//! looked up in live-handle tables, never dereferenced.
//!
//! The C exports reach this runtime (or a real CANN runtime behind this
//! library) through the dispatch table of `crate::ffi::dispatch`; the
//! process-wide instance is built by `crate::ffi::process`.

pub mod config;
pub mod context;
pub mod device;
mod fork;
pub mod host;
pub mod launch;
mod launch_cache;
pub mod memops;
pub mod memory;
pub mod stream_worker;
pub mod streams;
pub mod virtual_memory;
mod virtual_memory_calls;
mod waits;
pub mod workspace;

pub use host::HostRuntime;
