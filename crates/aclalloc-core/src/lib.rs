//! The bottom layers of aclalloc: base, registry, history.

// Every unsafe operation sits in an `unsafe` block with its own `// SAFETY:` comment.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod base;
pub mod history;
pub mod registry;
