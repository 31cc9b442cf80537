//! Stream management: `aclrtCreateStream[WithConfig]`,
//! `aclrtDestroyStream[Force]`, `aclrtSynchronizeStream`, and the default
//! stream a NULL `aclrtStream` stands for.
//!
//! Destroying a stream also drops its allocator registration (CANN keeps
//! the stale entry), so the registration table does not fill up with dead
//! streams.

use super::host::{HostRuntime, StreamEntry};
use super::launch_cache;
use super::stream_worker::Stream;
use super::waits::DEADLOCK;
use crate::base::error::{Error, Result};
use crate::base::handles::Handle;
use crate::base::ids::StreamHandle;
use crate::base::sync::{AtomicBool, Ordering};
use crate::registry::api::AllocatorApi;
use crate::registry::observer::StreamObserver;
use crate::registry::StreamKey;
use parking_lot::Mutex;
use std::cell::Cell;
use std::sync::Arc;
use std::thread::JoinHandle;

/// `ACL_STREAM_*` flags CANN defines (`ACL_STREAM_FAST_LAUNCH` ...
/// `ACL_STREAM_DEVICE_USE_ONLY`); the host runtime accepts and ignores them.
const KNOWN_STREAM_FLAGS: u32 = 0x3F;
/// The highest stream priority CANN accepts.
pub(crate) const MAX_PRIORITY: u32 = 7;

pub const NOT_A_STREAM: Error = Error::InvalidParam {
    param: "stream",
    reason:
        "It is not a live stream (it was destroyed, or was never returned by aclrtCreateStream)",
};

impl HostRuntime {
    /// `aclrtCreateStreamWithConfig` (`aclrtCreateStream` is priority 0,
    /// flag 0): a new stream in this thread's current context.
    pub fn create_stream(&self, priority: u32, flag: u32) -> Result<StreamKey> {
        if priority > MAX_PRIORITY {
            return Err(Error::InvalidParam {
                param: "priority",
                reason: "It must be from 0 to 7",
            });
        }
        if flag & !KNOWN_STREAM_FLAGS != 0 {
            return Err(Error::InvalidParam {
                param: "flag",
                reason: "It holds bits that are not ACL_STREAM_* flags",
            });
        }
        let (ctx, _) = self.current_context()?;
        let handle = self.new_stream_in(ctx, false, (priority, flag))?;
        Ok(key(handle))
    }

    fn new_stream_in(&self, ctx: usize, default: bool, config: (u32, u32)) -> Result<usize> {
        let device = self
            .with_context(ctx, |c| c.device)
            .ok_or(Error::NoContext)?;
        let memory = Arc::clone(self.device(device as i32)?.memory());
        let stream = Arc::new(Stream::new(memory, self.workspace_allocator())?);
        let handle = self
            .streams
            .insert(StreamEntry {
                stream: Arc::clone(&stream),
                context: ctx,
                priority: config.0,
                flags: config.1,
            })?
            .get();
        // As `aclrtStreamGetId` gives it.
        stream.set_id((handle & 0x7FFF_FFFF) as u32);
        let adopted = self.with_context_mut(ctx, |c| {
            if default {
                if c.default_stream.is_some() {
                    return false; // another thread made it first
                }
                c.default_stream = Some(handle);
            }
            c.streams.push(handle);
            true
        });
        if adopted != Some(true) {
            let _ = self.destroy_stream_handle(handle, false);
            return Err(Error::NoContext);
        }
        Ok(handle)
    }

    /// The stream behind a C stream argument: a live stream handle, or for
    /// NULL the default stream of this thread's current context.
    pub fn resolve_stream(&self, stream: Option<StreamKey>) -> Result<(StreamKey, Arc<Stream>)> {
        match stream {
            Some(key) => {
                // Launchers on different streams must not queue on the
                // table's lock: see `launch_cache` for why a hit is safe.
                let handle = key.get().get();
                if let Some(s) = launch_cache::lookup(self.instance(), handle) {
                    return Ok((key, s));
                }
                let s = self
                    .with_stream(handle, |e| Arc::clone(&e.stream))
                    .ok_or(NOT_A_STREAM)?;
                launch_cache::remember(self.instance(), handle, &s);
                Ok((key, s))
            }
            None => self.default_stream(),
        }
    }

    fn default_stream(&self) -> Result<(StreamKey, Arc<Stream>)> {
        // Work on the default stream while a capture forbids it.
        super::capture::refuse_if_capturing()?;
        let (ctx, _) = self.current_context()?;
        for _ in 0..2 {
            let existing = self
                .with_context(ctx, |c| c.default_stream)
                .ok_or(Error::NoContext)?;
            let handle = match existing {
                Some(h) => h,
                None => match self.new_stream_in(ctx, true, (0, 0)) {
                    Ok(h) => h,
                    Err(Error::NoContext) => continue, // lost a race; look again
                    Err(e) => return Err(e),
                },
            };
            if let Some(s) = self.with_stream(handle, |e| Arc::clone(&e.stream)) {
                if s.is_inherited() {
                    // A child of fork(): the context's default stream is
                    // the parent's; the child gets one of its own.
                    self.with_context_mut(ctx, |c| {
                        if c.default_stream == Some(handle) {
                            c.default_stream = None;
                        }
                    });
                    let _ = self.destroy_stream_handle(handle, false);
                    continue;
                }
                return Ok((key(handle), s));
            }
        }
        Err(Error::NoContext)
    }

    /// `aclrtDestroyStream` (`force`: `aclrtDestroyStreamForce`, which
    /// returns without waiting; the queued work still runs, then the stream's
    /// registration goes). The default stream goes with its context.
    pub fn destroy_stream(&self, stream: StreamKey, force: bool) -> Result<()> {
        let handle = stream.get().get();
        let is_default = self
            .with_stream(handle, |e| e.context)
            .and_then(|ctx| self.with_context(ctx, |c| c.default_stream == Some(handle)))
            .unwrap_or(false);
        if is_default {
            return Err(Error::InvalidParam {
                param: "stream",
                reason: "It is a context's default stream, which is destroyed with its context",
            });
        }
        if self.with_stream(handle, |e| e.stream.is_inherited()) == Some(true) {
            return Err(super::fork::INHERITED);
        }
        self.destroy_stream_handle(handle, force)
    }

    pub(crate) fn destroy_stream_handle(&self, handle: usize, force: bool) -> Result<()> {
        let entry = self
            .with_stream(handle, |e| e.clone())
            .ok_or(NOT_A_STREAM)?;
        if entry.stream.is_current_worker() {
            return Err(super::stream_worker::DESTROY_OWN);
        }
        // Finishers of earlier forced destroys that are done are joined
        // here too, so a program that destroys streams by force in a loop
        // keeps no exited thread unjoined.
        self.reap_drained(false);
        // A kernel destroying another stream waits for it, as a synchronize
        // does: refused before anything is torn down if that would deadlock.
        let _waiting = entry.stream.wait_from_kernel()?;
        // A capture the stream records into fails, leaving nothing behind.
        self.leave_capture_on_destroy(handle, &entry.stream);
        // Unlisting first stops new launches from finding the stream.
        let entry = StreamHandle::from_raw(handle)
            .and_then(|h| self.streams.remove(h))
            .ok_or(NOT_A_STREAM)?;
        self.with_context_mut(entry.context, |c| {
            c.streams.retain(|&s| s != handle);
            if c.default_stream == Some(handle) {
                c.default_stream = None;
            }
        });
        let drain = Arc::new(Draining {
            stream: entry.stream,
            handle,
            done: AtomicBool::new(false),
            finisher: Mutex::new(None),
        });
        if force && !drain.stream.is_inherited() {
            drain.stream.close();
            self.draining.lock().push(Arc::clone(&drain));
            let (allocators, observer) = (self.allocators(), self.observer());
            let drained = Arc::clone(&drain);
            let finisher = move || {
                IS_FINISHER.with(|f| f.set(true));
                let _ = drained.stream.shut_down();
                drained.finish(allocators, observer);
            };
            if let Ok(thread) = crate::base::threads::spawn("aclalloc-drain".into(), finisher) {
                // Joined by `reap_drained` once done: never left detached.
                *drain.finisher.lock() = Some(thread);
                return Ok(());
            }
        }
        let _ = drain.stream.shut_down();
        drain.finish(self.allocators(), self.observer());
        Ok(())
    }

    /// Refuses a value of this runtime's stream handles that names no live
    /// stream; any other value (a real runtime's stream, a caller's own
    /// key) passes.
    pub fn check_stream_value(&self, stream: StreamKey) -> Result<()> {
        let value = stream.get().get();
        if StreamHandle::could_be(value) && self.with_stream(value, |_| ()).is_none() {
            return Err(NOT_A_STREAM);
        }
        Ok(())
    }

    /// `aclrtSynchronizeStream`.
    pub fn synchronize_stream(&self, stream: Option<StreamKey>) -> Result<()> {
        super::capture::refuse_if_capturing()?;
        let (key, stream) = self.resolve_stream(stream)?;
        stream.synchronize()?;
        // Memory freed on the stream may now go to work on other streams.
        self.observer().stream_synchronized(key);
        Ok(())
    }

    /// After [`Self::synchronize_all`], for `aclrtSynchronizeDevice`: the
    /// code a failed task of a live stream left, as that stream's
    /// synchronize would report it (once; other streams' failures stay for
    /// their turn).
    pub fn take_task_failure(&self) -> Result<()> {
        let streams = self.streams.collect(|_, e| Some(Arc::clone(&e.stream)));
        for stream in streams.iter().filter(|s| !s.is_inherited()) {
            stream.take_failure()?;
        }
        Ok(())
    }

    /// Waits for every stream's pending work, except the calling kernel's stream
    /// and streams whose work can never run; fails only when a kernel calls it
    /// and waiting would deadlock. A failed task's code stays for the
    /// synchronize of its stream.
    pub fn synchronize_all(&self) -> Result<()> {
        let streams = self.streams.collect(|_, e| Some(Arc::clone(&e.stream)));
        // Streams destroyed by force whose queued work may still be running.
        let draining = self.draining.lock().clone();
        let drained = draining.iter().map(|d| &d.stream);
        for stream in streams.iter().chain(drained) {
            if stream.is_inherited() {
                continue;
            }
            // Its own stream, a dead one or one being destroyed: skipped.
            if let Err(DEADLOCK) = stream.wait_idle() {
                return Err(DEADLOCK);
            }
        }
        // Their registrations go now, not whenever their finisher runs.
        for d in draining.iter().filter(|d| d.stream.is_finished()) {
            d.finish(self.allocators(), self.observer());
        }
        self.reap_drained(false);
        Ok(())
    }

    /// Joins the finisher threads of streams destroyed by force, and forgets
    /// those streams: with `wait`, every one (each waits for its stream's
    /// queued work, as `aclFinalize` does); without, only those whose
    /// finisher is done and about to return. Inherited streams (from a
    /// `fork()`) have no finisher and are only forgotten.
    pub(crate) fn reap_drained(&self, wait: bool) {
        // Not from a kernel: a finisher may be inside `aclrtFree`, which
        // waits for every stream, this kernel's too. Not from a finisher
        // (what it calls may synchronize): two finishers would join each
        // other.
        if super::stream_worker::on_any_worker() || IS_FINISHER.with(Cell::get) {
            return;
        }
        let reaped: Vec<Arc<Draining>> = {
            let mut draining = self.draining.lock();
            let (gone, kept) = std::mem::take(&mut *draining)
                .into_iter()
                .partition(|d| wait || d.done.load(Ordering::Acquire) || d.stream.is_inherited());
            *draining = kept;
            gone
        };
        // Joined outside the lock: a finisher may be inside `finish`, whose
        // observer may call back into this runtime.
        for d in reaped {
            if let Some(thread) = d.finisher.lock().take() {
                let _ = thread.join();
            }
        }
    }

    /// The number of live streams (default streams included).
    pub fn live_streams(&self) -> usize {
        self.streams.len()
    }
}

thread_local! {
    /// Set on the threads that finish forced destroys.
    static IS_FINISHER: Cell<bool> = const { Cell::new(false) };
}

/// A stream taken out of the table whose registration has yet to go.
pub(crate) struct Draining {
    stream: Arc<Stream>,
    handle: usize,
    done: AtomicBool,
    /// The thread that waits for the stream's queued work and then calls
    /// [`Draining::finish`]; joined by [`HostRuntime::reap_drained`].
    finisher: Mutex<Option<JoinHandle<()>>>,
}

impl Draining {
    /// Once its work has run: drops the stream's registration and tells the
    /// observer (pools forget the stream). Only the first call does it.
    fn finish(&self, allocators: &AllocatorApi, observer: &dyn StreamObserver) {
        if !self.done.swap(true, Ordering::AcqRel) {
            let old = allocators.unregister(key(self.handle)).ok().flatten();
            observer.stream_destroyed(key(self.handle), old.as_ref());
        }
    }
}

fn key(handle: usize) -> StreamKey {
    StreamKey::from_ptr(handle as *mut std::ffi::c_void).expect("handles are never 0")
}
