//! The one rule: at load time, each ACL function this library exports is
//! looked up in the objects loaded after it (`dlsym(RTLD_NEXT, name)`). Where
//! one is found, a real runtime is behind this library and the export
//! forwards to it; where none is, this library is the implementation.
//!
//! The lookup runs once, from an ELF constructor (`.init_array`), before
//! `main` and before any other thread can call in; the results live in a
//! static array of atomics. Nothing in the resolving path allocates or calls
//! back into this library: names are static C strings, and `dlsym` itself
//! only allocates through the C library's malloc, which this library does not
//! interpose. If an export is somehow reached before the constructor ran (a
//! static link into an executable whose constructor order differs), the
//! first caller resolves and concurrent callers wait for it; a call made on
//! the resolving thread from inside `dlsym` sees "no real runtime" instead of
//! deadlocking.
//!
//! `ACLALLOC_FORWARD=0` (a truth value, [`crate::core::env::truth`]) in the
//! environment skips the lookup: this library is then the implementation
//! even in front of a real runtime. An invalid value prints one line on
//! stderr and forwarding stays on (no call can fail at load time).

use std::ffi::CStr;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

macro_rules! symbols {
    ($($name:ident),* $(,)?) => {
        /// Every ACL function this library exports that a real runtime may
        /// also provide.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Sym { $($name),* }

        impl Sym {
            /// All of them, in declaration order.
            pub const ALL: &'static [Sym] = &[$(Sym::$name),*];

            /// The C name.
            pub const fn c_name(self) -> &'static CStr {
                match self {
                    $(Sym::$name => match CStr::from_bytes_with_nul(
                        concat!(stringify!($name), "\0").as_bytes(),
                    ) {
                        Ok(name) => name,
                        Err(_) => panic!("a symbol name with a NUL inside"),
                    }),*
                }
            }
        }
    };
}

symbols! {
    aclInit,
    aclFinalize,
    aclrtSetDevice,
    aclrtResetDevice,
    aclrtResetDeviceForce,
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
    aclrtFree,
    aclrtMemcpy,
    aclrtMemset,
    aclrtMemcpyAsync,
    aclrtMemsetAsync,
    aclrtGetMemInfo,
    aclallocLaunchKernel,
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
}

const COUNT: usize = Sym::ALL.len();

const UNRESOLVED: u8 = 0;
const RESOLVING: u8 = 1;
const RESOLVED: u8 = 2;

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

    /// Runs `lookup` once for every symbol, on the first call; concurrent
    /// first callers wait for it; later calls return at once.
    #[inline]
    pub(crate) fn resolve(&self, lookup: impl Fn(Sym) -> usize) {
        if self.state.load(Ordering::Acquire) != RESOLVED {
            self.resolve_slow(&lookup);
        }
    }

    #[cold]
    #[inline(never)]
    fn resolve_slow(&self, lookup: &dyn Fn(Sym) -> usize) {
        // SAFETY: pthread_self has no preconditions.
        let me = unsafe { libc::pthread_self() } as usize;
        match self.state.compare_exchange(
            UNRESOLVED,
            RESOLVING,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                self.resolver.store(me, Ordering::Release);
                for (slot, &sym) in self.slots.iter().zip(Sym::ALL) {
                    slot.store(lookup(sym), Ordering::Relaxed);
                }
                self.state.store(RESOLVED, Ordering::Release);
            }
            Err(_) => {
                if self.resolver.load(Ordering::Acquire) == me {
                    return; // called from inside the lookup: the slots read as empty
                }
                while self.state.load(Ordering::Acquire) != RESOLVED {
                    std::thread::yield_now();
                }
            }
        }
    }

    /// What the lookup found for `sym` (resolving first if needed).
    #[inline]
    pub(crate) fn get(&self, sym: Sym, lookup: impl Fn(Sym) -> usize) -> Option<usize> {
        self.resolve(lookup);
        match self.slots[sym as usize].load(Ordering::Relaxed) {
            0 => None,
            found => Some(found),
        }
    }
}

static NEXT: Resolver = Resolver::new();

/// The lookup in the objects loaded after this library.
fn dlsym_next(sym: Sym) -> usize {
    if forwarding_disabled() {
        return 0;
    }
    // SAFETY: a NUL-terminated name; RTLD_NEXT is valid from code inside a
    // shared object or executable.
    unsafe { libc::dlsym(libc::RTLD_NEXT, sym.c_name().as_ptr()) as usize }
}

/// Makes sure the lookup has run; returns at once after the first time.
#[inline]
pub fn resolve() {
    NEXT.resolve(dlsym_next);
}

/// `ACLALLOC_FORWARD` read once (the lookup asks for every symbol), with
/// `getenv`: nothing in the resolving path allocates.
fn forwarding_disabled() -> bool {
    const FORWARD_VAR: &str = "ACLALLOC_FORWARD";
    static FORWARD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    !*FORWARD.get_or_init(|| {
        crate::core::env::with_var_no_alloc(FORWARD_VAR, |raw| {
            let value = crate::core::env::truth_var(FORWARD_VAR, raw);
            crate::core::env::or_default(value, true, "on")
        })
    })
}

/// The address of the real implementation of `sym`, if a real runtime
/// provides one.
#[inline]
pub fn address(sym: Sym) -> Option<usize> {
    NEXT.get(sym, dlsym_next)
}

/// The real implementation of `sym` as a function pointer of type `F`.
///
/// # Safety
/// `F` must be the C function type of `sym` (an `unsafe extern "C" fn`).
#[inline]
pub unsafe fn real<F: Copy>(sym: Sym) -> Option<F> {
    const { assert!(std::mem::size_of::<F>() == std::mem::size_of::<usize>()) };
    // SAFETY: the caller's contract: `F` is a function pointer type.
    address(sym).map(|a| unsafe { std::mem::transmute_copy::<usize, F>(&a) })
}

/// True when a real runtime is behind this library: it provides streams
/// (`aclrtCreateStream`). The runtime backend is chosen on this; each
/// allocator export forwards on its own symbol being found.
pub fn real_runtime() -> bool {
    address(Sym::aclrtCreateStream).is_some()
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
        use std::sync::Arc;
        let resolver = Arc::new(Resolver::new());
        let lookups = Arc::new(AtomicUsize::new(0));
        let barrier = Arc::new(std::sync::Barrier::new(8));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (resolver, lookups, barrier) =
                    (resolver.clone(), lookups.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    let lookup = |sym: Sym| {
                        lookups.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(std::time::Duration::from_micros(200));
                        0x1000 + sym as usize
                    };
                    Sym::ALL
                        .iter()
                        .map(|&s| resolver.get(s, lookup))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let expected: Vec<_> = Sym::ALL
            .iter()
            .map(|&s| Some(0x1000 + s as usize))
            .collect();
        for t in threads {
            assert_eq!(
                t.join().unwrap(),
                expected,
                "every caller sees the whole lookup"
            );
        }
        assert_eq!(
            lookups.load(Ordering::Relaxed),
            Sym::ALL.len(),
            "looked up once"
        );
    }

    #[test]
    fn a_call_from_inside_the_lookup_sees_no_runtime_instead_of_deadlocking() {
        let resolver = Resolver::new();
        let inner = std::cell::Cell::new(None);
        resolver.resolve(|sym| {
            if sym == Sym::aclInit {
                inner.set(Some(resolver.get(Sym::aclInit, |_| 7)));
            }
            5
        });
        assert_eq!(inner.get(), Some(None));
        assert_eq!(resolver.get(Sym::aclInit, |_| 7), Some(5));
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
