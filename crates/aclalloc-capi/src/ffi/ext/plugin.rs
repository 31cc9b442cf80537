//! Pluggable allocators (torch_npu's `NPUPluggableAllocator`) for C.
//!
//! Which device and stream the plugin receives: the device current on the
//! calling thread, and the stream being served when it is known (the raw
//! functions take it as an argument; launches publish theirs), else NULL.
//! Free always passes what alloc got.
#![allow(non_snake_case, non_camel_case_types)]

use crate::base::boundary::ffi_boundary;
use crate::base::error::{Error, Result};
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args::{self, Out};
use crate::plugin::{published, PluggableAllocator, PluggableHandle, PluginSpec, Stats};
use crate::registry::StreamKey;
use std::ffi::{c_char, c_void, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::ptr::NonNull;

/// A pluggable allocator handle, from `aclallocPluggableCreate`.
pub type aclallocPluggable = *mut c_void;

/// Where a pluggable allocator's shared object is and which symbols are its
/// functions. Set the unused optional fields to NULL (or ""); a zeroed struct
/// plus the three required fields is a valid configuration.
#[repr(C)]
pub struct aclallocPluggableConfig {
    /// The shared object, as `dlopen` takes it (a name without '/' is searched
    /// on the loader's path). Required.
    pub path: *const c_char,
    /// `void *alloc(ssize_t size, int device, aclrtStream stream)`. Required.
    pub allocSymbol: *const c_char,
    /// `void free(void *ptr, ssize_t size, int device, aclrtStream stream)`. Required.
    pub freeSymbol: *const c_char,
    /// `void init(int device_count)`: called once, when the allocator is created. Optional.
    pub initSymbol: *const c_char,
    /// `void empty_cache(void)`: called by `aclallocPluggableEmptyCache`, and
    /// once more by `aclallocPluggableDestroy` just before the object is
    /// unloaded. Optional.
    pub emptyCacheSymbol: *const c_char,
    /// `void set_memory_fraction(double fraction, int device)`: called by
    /// `aclallocPluggableSetMemoryFraction`. Optional.
    pub memoryFractionSymbol: *const c_char,
}

/// Statistics of an allocator (a pluggable one, or the default allocator's
/// raw functions).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct aclallocAllocatorStats {
    /// Bytes in live blocks now.
    pub allocatedBytesCurrent: u64,
    /// The most bytes live at once since creation or the last peak reset.
    pub allocatedBytesPeak: u64,
    /// Bytes ever allocated.
    pub allocatedBytesTotal: u64,
    /// Bytes ever freed.
    pub freedBytesTotal: u64,
    /// Successful allocations.
    pub allocCount: u64,
    /// Successful frees.
    pub freeCount: u64,
    /// Live blocks now.
    pub activeCount: u64,
    /// The most live blocks at once since creation or the last peak reset.
    pub activePeak: u64,
    /// Allocations the plugin answered with NULL.
    pub failedAllocCount: u64,
    /// Frees refused: pointers not allocated here, and double frees.
    pub refusedFreeCount: u64,
}

impl From<Stats> for aclallocAllocatorStats {
    fn from(s: Stats) -> Self {
        aclallocAllocatorStats {
            allocatedBytesCurrent: s.allocated_bytes_current,
            allocatedBytesPeak: s.allocated_bytes_peak,
            allocatedBytesTotal: s.allocated_bytes_total,
            freedBytesTotal: s.freed_bytes_total,
            allocCount: s.alloc_count,
            freeCount: s.free_count,
            activeCount: s.active_count,
            activePeak: s.active_peak,
            failedAllocCount: s.failed_alloc_count,
            refusedFreeCount: s.refused_free_count,
        }
    }
}

pub(super) fn handle(allocator: aclallocPluggable) -> Result<PluggableHandle> {
    PluggableHandle::from_ptr(allocator).ok_or(Error::NullPointer { param: "allocator" })
}

/// Loads a pluggable allocator from a shared object and resolves its
/// functions by name, then calls its init function (if named) with the device
/// count. On success `*allocator` is its handle and `*allocatorDesc` a
/// complete descriptor for `aclrtAllocatorRegister`: its blocks are device
/// pointers and getAddrFromBlock returns the block itself.
///
/// The plugin is given the device current on the calling thread and the
/// stream being served when known, else NULL; free passes the size, device
/// and stream alloc got. A pointer the allocator did not hand out, or one
/// freed already, never reaches the plugin's free.
///
/// Errors: NULL config, path, allocSymbol, freeSymbol or out-parameter:
/// `ACL_ERROR_INVALID_PARAM`; the object cannot be loaded:
/// `ACL_ERROR_INVALID_FILE`; a named symbol is missing:
/// `ACL_ERROR_FILE_MISSING_ATTR`. The message includes the loader's text.
/// Nothing is created and nothing stays loaded on failure.
///
/// # Safety
/// `config` must point to a valid struct whose strings are NUL-terminated;
/// the out-parameters must be writable. The named symbols must have the
/// documented signatures. Loading runs the object's initialisers.
#[no_mangle]
pub unsafe extern "C" fn aclallocPluggableCreate(
    config: *const aclallocPluggableConfig,
    allocator: *mut aclallocPluggable,
    allocatorDesc: *mut aclrtAllocatorDesc,
) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: `config` is NULL or a readable `aclallocPluggableConfig` (the caller's
        // contract); `args::input` refuses NULL.
        let config = unsafe { args::input(config, "config") }?;
        // SAFETY: `allocator` is NULL or writable (the caller's contract); `Out::required`
        // refuses NULL.
        let allocator_out = unsafe { Out::required(allocator, "allocator") }?;
        // SAFETY: `allocatorDesc` is NULL or writable (the caller's contract); `Out::required`
        // refuses NULL.
        let desc_out = unsafe { Out::required(allocatorDesc, "allocatorDesc") }?;
        // SAFETY: `config->path` is NULL or NUL-terminated (the caller's contract); `c_bytes`
        // refuses NULL.
        let path = unsafe { args::c_bytes(config.path, "config->path") }?;
        let spec = PluginSpec {
            path: OsStr::from_bytes(path.to_bytes()),
            // SAFETY: `config->allocSymbol` is NULL or NUL-terminated (the caller's contract);
            // `c_bytes` refuses NULL.
            alloc: unsafe { args::c_bytes(config.allocSymbol, "config->allocSymbol") }?,
            // SAFETY: `config->freeSymbol` is NULL or NUL-terminated (the caller's contract);
            // `c_bytes` refuses NULL.
            free: unsafe { args::c_bytes(config.freeSymbol, "config->freeSymbol") }?,
            // SAFETY: `config->initSymbol` is NULL (absent) or NUL-terminated (the caller's
            // contract).
            init: unsafe { args::optional_c_bytes(config.initSymbol) },
            // SAFETY: `config->emptyCacheSymbol` is NULL (absent) or NUL-terminated (the
            // caller's contract).
            empty_cache: unsafe { args::optional_c_bytes(config.emptyCacheSymbol) },
            // SAFETY: `config->memoryFractionSymbol` is NULL (absent) or NUL-terminated (the
            // caller's contract).
            memory_fraction: unsafe { args::optional_c_bytes(config.memoryFractionSymbol) },
        };
        if path.is_empty() {
            return Err(Error::InvalidParam {
                param: "config->path",
                reason: "It is empty",
            });
        }
        let (h, d) = published::publish(PluggableAllocator::load(&spec)?)?;
        allocator_out.write(h.as_ptr());
        desc_out.write(d.as_ptr());
        Ok(())
    })
}

/// Destroys a pluggable allocator and the descriptor made for it (if the
/// caller has not destroyed that already), and unloads the shared object once
/// nothing uses it. If `emptyCacheSymbol` was named, that function is called
/// once right before the unload (after the last use of this allocator), so a
/// caching plugin can give back the memory it holds while its code is still
/// loaded. Refused with `ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED` while blocks
/// are live or a stream is registered with it; a refused destroy calls
/// nothing. A call of this allocator running on another thread is waited
/// for (a block it leaves makes destroy refuse as well; calls of other
/// pluggable allocators running at that moment are waited for too), and
/// allocations that start while destroy decides are refused
/// (`ACL_ERROR_INVALID_PARAM`, "being destroyed"; frees go on); from inside
/// a function of a pluggable allocator (this one or another), destroy is
/// refused.
#[no_mangle]
pub extern "C" fn aclallocPluggableDestroy(allocator: aclallocPluggable) -> aclError {
    ffi_boundary!(|| {
        published::destroy(handle(allocator)?, |obj| {
            crate::default_allocator::global().uses(obj)
        })
    })
}

/// Allocates `size` bytes from the plugin for `stream` (NULL: any stream) on
/// the calling thread's current device. NULL from the plugin:
/// `ACL_ERROR_RT_MEMORY_ALLOCATION`, `*devPtr` untouched.
///
/// # Safety
/// `devPtr` must be writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocPluggableMalloc(
    allocator: aclallocPluggable,
    devPtr: *mut *mut c_void,
    size: usize,
    stream: aclrtStream,
) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(devPtr, "devPtr") }?;
        let ptr = published::alloc(handle(allocator)?, size, StreamKey::from_ptr(stream))?;
        out.write(ptr.as_ptr());
        Ok(())
    })
}

/// Frees a pointer from `aclallocPluggableMalloc` or the descriptor's alloc.
/// A pointer not allocated here, or freed already:
/// `ACL_ERROR_INVALID_PARAM` ("Trying to free a pointer not allocated here"),
/// and the plugin is not called.
#[no_mangle]
pub extern "C" fn aclallocPluggableFree(
    allocator: aclallocPluggable,
    devPtr: *mut c_void,
) -> aclError {
    ffi_boundary!(|| {
        let block = NonNull::new(devPtr).ok_or(Error::NullPointer { param: "devPtr" })?;
        published::free(handle(allocator)?, block)
    })
}

/// Reads the allocator's statistics.
///
/// # Safety
/// `stats` must be writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocPluggableGetStats(
    allocator: aclallocPluggable,
    stats: *mut aclallocAllocatorStats,
) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(stats, "stats") }?;
        let stats = published::with_allocator(handle(allocator)?, |a| Ok(a.stats()))?;
        out.write(stats.into());
        Ok(())
    })
}

/// Restarts the peak statistics from the current values.
#[no_mangle]
pub extern "C" fn aclallocPluggableResetPeakStats(allocator: aclallocPluggable) -> aclError {
    ffi_boundary!(|| {
        published::with_allocator(handle(allocator)?, |a| {
            a.reset_peak_stats();
            Ok(())
        })
    })
}

/// Calls the plugin's empty-cache function; without one, does nothing and
/// succeeds (as PyTorch's pluggable allocator does).
#[no_mangle]
pub extern "C" fn aclallocPluggableEmptyCache(allocator: aclallocPluggable) -> aclError {
    ffi_boundary!(|| { published::with_allocator(handle(allocator)?, |a| a.empty_cache()) })
}

/// Calls the plugin's memory-fraction function with `fraction` in (0, 1].
/// Without one: `ACL_ERROR_API_NOT_SUPPORT` (a limit silently ignored would
/// be worse than an error).
#[no_mangle]
pub extern "C" fn aclallocPluggableSetMemoryFraction(
    allocator: aclallocPluggable,
    fraction: f64,
    deviceId: i32,
) -> aclError {
    ffi_boundary!(|| {
        published::with_allocator(handle(allocator)?, |a| {
            a.set_memory_fraction(fraction, deviceId)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::errlog;
    use crate::base::error::{
        ACL_ERROR_INVALID_PARAM, ACL_ERROR_RT_MEMORY_ALLOCATION, ACL_SUCCESS,
    };
    use crate::base::sync::{AtomicUsize, Ordering};
    use crate::plugin::PluginFunctions;

    static ALLOCS: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        /// Frees on this thread (the tests of this module run in parallel).
        static FREES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }
    static NEXT: AtomicUsize = AtomicUsize::new(0x7A11_0000);

    /// NULL above 1 MiB; counts its calls.
    unsafe extern "C" fn alloc_small(size: isize, _: i32, _: *mut c_void) -> *mut c_void {
        ALLOCS.fetch_add(1, Ordering::SeqCst);
        if size > 1 << 20 {
            return std::ptr::null_mut();
        }
        NEXT.fetch_add(64, Ordering::SeqCst) as *mut c_void
    }
    unsafe extern "C" fn free_counted(_: *mut c_void, _: isize, _: i32, _: *mut c_void) {
        FREES.set(FREES.get() + 1);
    }

    fn publish_one() -> aclallocPluggable {
        let (h, _) = published::publish(PluggableAllocator::from_functions(PluginFunctions {
            alloc: alloc_small,
            free: free_counted,
            init: None,
            empty_cache: None,
            memory_fraction: None,
        }))
        .unwrap();
        h.as_ptr()
    }

    /// `aclallocPluggableMalloc` for any stream.
    fn malloc(h: usize, out: *mut *mut c_void, size: usize) -> aclError {
        // SAFETY: every caller here passes NULL (refused) or a writable
        // out-parameter.
        unsafe { aclallocPluggableMalloc(h as aclallocPluggable, out, size, std::ptr::null_mut()) }
    }

    /// What one call answered: its code, the message it left, and what it
    /// wrote to the out-parameter (`WRITTEN_BEFORE` when nothing).
    type Answer = (aclError, Option<String>, usize);
    const WRITTEN_BEFORE: usize = 0xD00D;

    fn answer(call: impl FnOnce(*mut *mut c_void) -> aclError) -> Answer {
        let _ = errlog::take_recent();
        let mut out = WRITTEN_BEFORE as *mut c_void;
        let code = call(&mut out);
        (code, errlog::take_recent(), out as usize)
    }

    /// The call answered `code`, with a message containing `text`, nothing
    /// written.
    fn fails((c, m, out): Answer, code: aclError, text: &str) {
        assert_eq!(c, code, "{m:?}");
        let m = m.expect("a message");
        assert!(m.contains(text), "{m}");
        assert_eq!(out, WRITTEN_BEFORE, "written on failure");
    }

    #[test]
    fn failures_are_named_and_write_nothing() {
        let a = publish_one();
        let ha = a as usize;
        let free = |p: *mut c_void| aclallocPluggableFree(ha as aclallocPluggable, p);
        // Success: a block written, no message; the free of it succeeds.
        let (code, m, out) = answer(|out| malloc(ha, out, 64));
        assert_eq!((code, m), (ACL_SUCCESS, None));
        assert_ne!(out, WRITTEN_BEFORE);
        assert_eq!(free(out as *mut c_void), ACL_SUCCESS);
        // NULL from the plugin (which was called).
        let before = ALLOCS.load(Ordering::SeqCst);
        fails(
            answer(|out| malloc(ha, out, 2 << 20)),
            ACL_ERROR_RT_MEMORY_ALLOCATION,
            "returned NULL for 2097152 bytes",
        );
        assert!(ALLOCS.load(Ordering::SeqCst) > before);
        // Arguments, named.
        let invalid = ACL_ERROR_INVALID_PARAM;
        fails(
            answer(|_| malloc(ha, std::ptr::null_mut(), 64)),
            invalid,
            "devPtr",
        );
        fails(answer(|out| malloc(0, out, 64)), invalid, "allocator");
        fails(answer(|out| malloc(ha, out, usize::MAX)), invalid, "size");
        // Frees refused, with the reason; NULL named.
        let frees = FREES.get();
        fails(
            answer(|_| free(0x1234 as *mut c_void)),
            invalid,
            "not allocated here",
        );
        fails(answer(|_| free(std::ptr::null_mut())), invalid, "devPtr");
        let mut block = std::ptr::null_mut();
        assert_eq!(malloc(ha, &mut block, 64), ACL_SUCCESS);
        assert_eq!(free(block), ACL_SUCCESS);
        fails(answer(|_| free(block)), invalid, "double free");
        assert_eq!(FREES.get(), frees + 1, "one free");
        // A destroyed handle.
        assert_eq!(aclallocPluggableDestroy(a), ACL_SUCCESS);
        let gone = "not a live pluggable allocator";
        fails(answer(|out| malloc(ha, out, 64)), invalid, gone);
        fails(answer(|_| free(0x1234 as *mut c_void)), invalid, gone);
    }

    #[test]
    fn while_a_destroy_decides_allocations_are_refused_without_the_plugin_and_frees_go_on() {
        let a = publish_one();
        let ha = a as usize;
        let handle = PluggableHandle::from_ptr(a).unwrap();
        let stats = || published::with_allocator(handle, |a| Ok(a.stats())).unwrap();
        let mut block = std::ptr::null_mut();
        assert_eq!(malloc(ha, &mut block, 64), ACL_SUCCESS);
        // What a destroy does while it decides.
        published::close(handle).unwrap();
        let calls = stats().alloc_count + stats().failed_alloc_count;
        fails(
            answer(|out| malloc(ha, out, 64)),
            ACL_ERROR_INVALID_PARAM,
            "being destroyed",
        );
        let s = stats();
        let asked = s.alloc_count + s.failed_alloc_count;
        assert_eq!(asked, calls, "the plugin was not asked");
        // A free goes on.
        assert_eq!(aclallocPluggableFree(a, block), ACL_SUCCESS);
        assert_eq!(stats().free_count, 1);
        // A destroy that refuses opens it again.
        published::reopen(handle);
        assert_eq!(malloc(ha, &mut block, 64), ACL_SUCCESS);
        assert_eq!(aclallocPluggableFree(a, block), ACL_SUCCESS);
        assert_eq!(aclallocPluggableDestroy(a), ACL_SUCCESS);
    }
}
