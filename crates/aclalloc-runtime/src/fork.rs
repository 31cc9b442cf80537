//! `fork()` and the host runtime's threads.
//!
//! A child has none of the parent's stream workers. A stream remembers the
//! *fork generation* it was made in, which `pthread_atfork` moves on in every
//! child: an inherited stream refuses work, is never waited for, and is torn
//! down without joining its worker. A lock another parent thread held at
//! `fork()` stays held in the child (docs/HARDENING.md: fork before the first
//! stream, or exec in the child).

use crate::base::error::Error;
use crate::base::sync::statics::AtomicU32;
use crate::base::sync::Ordering;
use std::sync::{Mutex, Once, PoisonError};
use std::thread::JoinHandle;

static GENERATION: AtomicU32 = AtomicU32::new(0);

/// Why a call on an inherited stream fails.
pub(crate) const INHERITED: Error = Error::InvalidParam {
    param: "stream",
    reason: "The stream was created before fork(): its worker thread does not exist in this (child) process. Create the streams a child uses in the child",
};

/// Join handles of inherited workers, kept untouched for the life of the
/// process: joining or dropping one would act on a thread that is not here.
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
