//! Events: markers in a stream's queue. Recording enqueues a marker that
//! completes when the stream's worker reaches it (or drops it, so no waiter
//! waits forever); a stream waiting on an event enqueues a task that blocks
//! its worker until the marker recorded last before the wait has completed.
//! Handles given to C (tag `0xACA8`) are looked up in a live-handle table.
//!
//! A blocked wait joins the kernels' wait-for graph (`waits`) as "this
//! stream waits for the stream of the record": a wait that would close a
//! cycle (the record sits behind a kernel that waits for this stream) is
//! reported on stderr and given up instead of hanging both streams. Records
//! and waits are kept in [`crate::registry::order`], so the tracking layer
//! and the pool know which streams are ordered after which without a
//! synchronize.

use super::capture::{refuse_if_capturing, Capture};
use super::host::HostRuntime;
use super::ipc_event::{IpcCounters, ACL_EVENT_IPC};
use super::model::Node;
use super::stream_worker::{self, Stream, Task};
use super::waits;
use crate::base::error::{Error, Result};
use crate::base::ids::EventHandle;
use crate::registry::{order, StreamKey};
use parking_lot::{Condvar, Mutex};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// `ACL_EVENT_EXTERNAL`: an event whose waits a capture records as external.
const ACL_EVENT_EXTERNAL: u32 = 0x20;
/// The `ACL_EVENT_*` creation flags CANN defines.
/// How often a stream's wait on an event looks whether its task was interrupted.
const GIVE_UP_SLICE: Duration = Duration::from_millis(5);
const KNOWN_EVENT_FLAGS: u32 = 0x01 | 0x02 | 0x08 | 0x10 | 0x20 | 0x40;

const NO_IPC: Error = Error::InvalidParam {
    param: "event",
    reason: "An IPC event (ACL_EVENT_IPC) cannot be reset, timed or queried for its waits",
};

const NOT_AN_EVENT: Error = Error::InvalidParam {
    param: "event",
    reason: "It is not a live event (it was destroyed, or was never returned by aclrtCreateEvent)",
};

/// One event: the records made on it and how far they have run.
pub struct Event {
    flags: u32,
    /// From `aclrtCreateEventExWithFlag`: complete before its first record,
    /// and neither reset nor queried for its waits.
    ex: bool,
    /// An IPC event's shared counters, which its records, waits and queries
    /// use instead of `marks`' numbers, and whether this process created it.
    ipc: Option<(IpcCounters, bool)>,
    marks: Mutex<Marks>,
    changed: Condvar,
    /// The capture its last record was made in, while a stream that waits
    /// for it can still join that capture.
    captured: Mutex<Option<std::sync::Weak<Capture>>>,
}

#[derive(Default)]
struct Marks {
    /// Records made (the last one's number).
    recorded: u64,
    /// The highest record number that has completed.
    completed: u64,
    /// When the last completed record ran, in µs since the first event.
    stamp_us: Option<u64>,
    /// `recorded` at the last reset: no record since means "never recorded".
    reset_at: u64,
    waits: u64,
    waits_done: u64,
    /// The last record: its number, its stream (as the wait-for graph
    /// knows it) and the stream's key with its generation in `order`.
    source: Option<Source>,
}

#[derive(Clone, Copy)]
struct Source {
    generation: u64,
    stream: usize,
    key: StreamKey,
    token: u64,
}

/// Event waits given up because they would have closed a cycle of waits.
static REFUSED_WAITS: AtomicUsize = AtomicUsize::new(0);

/// How many event waits were given up to break a cycle of waits.
#[cfg(test)]
pub(crate) fn refused_waits() -> usize {
    REFUSED_WAITS.load(Ordering::Relaxed)
}

fn now_us() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_micros() as u64
}

impl Event {
    /// The creation flags.
    pub fn flags(&self) -> u32 {
        self.flags
    }

    /// An IPC event's shared counters.
    pub(crate) fn ipc(&self) -> Option<&IpcCounters> {
        self.ipc.as_ref().map(|(c, _)| c)
    }

    /// An IPC event created by this process (not opened from a handle).
    pub(crate) fn ipc_owner(&self) -> bool {
        self.ipc.as_ref().is_some_and(|&(_, owner)| owner)
    }

    /// The number of the last record (an IPC event's: by any process).
    fn last_recorded(&self, marks: &Marks) -> u64 {
        self.ipc()
            .map_or(marks.recorded, IpcCounters::last_recorded)
    }

    pub(crate) fn complete(&self, generation: u64) {
        if let Some(c) = self.ipc() {
            c.complete(generation);
        }
        let mut marks = self.marks.lock();
        if generation > marks.completed {
            marks.completed = generation;
            marks.stamp_us = Some(now_us());
        }
        self.changed.notify_all();
    }

    /// Waits until record `generation` has completed (`None`: no limit).
    fn wait_for(&self, generation: u64, timeout: Option<Duration>) -> bool {
        self.wait_or_give_up(generation, timeout, None)
    }

    /// As `wait_for`; with `give_up`, also ends (true) once it holds,
    /// looked at every [`GIVE_UP_SLICE`]: nothing signals the event then.
    fn wait_or_give_up(
        &self,
        generation: u64,
        timeout: Option<Duration>,
        give_up: Option<fn() -> bool>,
    ) -> bool {
        if let Some(c) = self.ipc() {
            return c.wait_for(generation, timeout, give_up.unwrap_or(|| false));
        }
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut marks = self.marks.lock();
        while marks.completed < generation {
            if give_up.is_some_and(|f| f()) {
                return true;
            }
            let slice = give_up.map(|_| Instant::now() + GIVE_UP_SLICE);
            let until = match (deadline, slice) {
                (Some(d), Some(s)) => Some(d.min(s)),
                (d, s) => d.or(s),
            };
            match until {
                None => self.changed.wait(&mut marks),
                Some(u) => {
                    let _ = self.changed.wait_until(&mut marks, u);
                    if marks.completed < generation && deadline.is_some_and(|d| Instant::now() >= d)
                    {
                        return false;
                    }
                }
            }
        }
        true
    }

    /// A stream's wait task: blocks its worker (at most `limit`: false when
    /// it ran out), then counts the wait done. While blocked, the worker waits for the record's stream in the
    /// wait-for graph; a wait that would close a cycle is reported and
    /// given up.
    pub(crate) fn stream_wait(&self, generation: u64, limit: Option<Duration>) -> bool {
        let source = {
            let marks = self.marks.lock();
            marks
                .source
                .filter(|s| marks.completed < generation && s.generation == generation)
        };
        let me = stream_worker::current_wait_id();
        let waiting = match source {
            // A record on the waiting stream itself ran before the wait.
            Some(s) if me != 0 && s.stream != me => match waits::begin(me, s.stream) {
                Ok(w) => Some(w),
                Err(_) => {
                    REFUSED_WAITS.fetch_add(1, Ordering::Relaxed);
                    let _ = writeln!(
                        std::io::stderr(),
                        "aclalloc: a stream's wait on an event was given up: the event's record is queued behind a kernel that waits for the waiting stream, so both would wait forever. Record the event before that kernel, or wait from a host thread"
                    );
                    self.marks.lock().waits_done += 1;
                    return true;
                }
            },
            _ => None,
        };
        // An interrupted wait (aclrtStreamStop/Abort) gives up: nothing
        // else would end it when the record never comes.
        let reached = self.wait_or_give_up(
            generation,
            limit,
            Some(stream_worker::current_task_cancelled),
        );
        drop(waiting);
        self.marks.lock().waits_done += 1;
        reached
    }

    /// Notes the capture its last record was made in (`None`: a record
    /// that ran, or will).
    pub(crate) fn set_captured(&self, capture: Option<std::sync::Weak<Capture>>) {
        *self.captured.lock() = capture;
    }

    /// The open capture its last record was made in.
    fn open_capture(&self) -> Option<Arc<Capture>> {
        self.captured
            .lock()
            .as_ref()
            .and_then(std::sync::Weak::upgrade)
            .filter(|c| c.is_open())
    }

    /// A replayed wait on an event recorded outside its model: blocks the
    /// worker until a record of the event has completed since its last
    /// reset, as the device's event flag does (a model waits for the record
    /// the program makes after launching it, and resets the event for the
    /// next replay). Ends early when the replay's task is interrupted.
    pub(crate) fn flag_wait(&self) {
        if let Some(c) = self.ipc() {
            let last = c.last_recorded();
            c.wait_for(last, None, stream_worker::current_task_cancelled);
            return;
        }
        let mut marks = self.marks.lock();
        while marks.completed <= marks.reset_at {
            if stream_worker::current_task_cancelled() {
                return;
            }
            let until = Instant::now() + GIVE_UP_SLICE;
            let _ = self.changed.wait_until(&mut marks, until);
        }
    }

    /// A replayed ordinary wait: for the event's last record as the replay
    /// reaches it (none: no wait). Ends early when the replay's task is
    /// interrupted.
    pub(crate) fn current_wait(&self) {
        let last = self.last_recorded(&self.marks.lock());
        self.wait_or_give_up(last, None, Some(stream_worker::current_task_cancelled));
    }

    pub(crate) fn reset(&self) {
        let mut marks = self.marks.lock();
        // Numbers stay monotonic so that no waiter waits for a record that
        // can no longer complete; the event reads as never recorded.
        marks.completed = marks.recorded;
        marks.reset_at = marks.recorded;
        marks.stamp_us = None;
        self.changed.notify_all();
    }
}

impl HostRuntime {
    pub(super) fn event(&self, event: usize) -> Result<Arc<Event>> {
        EventHandle::from_raw(event)
            .and_then(|h| self.events.with(h, Arc::clone))
            .ok_or(NOT_AN_EVENT)
    }

    /// `aclrtCreateEvent[ExWithFlag|WithFlag]`: an event in the current
    /// context, with CANN's `ACL_EVENT_*` flags (which change nothing on the
    /// host but `ACL_EVENT_IPC`, which must stand alone: see `ipc_event`).
    pub fn create_event(&self, flags: u32, ex: bool) -> Result<usize> {
        if flags & !KNOWN_EVENT_FLAGS != 0 {
            return Err(Error::InvalidParam {
                param: "flag",
                reason: "It holds bits that are not ACL_EVENT_* flags",
            });
        }
        if flags & ACL_EVENT_IPC != 0 && flags != ACL_EVENT_IPC {
            return Err(Error::InvalidParam {
                param: "flag",
                reason: "ACL_EVENT_IPC cannot be combined with other flags",
            });
        }
        self.current_context()?;
        let ipc = if flags == ACL_EVENT_IPC {
            Some((IpcCounters::create()?, true))
        } else {
            None
        };
        self.insert_event(flags, ex, ipc)
    }

    /// A new event handle.
    pub(super) fn insert_event(
        &self,
        flags: u32,
        ex: bool,
        ipc: Option<(IpcCounters, bool)>,
    ) -> Result<usize> {
        let event = Arc::new(Event {
            flags,
            ex,
            ipc,
            marks: Mutex::new(Marks::default()),
            changed: Condvar::new(),
            captured: Mutex::new(None),
        });
        Ok(self.events.insert(event)?.get())
    }

    /// `aclrtDestroyEvent`: at once; queued markers keep what they need.
    pub fn destroy_event(&self, event: usize) -> Result<()> {
        EventHandle::from_raw(event)
            .and_then(|h| self.events.remove(h))
            .map(drop)
            .ok_or(NOT_AN_EVENT)?;
        self.unshare_event(event);
        Ok(())
    }

    /// Enqueues on `stream` a task holding a count of `event`, numbered by
    /// `before`; a task the stream refuses gives the count back and `undo`es.
    fn enqueue_on(
        &self,
        stream: Option<StreamKey>,
        event: &Arc<Event>,
        before: impl FnOnce(&mut Marks) -> u64,
        undo: impl FnOnce(&mut Marks),
        task: impl FnOnce(*const Event, u64) -> Task,
    ) -> Result<()> {
        // The stream first: a bad one leaves the event as it was.
        let (_, stream) = self.resolve_stream(stream)?;
        let n = before(&mut event.marks.lock());
        let raw = Arc::into_raw(Arc::clone(event));
        let queued = stream.enqueue(task(raw, n));
        if queued.is_err() {
            // SAFETY: the count made just above, which the task never took.
            drop(unsafe { Arc::from_raw(raw) });
            undo(&mut event.marks.lock());
            event.changed.notify_all();
        }
        queued
    }

    /// A wait made on a capturing stream, or on a record made in an open
    /// capture: true when the capture took it. A capturing stream records
    /// a wait for a record made outside its capture (one made inside is
    /// already ordered: the capture keeps the order of the calls); a
    /// stream that waits for a record of an open capture joins it.
    fn wait_in_capture(
        &self,
        key: StreamKey,
        s: &Arc<Stream>,
        event: &Arc<Event>,
        external: bool,
    ) -> Result<bool> {
        let recorded_in = event.open_capture();
        if let Some((capture, lane)) = s.capture() {
            if !recorded_in.is_some_and(|c| Arc::ptr_eq(&c, &capture)) {
                let external = external || event.flags & ACL_EVENT_EXTERNAL != 0;
                let event = Arc::clone(event);
                capture.push(lane, Node::Wait { event, external })?;
            }
            return Ok(true);
        }
        match recorded_in {
            Some(capture) if matches!(capture.target, super::capture::Target::Capture) => {
                // Ended meanwhile: an ordinary wait.
                Ok(capture.attach(key.get().get(), s, Some(0), false).is_some())
            }
            _ => Ok(false),
        }
    }

    /// Numbers a record of `event` that a replay queued on `s` (`key`) will
    /// make, as `aclrtRecordEvent` numbers its marker.
    pub(crate) fn reserve_record(&self, event: &Arc<Event>, key: StreamKey, s: &Stream) -> u64 {
        event.set_captured(None);
        let ipc = event.ipc();
        let token = order::event_recorded();
        let mut m = event.marks.lock();
        m.recorded = ipc.map_or(m.recorded + 1, IpcCounters::next_record);
        m.source = Some(Source {
            generation: m.recorded,
            stream: s.wait_id(),
            key,
            token,
        });
        m.recorded
    }

    /// `aclrtRecordEvent`: a marker at the end of `stream`'s queue.
    pub fn record_event(&self, event: usize, stream: Option<StreamKey>) -> Result<()> {
        let event = self.event(event)?;
        let (key, s) = self.resolve_stream(stream)?;
        if let Some((capture, lane)) = s.capture() {
            return capture.record_event(lane, &event);
        }
        event.set_captured(None);
        let source = Source {
            generation: 0,
            stream: s.wait_id(),
            key,
            token: order::event_recorded(),
        };
        let ipc = event.ipc();
        let next = |m: &mut Marks| {
            m.recorded = ipc.map_or(m.recorded + 1, IpcCounters::next_record);
            m.source = Some(Source {
                generation: m.recorded,
                ..source
            });
            m.recorded
        };
        // A record refused is complete at once, so nothing waits for it.
        let undo = |m: &mut Marks| {
            m.completed = m.recorded;
            if let Some(c) = ipc {
                c.complete(m.recorded);
            }
        };
        self.enqueue_on(Some(key), &event, next, undo, Task::Record)
    }

    /// `aclrtStreamWaitEvent`: `stream` runs nothing queued after this call
    /// before the event's last record (at the time of the call) has run.
    pub fn stream_wait_event(&self, stream: Option<StreamKey>, event: usize) -> Result<()> {
        self.stream_wait_event_flag(stream, event, false)
    }

    /// `aclrtStreamWaitEventWithFlag` with no limit: `external`
    /// (`ACL_EVENT_WAIT_EXTERNAL`) changes only a wait a capture records.
    pub fn stream_wait_event_flag(
        &self,
        stream: Option<StreamKey>,
        event: usize,
        external: bool,
    ) -> Result<()> {
        let event = self.event(event)?;
        let (key, s) = self.resolve_stream(stream)?;
        if self.wait_in_capture(key, &s, &event, external)? {
            return Ok(());
        }
        let source = event.marks.lock().source;
        let last = |m: &mut Marks| {
            m.waits += 1;
            event.last_recorded(m)
        };
        let undo = |m: &mut Marks| m.waits -= 1;
        self.enqueue_on(Some(key), &event, last, undo, Task::Wait)?;
        // The work queued on `key` from now on runs after the record.
        if let Some(s) = source.filter(|s| s.key != key) {
            order::stream_waited(key.get().get(), s.key.get().get(), s.token);
        }
        Ok(())
    }

    /// `aclrtStreamWaitEventWithTimeout`: as `aclrtStreamWaitEvent`, but the
    /// stream waits at most `timeout_s` seconds (0: no limit); when the time
    /// runs out the stream goes on and its next synchronize returns
    /// `ACL_ERROR_RT_EVENT_SYNC_TIMEOUT`.
    pub fn stream_wait_event_timeout(
        &self,
        stream: Option<StreamKey>,
        event: usize,
        timeout_s: i32,
    ) -> Result<()> {
        let Ok(seconds) = u32::try_from(timeout_s) else {
            return Err(Error::InvalidParam {
                param: "timeout",
                reason: "It must be 0 (no limit) or a number of seconds above 0",
            });
        };
        if seconds == 0 {
            return self.stream_wait_event(stream, event);
        }
        let ev = self.event(event)?;
        let (key, s) = self.resolve_stream(stream)?;
        if self.wait_in_capture(key, &s, &ev, false)? {
            return Ok(());
        }
        let last = |m: &mut Marks| {
            m.waits += 1;
            ev.last_recorded(m)
        };
        let undo = |m: &mut Marks| m.waits -= 1;
        let task = |e, n| Task::TimedWait(e, n, seconds);
        // No ordering is noted: the time may run out before the record runs,
        // and the stream then goes on, so what the recording stream freed
        // is not safe for it (the pool and the tracker wait for a
        // synchronize instead).
        self.enqueue_on(Some(key), &ev, last, undo, task)
    }

    /// `aclrtResetEvent`: back to the initial state once `stream` reaches it.
    pub fn reset_event(&self, event: usize, stream: Option<StreamKey>) -> Result<()> {
        let event = self.event(event)?;
        Self::not_ex(&event)?;
        let (_, s) = self.resolve_stream(stream)?;
        if let Some((capture, lane)) = s.capture() {
            return capture.push(lane, Node::Reset(event));
        }
        self.enqueue_on(stream, &event, |_| 0, |_| {}, |e, _| Task::Reset(e))
    }

    /// `aclrtQueryEventStatus`: true once everything recorded has run. An
    /// event never recorded is complete only if made by `aclrtCreateEventExWithFlag`.
    pub fn event_complete(&self, event: usize) -> Result<bool> {
        let event = self.event(event)?;
        refuse_if_capturing()?;
        if let Some(c) = event.ipc() {
            return Ok(c.is_complete());
        }
        let marks = event.marks.lock();
        Ok(marks.completed >= marks.recorded && (marks.recorded > marks.reset_at || event.ex))
    }

    fn not_ex(event: &Event) -> Result<()> {
        if event.ipc.is_some() {
            return Err(NO_IPC);
        }
        if event.ex {
            return Err(Error::InvalidParam {
                param: "event",
                reason: "Events from aclrtCreateEventExWithFlag cannot be reset or queried for their waits",
            });
        }
        Ok(())
    }

    /// `aclrtQueryEventWaitStatus`: true once every stream wait on the event has run.
    pub fn event_waits_complete(&self, event: usize) -> Result<bool> {
        let event = self.event(event)?;
        refuse_if_capturing()?;
        Self::not_ex(&event)?;
        let marks = event.marks.lock();
        Ok(marks.waits_done >= marks.waits)
    }

    /// `aclrtSynchronizeEvent[WithTimeout]`: waits for the last record made
    /// before the call (`timeout_ms` -1: no limit).
    pub fn synchronize_event(&self, event: usize, timeout_ms: i32) -> Result<()> {
        if timeout_ms < -1 || timeout_ms == 0 {
            return Err(Error::InvalidParam {
                param: "timeout",
                reason: "It must be -1 (no limit) or a number of milliseconds above 0",
            });
        }
        let event = self.event(event)?;
        refuse_if_capturing()?;
        let generation = event.last_recorded(&event.marks.lock());
        let limit = u64::try_from(timeout_ms).ok().map(Duration::from_millis);
        if event.wait_for(generation, limit) {
            Ok(())
        } else {
            Err(Error::EventTimeout { timeout_ms })
        }
    }

    /// `aclrtSynchronizeStreamWithTimeout`: waits at most `timeout_ms` for
    /// the work queued on `stream` before the call (-1 or 0: no limit). The
    /// point waited for is a record of a private event, which the queued
    /// marker keeps alive, so giving up leaves nothing dangling; the work
    /// keeps running. Overtaken by `aclrtStreamAbort`, it returns
    /// `ACL_ERROR_RT_STREAM_ABORT`, as a plain synchronize does.
    pub fn synchronize_stream_timeout(
        &self,
        stream: Option<StreamKey>,
        timeout_ms: i32,
    ) -> Result<()> {
        if timeout_ms <= 0 {
            return self.synchronize_stream(stream);
        }
        refuse_if_capturing()?;
        let (key, s) = self.resolve_stream(stream)?;
        if s.is_current_worker() {
            return Err(Error::InvalidParam {
                param: "stream",
                reason: "A kernel cannot synchronize the stream it runs on",
            });
        }
        s.check_alive()?;
        let _waiting = s.wait_from_kernel()?;
        let aborts = s.aborts();
        let marker = Arc::new(Event {
            flags: 0,
            ex: false,
            ipc: None,
            marks: Mutex::new(Marks::default()),
            changed: Condvar::new(),
            captured: Mutex::new(None),
        });
        let generation = {
            let mut marks = marker.marks.lock();
            marks.recorded += 1;
            marks.recorded
        };
        let raw = Arc::into_raw(Arc::clone(&marker));
        if let Err(e) = s.enqueue(Task::Record(raw, generation)) {
            // SAFETY: the count made just above, which the task never took.
            drop(unsafe { Arc::from_raw(raw) });
            return Err(e);
        }
        let limit = Duration::from_millis(timeout_ms.unsigned_abs().into());
        if !marker.wait_for(generation, Some(limit)) {
            return Err(Error::StreamTimeout { timeout_ms });
        }
        // Overtaken by an abort (which completes the dropped marker): what
        // the aborted work did is for the next synchronize to report.
        if s.aborts() != aborts {
            return Err(Error::TaskFailed {
                code: crate::base::error::ACL_ERROR_RT_STREAM_ABORT,
            });
        }
        s.take_failure()?;
        self.observer().stream_synchronized(key);
        Ok(())
    }

    /// `aclrtEventGetTimestamp`: when the event's last record ran, in µs.
    pub fn event_timestamp_us(&self, event: usize) -> Result<u64> {
        let event = self.event(event)?;
        if event.ipc.is_some() {
            return Err(NO_IPC);
        }
        let marks = event.marks.lock();
        match marks.stamp_us {
            Some(t) if marks.completed >= marks.recorded => Ok(t),
            _ => Err(Error::EventNotComplete { param: "event" }),
        }
    }

    /// `aclrtEventElapsedTime`: milliseconds from `start`'s last record to `end`'s.
    pub fn event_elapsed_ms(&self, start: usize, end: usize) -> Result<f32> {
        let stamp = |e, param| {
            self.event_timestamp_us(e).map_err(|err| match err {
                Error::EventNotComplete { .. } => Error::EventNotComplete { param },
                other => other,
            })
        };
        let (a, b) = (stamp(start, "startEvent")?, stamp(end, "endEvent")?);
        Ok((b as f64 - a as f64) as f32 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::tests::runtime;
    use crate::stream_worker::KernelFn;
    use std::ffi::c_void;
    use std::sync::atomic::Ordering;

    unsafe extern "C" fn sleep_20ms(_: *mut c_void, _: usize, _: *mut c_void) {
        std::thread::sleep(Duration::from_millis(20));
    }

    fn sleeper(rt: &HostRuntime, stream: StreamKey) {
        let (_, s) = rt.resolve_stream(Some(stream)).unwrap();
        s.enqueue(Task::Kernel {
            kernel: sleep_20ms as KernelFn,
            workspace: std::ptr::null_mut(),
            size: 0,
            user_data: std::ptr::null_mut(),
            release: false,
        })
        .unwrap();
    }

    #[test]
    fn records_complete_in_stream_order_and_waits_block_the_waiting_stream() {
        let rt = runtime(1, 1 << 20);
        rt.set_device(0).unwrap();
        let (a, b) = (
            rt.create_stream(0, 0).unwrap(),
            rt.create_stream(0, 0).unwrap(),
        );
        let ev = rt.create_event(0, false).unwrap();
        assert!(!rt.event_complete(ev).unwrap(), "never recorded: not ready");
        let ex = rt.create_event(0, true).unwrap();
        assert!(
            rt.event_complete(ex).unwrap(),
            "Ex, never recorded: complete"
        );
        assert!(rt.reset_event(ex, Some(a)).is_err());
        assert!(rt.event_timestamp_us(ev).is_err());
        let start = rt.create_event(0, false).unwrap();
        rt.record_event(start, Some(a)).unwrap();
        sleeper(&rt, a);
        rt.record_event(ev, Some(a)).unwrap();
        assert!(!rt.event_complete(ev).unwrap());
        rt.stream_wait_event(Some(b), ev).unwrap();
        assert!(!rt.event_waits_complete(ev).unwrap());
        // b's own synchronize returns only after a's marker ran.
        rt.synchronize_stream(Some(b)).unwrap();
        assert!(rt.event_complete(ev).unwrap());
        assert!(rt.event_waits_complete(ev).unwrap());
        let ms = rt.event_elapsed_ms(start, ev).unwrap();
        assert!(ms >= 15.0, "{ms}");
        sleeper(&rt, a);
        rt.record_event(ev, Some(a)).unwrap();
        assert_eq!(
            rt.synchronize_event(ev, 1),
            Err(Error::EventTimeout { timeout_ms: 1 })
        );
        rt.synchronize_event(ev, -1).unwrap();
        rt.destroy_event(ev).unwrap();
        assert_eq!(rt.destroy_event(ev), Err(NOT_AN_EVENT));
        assert_eq!(rt.record_event(ev, Some(a)), Err(NOT_AN_EVENT));
        assert!(rt.create_event(0x100, false).is_err());
    }

    unsafe extern "C" fn gated(_: *mut c_void, _: usize, gate: *mut c_void) {
        // SAFETY: the test passes an AtomicBool that outlives the stream's work.
        let gate = unsafe { &*(gate as *const std::sync::atomic::AtomicBool) };
        while gate.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
    }

    #[test]
    fn an_abort_or_stop_ends_a_running_wait_on_an_event() {
        let rt = runtime(1, 1 << 20);
        rt.set_device(0).unwrap();
        let (a, b) = (
            rt.create_stream(0, 0).unwrap(),
            rt.create_stream(0, 0).unwrap(),
        );
        let (_, sa) = rt.resolve_stream(Some(a)).unwrap();
        let (_, sb) = rt.resolve_stream(Some(b)).unwrap();
        let gate = std::sync::atomic::AtomicBool::new(true);
        // b holds its record behind a kernel until the end.
        sb.enqueue(Task::Kernel {
            kernel: gated as KernelFn,
            workspace: std::ptr::null_mut(),
            size: 0,
            user_data: &gate as *const _ as *mut c_void,
            release: false,
        })
        .unwrap();
        let ev = rt.create_event(0, false).unwrap();
        rt.record_event(ev, Some(b)).unwrap();
        for abort in [true, false] {
            rt.stream_wait_event(Some(a), ev).unwrap();
            while !sa.is_running() {
                std::thread::yield_now();
            }
            if abort {
                rt.abort_stream(Some(a)).unwrap();
            } else {
                rt.stop_stream(Some(a)).unwrap();
            }
            // Before, the wait went on until b's record ran, and so did this.
            assert!(rt.synchronize_stream(Some(a)).is_err());
            assert!(!rt.event_complete(ev).unwrap(), "the record has not run");
        }
        gate.store(false, Ordering::SeqCst);
        rt.synchronize_stream(Some(b)).unwrap();
        rt.synchronize_stream(Some(a)).unwrap();
        rt.destroy_event(ev).unwrap();
    }

    struct CycleKernel {
        rt: *const HostRuntime,
        other: StreamKey,
        go: std::sync::atomic::AtomicBool,
        result: Mutex<Option<Result<()>>>,
    }

    /// Waits for the go, then synchronizes the other stream from inside a kernel.
    unsafe extern "C" fn synchronize_other(_: *mut c_void, _: usize, data: *mut c_void) {
        // SAFETY: the test keeps the state alive until the stream has run this.
        let k = unsafe { &*(data as *const CycleKernel) };
        while !k.go.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        // SAFETY: as above.
        let result = unsafe { &*k.rt }.synchronize_stream(Some(k.other));
        *k.result.lock() = Some(result);
    }

    #[test]
    fn a_wait_on_a_record_behind_a_kernel_waiting_for_the_waiter_is_refused_not_hung() {
        let rt = runtime(1, 1 << 20);
        rt.set_device(0).unwrap();
        let (a, b) = (
            rt.create_stream(0, 0).unwrap(),
            rt.create_stream(0, 0).unwrap(),
        );
        let ev = rt.create_event(0, false).unwrap();
        let k = CycleKernel {
            rt: &rt,
            other: b,
            go: std::sync::atomic::AtomicBool::new(false),
            result: Mutex::new(None),
        };
        let (_, sa) = rt.resolve_stream(Some(a)).unwrap();
        let (_, sb) = rt.resolve_stream(Some(b)).unwrap();
        // a: [kernel synchronizing b] [record]; b: [wait for that record].
        sa.enqueue(Task::Kernel {
            kernel: synchronize_other as KernelFn,
            workspace: std::ptr::null_mut(),
            size: 0,
            user_data: &k as *const CycleKernel as *mut c_void,
            release: false,
        })
        .unwrap();
        rt.record_event(ev, Some(a)).unwrap();
        let refused_before = refused_waits();
        rt.stream_wait_event(Some(b), ev).unwrap();
        while sb.queued() > 0 {
            std::thread::yield_now();
        }
        k.go.store(true, Ordering::SeqCst);
        // Whichever wait comes second closes the cycle and is refused.
        rt.synchronize_stream(Some(a)).unwrap();
        rt.synchronize_stream(Some(b)).unwrap();
        let kernel_refused = k.result.lock().take().unwrap().is_err();
        let wait_refused = refused_waits() > refused_before;
        assert!(
            kernel_refused != wait_refused,
            "exactly one side gives up (kernel: {kernel_refused}, wait: {wait_refused})"
        );
        assert!(rt.event_waits_complete(ev).unwrap());
    }

    #[test]
    fn an_event_destroyed_with_a_queued_marker_still_completes_its_waiters() {
        let rt = runtime(1, 1 << 20);
        rt.set_device(0).unwrap();
        let (a, b) = (
            rt.create_stream(0, 0).unwrap(),
            rt.create_stream(0, 0).unwrap(),
        );
        let ev = rt.create_event(0, false).unwrap();
        sleeper(&rt, a);
        rt.record_event(ev, Some(a)).unwrap();
        rt.stream_wait_event(Some(b), ev).unwrap();
        rt.destroy_event(ev).unwrap();
        rt.destroy_stream(a, true).unwrap();
        rt.synchronize_stream(Some(b)).unwrap();
    }
}

#[cfg(test)]
mod timed_wait_tests {
    use super::*;
    use crate::host::tests::runtime;

    #[test]
    fn a_timed_wait_that_runs_out_lets_the_stream_go_on_and_fails_its_synchronize() {
        let rt = runtime(1, 1 << 20);
        rt.set_device(0).unwrap();
        let (a, b) = (
            rt.create_stream(0, 0).unwrap(),
            rt.create_stream(0, 0).unwrap(),
        );
        let word = rt.malloc(8).unwrap().as_ptr().cast::<std::ffi::c_void>();
        rt.value_write(word, 0, 0, Some(a)).unwrap();
        rt.synchronize_stream(Some(a)).unwrap();
        // a's record stays behind a value wait nobody satisfies in time.
        rt.value_wait(word, 1, 1, Some(a)).unwrap();
        let ev = rt.create_event(0, false).unwrap();
        rt.record_event(ev, Some(a)).unwrap();
        rt.stream_wait_event_timeout(Some(b), ev, 1).unwrap();
        assert_eq!(
            rt.synchronize_stream(Some(b)),
            Err(Error::TaskFailed {
                code: crate::base::error::ACL_ERROR_RT_EVENT_SYNC_TIMEOUT
            })
        );
        assert!(!rt.event_complete(ev).unwrap(), "the record has not run");
        // In time: no failure.
        rt.stream_wait_event_timeout(Some(b), ev, 30).unwrap();
        let c = rt.create_stream(0, 0).unwrap();
        rt.value_write(word, 1, 0, Some(c)).unwrap();
        rt.synchronize_stream(Some(a)).unwrap();
        rt.synchronize_stream(Some(b)).unwrap();
        assert!(rt.stream_wait_event_timeout(Some(b), ev, -1).is_err());
        rt.free(word.cast()).unwrap();
    }
}
