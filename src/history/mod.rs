//! Allocation history: a switchable recorder of what an allocator did
//! (blocks handed out and freed, segments taken and returned, out-of-memory
//! failures), kept in a bounded ring, and written in PyTorch's
//! `device_traces` shape (`torch.cuda.memory._record_memory_history`).
//!
//! Knows nothing of pools or tracking: they call [`Recorder::record`] at the
//! points where blocks change hands. `aclalloc viz` draws the result.

pub mod clock;
pub mod env;
pub mod event;
pub mod json;
pub mod recorder;
pub mod ring;

pub use self::event::{Action, Event};
pub use self::json::Hex;
pub use self::recorder::{History, Recorder};
pub use self::ring::Ring;
