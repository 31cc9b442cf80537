//! The composition root: the one place that creates the process-wide
//! objects and wires the layers together.
//!
//! At load time only what needs no runtime is set up. "Real runtime or host
//! runtime?" is decided at the first call that needs it (so a runtime loaded
//! by `dlopen` after this library is found): [`ensure`] looks for a real
//! runtime, chooses the dispatch table of the runtime exports and installs
//! the matching device port. A real runtime loaded after that is not used
//! (`note_late_runtime` says so). The process-wide host runtime ([`host`])
//! is built here too.

use super::dispatch::{self, Backend};
use crate::base::descriptor::Callbacks;
use crate::base::device_port::{self, DevicePort, VirtualMemoryCalls};
use crate::base::error::{aclError, Error, Result, ACL_SUCCESS};
use crate::base::ids::StreamKey;
use crate::base::types::{aclrtMemAttr, aclrtMemMallocPolicy, ACL_MEM_MALLOC_HUGE_FIRST};
use crate::registry::api::global;
use crate::registry::observer::StreamObserver;
use crate::registry::Registration;
use crate::runtime::config::Config;
use crate::runtime::HostRuntime;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::{Once, OnceLock};

/// The library's one load-time constructor: tracking if the environment asks
/// for it, and the decision hooks; no runtime lookup
/// (a runtime may still arrive).
#[used]
#[link_section = ".init_array"]
static AT_LOAD: extern "C" fn() = at_load;

extern "C" fn at_load() {
    crate::default_allocator::install_pool_callbacks(super::pool::callbacks_of);
    crate::interpose::next::read_environment();
    device_port::set_installer(ensure);
    crate::tracking::before_exit_report(note_late_runtime);
    crate::tracking::init_from_env();
}

static WIRED: Once = Once::new();

/// Makes sure the process is wired; returns at once after the first time.
#[inline]
pub fn ensure() {
    if !WIRED.is_completed() {
        WIRED.call_once(wire);
    }
}

fn wire() {
    crate::interpose::next::resolve();
    let port: &'static dyn DevicePort = match dispatch::choose().backend {
        Backend::Host => &Port { forward: false },
        Backend::Forward => &Port { forward: true },
    };
    device_port::install(port);
}

/// Once this library serves as the runtime: if a real runtime was loaded
/// since, says so once (stderr, tracking report). Called outside the
/// boundary, so it keeps any panic to itself.
pub(crate) fn note_late_runtime() {
    if crate::interpose::next::decided() {
        let _ = std::panic::catch_unwind(say_late_runtime);
    }
}

fn say_late_runtime() {
    let Some(path) = crate::interpose::next::late_runtime() else {
        return;
    };
    let path = path.to_string_lossy();
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!(
            "==aclalloc== a real ACL runtime was loaded after libaclalloc began serving as the \
             runtime: {path}; it is not used (streams and allocators of this process stay on \
             the host runtime). Load it before the first ACL call that creates runtime state \
             (aclInit, aclrtSetDevice, aclrtCreateStream, ...), or link the program with \
             -lascendcl.\n"
        )
        .as_bytes(),
    );
    crate::tracking::add_note(format!(
        "a real ACL runtime loaded late was not used (this process ran on the host runtime): \
         {path}"
    ));
}

/// The process-wide host runtime, configured from the environment on first
/// use, over [`global`]'s registrations, the default allocator and tracking.
pub fn host() -> &'static HostRuntime {
    static HOST: OnceLock<HostRuntime> = OnceLock::new();
    HOST.get_or_init(|| {
        HostRuntime::new(Config::from_env(), global())
            .with_workspace_allocator(&crate::default_allocator::workspace::DefaultWorkspaces)
            .with_observer(&StreamEvents)
    })
}

/// What hears of the host runtime's stream events: the tracking layer, and
/// every pool when a stream is destroyed (`Pool::forget_stream`). Records
/// and waits the runtime keeps in `registry::order` itself.
struct StreamEvents;

impl StreamObserver for StreamEvents {
    #[inline]
    fn callbacks_for(&self, stream: StreamKey, registration: &Registration) -> Callbacks {
        crate::tracking::TrackingObserver.callbacks_for(stream, registration)
    }
    fn stream_synchronized(&self, stream: StreamKey) {
        crate::tracking::TrackingObserver.stream_synchronized(stream)
    }
    fn stream_destroyed(&self, stream: StreamKey, old: Option<&Registration>) {
        crate::tracking::TrackingObserver.stream_destroyed(stream, old);
        crate::pool::handles::forget_stream(stream.get());
        crate::registry::order::forget_waits_of(stream.get().get());
    }
}

/// The virtual-memory calls of the dispatch table: the real runtime's, or
/// the exports, which serve them here when the table has none.
fn virtual_memory_calls() -> VirtualMemoryCalls {
    use super::virtual_memory as exports;
    let fns = dispatch::active();
    VirtualMemoryCalls {
        reserve: fns
            .aclrtReserveMemAddress
            .unwrap_or(exports::aclrtReserveMemAddress),
        release: fns
            .aclrtReleaseMemAddress
            .unwrap_or(exports::aclrtReleaseMemAddress),
        malloc_physical: fns
            .aclrtMallocPhysical
            .unwrap_or(exports::aclrtMallocPhysical),
        free_physical: fns.aclrtFreePhysical.unwrap_or(exports::aclrtFreePhysical),
        map: fns.aclrtMapMem.unwrap_or(exports::aclrtMapMem),
        unmap: fns.aclrtUnmapMem.unwrap_or(exports::aclrtUnmapMem),
        granularity: fns
            .aclrtMemGetAllocationGranularity
            .unwrap_or(exports::aclrtMemGetAllocationGranularity),
        synchronize_device: fns.aclrtSynchronizeDevice,
        memcpy: fns.aclrtMemcpy,
    }
}

/// The device port: the host runtime's, or (`forward`) the real runtime's
/// functions, reached through the dispatch table as the application would.
struct Port {
    forward: bool,
}

impl DevicePort for Port {
    fn current_device(&self) -> Option<i32> {
        if !self.forward {
            return host()
                .current_device()
                .ok()
                .map(|d| i32::try_from(d).unwrap_or(0));
        }
        let mut device = 0;
        // SAFETY: the real runtime's aclrtGetDevice with a valid out-pointer.
        let rc = unsafe { (dispatch::active().aclrtGetDevice)(&mut device) };
        (rc == ACL_SUCCESS).then_some(device)
    }

    fn device_count(&self) -> Option<u32> {
        if !self.forward {
            return host().device_count().ok();
        }
        let mut count = 0u32;
        // SAFETY: the real runtime's aclrtGetDeviceCount with a valid out-pointer.
        let rc = unsafe { (dispatch::active().aclrtGetDeviceCount)(&mut count) };
        (rc == ACL_SUCCESS).then_some(count)
    }

    /// The host runtime's memory, or the real runtime's `aclrtMalloc` (on
    /// the calling thread's current device, as the host runtime's).
    fn alloc(&self, size: usize) -> Result<NonNull<u8>> {
        if !self.forward {
            return host().malloc(size);
        }
        let mut ptr = std::ptr::null_mut();
        let rc = self.acl_malloc(&mut ptr, size, ACL_MEM_MALLOC_HUGE_FIRST);
        match NonNull::new(ptr.cast::<u8>()) {
            Some(p) if rc == ACL_SUCCESS => Ok(p),
            _ => Err(Error::AllocatorReturnedNull {
                allocator: "default device (the real runtime's aclrtMalloc)",
                size,
                device: self.current_device().unwrap_or(0),
            }),
        }
    }

    fn free(&self, ptr: *mut c_void) -> Result<()> {
        if self.forward {
            return match self.acl_free(ptr) {
                ACL_SUCCESS => Ok(()),
                _ => Err(Error::ForeignPointer),
            };
        }
        host().devices().and_then(|devices| {
            devices
                .iter()
                .find(|d| d.memory().owns(ptr.cast()))
                .ok_or(Error::ForeignPointer)
                .and_then(|d| d.memory().free(ptr.cast()))
        })
    }

    fn acl_malloc(
        &self,
        ptr: &mut *mut c_void,
        size: usize,
        policy: aclrtMemMallocPolicy,
    ) -> aclError {
        // SAFETY: `ptr` is a valid out-pointer.
        unsafe { (dispatch::active().aclrtMalloc)(ptr, size, policy) }
    }

    fn acl_free(&self, ptr: *mut c_void) -> aclError {
        // SAFETY: the caller's pointer came from aclrtMalloc and is freed once.
        unsafe { (dispatch::active().aclrtFree)(ptr) }
    }

    fn acl_mem_info(&self, attr: aclrtMemAttr, free: &mut usize, total: &mut usize) -> aclError {
        // SAFETY: both out-pointers are valid.
        unsafe { (dispatch::active().aclrtGetMemInfo)(attr, free, total) }
    }

    /// The host runtime's virtual memory (reservations, memfd pages), or the
    /// real runtime's calls when it has every one of them.
    fn virtual_memory(&self) -> Option<VirtualMemoryCalls> {
        use crate::interpose::next::{address, Sym};
        let all = [
            Sym::aclrtReserveMemAddress,
            Sym::aclrtReleaseMemAddress,
            Sym::aclrtMallocPhysical,
            Sym::aclrtFreePhysical,
            Sym::aclrtMapMem,
            Sym::aclrtUnmapMem,
            Sym::aclrtMemGetAllocationGranularity,
        ];
        let all = !self.forward || all.iter().all(|&sym| address(sym).is_some());
        all.then(virtual_memory_calls)
    }

    /// The host runtime's current device changes only in `runtime::context`, which reports it.
    fn reports_device_changes(&self) -> bool {
        !self.forward
    }
}
