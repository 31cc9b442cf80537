//! CANN's data buffers through the C ABI on the host runtime: a buffer
//! names an address and a size until destroyed; NULL, forged and destroyed
//! buffers are refused with a message, never read.

mod common;

use aclalloc::base::error::{ACL_ERROR_INVALID_PARAM, ACL_SUCCESS};
use aclalloc::ffi::cann::data_buffer::*;
use std::ffi::c_void;
use std::ptr::{null, null_mut};

#[test]
fn a_buffer_names_its_memory_until_destroyed_and_bad_ones_are_refused() {
    let mut memory = [0u8; 256];
    let data = memory.as_mut_ptr().cast::<c_void>();
    // SAFETY: each call is given a live buffer, NULL or a forged number:
    // the library looks them up and never reads through them.
    unsafe {
        let b = aclCreateDataBuffer(data, 256);
        assert!(!b.is_null());
        assert_eq!(aclGetDataBufferAddr(b), data);
        assert_eq!(aclGetDataBufferSizeV2(b), 256);
        assert_eq!(aclGetDataBufferSize(b), 256);
        let later = memory.as_mut_ptr().add(128).cast::<c_void>();
        assert_eq!(aclUpdateDataBuffer(b, later, 128), ACL_SUCCESS);
        assert_eq!(aclGetDataBufferAddr(b), later);
        assert_eq!(aclGetDataBufferSizeV2(b), 128);
        // An output whose memory comes later: NULL and 0 are allowed.
        let empty = aclCreateDataBuffer(null_mut(), 0);
        assert!(!empty.is_null());
        assert_eq!(aclGetDataBufferSizeV2(empty), 0);
        assert_eq!(aclDestroyDataBuffer(empty), ACL_SUCCESS);

        assert_eq!(aclDestroyDataBuffer(b), ACL_SUCCESS);
        assert!(aclGetDataBufferAddr(b).is_null());
        assert!(common::message().contains("not a live data buffer"));
        assert_eq!(aclGetDataBufferSizeV2(b), 0);
        assert_eq!(aclGetDataBufferSize(b), 0, "CANN's 0, not u32::MAX");
        assert!(common::message().contains("not a live data buffer"));
        assert_eq!(aclGetDataBufferSize(null()), 0);
        assert_eq!(aclDestroyDataBuffer(b), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclUpdateDataBuffer(b, data, 1), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclDestroyDataBuffer(null()), ACL_ERROR_INVALID_PARAM);
        assert!(common::message().contains("dataBuffer"));
        let forged = 0x5000 as *const aclalloc::ffi::cann::types::aclDataBuffer;
        assert!(aclGetDataBufferAddr(forged).is_null());
        assert_eq!(aclDestroyDataBuffer(forged), ACL_ERROR_INVALID_PARAM);
    }
    // The 32-bit size is the size truncated, as CANN's.
    // SAFETY: a number kept, never read.
    unsafe {
        let big = aclCreateDataBuffer(null_mut(), (1usize << 32) + 5);
        assert_eq!(aclGetDataBufferSize(big), 5);
        assert_eq!(aclGetDataBufferSizeV2(big), (1usize << 32) + 5);
        assert_eq!(aclDestroyDataBuffer(big), ACL_SUCCESS);
    }
    // The memory was never the buffer's: it is still the caller's.
    memory[0] = 1;
    assert_eq!(memory[0], 1);
}
