//! # aclalloc
//!
//! CANN's custom-allocator API for Ascend NPUs (`aclrtAllocator*` from
//! `acl/acl_rt_allocator.h`), implemented in Rust with the exact C ABI, so
//! that C/C++ inference code written against CANN's headers builds and links
//! against `libaclalloc.so` unchanged, and a good deal around it.
//!
//! ## Map
//!
//! - [`core`]: the safe core: errors with CANN's codes, the per-thread log
//!   behind `aclGetRecentErrMsg`, tables of live handles, allocator
//!   descriptors, and [`AllocatorApi`] (descriptors and registrations).
//! - [`registry`]: which allocator serves which stream; the lock-free,
//!   allocation-free [`registry::SeqTable`] looked up on every launch.
//! - [`runtime`]: a small ACL runtime on the host (devices, contexts, streams
//!   run by host threads, device memory, and `aclallocLaunchKernel`, which
//!   takes workspaces from a stream's allocator as CANN's executor does),
//!   behind one table of functions chosen once at load.
//! - [`pool`]: a caching pool allocator to register, with PyTorch-grade
//!   statistics, summary and snapshot.
//! - [`history`]: the allocation history recorder (a bounded ring of
//!   events, PyTorch's `device_traces`), and [`viz`]: the offline page that
//!   draws a snapshot with its history (`aclalloc viz`).
//! - [`plugin`]: allocators loaded from a shared object by symbol names
//!   (torch_npu's `NPUPluggableAllocator`), and [`default_allocator`]: what
//!   serves streams with no registration, chosen at start-up or swapped once.
//! - [`interpose`] and [`tracking`]: in front of a real CANN with
//!   `LD_PRELOAD`, forwarding to it and checking what it does with the user's
//!   allocators (the `aclalloc run` command).
//! - [`ffi`]: the C ABI, a thin layer in which every function validates its
//!   arguments, never dereferences a handle it did not hand out, never lets a
//!   panic cross into C, and leaves a CANN-shaped message for
//!   `aclGetRecentErrMsg` on failure.
//!
//! Hardening beyond CANN: a destroyed, foreign or forged handle is refused
//! with `ACL_ERROR_INVALID_PARAM` instead of being dereferenced, a new
//! descriptor starts empty, and an unset allocAdvise reads back as NULL.

pub mod core;
pub mod default_allocator;
pub mod ffi;
pub mod history;
pub mod interpose;
pub mod plugin;
pub mod pool;
pub mod registry;
pub mod runtime;
pub mod tracking;
pub mod viz;

pub use crate::core::api::{global, AllocatorApi};
pub use crate::core::descriptor::{
    AllocAdviseFn, AllocFn, AllocatorObj, Callbacks, Descriptor, FreeFn, GetAddrFromBlockFn,
};
pub use crate::core::errlog::take_recent as take_recent_error_messages;
pub use crate::core::error::{aclError, Error, Result};
pub use crate::registry::{DescriptorHandle, Registration, StreamKey, StreamRegistry};
