//! The `exec` family: the image about to be replaced writes its reports
//! first (`crate::tracking::write_reports_before_exec`), as it would at
//! exit; the new image reports on its own. An `exec` that fails takes the
//! reports back. glibc's `execl`, `execle` and `execlp` reach the kernel
//! without a call this library can take in place (and their variable
//! arguments cannot be received in stable Rust), so they are not covered.

use crate::base::sync::statics::AtomicUsize;
use crate::base::sync::Ordering;
use crate::tracking::{exec_failed, write_reports_before_exec};
use std::ffi::{c_char, c_int, CStr};

type Argv = *const *const c_char;

/// libc's functions, in the order of [`NAMES`] (0: not found), looked up
/// at load: a forked child that execs must not call `dlsym`, whose lock
/// another thread may have held at the fork. Calling `libc::execve` from
/// here would come back to this library's own.
static NEXT: [AtomicUsize; 5] = [const { AtomicUsize::new(0) }; 5];
const NAMES: [&CStr; 5] = [c"execve", c"execv", c"execvp", c"execvpe", c"fexecve"];

/// Looks up libc's functions (at load).
pub fn resolve() {
    for (slot, name) in NEXT.iter().zip(NAMES) {
        // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name.
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
        slot.store(p as usize, Ordering::Relaxed);
    }
}

/// libc's function number `i`, of type `F`.
fn next<F: Copy>(i: usize) -> Option<F> {
    let p = NEXT[i].load(Ordering::Relaxed);
    // SAFETY: `F` is the function pointer type of `NAMES[i]` (each caller
    // names its own).
    (p != 0).then(|| unsafe { super::next::as_fn(p) })
}

/// Runs `exec` (the real call) with the reports written first. Only a
/// failed exec returns, with its errno kept (ENOSYS: no libc function).
fn replacing(exec: impl FnOnce() -> Option<c_int>) -> c_int {
    let written = write_reports_before_exec();
    let rc = exec();
    // SAFETY: errno is this thread's.
    let errno = rc.map_or(libc::ENOSYS, |_| unsafe { *libc::__errno_location() });
    exec_failed(written);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
    rc.unwrap_or(-1)
}

/// `execve`, with this image's reports written first.
///
/// # Safety
/// As libc's `execve`.
#[no_mangle]
unsafe extern "C" fn execve(path: *const c_char, argv: Argv, envp: Argv) -> c_int {
    type F = unsafe extern "C" fn(*const c_char, Argv, Argv) -> c_int;
    // SAFETY: the caller's arguments, passed on.
    replacing(|| next::<F>(0).map(|f| unsafe { f(path, argv, envp) }))
}

/// `execv`, with this image's reports written first.
///
/// # Safety
/// As libc's `execv`.
#[no_mangle]
unsafe extern "C" fn execv(path: *const c_char, argv: Argv) -> c_int {
    type F = unsafe extern "C" fn(*const c_char, Argv) -> c_int;
    // SAFETY: the caller's arguments, passed on.
    replacing(|| next::<F>(1).map(|f| unsafe { f(path, argv) }))
}

/// `execvp`, with this image's reports written first.
///
/// # Safety
/// As libc's `execvp`.
#[no_mangle]
unsafe extern "C" fn execvp(file: *const c_char, argv: Argv) -> c_int {
    type F = unsafe extern "C" fn(*const c_char, Argv) -> c_int;
    // SAFETY: the caller's arguments, passed on.
    replacing(|| next::<F>(2).map(|f| unsafe { f(file, argv) }))
}

/// `execvpe`, with this image's reports written first.
///
/// # Safety
/// As libc's `execvpe`.
#[no_mangle]
unsafe extern "C" fn execvpe(file: *const c_char, argv: Argv, envp: Argv) -> c_int {
    type F = unsafe extern "C" fn(*const c_char, Argv, Argv) -> c_int;
    // SAFETY: the caller's arguments, passed on.
    replacing(|| next::<F>(3).map(|f| unsafe { f(file, argv, envp) }))
}

/// `fexecve`, with this image's reports written first.
///
/// # Safety
/// As libc's `fexecve`.
#[no_mangle]
unsafe extern "C" fn fexecve(fd: c_int, argv: Argv, envp: Argv) -> c_int {
    type F = unsafe extern "C" fn(c_int, Argv, Argv) -> c_int;
    // SAFETY: the caller's arguments, passed on.
    replacing(|| next::<F>(4).map(|f| unsafe { f(fd, argv, envp) }))
}
