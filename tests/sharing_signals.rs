//! Imports between processes go through a socket to the exporter; a signal
//! the program handles (a profiler's SIGPROF, a timer's SIGALRM) may
//! interrupt the importing thread's system calls, and must not turn a live
//! export into "names no live export". A handler without `SA_RESTART` and
//! an interval timer firing every 50 µs, then a few thousand notify imports
//! in this process, each of which must succeed. Its own process: the timer
//! is process-wide.

use aclalloc::ffi::cann::notify::*;
use aclalloc::ffi::cann::runtime::*;
use std::ffi::c_char;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};

const OK: i32 = 0;

static SIGNALS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn count(_: libc::c_int) {
    SIGNALS.fetch_add(1, Ordering::Relaxed);
}

/// SIGALRM every `micros`, handled without `SA_RESTART` (0: stops it).
fn alarm_every(micros: i64) {
    // SAFETY: plain libc calls with valid arguments; the handler only
    // touches an atomic.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = count as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        action.sa_flags = 0;
        assert_eq!(libc::sigaction(libc::SIGALRM, &action, null_mut()), 0);
        let interval = libc::timeval {
            tv_sec: 0,
            tv_usec: micros,
        };
        let timer = libc::itimerval {
            it_interval: interval,
            it_value: interval,
        };
        assert_eq!(libc::setitimer(libc::ITIMER_REAL, &timer, null_mut()), 0);
    }
}

#[test]
fn imports_survive_signals_that_interrupt_the_importing_thread() {
    // SAFETY: NULL is a valid config path.
    assert_eq!(unsafe { aclInit(null_mut()) }, OK);
    assert_eq!(aclrtSetDevice(0), OK);
    alarm_every(50);
    let mut failures = Vec::new();
    for i in 0..3000 {
        let (mut n, mut m) = (null_mut(), null_mut());
        let mut key = [0 as c_char; 65];
        // SAFETY: valid out-pointers and a 65-byte buffer; live notifies.
        unsafe {
            assert_eq!(aclrtCreateNotify(&mut n, 0), OK);
            let rc = aclrtNotifyGetExportKey(
                n,
                key.as_mut_ptr(),
                key.len(),
                ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION,
            );
            assert_eq!(rc, OK);
            let rc = aclrtNotifyImportByKey(&mut m, key.as_ptr(), 0);
            if rc == OK {
                assert_eq!(aclrtDestroyNotify(m), OK);
            } else {
                failures.push((i, rc));
            }
            assert_eq!(aclrtDestroyNotify(n), OK);
        }
    }
    alarm_every(0);
    assert!(
        SIGNALS.load(Ordering::Relaxed) > 0,
        "the timer never fired: the test shows nothing"
    );
    assert!(failures.is_empty(), "imports refused: {failures:?}");
}
