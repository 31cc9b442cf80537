//! CANN's `acl_rt_allocator.h`: allocator descriptors and their registration
//! on streams.
#![allow(non_snake_case)]

//!
//! Each export first asks [`crate::interpose::next`] whether a real runtime
//! provides the function; if so it runs the forwarding body in
//! `super::forward`, otherwise its own. The descriptor functions ask without
//! forcing the decision (they need no runtime); registering and
//! unregistering, which take a stream, force it.

use super::args::{self, write_optional, Out};
use super::boundary::boundary;
use super::forward;
use super::types::*;
use crate::core::descriptor::{AllocatorObj, Callbacks, Descriptor};
use crate::core::error::Result;
use crate::interpose::Sym;
use crate::registry::api::{global, initialised};
use crate::registry::StreamKey;
use crate::tracking::{self, LeakSeen};
use std::ptr::NonNull;

/// Creates an empty allocator descriptor: no object, no callbacks.
/// Returns NULL on failure.
#[no_mangle]
pub extern "C" fn aclrtAllocatorCreateDesc() -> aclrtAllocatorDesc {
    if let Some(desc) = forward::create_desc() {
        return desc;
    }
    boundary("aclrtAllocatorCreateDesc", || {
        Ok(global().create_descriptor()?.as_ptr())
    })
}

/// Destroys a descriptor. Registrations made from it stay in force.
/// NULL, a destroyed descriptor or anything that is not a descriptor:
/// `ACL_ERROR_INVALID_PARAM`.
#[no_mangle]
pub extern "C" fn aclrtAllocatorDestroyDesc(allocatorDesc: aclrtAllocatorDesc) -> aclError {
    if let Some(rc) = forward::destroy_desc(allocatorDesc) {
        return rc;
    }
    boundary("aclrtAllocatorDestroyDesc", || {
        global().destroy_descriptor(args::descriptor(allocatorDesc)?)
    })
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
/// Any non-NULL pointer is accepted as a stream.
#[no_mangle]
pub extern "C" fn aclrtAllocatorRegister(
    stream: aclrtStream,
    allocatorDesc: aclrtAllocatorDesc,
) -> aclError {
    if let Some(rc) = forward::register(stream, allocatorDesc) {
        return rc;
    }
    super::process::note_late_runtime();
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
/// With tracking on (`ACLALLOC_TRACK=1` or `aclallocTrackingSetEnabled`),
/// the allocator object and functions written are the tracking layer's: they
/// call the user's and behave exactly like them, and `*allocatorDesc` is
/// still the user's descriptor. With tracking off they are exactly what was
/// registered. In front of a real runtime this function is still answered
/// here (from the registrations made through this library, and not the
/// stale entries a real runtime keeps for destroyed streams), so that the
/// runtime's executor, looking the allocator up through this export, goes
/// through the tracking layer.
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
    boundary("aclrtAllocatorGetByStream", move || {
        // SAFETY: the caller's contract for each out-parameter.
        let outs = unsafe {
            CallbackOuts::new(
                allocator,
                allocFunc,
                freeFunc,
                allocAdviseFunc,
                getAddrFromBlockFunc,
            )
        };
        // The lookup on every launch (tracking off, valid arguments, a
        // registered stream) makes no call, so the boundary costs nothing.
        if !tracking::enabled() {
            if let (Some(desc_out), Some(key), Some(api)) = (
                NonNull::new(allocatorDesc),
                StreamKey::from_ptr(stream),
                initialised(),
            ) {
                if let Some(found) = api.streams().get(key) {
                    // SAFETY: the caller's contract for `allocatorDesc`.
                    unsafe { desc_out.write(found.descriptor.as_ptr()) };
                    outs.write(&found.callbacks);
                    return Ok(());
                }
            }
        }
        // SAFETY: the caller's contract for `allocatorDesc`.
        unsafe { get_by_stream_slow(stream, allocatorDesc, outs) }
    })
}

/// `aclrtAllocatorGetByStream` off its hit: the argument checks that name
/// the failing parameter, a miss, the registry not built yet, and tracking
/// on (the user's descriptor with the tracking layer's object and
/// callbacks).
///
/// # Safety
/// A non-NULL `allocatorDesc` is valid for a write.
#[cold]
#[inline(never)]
unsafe fn get_by_stream_slow(
    stream: aclrtStream,
    allocatorDesc: *mut aclrtAllocatorDesc,
    outs: CallbackOuts,
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
    outs.write(&callbacks);
    Ok(())
}

/// The optional out-parameters of `aclrtAllocatorGetByStream`.
struct CallbackOuts {
    allocator: Option<Out<aclrtAllocator>>,
    alloc: Option<Out<aclrtAllocatorAllocFunc>>,
    free: Option<Out<aclrtAllocatorFreeFunc>>,
    alloc_advise: Option<Out<aclrtAllocatorAllocAdviseFunc>>,
    get_addr_from_block: Option<Out<aclrtAllocatorGetAddrFromBlockFunc>>,
}

impl CallbackOuts {
    /// # Safety
    /// Each non-NULL pointer must be valid for a write of its type.
    #[inline]
    unsafe fn new(
        allocator: *mut aclrtAllocator,
        alloc: *mut aclrtAllocatorAllocFunc,
        free: *mut aclrtAllocatorFreeFunc,
        alloc_advise: *mut aclrtAllocatorAllocAdviseFunc,
        get_addr_from_block: *mut aclrtAllocatorGetAddrFromBlockFunc,
    ) -> Self {
        // SAFETY: the caller's contract.
        unsafe {
            CallbackOuts {
                allocator: Out::optional(allocator),
                alloc: Out::optional(alloc),
                free: Out::optional(free),
                alloc_advise: Out::optional(alloc_advise),
                get_addr_from_block: Out::optional(get_addr_from_block),
            }
        }
    }

    #[inline]
    fn write(self, c: &Callbacks) {
        write_optional(self.allocator, c.obj.as_ptr());
        write_optional(self.alloc, Some(c.alloc));
        write_optional(self.free, Some(c.free));
        write_optional(self.alloc_advise, c.alloc_advise);
        write_optional(self.get_addr_from_block, Some(c.get_addr_from_block));
    }
}

/// Drops the registration of `stream`; a stream with none is left as it is
/// (`ACL_SUCCESS`). With tracking on, blocks allocated on the stream that are
/// still live are reported as leaks.
#[no_mangle]
pub extern "C" fn aclrtAllocatorUnregister(stream: aclrtStream) -> aclError {
    if let Some(rc) = forward::unregister(stream) {
        return rc;
    }
    boundary("aclrtAllocatorUnregister", || {
        let stream = args::stream(stream)?;
        let old = global().unregister(stream)?;
        tracking::registration_ended(stream, old.as_ref(), LeakSeen::Unregister);
        Ok(())
    })
}
