//! # aclalloc
//!
//! CANN's custom-allocator API for Ascend NPUs (`aclrtAllocator*` from
//! `acl/acl_rt_allocator.h`), implemented in Rust with the exact C ABI, so
//! that C/C++ inference code written against CANN's headers builds and links
//! against `libaclalloc.so` unchanged, and a good deal around it.
//!
//! This package is the library users link: its cdylib is `libaclalloc.so`,
//! which exports the C functions the `aclalloc-capi` crate defines, and its
//! rlib gathers the crates of the workspace under one name for Rust code.
//! `docs/ARCHITECTURE.md` is the one map of the crates and their layers.
//!
//! Hardening beyond CANN: a destroyed, foreign or forged handle is refused
//! with `ACL_ERROR_INVALID_PARAM` instead of being dereferenced, a new
//! descriptor starts empty, and an unset allocAdvise reads back as NULL.

pub use aclalloc_capi::{default_allocator, ffi, interpose};
pub use aclalloc_core::{base, history, registry};
pub use aclalloc_plugin as plugin;
pub use aclalloc_pool as pool;
pub use aclalloc_runtime as runtime;
pub use aclalloc_tracking as tracking;

pub use crate::base::descriptor::{
    AllocAdviseFn, AllocFn, AllocatorObj, Callbacks, Descriptor, FreeFn, GetAddrFromBlockFn,
};
pub use crate::base::errlog::take_recent as take_recent_error_messages;
pub use crate::base::error::{aclError, Error, Result};
pub use crate::registry::api::{global, AllocatorApi};
pub use crate::registry::{DescriptorHandle, Registration, StreamKey, StreamRegistry};
