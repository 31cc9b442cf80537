//! # aclalloc
//!
//! CANN's custom-allocator API for Ascend NPUs (`aclrtAllocator*` from
//! `acl/acl_rt_allocator.h`), implemented in Rust with the exact C ABI, so
//! that C/C++ inference code written against CANN's headers builds and links
//! against `libaclalloc.so` unchanged.
//!
//! The crate has two faces over one core:
//! - the safe Rust API: [`AllocatorApi`] (descriptors and registrations),
//!   [`StreamRegistry`] and the lock-free [`registry::SeqTable`] under it;
//! - the C ABI in [`ffi`], a thin layer in which every function validates its
//!   arguments, never dereferences a handle it did not hand out, never lets a
//!   panic cross into C, and leaves a CANN-shaped message for
//!   `aclGetRecentErrMsg` on failure.
//!
//! [`runtime`] is a small ACL runtime on the host (`aclInit`, devices,
//! contexts, streams run by host threads, device memory, and
//! `aclallocLaunchKernel`, which consumes a stream's registered allocator as
//! CANN's executor does), so CANN programs run without an NPU.
//!
//! Hardening beyond CANN: a destroyed, foreign or forged descriptor handle is
//! refused with `ACL_ERROR_INVALID_PARAM` instead of being dereferenced, a new
//! descriptor starts empty, and an unset allocAdvise reads back as NULL.

pub mod core;
pub mod default_allocator;
pub mod ffi;
pub mod plugin;
pub mod pool;
pub mod registry;
pub mod runtime;

pub use crate::core::api::{global, AllocatorApi};
pub use crate::core::descriptor::{
    AllocAdviseFn, AllocFn, AllocatorObj, Callbacks, Descriptor, FreeFn, GetAddrFromBlockFn,
};
pub use crate::core::errlog::take_recent as take_recent_error_messages;
pub use crate::core::error::{aclError, Error, Result};
pub use crate::registry::{DescriptorHandle, Registration, StreamKey, StreamRegistry};
pub mod interpose;
pub mod tracking;
