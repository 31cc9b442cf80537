//! A stream's registration as an executor reads it
//! (`aclrtAllocatorGetByStream`), for the targets that call the callbacks.

use aclalloc::ffi::cann::allocator::aclrtAllocatorGetByStream;
use aclalloc::ffi::cann::types::aclError;
use std::ffi::c_void;

/// The object and callbacks registered on a stream.
pub struct Registered {
    pub obj: *mut c_void,
    pub alloc: unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void,
    pub free: unsafe extern "C" fn(*mut c_void, *mut c_void),
    /// Optional in a descriptor.
    pub advise: Option<unsafe extern "C" fn(*mut c_void, usize, *mut c_void) -> *mut c_void>,
    pub get_addr: unsafe extern "C" fn(*mut c_void) -> *mut c_void,
}

/// `aclrtAllocatorGetByStream(stream)` with every output asked for: its
/// code, and what it read when that is success.
pub fn read(stream: usize) -> (aclError, Option<Registered>) {
    let (mut desc, mut obj) = (std::ptr::null_mut(), std::ptr::null_mut());
    let (mut alloc, mut free, mut advise, mut get_addr) = (None, None, None, None);
    // SAFETY: every out-pointer points at a local of its type.
    let rc = unsafe {
        aclrtAllocatorGetByStream(
            stream as *mut c_void,
            &mut desc,
            &mut obj,
            &mut alloc,
            &mut free,
            &mut advise,
            &mut get_addr,
        )
    };
    let found = (rc == 0).then(|| Registered {
        obj,
        alloc: alloc.expect("a registration has an alloc callback"),
        free: free.expect("a registration has a free callback"),
        advise,
        get_addr: get_addr.expect("a registration has a getAddrFromBlock callback"),
    });
    (rc, found)
}
