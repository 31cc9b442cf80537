//! Stream control: `aclrtStreamAbort`, `aclrtStreamStop`, and the
//! stream-ordered word operations `aclrtValueWrite` / `aclrtValueWait`.
//!
//! A value write is a task that stores a 64-bit word when the stream
//! reaches it; a value wait is a task that holds its stream until the word
//! satisfies the wait's comparison. Both are kernels of the stream's worker
//! with their arguments packed in the task itself, so a dropped task leaks
//! nothing.

use super::host::HostRuntime;
use super::stream_worker::{current_task_cancelled, KernelFn, Task};
use crate::base::error::{Error, Result};
use crate::base::sync::{AtomicU64, Ordering};
use crate::registry::StreamKey;
use std::ffi::c_void;
use std::time::Duration;

/// `ACL_STREAM_WAIT_VALUE_GEQ`: the word is at least the value.
pub(crate) const WAIT_GEQ: u32 = 0;
/// `ACL_STREAM_WAIT_VALUE_EQ`: the word equals the value.
pub(crate) const WAIT_EQ: u32 = 1;
/// `ACL_STREAM_WAIT_VALUE_AND`: the word and the value share a set bit.
pub(crate) const WAIT_AND: u32 = 2;
/// `ACL_STREAM_WAIT_VALUE_NOR`: some bit is clear in both.
pub(crate) const WAIT_NOR: u32 = 3;

/// How long a value wait sleeps between looks at its word.
const WAIT_POLL: Duration = Duration::from_micros(50);

/// Whether `word` satisfies the wait `flag` for `value`.
pub(crate) fn value_satisfies(word: u64, value: u64, flag: u32) -> bool {
    match flag {
        WAIT_GEQ => word >= value,
        WAIT_EQ => word == value,
        WAIT_AND => word & value != 0,
        _ => !(word | value) != 0,
    }
}

/// The word at `workspace`; the task's `size` carries the value.
///
/// # Safety
/// `workspace` is an aligned, live 8-byte word (checked at enqueue).
unsafe extern "C" fn write_word(workspace: *mut c_void, value: usize, _: *mut c_void) {
    // SAFETY: the function's contract; others read the word atomically.
    let word = unsafe { &*workspace.cast::<AtomicU64>() };
    word.store(value as u64, Ordering::SeqCst);
}

/// Holds the stream until the word at `workspace` satisfies the wait whose
/// flag is `flag` (carried as the pointer's value) for `value`.
///
/// # Safety
/// As [`write_word`].
unsafe extern "C" fn wait_word(workspace: *mut c_void, value: usize, flag: *mut c_void) {
    // SAFETY: the function's contract.
    let word = unsafe { &*workspace.cast::<AtomicU64>() };
    // A stopped or aborted stream ends the wait (the task then fails).
    while !value_satisfies(
        word.load(Ordering::SeqCst),
        value as u64,
        flag as usize as u32,
    ) && !current_task_cancelled()
    {
        std::thread::sleep(WAIT_POLL);
    }
}

impl HostRuntime {
    fn stream_word(&self, addr: *mut c_void) -> Result<()> {
        if addr.is_null() {
            return Err(Error::NullPointer { param: "devAddr" });
        }
        if addr as usize % 8 != 0 {
            return Err(Error::InvalidParam {
                param: "devAddr",
                reason: "It must be aligned to 8 bytes (the word is a uint64_t)",
            });
        }
        self.check_device_range(addr as *const u8, 8, "devAddr", true)
    }

    fn enqueue_word_task(
        &self,
        stream: Option<StreamKey>,
        kernel: KernelFn,
        addr: *mut c_void,
        value: u64,
        flag: u32,
    ) -> Result<()> {
        let (_, stream) = self.resolve_stream(stream)?;
        stream.enqueue(Task::Kernel {
            kernel,
            workspace: addr,
            size: value as usize,
            user_data: flag as usize as *mut c_void,
            release: false,
        })
    }

    /// `aclrtValueWrite`: stores `value` in the device word `addr` when
    /// `stream` reaches it. `flag` is reserved and must be 0.
    pub fn value_write(
        &self,
        addr: *mut c_void,
        value: u64,
        flag: u32,
        stream: Option<StreamKey>,
    ) -> Result<()> {
        if flag != 0 {
            return Err(Error::InvalidParam {
                param: "flag",
                reason: "It is reserved and must be 0",
            });
        }
        self.stream_word(addr)?;
        self.enqueue_word_task(stream, write_word, addr, value, 0)
    }

    /// `aclrtValueWait`: `stream` runs nothing queued after this call until
    /// the device word `addr` satisfies `flag` (`ACL_STREAM_WAIT_VALUE_*`)
    /// for `value`.
    pub fn value_wait(
        &self,
        addr: *mut c_void,
        value: u64,
        flag: u32,
        stream: Option<StreamKey>,
    ) -> Result<()> {
        if flag > WAIT_NOR {
            return Err(Error::InvalidParam {
                param: "flag",
                reason: "It must be ACL_STREAM_WAIT_VALUE_GEQ, _EQ, _AND or _NOR",
            });
        }
        self.stream_word(addr)?;
        self.enqueue_word_task(stream, wait_word, addr, value, flag)
    }

    fn explicit_stream(&self, stream: Option<StreamKey>) -> Result<StreamKey> {
        stream.ok_or(Error::InvalidParam {
            param: "stream",
            reason: "It must be a stream from aclrtCreateStream: the default stream (NULL) is not accepted",
        })
    }

    /// `aclrtStreamAbort`: the task running on `stream` (or, when the
    /// worker is between tasks, the next to start) is interrupted and every
    /// other queued task is dropped; see [`Stream::abort`] for what each
    /// reports. Later launches run as usual. Returns how many queued tasks
    /// were dropped.
    ///
    /// [`Stream::abort`]: super::stream_worker::Stream::abort
    pub fn abort_stream(&self, stream: Option<StreamKey>) -> Result<usize> {
        let s = self.controlled_stream(stream, "abort")?;
        Ok(s.abort())
    }

    /// `aclrtStreamStop`: the task running on `stream` (or, when the worker
    /// is between tasks, the next to start) is interrupted and fails with
    /// `ACL_ERROR_RT_INTERNAL_ERROR`, which the next synchronize reports;
    /// queued work is kept and runs after it. See [`Stream::stop`].
    ///
    /// [`Stream::stop`]: super::stream_worker::Stream::stop
    pub fn stop_stream(&self, stream: Option<StreamKey>) -> Result<()> {
        self.controlled_stream(stream, "stop")?.stop();
        Ok(())
    }

    fn controlled_stream(
        &self,
        stream: Option<StreamKey>,
        what: &'static str,
    ) -> Result<std::sync::Arc<super::stream_worker::Stream>> {
        let key = self.explicit_stream(stream)?;
        let (_, s) = self.resolve_stream(Some(key))?;
        if s.is_current_worker() {
            return Err(Error::InvalidParam {
                param: "stream",
                reason: if what == "abort" {
                    "A kernel cannot abort the stream it runs on"
                } else {
                    "A kernel cannot stop the stream it runs on"
                },
            });
        }
        s.check_alive()?;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::tests::runtime;

    #[test]
    fn wait_flags_compare_as_cann_documents() {
        assert!(value_satisfies(5, 5, WAIT_GEQ) && value_satisfies(6, 5, WAIT_GEQ));
        assert!(!value_satisfies(4, 5, WAIT_GEQ));
        assert!(value_satisfies(5, 5, WAIT_EQ) && !value_satisfies(6, 5, WAIT_EQ));
        assert!(
            value_satisfies(0b110, 0b010, WAIT_AND) && !value_satisfies(0b100, 0b010, WAIT_AND)
        );
        assert!(
            value_satisfies(0b01, 0b10, WAIT_NOR),
            "bit 2 is clear in both"
        );
        assert!(!value_satisfies(!0, 0, WAIT_NOR));
    }

    #[test]
    fn a_value_wait_holds_its_stream_until_another_stream_writes_the_word() {
        let rt = runtime(1, 1 << 20);
        rt.set_device(0).unwrap();
        let (a, b) = (
            rt.create_stream(0, 0).unwrap(),
            rt.create_stream(0, 0).unwrap(),
        );
        let word = rt.malloc(8).unwrap().as_ptr().cast::<c_void>();
        // SAFETY: 8 bytes of live device memory, host memory on the host runtime.
        let read = || unsafe { &*word.cast::<AtomicU64>() }.load(Ordering::SeqCst);
        rt.value_write(word, 0, 0, Some(a)).unwrap();
        rt.synchronize_stream(Some(a)).unwrap();
        rt.value_wait(word, 7, WAIT_EQ, Some(b)).unwrap();
        rt.value_write(word, 1, 0, Some(b)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(read(), 0, "b's write is behind its wait");
        rt.value_write(word, 7, 0, Some(a)).unwrap();
        rt.synchronize_stream(Some(b)).unwrap();
        assert_eq!(read(), 1);
        assert!(
            rt.value_write(word, 1, 1, Some(a)).is_err(),
            "flag reserved"
        );
        assert!(rt.value_wait(word, 1, 4, Some(a)).is_err(), "unknown flag");
        assert!(
            rt.value_wait(word.wrapping_byte_add(4), 1, 0, Some(a))
                .is_err(),
            "unaligned"
        );
        assert!(rt.value_write(std::ptr::null_mut(), 1, 0, Some(a)).is_err());
        rt.free(word.cast()).unwrap();
        assert!(rt.value_write(word, 1, 0, Some(a)).is_err(), "freed memory");
    }

    #[test]
    fn abort_drops_queued_work_and_releases_its_waiters() {
        let rt = runtime(1, 1 << 20);
        rt.set_device(0).unwrap();
        let (a, b) = (
            rt.create_stream(0, 0).unwrap(),
            rt.create_stream(0, 0).unwrap(),
        );
        let word = rt.malloc(8).unwrap().as_ptr().cast::<c_void>();
        // SAFETY: as above.
        let read = || unsafe { &*word.cast::<AtomicU64>() }.load(Ordering::SeqCst);
        rt.value_write(word, 0, 0, Some(a)).unwrap();
        rt.synchronize_stream(Some(a)).unwrap();
        // a holds on a word nobody writes; what follows it must not run.
        rt.value_wait(word, 1, WAIT_EQ, Some(b)).unwrap();
        let ev = rt.create_event(0, false).unwrap();
        rt.value_write(word, 9, 0, Some(b)).unwrap();
        rt.record_event(ev, Some(b)).unwrap();
        rt.stream_wait_event(Some(a), ev).unwrap();
        let (_, stream_b) = rt.resolve_stream(Some(b)).unwrap();
        while stream_b.queued() > 2 {
            std::thread::yield_now();
        }
        // The wait is running: it is interrupted (it ends, and fails), the
        // two tasks behind it are dropped.
        assert_eq!(rt.abort_stream(Some(b)).unwrap(), 2);
        rt.synchronize_stream(Some(a)).unwrap();
        assert_eq!(
            rt.synchronize_stream(Some(b)),
            Err(Error::TaskFailed {
                code: crate::base::error::ACL_ERROR_RT_VECTOR_CORE_EXCEPTION
            }),
            "the interrupted wait is a kernel task"
        );
        assert_eq!(read(), 0, "the dropped write never ran");
        rt.value_write(word, 1, 0, Some(b)).unwrap();
        rt.synchronize_stream(Some(b)).unwrap();
        assert_eq!(read(), 1, "later launches run");
        assert!(rt.abort_stream(None).is_err(), "not the default stream");
        assert!(rt.stop_stream(None).is_err());
        rt.stop_stream(Some(b)).unwrap();
        rt.synchronize_stream(Some(b))
            .expect("stopping an idle stream fails nothing");
        rt.destroy_stream(b, false).unwrap();
        assert!(rt.abort_stream(Some(b)).is_err(), "destroyed");
        rt.free(word.cast()).unwrap();
    }
}

#[cfg(test)]
mod failure_tests {
    use crate::base::error::Error;
    use crate::host::tests::runtime;
    use crate::stream_worker::{fail_current_task, KernelFn, Task};
    use std::ffi::c_void;
    use std::sync::atomic::{AtomicU32, Ordering};

    unsafe extern "C" fn add_one(_: *mut c_void, _: usize, data: *mut c_void) {
        // SAFETY: the test passes a counter that outlives the stream's work.
        unsafe { &*(data as *const AtomicU32) }.fetch_add(1, Ordering::SeqCst);
    }
    unsafe extern "C" fn fail(_: *mut c_void, _: usize, _: *mut c_void) {
        fail_current_task(crate::base::error::ACL_ERROR_RT_VECTOR_CORE_EXCEPTION).unwrap();
    }

    fn kernel(f: KernelFn, data: *const AtomicU32) -> Task {
        Task::Kernel {
            kernel: f,
            workspace: std::ptr::null_mut(),
            size: 0,
            user_data: data as *mut c_void,
            release: false,
        }
    }

    #[test]
    fn a_failed_task_is_reported_once_and_stop_on_failure_drops_what_follows() {
        let rt = runtime(1, 1 << 20);
        rt.set_device(0).unwrap();
        let a = rt.create_stream(0, 0).unwrap();
        let (_, s) = rt.resolve_stream(Some(a)).unwrap();
        let count = AtomicU32::new(0);
        for stop in [false, true] {
            count.store(0, Ordering::SeqCst);
            rt.set_stream_failure_mode(Some(a), u64::from(stop))
                .unwrap();
            s.enqueue(kernel(add_one, &count)).unwrap();
            s.enqueue(kernel(fail, &count)).unwrap();
            s.enqueue(kernel(add_one, &count)).unwrap();
            assert_eq!(
                rt.synchronize_stream(Some(a)),
                Err(Error::TaskFailed {
                    code: crate::base::error::ACL_ERROR_RT_VECTOR_CORE_EXCEPTION
                })
            );
            assert_eq!(count.load(Ordering::SeqCst), if stop { 1 } else { 2 });
            rt.synchronize_stream(Some(a)).unwrap();
        }
        assert!(
            fail_current_task(crate::base::error::ACL_ERROR_RT_VECTOR_CORE_EXCEPTION).is_err(),
            "not inside a task"
        );
        assert!(fail_current_task(0).is_err());
    }
}

#[cfg(test)]
mod interrupt_tests {
    use crate::base::error::Error;
    use crate::host::tests::runtime;
    use crate::host::HostRuntime;
    use crate::registry::StreamKey;
    use crate::stream_worker::{current_task_cancelled, KernelFn, Stream, Task};
    use std::ffi::c_void;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    /// Counters a test's kernels share: started, cancelled seen, finished.
    #[derive(Default)]
    struct Seen {
        started: AtomicU32,
        cancelled: AtomicU32,
        finished: AtomicU32,
    }

    /// Runs until its stream is stopped or aborted, as a long kernel that
    /// polls `aclallocCurrentTaskCancelled`.
    unsafe extern "C" fn until_cancelled(_: *mut c_void, _: usize, seen: *mut c_void) {
        // SAFETY: the tests pass a `Seen` that outlives the stream's work.
        let seen = unsafe { &*(seen as *const Seen) };
        seen.started.fetch_add(1, Ordering::SeqCst);
        while !current_task_cancelled() {
            std::thread::yield_now();
        }
        seen.cancelled.fetch_add(1, Ordering::SeqCst);
    }

    unsafe extern "C" fn finish(_: *mut c_void, _: usize, seen: *mut c_void) {
        // SAFETY: as above.
        let seen = unsafe { &*(seen as *const Seen) };
        assert!(!current_task_cancelled());
        seen.finished.fetch_add(1, Ordering::SeqCst);
    }

    fn kernel(f: super::KernelFn, seen: &Seen) -> Task {
        Task::Kernel {
            kernel: f,
            workspace: std::ptr::null_mut(),
            size: 0,
            user_data: seen as *const Seen as *mut c_void,
            release: false,
        }
    }

    /// A stream of a fresh runtime whose first task, `until_cancelled`,
    /// has started, with `then` queued behind it.
    fn running(seen: &Seen, then: &[KernelFn]) -> (HostRuntime, StreamKey, Arc<Stream>) {
        let rt = runtime(1, 1 << 20);
        rt.set_device(0).unwrap();
        let a = rt.create_stream(0, 0).unwrap();
        let (_, s) = rt.resolve_stream(Some(a)).unwrap();
        s.enqueue(kernel(until_cancelled, seen)).unwrap();
        for f in then {
            s.enqueue(kernel(*f, seen)).unwrap();
        }
        while seen.started.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        (rt, a, s)
    }

    /// A synchronize (`sync`) waiting behind a running kernel when the
    /// stream is aborted returns ACL_ERROR_RT_STREAM_ABORT; the next one
    /// reports the killed kernel, and the one after that succeeds.
    fn overtaken_by_an_abort(sync: impl Fn(&HostRuntime, StreamKey) -> Result<(), Error> + Sync) {
        let seen = Seen::default();
        let (rt, a, s) = running(&seen, &[]);
        std::thread::scope(|scope| {
            let waiting = scope.spawn(|| sync(&rt, a));
            // The synchronize's marker is queued behind the running kernel.
            while s.queued() == 0 {
                std::thread::yield_now();
            }
            rt.abort_stream(Some(a)).unwrap();
            assert_eq!(
                waiting.join().unwrap(),
                Err(Error::TaskFailed {
                    code: crate::base::error::ACL_ERROR_RT_STREAM_ABORT
                })
            );
        });
        assert_eq!(
            sync(&rt, a),
            Err(Error::TaskFailed {
                code: crate::base::error::ACL_ERROR_RT_VECTOR_CORE_EXCEPTION
            }),
            "the killed kernel is reported by the next synchronize"
        );
        sync(&rt, a).unwrap();
    }

    #[test]
    fn stop_fails_the_running_task_once_and_keeps_queued_work() {
        let seen = Seen::default();
        let (rt, a, s) = running(&seen, &[finish]);
        rt.stop_stream(Some(a)).unwrap();
        assert_eq!(
            rt.synchronize_stream(Some(a)),
            Err(Error::TaskFailed {
                code: crate::base::error::ACL_ERROR_RT_INTERNAL_ERROR
            })
        );
        assert_eq!(seen.cancelled.load(Ordering::SeqCst), 1);
        assert_eq!(seen.finished.load(Ordering::SeqCst), 1, "queued work ran");
        rt.synchronize_stream(Some(a)).expect("reported once");
        s.enqueue(kernel(finish, &seen)).unwrap();
        rt.synchronize_stream(Some(a)).unwrap();
        assert_eq!(
            seen.finished.load(Ordering::SeqCst),
            2,
            "later launches run"
        );
        assert!(!current_task_cancelled(), "outside a task");
    }

    #[test]
    fn abort_fails_the_running_kernel_and_drops_the_rest() {
        let seen = Seen::default();
        let (rt, a, s) = running(&seen, &[finish]);
        assert_eq!(rt.abort_stream(Some(a)).unwrap(), 1);
        assert_eq!(
            rt.synchronize_stream(Some(a)),
            Err(Error::TaskFailed {
                code: crate::base::error::ACL_ERROR_RT_VECTOR_CORE_EXCEPTION
            })
        );
        assert_eq!(seen.cancelled.load(Ordering::SeqCst), 1);
        assert_eq!(seen.finished.load(Ordering::SeqCst), 0, "dropped");
        rt.synchronize_stream(Some(a)).unwrap();
        s.enqueue(kernel(finish, &seen)).unwrap();
        rt.synchronize_stream(Some(a)).unwrap();
        assert_eq!(
            seen.finished.load(Ordering::SeqCst),
            1,
            "later launches run"
        );
    }

    #[test]
    fn a_synchronize_overtaken_by_an_abort_says_so() {
        overtaken_by_an_abort(|rt, a| rt.synchronize_stream(Some(a)));
    }

    #[test]
    fn a_synchronize_with_timeout_overtaken_by_an_abort_says_so() {
        overtaken_by_an_abort(|rt, a| rt.synchronize_stream_timeout(Some(a), 60_000));
    }
}
