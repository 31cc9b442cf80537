//! A stream: an in-order queue of work run by its own host worker thread.
//!
//! The queue is a lock-free ring of fixed capacity ([`ArrayQueue`]), so a
//! launch never allocates nor locks; when it is full the launcher waits for
//! room, as a device queue applies back-pressure.
//!
//! The worker spins briefly when the ring is empty, then sleeps; a producer
//! signals it only when it is asleep (a flag both sides check behind a full
//! fence, so no wake-up is lost). `synchronize` enqueues a fence task and
//! waits until the worker reaches it.

use super::events::Event;
use super::exceptions::{self, aclrtExceptionInfo, TaskTag};
use super::fork;
use super::memory::DeviceHeap;
use super::waits;
use super::workspace::WorkspaceAllocator;
use crate::base::error::{Error, Result};
use crate::base::foreign_call;
use crate::base::sync::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering, Padded};
use crossbeam_queue::ArrayQueue;
use parking_lot::Mutex;
use std::cell::Cell;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::AtomicI32;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::sync::{Condvar, Mutex as SleepMutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// A host "kernel": `void kernel(void *workspace, size_t size, void *userData)`.
pub type KernelFn =
    unsafe extern "C" fn(workspace: *mut c_void, size: usize, user_data: *mut c_void);

/// How many tasks a stream holds before launches wait for room.
pub const QUEUE_CAPACITY: usize = 1024;
/// Spin rounds (about 20 µs) before the worker sleeps, so a steady flow of
/// launches pays no wake-ups.
const SPIN_ROUNDS: u32 = 64;
/// How long a producer waiting for room sleeps before looking again.
const ROOM_POLL: Duration = Duration::from_millis(1);

const DESTROYED: Error = Error::InvalidParam {
    param: "stream",
    reason: "The stream is being destroyed",
};

/// Why a kernel cannot destroy its own stream.
pub(crate) const DESTROY_OWN: Error = Error::InvalidParam {
    param: "stream",
    reason: "A kernel cannot destroy the stream it runs on",
};

/// Why a call on a stream whose worker died fails.
pub(crate) const DEAD: Error = Error::InvalidParam {
    param: "stream",
    reason: "The stream's worker thread died (a panic inside aclalloc while it ran the stream's work): the stream's pending work will never run. Destroy the stream and create a new one",
};

/// One unit of work on a stream.
#[derive(Clone, Copy)]
pub enum Task {
    /// Runs `kernel(workspace, size, user_data)`; with `release`, the workspace
    /// then goes back to the stream's workspace allocator.
    Kernel {
        kernel: KernelFn,
        workspace: *mut c_void,
        size: usize,
        user_data: *mut c_void,
        release: bool,
    },
    /// Runs `run(null, size, data)`. The task owns what `data` points to:
    /// `run` takes it over, and a task dropped before it ran (aborted,
    /// stopped, behind a failure in stop-on-failure mode, or left queued
    /// behind a worker that died when the stream goes) hands it to `free`
    /// instead, so nothing it owns leaks.
    Owning {
        run: KernelFn,
        size: usize,
        data: *mut c_void,
        free: unsafe fn(*mut c_void),
        /// Whether an interrupted run fails as a kernel does
        /// (`ACL_ERROR_RT_VECTOR_CORE_EXCEPTION` after an abort) or as a
        /// wait (`ACL_ERROR_RT_INTERNAL_ERROR`).
        kernel: bool,
    },
    /// `memmove(dst, src, count)`.
    Copy {
        dst: *mut u8,
        src: *const u8,
        count: usize,
    },
    /// `memset(dst, value, count)`.
    Set {
        dst: *mut u8,
        value: u8,
        count: usize,
    },
    /// Marks the point a synchronizer waits for.
    Fence(*const AtomicBool),
    /// An event's marker: the event's record `.1` completes when it runs.
    /// Holds a count of the event (`Arc::into_raw`), given back on retiring.
    Record(*const Event, u64),
    /// Blocks the stream until the event's record `.1` has completed.
    Wait(*const Event, u64),
    /// As `Wait`, for at most `.2` seconds; the task fails with
    /// `ACL_ERROR_RT_EVENT_SYNC_TIMEOUT` when the time runs out.
    TimedWait(*const Event, u64, u32),
    /// Puts the event back in its initial state.
    Reset(*const Event),
    /// Makes the worker panic, as a bug inside the library would (tests).
    #[cfg(test)]
    Panic,
}

// SAFETY: a task's pointers are handed over with the launch, as with CANN's
// asynchronous calls, and only the worker uses them afterwards; a fence's
// flag outlives the task (its synchronizer waits for it).
unsafe impl Send for Task {}

/// A queued task with its tag (its task id and launching thread).
type Entry = (Task, TaskTag);

struct Shared {
    queue: ArrayQueue<Entry>,
    /// Producers between their `closed` check and their push.
    entering: AtomicUsize,
    closed: AtomicBool,
    worker_asleep: AtomicBool,
    worker_exited: AtomicBool,
    /// The worker died of a panic: nothing queued will run.
    dead: AtomicBool,
    /// A kernel or a free callback ended the worker thread (pthread_exit,
    /// pthread_cancel); the next call on the stream starts a new one. Not
    /// at once: a Python interpreter ends threads so while it shuts down,
    /// and the kernels still queued must not call into it afterwards.
    orphaned: AtomicBool,
    /// The fork generation the stream (and its worker) was made in.
    generation: u32,
    room_waiters: AtomicUsize,
    /// Tasks enqueued that have not finished (`aclrtStreamQuery`).
    pending: AtomicUsize,
    /// The first task failure not yet reported by a synchronize (0: none).
    failure: AtomicI32,
    /// The tag of the task that left `failure` ([`TaskTag::pack`]).
    failed_tag: AtomicU64,
    /// Keeps a failure's code and tag together.
    failure_lock: Mutex<()>,
    /// The stream's id (`aclrtStreamGetId`), for exception information.
    id: AtomicU32,
    /// `ACL_STOP_ON_FAILURE`: after a failed task, work is dropped until a
    /// synchronize reports the failure.
    stop_on_failure: AtomicBool,
    /// The head task's state: [`RUNNING`] while the worker runs a task, and
    /// [`STOPPED`] or [`ABORTED`] once `aclrtStreamStop`/`Abort` interrupted
    /// it. Shared with the worker thread's `INTERRUPT` for
    /// [`current_task_cancelled`].
    interrupt: Arc<AtomicU64>,
    /// How many aborts the stream has seen: a synchronize that an abort
    /// overtook returns `ACL_ERROR_RT_STREAM_ABORT`.
    aborts: AtomicU64,
    /// Held by the worker from taking a task off the queue until it is
    /// marked [`RUNNING`], and by an abort while it marks the head task and
    /// takes the rest off the queue. Without it the worker could take a
    /// task behind the head an abort had just taken itself, and fail that
    /// one in the head's place. A futex lock, as `lock` below, on lines of
    /// its own: the launching thread writes the fields around it.
    head: Padded<SleepMutex<()>>,
    /// Guards the sleeps below: std's futex lock, not parking_lot's parking
    /// table, which `fork()` could leave locked in the child.
    lock: SleepMutex<()>,
    work: Condvar,
    room: Condvar,
    done: Condvar,
    memory: Arc<DeviceHeap>,
    workspaces: &'static dyn WorkspaceAllocator,
    /// The worker thread.
    worker: Mutex<Option<JoinHandle<()>>>,
    /// The capture (or model build) the stream's work goes to instead of
    /// its queue, with the stream's lane in it; `capturing` says whether
    /// there is one without taking the lock.
    capture: Mutex<Option<CaptureSlot>>,
    capturing: AtomicBool,
}

/// A capture a stream records into, and the stream's lane in it.
pub(crate) type CaptureSlot = (Arc<super::capture::Capture>, usize);

/// The worker is running a task (the interrupt word's bit).
const RUNNING: u64 = 1;
/// `aclrtStreamStop` interrupted the head task.
const STOPPED: u64 = 2;
/// `aclrtStreamAbort` interrupted the head task.
const ABORTED: u64 = 4;

use crate::base::error::{
    ACL_ERROR_RT_INTERNAL_ERROR, ACL_ERROR_RT_STREAM_ABORT, ACL_ERROR_RT_VECTOR_CORE_EXCEPTION,
};

/// Which `aclrtStreamStop`/`aclrtStreamAbort` is interrupting the head task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interrupt {
    /// `aclrtStreamStop`: the head task fails; queued work stays.
    Stop,
    /// `aclrtStreamAbort`: the head task fails; queued work is dropped.
    Abort,
}

impl Interrupt {
    fn bit(self) -> u64 {
        match self {
            Interrupt::Stop => STOPPED,
            Interrupt::Abort => ABORTED,
        }
    }

    /// The code an interrupted `task` fails with: what the device reports
    /// for that kind of task.
    fn code(bits: u64, task: &Task) -> i32 {
        let kernel = matches!(
            task,
            Task::Kernel { .. } | Task::Owning { kernel: true, .. }
        );
        if bits & ABORTED != 0 && kernel {
            ACL_ERROR_RT_VECTOR_CORE_EXCEPTION
        } else {
            ACL_ERROR_RT_INTERNAL_ERROR
        }
    }
}

thread_local! {
    /// The stream whose worker is this thread, if any.
    static WORKER_OF: Cell<usize> = const { Cell::new(0) };
    /// The interrupt word of this worker's stream.
    static INTERRUPT: std::cell::RefCell<Option<Arc<AtomicU64>>> =
        const { std::cell::RefCell::new(None) };
    /// The failure the running task reported (0: none).
    static TASK_FAILURE: Cell<i32> = const { Cell::new(0) };
}

/// Marks the task running on this thread's stream as failed with `code`
/// (`aclallocFailCurrentTask`): the stream's next synchronize returns it.
pub fn fail_current_task(code: i32) -> Result<()> {
    if code == 0 {
        return Err(Error::InvalidParam {
            param: "code",
            reason: "It must be an error code, not ACL_SUCCESS",
        });
    }
    if !on_any_worker() {
        return Err(Error::InvalidParam {
            param: "code",
            reason: "Only a kernel or host function running on a stream can fail its task",
        });
    }
    TASK_FAILURE.with(|f| f.set(code));
    Ok(())
}

/// True inside a task that `aclrtStreamStop` or `aclrtStreamAbort`
/// interrupted (`aclallocCurrentTaskCancelled`): a long host kernel polls
/// it to end early, as the device ends a stopped kernel. False outside a
/// stream's task.
pub fn current_task_cancelled() -> bool {
    INTERRUPT.with(|i| {
        i.borrow()
            .as_ref()
            .is_some_and(|word| word.load(Ordering::SeqCst) & (STOPPED | ABORTED) != 0)
    })
}

/// A stream of one device.
pub struct Stream {
    shared: Arc<Shared>,
}

impl Stream {
    /// A stream on `memory`'s device; `workspaces` serves launches without a registered allocator.
    pub fn new(
        memory: Arc<DeviceHeap>,
        workspaces: &'static dyn WorkspaceAllocator,
    ) -> Result<Self> {
        // The queue and the shared state are std allocations: room first.
        let room = 2 * QUEUE_CAPACITY * std::mem::size_of::<Entry>();
        if !crate::base::handles::host_has_room(room) {
            return Err(Error::BadAlloc {
                what: "a stream's queue",
            });
        }
        let shared = Arc::new(Shared {
            queue: ArrayQueue::new(QUEUE_CAPACITY),
            entering: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            worker_asleep: AtomicBool::new(false),
            worker_exited: AtomicBool::new(false),
            dead: AtomicBool::new(false),
            orphaned: AtomicBool::new(false),
            generation: fork::generation(),
            room_waiters: AtomicUsize::new(0),
            pending: AtomicUsize::new(0),
            failure: AtomicI32::new(0),
            failed_tag: AtomicU64::new(0),
            failure_lock: Mutex::new(()),
            id: AtomicU32::new(0),
            stop_on_failure: AtomicBool::new(false),
            interrupt: Arc::new(AtomicU64::new(0)),
            aborts: AtomicU64::new(0),
            head: Padded(SleepMutex::new(())),
            lock: SleepMutex::new(()),
            work: Condvar::new(),
            room: Condvar::new(),
            done: Condvar::new(),
            memory,
            workspaces,
            worker: Mutex::new(None),
            capture: Mutex::new(None),
            capturing: AtomicBool::new(false),
        });
        Shared::start_worker(&shared)?;
        Ok(Stream { shared })
    }

    /// The capture (or model build) the stream records into, if any.
    pub(crate) fn capture(&self) -> Option<CaptureSlot> {
        if !self.shared.capturing.load(Ordering::Acquire) {
            return None;
        }
        self.shared.capture.lock().clone()
    }

    /// Makes the stream record into `slot` (`None`: run its work again).
    pub(crate) fn set_capture(&self, slot: Option<CaptureSlot>) {
        let mut now = self.shared.capture.lock();
        self.shared
            .capturing
            .store(slot.is_some(), Ordering::Release);
        *now = slot;
    }

    /// Stops recording into `capture`, if the stream records into it.
    pub(crate) fn leave_capture(&self, capture: &Arc<super::capture::Capture>) {
        let mut now = self.shared.capture.lock();
        if now.as_ref().is_some_and(|(c, _)| Arc::ptr_eq(c, capture)) {
            *now = None;
            self.shared.capturing.store(false, Ordering::Release);
        }
    }

    /// The device this stream runs on.
    pub fn device(&self) -> u32 {
        self.shared.memory.device()
    }

    /// The device memory of this stream's device.
    pub fn memory(&self) -> &Arc<DeviceHeap> {
        &self.shared.memory
    }

    /// The allocator that serves workspaces when no allocator is registered.
    pub fn workspace_allocator(&self) -> &'static dyn WorkspaceAllocator {
        self.shared.workspaces
    }

    /// Appends `task`, waiting while the queue is full; fails once the stream is being destroyed.
    /// On a capturing stream the task is recorded in the capture instead
    /// (a synchronizer's fence or marker still goes to the queue, which runs
    /// nothing else meanwhile; an event's record on a capturing stream is
    /// the capture's before it gets here).
    pub fn enqueue(&self, task: Task) -> Result<()> {
        self.check_alive()?;
        let shared = &*self.shared;
        if shared.capturing.load(Ordering::Acquire)
            && !matches!(task, Task::Fence(_) | Task::Record(..))
        {
            if let Some((capture, lane)) = self.capture() {
                return capture.record_task(lane, task);
            }
        }
        // Announce the push before checking `closed`, so that shutting down
        // can wait for every push that got past the check.
        shared.entering.fetch_add(1, Ordering::SeqCst);
        shared.pending.fetch_add(1, Ordering::SeqCst);
        let pushed = if shared.closed.load(Ordering::SeqCst) {
            Err(DESTROYED)
        } else {
            // A synchronize's marker is not a task of the caller's.
            let tag = if matches!(task, Task::Fence(_)) {
                TaskTag::default()
            } else {
                exceptions::new_task()
            };
            match shared.queue.push((task, tag)) {
                Ok(()) => Ok(()),
                Err(entry) => self.enqueue_when_room(entry),
            }
        };
        if pushed.is_err() {
            shared.pending.fetch_sub(1, Ordering::SeqCst);
        }
        shared.entering.fetch_sub(1, Ordering::SeqCst);
        if shared.orphaned.load(Ordering::SeqCst) {
            self.restart_worker();
        }
        if pushed.is_ok() {
            // Pairs with the fence in `Shared::sleep`: either the worker sees
            // the task, or this thread sees that the worker sleeps.
            fence(Ordering::SeqCst);
            if shared.worker_asleep.load(Ordering::Relaxed) {
                let _guard = shared.sleep_lock();
                shared.work.notify_one();
            }
        }
        pushed
    }

    #[cold]
    fn enqueue_when_room(&self, mut task: Entry) -> Result<()> {
        if self.is_current_worker() {
            // Waiting for room from inside the worker would wait forever.
            return Err(Error::InvalidParam {
                param: "stream",
                reason:
                    "A kernel cannot enqueue onto its own stream when the stream's queue is full",
            });
        }
        // Waiting for room waits for this stream's kernels, as a synchronize.
        let _waiting = self.wait_from_kernel()?;
        let shared = &*self.shared;
        shared.room_waiters.fetch_add(1, Ordering::SeqCst);
        let mut guard = shared.sleep_lock();
        let result = loop {
            if shared.closed.load(Ordering::SeqCst) {
                break Err(DESTROYED);
            }
            if shared.dead.load(Ordering::SeqCst) {
                break Err(DEAD);
            }
            if shared.orphaned.load(Ordering::SeqCst) {
                drop(guard);
                self.restart_worker();
                guard = shared.sleep_lock();
                continue;
            }
            match shared.queue.push(task) {
                Ok(()) => break Ok(()),
                Err(back) => task = back,
            }
            guard = shared
                .room
                .wait_timeout(guard, ROOM_POLL)
                .map_or_else(|e| e.into_inner().0, |(g, _)| g);
        };
        drop(guard);
        shared.room_waiters.fetch_sub(1, Ordering::SeqCst);
        result
    }

    /// Waits until everything enqueued before the call has run, and reports
    /// (once) the code a failed task left.
    pub fn synchronize(&self) -> Result<()> {
        self.wait(true)
    }

    /// Waits as [`Self::synchronize`] but leaves a failed task's code for the
    /// stream's own synchronize: for calls that wait for every stream's
    /// work only to order themselves after it (`aclrtFree`, a synchronous
    /// copy).
    pub(crate) fn wait_idle(&self) -> Result<()> {
        self.wait(false)
    }

    fn wait(&self, report: bool) -> Result<()> {
        if self.is_current_worker() {
            return Err(Error::InvalidParam {
                param: "stream",
                reason: "A kernel cannot synchronize the stream it runs on",
            });
        }
        self.check_alive()?;
        let shared = &*self.shared;
        let _waiting = self.wait_from_kernel()?;
        let aborts = shared.aborts.load(Ordering::SeqCst);
        let reached = AtomicBool::new(false);
        match self.enqueue(Task::Fence(&reached)) {
            Ok(()) => {
                let mut guard = shared.sleep_lock();
                while !reached.load(Ordering::Acquire) {
                    if shared.dead.load(Ordering::Acquire) {
                        return Err(DEAD);
                    }
                    if shared.orphaned.load(Ordering::SeqCst) {
                        drop(guard);
                        self.restart_worker();
                        guard = shared.sleep_lock();
                        continue;
                    }
                    guard = shared
                        .done
                        .wait(guard)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                // Overtaken by an abort: what the aborted work did is for
                // the next synchronize to report.
                if shared.aborts.load(Ordering::SeqCst) != aborts {
                    return Err(Error::TaskFailed {
                        code: ACL_ERROR_RT_STREAM_ABORT,
                    });
                }
                if report {
                    self.take_failure()
                } else {
                    Ok(())
                }
            }
            Err(DEAD) => Err(DEAD),
            // Destroyed: its work is finished once the worker has exited.
            Err(_) => {
                while !shared.worker_exited.load(Ordering::Acquire)
                    && !shared.dead.load(Ordering::Acquire)
                {
                    // Queued work still runs when a kernel ended the worker.
                    self.restart_worker();
                    std::thread::sleep(Duration::from_micros(100));
                }
                Ok(())
            }
        }
    }

    /// How many aborts the stream has seen: a wait for the stream that an
    /// abort overtook returns `ACL_ERROR_RT_STREAM_ABORT`, as `synchronize`.
    pub(crate) fn aborts(&self) -> u64 {
        self.shared.aborts.load(Ordering::SeqCst)
    }

    /// True while the worker runs a task (tests).
    #[cfg(test)]
    pub(crate) fn is_running(&self) -> bool {
        self.shared.interrupt.load(Ordering::SeqCst) & RUNNING != 0
    }

    /// The code a failed task left for the next synchronize, once.
    /// The exception callbacks are called with the failed task's
    /// information before it returns.
    pub(crate) fn take_failure(&self) -> Result<()> {
        let shared = &*self.shared;
        let (code, tag) = {
            let _guard = shared.failure_lock.lock();
            let code = shared.failure.swap(0, Ordering::SeqCst);
            (
                code,
                TaskTag::unpack(shared.failed_tag.load(Ordering::SeqCst)),
            )
        };
        if code == 0 {
            return Ok(());
        }
        exceptions::report(aclrtExceptionInfo {
            task_id: tag.task_id,
            stream_id: shared.id.load(Ordering::Relaxed),
            thread_id: tag.thread_id,
            device_id: self.device(),
            error_code: code as u32,
        });
        Err(Error::TaskFailed { code })
    }

    /// Sets the id exception information gives for this stream.
    pub(crate) fn set_id(&self, id: u32) {
        self.shared.id.store(id, Ordering::Relaxed);
    }

    /// Records that the calling kernel, if any, is about to wait for this
    /// stream; fails when that would close a cycle of waits. Every wait of a
    /// kernel for another stream goes through here.
    pub(crate) fn wait_from_kernel(&self) -> Result<Option<waits::Waiting>> {
        match WORKER_OF.with(|w| w.get()) {
            0 => Ok(None),
            me => waits::begin(me, Arc::as_ptr(&self.shared) as usize).map(Some),
        }
    }

    /// `aclrtStreamStop`: interrupts the head task, the one running or,
    /// when the worker is between tasks, the next to start. It fails with
    /// `ACL_ERROR_RT_INTERNAL_ERROR`: one not started yet does not run, one
    /// running is told ([`current_task_cancelled`]) and its failure is
    /// recorded when it returns. Queued work stays and runs after it.
    /// Nothing happens on an idle stream.
    pub fn stop(&self) {
        self.interrupt(Interrupt::Stop);
    }

    /// Marks the head task interrupted; false when there is none (idle).
    fn interrupt(&self, kind: Interrupt) -> bool {
        let shared = &*self.shared;
        let mut now = shared.interrupt.load(Ordering::SeqCst);
        loop {
            if now & RUNNING == 0 && shared.queue.is_empty() {
                return false;
            }
            match shared.interrupt.compare_exchange(
                now,
                now | kind.bit(),
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return true,
                Err(seen) => now = seen,
            }
        }
    }

    /// `aclrtStreamAbort`: interrupts the head task as [`Stream::stop`]
    /// does (it fails with `ACL_ERROR_RT_VECTOR_CORE_EXCEPTION` for a
    /// kernel, `ACL_ERROR_RT_INTERNAL_ERROR` for other work, reported by
    /// the next synchronize) and drops every other task that has not
    /// started: each is retired as if it had run (workspaces go back, what
    /// a task owns is freed, synchronizers and event waiters are released).
    /// A synchronize waiting meanwhile returns `ACL_ERROR_RT_STREAM_ABORT`.
    /// Returns how many tasks were dropped.
    pub fn abort(&self) -> usize {
        let shared = &*self.shared;
        shared.aborts.fetch_add(1, Ordering::SeqCst);
        let taken = {
            // The worker takes nothing meanwhile (`head`): a task it took
            // before is running, or marked to fail as the head when it starts.
            let _head = shared.head_lock();
            let interrupted = self.interrupt(Interrupt::Abort);
            let mut taken = Vec::new();
            while let Some(entry) = shared.queue.pop() {
                shared.pending.fetch_sub(1, Ordering::SeqCst);
                taken.push(entry);
            }
            // Nothing left for the worker to run: the head task was taken
            // here, so its failure is recorded here.
            if interrupted && shared.pending.load(Ordering::SeqCst) == 0 {
                let mut now = shared.interrupt.load(Ordering::SeqCst);
                while now & RUNNING == 0 && now != 0 {
                    match shared.interrupt.compare_exchange(
                        now,
                        0,
                        Ordering::SeqCst,
                        Ordering::SeqCst,
                    ) {
                        Ok(_) => {
                            let (code, tag) = taken.first().map_or(
                                (ACL_ERROR_RT_INTERNAL_ERROR, TaskTag::default()),
                                |(t, tag)| (Interrupt::code(now, t), *tag),
                            );
                            shared.task_failed(code, tag);
                            break;
                        }
                        Err(seen) => now = seen,
                    }
                }
            }
            taken
        };
        // Outside the lock: dropping frees what the tasks own and gives
        // workspaces back, which may call the user's allocator.
        for (task, _) in &taken {
            shared.drop_task(task);
        }
        let dropped = taken.len();
        if shared.room_waiters.load(Ordering::Relaxed) > 0 {
            let _guard = shared.sleep_lock();
            shared.room.notify_all();
        }
        dropped
    }

    /// `aclrtSetStreamFailureMode`: with `stop`, after a failed task the
    /// stream drops its work until a synchronize reports the failure.
    pub fn set_stop_on_failure(&self, stop: bool) {
        self.shared.stop_on_failure.store(stop, Ordering::SeqCst);
    }

    /// Whether the stream stops at a failed task (`aclrtGetStreamAttribute`).
    pub fn stops_on_failure(&self) -> bool {
        self.shared.stop_on_failure.load(Ordering::SeqCst)
    }

    /// This stream in the wait-for graph of kernels and event waits (`waits`).
    pub(crate) fn wait_id(&self) -> usize {
        Arc::as_ptr(&self.shared) as usize
    }

    /// Tasks enqueued that have not started.
    pub fn queued(&self) -> usize {
        self.shared.queue.len()
    }

    /// True when every task enqueued so far has finished.
    pub fn is_idle(&self) -> bool {
        self.shared.pending.load(Ordering::SeqCst) == 0
    }

    /// Stops the stream and returns once the worker has run what was queued
    /// and exited.
    pub fn shut_down(&self) -> Result<()> {
        if self.is_current_worker() {
            return Err(DESTROY_OWN);
        }
        self.close();
        if self.is_inherited() {
            // The worker is the parent's: nothing to join, and the queue never runs.
            if let Some(worker) = self.shared.worker.lock().take() {
                fork::keep_inherited(worker);
            }
            return Ok(());
        }
        // A worker that died has already exited: joining returns at once.
        if let Some(worker) = self.shared.worker.lock().take() {
            let _ = worker.join();
        }
        Ok(())
    }

    /// Refuses new work and returns at once; the worker runs what was
    /// queued, then exits.
    pub fn close(&self) {
        let shared = &*self.shared;
        shared.closed.store(true, Ordering::SeqCst);
        if self.is_inherited() {
            return;
        }
        // Every push that passed the `closed` check is in the queue after this.
        while shared.entering.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
        {
            let _guard = shared.sleep_lock();
            shared.work.notify_all();
            shared.room.notify_all();
        }
        // The queue still runs: a worker that a kernel ended is replaced.
        self.restart_worker();
    }

    /// True once the worker has exited (or died): nothing queued is left to run.
    pub fn is_finished(&self) -> bool {
        self.shared.worker_exited.load(Ordering::Acquire)
            || self.shared.dead.load(Ordering::Acquire)
    }

    /// Starts a new worker when a kernel ended the last one.
    #[cold]
    fn restart_worker(&self) {
        let shared = &self.shared;
        if shared
            .orphaned
            .compare_exchange(true, false, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            // The ended thread returns right after it set the flag.
            if let Some(ended) = shared.worker.lock().take() {
                let _ = ended.join();
            }
            if Shared::start_worker(shared).is_err() {
                shared.dead.store(true, Ordering::SeqCst);
            }
        }
    }

    /// Fails when the stream was inherited through `fork()` or its worker died.
    #[inline]
    pub fn check_alive(&self) -> Result<()> {
        if self.is_inherited() {
            return Err(fork::INHERITED);
        }
        if self.shared.dead.load(Ordering::Relaxed) {
            return Err(DEAD);
        }
        Ok(())
    }

    /// True in a child process for a stream its parent made before `fork()`.
    #[inline]
    pub fn is_inherited(&self) -> bool {
        self.shared.generation != fork::generation()
    }

    /// True once the stream has been shut down (it accepts no more work).
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::SeqCst)
    }

    /// True on this stream's worker thread (inside one of its kernels).
    pub fn is_current_worker(&self) -> bool {
        WORKER_OF.with(|w| w.get()) == Arc::as_ptr(&self.shared) as usize
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.shut_down();
    }
}

impl Drop for Shared {
    /// Tasks still queued when the last reference goes (behind a worker
    /// that died) never run: what they own is freed and the event counts
    /// they hold go back. A fence is skipped: its synchronizer has
    /// returned, and its flag with it.
    fn drop(&mut self) {
        while let Some((task, _)) = self.queue.pop() {
            if !matches!(task, Task::Fence(_)) {
                self.drop_task(&task);
            }
        }
    }
}

/// The stream whose worker is this thread in the wait-for graph (0: none).
pub(crate) fn current_wait_id() -> usize {
    WORKER_OF.with(|w| w.get())
}

/// True on any stream's worker thread (inside a kernel).
pub fn on_any_worker() -> bool {
    WORKER_OF.with(|w| w.get()) != 0
}

impl Shared {
    /// The sleep lock; it guards no data, so poisoning is ignored.
    fn sleep_lock(&self) -> MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The head lock (see `head`); it guards no data either.
    fn head_lock(&self) -> MutexGuard<'_, ()> {
        self.head.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn start_worker(shared: &Arc<Shared>) -> Result<()> {
        let for_worker = Arc::clone(shared);
        let worker = crate::base::threads::spawn(
            format!("aclalloc-stream-d{}", shared.memory.device()),
            move || Shared::run(&for_worker),
        )
        .map_err(|_| Error::BadAlloc {
            what: "a stream's worker thread",
        })?;
        *shared.worker.lock() = Some(worker);
        Ok(())
    }

    fn run(self: &Arc<Self>) {
        WORKER_OF.with(|w| w.set(Arc::as_ptr(self) as usize));
        INTERRUPT.with(|i| *i.borrow_mut() = Some(Arc::clone(&self.interrupt)));
        // After a panic the stream is dead and everyone waiting is woken.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.serve()));
        if matches!(outcome, Ok(false)) {
            // A kernel or a free callback ended this thread (pthread_exit,
            // pthread_cancel: the unwind was paused in `foreign_call`): it
            // ends by returning; waiters are woken to start a new worker.
            foreign_call::forget_paused_unwind();
            self.orphaned.store(true, Ordering::SeqCst);
            let _guard = self.sleep_lock();
            self.done.notify_all();
            self.room.notify_all();
            return;
        }
        if !matches!(outcome, Ok(true)) {
            self.dead.store(true, Ordering::SeqCst);
            self.worker_exited.store(true, Ordering::Release);
            let _guard = self.sleep_lock();
            self.done.notify_all();
            self.room.notify_all();
        }
    }

    /// Runs the queue until the stream closes (true) or a kernel ends the
    /// thread (false).
    fn serve(&self) -> bool {
        loop {
            while let Some(((task, tag), before)) = self.take_next() {
                if !self.execute(&task, tag, before) {
                    return false;
                }
                if self.room_waiters.load(Ordering::Relaxed) > 0 {
                    let _guard = self.sleep_lock();
                    self.room.notify_all();
                }
            }
            // `closed` is set and no push is in flight: the queue stays empty.
            if self.closed.load(Ordering::SeqCst)
                && self.entering.load(Ordering::SeqCst) == 0
                && self.queue.is_empty()
            {
                self.worker_exited.store(true, Ordering::Release);
                return true;
            }
            if !self.spin_until_work() {
                self.sleep();
            }
        }
    }

    /// Spins a little; true if work (or shutdown) arrived meanwhile.
    fn spin_until_work(&self) -> bool {
        for _ in 0..SPIN_ROUNDS {
            for _ in 0..8 {
                std::hint::spin_loop();
            }
            if !self.queue.is_empty() || self.closed.load(Ordering::Relaxed) {
                return true;
            }
        }
        false
    }

    fn sleep(&self) {
        let guard = self.sleep_lock();
        self.worker_asleep.store(true, Ordering::SeqCst);
        // Pairs with the fence in `Stream::enqueue`.
        fence(Ordering::SeqCst);
        let _guard = if self.queue.is_empty() && !self.closed.load(Ordering::SeqCst) {
            self.work
                .wait(guard)
                .unwrap_or_else(PoisonError::into_inner)
        } else {
            guard
        };
        self.worker_asleep.store(false, Ordering::Relaxed);
    }

    /// The next task, marked running, with the interrupt word as it was
    /// before (see `head`).
    fn take_next(&self) -> Option<(Entry, u64)> {
        let _head = self.head_lock();
        let task = self.queue.pop()?;
        Some((task, self.interrupt.fetch_or(RUNNING, Ordering::SeqCst)))
    }

    /// Runs `task`, marked running when the interrupt word was `before`;
    /// false when a kernel or a free callback ended the thread (the task is
    /// retired all the same).
    fn execute(&self, task: &Task, tag: TaskTag, before: u64) -> bool {
        if before & (STOPPED | ABORTED) != 0 {
            // Stopped or aborted before it started: it fails without running.
            self.interrupt.store(0, Ordering::SeqCst);
            self.task_failed(Interrupt::code(before, task), tag);
            self.pending.fetch_sub(1, Ordering::SeqCst);
            self.drop_task(task);
            return true;
        }
        // Stop-on-failure: until a synchronize reports the failure, tasks
        // are dropped (retired as if run, so nothing waits forever).
        if self.failure.load(Ordering::Relaxed) != 0 && self.stop_on_failure.load(Ordering::Relaxed)
        {
            self.interrupt.store(0, Ordering::SeqCst);
            self.pending.fetch_sub(1, Ordering::SeqCst);
            self.drop_task(task);
            return true;
        }
        match *task {
            Task::Kernel {
                kernel,
                workspace,
                size,
                user_data,
                ..
            } => {
                // SAFETY: the launcher's contract: a kernel callable with its
                // workspace and argument. One that throws ends the process
                // with its name (`foreign_call`).
                unsafe {
                    foreign_call::kernel(kernel, workspace, size, user_data, self.memory.device())
                };
                #[cfg(feature = "test-hooks")]
                if test_hook::panics_after(kernel) {
                    panic!(
                        "{} names this kernel: the worker panics (test hook)",
                        test_hook::VAR
                    );
                }
            }
            Task::Owning {
                run, size, data, ..
            } => {
                // SAFETY: as a kernel; `run` takes over what `data` owns.
                unsafe {
                    foreign_call::kernel(
                        run,
                        std::ptr::null_mut(),
                        size,
                        data,
                        self.memory.device(),
                    )
                };
            }
            Task::Copy { dst, src, count } => {
                // SAFETY: both ranges were checked against device memory, or
                // vouched for by the caller, when the task was enqueued.
                unsafe { super::device_copy::copy(dst, src, count) }
            }
            Task::Set { dst, value, count } => {
                // SAFETY: the range was checked against device memory, or
                // vouched for by the caller, when the task was enqueued.
                unsafe { dst.write_bytes(value, count) }
            }
            Task::Fence(_) | Task::Record(..) => {}
            Task::Wait(event, generation) => {
                // SAFETY: the task holds a count of the event until it retires.
                unsafe { &*event }.stream_wait(generation, None);
            }
            Task::TimedWait(event, generation, seconds) => {
                let limit = Duration::from_secs(u64::from(seconds));
                // SAFETY: as above.
                if !unsafe { &*event }.stream_wait(generation, Some(limit)) {
                    self.task_failed(crate::base::error::ACL_ERROR_RT_EVENT_SYNC_TIMEOUT, tag);
                }
            }
            // SAFETY: as above.
            Task::Reset(event) => unsafe { &*event }.reset(),
            #[cfg(test)]
            Task::Panic => panic!("a test made the worker panic"),
        }
        let failed = TASK_FAILURE.with(|f| f.replace(0));
        if failed != 0 {
            self.task_failed(failed, tag);
        }
        let interrupted = self.interrupt.swap(0, Ordering::SeqCst);
        if interrupted & (STOPPED | ABORTED) != 0 {
            self.task_failed(Interrupt::code(interrupted, task), tag);
        }
        // Before retiring: a synchronizer woken by a fence sees the stream idle.
        self.pending.fetch_sub(1, Ordering::SeqCst);
        self.retire(task);
        !foreign_call::unwind_paused()
    }

    /// Keeps the first failure, and the task that left it, for the next
    /// synchronize.
    #[cold]
    fn task_failed(&self, code: i32, tag: TaskTag) {
        // The tag before the code: whoever takes the code finds its tag.
        let _guard = self.failure_lock.lock();
        if self.failure.load(Ordering::SeqCst) == 0 {
            self.failed_tag.store(tag.pack(), Ordering::SeqCst);
            self.failure.store(code, Ordering::SeqCst);
        }
    }

    /// A task that will not run: what it owns is freed, then it retires.
    fn drop_task(&self, task: &Task) {
        if let Task::Owning { data, free, .. } = *task {
            // SAFETY: the task never ran, so it still owns `data`; it is
            // dropped once (popped from the queue once).
            unsafe { free(data) };
        }
        self.retire(task);
    }

    /// After a task, run or dropped: its workspace goes back, its synchronizer is told.
    fn retire(&self, task: &Task) {
        match *task {
            Task::Kernel {
                workspace,
                release: true,
                ..
            } => {
                if let Some(ws) = NonNull::new(workspace.cast::<u8>()) {
                    self.workspaces.free(&self.memory, ws);
                }
            }
            Task::Fence(reached) => {
                // SAFETY: the synchronizer keeps the flag alive until it is
                // set; nothing touches it afterwards.
                unsafe { &*reached }.store(true, Ordering::Release);
                let _guard = self.sleep_lock();
                self.done.notify_all();
            }
            // A record completes even when dropped, so no waiter waits forever.
            Task::Record(event, generation) => {
                // SAFETY: the count `Record` was made with, given back once.
                unsafe { Arc::from_raw(event) }.complete(generation);
            }
            Task::Wait(event, _) | Task::TimedWait(event, ..) | Task::Reset(event) => {
                // SAFETY: as above.
                drop(unsafe { Arc::from_raw(event) });
            }
            _ => {}
        }
    }
}

/// `ACLALLOC_TEST_WORKER_PANIC`, set to a kernel's address as C's `%p`
/// prints it, makes the worker panic after running that kernel, as a bug
/// would (`c_examples/dead_worker.c`). Only with the `test-hooks` feature.
#[cfg(feature = "test-hooks")]
mod test_hook {
    use super::KernelFn;
    use std::sync::OnceLock;

    pub(super) const VAR: &str = "ACLALLOC_TEST_WORKER_PANIC";

    /// True when the hook names `kernel`; runs on the worker, off the launch path.
    pub(super) fn panics_after(kernel: KernelFn) -> bool {
        static NAMED: OnceLock<usize> = OnceLock::new();
        let named = *NAMED.get_or_init(|| {
            std::env::var(VAR)
                .ok()
                .and_then(|v| usize::from_str_radix(v.trim().trim_start_matches("0x"), 16).ok())
                .unwrap_or(0)
        });
        named != 0 && named == kernel as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::sync::AtomicUsize;
    use crate::workspace::direct_device_memory;

    unsafe extern "C" fn append(_: *mut c_void, size: usize, log: *mut c_void) {
        // SAFETY: the tests pass a Mutex<Vec<usize>>.
        let log = unsafe { &*(log as *const Mutex<Vec<usize>>) };
        log.lock().push(size);
    }

    unsafe extern "C" fn tally(_: *mut c_void, _: usize, count: *mut c_void) {
        // SAFETY: the tests pass an AtomicUsize.
        unsafe { &*(count as *const AtomicUsize) }.fetch_add(1, Ordering::SeqCst);
    }

    unsafe extern "C" fn slow(workspace: *mut c_void, size: usize, count: *mut c_void) {
        std::thread::sleep(std::time::Duration::from_millis(2));
        // SAFETY: as `tally`.
        unsafe { tally(workspace, size, count) }
    }

    unsafe extern "C" fn gated(_: *mut c_void, _: usize, gate: *mut c_void) {
        // SAFETY: the tests pass an AtomicBool.
        let gate = unsafe { &*(gate as *const AtomicBool) };
        while gate.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
    }

    fn stream() -> Stream {
        Stream::new(
            Arc::new(DeviceHeap::new(0, 1 << 30)),
            direct_device_memory(),
        )
        .unwrap()
    }

    fn ptr<T>(x: &T) -> *const c_void {
        x as *const T as *const c_void
    }

    fn kernel(kernel: KernelFn, size: usize, data: *const c_void) -> Task {
        Task::Kernel {
            kernel,
            workspace: std::ptr::null_mut(),
            size,
            user_data: data as *mut c_void,
            release: false,
        }
    }

    #[test]
    fn work_runs_in_order_and_synchronize_waits_for_it() {
        let s = stream();
        let log = Mutex::new(Vec::<usize>::new());
        for i in 0..5000 {
            s.enqueue(kernel(append, i, ptr(&log))).unwrap();
        }
        s.synchronize().unwrap();
        assert_eq!(*log.lock(), (0..5000).collect::<Vec<_>>());
        assert_eq!(s.queued(), 0);
    }

    #[test]
    fn shut_down_waits_for_pending_work_and_close_lets_it_run() {
        let count = AtomicUsize::new(0);
        let s = stream();
        for _ in 0..10 {
            s.enqueue(kernel(slow, 0, ptr(&count))).unwrap();
        }
        s.shut_down().unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 10);
        assert_eq!(s.enqueue(kernel(slow, 0, ptr(&count))), Err(DESTROYED));

        // The first kernel holds the worker: `close` returns with all of the
        // work still queued, and all of it runs afterwards.
        let gate = AtomicBool::new(true);
        let closed = AtomicUsize::new(0);
        let s = stream();
        s.enqueue(kernel(gated, 0, ptr(&gate))).unwrap();
        for _ in 0..50 {
            s.enqueue(kernel(slow, 0, ptr(&closed))).unwrap();
        }
        s.close();
        assert_eq!(s.enqueue(kernel(slow, 0, ptr(&closed))), Err(DESTROYED));
        assert!(!s.is_finished());
        gate.store(false, Ordering::SeqCst);
        s.synchronize().unwrap();
        assert!(s.is_finished());
        assert_eq!(closed.load(Ordering::SeqCst), 50, "queued work ran");
    }

    #[test]
    fn copies_and_sets_run_in_stream_order() {
        let s = stream();
        let mut a = vec![0u8; 64];
        let mut b = vec![0u8; 64];
        s.enqueue(Task::Set {
            dst: a.as_mut_ptr(),
            value: 7,
            count: 64,
        })
        .unwrap();
        s.enqueue(Task::Copy {
            dst: b.as_mut_ptr(),
            src: a.as_ptr(),
            count: 32,
        })
        .unwrap();
        s.synchronize().unwrap();
        assert!(a.iter().all(|&x| x == 7));
        assert!(b[..32].iter().all(|&x| x == 7) && b[32..].iter().all(|&x| x == 0));
    }

    #[test]
    fn more_work_than_the_queue_holds_all_runs() {
        let count = AtomicUsize::new(0);
        let s = stream();
        let n = QUEUE_CAPACITY + 20;
        for _ in 0..n {
            s.enqueue(kernel(tally, 0, ptr(&count))).unwrap();
        }
        s.synchronize().unwrap();
        assert_eq!(count.load(Ordering::SeqCst), n);
    }

    #[test]
    fn a_dead_worker_fails_every_later_call_and_is_never_waited_for() {
        let s = stream();
        let count = AtomicUsize::new(0);
        let data = ptr(&count);
        s.enqueue(kernel(slow, 0, data)).unwrap();
        s.enqueue(Task::Panic).unwrap();
        s.enqueue(kernel(slow, 0, data)).unwrap();
        // The fence behind the panic is never reached: synchronize returns.
        assert_eq!(s.synchronize(), Err(DEAD));
        assert_eq!(
            count.load(Ordering::SeqCst),
            1,
            "work after the panic never runs"
        );
        assert_eq!(s.enqueue(kernel(slow, 0, data)), Err(DEAD));
        assert_eq!(s.synchronize(), Err(DEAD));
        assert_eq!(s.check_alive(), Err(DEAD));
        // A synchronizer already waiting when the worker dies is woken too.
        let gate = AtomicBool::new(true);
        let s = stream();
        s.enqueue(kernel(gated, 0, ptr(&gate))).unwrap();
        s.enqueue(Task::Panic).unwrap();
        std::thread::scope(|scope| {
            let waiting = scope.spawn(|| s.synchronize());
            std::thread::sleep(std::time::Duration::from_millis(20));
            gate.store(false, Ordering::SeqCst);
            assert_eq!(waiting.join().unwrap(), Err(DEAD));
        });
        s.shut_down().unwrap();
    }

    unsafe extern "C" fn noop(_: *mut c_void, _: usize, _: *mut c_void) {}

    /// Two streams whose kernels wait for each other: A's for room on B, B's by synchronizing A.
    struct RoomCycle {
        a: Stream,
        b: Stream,
        b_started: AtomicBool,
        a_result: Mutex<Option<Result<()>>>,
        b_result: Mutex<Option<Result<()>>>,
    }

    /// On A: enqueues onto B, whose queue is full.
    unsafe extern "C" fn enqueue_onto_full_b(_: *mut c_void, _: usize, cycle: *mut c_void) {
        // SAFETY: the test passes a leaked RoomCycle.
        let cycle = unsafe { &*(cycle as *const RoomCycle) };
        let result = cycle.b.enqueue(kernel(noop, 0, std::ptr::null()));
        *cycle.a_result.lock() = Some(result);
    }

    /// On B: once A's kernel waits for room on B, synchronizes A.
    unsafe extern "C" fn synchronize_a_once_it_waits(_: *mut c_void, _: usize, cycle: *mut c_void) {
        // SAFETY: the test passes a leaked RoomCycle.
        let cycle = unsafe { &*(cycle as *const RoomCycle) };
        cycle.b_started.store(true, Ordering::SeqCst);
        while cycle.b.shared.room_waiters.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        // Let A's kernel go from counting itself as a room waiter to sleeping.
        std::thread::sleep(std::time::Duration::from_millis(5));
        *cycle.b_result.lock() = Some(cycle.a.synchronize());
    }

    #[test]
    fn a_kernel_waiting_for_room_is_in_the_wait_for_graph() {
        // Before room waits were recorded, both workers waited forever.
        let cycle: &'static RoomCycle = Box::leak(Box::new(RoomCycle {
            a: stream(),
            b: stream(),
            b_started: AtomicBool::new(false),
            a_result: Mutex::new(None),
            b_result: Mutex::new(None),
        }));
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let data = cycle as *const RoomCycle as *const c_void;
            cycle
                .b
                .enqueue(kernel(synchronize_a_once_it_waits, 0, data))
                .unwrap();
            while !cycle.b_started.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            // B's worker is inside its kernel: fill its queue to the brim.
            while cycle
                .b
                .shared
                .queue
                .push((kernel(noop, 0, std::ptr::null()), TaskTag::default()))
                .is_ok()
            {}
            cycle
                .a
                .enqueue(kernel(enqueue_onto_full_b, 0, data))
                .unwrap();
            cycle.b.synchronize().unwrap();
            cycle.a.synchronize().unwrap();
            let _ = done.send(());
        });
        finished
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the two kernels deadlocked: the room wait was not in the wait-for graph");
        assert_eq!(*cycle.b_result.lock(), Some(Err(waits::DEADLOCK)));
        assert_eq!(*cycle.a_result.lock(), Some(Ok(())));
    }

    unsafe fn count_free(count: *mut c_void) {
        // SAFETY: the tests pass an AtomicUsize.
        unsafe { &*(count as *const AtomicUsize) }.fetch_add(100, Ordering::SeqCst);
    }

    /// A task that adds 1 to `count` when run and 100 when dropped unrun.
    fn counting(count: &AtomicUsize, kernel: bool) -> Task {
        Task::Owning {
            run: tally,
            size: 0,
            data: ptr(count) as *mut c_void,
            free: count_free,
            kernel,
        }
    }

    #[test]
    fn an_owning_task_frees_what_it_owns_when_dropped_and_not_when_run() {
        let s = stream();
        let gate = AtomicBool::new(true);
        let (ran, dropped) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let owning = |count| counting(count, true);
        s.enqueue(owning(&ran)).unwrap();
        s.synchronize().unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 1, "run, not freed");
        // Behind a running kernel, aborted: freed, not run.
        s.enqueue(kernel(gated, 0, ptr(&gate))).unwrap();
        s.enqueue(owning(&dropped)).unwrap();
        while s.queued() > 1 {
            std::thread::yield_now();
        }
        assert_eq!(s.abort(), 1);
        gate.store(false, Ordering::SeqCst);
        assert_eq!(
            s.synchronize(),
            Err(Error::TaskFailed {
                code: ACL_ERROR_RT_VECTOR_CORE_EXCEPTION
            })
        );
        assert_eq!(dropped.load(Ordering::SeqCst), 100, "freed, not run");
        // Behind a failure in stop-on-failure mode: freed too.
        s.set_stop_on_failure(true);
        s.shared.failure.store(1, Ordering::SeqCst);
        let after_failure = AtomicUsize::new(0);
        s.enqueue(owning(&after_failure)).unwrap();
        assert_eq!(s.synchronize(), Err(Error::TaskFailed { code: 1 }));
        assert_eq!(after_failure.load(Ordering::SeqCst), 100);
    }

    #[test]
    fn an_abort_fails_the_head_task_never_one_behind_it() {
        // The head is a kernel (ACL_ERROR_RT_VECTOR_CORE_EXCEPTION when
        // aborted), behind it a task that is not (ACL_ERROR_RT_INTERNAL_ERROR).
        // The abort comes while the worker may be taking the head: whoever
        // takes it, the kernel's code is the one reported.
        let s = stream();
        let freed = AtomicUsize::new(0);
        for round in 0..2000 {
            let gate = AtomicBool::new(true);
            s.enqueue(kernel(gated, 0, ptr(&gate))).unwrap();
            s.enqueue(counting(&freed, false)).unwrap();
            s.abort();
            gate.store(false, Ordering::SeqCst);
            assert_eq!(
                s.synchronize(),
                Err(Error::TaskFailed {
                    code: ACL_ERROR_RT_VECTOR_CORE_EXCEPTION
                }),
                "round {round}"
            );
        }
        assert_eq!(
            freed.load(Ordering::SeqCst),
            2000 * 100,
            "each dropped, not run"
        );
    }

    #[test]
    fn tasks_behind_a_dead_worker_free_what_they_own_when_the_stream_goes() {
        let s = stream();
        let freed = AtomicUsize::new(0);
        s.enqueue(Task::Panic).unwrap();
        s.enqueue(counting(&freed, true)).unwrap();
        // Its fence stays queued too, behind the panic.
        assert_eq!(s.synchronize(), Err(DEAD));
        assert_eq!(freed.load(Ordering::SeqCst), 0, "neither run nor freed yet");
        drop(s);
        assert_eq!(freed.load(Ordering::SeqCst), 100, "freed, not run");
    }

    #[test]
    fn released_workspaces_go_back_after_the_kernel() {
        let s = stream();
        let log = Mutex::new(Vec::<usize>::new());
        let ws = s.memory().alloc(1000).unwrap();
        s.enqueue(Task::Kernel {
            kernel: append,
            workspace: ws.as_ptr().cast(),
            size: 1000,
            user_data: ptr(&log) as *mut c_void,
            release: true,
        })
        .unwrap();
        s.synchronize().unwrap();
        assert_eq!(*log.lock(), vec![1000]);
        assert_eq!(s.memory().live_allocations(), 0);
    }
}
