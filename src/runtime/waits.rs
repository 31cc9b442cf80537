//! Kernels that wait for streams: the wait-for graph that keeps two kernels
//! from waiting for each other.
//!
//! A kernel may call what waits for streams (`aclrtFree` waits for every
//! stream, `aclrtSynchronizeStream` for one). A kernel on stream A waiting
//! for B while a kernel on B waits for A would hang both workers forever.
//! Each wait from a worker thread is recorded here (waiter -> waited-for);
//! a wait that would close a cycle is refused with [`DEADLOCK`] instead,
//! so exactly one of the two kernels gets an error and the other proceeds.
//! A host thread is never waited for, so only workers are recorded, and the
//! lock is taken only by kernels that wait: never on the launch path.

use crate::core::error::{Error, Result};
use parking_lot::Mutex;

/// Why a wait from a kernel is refused.
pub(crate) const DEADLOCK: Error = Error::InvalidParam {
    param: "stream",
    reason: "A kernel on the stream waited for is itself waiting for the calling kernel's stream: the two would wait for each other forever. Free or synchronize from a host thread (or after the kernel) instead",
};

/// Why `aclFinalize`, `aclrtResetDevice` or `aclrtDestroyContext` from a
/// kernel fails: each destroys streams (waiting for their work), and the
/// calling kernel's stream cannot be destroyed from inside it, so the call
/// would return with the runtime half torn down.
pub(crate) const TEARDOWN_IN_KERNEL: Error = Error::Failure {
    reason: "A kernel cannot tear the runtime down (aclFinalize, aclrtResetDevice, aclrtDestroyContext destroy streams, the kernel's own among them). Call it from a host thread after synchronizing",
};

/// Refuses a teardown called from a kernel (see [`TEARDOWN_IN_KERNEL`]).
pub(crate) fn refuse_teardown_in_kernel() -> Result<()> {
    if super::stream_worker::on_any_worker() {
        return Err(TEARDOWN_IN_KERNEL);
    }
    Ok(())
}

/// (waiting stream, stream waited for), one entry per waiting worker.
static WAITING: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

/// A recorded wait; dropping it ends the wait.
pub(crate) struct Waiting(usize);

impl Drop for Waiting {
    fn drop(&mut self) {
        WAITING.lock().retain(|&(w, _)| w != self.0);
    }
}

/// Records that the worker of stream `waiter` waits for stream `target`, or
/// refuses when `target` (through other waits) already waits for `waiter`.
pub(crate) fn begin(waiter: usize, target: usize) -> Result<Waiting> {
    let mut waiting = WAITING.lock();
    let mut current = target;
    // Each worker waits for one stream at a time: the chain is a path.
    for _ in 0..=waiting.len() {
        if current == waiter {
            return Err(DEADLOCK);
        }
        match waiting.iter().find(|&&(w, _)| w == current) {
            Some(&(_, next)) => current = next,
            None => break,
        }
    }
    waiting.push((waiter, target));
    Ok(Waiting(waiter))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_that_closes_a_cycle_is_refused_and_others_are_not() {
        let (a, b, c) = (0x1000_0001, 0x1000_0002, 0x1000_0003);
        let ab = begin(a, b).unwrap();
        let bc = begin(b, c).unwrap();
        assert_eq!(begin(c, a).err(), Some(DEADLOCK), "c -> a -> b -> c");
        drop(bc);
        let ca = begin(c, a).unwrap();
        assert_eq!(begin(b, c).err(), Some(DEADLOCK), "b -> c -> a -> b");
        drop(ab);
        drop(ca);
        assert!(WAITING.lock().iter().all(|&(w, _)| ![a, b, c].contains(&w)));
    }
}
