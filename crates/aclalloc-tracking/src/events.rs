//! The faults the tracking layer detects, and the log that keeps them.

use aclalloc_core::history::clock::coarse_ns as now_ns;
use std::sync::Mutex;

/// When a leak was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeakSeen {
    /// The stream's registration was dropped (`aclrtAllocatorUnregister`,
    /// or re-registration with another allocator).
    Unregister,
    /// The stream was destroyed.
    StreamDestroy,
    /// The process exited.
    Exit,
}

/// One detected misuse of an allocator, with raw handle values (serialized
/// as the snapshot's fields, before handles become hex strings).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(untagged)]
pub enum Fault {
    /// free of a block that this allocator never handed out (as far as the
    /// tracking layer has seen).
    UnknownFree {
        stream: usize,
        allocator: usize,
        block: usize,
    },
    /// free of a block that was already freed.
    DoubleFree {
        stream: usize,
        allocator: usize,
        block: usize,
        size: usize,
        first_freed_on: usize,
    },
    /// getAddrFromBlock returned NULL for a live block.
    NullAddress {
        stream: usize,
        allocator: usize,
        block: usize,
        size: usize,
    },
    /// getAddrFromBlock was called with a block that is not live.
    UnknownBlock { allocator: usize, block: usize },
    /// A block handed out while another live block covers part of its range.
    Overlap {
        stream: usize,
        allocator: usize,
        block: usize,
        address: usize,
        size: usize,
        other_stream: usize,
        other_block: usize,
        other_address: usize,
        other_size: usize,
    },
    /// Memory freed on `freed_on` was handed to work on `stream` before
    /// `freed_on` was synchronized: the earlier work may still be using it.
    CrossStreamReuse {
        stream: usize,
        allocator: usize,
        block: usize,
        address: usize,
        size: usize,
        freed_on: usize,
        freed_block: usize,
    },
    /// Work queued on `stream` (0: a synchronous call) touched memory of a
    /// stream-ordered pool's block after its `aclrtMemPoolFreeAsync` on
    /// `freed_on`.
    UseAfterFreeAsync {
        stream: usize,
        pool: usize,
        address: usize,
        size: usize,
        used_address: usize,
        freed_on: usize,
    },
    /// `aclrtMemPoolFreeAsync` on `stream` of a block that work queued on
    /// `used_on` used, with nothing ordering that work before the free (no
    /// synchronize of `used_on`, no wait of `stream` on an event recorded
    /// on `used_on` after the use): the memory may serve new work while the
    /// old still runs.
    FreeAsyncWhileUsed {
        stream: usize,
        pool: usize,
        address: usize,
        size: usize,
        used_on: usize,
    },
    /// free of a block a captured model still holds as a launch's workspace
    /// (it uses it at every replay until it is destroyed).
    FreedWhileGraphHolds {
        stream: usize,
        allocator: usize,
        block: usize,
        address: usize,
        size: usize,
        model: usize,
    },
    /// Two streams were inside one allocator object at the same time.
    ConcurrentUse {
        allocator: usize,
        stream: usize,
        other_stream: usize,
    },
    /// A block still live when its stream's registration ended or at exit.
    Leak {
        stream: usize,
        allocator: usize,
        block: usize,
        address: usize,
        size: usize,
        age_ns: u64,
        #[serde(rename = "seen_at")]
        seen: LeakSeen,
    },
}

impl Fault {
    /// The fault's kind, as the report and the JSON snapshot name it.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::UnknownFree { .. } => "free-of-unknown-block",
            Fault::DoubleFree { .. } => "double-free",
            Fault::NullAddress { .. } => "null-address",
            Fault::UnknownBlock { .. } => "address-of-unknown-block",
            Fault::Overlap { .. } => "overlapping-blocks",
            Fault::CrossStreamReuse { .. } => "cross-stream-reuse-before-synchronize",
            Fault::UseAfterFreeAsync { .. } => "use-after-free-async",
            Fault::FreeAsyncWhileUsed { .. } => "free-async-while-used-on-another-stream",
            Fault::FreedWhileGraphHolds { .. } => "free-of-block-a-graph-holds",
            Fault::ConcurrentUse { .. } => "concurrent-use",
            Fault::Leak { .. } => "leak",
        }
    }

    /// Repeats of the same fault are counted on the first event, not logged
    /// again (two streams racing in one allocator do so on every launch).
    fn same_as(&self, other: &Fault) -> bool {
        match (self, other) {
            (
                Fault::ConcurrentUse {
                    allocator: a,
                    stream: s,
                    other_stream: o,
                },
                Fault::ConcurrentUse {
                    allocator: a2,
                    stream: s2,
                    other_stream: o2,
                },
            ) => a == a2 && ((s, o) == (s2, o2) || (s, o) == (o2, s2)),
            _ => false,
        }
    }
}

/// A fault, when it was first seen, and how often.
#[derive(Clone, Copy, Debug)]
pub struct Event {
    /// What happened.
    pub fault: Fault,
    /// Coarse monotonic time of the first occurrence, in ns.
    pub time_ns: u64,
    /// How many times it happened (more than 1 only for repeating faults).
    pub count: u64,
    /// The stack that allocated the block concerned, when stacks are captured.
    pub stack: aclalloc_core::history::stacks::StackId,
}

/// How many events are kept; later ones are only counted, so a program that
/// misuses an allocator on every launch does not grow without bound.
pub const EVENT_CAPACITY: usize = 10_000;

#[derive(Default)]
pub(crate) struct EventLog {
    pub(crate) events: Vec<Event>,
    pub(crate) dropped: u64,
}

static LOG: Mutex<EventLog> = Mutex::new(EventLog {
    events: Vec::new(),
    dropped: 0,
});

pub(crate) fn log() -> std::sync::MutexGuard<'static, EventLog> {
    LOG.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Records a fault.
#[cold]
#[inline(never)]
pub(crate) fn record(fault: Fault) {
    record_with_stack(fault, aclalloc_core::history::stacks::NO_STACK);
}

/// Records a fault about a block that `stack` allocated.
#[cold]
#[inline(never)]
pub(crate) fn record_with_stack(fault: Fault, stack: aclalloc_core::history::stacks::StackId) {
    // Called from the tracking callbacks, under C frames: nothing may unwind.
    let _ = std::panic::catch_unwind(|| push(fault, stack));
}

fn push(fault: Fault, stack: aclalloc_core::history::stacks::StackId) {
    let mut log = log();
    if let Some(seen) = log.events.iter_mut().find(|e| e.fault.same_as(&fault)) {
        seen.count += 1;
        return;
    }
    if log.events.len() >= EVENT_CAPACITY {
        log.dropped += 1;
        return;
    }
    log.events.push(Event {
        fault,
        time_ns: now_ns(),
        count: 1,
        stack,
    });
}

/// A copy of every event so far, and how many were dropped.
pub fn events() -> (Vec<Event>, u64) {
    let log = log();
    (log.events.clone(), log.dropped)
}
