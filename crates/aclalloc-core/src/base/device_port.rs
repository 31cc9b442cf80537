//! The device port: how every layer reaches device memory and the current
//! device without knowing whether the host runtime or a real CANN runtime is
//! behind this library. The composition root (`crate::ffi::wiring::process`)
//! installs the process's one port at its first use.

use crate::base::error::{aclError, Error, Result};
use crate::base::sync::statics::AtomicUsize;
use crate::base::sync::Ordering;
use crate::base::types::{
    aclrtDrvMemHandle, aclrtMemAttr, aclrtMemGranularityOptions, aclrtMemMallocPolicy,
    aclrtMemcpyKind, aclrtPhysicalMemProp,
};
use std::cell::Cell;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::OnceLock;

/// Device memory and device identity, as the process's runtime provides them.
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
    /// `aclrtFree`, as the application would call it (waits for queued work first).
    fn acl_free(&self, ptr: *mut c_void) -> aclError;
    /// `aclrtGetMemInfo`, as the application would call it.
    fn acl_mem_info(&self, attr: aclrtMemAttr, free: &mut usize, total: &mut usize) -> aclError;
    /// The runtime's virtual-memory calls, for expandable segments; `None`
    /// when it lacks them (fixed segments then, as torch_npu falls back).
    fn virtual_memory(&self) -> Option<VirtualMemoryCalls> {
        None
    }
    /// True when the current device changes only through calls that report
    /// it ([`current_device_changed_here`],
    /// [`current_device_changed_everywhere`]), so [`current_device`] may keep
    /// its answer per thread. False for a real CANN behind this library.
    fn reports_device_changes(&self) -> bool {
        false
    }
}

thread_local! {
    /// This thread's last answer of the port's `current_device`, with the
    /// [`DEVICE_STAMP`] it was read under (0: none kept).
    static DEVICE: Cell<(usize, Option<i32>)> = const { Cell::new((0, None)) };
}

/// Moves when any thread's current device may have changed (a context
/// released), making every kept answer stale. Starts at 1: 0 is "none kept".
static DEVICE_STAMP: AtomicUsize = AtomicUsize::new(1);

/// The calling thread's current device, as the port says, kept per thread
/// when the port reports its changes.
#[inline]
pub fn current_device() -> Option<i32> {
    // Read before the port is asked, so an answer is never kept under a
    // newer stamp than the one it was read under.
    let stamp = DEVICE_STAMP.load(Ordering::Acquire);
    let (kept_stamp, device) = DEVICE.with(Cell::get);
    if kept_stamp == stamp {
        return device;
    }
    current_device_miss(stamp)
}

#[cold]
#[inline(never)]
fn current_device_miss(stamp: usize) -> Option<i32> {
    let port = port();
    let device = port.current_device();
    if port.reports_device_changes() {
        DEVICE.with(|d| d.set((stamp, device)));
    }
    device
}

/// The calling thread's current device may have changed (it set a device
/// or a context): its kept answer is dropped.
#[inline]
pub fn current_device_changed_here() {
    DEVICE.with(|d| d.set((0, None)));
}

/// Any thread's current device may have changed (a released context): every
/// kept answer is dropped. Call it once the port sees the change.
pub fn current_device_changed_everywhere() {
    DEVICE_STAMP.fetch_add(1, Ordering::AcqRel);
}

/// The count [`current_device_changed_everywhere`] moves, for runtimes that
/// keep per-thread answers; read it before the lookup kept with it.
#[inline]
pub fn device_stamp() -> usize {
    DEVICE_STAMP.load(Ordering::Acquire)
}

/// CANN's virtual-memory functions of the process's runtime, with
/// `aclrtSynchronizeDevice` (an expandable pool synchronizes before unmapping).
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
    /// `aclrtMemcpy(dst, destMax, src, count, kind)`: a sleeping pool's
    /// offload and restore of its pages.
    pub memcpy:
        unsafe extern "C" fn(*mut c_void, usize, *const c_void, usize, aclrtMemcpyKind) -> aclError,
}

static PORT: OnceLock<&'static dyn DevicePort> = OnceLock::new();
/// What installs the port on first use.
static INSTALLER: OnceLock<fn()> = OnceLock::new();

/// Sets what [`port`] runs once when no port is installed yet.
pub fn set_installer(installer: fn()) {
    let _ = INSTALLER.set(installer);
}

/// Installs the process's port; the first one installed stays (false when one was already there).
pub fn install(port: &'static dyn DevicePort) -> bool {
    PORT.set(port).is_ok()
}

/// The process's port, installed at first use by the installer; without one
/// (the Rust API used with no ACL call made), a port that refuses everything.
#[inline]
pub fn port() -> &'static dyn DevicePort {
    match PORT.get() {
        Some(port) => *port,
        None => first_use(),
    }
}

#[cold]
fn first_use() -> &'static dyn DevicePort {
    if let Some(install) = INSTALLER.get() {
        install();
    }
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
