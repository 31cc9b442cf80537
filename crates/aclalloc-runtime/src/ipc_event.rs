//! IPC events on the host runtime (`aclrtIpcGetEventHandle`,
//! `aclrtIpcOpenEventHandle`): an event created with `ACL_EVENT_IPC` keeps
//! its records in three words of a shared page ([`super::sharing_word`]),
//! so every process that opened it records into, waits on and queries the
//! same counters:
//!
//! - word 0 counts the records made by any process (a record takes the
//!   next number when it is queued);
//! - word 1 is the highest record number that has run (the futex word);
//! - word 2 is the pid of the process that made the last record.
//!
//! Record numbers wrap around at 2^32 and are compared as sequence numbers
//! ([`reached`]), so an event recorded for months keeps ordering.
//!
//! A wait for record `n` is over once word 1 reaches `n`, or once the
//! process that made the last record is gone (its queued marker will never
//! run, as a marker a stream drops completes so no waiter waits forever).
//! The page is handed over with the one rendezvous of [`super::sharing`],
//! without a pid whitelist (CANN's IPC events have none).

use super::host::HostRuntime;
use super::sharing::{self, Kind};
use super::sharing_word::SharedPage;
use crate::base::error::{Error, Result};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// `ACL_EVENT_IPC`.
pub(crate) const ACL_EVENT_IPC: u32 = 0x40;

const RECORDED: usize = 0;
const COMPLETED: usize = 1;
const RECORDER: usize = 2;

/// Record number `at` is `n` or later: the numbers wrap around, and fewer
/// than 2^31 records are ever outstanding.
fn reached(at: u32, n: u32) -> bool {
    // The difference read as signed says which side of `n` `at` lies on.
    at.wrapping_sub(n) as i32 >= 0
}

/// The shared counters of an IPC event.
pub(crate) struct IpcCounters {
    page: SharedPage,
}

impl IpcCounters {
    /// The counters of a new IPC event (nothing recorded).
    pub(crate) fn create() -> Result<Self> {
        Ok(IpcCounters {
            page: SharedPage::create(c"aclalloc-ipc-event")?,
        })
    }

    /// The number of a new record, made by this process.
    pub(crate) fn next_record(&self) -> u64 {
        let n = self.page.word(RECORDED).fetch_add(1, Ordering::AcqRel);
        self.page
            .word(RECORDER)
            .store(std::process::id(), Ordering::Release);
        u64::from(n.wrapping_add(1))
    }

    /// The number of the last record, by any process.
    pub(crate) fn last_recorded(&self) -> u64 {
        u64::from(self.page.word(RECORDED).load(Ordering::Acquire))
    }

    /// Record `n` (a number from [`Self::next_record`]) has run, or was
    /// dropped.
    pub(crate) fn complete(&self, n: u64) {
        let n = n as u32;
        // The later of the two in the wrapping order (not `fetch_max`).
        let _ = self.page.word(COMPLETED).fetch_update(
            Ordering::AcqRel,
            Ordering::Acquire,
            |completed| (!reached(completed, n)).then_some(n),
        );
        self.page.wake(COMPLETED);
    }

    /// Every record made so far has run.
    pub(crate) fn is_complete(&self) -> bool {
        let completed = self.page.word(COMPLETED).load(Ordering::Acquire);
        let recorded = self.page.word(RECORDED).load(Ordering::Acquire);
        reached(completed, recorded) || self.recorder_gone()
    }

    /// Waits until record `n` has run (`None`: no limit); false on timeout.
    /// Ends early (true) when the recorder has exited or `give_up()` holds.
    pub(crate) fn wait_for(
        &self,
        n: u64,
        timeout: Option<Duration>,
        give_up: impl Fn() -> bool,
    ) -> bool {
        self.page.wait(
            COMPLETED,
            timeout,
            |completed| reached(completed, n as u32),
            || self.recorder_gone() || give_up(),
        )
    }

    /// The process that made the last record has exited.
    fn recorder_gone(&self) -> bool {
        let pid = self.page.word(RECORDER).load(Ordering::Acquire);
        pid != 0 && pid != std::process::id() && !alive(pid)
    }
}

/// Whether process `pid` still runs (a zombie runs nothing any more).
fn alive(pid: u32) -> bool {
    let Ok(id) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists.
    if unsafe { libc::kill(id, 0) } != 0
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
    {
        return false;
    }
    // The state follows the command name's closing parenthesis.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !matches!(
            stat.rsplit_once(") ")
                .and_then(|(_, rest)| rest.chars().next()),
            Some('Z' | 'X')
        ),
        Err(_) => false,
    }
}

const NOT_IPC: Error = Error::InvalidParam {
    param: "event",
    reason: "It was not created with ACL_EVENT_IPC (aclrtCreateEventExWithFlag)",
};

impl HostRuntime {
    /// `aclrtIpcGetEventHandle`: the handle other processes open `event`
    /// with, an event of this process created with `ACL_EVENT_IPC` (asked
    /// again, the same handle). It names the event until it is destroyed.
    pub fn ipc_event_handle(&self, event: usize) -> Result<u64> {
        let ev = self.event(event)?;
        let counters = ev.ipc().ok_or(NOT_IPC)?;
        if !ev.ipc_owner() {
            return Err(Error::InvalidParam {
                param: "event",
                reason: "It was opened from another process's handle: only the creating process exports it",
            });
        }
        if let Some(handle) = sharing::handle_of(Kind::Event, event) {
            return Ok(handle);
        }
        let fd = counters.page.fd().try_clone().map_err(|_| Error::Failure {
            reason: "The host refused to duplicate a file descriptor",
        })?;
        let device = self.current_device().unwrap_or(0);
        let page = super::sharing_word::PAGE;
        sharing::export(Kind::Event, event, fd, page, 0, device, false).or_else(|e| {
            // Another thread exported it in between: its handle is the one.
            sharing::handle_of(Kind::Event, event).ok_or(e)
        })
    }

    /// `aclrtIpcOpenEventHandle`: an event of this process on the counters
    /// of another process's IPC event, to record, wait on, synchronize,
    /// query and destroy.
    pub fn open_ipc_event(&self, handle: u64) -> Result<usize> {
        let got = sharing::import(Kind::Event, handle, "handle")?;
        let counters = IpcCounters {
            page: SharedPage::map(Arc::new(got.fd))?,
        };
        self.current_context()?;
        self.insert_event(ACL_EVENT_IPC, true, Some((counters, false)))
    }

    /// Ends the export of IPC event `event`, if any: later opens are
    /// refused, processes that opened it keep their event.
    pub(crate) fn unshare_event(&self, event: usize) {
        if let Some(shared) = sharing::handle_of(Kind::Event, event) {
            sharing::withdraw(Kind::Event, shared);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_from_either_side_complete_in_order_and_a_dead_recorder_frees_waiters() {
        let a = IpcCounters::create().unwrap();
        let b = IpcCounters {
            page: SharedPage::map(Arc::clone(a.page.fd())).unwrap(),
        };
        assert!(a.is_complete(), "nothing recorded");
        let n = a.next_record();
        assert_eq!((n, b.last_recorded()), (1, 1));
        assert!(!b.is_complete());
        assert!(!b.wait_for(n, Some(Duration::from_millis(1)), || false));
        a.complete(n);
        assert!(b.wait_for(n, None, || false) && b.is_complete());
        let m = b.next_record();
        assert_eq!(m, 2);
        assert!(!a.is_complete());
        // A record made by a process that is gone will never run.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        child.wait().unwrap();
        a.page.word(RECORDER).store(child.id(), Ordering::Release);
        assert!(a.is_complete());
        assert!(a.wait_for(m, None, || false));
        assert!(alive(std::process::id()));
    }

    #[test]
    fn record_numbers_wrap_around_and_still_order() {
        let c = IpcCounters::create().unwrap();
        // Four billion records later.
        c.page.word(RECORDED).store(u32::MAX - 1, Ordering::Release);
        c.page
            .word(COMPLETED)
            .store(u32::MAX - 1, Ordering::Release);
        assert!(c.is_complete());
        let numbers: Vec<u64> = (0..3).map(|_| c.next_record()).collect();
        assert_eq!(numbers, [u64::from(u32::MAX), 0, 1]);
        c.complete(numbers[0]);
        // The records numbered 0 and 1 come after u32::MAX: not run yet.
        assert!(!c.is_complete());
        assert!(!c.wait_for(1, Some(Duration::from_millis(1)), || false));
        assert!(c.wait_for(numbers[0], None, || false));
        c.complete(1);
        // An earlier number completing late does not move the word back.
        c.complete(0);
        assert!(c.is_complete() && c.wait_for(1, None, || false));
        assert_eq!(c.page.word(COMPLETED).load(Ordering::Acquire), 1);
        assert!(reached(5, u32::MAX - 5) && !reached(u32::MAX - 5, 5));
    }
}
