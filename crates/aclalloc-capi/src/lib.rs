//! The C API of aclalloc: CANN's runtime surface and aclalloc's own
//! `aclalloc*` functions ([`ffi`]), the default allocator behind a stream with
//! none registered ([`default_allocator`]), CANN's stream-ordered memory pools
//! on the host runtime ([`stream_ordered`]), and the table of a real
//! runtime's functions ([`interpose`]). The layer above the subsystem crates; the
//! `aclalloc` package's cdylib exports what this crate defines
//! (docs/ARCHITECTURE.md).

// Every unsafe operation sits in an `unsafe` block with its own `// SAFETY:` comment.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

use aclalloc_core::{base, history, registry};
use aclalloc_plugin as plugin;
use aclalloc_pool as pool;
use aclalloc_runtime as runtime;
use aclalloc_tracking as tracking;

pub mod default_allocator;
pub mod ffi;
pub mod interpose;
pub mod stream_ordered;
