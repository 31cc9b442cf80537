//! A per-thread cache of the streams a thread resolved lately, so launchers
//! on different streams skip the handle table's process-wide lock.
//!
//! A hit is always the stream the table would give: keys (runtime instance,
//! handle) are never reused, entries are weak, and a closed stream is a miss.
//! A hit during a destroy acts like a lookup just before the unlisting: its
//! enqueue lands before the close or is refused.

use super::stream_worker::Stream;
use std::cell::RefCell;
use std::sync::{Arc, Weak};

/// Streams remembered per thread: an executor thread drives one stream or a few.
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

/// Remembers that `handle` of runtime `instance` is `stream`, in the slot of
/// the same key or a dead one if any, else the slots in turn.
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

#[cfg(test)]
mod tests {
    use super::super::host::{tests::runtime, HostRuntime};
    use crate::registry::StreamKey;
    use std::sync::Arc;

    #[test]
    fn runtimes_handing_out_the_same_handle_keep_their_streams_apart() {
        let (a, b) = (runtime(1, 1 << 20), runtime(1, 1 << 20));
        let on = |rt: &HostRuntime| {
            rt.set_device(0).unwrap();
            rt.create_stream(0, 0).unwrap()
        };
        let (sa, sb) = (on(&a), on(&b));
        assert_eq!(sa, sb, "both tables start from the same id");
        let table = |rt: &HostRuntime, s: StreamKey| {
            rt.with_stream(s.get().get(), |e| Arc::as_ptr(&e.stream))
                .unwrap()
        };
        for _ in 0..2 {
            let (_, ra) = a.resolve_stream(Some(sa)).unwrap();
            let (_, rb) = b.resolve_stream(Some(sb)).unwrap();
            assert_eq!(Arc::as_ptr(&ra), table(&a, sa));
            assert_eq!(Arc::as_ptr(&rb), table(&b, sb));
            assert_ne!(Arc::as_ptr(&ra), Arc::as_ptr(&rb));
        }
    }
}
