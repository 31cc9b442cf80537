//! Work the runtime itself queues on a stream (the built-in tasks: a
//! reduce, random numbers): a value that runs once on the stream's worker,
//! or is dropped unrun if the stream drops its queued work.

use super::stream_worker::{Stream, Task};
use crate::base::error::Result;
use std::ffi::c_void;

/// A task body owned by its task.
pub(crate) trait Job: Send + 'static {
    /// Runs on the stream's worker, in stream order.
    fn run(self: Box<Self>);
}

/// # Safety
/// `data` is a `Box<J>` given up with `Box::into_raw`, not used after.
unsafe extern "C" fn run_job<J: Job>(_: *mut c_void, _: usize, data: *mut c_void) {
    // SAFETY: the function's contract.
    unsafe { Box::from_raw(data.cast::<J>()) }.run();
}

/// # Safety
/// As [`run_job`].
unsafe fn drop_job<J: Job>(data: *mut c_void) {
    // SAFETY: the function's contract.
    drop(unsafe { Box::from_raw(data.cast::<J>()) });
}

/// Queues `job` on `stream`. A capturing stream refuses it (the host
/// runtime does not capture built-in tasks), and the job goes.
pub(crate) fn enqueue<J: Job>(stream: &Stream, job: J) -> Result<()> {
    let raw = Box::into_raw(Box::new(job)).cast::<c_void>();
    let queued = stream.enqueue(Task::Owning {
        run: run_job::<J>,
        size: 0,
        data: raw,
        free: drop_job::<J>,
        // Stopped or aborted, it fails as a copy does.
        kernel: false,
    });
    if queued.is_err() {
        // SAFETY: the box made above, which the task never took.
        unsafe { drop_job::<J>(raw) };
    }
    queued
}
