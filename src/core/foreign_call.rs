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

use super::descriptor::{AllocFn, FreeFn, GetAddrFromBlockFn};
use std::ffi::c_void;
use std::fmt::Write;

/// Which callback a guard watches, and what it was called for (for the
/// message).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Callback {
    /// `aclrtAllocatorAllocFunc` of the allocator serving `stream`
    /// (`descriptor`: the registered descriptor, or 0 when there is none).
    Alloc { stream: usize, descriptor: usize },
    /// `aclrtAllocatorGetAddrFromBlockFunc`, as for `Alloc`.
    GetAddrFromBlock { stream: usize, descriptor: usize },
    /// `aclrtAllocatorFreeFunc`, as for `Alloc`.
    Free { stream: usize, descriptor: usize },
    /// A kernel (`aclallocKernelFunc` at `function`) on a stream of `device`.
    Kernel { function: usize, device: u32 },
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

/// The message: which callback, for what, and what to do.
fn write_message(out: &mut impl Write, callback: Callback) -> std::fmt::Result {
    let (name, stream, descriptor) = match callback {
        Callback::Alloc { stream, descriptor } => (
            "alloc callback (aclrtAllocatorAllocFunc)",
            stream,
            descriptor,
        ),
        Callback::GetAddrFromBlock { stream, descriptor } => (
            "getAddrFromBlock callback (aclrtAllocatorGetAddrFromBlockFunc)",
            stream,
            descriptor,
        ),
        Callback::Free { stream, descriptor } => {
            ("free callback (aclrtAllocatorFreeFunc)", stream, descriptor)
        }
        Callback::Kernel { function, device } => {
            return writeln!(
                out,
                "aclalloc: the kernel at {function:#x} (aclallocKernelFunc, on a stream of device {device}) did not return normally: a C++ exception was thrown through aclalloc. Kernels must return normally (no exception, no longjmp out of them): catch exceptions inside the kernel. Aborting the process (the stream's state cannot be recovered)"
            );
        }
    };
    write!(out, "aclalloc: the {name} of the allocator")?;
    if descriptor != 0 {
        write!(out, " registered with descriptor {descriptor:#x}")?;
    }
    writeln!(
        out,
        " for stream {stream:#x} did not return normally: a C++ exception was thrown through aclalloc. Allocator callbacks must return normally (no exception, no longjmp out of them): catch exceptions inside the callback and return NULL from alloc (include/aclalloc/ge_allocator.h does this for C++ allocators). Aborting the process (aclalloc's locks and bookkeeping for the allocator cannot be recovered)"
    )
}

/// A fixed buffer for the message: nothing is allocated while a foreign
/// exception is in flight.
struct Line {
    bytes: [u8; 640],
    len: usize,
}

impl Default for Line {
    fn default() -> Self {
        Line {
            bytes: [0; 640],
            len: 0,
        }
    }
}

impl Write for Line {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let room = self.bytes.len() - self.len;
        let take = s.len().min(room);
        self.bytes[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        Ok(())
    }
}

impl Line {
    fn emit(&self) {
        // SAFETY: writes our own buffer to stderr; a short or failed write
        // only shortens the message.
        unsafe { libc::write(2, self.bytes.as_ptr().cast(), self.len) };
    }
}

/// The `"C-unwind"` view of each callback type (see the module documentation).
type AllocUnwind = unsafe extern "C-unwind" fn(*mut c_void, usize) -> *mut c_void;
type FreeUnwind = unsafe extern "C-unwind" fn(*mut c_void, *mut c_void);
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
    fn the_longest_message_fits_the_buffer() {
        let mut line = Line::default();
        write_message(
            &mut line,
            Callback::GetAddrFromBlock {
                stream: usize::MAX,
                descriptor: usize::MAX,
            },
        )
        .unwrap();
        assert!(line.len < line.bytes.len(), "{} bytes", line.len);
        assert_eq!(line.bytes[line.len - 1], b'\n');
    }
}
