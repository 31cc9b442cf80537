//! The tracking layer's allocation history, in the pools' recorder
//! (`aclalloc_core::history`), so `aclalloc run` can draw the run's timeline. One
//! recorder serves every allocator; off by default.
//!
//! - `alloc`: at the block's first getAddrFromBlock (the layer never asks the
//!   address itself; runtimes ask right after alloc). A block whose address
//!   was never asked is an `alloc` at address 0: at its free, or in
//!   [`history`] at its alloc time while it is live.
//! - `free_requested` + `free_completed`: together at free (runtimes free in
//!   stream order).
//! - `oom`: an alloc that returned NULL (`addr` 0).
//!
//! No `segment_*` events. Events are recorded under the allocator's record,
//! so one allocator's events are in order.

use super::owner::REPORT_PATIENCE;
use super::tracker::tracker;
use crate::base::env;
use crate::base::error::{Error, Result};
use aclalloc_core::history::env::{parse_raw, ENV_VAR};
use aclalloc_core::history::stacks::StackId;
use aclalloc_core::history::{Action, Event, History, Recorder, StackContext};
use std::sync::OnceLock;

static RECORDER: OnceLock<Recorder> = OnceLock::new();

fn recorder() -> &'static Recorder {
    // Events carry their own device; this one only names an empty history's.
    RECORDER.get_or_init(|| Recorder::new(0))
}

/// The recorder while it records (two relaxed loads when off).
#[inline]
fn recording() -> Option<&'static Recorder> {
    RECORDER.get().filter(|r| r.is_on())
}

/// True while the history is recorded.
#[inline]
pub(crate) fn is_recording() -> bool {
    recording().is_some()
}

/// Keeps the last `max_entries` events from now on (0: off), discarding what
/// was recorded before, as PyTorch's `_record_memory_history` does.
pub fn record_history(max_entries: usize) -> Result<()> {
    recorder()
        .set_max_entries(max_entries)
        .map_err(|_| Error::BadAlloc {
            what: "the tracking layer's allocation history (56 bytes per event); ask for fewer \
                   events",
        })
}

/// A copy of the recorded events, with the live blocks whose address was
/// never asked added as allocations at address 0, so every allocation is in it.
pub fn history() -> History {
    let Some(mut history) = RECORDER.get().map(Recorder::history) else {
        return History::default();
    };
    if history.max_entries == 0 {
        return history;
    }
    let count = history.events.len();
    for state in tracker().states() {
        let Some(inside) = state.enter_for_report(REPORT_PATIENCE) else {
            continue;
        };
        let unaddressed = inside
            .live_blocks()
            .into_iter()
            .filter(|(_, b)| b.address == 0);
        history.events.extend(unaddressed.map(|(_, b)| Event {
            action: Action::Alloc,
            device: b.device,
            addr: 0,
            size: b.size,
            block_size: b.size,
            stream: b.stream,
            time_us: b.time_ns / 1_000,
            stack: b.stack,
        }));
    }
    if history.events.len() > count {
        history.events.sort_by_key(|e| e.time_us);
    }
    history
}

/// Applies `ACLALLOC_RECORD_HISTORY` when tracking is first turned on; an
/// invalid value is one line on stderr and recording stays off.
pub(crate) fn init_from_env() {
    let entries = env::with_var_no_alloc(ENV_VAR, |raw| env::or_default(parse_raw(raw), 0, "off"));
    if entries > 0 {
        if let Err(e) = record_history(entries) {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "aclalloc: {ENV_VAR}={entries}: {e}; the tracking layer records no history"
            );
        }
    }
}

/// A live block allocated from `stack` got its first address.
#[inline]
pub(crate) fn allocated(device: i32, address: usize, size: usize, stream: usize, stack: StackId) {
    if let Some(r) = recording() {
        r.record_alloc_with_stack(device, address, size, stream, stack);
    }
}

/// Trace events show the allocating stacks the layer captures (it passes
/// them itself: the recorder captures none).
pub(crate) fn show_stacks() {
    recorder().set_stacks(StackContext::Alloc, 0);
}

/// A block with a known address was freed on `stream`.
#[inline]
pub(crate) fn freed(device: i32, address: usize, size: usize, stream: usize) {
    if let Some(r) = recording() {
        r.record_free_on(device, address, size, size, stream);
    }
}

/// A block whose address was never asked was freed on `stream`. Inline
/// with its check: a pair whose address nobody asks (an allocator used
/// without launches) frees this way every time, and the call cost more than
/// the check.
#[inline]
pub(crate) fn freed_unaddressed(device: i32, size: usize, stream: usize, stack: StackId) {
    if let Some(r) = recording() {
        record_freed_unaddressed(r, device, size, stream, stack);
    }
}

#[cold]
#[inline(never)]
fn record_freed_unaddressed(r: &Recorder, device: i32, size: usize, stream: usize, stack: StackId) {
    r.record_alloc_with_stack(device, 0, size, stream, stack);
    r.record_free_on(device, 0, size, size, stream);
}

/// The user's alloc returned NULL for `size` bytes.
#[inline]
pub(crate) fn alloc_failed(device: i32, size: usize, stream: usize) {
    if let Some(r) = recording() {
        r.record_on(device, Action::Oom, 0, size, 0, stream);
    }
}
