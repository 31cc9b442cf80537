//! The history as JSON in PyTorch's `device_traces` shape, with addresses
//! and stream handles as hex strings ("0x..."): JavaScript's numbers cannot
//! hold every 64-bit handle, and two streams must never read back as one.

use super::event::Event;
use super::recorder::History;
use serde::{Serialize, Serializer};

/// A handle or address written as `"0x..."`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hex(pub usize);

impl Serialize for Hex {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{:#x}", self.0))
    }
}

/// One entry of a device's trace: PyTorch's `TraceEntry` keys (as
/// [`Event`] describes them), plus `block_size` on allocations and frees.
#[derive(Serialize)]
pub struct TraceEntry {
    /// [`Action::name`](super::event::Action::name).
    pub action: &'static str,
    pub addr: Hex,
    pub size: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_size: Option<usize>,
    pub stream: Hex,
    pub time_us: u64,
    /// The call stack, innermost first, when the recording keeps it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frames: Option<Vec<super::stacks::Frame>>,
}

impl TraceEntry {
    /// The entry of `e`, with its frames when `context` shows them.
    pub fn new(e: &Event, context: super::StackContext) -> Self {
        let mut entry = TraceEntry::from(e);
        if e.stack != super::stacks::NO_STACK && context.traces(e.action) {
            entry.frames = Some(super::stacks::frames(e.stack));
        }
        entry
    }
}

impl From<&Event> for TraceEntry {
    fn from(e: &Event) -> Self {
        use super::event::Action::{Alloc, FreeCompleted, FreeRequested};
        let with_block = matches!(e.action, Alloc | FreeRequested | FreeCompleted);
        TraceEntry {
            action: e.action.name(),
            addr: Hex(e.addr),
            size: e.size,
            block_size: with_block.then_some(e.block_size),
            stream: Hex(e.stream),
            time_us: e.time_us,
            frames: None,
        }
    }
}

/// The recording itself: on or off, the most events kept, the events in
/// `device_traces`, and those overwritten because the ring was full.
#[derive(Serialize, Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RecordingInfo {
    pub enabled: bool,
    pub max_entries: usize,
    pub entries: usize,
    pub dropped: u64,
}

/// `device_traces`: one list per device index, up to the highest device
/// seen; each event goes to its own device's list.
pub fn device_traces(histories: &[&History]) -> Vec<Vec<TraceEntry>> {
    let index = |device: i32| usize::try_from(device).unwrap_or(0);
    let devices = histories
        .iter()
        .flat_map(|h| std::iter::once(h.device).chain(h.events.iter().map(|e| e.device)))
        .map(|d| index(d) + 1)
        .max()
        .unwrap_or(1);
    let mut out: Vec<Vec<TraceEntry>> = (0..devices).map(|_| Vec::new()).collect();
    for h in histories {
        for e in &h.events {
            out[index(e.device)].push(TraceEntry::new(e, h.context));
        }
    }
    out
}

/// The recording's counters.
pub fn recording_info(h: &History) -> RecordingInfo {
    RecordingInfo {
        enabled: h.max_entries > 0,
        max_entries: h.max_entries,
        entries: h.events.len(),
        dropped: h.dropped,
    }
}
