//! A small, honest ACL runtime on the host.
//!
//! Lets programs written against CANN run on any Linux machine: a device is
//! a budget of host memory, a stream an in-order queue run by a host worker
//! thread, and [`launch`](HostRuntime::launch) (`aclallocLaunchKernel`)
//! consumes a stream's registered allocator the way CANN's executor does.
//!
//! Handles given to C (streams: tag `0xACA3`, contexts: tag `0xACA4`) are
//! looked up in live-handle tables, never dereferenced. The C exports reach
//! this runtime through `crate::ffi::wiring::dispatch`; `crate::ffi::wiring::process` builds
//! the process-wide instance.

// Every unsafe operation sits in an `unsafe` block with its own `// SAFETY:` comment.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

use aclalloc_core::{base, history, registry};

pub mod callbacks;
pub mod capture;
pub mod config;
pub mod context;
pub mod data_buffer;
pub mod device;
mod device_copy;
pub mod events;
pub mod exceptions;
mod fork;
pub mod graph_memory;
pub mod half;
pub mod host;
mod host_memory;
mod host_ranges;
mod host_register;
mod ipc_event;
mod kernel_args;
pub mod kernel_binary;
mod kernel_launch;
pub mod labels;
pub mod launch;
mod launch_cache;
mod managed_memory;
pub mod memops;
pub mod memory;
pub mod model;
mod model_calls;
mod notify;
mod overflow;
mod owned_task;
pub mod random_num;
pub mod reduce;
mod res_limits;
pub mod sharing;
mod sharing_calls;
mod sharing_word;
mod stream_attributes;
mod stream_control;
mod stream_queries;
pub mod stream_worker;
pub mod streams;
pub mod virtual_memory;
mod virtual_memory_calls;
mod waits;
pub mod workspace;

pub use host::HostRuntime;
pub use host_memory::{DurationStat, HostMemoryStats};
