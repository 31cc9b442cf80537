//! `aclrtSetStreamAttribute` / `aclrtGetStreamAttribute` through the C ABI:
//! the failure mode is the one `aclrtSetStreamFailureMode` sets, the
//! priority the one the stream was created with, switches and tags are kept
//! per stream; bad attributes, values and streams are refused.

use aclalloc::base::error::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::stream_attribute::*;
use aclalloc::ffi::cann::stream_info::*;
use std::ptr::null_mut;

fn get(s: *mut std::ffi::c_void, attr: aclrtStreamAttr) -> Result<aclrtStreamAttrValue, aclError> {
    let mut v = aclrtStreamAttrValue {
        reserve: [u32::MAX; 4],
    };
    // SAFETY: a valid out-pointer.
    match unsafe { aclrtGetStreamAttribute(s, attr, &mut v) } {
        ACL_SUCCESS => Ok(v),
        rc => Err(rc),
    }
}

fn set(s: *mut std::ffi::c_void, attr: aclrtStreamAttr, mut v: aclrtStreamAttrValue) -> aclError {
    // SAFETY: a valid value.
    unsafe { aclrtSetStreamAttribute(s, attr, &mut v) }
}

#[test]
fn attributes_read_back_what_was_set_and_bad_ones_are_refused() {
    // SAFETY: a NULL configuration path is allowed.
    let rc = unsafe { aclInit(std::ptr::null()) };
    assert!(rc == ACL_SUCCESS || rc == ACL_ERROR_REPEAT_INITIALIZE);
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    let (mut a, mut b) = (null_mut(), null_mut());
    // SAFETY: valid out-pointers; live streams.
    unsafe {
        assert_eq!(aclrtCreateStream(&mut a), ACL_SUCCESS);
        assert_eq!(aclrtCreateStream(&mut b), ACL_SUCCESS);
        assert_eq!(
            aclrtSetStreamFailureMode(a, ACL_STOP_ON_FAILURE as u64),
            ACL_SUCCESS
        );
    }
    // SAFETY: the union member each attribute names.
    unsafe {
        assert_eq!(get(a, ACL_STREAM_ATTR_FAILURE_MODE).unwrap().failureMode, 1);
        assert_eq!(get(b, ACL_STREAM_ATTR_FAILURE_MODE).unwrap().failureMode, 0);
        let tag = aclrtStreamAttrValue {
            userCustomTag: 1234,
        };
        assert_eq!(set(a, ACL_STREAM_ATTR_USER_CUSTOM_TAG, tag), ACL_SUCCESS);
        assert_eq!(
            get(a, ACL_STREAM_ATTR_USER_CUSTOM_TAG)
                .unwrap()
                .userCustomTag,
            1234
        );
        assert_eq!(
            get(b, ACL_STREAM_ATTR_USER_CUSTOM_TAG)
                .unwrap()
                .userCustomTag,
            0
        );
        let on = aclrtStreamAttrValue { overflowSwitch: 1 };
        assert_eq!(
            set(b, ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK, on),
            ACL_SUCCESS
        );
        assert_eq!(
            get(b, ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK)
                .unwrap()
                .overflowSwitch,
            1
        );
        let off = aclrtStreamAttrValue { failureMode: 0 };
        assert_eq!(set(a, ACL_STREAM_ATTR_FAILURE_MODE, off), ACL_SUCCESS);
        assert_eq!(get(a, ACL_STREAM_ATTR_FAILURE_MODE).unwrap().failureMode, 0);
        let mut priority = u32::MAX;
        assert_eq!(aclrtStreamGetPriority(a, &mut priority), ACL_SUCCESS);
        assert_eq!(
            get(a, ACL_STREAM_ATTR_PRIORITY).unwrap().streamPriority,
            priority
        );

        let two = aclrtStreamAttrValue {
            cacheOpInfoSwitch: 2,
        };
        assert_eq!(
            set(a, ACL_STREAM_ATTR_CACHE_OP_INFO, two),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            set(a, ACL_STREAM_ATTR_PRIORITY, on),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(set(a, 9, on), ACL_ERROR_INVALID_PARAM);
        assert_eq!(
            set(null_mut(), ACL_STREAM_ATTR_FAILURE_MODE, off),
            ACL_ERROR_INVALID_PARAM,
            "not the default stream's failure mode"
        );
        assert_eq!(
            get(null_mut(), ACL_STREAM_ATTR_FAILURE_MODE)
                .unwrap()
                .failureMode,
            0
        );
        assert_eq!(get(a, 0).err(), Some(ACL_ERROR_INVALID_PARAM));
        assert_eq!(
            aclrtSetStreamAttribute(a, ACL_STREAM_ATTR_USER_CUSTOM_TAG, null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtGetStreamAttribute(a, ACL_STREAM_ATTR_USER_CUSTOM_TAG, null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(aclrtDestroyStream(a), ACL_SUCCESS);
        assert_eq!(
            get(a, ACL_STREAM_ATTR_USER_CUSTOM_TAG).err(),
            Some(ACL_ERROR_INVALID_PARAM)
        );
        assert_eq!(aclrtDestroyStream(b), ACL_SUCCESS);
    }
}
