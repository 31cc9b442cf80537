//! One recorded event, with PyTorch's action names.

/// What happened, named as in PyTorch's `device_traces` (`TraceEntry`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// A block was handed out.
    Alloc,
    /// The caller gave a block back.
    FreeRequested,
    /// The block is back in the cache (here right after `FreeRequested`).
    FreeCompleted,
    /// A segment was taken from the device.
    SegmentAlloc,
    /// A segment was returned to the device.
    SegmentFree,
    /// An allocation failed for lack of memory (`addr`: the bytes the pool
    /// could still have taken, as PyTorch puts the device's free bytes there).
    Oom,
}

impl Action {
    /// PyTorch's name of the action.
    pub fn name(self) -> &'static str {
        match self {
            Action::Alloc => "alloc",
            Action::FreeRequested => "free_requested",
            Action::FreeCompleted => "free_completed",
            Action::SegmentAlloc => "segment_alloc",
            Action::SegmentFree => "segment_free",
            Action::Oom => "oom",
        }
    }
}

/// One event: `size` as PyTorch records it (the request, or the segment's
/// size), `block_size` the block handed out (0 where it does not apply).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// What happened.
    pub action: Action,
    /// The device.
    pub device: i32,
    /// The block's or segment's device address.
    pub addr: usize,
    /// Bytes (see the type's documentation).
    pub size: usize,
    /// Bytes of the block (allocations and frees).
    pub block_size: usize,
    /// The stream the block or segment serves (0: unknown).
    pub stream: usize,
    /// Microseconds on the monotonic clock.
    pub time_us: u64,
    /// The call stack, when the recorder captures them.
    pub stack: super::stacks::StackId,
}

// The messages that ask for fewer events name this size.
const _: () = assert!(std::mem::size_of::<Event>() == 56);
