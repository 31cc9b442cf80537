//! Model running instances (`aclmdlRI`): what a capture or a build
//! recorded, and its replay.
//!
//! A model is lanes of `Node`s. A replay (`aclmdlRIExecuteAsync`) is one
//! task on the replay stream that runs the nodes in order on the stream's
//! worker: the model's head lanes, and the lanes that activations and
//! switches reach. Kernels run with the workspaces their capture took,
//! held by the model and given back to their allocator when the last of
//! the model and its queued replays goes: a replay takes nothing from any
//! allocator. The records of events a model makes are numbered when the
//! replay is queued, so a wait queued after `aclmdlRIExecuteAsync` waits
//! for them, as for any record.

use super::callbacks::HostCall;
use super::capture::Capture;
use super::events::Event;
use super::labels::{Label, LabelList};
use super::memory::{DeviceHeap, Lookup};
use super::stream_worker::{current_task_cancelled, KernelFn};
use super::workspace::WorkspaceAllocator;
use crate::base::descriptor::Callbacks;
use crate::base::foreign_call::{self, Callback};
use parking_lot::Mutex;
use std::ffi::c_void;
use std::fmt::Write;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// `ACL_MODEL_STREAM_FLAG_HEAD`: the stream runs when the model starts.
pub const STREAM_FLAG_HEAD: u32 = 0;
/// `ACL_MODEL_STREAM_FLAG_DEFAULT`: the stream runs when activated.
pub const STREAM_FLAG_DEFAULT: u32 = 0x7FFF_FFFF;

/// `ACL_MODEL_RI_COND_TYPE_IF`: the first model when the condition is not 0, else the second.
pub const COND_IF: i32 = 0;
/// `ACL_MODEL_RI_COND_TYPE_WHILE`: the model while the condition is not 0.
pub const COND_WHILE: i32 = 1;
/// `ACL_MODEL_RI_COND_TYPE_SWITCH`: the model the condition indexes.
pub const COND_SWITCH: i32 = 2;

/// How deep activations, conditions and nested models may go in one replay.
const MAX_DEPTH: u32 = 64;

/// One recorded unit of work.
pub(crate) enum Node {
    /// A kernel with the workspace its capture took.
    Kernel {
        kernel: KernelFn,
        workspace: *mut c_void,
        size: usize,
        user_data: *mut c_void,
    },
    Copy {
        dst: *mut u8,
        src: *const u8,
        count: usize,
    },
    Set {
        dst: *mut u8,
        value: u8,
        count: usize,
    },
    /// A record of the event (numbered when the replay is queued).
    Record(Arc<Event>),
    /// A wait on an event recorded outside the capture. External (an
    /// `ACL_EVENT_EXTERNAL` event, or an `ACL_EVENT_WAIT_EXTERNAL` wait):
    /// until a record of it has completed since its last reset (the
    /// device's event flag); else as an ordinary wait made when the replay
    /// reaches it (for the event's last record then; none: no wait).
    Wait {
        event: Arc<Event>,
        external: bool,
    },
    Reset(Arc<Event>),
    /// A host function or callback (`aclrtLaunchHostFunc`, `aclrtLaunchCallback`).
    Host(Arc<HostCall>),
    /// An updatable task group.
    Group(Arc<TaskGroup>),
    /// A conditional task (`aclmdlRIAddCondTask`).
    Cond {
        cond: Arc<Condition>,
        kind: i32,
        models: Vec<Arc<Model>>,
    },
    /// A replay of another model, captured.
    Model(Arc<Model>),
    /// `aclrtActiveStream`: runs the lane of a bound stream.
    Activate(usize),
    /// `aclrtSwitchStream`: runs `on_true`'s lane when `*left cond *right`.
    Switch {
        left: *const u8,
        right: *const u8,
        cond: i32,
        wide: bool,
        on_true: usize,
        on_false: Option<usize>,
    },
    /// `aclrtSetLabel`: a place a label switch can carry on from.
    Label(Arc<Label>),
    /// `aclrtSwitchLabelByIndex`: carries on after the label the
    /// `uint32_t` at `index` picks among the first `max` of `labels`.
    LabelSwitch {
        index: *const u8,
        max: u32,
        labels: LabelList,
    },
    /// `aclmdlRIEndTask`.
    End,
}

// SAFETY: a node's pointers are handed over with the call that recorded
// it, as a task's are (`stream_worker::Task`), and only a replay's worker
// uses them; what they point to is the caller's to keep alive.
unsafe impl Send for Node {}
// SAFETY: as above; a replay only reads the node.
unsafe impl Sync for Node {}

impl Node {
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Node::Kernel { .. } => "KERNEL",
            Node::Copy { .. } => "MEMCPY",
            Node::Set { .. } => "MEMSET",
            Node::Record(_) => "EVENT_RECORD",
            Node::Wait { .. } => "EVENT_WAIT",
            Node::Reset(_) => "EVENT_RESET",
            Node::Host(_) => "HOST_FUNC",
            Node::Group(_) => "TASK_GROUP",
            Node::Cond { .. } => "CONDITION",
            Node::Model(_) => "MODEL",
            Node::Activate(_) => "STREAM_ACTIVE",
            Node::Switch { .. } => "STREAM_SWITCH",
            Node::Label(_) => "LABEL_SET",
            Node::LabelSwitch { .. } => "LABEL_SWITCH",
            Node::End => "MODEL_END",
        }
    }
}

/// The nodes of one stream.
pub(crate) struct Lane {
    /// The stream's handle.
    pub(crate) stream: usize,
    /// Runs when the model starts.
    pub(crate) head: bool,
    pub(crate) nodes: Vec<Node>,
}

/// An updatable group of a captured model's tasks (`aclrtTaskGrp`).
pub struct TaskGroup {
    nodes: Mutex<Arc<Vec<Node>>>,
    pub(crate) model: Weak<Model>,
}

impl TaskGroup {
    pub(crate) fn new(nodes: Vec<Node>, model: Weak<Model>) -> Self {
        TaskGroup {
            nodes: Mutex::new(Arc::new(nodes)),
            model,
        }
    }

    /// The tasks a replay runs now.
    fn current(&self) -> Arc<Vec<Node>> {
        Arc::clone(&self.nodes.lock())
    }

    /// How many tasks the group has, and their kinds.
    pub(crate) fn shape(&self) -> Vec<&'static str> {
        self.nodes.lock().iter().map(Node::kind).collect()
    }

    /// Puts `nodes` in place of the group's tasks, for replays from now on.
    pub(crate) fn replace(&self, nodes: Vec<Node>) {
        *self.nodes.lock() = Arc::new(nodes);
    }
}

/// A condition of a captured model (`aclmdlRICondHandle`): a 64-bit value
/// in device memory, set to its default each time its model starts.
pub struct Condition {
    ptr: NonNull<u8>,
    memory: Arc<DeviceHeap>,
    default: u64,
}

// SAFETY: the value is device memory the condition owns; it is read and
// written whole, by replays and by the program's copies, as on a device.
unsafe impl Send for Condition {}
// SAFETY: as above.
unsafe impl Sync for Condition {}

impl Condition {
    /// A condition in `memory` with `default`.
    pub(crate) fn new(memory: Arc<DeviceHeap>, default: u64) -> crate::base::error::Result<Self> {
        let ptr = memory.alloc(std::mem::size_of::<u64>())?;
        let condition = Condition {
            ptr,
            memory,
            default,
        };
        condition.write(default);
        Ok(condition)
    }

    /// Where the value lives (`aclmdlRICondHandleGetCondPtr`).
    pub(crate) fn ptr(&self) -> *mut u64 {
        self.ptr.as_ptr().cast()
    }

    fn read(&self) -> u64 {
        // SAFETY: the condition's own 8 bytes of device memory, page-aligned.
        unsafe { self.ptr().read_volatile() }
    }

    fn write(&self, value: u64) {
        // SAFETY: as in `read`.
        unsafe { self.ptr().write_volatile(value) }
    }
}

impl Drop for Condition {
    fn drop(&mut self) {
        let _ = self.memory.free(self.ptr.as_ptr());
    }
}

/// A workspace a launch took while capturing, kept for every replay.
pub(crate) enum Held {
    /// From the stream's registered allocator: its block, given back with
    /// the `free` that goes with the `alloc` that made it.
    Registered {
        callbacks: Callbacks,
        block: *mut c_void,
        stream: usize,
        descriptor: usize,
        /// The observer told of the hold (tracking was on), told of the release.
        observer: Option<&'static dyn crate::registry::observer::StreamObserver>,
    },
    /// From the runtime's workspace allocator.
    Default {
        allocator: &'static dyn WorkspaceAllocator,
        memory: Arc<DeviceHeap>,
        ptr: NonNull<u8>,
    },
}

// SAFETY: a block is the allocator's to give back from any thread, as CANN
// gives workspaces back from the thread that destroys the model.
unsafe impl Send for Held {}

impl Drop for Held {
    fn drop(&mut self) {
        match self {
            Held::Registered {
                callbacks,
                block,
                stream,
                descriptor,
                observer,
            } => {
                if let Some(o) = observer {
                    o.workspace_released(*block as usize);
                }
                let (stream, descriptor) = (*stream, *descriptor);
                // SAFETY: `free` of the allocator whose `alloc` returned the
                // block, called once, as CANN calls it.
                unsafe {
                    foreign_call::free(callbacks.free, callbacks.obj.as_ptr(), *block, || {
                        Callback::Free { stream, descriptor }
                    })
                };
            }
            Held::Default {
                allocator,
                memory,
                ptr,
            } => allocator.free(memory, *ptr),
        }
    }
}

/// Where a model is in its life.
pub(crate) enum Phase {
    /// Made by `aclmdlRIAddCondTask`, waiting for its capture.
    Empty,
    /// Being captured or built.
    Recording(Arc<Capture>),
    /// Ready to run.
    Ready(Arc<Vec<Lane>>),
}

/// A model running instance.
pub struct Model {
    pub(crate) id: u32,
    pub(crate) phase: Mutex<Phase>,
    /// Workspaces its captures took (given back when it goes).
    held: Mutex<Vec<Held>>,
    /// Other memory its captures handed to it (`graph_memory`); declared
    /// after `held`, so dropped after the workspaces.
    releases: Mutex<Vec<super::graph_memory::Release>>,
    /// Conditions made on it, set to their defaults when it starts.
    pub(crate) conditions: Mutex<Vec<Arc<Condition>>>,
    /// Handles that go when the model is destroyed: its task groups, its
    /// conditions and the models of its conditional tasks.
    pub(crate) owned: Mutex<Owned>,
    /// `aclmdlRIAbort`s so far: a replay stops when the count moves.
    aborts: AtomicU64,
    /// `aclmdlRISetName`'s name.
    pub(crate) name: Mutex<String>,
    /// The streams whose work the model holds (`aclmdlRIGetStreams`).
    pub(crate) streams: Mutex<Vec<usize>>,
    /// `aclmdlRIDestroyRegisterCallback`'s callbacks and their data.
    pub(crate) on_destroy: Mutex<Vec<(DestroyCallback, usize)>>,
}

/// A callback `aclmdlRIDestroy` calls (`aclrtCallback`).
pub type DestroyCallback = unsafe extern "C" fn(user_data: *mut c_void);

/// Handles a model owns.
#[derive(Default)]
pub(crate) struct Owned {
    pub(crate) groups: Vec<usize>,
    pub(crate) conditions: Vec<usize>,
    pub(crate) models: Vec<usize>,
}

impl Model {
    pub(crate) fn new(phase: Phase) -> Arc<Self> {
        static IDS: AtomicU32 = AtomicU32::new(1);
        Arc::new(Model {
            id: IDS.fetch_add(1, Ordering::Relaxed),
            phase: Mutex::new(phase),
            held: Mutex::new(Vec::new()),
            releases: Mutex::new(Vec::new()),
            conditions: Mutex::new(Vec::new()),
            owned: Mutex::new(Owned::default()),
            aborts: AtomicU64::new(0),
            name: Mutex::new(String::new()),
            streams: Mutex::new(Vec::new()),
            on_destroy: Mutex::new(Vec::new()),
        })
    }

    /// Its lanes, once ready.
    pub(crate) fn lanes(&self) -> Option<Arc<Vec<Lane>>> {
        match &*self.phase.lock() {
            Phase::Ready(lanes) => Some(Arc::clone(lanes)),
            _ => None,
        }
    }

    /// Keeps workspaces for as long as the model lives.
    pub(crate) fn keep(&self, held: Vec<Held>) {
        self.held.lock().extend(held);
    }

    /// Keeps other memory its capture handed to it, for as long as it lives.
    pub(crate) fn keep_releases(&self, releases: Vec<super::graph_memory::Release>) {
        self.releases.lock().extend(releases);
    }

    /// How many workspaces the model holds.
    pub fn held_workspaces(&self) -> usize {
        self.held.lock().len()
    }

    /// `aclmdlRIAbort`: queued and running replays stop at their next task.
    pub(crate) fn abort(&self) {
        self.aborts.fetch_add(1, Ordering::SeqCst);
    }

    /// How many aborts so far (a replay queued now stops at the next).
    pub(crate) fn aborts(&self) -> u64 {
        self.aborts.load(Ordering::SeqCst)
    }

    /// Every event the model records, for the replay to number.
    pub(crate) fn each_record(&self, f: &mut dyn FnMut(&Arc<Event>)) {
        if let Some(lanes) = self.lanes() {
            for lane in lanes.iter() {
                each_record_in(&lane.nodes, f);
            }
        }
    }

    /// Runs the model on the calling worker.
    fn run(&self, cx: &mut Replay, depth: u32) -> bool {
        let Some(lanes) = self.lanes() else {
            return true;
        };
        if depth > MAX_DEPTH {
            return false;
        }
        for c in self.conditions.lock().iter() {
            c.write(c.default);
        }
        // The replay's own model counts from when the replay was queued.
        let aborts = if depth == 0 {
            cx.aborts
        } else {
            self.aborts.load(Ordering::SeqCst)
        };
        for lane in lanes.iter().filter(|l| l.head) {
            if !self.run_nodes(&lanes, &lane.nodes, cx, depth, aborts) {
                return false;
            }
        }
        true
    }

    fn run_lane(
        &self,
        lanes: &[Lane],
        stream: usize,
        cx: &mut Replay,
        depth: u32,
        aborts: u64,
    ) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        match lanes.iter().find(|l| l.stream == stream) {
            Some(lane) => self.run_nodes(lanes, &lane.nodes, cx, depth + 1, aborts),
            None => true,
        }
    }

    fn run_nodes<'a>(
        &self,
        lanes: &'a [Lane],
        mut nodes: &'a [Node],
        cx: &mut Replay,
        depth: u32,
        aborts: u64,
    ) -> bool {
        // A label switch moves `nodes` and `next` to the tasks after its
        // label: a loop, not a call, so a model that switches back to an
        // earlier label runs as long as the device would, at no depth.
        let mut next = 0;
        while let Some(node) = nodes.get(next) {
            next += 1;
            if current_task_cancelled() || self.aborts.load(Ordering::Relaxed) != aborts {
                return false;
            }
            let went_on = match node {
                Node::Kernel {
                    kernel,
                    workspace,
                    size,
                    user_data,
                } => {
                    // SAFETY: the launcher's contract, as for a queued kernel:
                    // callable with its workspace (held by the model) and argument.
                    unsafe {
                        foreign_call::kernel(*kernel, *workspace, *size, *user_data, cx.device)
                    };
                    true
                }
                Node::Copy { dst, src, count } => {
                    if !cx.usable(*dst, *count) || !cx.usable(*src, *count) {
                        return memory_gone();
                    }
                    // SAFETY: checked when captured, and again now: no
                    // device side was freed or unmapped since.
                    unsafe { super::device_copy::copy(*dst, *src, *count) };
                    true
                }
                Node::Set { dst, value, count } => {
                    if !cx.usable(*dst, *count) {
                        return memory_gone();
                    }
                    // SAFETY: as for a copy.
                    unsafe { dst.write_bytes(*value, *count) };
                    true
                }
                Node::Record(event) => {
                    cx.complete(event);
                    true
                }
                Node::Wait { event, external } => {
                    if *external {
                        event.flag_wait();
                    } else {
                        event.current_wait();
                    }
                    true
                }
                Node::Reset(event) => {
                    event.reset();
                    true
                }
                Node::Host(call) => {
                    call.run();
                    true
                }
                Node::Group(group) => {
                    let current = group.current();
                    self.run_nodes(lanes, &current, cx, depth, aborts)
                }
                Node::Cond { cond, kind, models } => {
                    let mut went_on = true;
                    match *kind {
                        COND_IF => {
                            let pick = if cond.read() != 0 { 0 } else { 1 };
                            if let Some(m) = models.get(pick) {
                                went_on = m.run(cx, depth + 1);
                            }
                        }
                        COND_WHILE => {
                            while went_on && cond.read() != 0 {
                                went_on = models.first().is_some_and(|m| m.run_body(cx, depth + 1));
                                if current_task_cancelled() {
                                    went_on = false;
                                }
                            }
                        }
                        _ => {
                            if let Some(m) = usize::try_from(cond.read())
                                .ok()
                                .and_then(|i| models.get(i))
                            {
                                went_on = m.run(cx, depth + 1);
                            }
                        }
                    }
                    went_on
                }
                Node::Model(model) => model.run(cx, depth + 1),
                Node::Activate(stream) => self.run_lane(lanes, *stream, cx, depth, aborts),
                Node::Switch {
                    left,
                    right,
                    cond,
                    wide,
                    on_true,
                    on_false,
                } => {
                    let size = if *wide { 8 } else { 4 };
                    if !cx.usable(*left, size) || !cx.usable(*right, size) {
                        return memory_gone();
                    }
                    let holds = compare(*left, *right, *cond, *wide);
                    match (holds, on_false) {
                        (true, _) => self.run_lane(lanes, *on_true, cx, depth, aborts),
                        (false, Some(s)) => self.run_lane(lanes, *s, cx, depth, aborts),
                        (false, None) => true,
                    }
                }
                Node::Label(_) | Node::End => true,
                Node::LabelSwitch { index, max, labels } => {
                    if !cx.usable(*index, std::mem::size_of::<u32>()) {
                        return memory_gone();
                    }
                    match find_label(lanes, labels, *index, *max) {
                        Some((lane_nodes, after)) => {
                            nodes = lane_nodes;
                            next = after;
                            continue;
                        }
                        None => {
                            // The label was set on no stream of this model:
                            // the task fails, as the device's does.
                            let _ = super::stream_worker::fail_current_task(
                                crate::base::error::ACL_ERROR_RT_INTERNAL_ERROR,
                            );
                            false
                        }
                    }
                }
            };
            if !went_on {
                return false;
            }
        }
        true
    }

    /// Runs a loop body: as [`Model::run`], without setting the conditions
    /// back to their defaults (the body sets them).
    fn run_body(&self, cx: &mut Replay, depth: u32) -> bool {
        let Some(lanes) = self.lanes() else {
            return true;
        };
        let aborts = self.aborts.load(Ordering::SeqCst);
        lanes
            .iter()
            .filter(|l| l.head)
            .all(|lane| self.run_nodes(&lanes, &lane.nodes, cx, depth, aborts))
    }

    /// `aclmdlRIDebugJsonPrint`'s text.
    pub(crate) fn describe(&self) -> String {
        let mut out = String::new();
        let _ = write!(out, "{{\"modelRI\": {}, \"streams\": [", self.id);
        if let Some(lanes) = self.lanes() {
            for (i, lane) in lanes.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let _ = write!(
                    out,
                    "{{\"stream\": \"{:#x}\", \"head\": {}, \"tasks\": [",
                    lane.stream, lane.head
                );
                describe_nodes(&mut out, &lane.nodes);
                out.push_str("]}");
            }
        }
        let _ = writeln!(out, "], \"workspaces\": {}}}", self.held_workspaces());
        out
    }
}

fn describe_nodes(out: &mut String, nodes: &[Node]) {
    for (i, node) in nodes.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        match node {
            Node::Group(g) => {
                let _ = write!(out, "{{\"type\": \"TASK_GROUP\", \"tasks\": [");
                describe_nodes(out, &g.current());
                out.push_str("]}");
            }
            Node::Cond { models, kind, .. } => {
                let ids: Vec<String> = models.iter().map(|m| m.id.to_string()).collect();
                let _ = write!(
                    out,
                    "{{\"type\": \"CONDITION\", \"kind\": {kind}, \"models\": [{}]}}",
                    ids.join(", ")
                );
            }
            other => {
                let _ = write!(out, "{{\"type\": \"{}\"}}", other.kind());
            }
        }
    }
}

fn each_record_in(nodes: &[Node], f: &mut dyn FnMut(&Arc<Event>)) {
    for node in nodes {
        match node {
            Node::Record(e) => f(e),
            Node::Group(g) => each_record_in(&g.current(), f),
            Node::Cond { models, .. } => models.iter().for_each(|m| m.each_record(f)),
            Node::Model(m) => m.each_record(f),
            _ => {}
        }
    }
}

/// Where a label switch carries on: the tasks of the picked label's lane,
/// and the index of the task after the label; `None` when the label was
/// set on no stream of the model.
fn find_label<'a>(
    lanes: &'a [Lane],
    labels: &[Arc<Label>],
    index: *const u8,
    max: u32,
) -> Option<(&'a [Node], usize)> {
    // SAFETY: checked as live device memory of 4 bytes when the switch was
    // recorded; unaligned, as the caller may point anywhere.
    let picked = unsafe { index.cast::<u32>().read_unaligned() };
    let last = max.checked_sub(1)?;
    let label = labels.get(picked.min(last) as usize)?;
    lanes.iter().find_map(|lane| {
        lane.nodes
            .iter()
            .position(|n| matches!(n, Node::Label(l) if Arc::ptr_eq(l, label)))
            .map(|at| (&lane.nodes[..], at + 1))
    })
}

/// `*left cond *right` for `aclrtSwitchStream` (`wide`: 64-bit values).
fn compare(left: *const u8, right: *const u8, cond: i32, wide: bool) -> bool {
    // SAFETY: both were checked as live device memory of the value's size
    // when the switch was recorded; unaligned reads, as the caller may
    // point anywhere in an allocation.
    let (l, r) = unsafe {
        if wide {
            (
                left.cast::<i64>().read_unaligned(),
                right.cast::<i64>().read_unaligned(),
            )
        } else {
            (
                i64::from(left.cast::<i32>().read_unaligned()),
                i64::from(right.cast::<i32>().read_unaligned()),
            )
        }
    };
    match cond {
        0 => l == r,
        1 => l != r,
        2 => l > r,
        3 => l >= r,
        4 => l < r,
        _ => l <= r,
    }
}

/// One queued replay: the model, and the numbers of the records it makes.
pub(crate) struct Replay {
    pub(crate) model: Arc<Model>,
    /// Each record's event and number; `None` once completed.
    pub(crate) records: Vec<Option<(Arc<Event>, u64)>>,
    pub(crate) device: u32,
    /// The model's aborts when the replay was queued.
    pub(crate) aborts: u64,
    /// The runtime's host and device memory, to check recorded addresses.
    pub(crate) heaps: Arc<[Arc<DeviceHeap>]>,
}

/// A replayed task would touch device memory that is gone: it fails, as
/// the device's does, and the replay stops there.
#[cold]
fn memory_gone() -> bool {
    let _ =
        super::stream_worker::fail_current_task(crate::base::error::ACL_ERROR_RT_DEVICE_MEM_ERROR);
    false
}

impl Replay {
    /// Whether a recorded node may still touch `[ptr, ptr + len)`: it was
    /// checked when recorded, but device memory may have been freed or
    /// unmapped since (a model outlives what its tasks point at). Memory no
    /// record knows of is the caller's host memory, as when recorded.
    fn usable(&self, ptr: *const u8, len: usize) -> bool {
        let mapped = super::virtual_memory::virtual_memory().lookup(ptr as usize, len);
        if mapped != Lookup::Outside {
            return mapped == Lookup::Inside;
        }
        self.heaps
            .iter()
            .map(|heap| heap.lookup(ptr, len))
            .find(|&found| found != Lookup::Outside)
            .map_or(true, |found| found == Lookup::Inside)
    }

    /// Completes the first pending record of `event`.
    fn complete(&mut self, event: &Arc<Event>) {
        let slot = self
            .records
            .iter_mut()
            .find(|r| r.as_ref().is_some_and(|(e, _)| Arc::ptr_eq(e, event)));
        if let Some((e, n)) = slot.and_then(Option::take) {
            e.complete(n);
        }
    }
}

impl Drop for Replay {
    /// Records the replay did not reach (a branch not taken, an abort, a
    /// replay dropped unrun) complete now, so nothing waits for them forever.
    fn drop(&mut self) {
        for (e, n) in self.records.drain(..).flatten() {
            e.complete(n);
        }
    }
}

/// A replay's task body: runs the model, then lets the replay go.
///
/// # Safety
/// `data` is a `Box<Replay>` given up with `Box::into_raw`, not used after.
pub(crate) unsafe extern "C" fn run_replay(_: *mut c_void, _: usize, data: *mut c_void) {
    // SAFETY: the function's contract.
    let mut replay = unsafe { Box::from_raw(data.cast::<Replay>()) };
    let model = Arc::clone(&replay.model);
    model.run(&mut replay, 0);
}

/// A replay dropped before it ran.
///
/// # Safety
/// As [`run_replay`].
pub(crate) unsafe fn drop_replay(data: *mut c_void) {
    // SAFETY: the function's contract.
    drop(unsafe { Box::from_raw(data.cast::<Replay>()) });
}
