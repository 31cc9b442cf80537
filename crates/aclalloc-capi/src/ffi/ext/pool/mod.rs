//! The caching pool's C API (`aclallocPool*`).
//!
//! ```c
//! aclallocPoolConfig cfg;
//! aclallocPoolConfigInit(&cfg);            // defaults + ACLALLOC_ALLOC_CONF
//! cfg.memory_fraction = 0.9;
//! aclallocPool pool; aclrtAllocatorDesc desc;
//! aclallocPoolCreate(&cfg, &pool, &desc);  // desc is complete: obj + 4 callbacks
//! aclrtAllocatorRegister(stream_a, desc);
//! aclrtAllocatorRegister(stream_b, desc);  // one pool, several streams
//! ...
//! aclallocPoolGetStats(pool, &stats);
//! aclallocPoolEmptyCache(pool);
//! ```
//!
//! The pool's handle is the descriptor's allocator object. A block handle is
//! the block's device address (`getAddrFromBlock` is the identity); a foreign
//! block or a double free is reported through `aclGetRecentErrMsg` and
//! changes nothing. Everything is re-exported here.
#![allow(non_camel_case_types)]

use std::ffi::c_void;

pub mod cache;
pub mod callbacks;
pub mod config;
pub mod history;
pub mod lifecycle;
pub mod sleep;
pub mod stats;

pub use cache::*;
pub use callbacks::*;
pub use config::*;
pub use history::*;
pub use lifecycle::*;
pub use sleep::*;
pub use stats::*;

/// A caching pool handle (also the allocator object of its descriptor).
pub type aclallocPool = *mut c_void;
