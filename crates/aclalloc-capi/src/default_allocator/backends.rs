//! Building the allocator a [`Choice`] names.

use super::choice::Choice;
use super::{per_device, Kind, Source};
use crate::base::boundary::boundary;
use crate::base::descriptor::{AllocatorObj, Callbacks};
use crate::base::device_port::port;
use crate::base::error::{Error, Result};
use crate::plugin::{published, PluggableAllocator, PluginSpec};
use std::ffi::{c_void, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::sync::OnceLock;

/// The C callbacks (`aclallocPoolAlloc`, ...) of the pool whose handle is
/// the object: they are exports of the C layer, above this one, so the
/// composition root (`crate::ffi::wiring::process`) hands them down.
pub type PoolCallbacks = fn(AllocatorObj) -> Callbacks;

static POOL_CALLBACKS: OnceLock<PoolCallbacks> = OnceLock::new();

/// Installs the pool's C callbacks (the composition root does, at load).
pub fn install_pool_callbacks(callbacks: PoolCallbacks) {
    let _ = POOL_CALLBACKS.set(callbacks);
}

/// The pool's C callbacks for the pool handle `obj`, once installed.
pub(super) fn pool_callbacks(obj: AllocatorObj) -> Option<Callbacks> {
    POOL_CALLBACKS.get().map(|callbacks_of| callbacks_of(obj))
}

/// The allocator `choice` names, ready to serve.
pub(super) fn build(choice: &Choice) -> Result<Source> {
    match choice {
        Choice::Plugin { path, alloc, free } => plugin(path, alloc, free),
        Choice::Device => Ok(device()),
        Choice::Pool => pool(),
    }
}

/// Caching pools with the defaults, `ACLALLOC_ALLOC_CONF` and
/// `ACLALLOC_RECORD_HISTORY`, one per device ([`per_device`]); the object is
/// the pool of the device current on the calling thread (as
/// `aclallocPoolCreate(NULL, ...)` there).
fn pool() -> Result<Source> {
    let handle = per_device::current()?;
    let obj = AllocatorObj::new(handle as *mut c_void).ok_or(Error::Internal {
        reason: "a pool handle was zero",
    })?;
    Ok(Source {
        kind: Kind::Pool,
        callbacks: per_device::callbacks(obj),
    })
}

/// The C callbacks of the pool whose handle is `obj`; an error when they
/// were not installed.
pub(super) fn installed_pool_callbacks(obj: AllocatorObj) -> Result<Callbacks> {
    let callbacks_of = *POOL_CALLBACKS.get().ok_or(Error::Internal {
        reason: "the pool's C callbacks were not installed (the library's wiring did not run)",
    })?;
    Ok(callbacks_of(obj))
}

fn plugin(path: &CStr, alloc: &CStr, free: &CStr) -> Result<Source> {
    let spec = PluginSpec {
        path: OsStr::from_bytes(path.to_bytes()),
        alloc,
        free,
        init: None,
        empty_cache: None,
        memory_fraction: None,
    };
    let (_handle, desc) = published::publish(PluggableAllocator::load(&spec)?)?;
    let source = Source::from_descriptor(desc)?;
    debug_assert_eq!(source.kind, Kind::Plugin);
    Ok(source)
}

/// Direct device memory: `aclrtMalloc` on the calling thread's current
/// device, no caching. Freeing does not wait for the streams (unlike
/// `aclrtFree`): a workspace is freed by its stream's worker after its
/// kernel, and a raw pointer is the caller's to free when no work uses it.
fn device() -> Source {
    static TOKEN: u8 = 0;
    Source {
        kind: Kind::Device,
        callbacks: Callbacks {
            obj: AllocatorObj::new(&TOKEN as *const u8 as *mut c_void)
                .expect("a static's address is not NULL"),
            alloc: device_alloc,
            free: device_free,
            alloc_advise: None,
            get_addr_from_block: device_addr,
        },
    }
}

unsafe extern "C" fn device_alloc(_obj: *mut c_void, size: usize) -> *mut c_void {
    boundary("aclalloc default device alloc", || {
        port().alloc(size).map(|p| p.as_ptr().cast())
    })
}

unsafe extern "C" fn device_free(_obj: *mut c_void, block: *mut c_void) {
    boundary("aclalloc default device free", || port().free(block))
}

unsafe extern "C" fn device_addr(block: *mut c_void) -> *mut c_void {
    block
}
