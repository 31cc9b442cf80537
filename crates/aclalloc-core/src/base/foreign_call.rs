//! Calling foreign functions: allocator callbacks, plugin functions, kernels.
//!
//! Each call goes through a C++ trampoline (guarded_call.cpp, built by
//! build.rs), so nothing unwinds through this library's frames:
//! - a C++ exception is caught there: from an allocator callback or a plugin
//!   function it is an allocation failure (NULL, `ACL_ERROR_BAD_ALLOC`, its
//!   what() in the message); from a kernel it ends the process with its name
//!   (a stream cannot tell what the kernel left half done);
//! - a forced unwind (`pthread_exit`, `pthread_cancel`) is paused there: the
//!   call returns as a failure, the library returns normally, releasing its
//!   locks and pins, and `resume_if_paused` goes on with it from the
//!   export's frame, or a stream worker ends.

use super::descriptor::{AllocAdviseFn, AllocFn, FreeFn, GetAddrFromBlockFn};
use super::env::Interned;
use super::errlog;
use super::error::Error;
use super::fixed_line::Line;
use std::ffi::c_void;
use std::fmt::Write;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Which foreign function a call is, and what for. Built only when it
/// throws, so its size costs nothing on the normal path.
// The streams, descriptors and blocks are for Debug only: a message's text
// is kept for the life of the process, so it leaves them out.
#[allow(clippy::large_enum_variant, dead_code)]
#[derive(Clone, Copy, Debug)]
pub enum Callback {
    /// `aclrtAllocatorAllocFunc` of the allocator serving `stream`
    /// (`descriptor`: the registered descriptor, or 0 when there is none).
    Alloc { stream: usize, descriptor: usize },
    /// `aclrtAllocatorAllocAdviseFunc`, as for `Alloc`.
    AllocAdvise { stream: usize, descriptor: usize },
    /// `aclrtAllocatorGetAddrFromBlockFunc`, as for `Alloc`.
    GetAddrFromBlock { stream: usize, descriptor: usize },
    /// `aclrtAllocatorFreeFunc`, as for `Alloc`.
    Free { stream: usize, descriptor: usize },
    /// A getAddrFromBlock the tracking layer calls for `block` without
    /// knowing its stream (`function`: the callback's address).
    TrackedGetAddr { function: usize, block: usize },
    /// A callback of an allocator made the default with
    /// `aclallocSetDefaultAllocator`, for `stream` (0: none).
    Default { function: Function, stream: usize },
    /// A function of a pluggable allocator: `symbol` of `library`.
    Plugin {
        function: PluginFunction,
        library: Name,
        symbol: Name,
    },
    /// A kernel (`aclallocKernelFunc` at `function`) on a stream of `device`.
    Kernel { function: usize, device: u32 },
}

/// One of an allocator descriptor's callbacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Function {
    Alloc,
    AllocAdvise,
    GetAddrFromBlock,
    Free,
}

impl Function {
    fn name(self) -> &'static str {
        match self {
            Function::Alloc => "alloc callback (aclrtAllocatorAllocFunc)",
            Function::AllocAdvise => "allocAdvise callback (aclrtAllocatorAllocAdviseFunc)",
            Function::GetAddrFromBlock => {
                "getAddrFromBlock callback (aclrtAllocatorGetAddrFromBlockFunc)"
            }
            Function::Free => "free callback (aclrtAllocatorFreeFunc)",
        }
    }
}

/// One of a pluggable allocator's functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PluginFunction {
    Alloc,
    Free,
    Init,
    EmptyCache,
    MemoryFraction,
    Reset,
    BaseAlloc,
    RecordStream,
    EraseStream,
    DeviceStats,
    ResetPeakStatus,
}

impl PluginFunction {
    /// What it is and the parameter that named its symbol.
    fn name(self) -> &'static str {
        match self {
            PluginFunction::Alloc => "alloc function (allocSymbol)",
            PluginFunction::Free => "free function (freeSymbol)",
            PluginFunction::Init => "init function (initSymbol)",
            PluginFunction::EmptyCache => "empty-cache function (emptyCacheSymbol)",
            PluginFunction::MemoryFraction => "memory-fraction function (memoryFractionSymbol)",
            PluginFunction::Reset => "reset function (set_reset_fn)",
            PluginFunction::BaseAlloc => "base-allocation function (set_base_alloc_fn)",
            PluginFunction::RecordStream => "record-stream function (set_record_stream_fn)",
            PluginFunction::EraseStream => "erase-stream function (set_erase_stream_fn)",
            PluginFunction::DeviceStats => "device-stats function (set_get_device_stats_fn)",
            PluginFunction::ResetPeakStatus => "reset-peak function (set_reset_peak_status_fn)",
        }
    }
}

/// A name (a path, a symbol) in a fixed buffer, so a [`Callback`] needs no
/// allocation on the normal path; a longer name keeps its end.
#[derive(Clone, Copy)]
pub struct Name {
    bytes: [u8; Name::CAPACITY],
    len: u8,
}

impl Name {
    const CAPACITY: usize = 120;

    /// `text`, or its last bytes.
    pub fn new(text: &[u8]) -> Self {
        let (prefix, tail): (&[u8], _) = match text.len().checked_sub(Name::CAPACITY) {
            Some(excess) if excess > 0 => (b"...", &text[excess + 3..]),
            _ => (b"", text),
        };
        let mut bytes = [0; Name::CAPACITY];
        bytes[..prefix.len()].copy_from_slice(prefix);
        bytes[prefix.len()..prefix.len() + tail.len()].copy_from_slice(tail);
        let len = (prefix.len() + tail.len()) as u8;
        Name { bytes, len }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl std::fmt::Debug for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

impl std::fmt::Display for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Lossy but without allocating: invalid bytes become U+FFFD.
        for chunk in self.as_bytes().utf8_chunks() {
            f.write_str(chunk.valid())?;
            if !chunk.invalid().is_empty() {
                f.write_str("\u{FFFD}")?;
            }
        }
        Ok(())
    }
}

// The trampoline (guarded_call.cpp); not part of the C API.
#[allow(unused_doc_comments)]
/// cbindgen:ignore
extern "C" {
    fn aclalloc_call_guarded(
        status: &mut i32,
        thunk: unsafe extern "C-unwind" fn(*mut c_void),
        context: *mut c_void,
    );
    fn aclalloc_guarded_alloc(
        status: &mut i32,
        f: AllocFn,
        obj: *mut c_void,
        size: usize,
    ) -> *mut c_void;
    fn aclalloc_guarded_get_addr(
        status: &mut i32,
        f: GetAddrFromBlockFn,
        block: *mut c_void,
    ) -> *mut c_void;
    fn aclalloc_guarded_free(status: &mut i32, f: FreeFn, obj: *mut c_void, block: *mut c_void);
    fn aclalloc_guarded_plugin_alloc(
        status: &mut i32,
        f: PluginAlloc,
        size: isize,
        device: i32,
        stream: *mut c_void,
    ) -> *mut c_void;
    fn aclalloc_guarded_plugin_free(
        status: &mut i32,
        f: PluginFree,
        ptr: *mut c_void,
        size: isize,
        device: i32,
        stream: *mut c_void,
    );
    fn aclalloc_exception_text() -> *const std::ffi::c_char;
    fn aclalloc_unwind_paused() -> bool;
    fn aclalloc_forget_unwind();
    // Declared without "-unwind" on purpose: `resume_if_paused` calls it
    // holding nothing to drop, and a forced unwind may cross such frames.
    fn aclalloc_resume_unwind() -> !;
}

/// Threads with a paused unwind: the exports' check reads this word first.
static PAUSED: AtomicUsize = AtomicUsize::new(0);

/// How a foreign call ended.
pub enum Outcome<R> {
    Returned(R),
    /// It threw a C++ exception (its what(): [`threw_error`]).
    Threw,
    /// A forced unwind left it; this thread is ending.
    Paused,
}

/// Calls `call` (a foreign function's call, capturing plain values only)
/// through the trampoline.
#[inline]
pub fn call<R, F: FnOnce() -> R>(call: F) -> Outcome<R> {
    type Slot<F, R> = (ManuallyDrop<F>, MaybeUninit<R>);
    unsafe extern "C-unwind" fn thunk<R, F: FnOnce() -> R>(context: *mut c_void) {
        // SAFETY: `context` is the slot below, alive for the call.
        let slot = unsafe { &mut *context.cast::<Slot<F, R>>() };
        // SAFETY: the trampoline calls the thunk once: the closure is taken once.
        let f = unsafe { ManuallyDrop::take(&mut slot.0) };
        slot.1.write(f());
    }
    let mut slot: Slot<F, R> = (ManuallyDrop::new(call), MaybeUninit::uninit());
    let mut status = 0;
    // SAFETY: `thunk` matches the slot's type.
    unsafe { aclalloc_call_guarded(&mut status, thunk::<R, F>, (&raw mut slot).cast()) };
    // SAFETY: status 0: the thunk returned, having written the value.
    outcome(status, || unsafe { slot.1.assume_init() })
}

#[inline]
fn outcome<R>(status: i32, value: impl FnOnce() -> R) -> Outcome<R> {
    match status {
        0 => Outcome::Returned(value()),
        1 => Outcome::Threw,
        _ => {
            PAUSED.fetch_add(1, Ordering::SeqCst);
            Outcome::Paused
        }
    }
}

/// A pluggable allocator's alloc and free (`crate::plugin::library`).
pub(crate) type PluginAlloc =
    unsafe extern "C" fn(size: isize, device: i32, stream: *mut c_void) -> *mut c_void;
pub(crate) type PluginFree =
    unsafe extern "C" fn(ptr: *mut c_void, size: isize, device: i32, stream: *mut c_void);

/// A pluggable allocator's `alloc(size, device, stream)`, through the
/// trampoline.
///
/// # Safety
/// As calling `alloc` directly.
#[inline]
pub unsafe fn plugin_alloc(
    alloc: PluginAlloc,
    size: isize,
    device: i32,
    stream: *mut c_void,
) -> Outcome<*mut c_void> {
    let mut status = 0;
    // SAFETY: the caller's contract.
    let p = unsafe { aclalloc_guarded_plugin_alloc(&mut status, alloc, size, device, stream) };
    outcome(status, || p)
}

/// A pluggable allocator's `free(ptr, size, device, stream)`, through the
/// trampoline.
///
/// # Safety
/// As calling `free` directly.
#[inline]
pub unsafe fn plugin_free(
    free: PluginFree,
    ptr: *mut c_void,
    size: isize,
    device: i32,
    stream: *mut c_void,
) -> Outcome<()> {
    let mut status = 0;
    // SAFETY: the caller's contract.
    unsafe { aclalloc_guarded_plugin_free(&mut status, free, ptr, size, device, stream) };
    outcome(status, || ())
}

/// True when some thread has a paused unwind: one load, for every export.
#[inline]
pub(crate) fn any_unwind_paused() -> bool {
    PAUSED.load(Ordering::Relaxed) != 0
}

/// Goes on with this thread's paused forced unwind, if it has one: the
/// thread ends. Holds nothing to drop, so the unwind crosses its frame;
/// `boundary` calls it through a pointer.
pub(crate) extern "C" fn resume_if_paused() {
    // SAFETY: reads a thread-local flag.
    if unsafe { aclalloc_unwind_paused() } {
        PAUSED.fetch_sub(1, Ordering::SeqCst);
        // Through a pointer, as `boundary` calls this function: a direct
        // call of a function declared not to unwind is left out of the
        // unwind tables, and where this frame has tables (an unoptimised
        // build) the unwinder would stop here.
        let resume: unsafe extern "C" fn() -> ! = std::hint::black_box(aclalloc_resume_unwind);
        // SAFETY: this thread has a paused unwind.
        unsafe { resume() }
    }
}

/// True when this thread has a paused unwind.
#[inline]
pub fn unwind_paused() -> bool {
    // SAFETY: reads a thread-local flag.
    any_unwind_paused() && unsafe { aclalloc_unwind_paused() }
}

/// Drops this thread's paused unwind, if any: a stream worker that a
/// kernel tried to end ends by returning instead.
pub fn forget_paused_unwind() {
    // SAFETY: reads and clears a thread-local flag.
    if unsafe { aclalloc_unwind_paused() } {
        PAUSED.fetch_sub(1, Ordering::SeqCst);
        // SAFETY: as above.
        unsafe { aclalloc_forget_unwind() }
    }
}

/// Static copies of exception texts for [`Error::Threw`].
static TEXTS: Interned<str> = Interned::new(64);

/// The error for the foreign function `callback` names, which threw: with
/// its what(), which the trampoline kept for this thread.
#[cold]
pub fn threw_error(callback: Callback) -> Error {
    // SAFETY: the trampoline's NUL-terminated buffer of this thread.
    let what = unsafe { std::ffi::CStr::from_ptr(aclalloc_exception_text()) };
    let mut text = String::new();
    let _ = write_name(&mut text, callback);
    let _ = write!(text, " threw a C++ exception: {}", what.to_string_lossy());
    Error::Threw {
        what: TEXTS.get(&text, |t| Box::leak(t.into())).unwrap_or(
            "A foreign function threw a C++ exception (its text was not kept: too many distinct ones)",
        ),
    }
}

/// An allocator callback's outcome: a throw is recorded for
/// `aclGetRecentErrMsg` and, like a paused unwind, answered with `failed`.
#[inline]
fn allocator_call<R>(site: impl Fn() -> Callback, failed: R, outcome: Outcome<R>) -> R {
    match outcome {
        Outcome::Returned(value) => value,
        Outcome::Threw => {
            let callback = site();
            errlog::record(callback.c_name(), threw_error(callback));
            failed
        }
        Outcome::Paused => failed,
    }
}

/// Reports a kernel that threw and aborts.
#[cold]
#[inline(never)]
fn kernel_threw(callback: Callback) -> ! {
    // SAFETY: the trampoline's NUL-terminated buffer of this thread.
    let what = unsafe { std::ffi::CStr::from_ptr(aclalloc_exception_text()) };
    let mut line = Line::default();
    let _ = write_name(&mut line, callback);
    let _ = write!(line, " threw a C++ exception ({}).", what.to_string_lossy());
    let _ = writeln!(line, " Kernels must return normally: catch exceptions inside the kernel. Aborting the process (the stream cannot tell what the kernel left undone)");
    line.emit();
    std::process::abort();
}

impl Callback {
    /// The C type of the callback, for the message log.
    fn c_name(self) -> &'static str {
        match self {
            Callback::Alloc { .. } => "aclrtAllocatorAllocFunc",
            Callback::AllocAdvise { .. } => "aclrtAllocatorAllocAdviseFunc",
            Callback::GetAddrFromBlock { .. } | Callback::TrackedGetAddr { .. } => {
                "aclrtAllocatorGetAddrFromBlockFunc"
            }
            Callback::Free { .. } => "aclrtAllocatorFreeFunc",
            Callback::Default { function, .. } => match function {
                Function::Alloc => "aclrtAllocatorAllocFunc",
                Function::AllocAdvise => "aclrtAllocatorAllocAdviseFunc",
                Function::GetAddrFromBlock => "aclrtAllocatorGetAddrFromBlockFunc",
                Function::Free => "aclrtAllocatorFreeFunc",
            },
            Callback::Plugin { .. } => "the pluggable allocator",
            Callback::Kernel { .. } => "aclallocKernelFunc",
        }
    }
}

/// Which function it is (stream and descriptor addresses are left out:
/// the text is kept for the life of the process).
fn write_name(out: &mut impl Write, callback: Callback) -> std::fmt::Result {
    match callback {
        Callback::Alloc { .. } => write!(out, "The {}", Function::Alloc.name()),
        Callback::AllocAdvise { .. } => write!(out, "The {}", Function::AllocAdvise.name()),
        Callback::GetAddrFromBlock { .. } => {
            write!(out, "The {}", Function::GetAddrFromBlock.name())
        }
        Callback::Free { .. } => write!(out, "The {}", Function::Free.name()),
        Callback::TrackedGetAddr { function, .. } => write!(
            out,
            "The {} at {function:#x}, called by the tracking layer,",
            Function::GetAddrFromBlock.name()
        ),
        Callback::Default { function, .. } => write!(
            out,
            "The {} of the default allocator (set with aclallocSetDefaultAllocator)",
            function.name()
        ),
        Callback::Plugin {
            function,
            library,
            symbol,
        } => write!(
            out,
            "The pluggable allocator's {} {symbol} of {library}",
            function.name()
        ),
        Callback::Kernel { function, device } => write!(
            out,
            "aclalloc: the kernel at {function:#x} (aclallocKernelFunc, on a stream of device {device})"
        ),
    }
}

/// `alloc(obj, size)`, guarded: NULL when it throws.
///
/// # Safety
/// As calling `alloc` directly.
#[inline]
pub unsafe fn alloc(
    alloc: AllocFn,
    obj: *mut c_void,
    size: usize,
    site: impl Fn() -> Callback,
) -> *mut c_void {
    let mut status = 0;
    // SAFETY: the caller's contract.
    let p = unsafe { aclalloc_guarded_alloc(&mut status, alloc, obj, size) };
    allocator_call(site, null_mut(), outcome(status, || p))
}

/// `alloc_advise(obj, size, addr)`, guarded: NULL when it throws.
///
/// # Safety
/// As calling `alloc_advise` directly.
#[inline]
pub unsafe fn alloc_advise(
    alloc_advise: AllocAdviseFn,
    obj: *mut c_void,
    size: usize,
    addr: *mut c_void,
    site: impl Fn() -> Callback,
) -> *mut c_void {
    // SAFETY: same signature and call ABI; a throw unwinds into the trampoline.
    let advise: unsafe extern "C-unwind" fn(*mut c_void, usize, *mut c_void) -> *mut c_void =
        unsafe { std::mem::transmute(alloc_advise) };
    // SAFETY: the caller's contract.
    let outcome = call(|| unsafe { advise(obj, size, addr) });
    allocator_call(site, null_mut(), outcome)
}

/// `getAddrFromBlock(block)`, guarded: NULL when it throws.
///
/// # Safety
/// As calling `get_addr` directly.
#[inline]
pub unsafe fn get_addr_from_block(
    get_addr: GetAddrFromBlockFn,
    block: *mut c_void,
    site: impl Fn() -> Callback,
) -> *mut c_void {
    let mut status = 0;
    // SAFETY: the caller's contract.
    let p = unsafe { aclalloc_guarded_get_addr(&mut status, get_addr, block) };
    allocator_call(site, null_mut(), outcome(status, || p))
}

/// `free(obj, block)`, guarded: a throw is recorded and the block taken as
/// freed.
///
/// # Safety
/// As calling `free` directly.
#[inline]
pub unsafe fn free(
    free: FreeFn,
    obj: *mut c_void,
    block: *mut c_void,
    site: impl Fn() -> Callback,
) {
    let mut status = 0;
    // SAFETY: the caller's contract.
    unsafe { aclalloc_guarded_free(&mut status, free, obj, block) };
    allocator_call(site, (), outcome(status, || ()))
}

/// `kernel(workspace, size, user_data)` of a stream of `device`, guarded;
/// a forced unwind leaves [`unwind_paused`] set.
///
/// # Safety
/// As calling `kernel` directly.
#[inline]
pub unsafe fn kernel(
    kernel: unsafe extern "C" fn(*mut c_void, usize, *mut c_void),
    workspace: *mut c_void,
    size: usize,
    user_data: *mut c_void,
    device: u32,
) {
    let function = kernel as usize;
    // SAFETY: same signature and call ABI; a throw unwinds into the trampoline.
    let kernel: unsafe extern "C-unwind" fn(*mut c_void, usize, *mut c_void) =
        unsafe { std::mem::transmute(kernel) };
    // SAFETY: the caller's contract.
    if let Outcome::Threw = call(|| unsafe { kernel(workspace, size, user_data) }) {
        kernel_threw(Callback::Kernel { function, device })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(callback: Callback) -> String {
        let mut s = String::new();
        write_name(&mut s, callback).unwrap();
        s
    }

    #[test]
    fn the_name_says_which_function_it_is() {
        let (stream, descriptor, function, block, device) = (0x1234, 0xabc, 0x4000, 0x40, 1);
        let plugin = Callback::Plugin {
            function: PluginFunction::EmptyCache,
            library: Name::new(b"/opt/lib/libmine.so"),
            symbol: Name::new(b"my_empty"),
        };
        let cases: [(Callback, &str, &str); 6] = [
            (
                Callback::Alloc { stream, descriptor },
                "alloc callback (aclrtAllocatorAllocFunc)",
                "aclrtAllocatorAllocFunc",
            ),
            (
                Callback::AllocAdvise { stream, descriptor },
                "allocAdvise callback (aclrtAllocatorAllocAdviseFunc)",
                "aclrtAllocatorAllocAdviseFunc",
            ),
            (
                Callback::TrackedGetAddr { function, block },
                "getAddrFromBlock callback (aclrtAllocatorGetAddrFromBlockFunc) at 0x4000",
                "aclrtAllocatorGetAddrFromBlockFunc",
            ),
            (
                Callback::Default {
                    function: Function::Free,
                    stream: 0,
                },
                "free callback (aclrtAllocatorFreeFunc) of the default allocator",
                "aclrtAllocatorFreeFunc",
            ),
            (
                plugin,
                "empty-cache function (emptyCacheSymbol) my_empty of /opt/lib/libmine.so",
                "the pluggable allocator",
            ),
            (
                Callback::Kernel { function, device },
                "kernel at 0x4000 (aclallocKernelFunc, on a stream of device 1)",
                "aclallocKernelFunc",
            ),
        ];
        for (callback, text, c_name) in cases {
            let n = name(callback);
            assert!(n.contains(text), "{n}");
            assert!(!n.contains("0x1234") && !n.contains("0xabc"), "{n}");
            assert_eq!(callback.c_name(), c_name);
        }
        let error = threw_error(plugin);
        assert_eq!(error.code(), crate::base::error::ACL_ERROR_BAD_ALLOC);
        assert!(error
            .to_string()
            .ends_with("of /opt/lib/libmine.so threw a C++ exception: "));
    }

    #[test]
    fn a_long_name_keeps_its_end_and_invalid_bytes_are_replaced() {
        let long = format!("/{}/libend.so", "d".repeat(300));
        let name = Name::new(long.as_bytes()).to_string();
        assert!(
            name.starts_with("...") && name.ends_with("/libend.so"),
            "{name}"
        );
        assert_eq!(name.len(), Name::CAPACITY);
        assert_eq!(Name::new(b"a\xffb").to_string(), "a\u{FFFD}b");
    }

    #[test]
    fn a_call_that_returns_is_passed_through() {
        assert!(matches!(call(|| 7), Outcome::Returned(7)));
        assert!(!any_unwind_paused());
    }
}
