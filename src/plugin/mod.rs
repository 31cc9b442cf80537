//! Pluggable allocators: an allocator loaded from a shared object by path and
//! symbol names, as torch_npu's `NPUPluggableAllocator('x.so', 'my_malloc',
//! 'my_free')`, handed to C as a descriptor ready for `aclrtAllocatorRegister`.
//!
//! - [`library`]: `dlopen`/`dlsym` with the loader's own text in errors;
//! - [`live`]: pointer -> (size, device, stream) of every live block, so free
//!   passes the right size and foreign or doubly freed pointers never reach
//!   the plugin; statistics (both kept in the shared tracked-allocations
//!   adaptor, `core::tracked`);
//! - [`allocator`]: the allocator itself, safe Rust;
//! - [`published`]: the live pluggable allocators handed to C (handles,
//!   descriptors) and their descriptor callbacks;
//! - [`context`]: which device and stream the plugin is told about.

pub mod allocator;
pub mod context;
pub mod library;
pub mod live;
pub mod published;
mod text;

pub use allocator::PluggableAllocator;
pub use library::{PluginFunctions, PluginSpec};
pub use live::{LiveBlock, Stats};
pub use published::PluggableHandle;
