//! The bottom layer: errors and the per-thread error log, the C vocabulary,
//! descriptors, ids and handle tables, the environment's syntax. It imports no other module of the
//! crate (tests/layers.rs checks it).

pub(crate) mod boundary;
pub mod descriptor;
pub mod device_port;
pub mod env;
pub mod errlog;
pub mod error;
pub mod handles;
pub mod ids;
pub mod serving;
pub mod stats;
pub mod types;
