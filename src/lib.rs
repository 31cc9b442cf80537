//! # aclalloc
//!
//! CANN's custom-allocator API for Ascend NPUs (`aclrtAllocator*` from
//! `acl/acl_rt_allocator.h`), implemented in Rust with the exact C ABI, so
//! that C/C++ inference code written against CANN's headers builds and links
//! against `libaclalloc.so` unchanged, and a good deal around it.
//!
//! ## Map
//!
//! Five layers; a module imports only lower ones (`tests/layers.rs` checks
//! it, `docs/ARCHITECTURE.md` draws it and follows calls through it).
//!
//! - [`ffi`] (top): the C ABI, a thin layer in which every function
//!   validates its arguments, never dereferences a handle it did not hand
//!   out, never lets a panic cross into C, and leaves a CANN-shaped message
//!   for `aclGetRecentErrMsg` on failure; the dispatch table of the runtime
//!   exports (host or real runtime, chosen once); and [`ffi::process`], the
//!   composition root that creates the process-wide objects and wires the
//!   layers at load time.
//! - [`default_allocator`]: what serves streams with no registration, chosen
//!   at start-up or swapped once; [`interpose`]: finding a real CANN behind
//!   this library (`LD_PRELOAD`, the `aclalloc run` command).
//! - Independent subsystems, which never import each other:
//!   [`runtime`], a small ACL runtime on the host (devices, contexts,
//!   streams run by host threads, device memory, and `aclallocLaunchKernel`,
//!   which takes workspaces from a stream's allocator as CANN's executor
//!   does); [`pool`], a caching pool allocator with PyTorch-grade statistics;
//!   [`plugin`], allocators loaded from a shared object by symbol names
//!   (torch_npu's `NPUPluggableAllocator`); [`tracking`], checking what a
//!   runtime does with the user's allocators.
//! - [`history`]: the allocation history recorder (a bounded ring of
//!   events, PyTorch's `device_traces`), used by the subsystems above; and
//!   [`viz`]: the offline page that draws a snapshot with its history
//!   (`aclalloc viz`), which only reads JSON.
//! - [`registry`]: which allocator serves which stream (its lock-free,
//!   allocation-free [`core::table::Table`] looked up on every launch),
//!   [`AllocatorApi`] (descriptors and registrations), and the observer a
//!   runtime reports stream events to.
//! - [`core`] (bottom): errors with CANN's codes, the per-thread log, the one
//!   panic boundary, the C vocabulary, a typed handle per kind of object
//!   handed to C and the one lock-free table of live handles,
//!   descriptors, the statistic type, "the stream being served" and the
//!   device port through which every layer reaches device memory.
//!
//! Hardening beyond CANN: a destroyed, foreign or forged handle is refused
//! with `ACL_ERROR_INVALID_PARAM` instead of being dereferenced, a new
//! descriptor starts empty, and an unset allocAdvise reads back as NULL.

// Every unsafe operation, also inside an `unsafe fn`, sits in an `unsafe`
// block with its own `// SAFETY:` comment; clippy refuses a block without one.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

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

pub use crate::core::descriptor::{
    AllocAdviseFn, AllocFn, AllocatorObj, Callbacks, Descriptor, FreeFn, GetAddrFromBlockFn,
};
pub use crate::core::errlog::take_recent as take_recent_error_messages;
pub use crate::core::error::{aclError, Error, Result};
pub use crate::registry::api::{global, AllocatorApi};
pub use crate::registry::{DescriptorHandle, Registration, StreamKey, StreamRegistry};
