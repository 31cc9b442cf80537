//! Putting this library in front of a real ACL runtime (`LD_PRELOAD`).
//!
//! [`next`] decides, once, which functions forward to a real runtime (found
//! among the loaded objects by `loaded`); [`shadow`] mirrors its allocator
//! descriptors. The forwarding bodies are in `crate::ffi::wiring::forward`. What
//! each export does in front of a real runtime:
//!
//! | export | in front of a real runtime |
//! | --- | --- |
//! | descriptor functions (`aclrtAllocatorCreateDesc`, setters, `DestroyDesc`) | forwarded; their effect is mirrored here |
//! | `aclrtAllocatorRegister` | registered with the real runtime too: the user's descriptor, or with tracking on a descriptor holding the tracking object and callbacks, so the runtime's executor goes through the tracking layer (a descriptor this library did not see being created is registered as it is, and its contents read back from the runtime) |
//! | `aclrtAllocatorGetByStream` | answered by this library: tracking on, the tracking object and callbacks (`*allocatorDesc` is the user's descriptor); off, exactly what the user registered |
//! | `aclrtAllocatorUnregister` | forwarded, and this library's record dropped (live blocks are reported as leaks) |
//! | `aclrtSynchronizeStream`, `...WithTimeout` | forwarded; on success the tracking layer learns that the stream's frees are complete |
//! | `aclrtSynchronizeDevice`, `aclrtResetDevice`, `...Force` | forwarded; on success every stream counts as synchronized |
//! | `aclrtDestroyStream`, `...Force` | forwarded; on success this library drops its record of the stream (a new stream at the same address inherits nothing) |
//! | the other runtime functions (`aclInit`, devices, contexts, streams, memory) | forwarded: each export's body is `crate::ffi::wiring::dispatch::real_or_host!` |
//! | `aclallocLaunchKernel` | forwarded if the real runtime has it, else the host runtime's (CANN has none) |
//! | `aclGetRecentErrMsg` | this library's messages if it has any, else the real runtime's |
//!
//! This library takes no libc function: the `exec` family, for reports
//! written before an image is replaced, is taken by the separate preload
//! object `libaclalloc_preload.so` (`preload/`), which `aclalloc run` loads.

mod loaded;
pub mod next;
pub mod shadow;

pub use next::{real_runtime, Sym};
