//! CANN's `acl_rt_allocator.h`: allocator descriptors and their registration
//! on streams.
#![allow(non_snake_case)]

use super::args::{self, write_optional, Out};
use super::boundary::boundary;
use super::types::*;
use crate::core::api::global;
use crate::core::descriptor::{AllocatorObj, Descriptor};
use crate::core::error::Result;

/// Creates an empty allocator descriptor: no object, no callbacks.
/// Returns NULL on failure.
#[no_mangle]
pub extern "C" fn aclrtAllocatorCreateDesc() -> aclrtAllocatorDesc {
    boundary("aclrtAllocatorCreateDesc", || {
        Ok(global().create_descriptor()?.as_ptr())
    })
}

/// Destroys a descriptor. Registrations made from it stay in force.
/// NULL, a destroyed descriptor or anything that is not a descriptor:
/// `ACL_ERROR_INVALID_PARAM`.
#[no_mangle]
pub extern "C" fn aclrtAllocatorDestroyDesc(allocatorDesc: aclrtAllocatorDesc) -> aclError {
    boundary("aclrtAllocatorDestroyDesc", || {
        global().destroy_descriptor(args::descriptor(allocatorDesc)?)
    })
}

/// Sets one field of a live descriptor from a non-NULL value.
fn set_field<T>(
    function: &'static str,
    desc: aclrtAllocatorDesc,
    value: Option<T>,
    param: &'static str,
    apply: impl FnOnce(&mut Descriptor, T),
) -> aclError {
    boundary(function, || -> Result<()> {
        let desc = args::descriptor(desc)?;
        let value = args::required(value, param)?;
        global().update_descriptor(desc, |d| apply(d, value))
    })
}

/// Sets the allocator object passed to the callbacks.
#[no_mangle]
pub extern "C" fn aclrtAllocatorSetObjToDesc(
    allocatorDesc: aclrtAllocatorDesc,
    allocator: aclrtAllocator,
) -> aclError {
    set_field(
        "aclrtAllocatorSetObjToDesc",
        allocatorDesc,
        AllocatorObj::new(allocator),
        "allocator",
        |d, obj| d.obj = Some(obj),
    )
}

/// Sets the function that allocates a block.
#[no_mangle]
pub extern "C" fn aclrtAllocatorSetAllocFuncToDesc(
    allocatorDesc: aclrtAllocatorDesc,
    func: aclrtAllocatorAllocFunc,
) -> aclError {
    set_field(
        "aclrtAllocatorSetAllocFuncToDesc",
        allocatorDesc,
        func,
        "func",
        |d, f| d.alloc = Some(f),
    )
}

/// Sets the function that frees a block.
#[no_mangle]
pub extern "C" fn aclrtAllocatorSetFreeFuncToDesc(
    allocatorDesc: aclrtAllocatorDesc,
    func: aclrtAllocatorFreeFunc,
) -> aclError {
    set_field(
        "aclrtAllocatorSetFreeFuncToDesc",
        allocatorDesc,
        func,
        "func",
        |d, f| d.free = Some(f),
    )
}

/// Sets the function that allocates a block at a suggested address (optional).
#[no_mangle]
pub extern "C" fn aclrtAllocatorSetAllocAdviseFuncToDesc(
    allocatorDesc: aclrtAllocatorDesc,
    func: aclrtAllocatorAllocAdviseFunc,
) -> aclError {
    set_field(
        "aclrtAllocatorSetAllocAdviseFuncToDesc",
        allocatorDesc,
        func,
        "func",
        |d, f| d.alloc_advise = Some(f),
    )
}

/// Sets the function that maps a block to its device address.
#[no_mangle]
pub extern "C" fn aclrtAllocatorSetGetAddrFromBlockFuncToDesc(
    allocatorDesc: aclrtAllocatorDesc,
    func: aclrtAllocatorGetAddrFromBlockFunc,
) -> aclError {
    set_field(
        "aclrtAllocatorSetGetAddrFromBlockFuncToDesc",
        allocatorDesc,
        func,
        "func",
        |d, f| d.get_addr_from_block = Some(f),
    )
}

/// Registers a copy of the descriptor's current contents on `stream`,
/// replacing any earlier registration. The descriptor must hold an object and
/// the alloc, free and getAddrFromBlock functions; allocAdvise is optional.
/// Any non-NULL pointer is accepted as a stream.
#[no_mangle]
pub extern "C" fn aclrtAllocatorRegister(
    stream: aclrtStream,
    allocatorDesc: aclrtAllocatorDesc,
) -> aclError {
    boundary("aclrtAllocatorRegister", || {
        let stream = args::stream(stream)?;
        let desc = args::descriptor(allocatorDesc)?;
        global().register(stream, desc)
    })
}

/// Reads the registration of `stream`. `allocatorDesc` is required; every
/// other out-parameter may be NULL. An unset allocAdvise reads back as NULL.
/// Nothing is written unless the call succeeds.
///
/// # Safety
/// Each non-NULL out-parameter must point to writable memory of its type.
#[no_mangle]
pub unsafe extern "C" fn aclrtAllocatorGetByStream(
    stream: aclrtStream,
    allocatorDesc: *mut aclrtAllocatorDesc,
    allocator: *mut aclrtAllocator,
    allocFunc: *mut aclrtAllocatorAllocFunc,
    freeFunc: *mut aclrtAllocatorFreeFunc,
    allocAdviseFunc: *mut aclrtAllocatorAllocAdviseFunc,
    getAddrFromBlockFunc: *mut aclrtAllocatorGetAddrFromBlockFunc,
) -> aclError {
    boundary("aclrtAllocatorGetByStream", || {
        // SAFETY: the caller's contract for each out-parameter.
        let desc_out = unsafe { Out::required(allocatorDesc, "allocatorDesc") }?;
        let stream = args::stream(stream)?;
        let found = global().get_by_stream(stream)?;
        let c = found.callbacks;
        desc_out.write(found.descriptor.as_ptr());
        unsafe {
            write_optional(Out::optional(allocator), c.obj.as_ptr());
            write_optional(Out::optional(allocFunc), Some(c.alloc));
            write_optional(Out::optional(freeFunc), Some(c.free));
            write_optional(Out::optional(allocAdviseFunc), c.alloc_advise);
            write_optional(
                Out::optional(getAddrFromBlockFunc),
                Some(c.get_addr_from_block),
            );
        }
        Ok(())
    })
}

/// Drops the registration of `stream`; a stream with none is left as it is
/// (`ACL_SUCCESS`).
#[no_mangle]
pub extern "C" fn aclrtAllocatorUnregister(stream: aclrtStream) -> aclError {
    boundary("aclrtAllocatorUnregister", || {
        global().unregister(args::stream(stream)?).map(drop)
    })
}
