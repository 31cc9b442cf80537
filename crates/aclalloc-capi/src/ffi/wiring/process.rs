//! The composition root: the one place that creates the process-wide
//! objects and wires the layers together.
//!
//! At load time only what needs no runtime is set up. "Real runtime or host
//! runtime?" is decided at the first call that needs it (so a runtime loaded
//! by `dlopen` after this library is found): [`crate::ffi::wiring::dispatch::ensure`]
//! runs `wire` once, which looks for a real runtime and installs the
//! matching device port. A real runtime loaded after that is not used
//! (`crate::ffi::wiring::host::note_late_runtime` says so).

use crate::base::device_port::{self, DevicePort, VirtualMemoryCalls};
use crate::base::error::{aclError, Error, Result, ACL_SUCCESS};
use crate::base::types::{aclrtMemAttr, aclrtMemMallocPolicy, ACL_MEM_MALLOC_HUGE_FIRST};
use crate::ffi::wiring::forward::real_fn;
use crate::ffi::wiring::host::{host, note_late_runtime};
use crate::interpose::next::Sym;
use std::ffi::c_void;
use std::ptr::NonNull;

/// The library's one load-time constructor: tracking if the environment asks
/// for it, and the decision hooks; no runtime lookup
/// (a runtime may still arrive).
#[used]
#[link_section = ".init_array"]
static AT_LOAD: extern "C" fn() = at_load;

extern "C" fn at_load() {
    crate::default_allocator::install_pool_callbacks(crate::ffi::ext::pool::callbacks_of);
    crate::stream_ordered::set_insert_wait(make_stream_wait);
    crate::default_allocator::mem_pool::capture::set_capture_port(
        crate::default_allocator::mem_pool::capture::CapturePort {
            model_of: capturing_model,
            hold: hold_in_capture,
        },
    );
    crate::interpose::next::read_environment();
    crate::ffi::wiring::dispatch::set_wiring(wire);
    device_port::set_installer(crate::ffi::wiring::dispatch::ensure);
    crate::tracking::before_exit_report(note_late_runtime);
    crate::tracking::init_from_env();
}

/// `waiter` waits for the work queued on `source` so far: an event recorded
/// on `source` and waited on by `waiter`, on the host runtime (the internal
/// dependencies of CANN's stream-ordered pools). False when either stream is
/// gone.
fn make_stream_wait(waiter: usize, source: usize) -> bool {
    use crate::registry::StreamKey;
    let key = |s: usize| StreamKey::from_ptr(s as *mut c_void);
    let (Some(waiter), Some(source)) = (key(waiter), key(source)) else {
        return false;
    };
    let host = host();
    let Ok(event) = host.create_event(0, false) else {
        return false;
    };
    let waited = host
        .record_event(event, Some(source))
        .and_then(|()| host.stream_wait_event(Some(waiter), event))
        .is_ok();
    let _ = host.destroy_event(event);
    waited
}

/// The model `stream` of the host runtime is capturing into, if any (never
/// in front of a real runtime, whose captures this library does not see).
fn capturing_model(stream: usize) -> Option<usize> {
    if crate::interpose::next::real_runtime() {
        return None;
    }
    let key = crate::registry::StreamKey::from_ptr(stream as *mut c_void)?;
    host().capturing_model(Some(key)).ok().flatten()
}

/// Makes the capture of `stream` keep `release` until its model goes.
fn hold_in_capture(stream: usize, release: Box<dyn FnOnce() + Send>) -> bool {
    let release = crate::runtime::graph_memory::Release::new(release);
    let key = crate::registry::StreamKey::from_ptr(stream as *mut c_void);
    key.is_some_and(|key| host().hold_in_capture(Some(key), release).is_ok())
}

/// Decides "real runtime or host runtime" and installs the device port that
/// matches (run once, by [`crate::ffi::wiring::dispatch::ensure`]).
fn wire() {
    crate::interpose::next::resolve();
    let port: &'static dyn DevicePort = match crate::interpose::next::real_runtime() {
        false => &Port { forward: false },
        true => &Port { forward: true },
    };
    device_port::install(port);
}

/// The device port: the host runtime's, or (`forward`) the real runtime's
/// functions, called as the application would call them.
struct Port {
    forward: bool,
}

impl Port {
    /// `found`, a real runtime's function, when this port forwards (it is
    /// then called directly, as the application would call it); `None` on
    /// the host runtime, where the exports serve.
    fn real<F: Copy>(&self, found: Option<F>) -> Option<F> {
        found.filter(|_| self.forward)
    }
}

impl DevicePort for Port {
    fn current_device(&self) -> Option<i32> {
        let get = real_fn!(aclrtGetDevice as unsafe extern "C" fn(*mut i32) -> aclError);
        match self.real(get) {
            Some(get) => {
                let mut device = 0;
                // SAFETY: the real runtime's aclrtGetDevice with a valid out-pointer.
                let rc = unsafe { get(&mut device) };
                (rc == ACL_SUCCESS).then_some(device)
            }
            None => host()
                .current_device()
                .ok()
                .map(|d| i32::try_from(d).unwrap_or(0)),
        }
    }

    fn device_count(&self) -> Option<u32> {
        let get = real_fn!(aclrtGetDeviceCount as unsafe extern "C" fn(*mut u32) -> aclError);
        match self.real(get) {
            Some(get) => {
                let mut count = 0u32;
                // SAFETY: the real runtime's aclrtGetDeviceCount with a valid out-pointer.
                let rc = unsafe { get(&mut count) };
                (rc == ACL_SUCCESS).then_some(count)
            }
            None => host().device_count().ok(),
        }
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
        type Malloc =
            unsafe extern "C" fn(*mut *mut c_void, usize, aclrtMemMallocPolicy) -> aclError;
        match self.real(real_fn!(aclrtMalloc as Malloc)) {
            // SAFETY: the real runtime's aclrtMalloc with a valid out-pointer.
            Some(malloc) => unsafe { malloc(ptr, size, policy) },
            // SAFETY: `ptr` is a valid out-pointer.
            None => unsafe { crate::ffi::cann::memory::direct::aclrtMalloc(ptr, size, policy) },
        }
    }

    fn acl_free(&self, ptr: *mut c_void) -> aclError {
        type Free = unsafe extern "C" fn(*mut c_void) -> aclError;
        match self.real(real_fn!(aclrtFree as Free)) {
            // SAFETY: the caller's pointer came from aclrtMalloc and is freed once.
            Some(free) => unsafe { free(ptr) },
            // SAFETY: as above.
            None => unsafe { crate::ffi::cann::memory::direct::aclrtFree(ptr) },
        }
    }

    fn acl_mem_info(&self, attr: aclrtMemAttr, free: &mut usize, total: &mut usize) -> aclError {
        type Info = unsafe extern "C" fn(aclrtMemAttr, *mut usize, *mut usize) -> aclError;
        match self.real(real_fn!(aclrtGetMemInfo as Info)) {
            // SAFETY: the real runtime's aclrtGetMemInfo with valid out-pointers.
            Some(info) => unsafe { info(attr, free, total) },
            // SAFETY: both out-pointers are valid.
            None => unsafe { crate::ffi::cann::memory::aclrtGetMemInfo(attr, free, total) },
        }
    }

    /// The host runtime's virtual memory (reservations, memfd pages), or the
    /// real runtime's calls when it has every one of them.
    fn virtual_memory(&self) -> Option<VirtualMemoryCalls> {
        use crate::ffi::cann::{memory, runtime, virtual_memory};
        if !self.forward {
            return Some(virtual_memory::calls());
        }
        /// The real function `sym` as the type of the field it fills.
        fn found<F: Copy>(sym: Sym) -> Option<F> {
            // SAFETY: each field of `VirtualMemoryCalls` has the C type of
            // the CANN function of its name (`base::device_port`).
            unsafe { crate::interpose::next::real::<F>(sym) }
        }
        Some(VirtualMemoryCalls {
            reserve: found(Sym::aclrtReserveMemAddress)?,
            release: found(Sym::aclrtReleaseMemAddress)?,
            malloc_physical: found(Sym::aclrtMallocPhysical)?,
            free_physical: found(Sym::aclrtFreePhysical)?,
            map: found(Sym::aclrtMapMem)?,
            unmap: found(Sym::aclrtUnmapMem)?,
            granularity: found(Sym::aclrtMemGetAllocationGranularity)?,
            // The export: the real function, then what tracking must see.
            synchronize_device: runtime::aclrtSynchronizeDevice,
            memcpy: found(Sym::aclrtMemcpy).unwrap_or(memory::direct::aclrtMemcpy),
        })
    }

    /// The host runtime's current device changes only in `runtime::context`, which reports it.
    fn reports_device_changes(&self) -> bool {
        !self.forward
    }
}
