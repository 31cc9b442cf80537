//! The reports when the program is stopped by a signal.
//!
//! SIGTERM, SIGINT and SIGHUP skip `atexit`, so with tracking on from the
//! environment they get a handler (where the program left the default). It
//! only stores the signal and writes to a pipe; a watcher thread writes the
//! reports, restores the default action and raises the signal again. After a
//! crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) the handler waits for the
//! watcher at most [`CRASH_WAIT`] before the fault happens again. A forked
//! child has no watcher.

use crate::base::sync::statics::{AtomicBool, AtomicI32};

use crate::base::sync::Ordering;
use std::time::Duration;

/// How long a crashing thread waits for the report (bounded: a report that
/// needs a lock the crashed thread holds never comes).
const CRASH_WAIT: Duration = Duration::from_secs(2);

const STOPPING: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];
const CRASHING: [libc::c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGABRT,
];

/// The pipe's write end (-1: not installed).
static WAKE: AtomicI32 = AtomicI32::new(-1);
/// The process the watcher thread runs in.
static WATCHER_PID: AtomicI32 = AtomicI32::new(0);
/// The signal being handled (0: none yet).
static CAUGHT: AtomicI32 = AtomicI32::new(0);
/// Set by the watcher once the reports are written.
static WRITTEN: AtomicBool = AtomicBool::new(false);

/// Installs the handlers and starts the watcher (once). Failure to do so
/// only means no report on a signal.
pub(crate) fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: a pipe into a valid array of two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return;
        }
        let read_end = fds[0];
        let started = crate::base::threads::spawn("aclalloc-report-on-signal".into(), move || {
            watch(read_end)
        });
        if started.is_err() {
            return;
        }
        // SAFETY: getpid has no preconditions.
        WATCHER_PID.store(unsafe { libc::getpid() }, Ordering::SeqCst);
        WAKE.store(fds[1], Ordering::SeqCst);
        for sig in STOPPING.into_iter().chain(CRASHING) {
            handle_if_default(sig);
        }
    });
}

/// Puts [`on_signal`] on `sig` if its action is still the default one.
fn handle_if_default(sig: libc::c_int) {
    // SAFETY: sigaction with valid structures; the handler is
    // async-signal-safe (see `on_signal`).
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
            || old.sa_sigaction != libc::SIG_DFL
        {
            return;
        }
        let mut new: libc::sigaction = std::mem::zeroed();
        new.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut new.sa_mask);
        new.sa_flags = libc::SA_RESTART;
        libc::sigaction(sig, &new, std::ptr::null_mut());
    }
}

/// Async-signal-safe: atomics, getpid, write, nanosleep, signal, raise.
extern "C" fn on_signal(sig: libc::c_int) {
    let fd = WAKE.load(Ordering::SeqCst);
    // SAFETY: `getpid` is async-signal-safe and takes no arguments.
    let mine = unsafe { libc::getpid() } == WATCHER_PID.load(Ordering::SeqCst);
    let first = CAUGHT
        .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok();
    if fd < 0 || !mine || !first {
        // No watcher here (a forked child), or another signal is being
        // reported: the default action now.
        // SAFETY: `signal` and `raise` are async-signal-safe; `sig` is the signal being
        // handled.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
        return;
    }
    // SAFETY: `write` is async-signal-safe; `fd` is the wake pipe's write end (checked
    // non-negative) and the buffer one byte on the stack.
    unsafe { libc::write(fd, [0u8].as_ptr().cast(), 1) };
    if CRASHING.contains(&sig) {
        // Wait (bounded) for the report, then let the fault happen again with the default action.
        let step = libc::timespec {
            tv_sec: 0,
            tv_nsec: 10_000_000,
        };
        let steps = CRASH_WAIT.as_millis() / 10;
        for _ in 0..steps {
            if WRITTEN.load(Ordering::SeqCst) {
                break;
            }
            // SAFETY: `nanosleep` is async-signal-safe; `step` is a valid timespec on the
            // stack.
            unsafe { libc::nanosleep(&step, std::ptr::null_mut()) };
        }
        // SAFETY: `signal` is async-signal-safe; `sig` is the signal being handled.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
        if sig == libc::SIGABRT {
            // abort() raises again itself; this is for a SIGABRT from kill.
            // SAFETY: `raise` is async-signal-safe; `sig` is the signal being handled.
            unsafe { libc::raise(sig) };
        }
    }
    // SIGTERM, SIGINT, SIGHUP: the watcher re-raises once the report is out.
}

fn watch(read_end: libc::c_int) {
    let mut byte = 0u8;
    loop {
        // SAFETY: reading one byte into a valid buffer.
        let n = unsafe { libc::read(read_end, (&mut byte as *mut u8).cast(), 1) };
        if n == 1 {
            break;
        }
        if n == 0 {
            return;
        }
    }
    let sig = CAUGHT.load(Ordering::SeqCst);
    super::exit::write_reports_once();
    WRITTEN.store(true, Ordering::SeqCst);
    if STOPPING.contains(&sig) {
        // SAFETY: restoring the default action and raising the signal the
        // process received, so it ends as the signal would have ended it.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
        }
    }
}
