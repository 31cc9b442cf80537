//! Pluggable allocators: an allocator loaded from a shared object by path and
//! symbol names, as torch_npu's `NPUPluggableAllocator('x.so', 'my_malloc',
//! 'my_free')`, handed to C as a descriptor ready for `aclrtAllocatorRegister`.
//!
//! [`library`] loads it, [`live`] keeps every live block (so free passes the
//! right size and bad pointers never reach the plugin) and the statistics,
//! [`allocator`] is the allocator, [`published`] the ones handed to C (with
//! `inside`, which threads are in their calls), and [`context`] which device
//! and stream the plugin is told about.

// Every unsafe operation sits in an `unsafe` block with its own `// SAFETY:` comment.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

use aclalloc_core::{base, registry};

pub mod allocator;
pub mod context;
pub mod hooks;
mod inside;
pub mod library;
pub mod live;
pub mod published;
mod text;

pub use allocator::PluggableAllocator;
pub use hooks::{DeviceStats, DeviceStatsLayout, DeviceStatsV1, Hooks};
pub use library::{PluginFunctions, PluginSpec};
pub use live::{LiveBlock, Stats};
pub use published::PluggableHandle;
