//! The tracking layer's allocation history, in the pools' recorder
//! (`crate::history`), so `aclalloc run` can draw the run's timeline. One
//! recorder serves every allocator; off by default.
//!
//! - `alloc`: at the block's first getAddrFromBlock (the layer never asks the
//!   address itself; runtimes ask right after alloc). A block whose address
//!   was never asked is not recorded.
//! - `free_requested` + `free_completed`: together at free (runtimes free in
//!   stream order).
//! - `oom`: an alloc that returned NULL (`addr` 0).
//!
//! No `segment_*` events. Events are recorded under the allocator's record,
//! so one allocator's events are in order.

use crate::base::env;
use crate::base::error::{Error, Result};
use crate::history::env::{parse_raw, ENV_VAR};
use crate::history::stacks::StackId;
use crate::history::{Action, History, Recorder, StackContext};
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

/// A copy of the recorded events.
pub fn history() -> History {
    RECORDER
        .get()
        .map_or_else(History::default, Recorder::history)
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

/// The user's alloc returned NULL for `size` bytes.
#[inline]
pub(crate) fn alloc_failed(device: i32, size: usize, stream: usize) {
    if let Some(r) = recording() {
        r.record_on(device, Action::Oom, 0, size, 0, stream);
    }
}
