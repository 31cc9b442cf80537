//! The allocator sanitizer: a thin layer between a runtime and the
//! allocators users register, recording every block and checking every call.
//!
//! Off by default: `ACLALLOC_TRACK=1` turns it on at load time,
//! [`set_enabled`] at any time. With it on, `aclrtAllocatorGetByStream` (and
//! in front of a real runtime `aclrtAllocatorRegister`) hands out tracking
//! callbacks that call the user's; host launches take them through
//! [`callbacks_for`]. It keeps per-allocator statistics, detects the
//! [`Fault`]s, can record history ([`record_history`]), and writes
//! [`report_text`] and [`snapshot_json`] at exit or on request. The
//! allocations of CANN's stream-ordered pools are recorded by address
//! (`ordered`): the exports tell it of each, and of the copies and fills
//! that use them.

// Every unsafe operation sits in an `unsafe` block with its own `// SAFETY:` comment.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

use aclalloc_core::{base, registry};

mod churn;
pub mod events;
mod exit;
mod graph;
mod history;
mod leaks;
mod ordered;
mod owner;
mod report;
mod shim;
mod signals;
mod snapshot;
mod state;
mod stats;
mod syncclock;
mod tracker;

pub use aclalloc_core::history::clock::STAMP_BOUND as LEAK_AGE_BOUND;
pub use events::{Event, Fault, LeakSeen};
pub use exit::report_at_exit;
pub use exit::{
    before_exit_report, exec_failed, expand as expand_path, init_from_env, write_exit_reports,
    write_reports_before_exec,
};
pub use history::{history, record_history};
pub use leaks::set_stack_depth;
pub use ordered::{
    device_range_reissued, ordered_alloc, ordered_free, ordered_pool_released, ordered_pool_stats,
    ordered_use, OrderedPoolStats,
};
pub use report::{add_note, report_text};
pub use shim::{track_alloc, track_alloc_advise, track_free, track_get_addr};
pub use snapshot::snapshot_json;
pub use stats::{AllocatorStats, Stat};
pub use tracker::TrackObj;

use crate::base::descriptor::Callbacks;
use crate::base::sync::statics::AtomicBool;
use crate::base::sync::Ordering;
use crate::registry::{Registration, StreamKey};
use tracker::tracker;

static ENABLED: AtomicBool = AtomicBool::new(false);
/// Set once tracking was ever on: from then on the hooks below keep the
/// records current; before, they cost nothing.
static EVER_ENABLED: AtomicBool = AtomicBool::new(false);

/// True when tracking is on.
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Turns tracking on or off for lookups from now on.
pub fn set_enabled(on: bool) {
    if on && !EVER_ENABLED.swap(true, Ordering::Relaxed) {
        // The first time: ACLALLOC_RECORD_HISTORY applies to the layer too.
        history::init_from_env();
    }
    ENABLED.store(on, Ordering::Relaxed);
    crate::registry::observer::set_intercepting(on);
}

#[inline]
fn ever_enabled() -> bool {
    EVER_ENABLED.load(Ordering::Relaxed)
}

/// The tracking object and callbacks for `registration` on `stream`: found
/// without locking or allocating once the pair has been seen.
#[inline]
pub fn tracked_callbacks(stream: StreamKey, registration: &Registration) -> Callbacks {
    shim::callbacks(tracker().object(stream, registration))
}

/// What a runtime should call to allocate on `stream`: the tracking
/// callbacks when tracking is on, the user's otherwise.
#[inline]
pub fn callbacks_for(stream: StreamKey, registration: &Registration) -> Callbacks {
    if enabled() {
        tracked_callbacks(stream, registration)
    } else {
        registration.callbacks
    }
}

/// The registration of `stream` ended (`old`, if it had one): blocks still
/// live that were allocated on it are reported as leaks.
pub fn registration_ended(stream: StreamKey, old: Option<&Registration>, seen: LeakSeen) {
    if !ever_enabled() {
        return;
    }
    tracker().forget_stream(stream);
    let Some(old) = old else { return };
    let allocator = old.callbacks.obj.as_ptr() as usize;
    if let Some(state) = tracker().state_of(allocator) {
        if let Some(mut inside) = state.enter(owner::NOT_A_STREAM) {
            inside.report_leaks(allocator, Some(stream.get().get()), seen);
        }
    }
}

/// `stream` was synchronized: memory freed on it may go to other streams.
/// Recorded whether tracking is on or not: the pools move memory between
/// streams by the same facts.
pub fn stream_synchronized(stream: StreamKey) {
    syncclock::stream_synchronized(stream.get().get());
}

/// The whole device was synchronized (or reset).
pub fn device_synchronized() {
    syncclock::device_synchronized();
}

/// `stream` was destroyed: its work is complete, its registration is gone.
pub fn stream_destroyed(stream: StreamKey, old: Option<&Registration>) {
    if !ever_enabled() {
        // Nothing will ask about blocks freed on it: its record goes, so
        // the record of synchronizations stays as large as the live streams.
        crate::registry::order::forget_synchronizations_of(stream.get().get());
        return;
    }
    syncclock::stream_destroyed(stream.get().get());
    registration_ended(stream, old, LeakSeen::StreamDestroy);
    tracker().stream_destroyed(stream);
    churn::bound_sync_records();
}

/// The statistics of one user allocator object, if it was ever tracked.
pub fn allocator_stats(allocator: *mut std::ffi::c_void) -> Option<AllocatorStats> {
    let state = tracker().state_of(allocator as usize)?;
    let mut inside = state.enter_for_report(owner::REPORT_PATIENCE)?;
    Some(inside.stats())
}

/// Every event so far (the first [`events::EVENT_CAPACITY`]), oldest first,
/// and how many more were dropped.
pub fn faults() -> (Vec<Event>, u64) {
    events::events()
}

/// Reports every block still live as a leak (what happens at exit).
pub fn report_leaks_now() {
    for state in tracker().states() {
        if let Some(mut inside) = state.enter_for_report(owner::REPORT_PATIENCE) {
            inside.report_leaks(state.allocator, None, LeakSeen::Exit);
        }
    }
    ordered::report_ordered_leaks(LeakSeen::Exit);
}

/// The tracking layer as a runtime's [`StreamObserver`](crate::registry::observer::StreamObserver).
pub struct TrackingObserver;

impl crate::registry::observer::StreamObserver for TrackingObserver {
    #[inline]
    fn callbacks_for(&self, stream: StreamKey, registration: &Registration) -> Callbacks {
        callbacks_for(stream, registration)
    }
    fn stream_synchronized(&self, stream: StreamKey) {
        stream_synchronized(stream)
    }
    fn stream_destroyed(&self, stream: StreamKey, old: Option<&Registration>) {
        stream_destroyed(stream, old)
    }
    fn workspace_held(&self, block: usize, model: usize) {
        graph::held(block, model);
    }
    fn workspace_released(&self, block: usize) {
        graph::released(block);
    }
    // Kept with tracking off too: the pool moves cached memory between
    // streams by the same waits.
    fn event_recorded(&self, _stream: StreamKey) -> u64 {
        syncclock::event_recorded()
    }
    fn stream_waited(&self, waiter: StreamKey, source: StreamKey, token: u64) {
        if token != 0 {
            syncclock::stream_waited(waiter.get().get(), source.get().get(), token);
        }
    }
}
