//! The four callbacks of a pool's descriptor (alloc, free, allocAdvise,
//! getAddrFromBlock), and `callbacks_of`, which names them for the default
//! allocator.

#![allow(non_snake_case, non_camel_case_types)]

use crate::base::boundary::ffi_boundary;
use crate::base::descriptor::{AllocatorObj, Callbacks};
use crate::base::error::Error;
use crate::base::serving;
use crate::ffi::cann::types::*;
use crate::pool::handles;
use std::ffi::c_void;

/// The pool's alloc callback: a block of at least `size` bytes (rounded up to
/// 512), or NULL with a message giving the bytes requested, allocated,
/// reserved and the limit.
///
/// CANN gives the callbacks no stream and frees blocks in stream order, so a
/// block freed by one stream must not go to another's kernel. Called from
/// `aclallocLaunchKernel` (or through a stream descriptor) the pool knows the
/// stream and keeps each stream's freed blocks for it; otherwise all callers
/// share stream 0, which is right for synchronous use.
#[no_mangle]
pub extern "C" fn aclallocPoolAlloc(allocator: aclrtAllocator, size: usize) -> *mut c_void {
    ffi_boundary!(|| {
        let block = handles::with_stream(allocator, |pool, bound| {
            let stream = if bound != 0 {
                bound
            } else {
                serving::current_raw()
            };
            pool.malloc_on(stream, size)
        })??;
        Ok(block.get() as *mut c_void)
    })
}

/// The pool's free callback. A block that is not a live block of this pool
/// (foreign, or already freed) is reported through `aclGetRecentErrMsg` and
/// ignored.
#[no_mangle]
pub extern "C" fn aclallocPoolFree(allocator: aclrtAllocator, block: aclrtAllocatorBlock) {
    ffi_boundary!(|| {
        handles::with(allocator, |pool| {
            if block.is_null() {
                return Err(Error::NullPointer { param: "block" });
            }
            pool.free(block as usize)
        })?
    })
}

/// The pool's allocAdvise callback: the block at `addr` if that range is free
/// in the pool, otherwise as `aclallocPoolAlloc`.
#[no_mangle]
pub extern "C" fn aclallocPoolAllocAdvise(
    allocator: aclrtAllocator,
    size: usize,
    addr: aclrtAllocatorAddr,
) -> *mut c_void {
    ffi_boundary!(|| {
        let block = handles::with(allocator, |pool| pool.malloc_at(size, addr as usize))??;
        Ok(block.get() as *mut c_void)
    })
}

/// The pool's getAddrFromBlock callback: a pool block is its device address.
#[no_mangle]
pub extern "C" fn aclallocPoolGetAddrFromBlock(block: aclrtAllocatorBlock) -> *mut c_void {
    block
}

/// The pool's C callbacks for the pool whose handle is `obj`, as its descriptor holds them.
pub(crate) fn callbacks_of(obj: AllocatorObj) -> Callbacks {
    Callbacks {
        obj,
        alloc: aclallocPoolAlloc,
        free: aclallocPoolFree,
        alloc_advise: Some(aclallocPoolAllocAdvise),
        get_addr_from_block: aclallocPoolGetAddrFromBlock,
    }
}
