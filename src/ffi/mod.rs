//! The C ABI: CANN's functions and types, each a thin layer over the safe core.
//!
//! Every export goes through `boundary::boundary`, which catches panics,
//! records the failure for `aclGetRecentErrMsg` and turns it into an ACL
//! error code. Pointer arguments are checked and converted in `args`, the
//! one place that touches raw pointers from C.
//!
//! The runtime exports (`acl.h` / `acl_rt.h`, `aclallocLaunchKernel`) call
//! through the dispatch table of [`dispatch`]; the host
//! backend's implementations run their bodies through the boundary.
//! In front of a real runtime, the allocator exports run the forwarding
//! bodies of `forward` instead, and the backend table is filled from the
//! same load-time lookup (the rule is in [`crate::interpose`]).

pub mod allocator;
pub(crate) mod args;
pub(crate) use crate::core::boundary;
pub mod default_allocator;
pub mod default_init;
pub mod dispatch;
pub mod empty_kernel;
pub mod errmsg;
pub(crate) mod forward;
pub mod launch;
pub mod memory;
pub mod plugin;
pub mod pool;
pub mod process;
pub mod runtime;
pub mod tracking;
pub mod types;
pub mod virtual_memory;
