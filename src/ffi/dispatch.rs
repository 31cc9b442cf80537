//! The dispatch table of the runtime exports (`aclInit`, `aclrt*` outside
//! the allocator API, virtual memory, `aclallocLaunchKernel`), filled once
//! at the first of these calls (a runtime loaded by `dlopen` after this
//! library must be found) by the composition root ([`super::process`]).
//!
//! [`Backend::Host`] is this crate's host runtime. [`Backend::Forward`]
//! serves a real runtime loaded after this library: its own functions, with
//! those whose effect this library must see wrapped in `crate::ffi::forward`,
//! and the host runtime's for what it lacks (the launch extension).

use crate::base::types::*;
use std::ffi::{c_char, c_void};
use std::sync::OnceLock;

/// The body of a runtime export `$name($args)`: the active backend's
/// function, given the export's arguments unchanged, in the boundary.
macro_rules! call_active {
    ($name:ident($($arg:ident),*)) => {
        $crate::ffi::boundary::passthrough(stringify!($name), || {
            // SAFETY: the backend's entry has the export's own signature; the arguments
            // are passed unchanged under the export's contract.
            unsafe { ($crate::ffi::dispatch::active().$name)($($arg),*) }
        })
    };
}
pub(crate) use call_active;

/// Which implementation serves the runtime functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// This crate's host runtime: devices are host memory, streams are host threads.
    Host,
    /// A real runtime behind this library, forwarded to.
    Forward,
}

/// The runtime functions, with CANN's C signatures.
#[allow(non_snake_case, missing_docs)]
#[derive(Clone, Copy)]
pub struct RuntimeFns {
    pub backend: Backend,
    pub aclInit: unsafe extern "C" fn(*const c_char) -> aclError,
    pub aclFinalize: unsafe extern "C" fn() -> aclError,
    pub aclrtSetDevice: unsafe extern "C" fn(i32) -> aclError,
    pub aclrtResetDevice: unsafe extern "C" fn(i32) -> aclError,
    pub aclrtResetDeviceForce: unsafe extern "C" fn(i32) -> aclError,
    pub aclrtGetDevice: unsafe extern "C" fn(*mut i32) -> aclError,
    pub aclrtGetDeviceCount: unsafe extern "C" fn(*mut u32) -> aclError,
    pub aclrtCreateContext: unsafe extern "C" fn(*mut aclrtContext, i32) -> aclError,
    pub aclrtDestroyContext: unsafe extern "C" fn(aclrtContext) -> aclError,
    pub aclrtSetCurrentContext: unsafe extern "C" fn(aclrtContext) -> aclError,
    pub aclrtGetCurrentContext: unsafe extern "C" fn(*mut aclrtContext) -> aclError,
    pub aclrtCreateStream: unsafe extern "C" fn(*mut aclrtStream) -> aclError,
    pub aclrtCreateStreamWithConfig: unsafe extern "C" fn(*mut aclrtStream, u32, u32) -> aclError,
    pub aclrtDestroyStream: unsafe extern "C" fn(aclrtStream) -> aclError,
    pub aclrtDestroyStreamForce: unsafe extern "C" fn(aclrtStream) -> aclError,
    pub aclrtSynchronizeStream: unsafe extern "C" fn(aclrtStream) -> aclError,
    pub aclrtSynchronizeStreamWithTimeout: unsafe extern "C" fn(aclrtStream, i32) -> aclError,
    pub aclrtSynchronizeDevice: unsafe extern "C" fn() -> aclError,
    pub aclrtMalloc:
        unsafe extern "C" fn(*mut *mut c_void, usize, aclrtMemMallocPolicy) -> aclError,
    pub aclrtMallocAlign32:
        unsafe extern "C" fn(*mut *mut c_void, usize, aclrtMemMallocPolicy) -> aclError,
    pub aclrtFree: unsafe extern "C" fn(*mut c_void) -> aclError,
    pub aclrtMemcpy:
        unsafe extern "C" fn(*mut c_void, usize, *const c_void, usize, aclrtMemcpyKind) -> aclError,
    pub aclrtMemset: unsafe extern "C" fn(*mut c_void, usize, i32, usize) -> aclError,
    pub aclrtMemcpyAsync: unsafe extern "C" fn(
        *mut c_void,
        usize,
        *const c_void,
        usize,
        aclrtMemcpyKind,
        aclrtStream,
    ) -> aclError,
    pub aclrtMemsetAsync:
        unsafe extern "C" fn(*mut c_void, usize, i32, usize, aclrtStream) -> aclError,
    pub aclrtGetMemInfo: unsafe extern "C" fn(aclrtMemAttr, *mut usize, *mut usize) -> aclError,
    pub aclallocLaunchKernel:
        unsafe extern "C" fn(aclrtStream, usize, aclallocKernelFunc, *mut c_void) -> aclError,
    // The virtual-memory functions: the real runtime's, or `None` where the
    // export itself is the implementation (`crate::ffi::virtual_memory`).
    pub aclrtReserveMemAddress:
        Option<unsafe extern "C" fn(*mut *mut c_void, usize, usize, *mut c_void, u64) -> aclError>,
    pub aclrtReleaseMemAddress: Option<unsafe extern "C" fn(*mut c_void) -> aclError>,
    pub aclrtMallocPhysical: Option<
        unsafe extern "C" fn(
            *mut aclrtDrvMemHandle,
            usize,
            *const aclrtPhysicalMemProp,
            u64,
        ) -> aclError,
    >,
    pub aclrtFreePhysical: Option<unsafe extern "C" fn(aclrtDrvMemHandle) -> aclError>,
    pub aclrtMapMem:
        Option<unsafe extern "C" fn(*mut c_void, usize, usize, aclrtDrvMemHandle, u64) -> aclError>,
    pub aclrtUnmapMem: Option<unsafe extern "C" fn(*mut c_void) -> aclError>,
    pub aclrtMemGetAllocationGranularity: Option<
        unsafe extern "C" fn(
            *mut aclrtPhysicalMemProp,
            aclrtMemGranularityOptions,
            *mut usize,
        ) -> aclError,
    >,
}

/// The host runtime's table.
fn host_fns() -> RuntimeFns {
    use crate::ffi::launch::host as l;
    use crate::ffi::memory::host as m;
    use crate::ffi::runtime::host as r;
    RuntimeFns {
        backend: Backend::Host,
        aclInit: r::aclInit,
        aclFinalize: r::aclFinalize,
        aclrtSetDevice: r::aclrtSetDevice,
        aclrtResetDevice: r::aclrtResetDevice,
        aclrtResetDeviceForce: r::aclrtResetDeviceForce,
        aclrtGetDevice: r::aclrtGetDevice,
        aclrtGetDeviceCount: r::aclrtGetDeviceCount,
        aclrtCreateContext: r::aclrtCreateContext,
        aclrtDestroyContext: r::aclrtDestroyContext,
        aclrtSetCurrentContext: r::aclrtSetCurrentContext,
        aclrtGetCurrentContext: r::aclrtGetCurrentContext,
        aclrtCreateStream: r::aclrtCreateStream,
        aclrtCreateStreamWithConfig: r::aclrtCreateStreamWithConfig,
        aclrtDestroyStream: r::aclrtDestroyStream,
        aclrtDestroyStreamForce: r::aclrtDestroyStreamForce,
        aclrtSynchronizeStream: r::aclrtSynchronizeStream,
        aclrtSynchronizeStreamWithTimeout: r::aclrtSynchronizeStreamWithTimeout,
        aclrtSynchronizeDevice: r::aclrtSynchronizeDevice,
        aclrtMalloc: m::aclrtMalloc,
        aclrtMallocAlign32: m::aclrtMallocAlign32,
        aclrtFree: m::aclrtFree,
        aclrtMemcpy: m::aclrtMemcpy,
        aclrtMemset: m::aclrtMemset,
        aclrtMemcpyAsync: m::aclrtMemcpyAsync,
        aclrtMemsetAsync: m::aclrtMemsetAsync,
        aclrtGetMemInfo: m::aclrtGetMemInfo,
        aclallocLaunchKernel: l::aclallocLaunchKernel,
        aclrtReserveMemAddress: None,
        aclrtReleaseMemAddress: None,
        aclrtMallocPhysical: None,
        aclrtFreePhysical: None,
        aclrtMapMem: None,
        aclrtUnmapMem: None,
        aclrtMemGetAllocationGranularity: None,
    }
}

/// The table in front of a real runtime.
fn forward_fns() -> RuntimeFns {
    use crate::ffi::forward as f;
    use crate::interpose::next::{address, real, Sym};
    let mut t = host_fns();
    t.backend = Backend::Forward;
    // The functions used as they are: the `as_is` group of the one list.
    macro_rules! real_if_present {
        (as_is: [$($name:ident),* $(,)?], $($others:tt)*) => {$(
            // SAFETY: each field has the C type of the function of its name.
            if let Some(real) = unsafe { real(Sym::$name) } {
                t.$name = real;
            }
        )*};
    }
    crate::interpose::next::symbol_groups!(real_if_present);
    // The `wrapped` group, each with its wrapper of the same name in `forward`.
    macro_rules! wrapped_if_present {
        (as_is: $as_is:tt, wrapped: [$($name:ident),* $(,)?], $($others:tt)*) => {$(
            if address(Sym::$name).is_some() {
                t.$name = f::$name;
            }
        )*};
    }
    crate::interpose::next::symbol_groups!(wrapped_if_present);
    // The real function or none (the export then serves the call itself):
    // the `real_or_export` group.
    macro_rules! real_or_none {
        (as_is: $as_is:tt, wrapped: $wrapped:tt, real_or_export: [$($name:ident),* $(,)?], $($others:tt)*) => {$(
            // SAFETY: each field has the C type of the function of its name.
            t.$name = unsafe { real(Sym::$name) };
        )*};
    }
    crate::interpose::next::symbol_groups!(real_or_none);
    t
}

/// Decides which backend serves this process. Called once: a real runtime
/// is behind this library when the lookup found its streams.
fn select() -> RuntimeFns {
    if crate::interpose::next::real_runtime() {
        forward_fns()
    } else {
        host_fns()
    }
}

static ACTIVE: OnceLock<RuntimeFns> = OnceLock::new();

/// The runtime functions of the chosen backend; the first call decides
/// (the process's wiring, [`super::process::ensure`]).
#[inline]
pub fn active() -> &'static RuntimeFns {
    match ACTIVE.get() {
        Some(table) => table,
        None => first_use(),
    }
}

#[cold]
fn first_use() -> &'static RuntimeFns {
    super::process::ensure();
    choose()
}

/// Chooses the table (once); the composition root calls it while wiring.
pub(super) fn choose() -> &'static RuntimeFns {
    ACTIVE.get_or_init(select)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_backend_is_active_and_chosen_once() {
        let a = active() as *const RuntimeFns;
        assert_eq!(active().backend, Backend::Host);
        assert_eq!(a, active() as *const RuntimeFns);
        assert!(
            active().aclrtMalloc as usize
                == crate::ffi::memory::host::aclrtMalloc as *const () as usize,
            "exports dispatch to the host implementation"
        );
    }
}
