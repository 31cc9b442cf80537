//! The reports when the program is stopped by a signal.
//!
//! Services are stopped with SIGTERM (Kubernetes, systemd), SIGINT (Ctrl-C)
//! or SIGHUP, whose default action ends the process without running
//! `atexit`, so the report written there never appeared. With tracking on
//! from the environment, those three signals get a handler, but only where
//! the program left the default action (a program that handles them itself
//! usually exits through `exit()`, which writes the report).
//!
//! Writing a report allocates and takes the tracking lock, which a signal
//! handler must never do (the interrupted thread may hold either). So the
//! handler only stores the signal number and writes one byte to a pipe
//! (both async-signal-safe); a watcher thread blocked on the pipe writes the
//! reports, restores the default action and raises the signal again, so the
//! exit status is the one the signal would have given (128+N in a shell).
//!
//! After a crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) the same is
//! tried as a best effort: the handler wakes the watcher and waits for it at
//! most [`CRASH_WAIT`], then restores the default action and returns, so the
//! fault (or `abort`) happens again and kills the process as it would have.
//! If the crashed thread held a lock the report needs, the watcher blocks
//! and the process dies without a (complete) report after that wait.
//!
//! In a child made by `fork()` without `exec` the watcher thread does not
//! exist: the handler sees that the process id changed and gives the signal
//! its default action at once (no report from that child on a signal; its
//! report at `exit` is written as usual).

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
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
        let started = crate::core::threads::spawn("aclalloc-report-on-signal".into(), move || {
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
        // No watcher here (a forked child), or another signal is already
        // being reported: the default action now.
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
        // Wait (bounded) for the report, then let the fault happen again
        // with the default action.
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
            // abort() raises again itself; a raise here is only for a
            // SIGABRT that came from elsewhere (kill).
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
