//! Streams made, synchronized and destroyed through the C ABI, each call
//! asserted to succeed.

use aclalloc::base::error::ACL_SUCCESS;
use aclalloc::ffi::cann::runtime::{aclrtCreateStream, aclrtDestroyStream, aclrtSynchronizeStream};
use aclalloc::ffi::cann::types::aclrtStream;

/// A new stream on the current context.
pub fn new_stream() -> aclrtStream {
    let mut s = std::ptr::null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtCreateStream(&mut s) }, ACL_SUCCESS);
    s
}

/// Destroys a stream the test made.
pub fn destroy(s: aclrtStream) {
    // SAFETY: a stream of the test's.
    assert_eq!(unsafe { aclrtDestroyStream(s) }, ACL_SUCCESS);
}

/// Waits for a stream the test made.
pub fn sync(s: aclrtStream) {
    // SAFETY: a stream of the test's.
    assert_eq!(unsafe { aclrtSynchronizeStream(s) }, ACL_SUCCESS);
}
