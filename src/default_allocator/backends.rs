//! Building the allocator a [`Choice`] names.

use super::choice::Choice;
use super::{per_device, Kind, Source};
use crate::core::descriptor::{AllocatorObj, Callbacks};
use crate::core::errlog;
use crate::core::error::ACL_SUCCESS;
use crate::core::error::{Error, Result};
use crate::ffi::types::ACL_MEM_MALLOC_HUGE_FIRST;
use crate::plugin::{registry, PluggableAllocator, PluginSpec};
use crate::runtime::backend::{active, Backend};
use crate::runtime::host;
use std::ffi::{c_void, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;

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
    use crate::ffi::pool as c;
    let handle = per_device::current()?;
    let obj = AllocatorObj::new(handle as *mut c_void).ok_or(Error::Internal {
        reason: "a pool handle was zero",
    })?;
    Ok(Source {
        kind: Kind::Pool,
        callbacks: Callbacks {
            obj,
            alloc: per_device::alloc,
            free: per_device::free,
            alloc_advise: Some(per_device::alloc_advise),
            get_addr_from_block: c::aclallocPoolGetAddrFromBlock,
        },
    })
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
    let (_handle, desc) = registry::publish(PluggableAllocator::load(&spec)?)?;
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
    let result = match active().backend {
        Backend::Host => host().malloc(size),
        Backend::Forward => forward_malloc(size),
    };
    match result {
        Ok(p) => p.as_ptr().cast(),
        Err(e) => {
            errlog::record("aclalloc default device alloc", e);
            std::ptr::null_mut()
        }
    }
}

unsafe extern "C" fn device_free(_obj: *mut c_void, block: *mut c_void) {
    let freed = match active().backend {
        Backend::Host => host().devices().and_then(|devices| {
            devices
                .iter()
                .find(|d| d.memory().owns(block.cast()))
                .ok_or(Error::ForeignPointer)
                .and_then(|d| d.memory().free(block.cast()))
        }),
        // SAFETY: a pointer the real runtime's aclrtMalloc returned.
        Backend::Forward => match unsafe { (active().aclrtFree)(block) } {
            ACL_SUCCESS => Ok(()),
            _ => Err(Error::ForeignPointer),
        },
    };
    if let Err(e) = freed {
        errlog::record("aclalloc default device free", e);
    }
}

/// In front of a real runtime: its `aclrtMalloc` (on the calling thread's
/// current device, as the host runtime's).
fn forward_malloc(size: usize) -> Result<std::ptr::NonNull<u8>> {
    let mut ptr = std::ptr::null_mut();
    // SAFETY: the real runtime's aclrtMalloc with a valid out-pointer.
    let rc = unsafe { (active().aclrtMalloc)(&mut ptr, size, ACL_MEM_MALLOC_HUGE_FIRST) };
    match std::ptr::NonNull::new(ptr.cast::<u8>()) {
        Some(p) if rc == ACL_SUCCESS => Ok(p),
        _ => Err(Error::AllocatorReturnedNull {
            allocator: "default device (the real runtime's aclrtMalloc)",
            size,
            device: crate::plugin::context::current_device(),
        }),
    }
}

unsafe extern "C" fn device_addr(block: *mut c_void) -> *mut c_void {
    block
}
