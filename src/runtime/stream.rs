//! A stream: an in-order queue of work run by its own host worker thread.
//!
//! The queue is a ring of fixed capacity allocated when the stream is
//! created, so enqueueing never allocates; when it is full the launching
//! thread waits for room, as a device queue applies back-pressure. The worker
//! takes work in batches under one short lock, runs it without the lock, and
//! spins briefly before it sleeps, so that a steady flow of launches does not
//! pay a wake-up system call each; producers only signal a worker that is
//! actually asleep.

use super::memory::DeviceMemory;
use super::workspace::WorkspaceAllocator;
use crate::core::error::{Error, Result};
use parking_lot::{Condvar, Mutex};
use std::cell::Cell;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A host "kernel": `void kernel(void *workspace, size_t size, void *userData)`.
pub type KernelFn =
    unsafe extern "C" fn(workspace: *mut c_void, size: usize, user_data: *mut c_void);

/// How many tasks a stream holds before launches wait for room.
pub const QUEUE_CAPACITY: usize = 1024;
/// How many tasks the worker takes per lock.
const BATCH: usize = 64;
/// Spin rounds before the worker sleeps (each a few dozen pause instructions).
const SPIN_ROUNDS: u32 = 64;

const DESTROYED: Error = Error::InvalidParam {
    param: "stream",
    reason: "The stream is being destroyed",
};

/// One unit of work on a stream.
#[derive(Clone, Copy)]
pub enum Task {
    /// Runs `kernel(workspace, size, user_data)`; with `release`, the
    /// workspace then goes back to the stream's workspace allocator.
    Kernel {
        /// The kernel.
        kernel: KernelFn,
        /// Its workspace (NULL when `size` is 0).
        workspace: *mut c_void,
        /// The workspace size.
        size: usize,
        /// The caller's argument.
        user_data: *mut c_void,
        /// Whether the worker frees the workspace after the kernel.
        release: bool,
    },
    /// `memmove(dst, src, count)`.
    Copy {
        /// Destination.
        dst: *mut u8,
        /// Source.
        src: *const u8,
        /// Bytes.
        count: usize,
    },
    /// `memset(dst, value, count)`.
    Set {
        /// Destination.
        dst: *mut u8,
        /// The byte value.
        value: u8,
        /// Bytes.
        count: usize,
    },
}

// SAFETY: the pointers in a task are the caller's, handed over with the
// launch as with CANN's asynchronous calls; the worker is the only thread
// that uses them afterwards.
unsafe impl Send for Task {}

struct Queue {
    tasks: VecDeque<Task>,
    submitted: u64,
    completed: u64,
    closed: bool,
    worker_asleep: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    /// The worker waits here for work.
    work: Condvar,
    /// Producers wait here for room.
    room: Condvar,
    /// Synchronizers wait here for completion.
    done: Condvar,
    /// Mirrors `Queue::submitted` for the worker's lock-free spin.
    submitted: AtomicU64,
    memory: Arc<DeviceMemory>,
    workspaces: &'static dyn WorkspaceAllocator,
}

thread_local! {
    /// The stream whose worker is this thread, if any.
    static WORKER_OF: Cell<usize> = const { Cell::new(0) };
}

/// A stream of one device.
pub struct Stream {
    shared: Arc<Shared>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl Stream {
    /// A stream on `memory`'s device whose launches without a registered
    /// allocator take workspaces from `workspaces`.
    pub fn new(
        memory: Arc<DeviceMemory>,
        workspaces: &'static dyn WorkspaceAllocator,
    ) -> Result<Self> {
        let mut tasks = VecDeque::new();
        tasks
            .try_reserve_exact(QUEUE_CAPACITY)
            .map_err(|_| Error::BadAlloc {
                what: "a stream's task queue",
            })?;
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                tasks,
                submitted: 0,
                completed: 0,
                closed: false,
                worker_asleep: false,
            }),
            work: Condvar::new(),
            room: Condvar::new(),
            done: Condvar::new(),
            submitted: AtomicU64::new(0),
            memory,
            workspaces,
        });
        let for_worker = Arc::clone(&shared);
        let worker = std::thread::Builder::new()
            .name(format!("aclalloc-stream-d{}", shared.memory.device()))
            .spawn(move || for_worker.run())
            .map_err(|_| Error::BadAlloc {
                what: "a stream's worker thread",
            })?;
        Ok(Stream {
            shared,
            worker: Mutex::new(Some(worker)),
        })
    }

    /// The device this stream runs on.
    pub fn device(&self) -> u32 {
        self.shared.memory.device()
    }

    /// The device memory of this stream's device.
    pub fn memory(&self) -> &Arc<DeviceMemory> {
        &self.shared.memory
    }

    /// The allocator that serves workspaces when no allocator is registered.
    pub fn workspace_allocator(&self) -> &'static dyn WorkspaceAllocator {
        self.shared.workspaces
    }

    /// Appends `task`; waits while the queue is full. Fails once the stream
    /// is being destroyed.
    pub fn enqueue(&self, task: Task) -> Result<()> {
        let shared = &*self.shared;
        let mut q = shared.queue.lock();
        while q.tasks.len() == QUEUE_CAPACITY && !q.closed {
            if self.is_current_worker() {
                // Waiting for room from inside the worker would wait forever.
                return Err(Error::InvalidParam {
                    param: "stream",
                    reason: "A kernel cannot enqueue onto its own stream when the stream's queue is full",
                });
            }
            shared.room.wait(&mut q);
        }
        if q.closed {
            return Err(DESTROYED);
        }
        q.tasks.push_back(task);
        q.submitted += 1;
        shared.submitted.store(q.submitted, Ordering::Release);
        let wake = q.worker_asleep;
        drop(q);
        if wake {
            shared.work.notify_one();
        }
        Ok(())
    }

    /// Waits until everything enqueued before the call has run.
    pub fn synchronize(&self) -> Result<()> {
        if self.is_current_worker() {
            return Err(Error::InvalidParam {
                param: "stream",
                reason: "A kernel cannot synchronize the stream it runs on",
            });
        }
        let shared = &*self.shared;
        let mut q = shared.queue.lock();
        let target = q.submitted;
        while q.completed < target {
            shared.done.wait(&mut q);
        }
        Ok(())
    }

    /// Tasks enqueued and not yet finished.
    pub fn pending(&self) -> u64 {
        let q = self.shared.queue.lock();
        q.submitted - q.completed
    }

    /// Stops the stream: no new work is accepted; with `force`, work that has
    /// not started is dropped (its workspaces are given back), otherwise it
    /// runs first. Returns once the worker has exited.
    pub fn shut_down(&self, force: bool) -> Result<()> {
        if self.is_current_worker() {
            return Err(Error::InvalidParam {
                param: "stream",
                reason: "A kernel cannot destroy the stream it runs on",
            });
        }
        let shared = &*self.shared;
        {
            let mut q = shared.queue.lock();
            if force {
                let dropped = q.tasks.len() as u64;
                while let Some(task) = q.tasks.pop_front() {
                    shared.release(&task);
                }
                q.completed += dropped;
            }
            q.closed = true;
        }
        shared.work.notify_all();
        shared.room.notify_all();
        shared.done.notify_all();
        if let Some(worker) = self.worker.lock().take() {
            let _ = worker.join();
        }
        Ok(())
    }

    /// True on this stream's worker thread (inside one of its kernels).
    pub fn is_current_worker(&self) -> bool {
        WORKER_OF.with(|w| w.get()) == Arc::as_ptr(&self.shared) as usize
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.shut_down(false);
    }
}

impl Shared {
    fn run(&self) {
        WORKER_OF.with(|w| w.set(self as *const Shared as usize));
        let mut batch = [None::<Task>; BATCH];
        loop {
            let taken = {
                let mut q = self.queue.lock();
                while q.tasks.is_empty() {
                    if q.closed {
                        return;
                    }
                    let seen = q.submitted;
                    drop(q);
                    self.spin_while_idle(seen);
                    q = self.queue.lock();
                    if q.tasks.is_empty() && !q.closed {
                        q.worker_asleep = true;
                        self.work.wait(&mut q);
                        q.worker_asleep = false;
                    }
                }
                let was_full = q.tasks.len() == QUEUE_CAPACITY;
                let n = q.tasks.len().min(BATCH);
                for slot in batch.iter_mut().take(n) {
                    *slot = q.tasks.pop_front();
                }
                drop(q);
                if was_full {
                    self.room.notify_all();
                }
                n
            };
            for slot in batch.iter_mut().take(taken) {
                if let Some(task) = slot.take() {
                    self.execute(&task);
                }
            }
            self.queue.lock().completed += taken as u64;
            self.done.notify_all();
        }
    }

    fn spin_while_idle(&self, seen: u64) {
        for _ in 0..SPIN_ROUNDS {
            for _ in 0..8 {
                std::hint::spin_loop();
            }
            if self.submitted.load(Ordering::Acquire) != seen {
                return;
            }
        }
    }

    fn execute(&self, task: &Task) {
        match *task {
            Task::Kernel {
                kernel,
                workspace,
                size,
                user_data,
                ..
            } => {
                // SAFETY: the launcher's contract: a kernel callable with its
                // workspace and argument.
                unsafe { kernel(workspace, size, user_data) };
            }
            // SAFETY (both): the ranges were checked against device memory,
            // or vouched for by the caller, when the task was enqueued.
            Task::Copy { dst, src, count } => unsafe { std::ptr::copy(src, dst, count) },
            Task::Set { dst, value, count } => unsafe { dst.write_bytes(value, count) },
        }
        self.release(task);
    }

    fn release(&self, task: &Task) {
        if let Task::Kernel {
            workspace,
            release: true,
            ..
        } = *task
        {
            if let Some(ws) = NonNull::new(workspace.cast::<u8>()) {
                self.workspaces.free(&self.memory, ws);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::workspace::default_allocator;
    use std::sync::atomic::AtomicUsize;

    unsafe extern "C" fn append(_: *mut c_void, size: usize, log: *mut c_void) {
        // SAFETY: the tests pass a Mutex<Vec<usize>>.
        let log = unsafe { &*(log as *const Mutex<Vec<usize>>) };
        log.lock().push(size);
    }

    unsafe extern "C" fn slow(_: *mut c_void, _: usize, count: *mut c_void) {
        std::thread::sleep(std::time::Duration::from_millis(2));
        // SAFETY: the tests pass an AtomicUsize.
        unsafe { &*(count as *const AtomicUsize) }.fetch_add(1, Ordering::SeqCst);
    }

    fn stream() -> Stream {
        Stream::new(Arc::new(DeviceMemory::new(0, 1 << 30)), default_allocator()).unwrap()
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
            s.enqueue(kernel(append, i, &log as *const _ as *const c_void))
                .unwrap();
        }
        s.synchronize().unwrap();
        assert_eq!(*log.lock(), (0..5000).collect::<Vec<_>>());
        assert_eq!(s.pending(), 0);
    }

    #[test]
    fn destroy_waits_for_pending_work_and_force_drops_it() {
        let count = AtomicUsize::new(0);
        let s = stream();
        for _ in 0..10 {
            s.enqueue(kernel(slow, 0, &count as *const _ as *const c_void))
                .unwrap();
        }
        s.shut_down(false).unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 10);
        assert_eq!(
            s.enqueue(kernel(slow, 0, &count as *const _ as *const c_void)),
            Err(DESTROYED)
        );

        let forced = AtomicUsize::new(0);
        let s = stream();
        for _ in 0..50 {
            s.enqueue(kernel(slow, 0, &forced as *const _ as *const c_void))
                .unwrap();
        }
        s.shut_down(true).unwrap();
        let ran = forced.load(Ordering::SeqCst);
        assert!(
            ran < 50,
            "force dropped work that had not started ({ran} ran)"
        );
        s.synchronize().unwrap();
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
            s.enqueue(kernel(slow_free, 0, &count as *const _ as *const c_void))
                .unwrap();
        }
        s.synchronize().unwrap();
        assert_eq!(count.load(Ordering::SeqCst), n);
    }

    unsafe extern "C" fn slow_free(_: *mut c_void, _: usize, count: *mut c_void) {
        // SAFETY: the tests pass an AtomicUsize.
        unsafe { &*(count as *const AtomicUsize) }.fetch_add(1, Ordering::SeqCst);
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
            user_data: &log as *const _ as *mut c_void,
            release: true,
        })
        .unwrap();
        s.synchronize().unwrap();
        assert_eq!(*log.lock(), vec![1000]);
        assert_eq!(s.memory().live_allocations(), 0);
    }
}
