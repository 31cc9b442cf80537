//! CANN's `acl_rt_allocator.h`: allocator descriptors and their registration
//! on streams.
#![allow(non_snake_case)]

//!
//! Each export first asks [`crate::interpose::next`] whether a real runtime
//! provides the function; if so it runs the forwarding body in
//! `crate::ffi::wiring::forward`, otherwise its own. The descriptor functions ask without
//! forcing the decision (they need no runtime); registering and
//! unregistering, which take a stream, force it.

use crate::base::boundary::ffi_boundary;
use crate::base::descriptor::{AllocatorObj, Callbacks, Descriptor};
use crate::base::error::Result;
use crate::ffi::boundary::boundary;
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args::{self, Out};
use crate::ffi::wiring::forward;
use crate::interpose::Sym;
use crate::registry::api::{global, initialised};
use crate::registry::StreamKey;
use crate::tracking::{self, LeakSeen};

/// Creates an empty allocator descriptor: no object, no callbacks. Returns NULL on failure.
#[no_mangle]
pub extern "C" fn aclrtAllocatorCreateDesc() -> aclrtAllocatorDesc {
    if let Some(desc) = forward::create_desc() {
        return desc;
    }
    ffi_boundary!(|| { Ok(global().create_descriptor()?.as_ptr()) })
}

/// Destroys a descriptor. Registrations made from it stay in force.
/// NULL, a destroyed descriptor or anything that is not a descriptor:
/// `ACL_ERROR_INVALID_PARAM`.
#[no_mangle]
pub extern "C" fn aclrtAllocatorDestroyDesc(allocatorDesc: aclrtAllocatorDesc) -> aclError {
    if let Some(rc) = forward::destroy_desc(allocatorDesc) {
        return rc;
    }
    ffi_boundary!(|| { global().destroy_descriptor(args::descriptor(allocatorDesc)?) })
}

/// Sets one field of a live descriptor from a non-NULL value.
fn set_field<T: Copy>(
    sym: Sym,
    function: &'static str,
    desc: aclrtAllocatorDesc,
    value: Option<T>,
    param: &'static str,
    apply: impl FnOnce(&mut Descriptor, T) + Copy,
) -> aclError {
    let forwarded = forward::set_field(sym, function, desc, value, |d, v: Option<T>| {
        if let Some(v) = v {
            apply(d, v)
        }
    });
    if let Some(rc) = forwarded {
        return rc;
    }
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
        Sym::aclrtAllocatorSetObjToDesc,
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
        Sym::aclrtAllocatorSetAllocFuncToDesc,
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
        Sym::aclrtAllocatorSetFreeFuncToDesc,
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
        Sym::aclrtAllocatorSetAllocAdviseFuncToDesc,
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
        Sym::aclrtAllocatorSetGetAddrFromBlockFuncToDesc,
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
/// Any non-NULL pointer is accepted as a stream, except a value of the host
/// runtime's stream handles that names no live stream
/// (`ACL_ERROR_INVALID_PARAM`): a stream created later must not inherit it.
#[no_mangle]
pub extern "C" fn aclrtAllocatorRegister(
    stream: aclrtStream,
    allocatorDesc: aclrtAllocatorDesc,
) -> aclError {
    if let Some(rc) = forward::register(stream, allocatorDesc) {
        return rc;
    }
    crate::ffi::wiring::host::note_late_runtime();
    ffi_boundary!(|| {
        let stream = args::stream(stream)?;
        let desc = args::descriptor(allocatorDesc)?;
        let host = crate::ffi::wiring::host::host();
        host.check_stream_value(stream)?;
        global().register(stream, desc)?;
        // A destroy between the check and the registration dropped the
        // registration before this made it: drop it now.
        if host.check_stream_value(stream).is_err() {
            global().unregister(stream)?;
            return Err(crate::runtime::streams::NOT_A_STREAM);
        }
        Ok(())
    })
}

/// Reads the registration of `stream`. `allocatorDesc` is required, the
/// other out-parameters may be NULL; an unset allocAdvise reads as NULL.
/// Nothing is written unless the call succeeds. With tracking on, the object
/// and functions written are the tracking layer's (which call the user's);
/// in front of a real runtime this is still answered here, so that its
/// executor goes through the tracking layer.
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
    ffi_boundary!(move || -> Result<()> {
        // The hit on every launch: one probe of the stream's slot, no call.
        if !tracking::enabled() && !allocatorDesc.is_null() {
            if let (Some(key), Some(api)) = (StreamKey::from_ptr(stream), initialised()) {
                if let Some(found) = api.streams().get_if_hit(key) {
                    // SAFETY: the caller's contract for each out-parameter.
                    unsafe {
                        allocatorDesc.write(found.descriptor.as_ptr());
                        write_callbacks(
                            &found.callbacks,
                            allocator,
                            allocFunc,
                            freeFunc,
                            allocAdviseFunc,
                            getAddrFromBlockFunc,
                        );
                    }
                    return Ok(());
                }
            }
        }
        // SAFETY: the caller's contract, handed on.
        unsafe {
            get_by_stream_slow(
                stream,
                allocatorDesc,
                allocator,
                allocFunc,
                freeFunc,
                allocAdviseFunc,
                getAddrFromBlockFunc,
            )
        }
    })
}

/// Writes `c` to the optional out-parameters the caller did not leave NULL.
///
/// # Safety
/// Each non-NULL pointer is valid for a write of its type.
#[inline]
unsafe fn write_callbacks(
    c: &Callbacks,
    allocator: *mut aclrtAllocator,
    allocFunc: *mut aclrtAllocatorAllocFunc,
    freeFunc: *mut aclrtAllocatorFreeFunc,
    allocAdviseFunc: *mut aclrtAllocatorAllocAdviseFunc,
    getAddrFromBlockFunc: *mut aclrtAllocatorGetAddrFromBlockFunc,
) {
    // SAFETY: the caller's contract for each.
    unsafe {
        write_wanted(allocator, c.obj.as_ptr());
        write_wanted(allocFunc, Some(c.alloc));
        write_wanted(freeFunc, Some(c.free));
        write_wanted(allocAdviseFunc, c.alloc_advise);
        write_wanted(getAddrFromBlockFunc, Some(c.get_addr_from_block));
    }
}

/// Writes `value` to `out` unless the caller passed NULL.
///
/// # Safety
/// A non-NULL `out` is valid for a write of `T`.
#[inline]
unsafe fn write_wanted<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: the caller's contract.
        unsafe { out.write(value) }
    }
}

/// `aclrtAllocatorGetByStream` off its hit (argument errors, a miss,
/// tracking on), inside the export's boundary.
///
/// # Safety
/// As for `aclrtAllocatorGetByStream`.
#[cold]
#[inline(never)]
unsafe fn get_by_stream_slow(
    stream: aclrtStream,
    allocatorDesc: *mut aclrtAllocatorDesc,
    allocator: *mut aclrtAllocator,
    allocFunc: *mut aclrtAllocatorAllocFunc,
    freeFunc: *mut aclrtAllocatorFreeFunc,
    allocAdviseFunc: *mut aclrtAllocatorAllocAdviseFunc,
    getAddrFromBlockFunc: *mut aclrtAllocatorGetAddrFromBlockFunc,
) -> Result<()> {
    // SAFETY: the caller's contract.
    let desc_out = unsafe { Out::required(allocatorDesc, "allocatorDesc") }?;
    let stream = args::stream(stream)?;
    let found = global().get_by_stream(stream)?;
    let callbacks = if tracking::enabled() {
        tracking::tracked_callbacks(stream, &found)
    } else {
        found.callbacks
    };
    desc_out.write(found.descriptor.as_ptr());
    // SAFETY: the caller's contract.
    unsafe {
        write_callbacks(
            &callbacks,
            allocator,
            allocFunc,
            freeFunc,
            allocAdviseFunc,
            getAddrFromBlockFunc,
        )
    };
    Ok(())
}

/// Drops the registration of `stream`; a stream with none is left as it is
/// (`ACL_SUCCESS`). With tracking on, blocks allocated on the stream that are
/// still live are reported as leaks.
#[no_mangle]
pub extern "C" fn aclrtAllocatorUnregister(stream: aclrtStream) -> aclError {
    if let Some(rc) = forward::unregister(stream) {
        return rc;
    }
    ffi_boundary!(|| {
        let stream = args::stream(stream)?;
        let old = global().unregister(stream)?;
        tracking::registration_ended(stream, old.as_ref(), LeakSeen::Unregister);
        Ok(())
    })
}
