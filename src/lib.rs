//! # aclalloc
//!
//! CANN's custom-allocator API for Ascend NPUs (`aclrtAllocator*` from
//! `acl/acl_rt_allocator.h`), implemented in Rust with the exact C ABI, so
//! that C/C++ inference code written against CANN's headers builds and links
//! against `libaclalloc.so` unchanged, and a good deal around it.
//!
//! ## Map
//!
//! The crate is built in layers, and a module imports only modules of lower
//! layers (`tests/layers.rs` checks it). `docs/ARCHITECTURE.md` is the one
//! map: it draws the layers, says what each module owns and where each part
//! of the repository lives. The C ABI is [`ffi`], the top layer; [`base`] is
//! the bottom one.
//!
//! Hardening beyond CANN: a destroyed, foreign or forged handle is refused
//! with `ACL_ERROR_INVALID_PARAM` instead of being dereferenced, a new
//! descriptor starts empty, and an unset allocAdvise reads back as NULL.

// Every unsafe operation, also inside an `unsafe fn`, sits in an `unsafe`
// block with its own `// SAFETY:` comment; clippy refuses a block without one.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub use aclalloc_core::{base, history, registry};
pub mod default_allocator;
pub mod ffi;
pub mod interpose;
pub mod plugin;
pub mod pool;
pub mod runtime;
pub mod tracking;

pub use crate::base::descriptor::{
    AllocAdviseFn, AllocFn, AllocatorObj, Callbacks, Descriptor, FreeFn, GetAddrFromBlockFn,
};
pub use crate::base::errlog::take_recent as take_recent_error_messages;
pub use crate::base::error::{aclError, Error, Result};
pub use crate::registry::api::{global, AllocatorApi};
pub use crate::registry::{DescriptorHandle, Registration, StreamKey, StreamRegistry};
