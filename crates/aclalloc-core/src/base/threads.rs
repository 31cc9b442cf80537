//! Threads the library starts for itself: a stream's worker, the tracking
//! layer's clock, the report-on-signal watcher.
//!
//! A service that blocks signals and takes them with `sigwait` would lose
//! them to an unblocked thread of ours, so [`spawn`] blocks every
//! asynchronous signal around the creation (the new thread inherits the
//! mask). Fault signals and SIGABRT stay unblocked so crash handlers run.

use std::io;
use std::thread::{Builder, JoinHandle};

/// The signals a library thread keeps unblocked.
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
/// asynchronous signal blocked; the caller's mask is the same after.
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
        // A signal that arrived meanwhile is pending, not lost.
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
        use libc::{SIGALRM, SIGCHLD, SIGHUP, SIGINT, SIGPIPE, SIGTERM, SIGUSR1, SIGUSR2};
        for sig in [
            SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD, SIGPIPE, SIGALRM,
        ] {
            assert!(is_blocked(&inside, sig), "signal {sig} not blocked");
        }
        for sig in SYNCHRONOUS {
            assert!(!is_blocked(&inside, sig), "fault signal {sig} blocked");
        }
        let after = current_mask();
        for sig in 1..32 {
            let (was, is) = (is_blocked(&before, sig), is_blocked(&after, sig));
            assert_eq!(was, is, "the caller's mask changed for signal {sig}");
        }
    }
}
