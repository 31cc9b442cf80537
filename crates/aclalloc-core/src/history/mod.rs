//! Allocation history: a switchable recorder of what an allocator did, kept
//! in a bounded ring and written in PyTorch's `device_traces` shape. Pools
//! and tracking call [`Recorder::record`] where blocks change hands.

pub mod clock;
pub mod env;
pub mod event;
pub mod json;
pub mod recorder;
pub mod ring;
pub mod stacks;

pub use self::event::{Action, Event};
pub use self::json::Hex;
pub use self::recorder::{History, Recorder, StackContext};
pub use self::ring::Ring;
