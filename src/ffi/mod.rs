//! The C ABI: CANN's functions and types, each a thin layer over the safe core.
//!
//! Every export goes through `boundary::boundary`, which catches panics,
//! records the failure for `aclGetRecentErrMsg` and turns it into an ACL
//! error code; pointer arguments are checked and converted in `args`. The
//! runtime exports forward or run the host runtime through one macro
//! ([`dispatch`]); in front of a real runtime the allocator exports run the
//! bodies of `forward`.

pub mod allocator;
pub(crate) mod args;
pub(crate) use crate::base::boundary;
pub mod default_allocator;
pub mod default_init;
pub mod device_info;
pub mod dispatch;
pub mod empty_kernel;
pub mod errmsg;
pub mod event_order;
pub mod events;
pub(crate) mod forward;
pub mod host;
pub mod host_memory;
pub mod host_memory_stats;
pub mod ipc_events;
pub mod ipc_memory;
pub mod launch;
pub mod mem_pool;
pub mod memory;
pub mod notify;
pub mod plugin;
pub mod plugin_hooks;
pub mod pool;
pub mod process;
pub mod runtime;
pub mod sharing;
pub mod stream_attribute;
pub mod stream_control;
pub mod stream_info;
pub mod task_failure;
pub mod tracking;
pub mod types;
pub mod virtual_memory;
