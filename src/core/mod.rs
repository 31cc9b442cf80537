//! The safe core: errors, the environment's syntax, descriptors, handle
//! tables and the allocator API
//! that the C functions are a thin layer over.

pub mod api;
pub mod descriptor;
pub mod env;
pub mod errlog;
pub mod error;
pub mod handles;
