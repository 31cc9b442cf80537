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
//! it, `docs/ARCHITECTURE.md` draws it).
//!
//! - [`ffi`] (top): the C ABI (every function validates its arguments, keeps
//!   panics out of C and leaves a message for `aclGetRecentErrMsg`), the
//!   dispatch table of the runtime exports, and [`ffi::process`], the
//!   composition root.
//! - [`default_allocator`], what serves streams with no registration;
//!   [`interpose`], finding a real CANN behind this library.
//! - Independent subsystems: [`runtime`] (a host ACL runtime with
//!   `aclallocLaunchKernel`), [`pool`] (a caching pool with PyTorch-grade
//!   statistics), [`plugin`] (allocators loaded from a shared object),
//!   [`tracking`] (checking what a runtime does with the user's allocators).
//! - [`history`], the allocation history recorder, and [`viz`], the offline
//!   page that draws a snapshot (`aclalloc viz`).
//! - [`registry`]: which allocator serves which stream, [`AllocatorApi`],
//!   and the observer of stream events.
//! - [`base`] (bottom): errors with CANN's codes, the panic boundary, the C
//!   vocabulary, typed handles and their lock-free table, descriptors, and
//!   the device port.
//!
//! Hardening beyond CANN: a destroyed, foreign or forged handle is refused
//! with `ACL_ERROR_INVALID_PARAM` instead of being dereferenced, a new
//! descriptor starts empty, and an unset allocAdvise reads back as NULL.

// Every unsafe operation, also inside an `unsafe fn`, sits in an `unsafe`
// block with its own `// SAFETY:` comment; clippy refuses a block without one.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod base;
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

pub use crate::base::descriptor::{
    AllocAdviseFn, AllocFn, AllocatorObj, Callbacks, Descriptor, FreeFn, GetAddrFromBlockFn,
};
pub use crate::base::errlog::take_recent as take_recent_error_messages;
pub use crate::base::error::{aclError, Error, Result};
pub use crate::registry::api::{global, AllocatorApi};
pub use crate::registry::{DescriptorHandle, Registration, StreamKey, StreamRegistry};
