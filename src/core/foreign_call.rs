//! Calling C callbacks that might unwind: allocator callbacks and kernels.
//!
//! A callback written in C++ can throw, and a C callback can `longjmp` out.
//! Either would leave this library's state half-updated (a lock held, a
//! workspace counted twice), and Rust cannot catch a foreign exception.
//! Callbacks must return normally (docs/HARDENING.md); when one does not,
//! by throwing, the process ends at once with one line on stderr that says
//! *which* callback threw, instead of Rust's anonymous "Rust cannot catch
//! foreign exceptions" further up the stack. (A `longjmp` runs no
//! destructors, so it cannot be seen here; it stays documented as
//! forbidden.)
//!
//! How: the callback is called through an `extern "C-unwind"` pointer, so a
//! C++ exception unwinds through the caller's frames (with `extern "C"`
//! Rust assumes the call cannot unwind and leaves out the cleanup code that
//! would notice), inside a [`CallGuard`] armed for the call. The guard is
//! forgotten when the callback returns; dropped while armed means the
//! callback is unwinding through us, and its destructor reports and aborts.
//! The pointers keep their `extern "C"` types everywhere else (the C header
//! is unchanged): `"C"` and `"C-unwind"` have the same call ABI and differ
//! only in whether unwinding out of the call is allowed, which is exactly
//! what the call site, not the stored type, has to say.
//!
//! Cost: the guard is a value on the stack that the normal path forgets, so
//! the call compiles to the same instructions plus a landing pad off the hot
//! path (measured: docs/BENCHMARKS.md, "Callback guard").

use super::descriptor::{AllocAdviseFn, AllocFn, FreeFn, GetAddrFromBlockFn};
use super::fixed_line::Line;
use std::ffi::c_void;
use std::fmt::Write;

/// Which callback a guard watches, and what it was called for (for the
/// message).
///
/// Built only when a callback unwinds (by the guard's closure), so its size
/// (the plugin's names inline, nothing allocated) costs nothing on the
/// normal path.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug)]
pub(crate) enum Callback {
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
    /// A callback of the default allocator (an allocator the user made the
    /// default with `aclallocSetDefaultAllocator`), for `stream` (0: none,
    /// `aclallocDefaultMalloc`/`aclallocDefaultFree`).
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
pub(crate) enum Function {
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
pub(crate) enum PluginFunction {
    Alloc,
    Free,
    Init,
    EmptyCache,
    MemoryFraction,
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
        }
    }
}

/// A name (a path, a symbol) copied into a fixed buffer, so that a
/// [`Callback`] stays `Copy` and is built without allocating while a
/// foreign exception is in flight. A longer name keeps its end (the file
/// name of a path), after "...".
#[derive(Clone, Copy)]
pub(crate) struct Name {
    bytes: [u8; Name::CAPACITY],
    len: u8,
}

impl Name {
    const CAPACITY: usize = 120;

    /// `text`, or its last bytes.
    pub(crate) fn new(text: &[u8]) -> Self {
        let mut name = Name {
            bytes: [0; Name::CAPACITY],
            len: 0,
        };
        let tail = if text.len() > Name::CAPACITY {
            name.bytes[..3].copy_from_slice(b"...");
            name.len = 3;
            &text[text.len() - (Name::CAPACITY - 3)..]
        } else {
            text
        };
        let at = usize::from(name.len);
        name.bytes[at..at + tail.len()].copy_from_slice(tail);
        name.len = (at + tail.len()) as u8;
        name
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

/// Armed around one callback call; see the module documentation. It holds
/// a closure that names the callback, run only if the callback unwinds, so
/// the normal path does not even gather the names.
pub(crate) struct CallGuard<S: Fn() -> Callback>(S);

impl<S: Fn() -> Callback> CallGuard<S> {
    /// Arms a guard for a call of the callback `site` names.
    #[inline(always)]
    pub(crate) fn arm(site: S) -> Self {
        CallGuard(site)
    }

    /// The callback returned: nothing to report.
    #[inline(always)]
    pub(crate) fn disarm(self) {
        std::mem::forget(self);
    }
}

impl<S: Fn() -> Callback> Drop for CallGuard<S> {
    /// Runs only while the callback unwinds (the normal path forgets the
    /// guard).
    #[inline(always)]
    fn drop(&mut self) {
        unwound((self.0)())
    }
}

/// Reports the callback that is unwinding through us and aborts.
#[cold]
#[inline(never)]
fn unwound(callback: Callback) -> ! {
    let mut line = Line::default();
    let _ = write_message(&mut line, callback);
    line.emit();
    std::process::abort();
}

/// What an allocator callback that threw is told to do instead.
const ALLOCATOR_ADVICE: &str = "did not return normally: a C++ exception was thrown through aclalloc. Allocator callbacks must return normally (no exception, no longjmp out of them): catch exceptions inside the callback and return NULL from alloc (include/aclalloc/ge_allocator.h does this for C++ allocators). Aborting the process (aclalloc's locks and bookkeeping for the allocator cannot be recovered)";

/// The message: which callback, for what, and what to do.
fn write_message(out: &mut impl Write, callback: Callback) -> std::fmt::Result {
    let (function, stream, descriptor) = match callback {
        Callback::Alloc { stream, descriptor } => (Function::Alloc, stream, descriptor),
        Callback::AllocAdvise { stream, descriptor } => (Function::AllocAdvise, stream, descriptor),
        Callback::GetAddrFromBlock { stream, descriptor } => {
            (Function::GetAddrFromBlock, stream, descriptor)
        }
        Callback::Free { stream, descriptor } => (Function::Free, stream, descriptor),
        Callback::TrackedGetAddr { function, block } => {
            return writeln!(
                out,
                "aclalloc: the {} at {function:#x}, called by the tracking layer for block {block:#x}, {ALLOCATOR_ADVICE}",
                Function::GetAddrFromBlock.name()
            );
        }
        Callback::Default { function, stream } => {
            write!(
                out,
                "aclalloc: the {} of the default allocator (set with aclallocSetDefaultAllocator)",
                function.name()
            )?;
            if stream != 0 {
                write!(out, " for stream {stream:#x}")?;
            }
            return writeln!(out, " {ALLOCATOR_ADVICE}");
        }
        Callback::Plugin {
            function,
            library,
            symbol,
        } => {
            return writeln!(
                out,
                "aclalloc: the pluggable allocator's {} {symbol} of {library} did not return normally: a C++ exception was thrown through aclalloc. Plugin functions must return normally (no exception, no longjmp out of them): catch exceptions inside the function and return NULL from alloc. Aborting the process (aclalloc's bookkeeping for the allocator cannot be recovered)",
                function.name()
            );
        }
        Callback::Kernel { function, device } => {
            return writeln!(
                out,
                "aclalloc: the kernel at {function:#x} (aclallocKernelFunc, on a stream of device {device}) did not return normally: a C++ exception was thrown through aclalloc. Kernels must return normally (no exception, no longjmp out of them): catch exceptions inside the kernel. Aborting the process (the stream's state cannot be recovered)"
            );
        }
    };
    write!(out, "aclalloc: the {} of the allocator", function.name())?;
    if descriptor != 0 {
        write!(out, " registered with descriptor {descriptor:#x}")?;
    }
    writeln!(out, " for stream {stream:#x} {ALLOCATOR_ADVICE}")
}

/// The `"C-unwind"` view of each callback type (see the module documentation).
type AllocUnwind = unsafe extern "C-unwind" fn(*mut c_void, usize) -> *mut c_void;
type FreeUnwind = unsafe extern "C-unwind" fn(*mut c_void, *mut c_void);
type AllocAdviseUnwind =
    unsafe extern "C-unwind" fn(*mut c_void, usize, *mut c_void) -> *mut c_void;
type GetAddrUnwind = unsafe extern "C-unwind" fn(*mut c_void) -> *mut c_void;
type KernelUnwind = unsafe extern "C-unwind" fn(*mut c_void, usize, *mut c_void);

/// `alloc(obj, size)`, guarded.
///
/// # Safety
/// As calling `alloc` directly: the allocator's contract.
#[inline(always)]
pub(crate) unsafe fn alloc(
    alloc: AllocFn,
    obj: *mut c_void,
    size: usize,
    site: impl Fn() -> Callback,
) -> *mut c_void {
    // SAFETY: same signature and call ABI; see the module documentation.
    let alloc = unsafe { std::mem::transmute::<AllocFn, AllocUnwind>(alloc) };
    let guard = CallGuard::arm(site);
    // SAFETY: the caller's contract.
    let block = unsafe { alloc(obj, size) };
    guard.disarm();
    block
}

/// `alloc_advise(obj, size, addr)`, guarded.
///
/// # Safety
/// As calling `alloc_advise` directly.
#[inline(always)]
pub(crate) unsafe fn alloc_advise(
    alloc_advise: AllocAdviseFn,
    obj: *mut c_void,
    size: usize,
    addr: *mut c_void,
    site: impl Fn() -> Callback,
) -> *mut c_void {
    // SAFETY: same signature and call ABI; see the module documentation.
    let advise = unsafe { std::mem::transmute::<AllocAdviseFn, AllocAdviseUnwind>(alloc_advise) };
    let guard = CallGuard::arm(site);
    // SAFETY: the caller's contract.
    let block = unsafe { advise(obj, size, addr) };
    guard.disarm();
    block
}

/// Runs `call`, which calls a foreign function through an `extern
/// "C-unwind"` pointer (a layer above with function types of its own, such
/// as a plugin's, makes that pointer), guarded for the callback `site`
/// names.
#[inline(always)]
pub(crate) fn guarded<R>(site: impl Fn() -> Callback, call: impl FnOnce() -> R) -> R {
    let guard = CallGuard::arm(site);
    let result = call();
    guard.disarm();
    result
}

/// `getAddrFromBlock(block)`, guarded.
///
/// # Safety
/// As calling `get_addr` directly.
#[inline(always)]
pub(crate) unsafe fn get_addr_from_block(
    get_addr: GetAddrFromBlockFn,
    block: *mut c_void,
    site: impl Fn() -> Callback,
) -> *mut c_void {
    // SAFETY: same signature and call ABI; see the module documentation.
    let get_addr = unsafe { std::mem::transmute::<GetAddrFromBlockFn, GetAddrUnwind>(get_addr) };
    let guard = CallGuard::arm(site);
    // SAFETY: the caller's contract.
    let addr = unsafe { get_addr(block) };
    guard.disarm();
    addr
}

/// `free(obj, block)`, guarded.
///
/// # Safety
/// As calling `free` directly.
#[inline(always)]
pub(crate) unsafe fn free(
    free: FreeFn,
    obj: *mut c_void,
    block: *mut c_void,
    site: impl Fn() -> Callback,
) {
    // SAFETY: same signature and call ABI; see the module documentation.
    let free = unsafe { std::mem::transmute::<FreeFn, FreeUnwind>(free) };
    let guard = CallGuard::arm(site);
    // SAFETY: the caller's contract.
    unsafe { free(obj, block) };
    guard.disarm();
}

/// `kernel(workspace, size, user_data)`, guarded.
///
/// # Safety
/// As calling `kernel` directly.
#[inline(always)]
pub(crate) unsafe fn kernel(
    kernel: unsafe extern "C" fn(*mut c_void, usize, *mut c_void),
    workspace: *mut c_void,
    size: usize,
    user_data: *mut c_void,
    device: u32,
) {
    let site = || Callback::Kernel {
        function: kernel as usize,
        device,
    };
    // SAFETY: same signature and call ABI; see the module documentation.
    let kernel = unsafe {
        std::mem::transmute::<unsafe extern "C" fn(*mut c_void, usize, *mut c_void), KernelUnwind>(
            kernel,
        )
    };
    let guard = CallGuard::arm(site);
    // SAFETY: the caller's contract.
    unsafe { kernel(workspace, size, user_data) };
    guard.disarm();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(callback: Callback) -> String {
        let mut s = String::new();
        write_message(&mut s, callback).unwrap();
        s
    }

    #[test]
    fn the_message_names_the_callback_its_stream_and_descriptor() {
        let m = message(Callback::Alloc {
            stream: 0x1234,
            descriptor: 0xabc,
        });
        assert!(
            m.contains("alloc callback (aclrtAllocatorAllocFunc)"),
            "{m}"
        );
        assert!(m.contains("descriptor 0xabc"), "{m}");
        assert!(m.contains("stream 0x1234"), "{m}");
        assert!(m.contains("catch exceptions inside the callback"), "{m}");
        let m = message(Callback::Free {
            stream: 0x1234,
            descriptor: 0,
        });
        assert!(
            m.contains("free callback") && !m.contains("descriptor 0x"),
            "{m}"
        );
        let m = message(Callback::Kernel {
            function: 0x4000,
            device: 1,
        });
        assert!(
            m.contains("kernel at 0x4000") && m.contains("device 1"),
            "{m}"
        );
    }

    #[test]
    fn the_new_callbacks_are_named() {
        let m = message(Callback::AllocAdvise {
            stream: 0x10,
            descriptor: 0x20,
        });
        assert!(
            m.contains("allocAdvise callback (aclrtAllocatorAllocAdviseFunc)")
                && m.contains("descriptor 0x20")
                && m.contains("stream 0x10"),
            "{m}"
        );
        let m = message(Callback::TrackedGetAddr {
            function: 0x30,
            block: 0x40,
        });
        assert!(
            m.contains("getAddrFromBlock callback")
                && m.contains("at 0x30")
                && m.contains("block 0x40"),
            "{m}"
        );
        let m = message(Callback::Default {
            function: Function::Free,
            stream: 0,
        });
        assert!(
            m.contains("free callback (aclrtAllocatorFreeFunc) of the default allocator")
                && !m.contains("for stream"),
            "{m}"
        );
        let m = message(Callback::Plugin {
            function: PluginFunction::EmptyCache,
            library: Name::new(b"/opt/lib/libmine.so"),
            symbol: Name::new(b"my_empty"),
        });
        assert!(
            m.contains("empty-cache function (emptyCacheSymbol) my_empty of /opt/lib/libmine.so"),
            "{m}"
        );
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
    fn the_longest_message_fits_the_buffer() {
        let long = Name::new(&[b'x'; 500]);
        let callbacks = [
            Callback::GetAddrFromBlock {
                stream: usize::MAX,
                descriptor: usize::MAX,
            },
            Callback::AllocAdvise {
                stream: usize::MAX,
                descriptor: usize::MAX,
            },
            Callback::TrackedGetAddr {
                function: usize::MAX,
                block: usize::MAX,
            },
            Callback::Default {
                function: Function::GetAddrFromBlock,
                stream: usize::MAX,
            },
            Callback::Plugin {
                function: PluginFunction::MemoryFraction,
                library: long,
                symbol: long,
            },
            Callback::Kernel {
                function: usize::MAX,
                device: u32::MAX,
            },
        ];
        for callback in callbacks {
            let mut line = Line::default();
            write_message(&mut line, callback).unwrap();
            let text = line.as_bytes();
            assert!(text.len() < 1024, "{} bytes", text.len());
            assert_eq!(text.last(), Some(&b'\n'));
        }
    }
}
