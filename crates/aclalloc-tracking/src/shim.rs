//! The tracking callbacks: C functions with the user's signatures that call
//! the user's functions and record what they did.
//!
//! They behave exactly like the user's: same arguments in, same result out,
//! every call passed through, faults included (the layer observes, it does
//! not fix). The runtime passes back the object it was given, a
//! [`TrackObj`]; that is the only pointer these functions dereference.
//!
//! No panic may unwind into the runtime that calls these. The bookkeeping on
//! the common path cannot panic (no indexing or unwrapping; the maps only
//! abort, on out-of-memory), and is not wrapped in `catch_unwind`, which
//! measurably costs on every call; the rarer paths that do more (recording a
//! fault, checking an address range, pruning) catch panics themselves.
//!
//! getAddrFromBlock has no allocator argument, so it finds the block's record
//! through the calling thread's last allocation (the runtime asks for the
//! address right after alloc, on the same thread), and otherwise by looking
//! the block up in every allocator record. The thread's last allocation is
//! only a hint, checked before use: the block may have been freed since and
//! its address handed out by another allocator.

use super::events::{record, Fault};
use super::owner::AllocState;
use super::tracker::{tracker, TrackObj, FALLBACK_GET_ADDR};
use crate::base::descriptor::{AllocatorObj, Callbacks};
use crate::base::foreign_call::{self, Callback};
use crate::base::sync::Ordering;
use std::cell::Cell;
use std::ffi::c_void;

thread_local! {
    /// The block this thread allocated last, the record it is in, and the
    /// user's getAddrFromBlock that served it then. Not cleared on free
    /// (the free may happen on any thread): `track_get_addr` checks that
    /// the record still holds the block with that function.
    static LAST: Cell<(usize, *const AllocState, usize)> =
        const { Cell::new((0, std::ptr::null(), 0)) };
}

/// The callbacks a runtime is given for a registration: its tracking object
/// and the tracking functions, with allocAdvise only when the user has one.
pub(crate) fn callbacks(t: &'static TrackObj) -> Callbacks {
    Callbacks {
        obj: AllocatorObj::new(t as *const TrackObj as *mut c_void)
            .expect("a reference is never NULL"),
        alloc: track_alloc,
        free: track_free,
        alloc_advise: t
            .registration
            .callbacks
            .alloc_advise
            .map(|_| track_alloc_advise as crate::base::descriptor::AllocAdviseFn),
        get_addr_from_block: track_get_addr,
    }
}

/// # Safety
/// `obj` must be the object of [`callbacks`].
#[inline]
unsafe fn object<'a>(obj: *mut c_void) -> &'a TrackObj {
    // SAFETY: the caller's contract; tracking objects are never freed.
    unsafe { &*(obj as *const TrackObj) }
}

/// The tracking alloc: the user's alloc, then the block is recorded.
///
/// # Safety
/// As the user's alloc, with `obj` a tracking object.
pub unsafe extern "C" fn track_alloc(obj: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: the function's contract.
    let t = unsafe { object(obj) };
    let user = &t.registration.callbacks;
    let site = move || Callback::Alloc {
        stream: t.stream().get().get(),
        descriptor: t.registration.descriptor.get(),
    };
    // SAFETY: the user's function with the user's object; one that throws
    // ends the process with its name (`foreign_call`), before the unwinding
    // could leave the allocator's record owned.
    record_alloc(t, size, || unsafe {
        foreign_call::alloc(user.alloc, user.obj.as_ptr(), size, site)
    })
}

/// The tracking allocAdvise; handed out only when the user has one.
///
/// # Safety
/// As the user's allocAdvise, with `obj` a tracking object.
pub unsafe extern "C" fn track_alloc_advise(
    obj: *mut c_void,
    size: usize,
    addr: *mut c_void,
) -> *mut c_void {
    // SAFETY: the function's contract.
    let t = unsafe { object(obj) };
    let user = &t.registration.callbacks;
    let Some(advise) = user.alloc_advise else {
        // SAFETY: as track_alloc.
        return unsafe { track_alloc(obj, size) };
    };
    let site = || Callback::AllocAdvise {
        stream: t.stream().get().get(),
        descriptor: t.registration.descriptor.get(),
    };
    // SAFETY: the user's function with the user's object (as in track_alloc).
    record_alloc(t, size, || unsafe {
        foreign_call::alloc_advise(advise, user.obj.as_ptr(), size, addr, site)
    })
}

/// Runs `user_alloc` (the user's alloc or allocAdvise for `size` bytes) and
/// records the block it returns; a nested call on this thread (see
/// `AllocState::enter`) runs it unrecorded.
#[inline]
fn record_alloc(
    t: &TrackObj,
    size: usize,
    user_alloc: impl FnOnce() -> *mut c_void,
) -> *mut c_void {
    let stream = t.stream().get().get();
    let stack = aclalloc_core::history::stacks::capture();
    let Some(mut inside) = t.state.enter(stream) else {
        return user_alloc();
    };
    let block = user_alloc();
    inside.on_alloc(
        t.state.allocator,
        block as usize,
        size,
        stream,
        t.device_for_history(),
        t.registration.callbacks.get_addr_from_block as usize,
        stack,
    );
    drop(inside);
    remember(block, t);
    block
}

#[inline]
fn remember(block: *mut c_void, t: &TrackObj) {
    let get_addr = t.registration.callbacks.get_addr_from_block as usize;
    let now = (block as usize, t.state as *const AllocState, get_addr);
    // A caching allocator hands the same block out again and again: the
    // three words are stored only when they change.
    let _ = LAST.try_with(|last| {
        if last.get() != now {
            last.set(now);
        }
    });
}

/// The tracking free: the user's free, then the block is marked freed.
///
/// # Safety
/// As the user's free, with `obj` a tracking object.
pub unsafe extern "C" fn track_free(obj: *mut c_void, block: *mut c_void) {
    // SAFETY: the function's contract.
    let t = unsafe { object(obj) };
    let user = &t.registration.callbacks;
    let stream = t.stream().get().get();
    let site = move || Callback::Free {
        stream,
        descriptor: t.registration.descriptor.get(),
    };
    let Some(mut inside) = t.state.enter(stream) else {
        // SAFETY: the user's function with the user's object.
        return unsafe { foreign_call::free(user.free, user.obj.as_ptr(), block, site) };
    };
    // SAFETY: the user's function with the user's object (as in track_alloc).
    unsafe { foreign_call::free(user.free, user.obj.as_ptr(), block, site) };
    inside.on_free(t.state.allocator, block as usize, stream);
}

/// The tracking getAddrFromBlock: the user's function of the allocator that
/// handed the block out, then the address is checked and recorded.
///
/// # Safety
/// As the user's getAddrFromBlock.
pub unsafe extern "C" fn track_get_addr(block: *mut c_void) -> *mut c_void {
    let key = block as usize;
    let last = LAST.try_with(|last| last.get()).ok();
    let cached = last.filter(|&(b, s, _)| b == key && !s.is_null());
    if let Some((_, state, get_addr)) = cached {
        // SAFETY: records are never freed.
        let state = unsafe { &*state };
        // The block this thread allocated last, if its record still holds
        // it live from a registration with the same function: since the
        // alloc it may have been freed (on any thread) and the address
        // handed out by another allocator or registration, whose function
        // must serve it. One lock-free probe; a free racing with this call
        // is the caller's use-after-free, as without tracking. NULL (after
        // a failed alloc) is in no record and cannot have moved: it goes
        // to the function of the allocator that just failed.
        if key == 0 || state.serves(key, get_addr) {
            // SAFETY: `get_addr` was stored from the user's function.
            return unsafe { serve_get_addr(state, get_addr, block) };
        }
    }
    // Not the thread's last allocation (a launch with two workspaces asks
    // for the first one's address after the second alloc): the record of
    // the thread's last allocation is the likely holder, then every record.
    // SAFETY: records are never freed.
    let hint = last.and_then(|(_, s, _)| unsafe { s.as_ref() });
    if let Some((state, get_addr)) = find_block(key, hint) {
        // SAFETY: the user's getAddrFromBlock that served this block was
        // stored from a function pointer of this type.
        return unsafe { serve_get_addr(state, get_addr, block) };
    }
    unknown_block(block)
}

/// Runs `get_addr`, the user's getAddrFromBlock that `state`'s allocator
/// serves `block` with, outside the record, then records the address.
///
/// # Safety
/// `get_addr` was stored from a `GetAddrFromBlockFn`.
#[inline]
unsafe fn serve_get_addr(state: &AllocState, get_addr: usize, block: *mut c_void) -> *mut c_void {
    // SAFETY: the caller's contract.
    let get_addr: crate::base::descriptor::GetAddrFromBlockFn =
        unsafe { std::mem::transmute(get_addr) };
    // SAFETY: the user's function (guarded as in track_alloc).
    let address = unsafe { guarded_get_addr(get_addr, block) };
    // Only the record is touched inside: the brief form.
    if let Some(mut inside) = state.enter_brief() {
        inside.on_get_addr(state.allocator, block as usize, address as usize);
    }
    address
}

/// The user's getAddrFromBlock `get_addr` for `block`; one that throws ends
/// the process with its name (`foreign_call`).
///
/// # Safety
/// As calling `get_addr` directly.
#[inline]
unsafe fn guarded_get_addr(
    get_addr: crate::base::descriptor::GetAddrFromBlockFn,
    block: *mut c_void,
) -> *mut c_void {
    let site = || Callback::TrackedGetAddr {
        function: get_addr as usize,
        block: block as usize,
    };
    // SAFETY: the caller's contract.
    unsafe { foreign_call::get_addr_from_block(get_addr, block, site) }
}

/// The record whose allocator holds `block` live (`hint` first, then the
/// oldest), with the getAddrFromBlock that served the block; else the
/// oldest that remembers it freed (getAddrFromBlock after free is passed to
/// that allocator's function and reported). A record that remembers the
/// block freed must not win over the one that handed the address out again.
///
/// One pass over the list of records, each probed once; the list and the
/// adaptor's tables are read without a lock, entering no record,
/// allocating nothing.
fn find_block(
    block: usize,
    hint: Option<&'static AllocState>,
) -> Option<(&'static AllocState, usize)> {
    if let Some(state) = hint {
        if let Some(get_addr) = state.live_get_addr(block) {
            return Some((state, get_addr));
        }
    }
    let mut freed = None;
    for state in tracker().records().iter() {
        match state.record_get_addr(block) {
            Some((true, get_addr)) => return Some((state, get_addr)),
            Some((false, get_addr)) if freed.is_none() => freed = Some((state, get_addr)),
            _ => {}
        }
    }
    freed
}

#[cold]
fn unknown_block(block: *mut c_void) -> *mut c_void {
    record(Fault::UnknownBlock {
        allocator: 0,
        block: block as usize,
    });
    match FALLBACK_GET_ADDR.load(Ordering::Acquire) {
        0 => std::ptr::null_mut(),
        f => {
            // SAFETY: stored from a GetAddrFromBlockFn.
            let f: crate::base::descriptor::GetAddrFromBlockFn = unsafe { std::mem::transmute(f) };
            // SAFETY: the user's function (guarded as in track_alloc).
            unsafe { guarded_get_addr(f, block) }
        }
    }
}
