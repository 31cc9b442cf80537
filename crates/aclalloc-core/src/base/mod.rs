//! The bottom layer: errors and the per-thread error log, the C vocabulary,
//! descriptors, ids and handle tables (the lock-free [`table::Table`]
//! they and the stream registry are built on), the environment's syntax, and the tracked-allocations adaptor
//! ([`tracked`]) that the pluggable allocators and the tracking layer keep
//! their blocks in, and the asymmetric fence ([`fence`]) of the pool's
//! thread caches and the pluggable allocators' calls. It imports no other module of the
//! crate (tests/layers.rs checks it).

pub mod asleep;
pub mod biased;
pub mod boundary;
pub mod descriptor;
pub mod device_port;
pub mod env;
pub mod errlog;
pub mod error;
pub mod fence;
pub(crate) mod fixed_line;
pub mod foreign_call;
pub mod handles;
pub mod ids;
pub mod serving;
pub mod stats;
pub mod sync;
pub mod table;
pub mod threads;
pub mod tracked;
pub mod types;
