//! The reports when the program is stopped by a signal.
//!
//! SIGTERM, SIGINT, SIGHUP and SIGQUIT skip `atexit`, and crashes (SIGSEGV,
//! SIGBUS, SIGFPE, SIGILL, SIGABRT) too, so with tracking on from the
//! environment they get a handler (where the program left the default). The
//! handler wakes a watcher thread through a pipe, waits (at most
//! [`REPORT_WAIT`]) for it to write the reports, then takes the default
//! action: it never returns into the program, so the process ends as the
//! signal would have ended it (128+N) and no line after `raise` runs. A
//! forked child has no watcher and gets the default action at once.

use crate::base::sync::statics::{AtomicBool, AtomicI32};

use crate::base::sync::Ordering;
use std::time::Duration;

/// How long a signalled thread waits for the report (bounded: a report that
/// needs a lock the interrupted thread holds never comes).
const REPORT_WAIT: Duration = Duration::from_secs(5);

const HANDLED: [libc::c_int; 9] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
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
/// The watcher's thread id: a signal it takes itself (SIGABRT stays
/// unblocked there) must not wait for it.
static WATCHER_TID: AtomicI32 = AtomicI32::new(0);
/// A signal already woke the watcher.
static WOKEN: AtomicBool = AtomicBool::new(false);
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
        for sig in HANDLED {
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

/// This thread's kernel id (async-signal-safe: a system call).
fn thread_id() -> i32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Async-signal-safe: atomics, getpid, gettid, write, nanosleep, signal,
/// pthread_sigmask, raise.
extern "C" fn on_signal(sig: libc::c_int) {
    let fd = WAKE.load(Ordering::SeqCst);
    // SAFETY: `getpid` is async-signal-safe and takes no arguments.
    let here = unsafe { libc::getpid() } == WATCHER_PID.load(Ordering::SeqCst);
    if fd >= 0 && here && thread_id() != WATCHER_TID.load(Ordering::SeqCst) {
        if !WOKEN.swap(true, Ordering::SeqCst) {
            // SAFETY: `write` is async-signal-safe; `fd` is the wake pipe's
            // write end and the buffer one byte on the stack.
            unsafe { libc::write(fd, [0u8].as_ptr().cast(), 1) };
        }
        // Every signalled thread waits, so a second signal does not end
        // the process while the first one's report is being written.
        let step = libc::timespec {
            tv_sec: 0,
            tv_nsec: 10_000_000,
        };
        for _ in 0..REPORT_WAIT.as_millis() / 10 {
            if WRITTEN.load(Ordering::SeqCst) {
                break;
            }
            // SAFETY: `nanosleep` is async-signal-safe; `step` is a valid
            // timespec on the stack.
            unsafe { libc::nanosleep(&step, std::ptr::null_mut()) };
        }
    }
    // The default action, now: `sig` is blocked inside its handler, so it
    // is unblocked before being raised again (a fault raised this way ends
    // the process just as the faulting instruction would).
    // SAFETY: `signal`, `sigemptyset`, `sigaddset`, `pthread_sigmask` and
    // `raise` are async-signal-safe; the set lives on the stack.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
}

fn watch(read_end: libc::c_int) {
    WATCHER_TID.store(thread_id(), Ordering::SeqCst);
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
    super::exit::write_reports_once();
    WRITTEN.store(true, Ordering::SeqCst);
}
