//! How streams are ordered without running anything: which streams have been
//! synchronized since a point, and which stream waited on an event recorded
//! on which. One generation counter stands for "now": a free records it,
//! every synchronization and every event record ticks it. A stream counts as
//! synchronized after a free once its last (or a device-wide)
//! synchronization is later.
//!
//! Events order streams without a synchronization: a record on stream A
//! ticks the counter, and a stream B that waits on that record is ordered
//! after every free on A made before it. Such a wait is kept per (B, A) as
//! the latest record's generation, so B may reuse what A freed earlier
//! (PyTorch's `record_stream` discipline). The tracking layer checks reuses
//! against these facts and the pool moves cached memory between streams by
//! them, so both agree on what is ordered. The maps' locks are off the hot
//! path; reading [`generation`] is one load.

use crate::base::sync::statics::AtomicU64;
use crate::base::sync::Ordering;
use std::collections::HashMap;
use std::sync::Mutex;

static GENERATION: AtomicU64 = AtomicU64::new(1);
static DEVICE_SYNCED: AtomicU64 = AtomicU64::new(0);
static STREAM_SYNCED: Mutex<Option<HashMap<usize, u64>>> = Mutex::new(None);

/// The generation a free records.
#[inline]
pub fn generation() -> u64 {
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

/// (waiting stream, recording stream) -> the generation of the latest
/// record the first waited on.
static WAITED: Mutex<Option<HashMap<(usize, usize), u64>>> = Mutex::new(None);

/// An event was recorded: the generation it stands for (every free made
/// before has a smaller one).
pub fn event_recorded() -> u64 {
    tick()
}

/// `waiter` waits on a record of `source` that returned `recorded`.
pub fn stream_waited(waiter: usize, source: usize, recorded: u64) {
    let mut map = WAITED.lock().unwrap_or_else(|p| p.into_inner());
    let at = map
        .get_or_insert_with(HashMap::new)
        .entry((waiter, source))
        .or_insert(0);
    *at = (*at).max(recorded);
}

/// True when `waiter` has waited on a record of another stream (a cheap
/// test before looking for memory such a wait may let it take).
pub fn has_waited(waiter: usize) -> bool {
    let map = WAITED.lock().unwrap_or_else(|p| p.into_inner());
    map.as_ref()
        .is_some_and(|m| m.keys().any(|&(w, _)| w == waiter))
}

/// True when work on `reuser` runs after a free on `freed_on` that recorded
/// `freed_at`: `freed_on` was synchronized since, or `reuser` waited on an
/// event recorded on `freed_on` after the free.
pub fn ordered_after(reuser: usize, freed_on: usize, freed_at: u64) -> bool {
    synchronized_since(freed_on, freed_at) || waited_after(reuser, freed_on, freed_at)
}

/// True when `reuser` waited on an event recorded on `freed_on` after a
/// free that recorded `freed_at`.
pub fn waited_after(reuser: usize, freed_on: usize, freed_at: u64) -> bool {
    let map = WAITED.lock().unwrap_or_else(|p| p.into_inner());
    map.as_ref()
        .and_then(|m| m.get(&(reuser, freed_on)))
        .is_some_and(|&g| g > freed_at)
}

/// True once any stream or the device was synchronized (a cheap test before
/// looking for memory a synchronization may let another stream take).
pub fn synchronized_any() -> bool {
    if DEVICE_SYNCED.load(Ordering::Acquire) > 0 {
        return true;
    }
    let map = STREAM_SYNCED.lock().unwrap_or_else(|p| p.into_inner());
    map.as_ref().is_some_and(|m| !m.is_empty())
}

/// Forgets `stream`'s synchronizations once it is destroyed, when nothing
/// will ask about blocks freed on it any more (the pools forget the stream
/// at once; the tracking layer keeps the record and prunes it itself).
pub fn forget_synchronizations_of(stream: usize) {
    let mut map = STREAM_SYNCED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(m) = map.as_mut() {
        m.remove(&stream);
    }
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
    forget_waits_of(stream);
}

/// Forgets the waits `stream` made or was the source of: stream keys are
/// never reused, so none of them can order anything again (a wait on a
/// destroyed stream is covered by its synchronization, where it is kept).
pub fn forget_waits_of(stream: usize) {
    let mut waited = WAITED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(m) = waited.as_mut() {
        m.retain(|&(waiter, source), _| waiter != stream && source != stream);
    }
}

/// How many synchronizations and waits between streams are recorded.
pub fn recorded_streams() -> usize {
    let map = STREAM_SYNCED.lock().unwrap_or_else(|p| p.into_inner());
    let synced = map.as_ref().map_or(0, HashMap::len);
    drop(map);
    // The waits between streams grow with stream churn as well.
    let waited = WAITED.lock().unwrap_or_else(|p| p.into_inner());
    synced + waited.as_ref().map_or(0, HashMap::len)
}

/// Forgets the synchronizations recorded at or before `generation`, once
/// the freed records they vouch for are dropped (see `churn.rs`).
pub fn forget_up_to(generation: u64) {
    let mut map = STREAM_SYNCED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(m) = map.as_mut() {
        m.retain(|_, &mut g| g > generation);
        if m.capacity() > 4 * m.len().max(64) {
            m.shrink_to_fit();
        }
    }
    drop(map);
    let mut waited = WAITED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(m) = waited.as_mut() {
        m.retain(|_, &mut g| g > generation);
        if m.capacity() > 4 * m.len().max(64) {
            m.shrink_to_fit();
        }
    }
}

/// True when `stream` was synchronized after a free that recorded `freed_at`.
pub fn synchronized_since(stream: usize, freed_at: u64) -> bool {
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

    #[test]
    fn a_wait_on_a_record_made_after_the_free_orders_only_the_waiter() {
        let (a, b, c) = (0x5252_0000, 0x5252_0008, 0x5252_0010);
        let freed_at = generation();
        assert!(!ordered_after(b, a, freed_at));
        let before = event_recorded();
        let freed_later = generation();
        let after = event_recorded();
        stream_waited(b, a, before);
        assert!(ordered_after(b, a, freed_at), "recorded after the free");
        assert!(
            !ordered_after(b, a, freed_later),
            "recorded before the free"
        );
        assert!(!ordered_after(c, a, freed_at), "c did not wait");
        assert!(
            !ordered_after(a, b, freed_at),
            "the wait orders b after a only"
        );
        stream_waited(b, a, after);
        stream_waited(b, a, before);
        assert!(ordered_after(b, a, freed_later), "the latest wait counts");
    }

    #[test]
    fn has_waited_names_only_waiters_and_forgetting_a_stream_drops_its_waits() {
        let (a, b, c) = (0x5353_0000, 0x5353_0008, 0x5353_0010);
        assert!(!has_waited(b));
        let freed_at = generation();
        stream_waited(b, a, event_recorded());
        stream_waited(c, b, event_recorded());
        assert!(has_waited(b) && has_waited(c));
        assert!(!has_waited(a), "a was waited on, it did not wait");
        forget_waits_of(b);
        assert!(!has_waited(b), "b's own waits");
        assert!(!has_waited(c), "the waits on b");
        assert!(!ordered_after(b, a, freed_at));
    }
}
