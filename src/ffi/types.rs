//! CANN's C types, spelled as `acl_base.h` and `acl_rt_allocator.h` spell them.
#![allow(non_camel_case_types)]

use std::ffi::c_void;

pub use crate::core::error::aclError;

/// A stream handle.
pub type aclrtStream = *mut c_void;
/// An allocator descriptor handle, from `aclrtAllocatorCreateDesc`.
pub type aclrtAllocatorDesc = *mut c_void;
/// The user's allocator object.
pub type aclrtAllocator = *mut c_void;
/// A block handed out by the user's allocator.
pub type aclrtAllocatorBlock = *mut c_void;
/// A device address.
pub type aclrtAllocatorAddr = *mut c_void;

/// Allocates a block of at least `size` bytes; NULL on failure.
pub type aclrtAllocatorAllocFunc =
    Option<unsafe extern "C" fn(allocator: aclrtAllocator, size: usize) -> *mut c_void>;
/// Returns a block to the allocator.
pub type aclrtAllocatorFreeFunc =
    Option<unsafe extern "C" fn(allocator: aclrtAllocator, block: aclrtAllocatorBlock)>;
/// Allocates a block of at least `size` bytes, preferably at `addr`.
pub type aclrtAllocatorAllocAdviseFunc = Option<
    unsafe extern "C" fn(
        allocator: aclrtAllocator,
        size: usize,
        addr: aclrtAllocatorAddr,
    ) -> *mut c_void,
>;
/// The device address of a block.
pub type aclrtAllocatorGetAddrFromBlockFunc =
    Option<unsafe extern "C" fn(block: aclrtAllocatorBlock) -> *mut c_void>;
