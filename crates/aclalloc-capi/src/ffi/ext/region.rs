//! Tagged regions: `aclallocRegionBegin`, `aclallocRegionEnd` (see
//! `crates/aclalloc-pool/src/region/mod.rs`). Sleep and wake are the pools'
//! calls, `aclallocSleep` and `aclallocWakeUp`, which take region memory
//! by its tag as they take a tagged pool.
#![allow(non_snake_case)]

use crate::base::boundary::ffi_boundary;
use crate::base::types::aclError;
use crate::ffi::wiring::args;
use crate::pool::region;
use std::ffi::c_char;

/// Opens a region tagged `tag` on the calling thread (regions nest; the
/// innermost tag wins). Until the matching `aclallocRegionEnd`, device
/// memory this thread allocates with `aclrtMalloc`, `aclrtMallocAlign32`,
/// `aclrtMallocCached` or `aclrtMallocPhysical` belongs to the tag:
/// `aclallocSleep` gives its physical memory back while its addresses stay
/// (contents offloaded to host memory for the tags it names, discarded for
/// the others) and `aclallocWakeUp` maps new memory at the same addresses,
/// all of a wake or none of it. In front of a real runtime the memory is
/// made with its virtual-memory calls. `tag` NULL or empty:
/// `ACL_ERROR_INVALID_PARAM`.
///
/// # Safety
/// `tag` must be NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn aclallocRegionBegin(tag: *const c_char) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract.
        let tag = unsafe { args::c_str(tag, "tag") }?;
        region::begin(tag)
    })
}

/// Closes the calling thread's innermost region. With no region open:
/// `ACL_ERROR_FAILURE`, and a message saying so.
#[no_mangle]
pub extern "C" fn aclallocRegionEnd() -> aclError {
    ffi_boundary!(region::end)
}
