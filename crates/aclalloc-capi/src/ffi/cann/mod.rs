//! CANN's functions and types, with CANN's names and C signatures: the
//! allocator API (`acl_rt_allocator.h`) and the runtime around it
//! (`acl.h`, `acl_rt.h`, `acl_rt_memory_soma.h`). The runtime exports' bodies are
//! `crate::ffi::wiring::dispatch::real_or_host!`.

pub mod allocator;
pub mod builtin_tasks;
pub mod capabilities;
pub mod data_buffer;
pub mod device_info;
pub mod device_limits;
pub mod errmsg;
pub mod events;
pub mod exceptions;
pub mod host_memory;
pub mod host_register;
pub mod ipc_events;
pub mod ipc_memory;
pub mod kernels;
pub mod labels;
pub mod managed_memory;
pub mod memory;
pub mod model_ri;
pub mod notify;
pub mod overflow;
pub mod runtime;
pub mod sharing;
pub mod stream_attribute;
pub mod stream_control;
pub mod stream_info;
pub mod stream_ordered;
pub mod types;
pub mod virtual_memory;
