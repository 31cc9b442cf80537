//! Each ACL function this library exports is looked up in a real runtime, if
//! one is loaded: where found, the export forwards to it; where not, this
//! library is the implementation.
//!
//! **When.** At the first call that creates runtime state, so a runtime that
//! arrives by `dlopen` before then is found; calls that need no runtime only
//! [`probe`] (finding none decides nothing). The decision is then final.
//!
//! **Where.** `dlsym(RTLD_NEXT, name)`, then the loaded objects
//! (`super::loaded`), which also sees a runtime loaded `RTLD_LOCAL`.
//!
//! **How.** Results live in a static array of atomics; resolving neither
//! allocates nor calls back into this library. Concurrent first callers wait
//! for the one deciding; a call from inside the lookup sees "no runtime".
//!
//! A runtime loaded after the decision is not used ([`late_runtime`] finds
//! it). `ACLALLOC_FORWARD=0` skips the lookup.

use crate::base::sync::statics::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize};
use crate::base::sync::Ordering;
use std::ffi::CStr;

/// CANN's functions that this library exports and a real runtime may also
/// provide: the one list of the runtime surface, handed to `$then` (here,
/// [`Sym`] and its names). Every name of `runtime` has an export whose body
/// is `crate::ffi::wiring::dispatch::real_or_host!` (the real function when the
/// runtime has it, else the host runtime's); the `allocator_api` and
/// `aclGetRecentErrMsg` are answered by this library in front of a runtime
/// too (`crate::ffi::wiring::forward`), and look the runtime up without forcing the
/// decision. Adding a CANN function: its name here, and its export.
macro_rules! cann_functions {
    ($then:ident) => {
        $then! {
            allocator_api: [
                aclrtAllocatorCreateDesc,
                aclrtAllocatorDestroyDesc,
                aclrtAllocatorSetObjToDesc,
                aclrtAllocatorSetAllocFuncToDesc,
                aclrtAllocatorSetFreeFuncToDesc,
                aclrtAllocatorSetAllocAdviseFuncToDesc,
                aclrtAllocatorSetGetAddrFromBlockFuncToDesc,
                aclrtAllocatorRegister,
                aclrtAllocatorGetByStream,
                aclrtAllocatorUnregister,
                aclGetRecentErrMsg,
            ],
            runtime: [
                aclInit,
                aclFinalize,
                aclrtSetDevice,
                aclrtGetDevice,
                aclrtGetDeviceCount,
                aclrtCreateContext,
                aclrtDestroyContext,
                aclrtSetCurrentContext,
                aclrtGetCurrentContext,
                aclrtCreateStream,
                aclrtCreateStreamWithConfig,
                aclrtMalloc,
                aclrtMallocAlign32,
                aclrtMallocCached,
                aclrtFree,
                aclrtMemcpy,
                aclrtMemset,
                aclrtMemcpyAsync,
                aclrtMemsetAsync,
                aclrtGetMemInfo,
                aclallocLaunchKernel,
                aclrtResetDevice,
                aclrtResetDeviceForce,
                aclrtSynchronizeStream,
                aclrtSynchronizeStreamWithTimeout,
                aclrtSynchronizeDevice,
                aclrtDestroyStream,
                aclrtDestroyStreamForce,
                aclrtReserveMemAddress,
                aclrtReleaseMemAddress,
                aclrtMallocPhysical,
                aclrtFreePhysical,
                aclrtMapMem,
                aclrtUnmapMem,
                aclrtMemGetAllocationGranularity,
                aclrtMallocHost,
                aclrtFreeHost,
                aclrtCreateEvent,
                aclrtCreateEventWithFlag,
                aclrtCreateEventExWithFlag,
                aclrtDestroyEvent,
                aclrtRecordEvent,
                aclrtResetEvent,
                aclrtStreamWaitEvent,
                aclrtStreamWaitEventWithFlag,
                aclmdlRICaptureBegin,
                aclmdlRICaptureToModelRIBegin,
                aclmdlRICaptureGetInfo,
                aclmdlRICaptureEnd,
                aclmdlRICaptureThreadExchangeMode,
                aclmdlRICaptureTaskGrpBegin,
                aclmdlRICaptureTaskGrpEnd,
                aclmdlRICaptureTaskUpdateBegin,
                aclmdlRICaptureTaskUpdateEnd,
                aclmdlRIExecuteAsync,
                aclmdlRIExecute,
                aclmdlRIDestroy,
                aclmdlRIAbort,
                aclmdlRIDebugJsonPrint,
                aclmdlRIBuildBegin,
                aclmdlRIBindStream,
                aclmdlRIEndTask,
                aclmdlRIBuildEnd,
                aclmdlRIUnbindStream,
                aclmdlRICondHandleCreate,
                aclmdlRICondHandleGetCondPtr,
                aclmdlRIAddCondTask,
                aclmdlRISetName,
                aclmdlRIGetName,
                aclmdlRIGetId,
                aclmdlRIGetStreams,
                aclmdlRIDestroyRegisterCallback,
                aclmdlRIDestroyUnregisterCallback,
                aclrtActiveStream,
                aclrtSwitchStream,
                aclrtCreateLabel,
                aclrtSetLabel,
                aclrtDestroyLabel,
                aclrtCreateLabelList,
                aclrtDestroyLabelList,
                aclrtSwitchLabelByIndex,
                aclrtReduceAsync,
                aclrtRandomNumAsync,
                aclrtQueryEventStatus,
                aclrtQueryEventWaitStatus,
                aclrtSynchronizeEvent,
                aclrtSynchronizeEventWithTimeout,
                aclrtEventElapsedTime,
                aclrtEventGetTimestamp,
                aclrtGetSocName,
                aclrtGetRunMode,
                aclsysGetVersionStr,
                aclsysGetVersionNum,
                aclrtGetLastError,
                aclrtPeekAtLastError,
                aclrtCtxGetCurrentDefaultStream,
                aclrtDeviceCanAccessPeer,
                aclrtDeviceEnablePeerAccess,
                aclrtDeviceDisablePeerAccess,
                aclrtStreamQuery,
                aclrtStreamGetPriority,
                aclrtStreamGetFlags,
                aclrtStreamGetId,
                aclrtDeviceGetStreamPriorityRange,
                aclrtSetStreamFailureMode,
                aclrtLaunchHostFunc,
                aclrtLaunchCallback,
                aclrtSubscribeReport,
                aclrtUnSubscribeReport,
                aclrtProcessReport,
                aclrtSubscribeHostFunc,
                aclrtProcessHostFunc,
                aclrtUnSubscribeHostFunc,
                aclrtQueryDeviceStatus,
                aclrtGetDeviceResLimit,
                aclrtSetDeviceResLimit,
                aclrtResetDeviceResLimit,
                aclrtGetDeviceUtilizationRate,
                aclrtSetDeviceSatMode,
                aclrtGetDeviceSatMode,
                aclrtSetStreamOverflowSwitch,
                aclrtGetStreamOverflowSwitch,
                aclrtGetOverflowStatus,
                aclrtResetOverflowStatus,
                aclGetCannAttributeList,
                aclGetCannAttribute,
                aclrtGetDeviceCapability,
                aclrtCheckArchCompatibility,
                aclrtGetThreadLastTaskId,
                aclrtSetExceptionInfoCallback,
                aclrtExceptionInfoCallbackRegister,
                aclrtExceptionInfoCallbackUnregister,
                aclrtGetTaskIdFromExceptionInfo,
                aclrtGetStreamIdFromExceptionInfo,
                aclrtGetThreadIdFromExceptionInfo,
                aclrtGetDeviceIdFromExceptionInfo,
                aclrtGetErrorCodeFromExceptionInfo,
                aclrtGetArgsFromExceptionInfo,
                aclrtGetFuncHandleFromExceptionInfo,
                aclCreateDataBuffer,
                aclDestroyDataBuffer,
                aclUpdateDataBuffer,
                aclGetDataBufferAddr,
                aclGetDataBufferSizeV2,
                aclGetDataBufferSize,
                aclrtBinaryLoadFromFile,
                aclrtBinaryGetFunction,
                aclrtBinaryUnLoad,
                aclrtKernelArgsInit,
                aclrtKernelArgsAppend,
                aclrtKernelArgsAppendPlaceHolder,
                aclrtKernelArgsGetPlaceHolderBuffer,
                aclrtKernelArgsFinalize,
                aclrtLaunchKernelWithConfig,
                aclrtHostRegister,
                aclrtHostRegisterV2,
                aclrtHostGetDevicePointer,
                aclrtHostUnregister,
                aclrtMemAllocManaged,
                aclrtGetResInCurrentThread,
                aclrtGetDeviceInfo,
                aclrtGetErrorVerbose,
                aclrtValueWrite,
                aclrtValueWait,
                aclrtStreamAbort,
                aclrtStreamStop,
                aclrtRegStreamStateCallback,
                aclrtCreateStreamConfigHandle,
                aclrtDestroyStreamConfigHandle,
                aclrtSetStreamConfigOpt,
                aclrtCreateStreamV2,
                aclrtRecordEventWithFlag,
                aclrtMemPoolCreate,
                aclrtMemPoolDestroy,
                aclrtMemPoolSetAttr,
                aclrtMemPoolGetAttr,
                aclrtMemPoolMallocAsync,
                aclrtMemPoolFreeAsync,
                aclrtMemPoolTrimTo,
                aclrtStreamWaitEventWithTimeout,
                aclrtMemExportToShareableHandle,
                aclrtMemExportToShareableHandleV2,
                aclrtMemImportFromShareableHandle,
                aclrtMemImportFromShareableHandleV2,
                aclrtMemSetPidToShareableHandle,
                aclrtMemSetPidToShareableHandleV2,
                aclrtDeviceGetBareTgid,
                aclrtMemSetAccess,
                aclrtMemGetAccess,
                aclrtIpcMemGetExportKey,
                aclrtIpcMemSetImportPid,
                aclrtIpcMemImportByKey,
                aclrtIpcMemClose,
                aclrtCreateNotify,
                aclrtDestroyNotify,
                aclrtRecordNotify,
                aclrtWaitAndResetNotify,
                aclrtGetNotifyId,
                aclrtNotifyGetExportKey,
                aclrtNotifyImportByKey,
                aclrtNotifySetImportPid,
                aclrtIpcGetEventHandle,
                aclrtIpcOpenEventHandle,
                aclrtIpcMemSetAttr,
                aclrtIpcMemImportPidInterServer,
                aclrtNotifyBatchReset,
                aclrtNotifySetImportPidInterServer,
                aclrtSetStreamAttribute,
                aclrtGetStreamAttribute,
            ],
        }
    };
}

macro_rules! symbols {
    ($($group:ident: [$($name:ident),* $(,)?]),* $(,)?) => {
        /// Every ACL function this library exports that a real runtime may also provide.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Sym { $($($name),*),* }

        impl Sym {
            /// All of them, in declaration order.
            pub const ALL: &'static [Sym] = &[$($(Sym::$name),*),*];

            /// The C name.
            pub const fn c_name(self) -> &'static CStr {
                match self {
                    $($(Sym::$name => match CStr::from_bytes_with_nul(
                        concat!(stringify!($name), "\0").as_bytes(),
                    ) {
                        Ok(name) => name,
                        Err(_) => panic!("a symbol name with a NUL inside"),
                    }),*),*
                }
            }
        }
    };
}

cann_functions!(symbols);

const COUNT: usize = Sym::ALL.len();

const UNRESOLVED: u8 = 0;
const RESOLVING: u8 = 1;
const RESOLVED: u8 = 2;

/// Every symbol's address (0: not found), as a lookup returns them.
pub(crate) type Addresses = [usize; COUNT];

/// The results of the lookup and where it stands: plain atomics in a static,
/// so that neither resolving nor reading allocates.
pub(crate) struct Resolver {
    slots: [AtomicUsize; COUNT],
    state: AtomicU8,
    /// The thread doing the lookup (its `pthread_self`), while it runs.
    resolver: AtomicUsize,
}

impl Resolver {
    pub(crate) const fn new() -> Self {
        Resolver {
            slots: [const { AtomicUsize::new(0) }; COUNT],
            state: AtomicU8::new(UNRESOLVED),
            resolver: AtomicUsize::new(0),
        }
    }

    /// Decides on the first call: `find`'s answer becomes final; concurrent
    /// first callers wait for it.
    #[inline]
    pub(crate) fn resolve(&self, find: impl Fn() -> Option<Addresses>) {
        if self.state.load(Ordering::Acquire) != RESOLVED {
            self.lookup_slow(&find, true);
        }
    }

    /// Takes a runtime `find` finds now (deciding), but decides nothing if it finds none.
    #[inline]
    pub(crate) fn probe(&self, find: impl Fn() -> Option<Addresses>) {
        if self.state.load(Ordering::Acquire) != RESOLVED {
            self.lookup_slow(&find, false);
        }
    }

    #[cold]
    #[inline(never)]
    fn lookup_slow(&self, find: &dyn Fn() -> Option<Addresses>, final_answer: bool) {
        // SAFETY: pthread_self has no preconditions.
        let me = unsafe { libc::pthread_self() } as usize;
        loop {
            match self.state.compare_exchange(
                UNRESOLVED,
                RESOLVING,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    self.resolver.store(me, Ordering::Release);
                    let found = find();
                    if let Some(addresses) = found {
                        for (slot, address) in self.slots.iter().zip(addresses) {
                            slot.store(address, Ordering::Relaxed);
                        }
                    }
                    if found.is_some() || final_answer {
                        self.state.store(RESOLVED, Ordering::Release);
                    } else {
                        self.resolver.store(0, Ordering::Relaxed);
                        self.state.store(UNRESOLVED, Ordering::Release);
                    }
                    return;
                }
                Err(RESOLVED) => return,
                Err(_) => {
                    if self.resolver.load(Ordering::Acquire) == me {
                        return; // called from inside the lookup: the slots read as empty
                    }
                    while self.state.load(Ordering::Acquire) == RESOLVING {
                        std::thread::yield_now();
                    }
                    if !final_answer {
                        return; // the other caller's answer is this probe's
                    }
                }
            }
        }
    }

    /// True once the decision is taken.
    #[inline]
    pub(crate) fn decided(&self) -> bool {
        self.state.load(Ordering::Acquire) == RESOLVED
    }

    /// The slot of `sym` (`None` while undecided).
    #[inline]
    fn slot(&self, sym: Sym) -> Option<usize> {
        self.decided().then(|| self.read(sym)).flatten()
    }

    #[inline]
    fn read(&self, sym: Sym) -> Option<usize> {
        Some(self.slots[sym as usize].load(Ordering::Relaxed)).filter(|&a| a != 0)
    }

    /// What the lookup found for `sym`, deciding first if needed (from inside
    /// the lookup, before any slot is written: `None`).
    #[inline]
    pub(crate) fn get(&self, sym: Sym, find: impl Fn() -> Option<Addresses>) -> Option<usize> {
        self.resolve(find);
        self.read(sym)
    }
}

static NEXT: Resolver = Resolver::new();

/// Every name looked up with `lookup`; `None` when none is found.
fn addresses(lookup: impl Fn(&CStr) -> usize) -> Option<Addresses> {
    let mut out = [0; COUNT];
    for (address, sym) in out.iter_mut().zip(Sym::ALL) {
        *address = lookup(sym.c_name());
    }
    out.iter().any(|&a| a != 0).then_some(out)
}

/// The lookup: the objects after this library in the global scope, then every loaded object.
fn find_runtime() -> Option<Addresses> {
    if forwarding_disabled() {
        return None;
    }
    // SAFETY: NUL-terminated names; RTLD_NEXT is valid from code inside a
    // shared object or executable.
    let next = addresses(|name| unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) as usize });
    if next.is_some() {
        return next;
    }
    let found = super::loaded::find(true)?;
    let own = super::loaded::own_base();
    addresses(|name| {
        // SAFETY: the runtime's live handle and a NUL-terminated name.
        let p = unsafe { libc::dlsym(found, name.as_ptr()) };
        // Never this library's own function (a runtime cannot depend on it,
        // but a forwarded call to ourselves would never end).
        match super::loaded::defining_base(p) {
            Some(base) if base != own => p as usize,
            _ => 0,
        }
    })
}

/// The loader's object count when a probe last found nothing: the next
/// probe looks again only when something was loaded since.
static PROBED_AT: AtomicU64 = AtomicU64::new(u64::MAX);

/// [`find_runtime`] for a probe: skipped when nothing was loaded since the
/// last probe that found nothing.
fn find_if_loaded_since() -> Option<Addresses> {
    let now = super::loaded::objects_ever_loaded();
    if PROBED_AT.load(Ordering::Relaxed) == now {
        return None;
    }
    let found = find_runtime();
    if found.is_none() {
        PROBED_AT.store(now, Ordering::Relaxed);
    }
    found
}

/// Decides now if undecided; returns at once after the first time.
#[inline]
pub fn resolve() {
    NEXT.resolve(find_runtime);
}

/// True once "forward or implement" is decided.
#[inline]
pub fn decided() -> bool {
    NEXT.decided()
}

/// Reads `ACLALLOC_FORWARD` now, so an invalid value is reported at load time.
pub fn read_environment() {
    forwarding_disabled();
}

/// `ACLALLOC_FORWARD`, read once without allocating.
fn forwarding_disabled() -> bool {
    const FORWARD_VAR: &str = "ACLALLOC_FORWARD";
    static FORWARD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    !*FORWARD.get_or_init(|| {
        crate::base::env::with_var_no_alloc(FORWARD_VAR, |raw| {
            let value = crate::base::env::truth_var(FORWARD_VAR, raw);
            crate::base::env::or_default(value, true, "on")
        })
    })
}

/// The address of the real implementation of `sym`, if a real runtime
/// provides one (deciding first if needed).
#[inline]
pub fn address(sym: Sym) -> Option<usize> {
    NEXT.get(sym, find_runtime)
}

/// The address of the real `sym` without forcing the decision: while
/// undecided, a runtime loaded now is taken, and none decides nothing.
#[inline]
pub fn probe(sym: Sym) -> Option<usize> {
    NEXT.probe(find_if_loaded_since);
    NEXT.slot(sym)
}

/// The real implementation of `sym` as a function pointer of type `F`
/// (deciding first if needed).
///
/// # Safety
/// `F` must be the C function type of `sym` (an `unsafe extern "C" fn`).
#[inline]
pub unsafe fn real<F: Copy>(sym: Sym) -> Option<F> {
    // SAFETY: the caller's contract.
    address(sym).map(|a| unsafe { as_fn(a) })
}

/// [`real`] without forcing the decision ([`probe`]).
///
/// # Safety
/// As [`real`].
#[inline]
pub unsafe fn real_probed<F: Copy>(sym: Sym) -> Option<F> {
    // SAFETY: the caller's contract.
    probe(sym).map(|a| unsafe { as_fn(a) })
}

/// # Safety
/// `F` is a function pointer type and `a` the address of such a function.
#[inline]
pub(crate) unsafe fn as_fn<F: Copy>(a: usize) -> F {
    const { assert!(std::mem::size_of::<F>() == std::mem::size_of::<usize>()) };
    // SAFETY: the caller's contract.
    unsafe { std::mem::transmute_copy::<usize, F>(&a) }
}

/// True when a real runtime (one with `aclrtCreateStream`) is behind this
/// library; each allocator export still forwards on its own symbol.
pub fn real_runtime() -> bool {
    address(Sym::aclrtCreateStream).is_some()
}

/// The loader's object count at the last late check.
static LATE_CHECKED_AT: AtomicU64 = AtomicU64::new(u64::MAX);
static LATE_FOUND: AtomicBool = AtomicBool::new(false);

/// Once this library serves as the runtime: the path of a real runtime
/// loaded since, the first time one is seen. Cheap; for cold calls.
pub fn late_runtime() -> Option<&'static CStr> {
    if !NEXT.decided()
        || NEXT.slot(Sym::aclrtCreateStream).is_some()
        || LATE_FOUND.load(Ordering::Relaxed)
        || forwarding_disabled()
    {
        return None;
    }
    let now = super::loaded::objects_ever_loaded();
    if LATE_CHECKED_AT.swap(now, Ordering::Relaxed) == now {
        return None;
    }
    let found = super::loaded::find(false)?;
    let name = super::loaded::name_of(found);
    // Kept open: the name stays valid for the life of the process.
    if LATE_FOUND.swap(true, Ordering::AcqRel) {
        return None;
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_runtime_behind_nothing_resolves() {
        // The test executable links only the C library after this code.
        for &sym in Sym::ALL {
            assert_eq!(address(sym), None, "{sym:?}");
        }
        assert!(!real_runtime());
    }

    #[test]
    fn the_first_callers_from_several_threads_share_one_lookup() {
        let (resolver, lookups) = (Resolver::new(), AtomicUsize::new(0));
        let barrier = std::sync::Barrier::new(8);
        let lookup = || {
            lookups.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(std::time::Duration::from_millis(2));
            Some(std::array::from_fn(|i| 0x1000 + i))
        };
        let expected: Vec<_> = Sym::ALL
            .iter()
            .map(|&s| Some(0x1000 + s as usize))
            .collect();
        std::thread::scope(|scope| {
            let callers: Vec<_> = (0..8)
                .map(|_| {
                    scope.spawn(|| {
                        barrier.wait();
                        let found = Sym::ALL.iter().map(|&s| resolver.get(s, lookup));
                        found.collect::<Vec<_>>()
                    })
                })
                .collect();
            for caller in callers {
                let found = caller.join().unwrap();
                assert_eq!(found, expected, "every caller sees the whole lookup");
            }
        });
        assert_eq!(lookups.load(Ordering::Relaxed), 1, "looked up once");
    }

    #[test]
    fn a_call_from_inside_the_lookup_sees_no_runtime_instead_of_deadlocking() {
        let resolver = Resolver::new();
        let inner = std::cell::Cell::new(None);
        resolver.resolve(|| {
            inner.set(Some(resolver.get(Sym::aclInit, || Some([7; COUNT]))));
            Some([5; COUNT])
        });
        assert_eq!(inner.get(), Some(None));
        assert_eq!(resolver.get(Sym::aclInit, || Some([7; COUNT])), Some(5));
    }

    #[test]
    fn a_probe_that_finds_nothing_leaves_the_decision_open() {
        let resolver = Resolver::new();
        resolver.probe(|| None);
        assert!(!resolver.decided(), "nothing found: still open");
        assert_eq!(resolver.slot(Sym::aclInit), None);
        resolver.probe(|| Some([9; COUNT]));
        assert!(resolver.decided(), "a runtime found by a probe is taken");
        assert_eq!(resolver.slot(Sym::aclrtMalloc), Some(9));
        resolver.resolve(|| None);
        assert_eq!(resolver.slot(Sym::aclrtMalloc), Some(9), "fixed once taken");
    }

    #[test]
    fn a_decision_with_no_runtime_is_final_too() {
        let resolver = Resolver::new();
        resolver.resolve(|| None);
        assert!(resolver.decided());
        resolver.probe(|| Some([9; COUNT]));
        resolver.resolve(|| Some([9; COUNT]));
        assert_eq!(resolver.slot(Sym::aclrtCreateStream), None);
    }

    #[test]
    fn names_are_the_c_names() {
        assert_eq!(
            Sym::aclrtAllocatorRegister.c_name().to_str().unwrap(),
            "aclrtAllocatorRegister"
        );
        assert_eq!(Sym::ALL.len(), COUNT);
    }
}
