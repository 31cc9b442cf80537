//! Putting this library in front of a real ACL runtime (`LD_PRELOAD`).
//!
//! [`next`] holds the one rule that decides, once at load time, which
//! functions forward to a real runtime. [`shadow`] mirrors the real
//! runtime's allocator descriptors. The forwarding bodies themselves are in
//! `crate::ffi::forward`. What each export does in front of a real runtime:
//!
//! | export | in front of a real runtime |
//! | --- | --- |
//! | descriptor functions (`aclrtAllocatorCreateDesc`, setters, `DestroyDesc`) | forwarded; their effect is mirrored here |
//! | `aclrtAllocatorRegister` | registered with the real runtime too: the user's descriptor, or with tracking on a descriptor holding the tracking object and callbacks, so the runtime's executor goes through the tracking layer |
//! | `aclrtAllocatorGetByStream` | answered by this library: tracking on, the tracking object and callbacks (`*allocatorDesc` is the user's descriptor); off, exactly what the user registered. Streams registered behind this library's back are forwarded |
//! | `aclrtAllocatorUnregister` | forwarded, and this library's record dropped (live blocks are reported as leaks) |
//! | `aclrtSynchronizeStream`, `...WithTimeout`, `aclrtSynchronizeDevice` | forwarded; on success the tracking layer learns that the stream's frees are complete |
//! | `aclrtDestroyStream`, `...Force` | forwarded; on success this library drops its record of the stream |
//! | `aclGetRecentErrMsg` | this library's messages if it has any, else the real runtime's |

pub mod next;
pub mod shadow;

pub use next::{real_runtime, Sym};
