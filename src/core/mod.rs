//! The bottom layer: errors and the per-thread error log, the C vocabulary,
//! descriptors, ids and handle tables. It imports no other module of the
//! crate (tests/layers.rs checks it).

pub mod descriptor;
pub mod errlog;
pub mod error;
pub mod handles;
pub mod ids;
pub mod stats;
pub mod types;
