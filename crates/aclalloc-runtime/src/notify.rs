//! CANN's notifies on the host runtime: a word of shared memory that a
//! stream sets (`aclrtRecordNotify`) and another stream waits for and clears
//! (`aclrtWaitAndResetNotify`), each in its stream's order, as a host
//! function task on the stream's worker. The word is word 0 of a shared
//! page ([`super::sharing_word`]), so a notify exported by key
//! ([`super::sharing`]) is the same word in the importing process.

use super::host::HostRuntime;
use super::sharing::{self, Kind};
use super::sharing_word::{SharedPage, PAGE};
use super::stream_worker::{current_task_cancelled, Task};
use crate::base::error::{Error, Result};
use crate::base::handles::{tags, TAG_SHIFT};
use crate::registry::StreamKey;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::c_void;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Handles are the notify tag in the top 16 bits and a number never reused.
const NOTIFY_TAG: usize = (tags::NOTIFY as usize) << TAG_SHIFT;
/// Export flag of notifies: anyone may import (`..._DISABLE_PID_VALIDATION`).
const NO_PID_CHECK: u64 = 0x2;

/// One notify: word 0 of a shared page.
struct Notify {
    page: SharedPage,
    id: u32,
}

impl Notify {
    fn map(fd: Arc<OwnedFd>, id: u32) -> Result<Self> {
        Ok(Notify {
            page: SharedPage::map(fd)?,
            id,
        })
    }

    fn record(&self) {
        self.page.word(0).store(1, Ordering::Release);
        self.page.wake(0);
    }

    /// Waits for the word to be set and clears it; false on timeout. A
    /// wait running as a stream's task that `aclrtStreamStop`/`Abort`
    /// interrupted gives up, leaving the word as it is: nothing else would
    /// end it when no record comes.
    fn wait_and_reset(&self, timeout: Option<Duration>) -> bool {
        let word = self.page.word(0);
        let taken = |_| {
            word.compare_exchange(1, 0, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        };
        self.page.wait(0, timeout, taken, current_task_cancelled)
    }
}

static NOTIFIES: Mutex<Option<HashMap<usize, Arc<Notify>>>> = Mutex::new(None);
static NEXT: AtomicUsize = AtomicUsize::new(1);

const NOT_A_NOTIFY: Error = Error::InvalidParam {
    param: "notify",
    reason: "It is not a live notify (it was not created by aclrtCreateNotify or aclrtNotifyImportByKey, or it was destroyed)",
};

fn insert(notify: Notify) -> usize {
    let handle = NOTIFY_TAG | NEXT.fetch_add(1, Ordering::Relaxed);
    NOTIFIES
        .lock()
        .get_or_insert_with(HashMap::new)
        .insert(handle, Arc::new(notify));
    handle
}

fn get(handle: usize) -> Result<Arc<Notify>> {
    let map = NOTIFIES.lock();
    map.as_ref()
        .and_then(|m| m.get(&handle))
        .cloned()
        .ok_or(NOT_A_NOTIFY)
}

unsafe extern "C" fn record_task(_: *mut c_void, _: usize, data: *mut c_void) {
    // SAFETY: the count `record_notify` made for this task, taken once.
    let notify = unsafe { Arc::from_raw(data.cast_const().cast::<Notify>()) };
    notify.record();
}

/// A record task dropped before it ran: its count of the notify goes.
///
/// # Safety
/// `data` is the count `record_notify` made, not taken back by `record_task`.
unsafe fn drop_record(data: *mut c_void) {
    // SAFETY: the function's contract.
    drop(unsafe { Arc::from_raw(data.cast_const().cast::<Notify>()) });
}

struct Waiting {
    notify: Arc<Notify>,
    timeout: Option<Duration>,
}

unsafe extern "C" fn wait_task(_: *mut c_void, _: usize, data: *mut c_void) {
    // SAFETY: the box `wait_notify` made for this task, taken once.
    let waiting = unsafe { Box::from_raw(data.cast::<Waiting>()) };
    // On a timeout the stream goes on, as after a failed task.
    waiting.notify.wait_and_reset(waiting.timeout);
}

/// A wait task dropped before it ran: its box, and the count it holds, go.
///
/// # Safety
/// `data` is the box `wait_notify` made, not taken back by `wait_task`.
unsafe fn drop_waiting(data: *mut c_void) {
    // SAFETY: the function's contract.
    drop(unsafe { Box::from_raw(data.cast::<Waiting>()) });
}

impl HostRuntime {
    /// `aclrtCreateNotify`: `flag` `ACL_NOTIFY_DEFAULT` or
    /// `ACL_NOTIFY_DEVICE_USE_ONLY`, in the current context.
    pub fn create_notify(&self, flag: u64) -> Result<usize> {
        if flag > 1 {
            return Err(Error::InvalidParam {
                param: "flag",
                reason: "It must be ACL_NOTIFY_DEFAULT or ACL_NOTIFY_DEVICE_USE_ONLY",
            });
        }
        self.current_device()?;
        let fd = Arc::new(sharing::memfd(c"aclalloc-notify", PAGE)?);
        let id = NEXT.load(Ordering::Relaxed) as u32;
        Ok(insert(Notify::map(fd, id)?))
    }

    /// `aclrtDestroyNotify`: the handle dies at once; queued work keeps it.
    pub fn destroy_notify(&self, handle: usize) -> Result<()> {
        let removed = NOTIFIES.lock().as_mut().and_then(|m| m.remove(&handle));
        removed.map(drop).ok_or(NOT_A_NOTIFY)?;
        if let Some(shared) = sharing::handle_of(Kind::Notify, handle) {
            sharing::withdraw(Kind::Notify, shared);
        }
        Ok(())
    }

    /// `aclrtRecordNotify`: sets the notify when `stream` reaches this point.
    pub fn record_notify(&self, handle: usize, stream: Option<StreamKey>) -> Result<()> {
        let notify = get(handle)?;
        let (_, s) = self.resolve_stream(stream)?;
        let raw = Arc::into_raw(notify);
        let queued = s.enqueue(Task::Owning {
            run: record_task,
            size: 0,
            data: raw.cast_mut().cast(),
            free: drop_record,
            kernel: false,
        });
        if queued.is_err() {
            // SAFETY: the count made above, which the task never took.
            drop(unsafe { Arc::from_raw(raw) });
        }
        queued
    }

    /// `aclrtWaitAndResetNotify`: `stream` runs nothing queued after this
    /// until the notify is set, then clears it; `timeout_s` seconds at most
    /// (0: no limit).
    pub fn wait_notify(
        &self,
        handle: usize,
        stream: Option<StreamKey>,
        timeout_s: u32,
    ) -> Result<()> {
        let notify = get(handle)?;
        let (_, s) = self.resolve_stream(stream)?;
        let timeout = (timeout_s > 0).then(|| Duration::from_secs(timeout_s.into()));
        let raw = Box::into_raw(Box::new(Waiting { notify, timeout }));
        let queued = s.enqueue(Task::Owning {
            run: wait_task,
            size: 0,
            data: raw.cast(),
            free: drop_waiting,
            kernel: false,
        });
        if queued.is_err() {
            // SAFETY: the box made above, which the task never took.
            drop(unsafe { Box::from_raw(raw) });
        }
        queued
    }

    /// `aclrtNotifyBatchReset`: clears every notify of `handles` at once
    /// (each one is checked first: a dead one resets none).
    pub fn reset_notifies(&self, handles: &[usize]) -> Result<()> {
        if handles.is_empty() {
            return Err(Error::InvalidParam {
                param: "num",
                reason: "It must be at least 1",
            });
        }
        let notifies = handles
            .iter()
            .map(|&h| get(h))
            .collect::<Result<Vec<_>>>()?;
        for n in notifies {
            n.page.word(0).store(0, Ordering::Release);
        }
        Ok(())
    }

    /// `aclrtGetNotifyId`.
    pub fn notify_id(&self, handle: usize) -> Result<u32> {
        Ok(get(handle)?.id)
    }

    /// `aclrtNotifyGetExportKey`: `flags` 0 or `..._DISABLE_PID_VALIDATION` (0x2).
    pub fn export_notify(&self, handle: usize, flags: u64) -> Result<String> {
        let notify = get(handle)?;
        if flags != 0 && flags != NO_PID_CHECK {
            return Err(Error::InvalidParam {
                param: "flags",
                reason: "It must be ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT or ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION",
            });
        }
        if let Some(shared) = sharing::handle_of(Kind::Notify, handle) {
            return Ok(sharing::key_of(shared));
        }
        let fd = notify.page.fd().try_clone().map_err(|_| Error::Failure {
            reason: "The host refused to duplicate a file descriptor",
        })?;
        let device = self.current_device().unwrap_or(0);
        let shared = sharing::export(Kind::Notify, handle, fd, PAGE, 0, device, flags == 0)?;
        Ok(sharing::key_of(shared))
    }

    /// `aclrtNotifySetImportPid`.
    pub fn allow_notify_import(&self, handle: usize, pids: &[i32]) -> Result<()> {
        get(handle)?;
        if pids.is_empty() || pids.iter().any(|&p| p <= 0) {
            return Err(Error::InvalidParam {
                param: "pid",
                reason: "It must hold at least one pid, each greater than 0",
            });
        }
        let shared = sharing::handle_of(Kind::Notify, handle).ok_or(Error::InvalidParam {
            param: "notify",
            reason: "It is not exported: call aclrtNotifyGetExportKey first",
        })?;
        sharing::allow(Kind::Notify, shared, pids, "notify")
    }

    /// `aclrtNotifyImportByKey`: a notify of this process on the same word.
    pub fn import_notify(&self, key: &str, flags: u64) -> Result<usize> {
        if flags != 0 && flags != 0x2 {
            return Err(Error::InvalidParam {
                param: "flags",
                reason: "It must be ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT or ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS",
            });
        }
        let shared = sharing::handle_of_key(key).ok_or(Error::InvalidParam {
            param: "key",
            reason: "It is not a key returned by aclrtNotifyGetExportKey",
        })?;
        let got = sharing::import(Kind::Notify, shared, "key")?;
        let id = NEXT.load(Ordering::Relaxed) as u32;
        Ok(insert(Notify::map(Arc::new(got.fd), id)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream_worker::fail_current_task;
    use std::sync::atomic::AtomicBool;

    unsafe extern "C" fn gated(_: *mut c_void, _: usize, gate: *mut c_void) {
        // SAFETY: the test passes an AtomicBool that outlives the stream's work.
        let gate = unsafe { &*(gate as *const AtomicBool) };
        while gate.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
    }

    unsafe extern "C" fn fail(_: *mut c_void, _: usize, _: *mut c_void) {
        fail_current_task(crate::base::error::ACL_ERROR_RT_VECTOR_CORE_EXCEPTION).unwrap();
    }

    fn kernel(kernel: crate::stream_worker::KernelFn, data: *const c_void) -> Task {
        Task::Kernel {
            kernel,
            workspace: std::ptr::null_mut(),
            size: 0,
            user_data: data.cast_mut(),
            release: false,
        }
    }

    #[test]
    fn record_and_wait_tasks_dropped_before_they_run_release_the_notify() {
        let rt = crate::host::tests::runtime(1, 1 << 20);
        rt.set_device(0).unwrap();
        let stream = rt.create_stream(0, 0).unwrap();
        let (_, s) = rt.resolve_stream(Some(stream)).unwrap();
        let queue_both = |h: usize| {
            rt.record_notify(h, Some(stream)).unwrap();
            rt.wait_notify(h, Some(stream), 0).unwrap();
        };

        // Dropped by an abort behind a running kernel.
        let h = rt.create_notify(0).unwrap();
        let weak = Arc::downgrade(&get(h).unwrap());
        let gate = AtomicBool::new(true);
        s.enqueue(kernel(gated, (&gate as *const AtomicBool).cast()))
            .unwrap();
        while s.queued() > 0 {
            std::thread::yield_now();
        }
        queue_both(h);
        assert_eq!(rt.abort_stream(Some(stream)).unwrap(), 2);
        gate.store(false, Ordering::SeqCst);
        assert!(rt.synchronize_stream(Some(stream)).is_err());
        rt.synchronize_stream(Some(stream)).unwrap();
        rt.destroy_notify(h).unwrap();
        assert!(
            weak.upgrade().is_none(),
            "the aborted tasks freed the notify"
        );

        // Dropped behind a failure in stop-on-failure mode.
        rt.set_stream_failure_mode(Some(stream), 1).unwrap();
        let h = rt.create_notify(0).unwrap();
        let weak = Arc::downgrade(&get(h).unwrap());
        s.enqueue(kernel(fail, std::ptr::null())).unwrap();
        queue_both(h);
        assert!(rt.synchronize_stream(Some(stream)).is_err());
        rt.destroy_notify(h).unwrap();
        assert!(
            weak.upgrade().is_none(),
            "the dropped tasks freed the notify"
        );

        // Run: the tasks take their counts back themselves.
        let h = rt.create_notify(0).unwrap();
        let weak = Arc::downgrade(&get(h).unwrap());
        queue_both(h);
        rt.synchronize_stream(Some(stream)).unwrap();
        rt.destroy_notify(h).unwrap();
        assert!(weak.upgrade().is_none());
        rt.destroy_stream(stream, false).unwrap();
    }

    #[test]
    fn an_abort_or_stop_ends_a_running_wait_that_no_record_would_end() {
        let rt = crate::host::tests::runtime(1, 1 << 20);
        rt.set_device(0).unwrap();
        let stream = rt.create_stream(0, 0).unwrap();
        let (_, s) = rt.resolve_stream(Some(stream)).unwrap();
        let h = rt.create_notify(0).unwrap();
        for abort in [true, false] {
            rt.wait_notify(h, Some(stream), 0).unwrap();
            while !s.is_running() {
                std::thread::yield_now();
            }
            if abort {
                rt.abort_stream(Some(stream)).unwrap();
            } else {
                rt.stop_stream(Some(stream)).unwrap();
            }
            // Before, the wait went on for ever and so did this synchronize.
            // An interrupted wait fails as a wait, not as a kernel.
            assert_eq!(
                rt.synchronize_stream(Some(stream)),
                Err(crate::base::error::Error::TaskFailed {
                    code: crate::base::error::ACL_ERROR_RT_INTERNAL_ERROR
                }),
                "the interrupted wait fails"
            );
            rt.synchronize_stream(Some(stream)).unwrap();
        }
        rt.destroy_notify(h).unwrap();
        rt.destroy_stream(stream, false).unwrap();
    }

    #[test]
    fn a_record_releases_one_wait_and_a_timeout_gives_up() {
        let fd = Arc::new(sharing::memfd(c"t", PAGE).unwrap());
        let a = Notify::map(Arc::clone(&fd), 1).unwrap();
        let b = Notify::map(fd, 2).unwrap();
        assert!(!b.wait_and_reset(Some(Duration::from_millis(1))));
        a.record();
        assert!(b.wait_and_reset(None), "another mapping sees the record");
        assert!(
            !a.wait_and_reset(Some(Duration::from_millis(1))),
            "reset by the wait"
        );
        assert!(get(NOTIFY_TAG | 999_999).is_err());
    }

    #[test]
    fn a_batch_reset_clears_every_notify_or_none() {
        let rt = crate::host::tests::runtime(1, 1 << 20);
        rt.set_device(0).unwrap();
        let (a, b) = (rt.create_notify(0).unwrap(), rt.create_notify(0).unwrap());
        for h in [a, b] {
            get(h).unwrap().record();
        }
        assert!(rt.reset_notifies(&[a, NOTIFY_TAG | 999_999]).is_err());
        assert!(
            get(a)
                .unwrap()
                .wait_and_reset(Some(Duration::from_millis(1))),
            "a dead handle in the batch resets none"
        );
        get(a).unwrap().record();
        rt.reset_notifies(&[a, b]).unwrap();
        for h in [a, b] {
            assert!(!get(h)
                .unwrap()
                .wait_and_reset(Some(Duration::from_millis(1))));
        }
        assert!(rt.reset_notifies(&[]).is_err());
    }
}
