//! `fork()` and the host runtime's threads.
//!
//! A child process gets a copy of the parent's memory but only the thread
//! that called `fork()`: the worker threads of every stream the parent made
//! do not exist in it. A stream remembers the *fork generation* it was made
//! in; `pthread_atfork` moves the generation on in every child, so one
//! relaxed load tells a launch whether its stream's worker exists. An
//! inherited stream refuses work (instead of queueing it for a thread that
//! will never run it), is never waited for, and is torn down without joining
//! its worker. Everything the child creates itself works.
//!
//! What this cannot do: a lock another parent thread held at the moment of
//! `fork()` stays held in the child. The runtime holds its locks only for
//! moments (the queues are lock-free), but a child forked while another
//! thread was inside, say, `aclrtCreateStream` may still find one held.
//! `docs/HARDENING.md` says what to do: fork before the first stream, or
//! exec in the child.

use crate::core::error::Error;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, Once, PoisonError};
use std::thread::JoinHandle;

static GENERATION: AtomicU32 = AtomicU32::new(0);

/// Why a call on an inherited stream fails.
pub(crate) const INHERITED: Error = Error::InvalidParam {
    param: "stream",
    reason: "The stream was created before fork(): its worker thread does not exist in this (child) process. Create the streams a child uses in the child",
};

/// Join handles of inherited workers: joining one fails (the thread is not
/// in this process) and dropping one detaches a thread that is not there;
/// they are kept, untouched, for the life of the process.
static INHERITED_WORKERS: Mutex<Vec<JoinHandle<()>>> = Mutex::new(Vec::new());

/// Keeps the join handle of a worker inherited through `fork()`.
pub(crate) fn keep_inherited(worker: JoinHandle<()>) {
    INHERITED_WORKERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(worker);
}

extern "C" fn in_child() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// The fork generation of this process (0 in the process that loaded the
/// library, one more in each child). Registers the fork handler on first use.
#[inline]
pub(crate) fn generation() -> u32 {
    static WATCH: Once = Once::new();
    WATCH.call_once(|| {
        // SAFETY: registers a handler that only bumps an atomic, which is
        // async-signal-safe as a child handler must be. Failure (ENOMEM)
        // would only mean inherited streams are not recognised.
        unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
    });
    GENERATION.load(Ordering::Relaxed)
}
