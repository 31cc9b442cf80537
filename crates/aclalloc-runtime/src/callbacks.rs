//! Host functions on a stream: `aclrtLaunchHostFunc` runs one on the
//! stream's worker; `aclrtLaunchCallback` hands one, when the stream reaches
//! it, to the thread subscribed to the stream (`aclrtSubscribeReport`),
//! which runs it inside `aclrtProcessReport`; a blocking callback holds the
//! stream until it has run. A stream a thread is subscribed to with
//! `aclrtSubscribeHostFunc` hands its host functions to that thread instead,
//! which runs them inside `aclrtProcessHostFunc`; the stream waits for each.

use super::host::HostRuntime;
use super::model::Node;
use super::stream_worker::Task;
use crate::base::error::{Error, Result};
use crate::registry::StreamKey;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `void fn(void *userData)`: `aclrtCallback` and `aclrtHostFunc`.
pub type HostFn = unsafe extern "C" fn(*mut c_void);

/// The subscriptions and the callbacks waiting for their threads.
#[derive(Default)]
pub struct Reports {
    state: Mutex<State>,
    posted: Condvar,
}

#[derive(Default)]
struct State {
    /// (kind, thread, stream handle).
    subscribed: Vec<(Kind, u64, usize)>,
    waiting: VecDeque<(Kind, u64, Arc<Job>)>,
}

/// Which subscription a job or a thread belongs to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// `aclrtSubscribeReport`: callbacks, run in `aclrtProcessReport`.
    Report,
    /// `aclrtSubscribeHostFunc`: host functions, run in `aclrtProcessHostFunc`.
    HostFunc,
}

impl Kind {
    fn subscribe_call(self) -> &'static str {
        match self {
            Kind::Report => {
                "The calling thread is not subscribed to any stream (aclrtSubscribeReport)"
            }
            Kind::HostFunc => {
                "The calling thread is not subscribed to any stream (aclrtSubscribeHostFunc)"
            }
        }
    }
}

struct Job {
    f: HostFn,
    data: *mut c_void,
    stream: usize,
    kind: Kind,
    reports: Arc<Reports>,
    /// Set once run, for a blocking callback's stream.
    done: Mutex<bool>,
    ran: Condvar,
}

// SAFETY: `data` is the caller's, handed over with the launch as with every
// asynchronous call; only the thread that runs the job uses it.
unsafe impl Send for Job {}
// SAFETY: as above; the rest is synchronized.
unsafe impl Sync for Job {}

impl Job {
    fn run(&self) {
        // SAFETY: the launcher's contract: `f` may be called with `data`.
        unsafe { (self.f)(self.data) };
        *self.done.lock() = true;
        self.ran.notify_all();
    }
}

/// The worker's side: runs a host function, or posts a callback to its
/// thread (and, blocking, waits for it).
unsafe extern "C" fn trampoline(_: *mut c_void, blocking: usize, job: *mut c_void) {
    // SAFETY: the count `launch` made with `Arc::into_raw`, taken back once.
    let job = unsafe { Arc::from_raw(job as *const Job) };
    let reports = Arc::clone(&job.reports);
    let thread = {
        let mut state = reports.state.lock();
        let thread = state
            .subscribed
            .iter()
            .find(|&&(k, _, s)| k == job.kind && s == job.stream)
            .map(|&(_, t, _)| t);
        if let Some(t) = thread {
            state.waiting.push_back((job.kind, t, Arc::clone(&job)));
            reports.posted.notify_all();
        }
        thread
    };
    match thread {
        // Unsubscribed since the launch (or a host function on a stream no
        // thread subscribed to): nobody else would run it, so the stream does.
        None => job.run(),
        Some(_) if blocking != 0 => {
            let mut done = job.done.lock();
            while !*done {
                job.ran.wait(&mut done);
            }
        }
        Some(_) => {}
    }
}

/// A host function or callback a capture recorded: each replay runs a new
/// job of it, as the stream would have run the one launched (on the thread
/// subscribed to the stream it was launched on, else on the replay's worker).
pub(crate) struct HostCall {
    f: HostFn,
    data: *mut c_void,
    stream: usize,
    kind: Kind,
    reports: Arc<Reports>,
    blocking: bool,
}

// SAFETY: as `Job`'s: `data` is the caller's, handed over with the launch.
unsafe impl Send for HostCall {}
// SAFETY: as above; a replay only reads it.
unsafe impl Sync for HostCall {}

impl HostCall {
    /// Runs it on the calling worker, or posts it to the subscribed thread.
    pub(crate) fn run(&self) {
        let job = Arc::new(Job {
            f: self.f,
            data: self.data,
            stream: self.stream,
            kind: self.kind,
            reports: Arc::clone(&self.reports),
            done: Mutex::new(false),
            ran: Condvar::new(),
        });
        // SAFETY: a count made here, which the trampoline takes back once.
        unsafe {
            trampoline(
                std::ptr::null_mut(),
                usize::from(self.blocking),
                Arc::into_raw(job) as *mut c_void,
            )
        };
    }
}

/// A job whose task was dropped before it ran (aborted, stopped, or behind
/// a failure in stop-on-failure mode): its count goes, and with it the job.
///
/// # Safety
/// `job` is the count `launch_job` made, not taken back by `trampoline`.
unsafe fn drop_job(job: *mut c_void) {
    // SAFETY: the function's contract.
    drop(unsafe { Arc::from_raw(job as *const Job) });
}

impl HostRuntime {
    fn launch_job(&self, stream: Option<StreamKey>, job: Job, blocking: bool) -> Result<()> {
        let (_, s) = self.resolve_stream(stream)?;
        if let Some((capture, lane)) = s.capture() {
            let call = HostCall {
                f: job.f,
                data: job.data,
                stream: job.stream,
                kind: job.kind,
                reports: job.reports,
                blocking,
            };
            return capture.push(lane, Node::Host(Arc::new(call)));
        }
        let raw = Arc::into_raw(Arc::new(job));
        let queued = s.enqueue(Task::Owning {
            run: trampoline,
            size: usize::from(blocking),
            data: raw as *mut c_void,
            free: drop_job,
            kernel: true,
        });
        if queued.is_err() {
            // SAFETY: the count made above, which the task never took.
            drop(unsafe { Arc::from_raw(raw) });
        }
        queued
    }

    /// `aclrtLaunchHostFunc`: `f(args)` in order with the stream's work: on
    /// the thread subscribed to the stream with `aclrtSubscribeHostFunc` when
    /// the stream reaches it (the stream waits until it ran), else on the
    /// stream's worker.
    pub fn launch_host_func(
        &self,
        stream: Option<StreamKey>,
        f: HostFn,
        args: *mut c_void,
    ) -> Result<()> {
        let (key, _) = self.resolve_stream(stream)?;
        // Whose thread runs it is decided when the stream reaches it.
        let job = Job {
            f,
            data: args,
            stream: key.get().get(),
            kind: Kind::HostFunc,
            reports: Arc::clone(&self.reports),
            done: Mutex::new(false),
            ran: Condvar::new(),
        };
        self.launch_job(Some(key), job, true)
    }

    /// `aclrtLaunchCallback`: `f(data)` on the stream's subscribed thread
    /// once the stream reaches it; `blocking` holds the stream until it ran.
    pub fn launch_callback(
        &self,
        stream: Option<StreamKey>,
        f: HostFn,
        data: *mut c_void,
        blocking: bool,
    ) -> Result<()> {
        let (key, _) = self.resolve_stream(stream)?;
        let handle = key.get().get();
        if !self
            .reports
            .state
            .lock()
            .subscribed
            .iter()
            .any(|&(k, _, s)| k == Kind::Report && s == handle)
        {
            return Err(Error::InvalidParam {
                param: "stream",
                reason: "No thread is subscribed to the stream (aclrtSubscribeReport)",
            });
        }
        let job = Job {
            f,
            data,
            stream: handle,
            kind: Kind::Report,
            reports: Arc::clone(&self.reports),
            done: Mutex::new(false),
            ran: Condvar::new(),
        };
        self.launch_job(Some(key), job, blocking)
    }

    /// `aclrtSubscribeReport`: `thread` runs the stream's callbacks (one thread per stream).
    pub fn subscribe_report(&self, thread: u64, stream: Option<StreamKey>) -> Result<()> {
        self.subscribe(Kind::Report, thread, stream)
    }

    /// `aclrtUnSubscribeReport`.
    pub fn unsubscribe_report(&self, thread: u64, stream: Option<StreamKey>) -> Result<()> {
        self.unsubscribe(Kind::Report, thread, stream)
    }

    /// `aclrtProcessReport`: runs one callback posted for `thread`, waiting
    /// up to `timeout_ms` (-1: no limit) for one.
    pub fn process_report(&self, thread: u64, timeout_ms: i32) -> Result<()> {
        self.process(Kind::Report, thread, timeout_ms)
    }

    /// `aclrtSubscribeHostFunc`: `thread` runs the stream's host functions
    /// (one thread per stream).
    pub fn subscribe_host_func(&self, thread: u64, stream: Option<StreamKey>) -> Result<()> {
        self.subscribe(Kind::HostFunc, thread, stream)
    }

    /// `aclrtUnSubscribeHostFunc`: the stream's later host functions run on
    /// its worker again.
    pub fn unsubscribe_host_func(&self, thread: u64, stream: Option<StreamKey>) -> Result<()> {
        self.unsubscribe(Kind::HostFunc, thread, stream)
    }

    /// `aclrtProcessHostFunc`: runs one host function posted for `thread`,
    /// waiting up to `timeout_ms` (-1: no limit) for one.
    pub fn process_host_func(&self, thread: u64, timeout_ms: i32) -> Result<()> {
        self.process(Kind::HostFunc, thread, timeout_ms)
    }

    fn subscribe(&self, kind: Kind, thread: u64, stream: Option<StreamKey>) -> Result<()> {
        let (key, _) = self.resolve_stream(stream)?;
        let handle = key.get().get();
        let mut state = self.reports.state.lock();
        if state
            .subscribed
            .iter()
            .any(|&(k, _, s)| k == kind && s == handle)
        {
            return Err(Error::InvalidParam {
                param: "stream",
                reason: "A thread is already subscribed to the stream",
            });
        }
        state.subscribed.push((kind, thread, handle));
        Ok(())
    }

    fn unsubscribe(&self, kind: Kind, thread: u64, stream: Option<StreamKey>) -> Result<()> {
        let (key, _) = self.resolve_stream(stream)?;
        let mut state = self.reports.state.lock();
        let before = state.subscribed.len();
        state
            .subscribed
            .retain(|&e| e != (kind, thread, key.get().get()));
        if state.subscribed.len() == before {
            return Err(Error::InvalidParam {
                param: "threadId",
                reason: "The thread is not subscribed to the stream",
            });
        }
        Ok(())
    }

    fn process(&self, kind: Kind, thread: u64, timeout_ms: i32) -> Result<()> {
        if timeout_ms < -1 || timeout_ms == 0 {
            return Err(Error::InvalidParam {
                param: "timeout",
                reason: "It must be -1 (no limit) or a number of milliseconds above 0",
            });
        }
        let deadline = u64::try_from(timeout_ms)
            .ok()
            .map(|ms| Instant::now() + Duration::from_millis(ms));
        let mut state = self.reports.state.lock();
        if !state
            .subscribed
            .iter()
            .any(|&(k, t, _)| k == kind && t == thread)
        {
            return Err(Error::InvalidParam {
                param: "threadId",
                reason: kind.subscribe_call(),
            });
        }
        loop {
            if let Some(at) = state
                .waiting
                .iter()
                .position(|&(k, t, _)| k == kind && t == thread)
            {
                let (_, _, job) = state.waiting.remove(at).expect("found above");
                drop(state);
                job.run();
                return Ok(());
            }
            match deadline {
                None => self.reports.posted.wait(&mut state),
                Some(d) => {
                    if self.reports.posted.wait_until(&mut state, d).timed_out() {
                        return Err(Error::ReportTimeout { timeout_ms });
                    }
                }
            }
        }
    }
}
