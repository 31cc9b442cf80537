//! A pluggable allocator: a plugin's functions, its live blocks and counters.

use super::context;
use super::hooks::Hooks;
use super::library::{
    self, Loaded, PluginEmptyCacheFn, PluginFunctions, PluginInitFn, PluginMemoryFractionFn,
    PluginSpec,
};
use super::live::{self, Books, LiveBlock, Stats};
use crate::base::error::{Error, Result};
use crate::base::foreign_call::{self, Callback, Name, Outcome, PluginFunction};
use crate::base::sync::{AtomicBool, Mutex};
use crate::registry::StreamKey;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;

/// An allocator whose memory comes from a plugin's alloc and free functions
/// (torch_npu's `NPUPluggableAllocator`), with the bookkeeping the plugin
/// does not do: which pointers are live, and statistics.
pub struct PluggableAllocator {
    functions: PluginFunctions,
    /// The library and symbol names, for the message when a function throws
    /// (`None`: functions linked into the process).
    names: Option<Box<Names>>,
    /// The live blocks and the counters (the tracked-allocations adaptor).
    live: Books,
    /// Set while a destroy decides whether it may go ahead: the callbacks
    /// and the C functions refuse new allocations meanwhile (frees go on),
    /// so that no block can appear after destroy found none
    /// (`super::published::destroy`).
    pub(crate) closing: AtomicBool,
    /// The functions set by address after creation (`super::hooks`).
    pub(super) hooks: Mutex<Hooks>,
    /// Set when an init function was set and has not run yet.
    pub(super) init_pending: AtomicBool,
    /// Held while a pending init function runs, so uses wait for it.
    pub(super) init_lock: Mutex<()>,
    // Last, so the object is unloaded after everything that points into it.
    _library: Option<Arc<Loaded>>,
}

impl Drop for PluggableAllocator {
    /// The last reference is going and the object is unloaded right after
    /// (the library field is dropped after this runs): a plugin that caches
    /// memory would otherwise lose the blocks it holds with its code, so its
    /// empty-cache hook, if one was named, runs first. Nothing can use this
    /// allocator any more, so no call of the plugin runs concurrently with it
    /// through this allocator.
    fn drop(&mut self) {
        // An init function never run is not run now, just to be torn down.
        self.init_pending
            .store(false, crate::base::sync::Ordering::Relaxed);
        let _ = self.empty_cache();
    }
}

impl PluggableAllocator {
    /// Loads the plugin and resolves its functions; nothing is kept on failure.
    /// The init hook is not called here: see [`PluggableAllocator::init`].
    pub fn load(spec: &PluginSpec<'_>) -> Result<Self> {
        let (functions, library) = library::load(spec)?;
        let mut allocator = Self::with_library(functions, Some(library));
        allocator.names = Some(Box::new(Names::of(spec)));
        Ok(allocator)
    }

    /// An allocator over functions that are already in the process (for
    /// example plain Rust or C functions linked in).
    pub fn from_functions(functions: PluginFunctions) -> Self {
        Self::with_library(functions, None)
    }

    fn with_library(functions: PluginFunctions, library: Option<Arc<Loaded>>) -> Self {
        PluggableAllocator {
            functions,
            names: None,
            live: live::books(),
            closing: AtomicBool::new(false),
            hooks: Mutex::new(Hooks::default()),
            init_pending: AtomicBool::new(false),
            init_lock: Mutex::new(()),
            _library: library,
        }
    }

    /// Calls the plugin's init hook, if it has one, with the device count.
    pub fn init(&self) -> Result<()> {
        if let Some(init) = self.functions.init {
            // SAFETY: same signature and call ABI (`unwinding`).
            let init = unsafe { std::mem::transmute::<PluginInitFn, InitUnwind>(init) };
            let device_count = context::device_count();
            // SAFETY: the plugin's documented signature.
            self.call(PluginFunction::Init, (), || unsafe { init(device_count) })?;
        }
        Ok(())
    }

    /// Allocates `size` bytes on `device` for `stream` (`None`: any stream,
    /// NULL to the plugin). NULL from the plugin is an error and nothing is
    /// recorded.
    #[inline]
    pub fn alloc(
        &self,
        size: usize,
        device: i32,
        stream: Option<StreamKey>,
    ) -> Result<NonNull<c_void>> {
        self.init_if_pending()?;
        let stream = stream.map_or(std::ptr::null_mut(), StreamKey::as_ptr);
        let Ok(ssize) = isize::try_from(size) else {
            return Err(too_large());
        };
        // SAFETY: the plugin's documented signature, called with plain
        // values. The books are not entered: a plugin may take its time or
        // call back into this library.
        let outcome =
            unsafe { foreign_call::plugin_alloc(self.functions.alloc, ssize, device, stream) };
        let ptr = match self.settle(PluginFunction::Alloc, std::ptr::null_mut(), outcome) {
            Ok(ptr) => ptr,
            Err(threw) => return Err(self.count_failure(threw)),
        };
        let Some(ptr) = NonNull::new(ptr) else {
            return Err(self.failed(size, device));
        };
        let block = LiveBlock {
            block: ptr.as_ptr() as usize,
            size,
            device,
            stream: stream as usize,
        };
        live::insert(&self.live, ptr.as_ptr() as usize, block)?;
        Ok(ptr)
    }

    /// Counts an allocation the plugin answered with NULL.
    #[cold]
    #[inline(never)]
    fn failed(&self, size: usize, device: i32) -> Error {
        self.count_failure(Error::AllocatorReturnedNull {
            allocator: "pluggable",
            size,
            device,
        })
    }

    #[cold]
    fn count_failure(&self, error: Error) -> Error {
        let _ = live::with(&self.live, |g| g.count_failure());
        error
    }

    /// Frees a pointer this allocator returned, passing the plugin the size,
    /// device and stream it was allocated with. Any other pointer, or one
    /// freed already, is refused without calling the plugin.
    #[inline]
    pub fn free(&self, ptr: NonNull<c_void>) -> Result<()> {
        let block = live::remove(&self.live, ptr.as_ptr() as usize)?;
        // SAFETY: the plugin's documented signature; `ptr` was live (just
        // removed from the table, so a concurrent second free of it is
        // refused) and goes back with its own size, device and stream. A
        // throw leaves it freed as far as the books go.
        let outcome = unsafe {
            foreign_call::plugin_free(
                self.functions.free,
                ptr.as_ptr(),
                block.size as isize,
                block.device,
                block.stream_ptr(),
            )
        };
        self.settle(PluginFunction::Free, (), outcome)
    }

    /// The reset function set by address, else the plugin's empty-cache
    /// hook; without either there is nothing cached that this library knows
    /// of, and the call does nothing (as PyTorch's).
    pub fn empty_cache(&self) -> Result<()> {
        if self.reset_hook()? {
            return Ok(());
        }
        if let Some(empty_cache) = self.functions.empty_cache {
            // SAFETY: same signature and call ABI (`unwinding`).
            let empty_cache =
                unsafe { std::mem::transmute::<PluginEmptyCacheFn, EmptyCacheUnwind>(empty_cache) };
            // SAFETY: the plugin's documented signature.
            self.call(PluginFunction::EmptyCache, (), || unsafe { empty_cache() })?;
        }
        Ok(())
    }

    /// The plugin's memory-fraction hook. A limit silently ignored would be
    /// worse than an error, so a plugin without one is an error.
    pub fn set_memory_fraction(&self, fraction: f64, device: i32) -> Result<()> {
        if !(fraction.is_finite() && fraction > 0.0 && fraction <= 1.0) {
            return Err(Error::InvalidParam {
                param: "fraction",
                reason: "It must be in (0, 1]",
            });
        }
        let hook = self
            .memory_fraction_hook()
            .or(self.functions.memory_fraction)
            .ok_or(Error::NotSupported {
                what: "the plugin has no memory-fraction function (neither memoryFractionSymbol nor set_memory_fraction_fn was given)",
            })?;
        self.init_if_pending()?;
        // SAFETY: same signature and call ABI (`unwinding`).
        let hook =
            unsafe { std::mem::transmute::<PluginMemoryFractionFn, MemoryFractionUnwind>(hook) };
        // SAFETY: the plugin's documented signature.
        self.call(PluginFunction::MemoryFraction, (), || unsafe {
            hook(fraction, device)
        })
    }

    /// Calls one of the plugin's functions (`foreign_call`): a C++ exception
    /// is an error naming the function with its what(); a forced unwind
    /// (the thread is ending) answers `failed`.
    #[inline]
    pub(super) fn call<R>(
        &self,
        function: PluginFunction,
        failed: R,
        f: impl FnOnce() -> R,
    ) -> Result<R> {
        self.settle(function, failed, foreign_call::call(f))
    }

    #[inline]
    fn settle<R>(&self, function: PluginFunction, failed: R, outcome: Outcome<R>) -> Result<R> {
        match outcome {
            Outcome::Returned(value) => Ok(value),
            Outcome::Paused => Ok(failed),
            Outcome::Threw => Err(foreign_call::threw_error(self.callback(function))),
        }
    }

    #[cold]
    fn callback(&self, function: PluginFunction) -> Callback {
        let (library, symbol) = match &self.names {
            Some(names) => (names.library.as_bytes(), names.symbol(function).as_bytes()),
            None => (
                "the process (functions linked in)".as_bytes(),
                "(unnamed)".as_bytes(),
            ),
        };
        Callback::Plugin {
            function,
            library: Name::new(library),
            symbol: Name::new(symbol),
        }
    }

    /// The counters.
    pub fn stats(&self) -> Stats {
        live::with(&self.live, |g| g.counters()).map_or_else(|_| Stats::default(), Stats::from)
    }

    /// Restarts the peaks from the current values.
    pub fn reset_peak_stats(&self) {
        let _ = live::with(&self.live, |g| g.counters_mut().reset_peaks());
    }

    /// Blocks handed out and not yet freed.
    pub fn live_blocks(&self) -> usize {
        live::with(&self.live, |g| g.live_count()).unwrap_or(0)
    }

    /// What was recorded for a live pointer (a lock-free lookup).
    pub fn block(&self, ptr: NonNull<c_void>) -> Option<LiveBlock> {
        self.live
            .lookup(ptr.as_ptr() as usize)
            .filter(|b| b.is_live())
            .map(|b| live::live_block(&b))
    }
}

#[cold]
fn too_large() -> Error {
    Error::InvalidParam {
        param: "size",
        reason: "It is larger than ssize_t can hold",
    }
}

/// Where a loaded plugin's functions came from.
struct Names {
    library: String,
    alloc: String,
    free: String,
    init: String,
    empty_cache: String,
    memory_fraction: String,
}

impl Names {
    fn of(spec: &PluginSpec<'_>) -> Self {
        let text = |s: Option<&std::ffi::CStr>| {
            s.map_or_else(String::new, |s| s.to_string_lossy().into_owned())
        };
        Names {
            library: spec.path.to_string_lossy().into_owned(),
            alloc: text(Some(spec.alloc)),
            free: text(Some(spec.free)),
            init: text(spec.init),
            empty_cache: text(spec.empty_cache),
            memory_fraction: text(spec.memory_fraction),
        }
    }

    fn symbol(&self, function: PluginFunction) -> &str {
        match function {
            PluginFunction::Alloc => &self.alloc,
            PluginFunction::Free => &self.free,
            PluginFunction::Init => &self.init,
            PluginFunction::EmptyCache => &self.empty_cache,
            PluginFunction::MemoryFraction => &self.memory_fraction,
            _ => "(a function set by address)",
        }
    }
}

// Unwinding: the `"C-unwind"` views of the plugin's function types, so that
// a C++ exception or a forced unwind may leave one into the trampoline of
// `crate::base::foreign_call`. Same signatures and call ABI as the `"C"`
// types the library resolves.
type InitUnwind = unsafe extern "C-unwind" fn(device_count: i32);
type EmptyCacheUnwind = unsafe extern "C-unwind" fn();
type MemoryFractionUnwind = unsafe extern "C-unwind" fn(fraction: f64, device: i32);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::sync::{AtomicUsize, Ordering};

    static FREED: AtomicUsize = AtomicUsize::new(0);
    static LAST_FREE_SIZE: AtomicUsize = AtomicUsize::new(0);
    static LAST_FREE_STREAM: AtomicUsize = AtomicUsize::new(0);

    unsafe extern "C" fn test_alloc(
        size: isize,
        _device: i32,
        _stream: *mut c_void,
    ) -> *mut c_void {
        if size > 1 << 20 {
            return std::ptr::null_mut();
        }
        // SAFETY: test plugin: `malloc` with a non-zero size; NULL is a valid answer.
        unsafe { libc_malloc(size.max(1) as usize) }
    }
    unsafe extern "C" fn test_free(
        ptr: *mut c_void,
        size: isize,
        _device: i32,
        stream: *mut c_void,
    ) {
        LAST_FREE_STREAM.store(stream as usize, Ordering::SeqCst);
        FREED.fetch_add(1, Ordering::SeqCst);
        LAST_FREE_SIZE.store(size as usize, Ordering::SeqCst);
        // SAFETY: test plugin: `ptr` came from `test_alloc`'s malloc and the allocator frees it
        // once.
        unsafe { libc_free(ptr) }
    }
    extern "C" {
        #[link_name = "malloc"]
        fn libc_malloc(size: usize) -> *mut c_void;
        #[link_name = "free"]
        fn libc_free(ptr: *mut c_void);
    }

    fn allocator() -> PluggableAllocator {
        PluggableAllocator::from_functions(PluginFunctions {
            alloc: test_alloc,
            free: test_free,
            init: None,
            empty_cache: None,
            memory_fraction: None,
        })
    }

    /// Two threads allocating and freeing through one allocator, each long
    /// enough to be granted its books' bias and to have it revoked by the
    /// other: every block is recorded and freed once, the counters add up.
    #[test]
    fn two_threads_on_one_allocator_keep_exact_books() {
        // Not `test_free`: its counters belong to the tests that read them.
        unsafe extern "C" fn quiet_free(ptr: *mut c_void, _: isize, _: i32, _: *mut c_void) {
            // SAFETY: `ptr` came from `test_alloc`'s malloc, freed once.
            unsafe { libc_free(ptr) }
        }
        const PAIRS: u64 = 20_000;
        let a = PluggableAllocator::from_functions(PluginFunctions {
            alloc: test_alloc,
            free: quiet_free,
            init: None,
            empty_cache: None,
            memory_fraction: None,
        });
        let start = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let (a, start) = (&a, &start);
                s.spawn(move || {
                    start.wait();
                    let mut live = Vec::new();
                    for i in 0..PAIRS {
                        live.push(a.alloc(64 + t as usize, 0, None).unwrap());
                        // Runs of 1 to 40 live blocks, so frees and allocations
                        // interleave with the other thread's in varying turns.
                        if live.len() as u64 > (i * 7 + t) % 40 {
                            for p in live.drain(..) {
                                assert_eq!(a.block(p).unwrap().size, 64 + t as usize);
                                a.free(p).unwrap();
                            }
                        }
                    }
                    for p in live {
                        a.free(p).unwrap();
                    }
                });
            }
        });
        let s = a.stats();
        assert_eq!((s.alloc_count, s.free_count), (2 * PAIRS, 2 * PAIRS));
        assert_eq!((s.active_count, s.allocated_bytes_current), (0, 0));
        assert_eq!(s.allocated_bytes_total, PAIRS * 64 + PAIRS * 65);
        assert_eq!(s.freed_bytes_total, s.allocated_bytes_total);
        assert!(
            s.allocated_bytes_peak <= 2 * 41 * 65,
            "{}",
            s.allocated_bytes_peak
        );
    }

    #[test]
    fn free_passes_the_recorded_size_and_refuses_what_it_did_not_hand_out() {
        let a = allocator();
        let stream = StreamKey::from_ptr(0x40 as *mut c_void);
        let p = a.alloc(1234, 0, stream).unwrap();
        assert_eq!(a.block(p).unwrap().size, 1234);
        let before = FREED.load(Ordering::SeqCst);
        let mut local = 0u8;
        assert_eq!(
            a.free(NonNull::from(&mut local).cast()),
            Err(Error::ForeignPointer)
        );
        assert_eq!(
            FREED.load(Ordering::SeqCst),
            before,
            "the plugin was not called"
        );
        a.free(p).unwrap();
        assert_eq!(LAST_FREE_SIZE.load(Ordering::SeqCst), 1234);
        assert_eq!(
            LAST_FREE_STREAM.load(Ordering::SeqCst),
            0x40,
            "free gets alloc's stream"
        );
        let after = FREED.load(Ordering::SeqCst);
        assert_eq!(a.free(p), Err(Error::DoubleFree));
        assert_eq!(
            FREED.load(Ordering::SeqCst),
            after,
            "the plugin was not called"
        );
        let s = a.stats();
        assert_eq!(
            (s.alloc_count, s.free_count, s.refused_free_count),
            (1, 1, 2)
        );
        assert_eq!(s.allocated_bytes_current, 0);
        assert_eq!(s.allocated_bytes_peak, 1234);
    }

    #[test]
    fn null_from_the_plugin_is_an_error_and_counted() {
        let a = allocator();
        assert_eq!(
            a.alloc(2 << 20, 3, None),
            Err(Error::AllocatorReturnedNull {
                allocator: "pluggable",
                size: 2 << 20,
                device: 3
            })
        );
        assert_eq!(a.stats().failed_alloc_count, 1);
        assert_eq!(a.live_blocks(), 0);
        assert!(matches!(
            a.alloc(usize::MAX, 0, None),
            Err(Error::InvalidParam { param: "size", .. })
        ));
    }

    #[test]
    fn missing_hooks_behave_as_documented() {
        let a = allocator();
        a.init().unwrap();
        a.empty_cache().unwrap();
        assert!(matches!(
            a.set_memory_fraction(0.5, 0),
            Err(Error::NotSupported { .. })
        ));
        assert!(matches!(
            a.set_memory_fraction(1.5, 0),
            Err(Error::InvalidParam { .. })
        ));
    }
}
