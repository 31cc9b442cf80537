//! The bottom layers of aclalloc: base, registry, history.
pub mod base;
pub mod history;
pub mod registry;
