//! Task ids and exception callbacks: `aclrtGetThreadLastTaskId`,
//! `aclrtSetExceptionInfoCallback`, `aclrtExceptionInfoCallbackRegister`
//! and `aclrtExceptionInfoCallbackUnregister`.
//!
//! Every task enqueued on a stream (a synchronize's marker aside) gets a
//! task id, unique in the process and increasing, and remembers the thread
//! that enqueued it. When a task fails, the stream keeps its id and thread
//! with the failure; the synchronize that reports the failure first calls
//! the registered callbacks with an [`aclrtExceptionInfo`] describing it.

use parking_lot::Mutex;
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

/// What CANN's exception callbacks are told about a failed task (CANN's
/// opaque `aclrtExceptionInfo`, read with its getters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct aclrtExceptionInfo {
    /// The failed task's id, as `aclrtGetThreadLastTaskId` gave it.
    pub task_id: u32,
    /// Its stream's id, as `aclrtStreamGetId` gives it.
    pub stream_id: u32,
    /// The thread that enqueued it (its kernel thread id).
    pub thread_id: u32,
    /// Its stream's device.
    pub device_id: u32,
    /// The error code the task failed with.
    pub error_code: u32,
}

/// `void fn(aclrtExceptionInfo *exceptionInfo)`.
pub type ExceptionCallback = unsafe extern "C" fn(info: *mut aclrtExceptionInfo);

/// The task a queue entry is: its id and the thread that enqueued it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskTag {
    pub task_id: u32,
    pub thread_id: u32,
}

impl TaskTag {
    pub(crate) fn pack(self) -> u64 {
        (u64::from(self.task_id) << 32) | u64::from(self.thread_id)
    }

    pub(crate) fn unpack(word: u64) -> Self {
        TaskTag {
            task_id: (word >> 32) as u32,
            thread_id: word as u32,
        }
    }
}

/// The last task id given (0: none yet).
static NEXT_TASK_ID: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// The id of the last task this thread enqueued (0: none).
    static LAST_TASK_ID: Cell<u32> = const { Cell::new(0) };
    /// This thread's kernel thread id (0: not read yet).
    static THREAD_ID: Cell<u32> = const { Cell::new(0) };
}

/// The calling thread's kernel thread id.
pub fn current_thread_id() -> u32 {
    THREAD_ID.with(|t| {
        if t.get() == 0 {
            // SAFETY: gettid takes no arguments and cannot fail.
            t.set(unsafe { libc::syscall(libc::SYS_gettid) } as u32);
        }
        t.get()
    })
}

/// A new task's tag: the next id, which becomes the calling thread's last.
pub(crate) fn new_task() -> TaskTag {
    let mut id = NEXT_TASK_ID.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
    if id == 0 {
        // After wrapping: 0 stays "none".
        id = NEXT_TASK_ID.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
    }
    LAST_TASK_ID.with(|l| l.set(id));
    TaskTag {
        task_id: id,
        thread_id: current_thread_id(),
    }
}

/// `aclrtGetThreadLastTaskId`: the id of the last task the calling thread
/// enqueued on a stream (0 before its first).
pub fn thread_last_task_id() -> u32 {
    LAST_TASK_ID.with(Cell::get)
}

struct Callbacks {
    /// `aclrtSetExceptionInfoCallback`'s (None: unset).
    set: Option<ExceptionCallback>,
    /// `aclrtExceptionInfoCallbackRegister`'s, in registration order.
    registered: Vec<ExceptionCallback>,
}

static CALLBACKS: Mutex<Callbacks> = Mutex::new(Callbacks {
    set: None,
    registered: Vec::new(),
});

/// `aclrtSetExceptionInfoCallback`: replaces the callback it set (None unsets it).
pub fn set_callback(callback: Option<ExceptionCallback>) {
    CALLBACKS.lock().set = callback;
}

/// `aclrtExceptionInfoCallbackRegister`: adds `callback` (once).
pub fn register_callback(callback: ExceptionCallback) {
    let mut callbacks = CALLBACKS.lock();
    if !callbacks
        .registered
        .iter()
        .any(|c| *c as usize == callback as usize)
    {
        callbacks.registered.push(callback);
    }
}

/// `aclrtExceptionInfoCallbackUnregister`: removes `callback` (nothing
/// happens when it is not registered).
pub fn unregister_callback(callback: ExceptionCallback) {
    CALLBACKS
        .lock()
        .registered
        .retain(|c| *c as usize != callback as usize);
}

/// Calls every exception callback with `info`, outside the lock (a
/// callback may register or unset callbacks).
pub(crate) fn report(info: aclrtExceptionInfo) {
    let callbacks: Vec<ExceptionCallback> = {
        let c = CALLBACKS.lock();
        c.set.iter().chain(c.registered.iter()).copied().collect()
    };
    for callback in callbacks {
        let mut copy = info;
        // SAFETY: the caller registered a function of this signature; the
        // info lives for the call.
        unsafe { callback(&mut copy) };
    }
}
