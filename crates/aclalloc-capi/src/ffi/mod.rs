//! The C ABI, split by what a reader looks for:
//!
//! - [`cann`]: CANN's functions and types (`acl*`), each export a thin
//!   layer over the safe core;
//! - [`ext`]: aclalloc's own extensions (`aclalloc*`): the caching pool,
//!   tracking, pluggable and default allocators, launches;
//! - [`wiring`]: what every export stands on: argument checks (`args`), the
//!   one rule for forwarding to a real runtime (`dispatch`), the allocator
//!   API's forwarding bodies (`forward`), the host runtime singleton
//!   (`host`) and the composition root (`process`).
//!
//! Every export goes through `boundary::boundary`, which catches panics,
//! records the failure for `aclGetRecentErrMsg` and turns it into an ACL
//! error code. `cann` and `ext` depend on `wiring`, never the reverse, except
//! the composition root, which builds the device port from CANN's memory
//! exports and installs the pool's callbacks (`tests/layers.rs` checks that
//! the files import one another without a cycle).

pub(crate) use crate::base::boundary;
pub mod cann;
pub mod ext;
pub mod wiring;
