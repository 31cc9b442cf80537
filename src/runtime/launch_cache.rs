//! A per-thread cache of the streams a thread resolved lately.
//!
//! Every launch resolves its stream handle. Through the handle table that is
//! one process-wide lock, so executor threads launching on different streams
//! would queue on it. A read-write lock with a faster hasher would still
//! bounce the lock's cache line between the launching threads; this cache
//! touches only the thread's own memory and the stream's own reference count,
//! so launchers on different streams share nothing on the way to their
//! queues.
//!
//! Why a hit is always the stream the table would give, or a miss:
//! - entries are keyed by (runtime instance, handle), and neither number is
//!   ever reused, so a key names one stream for the life of the process;
//! - entries are weak references: the cache never keeps a destroyed stream
//!   (or its device's memory) alive. Once the table's reference is gone the
//!   upgrade fails;
//! - a stream still alive but closed (destroy has shut it down, or is doing
//!   so) is a miss too, and the table, where the handle was unlisted before
//!   the stream was closed, gives the clean "not a live stream" error.
//!
//! A launch that hits while a destroy runs behaves like one that found the
//! stream in the table just before the destroy unlisted it: its enqueue
//! either lands before the stream closes (and runs before the destroy
//! returns) or is refused.

use super::stream_worker::Stream;
use std::cell::RefCell;
use std::sync::{Arc, Weak};

/// Streams remembered per thread: an executor thread drives one stream or a
/// few.
const WAYS: usize = 4;

struct Entry {
    instance: usize,
    handle: usize,
    stream: Weak<Stream>,
}

struct Cache {
    entries: [Option<Entry>; WAYS],
    next: usize,
}

thread_local! {
    static CACHE: RefCell<Cache> = const {
        RefCell::new(Cache {
            entries: [const { None }; WAYS],
            next: 0,
        })
    };
}

/// The open stream `handle` of runtime `instance` if this thread resolved it
/// lately; `None` sends the caller to the table.
#[inline]
pub(crate) fn lookup(instance: usize, handle: usize) -> Option<Arc<Stream>> {
    CACHE
        .try_with(|cache| {
            let cache = cache.try_borrow().ok()?;
            let entry = cache
                .entries
                .iter()
                .flatten()
                .find(|e| e.handle == handle && e.instance == instance)?;
            entry.stream.upgrade().filter(|s| !s.is_closed())
        })
        .ok()
        .flatten()
}

/// Remembers that `handle` of runtime `instance` is `stream` (just found in
/// the table). Replaces the entry for the same key or a dead one if there is
/// one, otherwise the slots in turn.
pub(crate) fn remember(instance: usize, handle: usize, stream: &Arc<Stream>) {
    let _ = CACHE.try_with(|cache| {
        let Ok(mut cache) = cache.try_borrow_mut() else {
            return;
        };
        let reusable = cache.entries.iter().position(|e| match e {
            None => true,
            Some(e) => {
                (e.handle == handle && e.instance == instance) || e.stream.strong_count() == 0
            }
        });
        let slot = reusable.unwrap_or_else(|| {
            let oldest = cache.next;
            cache.next = (oldest + 1) % WAYS;
            oldest
        });
        // Dropping the old entry drops only a weak reference: no stream's
        // destructor runs while the cache is borrowed.
        cache.entries[slot] = Some(Entry {
            instance,
            handle,
            stream: Arc::downgrade(stream),
        });
    });
}
