//! The safe core: errors, descriptors, handle tables and the allocator API
//! that the C functions are a thin layer over.

pub mod api;
pub mod descriptor;
pub mod errlog;
pub mod error;
pub mod handles;
