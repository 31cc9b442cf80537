//! Which streams have been synchronized since a block was freed: a free
//! records the generation counter, which every synchronization ticks; the
//! stream counts as synchronized once its last (or a device-wide)
//! synchronization is later. The map's lock is off the hot path.

use crate::base::sync::statics::AtomicU64;
use crate::base::sync::Ordering;
use std::collections::HashMap;
use std::sync::Mutex;

static GENERATION: AtomicU64 = AtomicU64::new(1);
static DEVICE_SYNCED: AtomicU64 = AtomicU64::new(0);
static STREAM_SYNCED: Mutex<Option<HashMap<usize, u64>>> = Mutex::new(None);

/// The generation a free records.
#[inline]
pub(crate) fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

fn tick() -> u64 {
    GENERATION.fetch_add(1, Ordering::AcqRel) + 1
}

/// `stream` finished all work submitted so far.
pub fn stream_synchronized(stream: usize) {
    let generation = tick();
    let mut map = STREAM_SYNCED.lock().unwrap_or_else(|p| p.into_inner());
    map.get_or_insert_with(HashMap::new)
        .insert(stream, generation);
}

/// Every stream finished all work submitted so far.
pub fn device_synchronized() {
    let generation = tick();
    DEVICE_SYNCED.fetch_max(generation, Ordering::AcqRel);
}

/// `stream` is gone: its work is complete, so it counts as synchronized (the
/// record outlives it: blocks freed on it may be checked later).
pub fn stream_destroyed(stream: usize) {
    stream_synchronized(stream);
}

/// How many streams have a synchronization recorded.
pub(crate) fn recorded_streams() -> usize {
    let map = STREAM_SYNCED.lock().unwrap_or_else(|p| p.into_inner());
    map.as_ref().map_or(0, HashMap::len)
}

/// Forgets the synchronizations recorded at or before `generation`, once
/// the freed records they vouch for are dropped (see `churn.rs`).
pub(crate) fn forget_up_to(generation: u64) {
    let mut map = STREAM_SYNCED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(m) = map.as_mut() {
        m.retain(|_, &mut g| g > generation);
        if m.capacity() > 4 * m.len().max(64) {
            m.shrink_to_fit();
        }
    }
}

/// True when `stream` was synchronized after a free that recorded `freed_at`.
pub(crate) fn synchronized_since(stream: usize, freed_at: u64) -> bool {
    if DEVICE_SYNCED.load(Ordering::Acquire) > freed_at {
        return true;
    }
    let map = STREAM_SYNCED.lock().unwrap_or_else(|p| p.into_inner());
    map.as_ref()
        .and_then(|m| m.get(&stream))
        .is_some_and(|&g| g > freed_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_counts_as_synchronized_only_after_a_later_sync() {
        let s = 0x5151_0000;
        let freed_at = generation();
        assert!(!synchronized_since(s, freed_at));
        stream_synchronized(s + 8);
        assert!(!synchronized_since(s, freed_at), "another stream's sync");
        stream_synchronized(s);
        assert!(synchronized_since(s, freed_at));
        let later = generation();
        assert!(!synchronized_since(s, later));
    }
}
