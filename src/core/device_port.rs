//! The device port: how every layer reaches device memory and the current
//! device without knowing whether the host runtime or a real CANN runtime is
//! behind this library.
//!
//! The choice is made once, by the composition root (`crate::ffi::process`,
//! at load time or on the first export), which installs the one port this
//! process uses. The pool's segments, the default allocator's direct device
//! memory and the device a pluggable allocator is told about all go through
//! [`port`].

use crate::core::error::{aclError, Error, Result};
use crate::core::types::{
    aclrtDrvMemHandle, aclrtMemAttr, aclrtMemGranularityOptions, aclrtMemMallocPolicy,
    aclrtPhysicalMemProp,
};
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::OnceLock;

/// Device memory and device identity, as the process's runtime provides
/// them.
pub trait DevicePort: Sync {
    /// The device current on the calling thread, if it has one.
    fn current_device(&self) -> Option<i32>;
    /// How many devices there are, if the runtime can tell.
    fn device_count(&self) -> Option<u32>;
    /// `size` bytes of device memory on the calling thread's current device,
    /// with no caching in between. The error says why there is none.
    fn alloc(&self, size: usize) -> Result<NonNull<u8>>;
    /// Gives back what [`alloc`](DevicePort::alloc) returned, without
    /// waiting for the streams (the caller knows no work uses it).
    fn free(&self, ptr: *mut c_void) -> Result<()>;
    /// `aclrtMalloc`, as the application would call it.
    fn acl_malloc(
        &self,
        ptr: &mut *mut c_void,
        size: usize,
        policy: aclrtMemMallocPolicy,
    ) -> aclError;
    /// `aclrtFree`, as the application would call it (waits for queued work
    /// first).
    fn acl_free(&self, ptr: *mut c_void) -> aclError;
    /// `aclrtGetMemInfo`, as the application would call it.
    fn acl_mem_info(&self, attr: aclrtMemAttr, free: &mut usize, total: &mut usize) -> aclError;
    /// CANN's virtual-memory calls of the runtime, for expandable segments;
    /// `None` when the runtime lacks them (the pool then uses fixed
    /// segments, as torch_npu falls back).
    fn virtual_memory(&self) -> Option<VirtualMemoryCalls> {
        None
    }
}

/// CANN's virtual-memory functions (`acl_rt.h`) of the process's runtime,
/// with `aclrtSynchronizeDevice`, which an expandable pool calls before it
/// unmaps pages that queued work might still use.
#[derive(Clone, Copy)]
pub struct VirtualMemoryCalls {
    /// `aclrtReserveMemAddress(virPtr, size, alignment, expectPtr, flags)`.
    pub reserve: unsafe extern "C" fn(*mut *mut c_void, usize, usize, *mut c_void, u64) -> aclError,
    /// `aclrtReleaseMemAddress(virPtr)`.
    pub release: unsafe extern "C" fn(*mut c_void) -> aclError,
    /// `aclrtMallocPhysical(handle, size, prop, flags)`.
    pub malloc_physical: unsafe extern "C" fn(
        *mut aclrtDrvMemHandle,
        usize,
        *const aclrtPhysicalMemProp,
        u64,
    ) -> aclError,
    /// `aclrtFreePhysical(handle)`.
    pub free_physical: unsafe extern "C" fn(aclrtDrvMemHandle) -> aclError,
    /// `aclrtMapMem(virPtr, size, offset, handle, flags)`.
    pub map: unsafe extern "C" fn(*mut c_void, usize, usize, aclrtDrvMemHandle, u64) -> aclError,
    /// `aclrtUnmapMem(virPtr)`.
    pub unmap: unsafe extern "C" fn(*mut c_void) -> aclError,
    /// `aclrtMemGetAllocationGranularity(prop, option, granularity)`.
    pub granularity: unsafe extern "C" fn(
        *mut aclrtPhysicalMemProp,
        aclrtMemGranularityOptions,
        *mut usize,
    ) -> aclError,
    /// `aclrtSynchronizeDevice()`.
    pub synchronize_device: unsafe extern "C" fn() -> aclError,
}

static PORT: OnceLock<&'static dyn DevicePort> = OnceLock::new();

/// Installs the process's port; the first one installed stays (false when
/// one was already there).
pub fn install(port: &'static dyn DevicePort) -> bool {
    PORT.set(port).is_ok()
}

/// The process's port. Before the composition root has run (it runs at
/// load time and on every export's first use), a port that refuses
/// everything with a message that says so.
#[inline]
pub fn port() -> &'static dyn DevicePort {
    match PORT.get() {
        Some(port) => *port,
        None => &Unwired,
    }
}

/// The port before installation.
struct Unwired;

const UNWIRED: Error = Error::Internal {
    reason: "no device port is installed yet: call an ACL function (aclInit, aclrtSetDevice) \
             before using aclalloc's Rust API directly",
};

impl DevicePort for Unwired {
    fn current_device(&self) -> Option<i32> {
        None
    }
    fn device_count(&self) -> Option<u32> {
        None
    }
    fn alloc(&self, _size: usize) -> Result<NonNull<u8>> {
        Err(UNWIRED)
    }
    fn free(&self, _ptr: *mut c_void) -> Result<()> {
        Err(UNWIRED)
    }
    fn acl_malloc(&self, _: &mut *mut c_void, _: usize, _: aclrtMemMallocPolicy) -> aclError {
        UNWIRED.code()
    }
    fn acl_free(&self, _: *mut c_void) -> aclError {
        UNWIRED.code()
    }
    fn acl_mem_info(&self, _: aclrtMemAttr, _: &mut usize, _: &mut usize) -> aclError {
        UNWIRED.code()
    }
}
