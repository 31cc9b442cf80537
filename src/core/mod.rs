//! The bottom layer: errors and the per-thread error log, the C vocabulary,
//! descriptors, ids and handle tables (the lock-free [`seq_table::SeqTable`]
//! they and the stream registry are built on), the environment's syntax, and the tracked-allocations adaptor
//! ([`tracked`]) that the pluggable allocators and the tracking layer keep
//! their blocks in. It imports no other module of the
//! crate (tests/layers.rs checks it).

pub(crate) mod barrier;
pub(crate) mod boundary;
pub mod descriptor;
pub mod device_port;
pub mod env;
pub mod errlog;
pub mod error;
pub(crate) mod fixed_line;
pub(crate) mod foreign_call;
pub mod handles;
pub mod ids;
pub mod live_table;
pub mod owner_word;
pub mod seq_table;
pub mod serving;
pub mod stats;
pub(crate) mod sync;
pub mod threads;
pub mod tracked;
pub mod types;
