//! Threads the library starts for itself: a stream's worker, the tracking
//! layer's clock, the report-on-signal watcher.
//!
//! The kernel delivers a process-directed signal (`kill(pid, ...)`: SIGINT,
//! SIGTERM, SIGUSR1, SIGCHLD, ...) to any one thread that does not block
//! it. A service commonly blocks such signals in all of its own threads and
//! takes them in one thread with `sigwait`; an unblocked thread of ours
//! would take them instead: the signal's default action (for SIGUSR1, SIGHUP
//! and others: end the process) or the program's handler would run there,
//! and its `sigwait` would never see it. A new thread inherits the signal
//! mask of the thread that creates it, and ours are created inside the
//! user's calls, so [`spawn`] blocks every asynchronous signal around the
//! creation and then gives the calling thread its own mask back.
//!
//! Signals raised by a fault in the thread itself (SIGSEGV, SIGBUS, SIGFPE,
//! SIGILL, SIGTRAP, SIGSYS) and SIGABRT stay unblocked: the kernel delivers
//! a fault's signal to the faulting thread whatever its mask, but with the
//! signal blocked it first resets the action to the default, so a crash
//! handler (the tracking layer's report, a service's own) would not run.

use std::io;
use std::thread::{Builder, JoinHandle};

/// The signals a library thread keeps unblocked (see the module
/// documentation).
const SYNCHRONOUS: [libc::c_int; 7] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGTRAP,
    libc::SIGSYS,
    libc::SIGABRT,
];

/// Starts a library thread named `name` running `body`, with every
/// asynchronous signal blocked (see the module documentation). The calling
/// thread's mask is the same before and after. The error is the one
/// `std::thread::Builder::spawn` returns.
pub fn spawn<F, T>(name: String, body: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    // SAFETY: sigset_t is plain data, filled by sigfillset before any read.
    let mut blocked: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above; written by pthread_sigmask before it is read.
    let mut callers: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers to sigset_t values that live across the calls.
    let masked = unsafe {
        libc::sigfillset(&mut blocked);
        for sig in SYNCHRONOUS {
            libc::sigdelset(&mut blocked, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &blocked, &mut callers) == 0
    };
    let spawned = Builder::new().name(name).spawn(body);
    if masked {
        // A signal that arrived meanwhile is pending, not lost: it is
        // delivered here now, or to another thread that does not block it.
        // SAFETY: `callers` holds the mask pthread_sigmask read above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &callers, std::ptr::null_mut()) };
    }
    spawned
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This thread's blocked set.
    fn current_mask() -> libc::sigset_t {
        // SAFETY: reads the mask into a zeroed sigset_t.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            assert_eq!(
                libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut set),
                0
            );
            set
        }
    }

    fn is_blocked(set: &libc::sigset_t, sig: libc::c_int) -> bool {
        // SAFETY: a valid, initialised set.
        unsafe { libc::sigismember(set, sig) == 1 }
    }

    #[test]
    fn the_thread_blocks_asynchronous_signals_and_the_caller_keeps_its_mask() {
        let before = current_mask();
        assert!(!is_blocked(&before, libc::SIGUSR1), "test thread's mask");
        let inside = spawn("aclalloc-test".into(), current_mask)
            .unwrap()
            .join()
            .unwrap();
        for sig in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGUSR1,
            libc::SIGUSR2,
            libc::SIGCHLD,
            libc::SIGPIPE,
            libc::SIGALRM,
        ] {
            assert!(is_blocked(&inside, sig), "signal {sig} not blocked");
        }
        for sig in SYNCHRONOUS {
            assert!(!is_blocked(&inside, sig), "fault signal {sig} blocked");
        }
        let after = current_mask();
        for sig in 1..32 {
            assert_eq!(
                is_blocked(&before, sig),
                is_blocked(&after, sig),
                "the caller's mask changed for signal {sig}"
            );
        }
    }
}
