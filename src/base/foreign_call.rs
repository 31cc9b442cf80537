//! Calling C callbacks that might unwind: allocator callbacks and kernels.
//!
//! Rust cannot catch a C++ exception, and one would leave this library's
//! state half-updated, so callbacks must return normally
//! (docs/HARDENING.md); when one throws, the process ends with one line on
//! stderr naming the callback. It is called through an `extern "C-unwind"`
//! pointer inside a [`CallGuard`], which is forgotten on return and, dropped
//! while unwinding, reports and aborts: the normal path costs nothing.

use super::descriptor::{AllocAdviseFn, AllocFn, FreeFn, GetAddrFromBlockFn};
use super::fixed_line::Line;
use std::ffi::c_void;
use std::fmt::Write;

/// Which callback a guard watches, and what it was called for. Built only
/// when a callback unwinds, so its size costs nothing on the normal path.
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

/// A name (a path, a symbol) in a fixed buffer, so a [`Callback`] needs no
/// allocation while an exception is in flight; a longer name keeps its end.
#[derive(Clone, Copy)]
pub(crate) struct Name {
    bytes: [u8; Name::CAPACITY],
    len: u8,
}

impl Name {
    const CAPACITY: usize = 120;

    /// `text`, or its last bytes.
    pub(crate) fn new(text: &[u8]) -> Self {
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

/// Armed around one callback call; its closure names the callback and runs
/// only if the callback unwinds.
struct CallGuard<S: Fn() -> Callback>(S);

impl<S: Fn() -> Callback> Drop for CallGuard<S> {
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

/// Runs `call`, which calls a foreign function through an `extern
/// "C-unwind"` pointer, guarded for the callback `site` names.
#[inline]
pub(crate) fn guarded<R>(site: impl Fn() -> Callback, call: impl FnOnce() -> R) -> R {
    let guard = CallGuard(site);
    let result = call();
    std::mem::forget(guard);
    result
}

/// `alloc(obj, size)`, guarded. Safety: as calling `alloc` directly.
#[inline]
pub(crate) unsafe fn alloc(
    alloc: AllocFn,
    obj: *mut c_void,
    size: usize,
    site: impl Fn() -> Callback,
) -> *mut c_void {
    // SAFETY: same signature and call ABI; see the module documentation.
    let alloc: unsafe extern "C-unwind" fn(*mut c_void, usize) -> *mut c_void =
        unsafe { std::mem::transmute(alloc) };
    // SAFETY: the caller's contract.
    guarded(site, || unsafe { alloc(obj, size) })
}

/// `alloc_advise(obj, size, addr)`, guarded. Safety: as calling `alloc_advise` directly.
#[inline]
pub(crate) unsafe fn alloc_advise(
    alloc_advise: AllocAdviseFn,
    obj: *mut c_void,
    size: usize,
    addr: *mut c_void,
    site: impl Fn() -> Callback,
) -> *mut c_void {
    // SAFETY: same signature and call ABI; see the module documentation.
    let advise: unsafe extern "C-unwind" fn(*mut c_void, usize, *mut c_void) -> *mut c_void =
        unsafe { std::mem::transmute(alloc_advise) };
    // SAFETY: the caller's contract.
    guarded(site, || unsafe { advise(obj, size, addr) })
}

/// `getAddrFromBlock(block)`, guarded. Safety: as calling `get_addr` directly.
#[inline]
pub(crate) unsafe fn get_addr_from_block(
    get_addr: GetAddrFromBlockFn,
    block: *mut c_void,
    site: impl Fn() -> Callback,
) -> *mut c_void {
    // SAFETY: same signature and call ABI; see the module documentation.
    let get_addr: unsafe extern "C-unwind" fn(*mut c_void) -> *mut c_void =
        unsafe { std::mem::transmute(get_addr) };
    // SAFETY: the caller's contract.
    guarded(site, || unsafe { get_addr(block) })
}

/// `free(obj, block)`, guarded. Safety: as calling `free` directly.
#[inline]
pub(crate) unsafe fn free(
    free: FreeFn,
    obj: *mut c_void,
    block: *mut c_void,
    site: impl Fn() -> Callback,
) {
    // SAFETY: same signature and call ABI; see the module documentation.
    let free: unsafe extern "C-unwind" fn(*mut c_void, *mut c_void) =
        unsafe { std::mem::transmute(free) };
    // SAFETY: the caller's contract.
    guarded(site, || unsafe { free(obj, block) })
}

/// `kernel(workspace, size, user_data)` of a stream of `device`, guarded.
/// Safety: as calling `kernel` directly.
#[inline]
pub(crate) unsafe fn kernel(
    kernel: unsafe extern "C" fn(*mut c_void, usize, *mut c_void),
    workspace: *mut c_void,
    size: usize,
    user_data: *mut c_void,
    device: u32,
) {
    let function = kernel as usize;
    // SAFETY: same signature and call ABI; see the module documentation.
    let kernel: unsafe extern "C-unwind" fn(*mut c_void, usize, *mut c_void) =
        unsafe { std::mem::transmute(kernel) };
    let site = || Callback::Kernel { function, device };
    // SAFETY: the caller's contract.
    guarded(site, || unsafe { kernel(workspace, size, user_data) })
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
    fn the_message_names_the_callback_and_what_it_was_called_for() {
        let (stream, descriptor, function, block, device) = (0x1234, 0xabc, 0x4000, 0x40, 1);
        let plugin = Callback::Plugin {
            function: PluginFunction::EmptyCache,
            library: Name::new(b"/opt/lib/libmine.so"),
            symbol: Name::new(b"my_empty"),
        };
        let (alloc, advise) = (
            "alloc callback (aclrtAllocatorAllocFunc)",
            "allocAdvise callback",
        );
        let cases: [(Callback, &[&str], &str); 7] = [
            (
                Callback::Alloc { stream, descriptor },
                &[alloc, "descriptor 0xabc"],
                "",
            ),
            (
                Callback::AllocAdvise { stream, descriptor },
                &[advise, "stream 0x1234"],
                "",
            ),
            (
                Callback::Free {
                    stream,
                    descriptor: 0,
                },
                &["free callback"],
                "descriptor 0x",
            ),
            (
                Callback::Kernel { function, device },
                &["kernel at 0x4000", "device 1"],
                "",
            ),
            (
                Callback::TrackedGetAddr { function, block },
                &["at 0x4000", "block 0x40"],
                "",
            ),
            (
                Callback::Default {
                    function: Function::Free,
                    stream: 0,
                },
                &["free callback (aclrtAllocatorFreeFunc) of the default allocator"],
                "for stream",
            ),
            (
                plugin,
                &["empty-cache function (emptyCacheSymbol) my_empty of /opt/lib/libmine.so"],
                "",
            ),
        ];
        for (callback, present, absent) in cases {
            let m = message(callback);
            assert!(present.iter().all(|p| m.contains(p)), "{m}");
            assert!(absent.is_empty() || !m.contains(absent), "{m}");
        }
        let m = message(Callback::Alloc { stream, descriptor });
        assert!(m.contains("stream 0x1234") && m.contains("catch exceptions inside the callback"));
        let m = message(Callback::AllocAdvise { stream, descriptor });
        assert!(m.contains("(aclrtAllocatorAllocAdviseFunc)") && m.contains("descriptor 0xabc"));
        let m = message(Callback::TrackedGetAddr { function, block });
        assert!(m.contains("getAddrFromBlock callback"), "{m}");
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
        let (long, max) = (Name::new(&[b'x'; 500]), usize::MAX);
        let callbacks = [
            Callback::GetAddrFromBlock {
                stream: max,
                descriptor: max,
            },
            Callback::AllocAdvise {
                stream: max,
                descriptor: max,
            },
            Callback::TrackedGetAddr {
                function: max,
                block: max,
            },
            Callback::Default {
                function: Function::GetAddrFromBlock,
                stream: max,
            },
            Callback::Plugin {
                function: PluginFunction::MemoryFraction,
                library: long,
                symbol: long,
            },
            Callback::Kernel {
                function: max,
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
