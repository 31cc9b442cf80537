//! Graph capture (`aclmdlRICaptureBegin` ... `aclmdlRICaptureEnd`), task
//! updates and the model build API: while a stream records into a
//! [`Capture`], the work queued on it becomes nodes of a model instead of
//! running.
//!
//! A capture has lanes of nodes: every stream of a capture appends to its
//! one lane, in the order the calls were made (other streams join through
//! events, as CANN's cross-stream capture does, and the order of the calls
//! is an order that keeps every dependency); a model being built has one
//! lane per bound stream. Workspaces launches take while capturing are
//! held by the capture, then by its model, and go back to their allocator
//! when the model goes. A capture that fails or is abandoned takes its
//! nodes and its workspaces with it.
//!
//! What capture forbids: a call that would wait for the device (a
//! synchronization or query of a stream, event, device or context, a
//! synchronous copy or set) and work on the default stream, from a thread
//! that one of the live captures binds by its mode: CANN's rules, as
//! CUDA's stream capture modes have them. Such a call is refused with
//! `ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC` and invalidates the captures
//! that forbade it; their `aclmdlRICaptureEnd` fails.

use super::events::Event;
use super::graph_memory::{Release, CAPTURES};
use super::model::{Held, Lane, Model, Node, TaskGroup};
use super::stream_worker::{Stream, Task};
use crate::base::error::{
    Error, Result, ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC, ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
};
use parking_lot::Mutex;
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::thread::ThreadId;

/// `ACL_MODEL_RI_CAPTURE_MODE_GLOBAL`: forbidden calls are refused on this
/// thread and on every thread in global mode.
pub const MODE_GLOBAL: i32 = 0;
/// `ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL`: refused on this thread only.
pub const MODE_THREAD_LOCAL: i32 = 1;
/// `ACL_MODEL_RI_CAPTURE_MODE_RELAXED`: nothing is refused.
pub const MODE_RELAXED: i32 = 2;

/// `ACL_MODEL_RI_CAPTURE_STATUS_NONE`: the stream is not capturing.
pub const STATUS_NONE: i32 = 0;
/// `ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE`: the stream is capturing.
pub const STATUS_ACTIVE: i32 = 1;
/// `ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED`: the capture failed; its end
/// will say why.
pub const STATUS_INVALIDATED: i32 = 2;

/// A call a live capture forbids (CANN's code and words).
pub const BLOCKED: Error = Error::Capture {
    code: ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC,
    reason: "operation not permitted when a stream is capturing and the specified capture mode is not relaxed",
};

/// Work a capture cannot record.
pub(crate) const NOT_CAPTURABLE: Error = Error::Capture {
    code: ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
    reason: "The stream is capturing and this work cannot be captured on the host runtime (notifies; capture kernels, copies, sets, events and host functions)",
};

/// Work queued on a stream while another thread ended its capture.
const ENDED: Error = Error::Capture {
    code: crate::base::error::ACL_ERROR_RT_STREAM_NOT_CAPTURED,
    reason: "The stream's capture ended while this work was being queued: queue it again",
};

/// Checks a capture mode value.
pub(crate) fn check_mode(mode: i32) -> Result<()> {
    if (MODE_GLOBAL..=MODE_RELAXED).contains(&mode) {
        Ok(())
    } else {
        Err(Error::InvalidParam {
            param: "mode",
            reason: "It is not an aclmdlRICaptureMode value",
        })
    }
}

/// What a capture records into.
pub(crate) enum Target {
    /// `aclmdlRICaptureBegin` / `aclmdlRICaptureToModelRIBegin`.
    Capture,
    /// `aclmdlRICaptureTaskUpdateBegin`: the new tasks of a group.
    Update(Arc<TaskGroup>),
    /// `aclmdlRIBuildBegin`: the model's bound streams.
    Build,
}

/// A capture in progress.
pub struct Capture {
    pub(crate) model: Arc<Model>,
    /// The model's handle (what `aclmdlRICaptureGetInfo` gives).
    pub(crate) model_handle: usize,
    /// Whether the model was made by this capture (and goes with it when it fails).
    pub(crate) owns_model: bool,
    pub(crate) mode: i32,
    pub(crate) thread: ThreadId,
    /// The stream handle the capture began on (0 for a build).
    pub(crate) origin: usize,
    pub(crate) target: Target,
    pub(crate) state: Mutex<State>,
}

/// What a capture has recorded so far.
#[derive(Default)]
pub(crate) struct State {
    pub(crate) lanes: Vec<Lane>,
    /// Every stream recording into the capture, by handle.
    pub(crate) streams: Vec<(usize, Arc<Stream>)>,
    /// Every stream that recorded into it (the model's streams).
    pub(crate) seen: Vec<usize>,
    /// An open task group: the stream that began it and its nodes.
    pub(crate) group: Option<(usize, Vec<Node>)>,
    /// Task groups ended in this capture (their handles).
    pub(crate) groups: Vec<usize>,
    /// Workspaces taken by launches while capturing.
    pub(crate) held: Vec<Held>,
    /// Other memory the capture hands to its model (`graph_memory`).
    pub(crate) releases: Vec<Release>,
    /// Why the capture failed.
    pub(crate) invalid: Option<Error>,
    /// Ended (or abandoned): streams no longer join it.
    pub(crate) ended: bool,
}

/// Live captures that forbid calls: (capture, thread that began it, mode).
static LIVE: Mutex<Vec<(Weak<Capture>, ThreadId, i32)>> = Mutex::new(Vec::new());
/// How many entries `LIVE` has: calls check it without the lock.
static LIVE_COUNT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's mode (`aclmdlRICaptureThreadExchangeMode`).
    static THREAD_MODE: Cell<i32> = const { Cell::new(MODE_GLOBAL) };
}

/// `aclmdlRICaptureThreadExchangeMode`: sets this thread's mode, returns the old one.
pub fn exchange_thread_mode(mode: i32) -> Result<i32> {
    check_mode(mode)?;
    Ok(THREAD_MODE.with(|m| m.replace(mode)))
}

/// Refuses a call that waits for the device while a live capture forbids
/// it to this thread, and invalidates the captures that forbid it.
pub fn refuse_if_capturing() -> Result<()> {
    if LIVE_COUNT.load(Ordering::Acquire) == 0 {
        return Ok(());
    }
    let mode = THREAD_MODE.with(Cell::get);
    if mode == MODE_RELAXED {
        return Ok(());
    }
    let me = std::thread::current().id();
    let binding: Vec<Arc<Capture>> = LIVE
        .lock()
        .iter()
        .filter(|(_, thread, m)| {
            *m != MODE_RELAXED && (*thread == me || (mode == MODE_GLOBAL && *m == MODE_GLOBAL))
        })
        .filter_map(|(c, ..)| c.upgrade())
        .collect();
    if binding.is_empty() {
        return Ok(());
    }
    for capture in binding {
        capture.invalidate(BLOCKED);
    }
    Err(BLOCKED)
}

impl Capture {
    /// A capture into `model`, not yet attached to any stream.
    pub(crate) fn new(
        model: Arc<Model>,
        model_handle: usize,
        owns_model: bool,
        mode: i32,
        origin: usize,
        target: Target,
    ) -> Arc<Self> {
        let capture = Arc::new(Capture {
            model,
            model_handle,
            owns_model,
            mode,
            thread: std::thread::current().id(),
            origin,
            target,
            state: Mutex::new(State::default()),
        });
        if matches!(capture.target, Target::Capture) {
            CAPTURES.fetch_add(1, Ordering::AcqRel);
        }
        if matches!(capture.target, Target::Capture) && mode != MODE_RELAXED {
            LIVE.lock()
                .push((Arc::downgrade(&capture), capture.thread, mode));
            LIVE_COUNT.fetch_add(1, Ordering::Release);
        }
        capture
    }

    /// Makes `stream` record into lane `lane` (a new lane when `lane` is
    /// `None`, with `head` for a build's first streams); the lane's index,
    /// or `None` once the capture has ended.
    pub(crate) fn attach(
        self: &Arc<Self>,
        handle: usize,
        stream: &Arc<Stream>,
        lane: Option<usize>,
        head: bool,
    ) -> Option<usize> {
        let mut state = self.state.lock();
        if state.ended {
            return None;
        }
        let lane = lane.unwrap_or_else(|| {
            state.lanes.push(Lane {
                stream: handle,
                head,
                nodes: Vec::new(),
            });
            state.lanes.len() - 1
        });
        if !state.streams.iter().any(|(h, _)| *h == handle) {
            state.streams.push((handle, Arc::clone(stream)));
        }
        if !state.seen.contains(&handle) {
            state.seen.push(handle);
        }
        // Under the state's lock: `finish` cannot pass between.
        stream.set_capture(Some((Arc::clone(self), lane)));
        Some(lane)
    }

    /// Stops `handle` from recording into the capture.
    pub(crate) fn detach(self: &Arc<Self>, handle: usize) {
        let mut state = self.state.lock();
        if let Some(at) = state.streams.iter().position(|(h, _)| *h == handle) {
            let (_, stream) = state.streams.remove(at);
            drop(state);
            stream.leave_capture(self);
        }
    }

    /// Ends the capture: every stream runs its work again, and the capture
    /// no longer forbids anything. Returns what it recorded.
    pub(crate) fn finish(self: &Arc<Self>) -> State {
        let mut state = {
            let mut now = self.state.lock();
            let state = std::mem::take(&mut *now);
            now.ended = true;
            state
        };
        for (_, stream) in state.streams.drain(..) {
            stream.leave_capture(self);
        }
        self.forget();
        state
    }

    /// Takes the capture off the list of those that forbid calls.
    fn forget(self: &Arc<Self>) {
        let mut live = LIVE.lock();
        let before = live.len();
        live.retain(|(c, ..)| c.strong_count() > 0 && !std::ptr::eq(c.as_ptr(), Arc::as_ptr(self)));
        LIVE_COUNT.fetch_sub(before - live.len(), Ordering::Release);
    }

    /// Marks the capture failed (the first reason stays).
    pub(crate) fn invalidate(&self, why: Error) {
        let mut state = self.state.lock();
        if state.invalid.is_none() {
            state.invalid = Some(why);
        }
    }

    /// True while streams may still join (an active, valid capture).
    pub(crate) fn is_open(&self) -> bool {
        let state = self.state.lock();
        !state.ended && state.invalid.is_none()
    }

    /// Records a task queued on a stream of lane `lane`.
    pub(crate) fn record_task(&self, lane: usize, task: Task) -> Result<()> {
        let node = match task {
            Task::Kernel {
                kernel,
                workspace,
                size,
                user_data,
                release: false,
            } => Node::Kernel {
                kernel,
                workspace,
                size,
                user_data,
            },
            Task::Copy { dst, src, count } => Node::Copy { dst, src, count },
            Task::Set { dst, value, count } => Node::Set { dst, value, count },
            // Notifies own data that runs once (host functions and
            // callbacks are captured before they get here); the caller
            // frees it when the call fails.
            _ => return Err(NOT_CAPTURABLE),
        };
        self.push(lane, node)
    }

    /// Appends `node` to lane `lane`, or to the open task group.
    pub(crate) fn push(&self, lane: usize, node: Node) -> Result<()> {
        let mut state = self.state.lock();
        if let Some(why) = state.invalid {
            return Err(why);
        }
        if state.ended {
            // Another thread ended the capture between this stream's look
            // at its capture and now.
            return Err(ENDED);
        }
        let stream = state.lanes.get(lane).map_or(0, |l| l.stream);
        match &mut state.group {
            Some((owner, nodes)) if *owner == stream || self.lanes_shared() => nodes.push(node),
            _ => match state.lanes.get_mut(lane) {
                Some(l) => l.nodes.push(node),
                None => {
                    return Err(Error::Internal {
                        reason: "a capture lost a stream's lane",
                    })
                }
            },
        }
        Ok(())
    }

    /// Whether every stream shares lane 0 (a capture or an update).
    fn lanes_shared(&self) -> bool {
        !matches!(self.target, Target::Build)
    }

    /// Keeps a workspace a launch took while capturing.
    pub(crate) fn hold(&self, held: Held) {
        self.state.lock().held.push(held);
    }

    /// Keeps memory the capture hands to its model (see `graph_memory`).
    pub(crate) fn keep_release(&self, release: Release) {
        self.state.lock().releases.push(release);
    }

    /// Records an event's record made on a capturing stream.
    pub(crate) fn record_event(self: &Arc<Self>, lane: usize, event: &Arc<Event>) -> Result<()> {
        self.push(lane, Node::Record(Arc::clone(event)))?;
        event.set_captured(Some(Arc::downgrade(self)));
        Ok(())
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if matches!(self.target, Target::Capture) {
            CAPTURES.fetch_sub(1, Ordering::AcqRel);
        }
        // Off the list even if never finished (an abandoned capture).
        if matches!(self.target, Target::Capture) && self.mode != MODE_RELAXED {
            let mut live = LIVE.lock();
            let before = live.len();
            live.retain(|(c, ..)| c.strong_count() > 0);
            LIVE_COUNT.fetch_sub(before - live.len(), Ordering::Release);
        }
    }
}
