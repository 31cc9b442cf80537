//! aclalloc's own C API (`aclalloc*`, declared in `aclalloc.h`): the
//! caching pool, tracking, pluggable and default allocators, host launches.

pub mod default_allocator;
pub mod default_init;
pub mod empty_kernel;
pub mod host_memory_stats;
pub mod launch;
pub mod mem_pool;
pub mod plugin;
pub mod plugin_hooks;
pub mod pool;
pub mod region;
pub mod task_failure;
pub mod torch_allocator;
pub mod tracking;
pub mod version;
