//! The forwarding bodies: what an export does when a real runtime is behind
//! this library (see [`crate::interpose`]). Each returns `None` when the real
//! runtime lacks the function, and the export then runs its own body.
//!
//! The descriptor functions do not force the decision: a descriptor made
//! before a runtime was loaded (it carries this library's handle tag) stays
//! this library's; registering it on a real stream registers a copy made in
//! the runtime (a "mirror", as tracking uses).

use crate::base::descriptor::{Callbacks, Descriptor};
use crate::base::error::ACL_SUCCESS;
use crate::base::error::{Error, Result};
use crate::base::handles::{tags, TAG_SHIFT};
use crate::base::types::*;
use crate::ffi::boundary::{boundary, passthrough};
use crate::interpose::next::{real_probed, Sym};
use crate::interpose::shadow;
use crate::registry::api::global;
use crate::registry::{DescriptorHandle, Registration, StreamKey};
use crate::tracking::{self, LeakSeen};
use std::ffi::c_char;

type CreateDescFn = unsafe extern "C" fn() -> aclrtAllocatorDesc;
type DescFn = unsafe extern "C" fn(aclrtAllocatorDesc) -> aclError;
type SetFn<T> = unsafe extern "C" fn(aclrtAllocatorDesc, T) -> aclError;
type StreamDescFn = unsafe extern "C" fn(aclrtStream, aclrtAllocatorDesc) -> aclError;
pub(crate) type StreamFn = unsafe extern "C" fn(aclrtStream) -> aclError;
pub(crate) type ErrMsgFn = unsafe extern "C" fn() -> *const c_char;
pub(crate) type GetByStreamFn = unsafe extern "C" fn(
    aclrtStream,
    *mut aclrtAllocatorDesc,
    *mut aclrtAllocator,
    *mut aclrtAllocatorAllocFunc,
    *mut aclrtAllocatorFreeFunc,
    *mut aclrtAllocatorAllocAdviseFunc,
    *mut aclrtAllocatorGetAddrFromBlockFunc,
) -> aclError;

/// The real function `sym` as type `F` (deciding first if needed).
macro_rules! real_fn {
    ($sym:ident as $ty:ty) => {
        // SAFETY: `$ty` is the C type of `$sym` in CANN's headers.
        unsafe { $crate::interpose::next::real::<$ty>($crate::interpose::next::Sym::$sym) }
    };
}
pub(crate) use real_fn;

/// The real function `sym` as type `F`, without forcing the decision.
macro_rules! probed_fn {
    ($sym:ident as $ty:ty) => {
        // SAFETY: `$ty` is the C type of `$sym` in CANN's headers.
        unsafe { real_probed::<$ty>(Sym::$sym) }
    };
}

/// True for a descriptor handle of this library (made before a real runtime
/// was found, or with none): the tag in its top bits, above every address.
fn host_descriptor(desc: aclrtAllocatorDesc) -> bool {
    (desc as usize) >> TAG_SHIFT == tags::DESCRIPTOR as usize
}

pub(crate) fn create_desc() -> Option<aclrtAllocatorDesc> {
    let create = probed_fn!(aclrtAllocatorCreateDesc as CreateDescFn)?;
    Some(passthrough("aclrtAllocatorCreateDesc", || {
        // SAFETY: the real runtime's function, called as its header says.
        let desc = unsafe { create() };
        if !desc.is_null() {
            shadow::created(desc as usize);
        }
        desc
    }))
}

pub(crate) fn destroy_desc(desc: aclrtAllocatorDesc) -> Option<aclError> {
    if host_descriptor(desc) {
        return None;
    }
    let destroy = probed_fn!(aclrtAllocatorDestroyDesc as DescFn)?;
    Some(passthrough("aclrtAllocatorDestroyDesc", || {
        // SAFETY: as above.
        let rc = unsafe { destroy(desc) };
        if rc == ACL_SUCCESS {
            shadow::destroyed(desc as usize);
        }
        rc
    }))
}

/// A setter: forwarded, and on success mirrored.
pub(crate) fn set_field<T: Copy>(
    sym: Sym,
    function: &'static str,
    desc: aclrtAllocatorDesc,
    value: T,
    apply: impl FnOnce(&mut Descriptor, T),
) -> Option<aclError> {
    if host_descriptor(desc) {
        return None;
    }
    // SAFETY: every setter has the C type `aclError (aclrtAllocatorDesc, T)`.
    let set = unsafe { real_probed::<SetFn<T>>(sym) }?;
    Some(passthrough(function, || {
        // SAFETY: as above.
        let rc = unsafe { set(desc, value) };
        if rc == ACL_SUCCESS {
            shadow::changed(desc as usize, |d| apply(d, value));
        }
        rc
    }))
}

pub(crate) fn register(stream: aclrtStream, desc: aclrtAllocatorDesc) -> Option<aclError> {
    let register = real_fn!(aclrtAllocatorRegister as StreamDescFn)?;
    if host_descriptor(desc) {
        return Some(boundary("aclrtAllocatorRegister", || {
            register_host_descriptor(register, stream, desc)
        }));
    }
    Some(passthrough("aclrtAllocatorRegister", || {
        register_with(register, stream, desc)
    }))
}

/// Registers a descriptor of this library on a real stream: the runtime gets
/// its own descriptor with the same (or tracking) callbacks, never our handle.
fn register_host_descriptor(
    register: StreamDescFn,
    stream: aclrtStream,
    desc: aclrtAllocatorDesc,
) -> Result<()> {
    let key = crate::ffi::wiring::args::stream(stream)?;
    let handle = crate::ffi::wiring::args::descriptor(desc)?;
    let callbacks = global().descriptor(handle)?.callbacks()?;
    let registration = Registration {
        descriptor: handle,
        callbacks,
    };
    let wanted = if tracking::enabled() {
        tracking::tracked_callbacks(key, &registration)
    } else {
        callbacks
    };
    let mirror = make_mirror(&wanted).ok_or(Error::Failure {
        reason: "the real runtime refused to make a descriptor for an allocator described \
                 before it was loaded: create the descriptor after the runtime is loaded",
    })?;
    // SAFETY: the real runtime's function, with a descriptor it made.
    let rc = unsafe { register(stream, mirror as aclrtAllocatorDesc) };
    if rc != ACL_SUCCESS {
        destroy_mirror(mirror);
        return Err(Error::Failure {
            reason: "the real runtime's aclrtAllocatorRegister refused the copy of a \
                     descriptor made before it was loaded (see its own message)",
        });
    }
    record(key, registration, Some(mirror));
    Ok(())
}

fn register_with(
    register: StreamDescFn,
    stream: aclrtStream,
    desc: aclrtAllocatorDesc,
) -> aclError {
    let (Some(key), Some(handle)) = (
        StreamKey::from_ptr(stream),
        DescriptorHandle::from_ptr(desc),
    ) else {
        // The runtime validates and reports; this library has nothing to record.
        // SAFETY: the real runtime's function.
        return unsafe { register(stream, desc) };
    };
    let callbacks = match shadow::descriptor(desc as usize) {
        Some(d) => match d.callbacks() {
            Ok(c) => c,
            // Incomplete: the runtime refuses it with its own message.
            // SAFETY: the real runtime's function.
            Err(_) => return unsafe { register(stream, desc) },
        },
        None => {
            // Made inside the runtime: register it, then read its contents back.
            // SAFETY: the real runtime's function.
            let rc = unsafe { register(stream, desc) };
            if rc != ACL_SUCCESS {
                return rc;
            }
            match read_back(stream) {
                Some(c) => c,
                None => return rc,
            }
        }
    };
    let registration = Registration {
        descriptor: handle,
        callbacks,
    };
    let mirror = tracking::enabled()
        .then(|| make_mirror(&tracking::tracked_callbacks(key, &registration)))
        .flatten();
    // SAFETY: the real runtime's function.
    let rc = unsafe { register(stream, mirror.map_or(desc, |m| m as aclrtAllocatorDesc)) };
    if rc != ACL_SUCCESS {
        if let Some(m) = mirror {
            destroy_mirror(m);
        }
        return rc;
    }
    record(key, registration, mirror);
    rc
}

/// A registration the real runtime accepted, with the mirror it holds.
fn record(key: StreamKey, registration: Registration, mirror: Option<usize>) {
    global().streams().set(key, registration);
    if let Some(old) = shadow::set_mirror(key.get().get(), mirror) {
        if Some(old) != mirror {
            destroy_mirror(old);
        }
    }
}

/// The callbacks the real runtime holds for `stream`.
fn read_back(stream: aclrtStream) -> Option<Callbacks> {
    let get = real_fn!(aclrtAllocatorGetByStream as GetByStreamFn)?;
    let mut desc = std::ptr::null_mut();
    let mut obj = std::ptr::null_mut();
    let (mut alloc, mut free, mut advise, mut addr) = (None, None, None, None);
    // SAFETY: the real runtime's function, with valid out-pointers.
    let rc = unsafe {
        get(
            stream,
            &mut desc,
            &mut obj,
            &mut alloc,
            &mut free,
            &mut advise,
            &mut addr,
        )
    };
    if rc != ACL_SUCCESS {
        return None;
    }
    Some(Callbacks {
        obj: crate::base::descriptor::AllocatorObj::new(obj)?,
        alloc: alloc?,
        free: free?,
        alloc_advise: advise,
        get_addr_from_block: addr?,
    })
}

/// A descriptor in the real runtime holding `callbacks` (the tracking ones).
fn make_mirror(callbacks: &Callbacks) -> Option<usize> {
    let create = real_fn!(aclrtAllocatorCreateDesc as CreateDescFn)?;
    let set_obj = real_fn!(aclrtAllocatorSetObjToDesc as SetFn<aclrtAllocator>)?;
    let set_alloc = real_fn!(aclrtAllocatorSetAllocFuncToDesc as SetFn<aclrtAllocatorAllocFunc>)?;
    let set_free = real_fn!(aclrtAllocatorSetFreeFuncToDesc as SetFn<aclrtAllocatorFreeFunc>)?;
    let set_addr = real_fn!(
        aclrtAllocatorSetGetAddrFromBlockFuncToDesc as SetFn<aclrtAllocatorGetAddrFromBlockFunc>
    )?;
    let set_advise =
        real_fn!(aclrtAllocatorSetAllocAdviseFuncToDesc as SetFn<aclrtAllocatorAllocAdviseFunc>);
    // SAFETY: the real runtime's functions, called as CANN's header says.
    unsafe {
        let desc = create();
        if desc.is_null() {
            return None;
        }
        let mut ok = set_obj(desc, callbacks.obj.as_ptr()) == ACL_SUCCESS
            && set_alloc(desc, Some(callbacks.alloc)) == ACL_SUCCESS
            && set_free(desc, Some(callbacks.free)) == ACL_SUCCESS
            && set_addr(desc, Some(callbacks.get_addr_from_block)) == ACL_SUCCESS;
        if let Some(advise) = callbacks.alloc_advise {
            ok = ok && set_advise.is_some_and(|f| f(desc, Some(advise)) == ACL_SUCCESS);
        }
        if !ok {
            destroy_mirror(desc as usize);
            return None;
        }
        Some(desc as usize)
    }
}

fn destroy_mirror(mirror: usize) {
    if let Some(destroy) = real_fn!(aclrtAllocatorDestroyDesc as DescFn) {
        // SAFETY: a descriptor this library created in the real runtime.
        unsafe { destroy(mirror as aclrtAllocatorDesc) };
    }
}

pub(crate) fn unregister(stream: aclrtStream) -> Option<aclError> {
    let unregister = real_fn!(aclrtAllocatorUnregister as StreamFn)?;
    Some(passthrough("aclrtAllocatorUnregister", || {
        // SAFETY: the real runtime's function.
        let rc = unsafe { unregister(stream) };
        if rc == ACL_SUCCESS {
            if let Some(key) = StreamKey::from_ptr(stream) {
                forget(key, LeakSeen::Unregister);
            }
        }
        rc
    }))
}

/// Drops this library's record of `stream`'s registration (and its mirror).
fn forget(key: StreamKey, seen: LeakSeen) {
    let old = global().streams().remove(key);
    match seen {
        LeakSeen::StreamDestroy => tracking::stream_destroyed(key, old.as_ref()),
        _ => tracking::registration_ended(key, old.as_ref(), seen),
    }
    if let Some(mirror) = shadow::set_mirror(key.get().get(), None) {
        if seen != LeakSeen::StreamDestroy {
            destroy_mirror(mirror);
        }
        // A destroyed stream's entry may stay in the real runtime's table
        // (CANN keeps it), so its mirror is left alive.
    }
}

// What the runtime exports that forward (`crate::ffi::cann::runtime`) tell this
// library's records once the real runtime's function succeeded:
// synchronizing a stream completes its frees, and a destroyed stream's
// record goes.

/// A NULL stream is the default stream, on which no allocator can be
/// registered, so there is nothing to record for it.
pub(crate) fn synchronized(stream: aclrtStream) {
    if let Some(key) = StreamKey::from_ptr(stream) {
        tracking::stream_synchronized(key);
    }
}

pub(crate) fn destroyed(stream: aclrtStream) {
    if let Some(key) = StreamKey::from_ptr(stream) {
        forget(key, LeakSeen::StreamDestroy);
        crate::pool::handles::forget_stream(key.get());
    }
}

pub(crate) fn recent_err_msg() -> Option<ErrMsgFn> {
    probed_fn!(aclGetRecentErrMsg as ErrMsgFn)
}
