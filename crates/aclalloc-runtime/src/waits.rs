//! Kernels that wait for streams: the wait-for graph that keeps two kernels
//! from waiting for each other.
//!
//! A kernel on stream A waiting for B (`aclrtFree`, a synchronize) while a
//! kernel on B waits for A would hang both workers. Each wait from a worker
//! is recorded (waiter -> waited-for); one that would close a cycle is
//! refused with [`DEADLOCK`], so the other kernel proceeds. Only kernels
//! that wait take the lock: never the launch path.

use crate::base::error::{Error, Result};
use parking_lot::Mutex;

/// Why a wait from a kernel is refused.
pub(crate) const DEADLOCK: Error = Error::InvalidParam {
    param: "stream",
    reason: "A kernel on the stream waited for is itself waiting for the calling kernel's stream: the two would wait for each other forever. Free or synchronize from a host thread (or after the kernel) instead",
};

/// Why a teardown from a kernel fails: it destroys streams, the kernel's own
/// among them, which cannot be destroyed from inside it.
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
