//! The `aclmdlRI*` calls of the host runtime: capture, task groups and
//! their updates, conditions, the build API, replay and destruction (see
//! `capture` and `model`).

use super::capture::{self, check_mode, refuse_if_capturing, Capture, State, Target};
use super::host::HostRuntime;
use super::model::{
    drop_replay, run_replay, Condition, DestroyCallback, Model, Node, Phase, Replay, TaskGroup,
    COND_IF, COND_SWITCH, COND_WHILE, STREAM_FLAG_DEFAULT, STREAM_FLAG_HEAD,
};
use super::stream_worker::{Stream, Task};
use crate::base::error::{
    Error, Result, ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC, ACL_ERROR_RT_MODEL_CAPTURED,
    ACL_ERROR_RT_MODEL_UPDATE_FAILED, ACL_ERROR_RT_STREAM_CAPTURED,
    ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED, ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD,
    ACL_ERROR_RT_STREAM_NOT_CAPTURED, ACL_ERROR_RT_STREAM_UNJOINED,
    ACL_ERROR_STREAM_TASK_GROUP_STATUS,
};
use crate::base::ids::{ConditionHandle, ModelHandle, TaskGroupHandle};
use crate::registry::StreamKey;
use std::ffi::c_void;
use std::sync::Arc;

const NOT_A_MODEL: Error = Error::InvalidParam {
    param: "modelRI",
    reason: "It is not a live model running instance (it was destroyed, or was never returned by aclmdlRICaptureEnd, aclmdlRIBuildBegin or aclmdlRIAddCondTask)",
};
const NOT_A_GROUP: Error = Error::InvalidParam {
    param: "handle",
    reason: "It is not a live task group (its model was destroyed, or it was never returned by aclmdlRICaptureTaskGrpEnd)",
};
const NOT_A_CONDITION: Error = Error::InvalidParam {
    param: "handle",
    reason: "It is not a live condition handle (its model was destroyed, or it was never returned by aclmdlRICondHandleCreate)",
};
const DEFAULT_STREAM: Error = Error::Capture {
    code: ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC,
    reason: "The default stream cannot be captured: capture on a stream from aclrtCreateStream",
};
const NOT_CAPTURED: Error = Error::Capture {
    code: ACL_ERROR_RT_STREAM_NOT_CAPTURED,
    reason: "The stream is not capturing",
};
const ALREADY_CAPTURING: Error = Error::Capture {
    code: ACL_ERROR_RT_STREAM_CAPTURED,
    reason: "The stream is already capturing, or is bound to a model being built",
};
const UNMATCHED: Error = Error::Capture {
    code: ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED,
    reason: "The capture was not begun on this stream (the stream joined it through an event): end it on the stream that began it",
};
const WRONG_THREAD: Error = Error::Capture {
    code: ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD,
    reason: "The capture was begun by another thread, and its mode is not relaxed: end it on the thread that began it",
};
const GROUP_STATUS: Error = Error::Capture {
    code: ACL_ERROR_STREAM_TASK_GROUP_STATUS,
    reason: "A task group is already open on the capture (aclmdlRICaptureTaskGrpBegin), or none is (aclmdlRICaptureTaskGrpEnd), or one was left open at aclmdlRICaptureEnd",
};
const NOT_READY: Error = Error::Capture {
    code: ACL_ERROR_RT_MODEL_CAPTURED,
    reason: "The model is not ready: its capture or build has not ended",
};
const RECORDING: Error = Error::Capture {
    code: ACL_ERROR_RT_MODEL_CAPTURED,
    reason: "The model is being captured or built: end its capture or build first",
};
const JOINED_DESTROYED: Error = Error::Capture {
    code: ACL_ERROR_RT_STREAM_UNJOINED,
    reason: "A stream that joined the capture was destroyed before the capture ended",
};
const NOT_BOUND: Error = Error::InvalidParam {
    param: "stream",
    reason: "It is not bound to a model being built (aclmdlRIBindStream)",
};

/// A bad flag or value of the build and condition calls.
fn invalid(param: &'static str, reason: &'static str) -> Error {
    Error::InvalidParam { param, reason }
}

impl HostRuntime {
    pub(crate) fn model(&self, handle: usize) -> Result<Arc<Model>> {
        ModelHandle::from_raw(handle)
            .and_then(|h| self.models.with(h, Arc::clone))
            .ok_or(NOT_A_MODEL)
    }

    /// A live stream of this runtime, never the default stream (NULL).
    fn capture_stream(&self, stream: Option<StreamKey>) -> Result<(usize, Arc<Stream>)> {
        let key = stream.ok_or(DEFAULT_STREAM)?;
        let (key, s) = self.resolve_stream(Some(key))?;
        let handle = key.get().get();
        let is_default = self
            .with_stream(handle, |e| e.context)
            .and_then(|ctx| self.with_context(ctx, |c| c.default_stream == Some(handle)))
            .unwrap_or(false);
        if is_default {
            return Err(DEFAULT_STREAM);
        }
        Ok((handle, s))
    }

    /// `aclmdlRICaptureBegin`: `stream`'s work is recorded into a new model
    /// until `aclmdlRICaptureEnd`.
    pub fn capture_begin(&self, stream: Option<StreamKey>, mode: i32) -> Result<()> {
        check_mode(mode)?;
        let (handle, s) = self.capture_stream(stream)?;
        if s.capture().is_some() {
            return Err(ALREADY_CAPTURING);
        }
        let model = Model::new(Phase::Empty);
        let model_handle = self.models.insert(Arc::clone(&model))?.get();
        self.begin_into(model, model_handle, true, mode, handle, &s);
        Ok(())
    }

    fn begin_into(
        &self,
        model: Arc<Model>,
        model_handle: usize,
        owns_model: bool,
        mode: i32,
        handle: usize,
        s: &Arc<Stream>,
    ) {
        let capture = Capture::new(
            Arc::clone(&model),
            model_handle,
            owns_model,
            mode,
            handle,
            Target::Capture,
        );
        *model.phase.lock() = Phase::Recording(Arc::clone(&capture));
        capture.attach(handle, s, None, true);
    }

    /// `aclmdlRICaptureToModelRIBegin`: as `aclmdlRICaptureBegin`, into a
    /// model `aclmdlRIAddCondTask` made.
    pub fn capture_to_model_begin(
        &self,
        stream: Option<StreamKey>,
        model: usize,
        mode: i32,
    ) -> Result<()> {
        check_mode(mode)?;
        let target = self.model(model)?;
        let (handle, s) = self.capture_stream(stream)?;
        if s.capture().is_some() {
            return Err(ALREADY_CAPTURING);
        }
        if !matches!(*target.phase.lock(), Phase::Empty) {
            return Err(Error::Capture {
                code: ACL_ERROR_RT_MODEL_CAPTURED,
                reason: "The model was captured or built already: capture into an empty model from aclmdlRIAddCondTask",
            });
        }
        self.begin_into(target, model, false, mode, handle, &s);
        Ok(())
    }

    /// `aclmdlRICaptureGetInfo`: the stream's capture status and model (0
    /// when it is not capturing).
    pub fn capture_info(&self, stream: Option<StreamKey>) -> Result<(i32, usize)> {
        let (_, s) = self.resolve_stream(stream)?;
        Ok(match s.capture() {
            Some((c, _)) if matches!(c.target, Target::Capture) => {
                let status = if c.state.lock().invalid.is_some() {
                    capture::STATUS_INVALIDATED
                } else {
                    capture::STATUS_ACTIVE
                };
                (status, c.model_handle)
            }
            _ => (capture::STATUS_NONE, 0),
        })
    }

    /// `aclmdlRICaptureEnd`: ends the capture begun on `stream`; the model.
    /// A capture that failed leaves nothing: its model, tasks and
    /// workspaces go, and the call says why it failed.
    pub fn capture_end(&self, stream: Option<StreamKey>) -> Result<usize> {
        let (handle, s) = self.capture_stream(stream).map_err(|_| NOT_CAPTURED)?;
        let capture = match s.capture() {
            Some((c, _)) if matches!(c.target, Target::Capture) => c,
            _ => return Err(NOT_CAPTURED),
        };
        if capture.origin != handle {
            return Err(UNMATCHED);
        }
        if capture.mode != capture::MODE_RELAXED && capture.thread != std::thread::current().id() {
            return Err(WRONG_THREAD);
        }
        let state = capture.finish();
        let failed = state
            .invalid
            .or_else(|| state.group.as_ref().map(|_| GROUP_STATUS));
        if let Some(why) = failed {
            self.drop_capture(&capture, state);
            return Err(why);
        }
        Ok(self.complete(&capture, state))
    }

    /// Makes the capture's model ready with what it recorded.
    fn complete(&self, capture: &Arc<Capture>, state: State) -> usize {
        let model = &capture.model;
        model.keep(state.held);
        model.keep_releases(state.releases);
        *model.streams.lock() = state.seen;
        model.owned.lock().groups.extend(state.groups);
        *model.phase.lock() = Phase::Ready(Arc::new(state.lanes));
        capture.model_handle
    }

    /// A failed or abandoned capture: what it recorded goes (its tasks, the
    /// workspaces it took, its task groups), and its model if it made it.
    fn drop_capture(&self, capture: &Arc<Capture>, state: State) {
        for g in &state.groups {
            if let Some(h) = TaskGroupHandle::from_raw(*g) {
                self.task_groups.remove(h);
            }
        }
        *capture.model.phase.lock() = Phase::Empty;
        if capture.owns_model {
            if let Some(h) = ModelHandle::from_raw(capture.model_handle) {
                self.models.remove(h);
            }
            self.release_owned(&capture.model);
        }
        drop(state);
    }

    /// Removes the handles a model owns: its task groups, conditions, and
    /// the models of its conditional tasks (abandoning their captures).
    fn release_owned(&self, model: &Model) {
        let owned = std::mem::take(&mut *model.owned.lock());
        for g in owned.groups {
            if let Some(h) = TaskGroupHandle::from_raw(g) {
                self.task_groups.remove(h);
            }
        }
        for c in owned.conditions {
            if let Some(h) = ConditionHandle::from_raw(c) {
                self.conditions.remove(h);
            }
        }
        for m in owned.models {
            let Some(sub) = ModelHandle::from_raw(m).and_then(|h| self.models.remove(h)) else {
                continue;
            };
            let recording = match &*sub.phase.lock() {
                Phase::Recording(c) => Some(Arc::clone(c)),
                _ => None,
            };
            if let Some(c) = recording {
                let state = c.finish();
                self.drop_capture(&c, state);
            }
            self.release_owned(&sub);
        }
    }

    /// A stream being destroyed leaves its capture: a capture it began
    /// fails and leaves nothing, one it joined fails at its end, a task
    /// update is dropped, and a model being built keeps its tasks.
    pub(crate) fn leave_capture_on_destroy(&self, handle: usize, s: &Stream) {
        let Some((capture, _)) = s.capture() else {
            return;
        };
        match capture.target {
            Target::Capture if capture.origin != handle => {
                capture.invalidate(JOINED_DESTROYED);
                capture.detach(handle);
            }
            Target::Capture | Target::Update(_) => {
                let state = capture.finish();
                self.drop_capture(&capture, state);
            }
            Target::Build => capture.detach(handle),
        }
    }

    /// `aclmdlRICaptureTaskGrpBegin`: the tasks captured from now on form
    /// a group that `aclmdlRICaptureTaskUpdateBegin` can replace.
    pub fn task_group_begin(&self, stream: Option<StreamKey>) -> Result<()> {
        let (handle, capture, _) = self.capturing(stream)?;
        let mut state = capture.state.lock();
        if state.group.is_some() {
            return Err(GROUP_STATUS);
        }
        state.group = Some((handle, Vec::new()));
        Ok(())
    }

    /// `aclmdlRICaptureTaskGrpEnd`: closes the group; its handle.
    pub fn task_group_end(&self, stream: Option<StreamKey>) -> Result<usize> {
        let (_, capture, lane) = self.capturing(stream)?;
        let nodes = match capture.state.lock().group.take() {
            Some((_, nodes)) => nodes,
            None => return Err(GROUP_STATUS),
        };
        let group = Arc::new(TaskGroup::new(nodes, Arc::downgrade(&capture.model)));
        let handle = self.task_groups.insert(Arc::clone(&group))?.get();
        capture.state.lock().groups.push(handle);
        if let Err(e) = capture.push(lane, Node::Group(group)) {
            if let Some(h) = TaskGroupHandle::from_raw(handle) {
                self.task_groups.remove(h);
            }
            return Err(e);
        }
        Ok(handle)
    }

    /// The capture `stream` records into (a capture, not an update or a build).
    fn capturing(&self, stream: Option<StreamKey>) -> Result<(usize, Arc<Capture>, usize)> {
        let (handle, s) = self.capture_stream(stream).map_err(|_| NOT_CAPTURED)?;
        match s.capture() {
            Some((c, lane)) if matches!(c.target, Target::Capture) => Ok((handle, c, lane)),
            _ => Err(NOT_CAPTURED),
        }
    }

    /// `aclmdlRICaptureTaskUpdateBegin`: the work queued on `stream` from
    /// now on is recorded as the group's new tasks.
    pub fn task_update_begin(&self, stream: Option<StreamKey>, group: usize) -> Result<()> {
        let group = TaskGroupHandle::from_raw(group)
            .and_then(|h| self.task_groups.with(h, Arc::clone))
            .ok_or(NOT_A_GROUP)?;
        let (handle, s) = self.capture_stream(stream)?;
        if s.capture().is_some() {
            return Err(ALREADY_CAPTURING);
        }
        let model = group
            .model
            .upgrade()
            .filter(|m| m.lanes().is_some())
            .ok_or(Error::Capture {
                code: ACL_ERROR_RT_MODEL_UPDATE_FAILED,
                reason: "The task group's model has not been captured completely",
            })?;
        let capture = Capture::new(
            model,
            0,
            false,
            capture::MODE_RELAXED,
            handle,
            Target::Update(group),
        );
        capture.attach(handle, &s, None, true);
        Ok(())
    }

    /// `aclmdlRICaptureTaskUpdateEnd`: replays from now on run the new
    /// tasks, which must match the old ones in number and kind.
    pub fn task_update_end(&self, stream: Option<StreamKey>) -> Result<()> {
        let (handle, s) = self.capture_stream(stream).map_err(|_| NOT_CAPTURED)?;
        let capture = match s.capture() {
            Some((c, _)) if matches!(c.target, Target::Update(_)) => c,
            _ => return Err(NOT_CAPTURED),
        };
        if capture.origin != handle {
            return Err(UNMATCHED);
        }
        let mut state = capture.finish();
        let Target::Update(group) = &capture.target else {
            return Err(NOT_CAPTURED);
        };
        if let Some(why) = state.invalid {
            return Err(why);
        }
        let nodes = state
            .lanes
            .first_mut()
            .map(|l| std::mem::take(&mut l.nodes))
            .unwrap_or_default();
        let old = group.shape();
        let new: Vec<&str> = nodes.iter().map(Node::kind).collect();
        if old != new {
            return Err(Error::Capture {
                code: ACL_ERROR_RT_MODEL_UPDATE_FAILED,
                reason: "The update's tasks differ from the group's in number or kind",
            });
        }
        group.replace(nodes);
        capture.model.keep(std::mem::take(&mut state.held));
        Ok(())
    }

    /// `aclmdlRIExecuteAsync`: queues a replay of the model on `stream`
    /// (on a capturing stream, the replay is captured).
    pub fn execute_model(&self, model: usize, stream: Option<StreamKey>) -> Result<()> {
        let model = self.model(model)?;
        if model.lanes().is_none() {
            return Err(NOT_READY);
        }
        let (key, s) = self.resolve_stream(stream)?;
        if let Some((capture, lane)) = s.capture() {
            return capture.push(lane, Node::Model(model));
        }
        let mut records = Vec::new();
        model.each_record(&mut |e| {
            records.push(Some((Arc::clone(e), self.reserve_record(e, key, &s))));
        });
        let replay = Box::new(Replay {
            aborts: model.aborts(),
            model,
            records,
            device: s.device(),
            heaps: Arc::clone(&self.heaps),
        });
        let raw = Box::into_raw(replay).cast();
        let queued = s.enqueue(Task::Owning {
            run: run_replay,
            size: 0,
            data: raw,
            free: drop_replay,
            kernel: true,
        });
        if queued.is_err() {
            // SAFETY: the box made above, which the task never took.
            unsafe { drop_replay(raw) };
        }
        queued
    }

    /// `aclmdlRIExecute`: a replay on the current context's default stream,
    /// waited for (`timeout_ms` -1: no limit).
    pub fn execute_model_sync(&self, model: usize, timeout_ms: i32) -> Result<()> {
        if timeout_ms < -1 {
            return Err(invalid(
                "timeout",
                "It must be -1 (no limit), 0 or a number of milliseconds",
            ));
        }
        refuse_if_capturing()?;
        self.execute_model(model, None)?;
        self.synchronize_stream_timeout(None, timeout_ms)
    }

    /// `aclmdlRIDestroy`: the handle goes at once; the model's workspaces go
    /// back to their allocators once its queued replays have run.
    pub fn destroy_model(&self, model: usize) -> Result<()> {
        let m = self.model(model)?;
        if matches!(*m.phase.lock(), Phase::Recording(_)) {
            return Err(RECORDING);
        }
        ModelHandle::from_raw(model)
            .and_then(|h| self.models.remove(h))
            .ok_or(NOT_A_MODEL)?;
        self.release_owned(&m);
        let callbacks = std::mem::take(&mut *m.on_destroy.lock());
        for (f, data) in callbacks {
            // A callback that throws has nothing to report to: it ends there.
            // SAFETY: the registrant's contract: `f` may be called with its data.
            let _ = crate::base::foreign_call::call(|| unsafe { f(data as *mut c_void) });
        }
        Ok(())
    }

    /// `aclmdlRISetName`.
    pub fn set_model_name(&self, model: usize, name: &str) -> Result<()> {
        *self.model(model)?.name.lock() = name.to_owned();
        Ok(())
    }

    /// `aclmdlRIGetName`: the name set, or "" when none was.
    pub fn model_name(&self, model: usize) -> Result<String> {
        Ok(self.model(model)?.name.lock().clone())
    }

    /// `aclmdlRIGetId`: the model's number, unique in the process.
    pub fn model_id(&self, model: usize) -> Result<u32> {
        Ok(self.model(model)?.id)
    }

    /// `aclmdlRIGetStreams`: the streams whose work the model holds (the
    /// capture's, or the build's bound streams), once it is ready.
    pub fn model_streams(&self, model: usize) -> Result<Vec<usize>> {
        let m = self.model(model)?;
        if m.lanes().is_none() {
            return Err(NOT_READY);
        }
        let streams = m.streams.lock().clone();
        Ok(streams)
    }

    /// `aclmdlRIDestroyRegisterCallback`: `f(user_data)` when the model is
    /// destroyed (again for the same `f`: the data is replaced).
    pub fn on_model_destroy(
        &self,
        model: usize,
        f: DestroyCallback,
        user_data: usize,
    ) -> Result<()> {
        let m = self.model(model)?;
        let mut callbacks = m.on_destroy.lock();
        match callbacks
            .iter_mut()
            .find(|(g, _)| *g as usize == f as usize)
        {
            Some(entry) => entry.1 = user_data,
            None => callbacks.push((f, user_data)),
        }
        Ok(())
    }

    /// `aclmdlRIDestroyUnregisterCallback`.
    pub fn forget_model_destroy(&self, model: usize, f: DestroyCallback) -> Result<()> {
        let m = self.model(model)?;
        let mut callbacks = m.on_destroy.lock();
        let before = callbacks.len();
        callbacks.retain(|(g, _)| *g as usize != f as usize);
        if callbacks.len() == before {
            return Err(invalid("func", "It is not registered on this model"));
        }
        Ok(())
    }

    /// `aclmdlRIAbort`: the model's replays stop at their next task.
    pub fn abort_model(&self, model: usize) -> Result<()> {
        self.model(model)?.abort();
        Ok(())
    }

    /// How many workspaces the model holds for its replays.
    pub fn model_workspaces(&self, model: usize) -> Result<usize> {
        Ok(self.model(model)?.held_workspaces())
    }

    /// `aclmdlRIDebugJsonPrint`: the model's streams and tasks as JSON.
    pub fn model_json(&self, model: usize) -> Result<String> {
        let m = self.model(model)?;
        if m.lanes().is_none() {
            return Err(NOT_READY);
        }
        Ok(m.describe())
    }

    /// `aclmdlRIBuildBegin`: a model whose streams are bound to it and
    /// whose tasks are the work queued on them until `aclmdlRIBuildEnd`.
    pub fn build_begin(&self, flag: u32) -> Result<usize> {
        if flag != 0 {
            return Err(invalid("flag", "It is reserved and must be 0"));
        }
        let model = Model::new(Phase::Empty);
        let handle = self.models.insert(Arc::clone(&model))?.get();
        let capture = Capture::new(
            Arc::clone(&model),
            handle,
            true,
            capture::MODE_RELAXED,
            0,
            Target::Build,
        );
        *model.phase.lock() = Phase::Recording(capture);
        Ok(handle)
    }

    /// The build in progress of `model`.
    fn building(&self, model: usize) -> Result<Arc<Capture>> {
        match &*self.model(model)?.phase.lock() {
            Phase::Recording(c) if matches!(c.target, Target::Build) => Ok(Arc::clone(c)),
            _ => Err(invalid(
                "modelRI",
                "It is not being built (aclmdlRIBuildBegin, before aclmdlRIBuildEnd)",
            )),
        }
    }

    /// `aclmdlRIBindStream`: the work queued on `stream` becomes the
    /// model's (`flag`: `ACL_MODEL_STREAM_FLAG_HEAD` for a stream that
    /// runs when the model starts, `_DEFAULT` for one that runs when activated).
    pub fn bind_stream(&self, model: usize, stream: Option<StreamKey>, flag: u32) -> Result<()> {
        if flag != STREAM_FLAG_HEAD && flag != STREAM_FLAG_DEFAULT {
            return Err(invalid(
                "flag",
                "It must be ACL_MODEL_STREAM_FLAG_HEAD or ACL_MODEL_STREAM_FLAG_DEFAULT",
            ));
        }
        let capture = self.building(model)?;
        let (handle, s) = self.capture_stream(stream)?;
        if s.capture().is_some() {
            return Err(ALREADY_CAPTURING);
        }
        capture
            .attach(handle, &s, None, flag == STREAM_FLAG_HEAD)
            .map(drop)
            .ok_or(invalid("modelRI", "Its build ended meanwhile"))
    }

    /// The build `stream` is bound to, and its lane.
    pub(crate) fn bound(&self, stream: Option<StreamKey>) -> Result<(Arc<Capture>, usize)> {
        let (_, s) = self.capture_stream(stream).map_err(|_| NOT_BOUND)?;
        match s.capture() {
            Some((c, lane)) if matches!(c.target, Target::Build) => Ok((c, lane)),
            _ => Err(NOT_BOUND),
        }
    }

    /// Whether `stream` is bound to the build `capture`.
    fn bound_to(&self, capture: &Arc<Capture>, stream: Option<StreamKey>) -> Result<usize> {
        let (c, _) = self.bound(stream)?;
        if !Arc::ptr_eq(&c, capture) {
            return Err(NOT_BOUND);
        }
        Ok(stream.map_or(0, |k| k.get().get()))
    }

    /// `aclmdlRIEndTask`: the model's end task on `stream`.
    pub fn end_task(&self, model: usize, stream: Option<StreamKey>) -> Result<()> {
        let capture = self.building(model)?;
        let (c, lane) = self.bound(stream)?;
        if !Arc::ptr_eq(&c, &capture) {
            return Err(NOT_BOUND);
        }
        capture.push(lane, Node::End)
    }

    /// `aclmdlRIBuildEnd`: the model is ready; its streams run their own
    /// work again.
    pub fn build_end(&self, model: usize) -> Result<()> {
        let capture = self.building(model)?;
        let state = capture.finish();
        self.complete(&capture, state);
        Ok(())
    }

    /// `aclmdlRIUnbindStream`: `stream` leaves the model (its tasks stay).
    pub fn unbind_stream(&self, model: usize, stream: Option<StreamKey>) -> Result<()> {
        let m = self.model(model)?;
        let (handle, _) = self.capture_stream(stream).map_err(|_| NOT_BOUND)?;
        if let Ok(capture) = self.building(model) {
            capture.detach(handle);
            return Ok(());
        }
        match m.lanes() {
            Some(lanes) if lanes.iter().any(|l| l.stream == handle) => Ok(()),
            _ => Err(invalid("stream", "It is not bound to the model")),
        }
    }

    /// `aclrtActiveStream`: on a bound stream, a task that runs
    /// `active`'s tasks (a stream bound to the same model).
    pub fn active_stream(
        &self,
        active: Option<StreamKey>,
        stream: Option<StreamKey>,
    ) -> Result<()> {
        let (capture, lane) = self.bound(stream)?;
        let target = self.bound_to(&capture, active)?;
        capture.push(lane, Node::Activate(target))
    }

    /// `aclrtSwitchStream`: on a bound stream, a task that runs
    /// `on_true`'s tasks when `*left cond *right` holds (`cond`:
    /// `aclrtCondition`; `data_type`: `ACL_RT_SWITCH_INT32` or `_INT64`),
    /// else `on_false`'s, if given.
    #[allow(clippy::too_many_arguments)]
    pub fn switch_stream(
        &self,
        left: *const u8,
        cond: i32,
        right: *const u8,
        data_type: i32,
        on_true: Option<StreamKey>,
        on_false: Option<StreamKey>,
        stream: Option<StreamKey>,
    ) -> Result<()> {
        if !(0..=5).contains(&cond) {
            return Err(invalid("cond", "It is not an aclrtCondition value"));
        }
        let wide = match data_type {
            0 => false,
            1 => true,
            _ => {
                return Err(invalid(
                    "dataType",
                    "It is not an aclrtCompareDataType value",
                ))
            }
        };
        let size = if wide { 8 } else { 4 };
        self.check_device_range(left, size, "leftValue", true)?;
        self.check_device_range(right, size, "rightValue", true)?;
        let (capture, lane) = self.bound(stream)?;
        let on_true = self.bound_to(&capture, on_true)?;
        let on_false = match on_false {
            Some(k) => Some(self.bound_to(&capture, Some(k))?),
            None => None,
        };
        capture.push(
            lane,
            Node::Switch {
                left,
                right,
                cond,
                wide,
                on_true,
                on_false,
            },
        )
    }

    /// `aclmdlRICondHandleCreate`: a condition of `model`, a 64-bit value in
    /// device memory set to `default` each time the model starts
    /// (`ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT`).
    pub fn condition_create(&self, model: usize, default: u32, flag: i32) -> Result<usize> {
        if flag != 1 {
            return Err(invalid(
                "flag",
                "It must be ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT",
            ));
        }
        let m = self.model(model)?;
        let (_, device) = self.current_context()?;
        let memory = Arc::clone(self.device(device as i32)?.memory());
        let condition = Arc::new(Condition::new(memory, u64::from(default))?);
        let handle = self.conditions.insert(Arc::clone(&condition))?.get();
        m.conditions.lock().push(condition);
        m.owned.lock().conditions.push(handle);
        Ok(handle)
    }

    /// `aclmdlRICondHandleGetCondPtr`: where the condition's value lives.
    pub fn condition_ptr(&self, condition: usize) -> Result<*mut u64> {
        ConditionHandle::from_raw(condition)
            .and_then(|h| self.conditions.with(h, |c| c.ptr()))
            .ok_or(NOT_A_CONDITION)
    }

    /// `aclmdlRIAddCondTask`: on a capturing stream, a conditional task
    /// over `size` new empty models (captured next with
    /// `aclmdlRICaptureToModelRIBegin`); their handles.
    pub fn add_condition_task(
        &self,
        condition: usize,
        kind: i32,
        size: u32,
        stream: Option<StreamKey>,
        flags: u32,
    ) -> Result<Vec<usize>> {
        let cond = ConditionHandle::from_raw(condition)
            .and_then(|h| self.conditions.with(h, Arc::clone))
            .ok_or(NOT_A_CONDITION)?;
        let fits = match kind {
            COND_IF => size == 1 || size == 2,
            COND_WHILE => size == 1,
            COND_SWITCH => size > 0 && size <= 1024,
            _ => return Err(invalid("type", "It is not an aclmdlRICondTaskType value")),
        };
        if !fits {
            return Err(invalid(
                "size",
                "It must be 1 or 2 for IF, 1 for WHILE, from 1 to 1024 for SWITCH",
            ));
        }
        if flags != 0 {
            return Err(invalid("flags", "It is reserved and must be 0"));
        }
        let (_, capture, lane) = self.capturing(stream)?;
        let mut models = Vec::with_capacity(size as usize);
        let mut handles = Vec::with_capacity(size as usize);
        for _ in 0..size {
            let m = Model::new(Phase::Empty);
            match self.models.insert(Arc::clone(&m)) {
                Ok(h) => {
                    handles.push(h.get());
                    models.push(m);
                }
                Err(e) => {
                    self.forget_models(&handles);
                    return Err(e);
                }
            }
        }
        if let Err(e) = capture.push(lane, Node::Cond { cond, kind, models }) {
            self.forget_models(&handles);
            return Err(e);
        }
        capture.model.owned.lock().models.extend(&handles);
        Ok(handles)
    }

    fn forget_models(&self, handles: &[usize]) {
        for h in handles.iter().filter_map(|&h| ModelHandle::from_raw(h)) {
            self.models.remove(h);
        }
    }

    /// The number of live models (tests).
    pub fn live_models(&self) -> usize {
        self.models.len()
    }
}
