//! `aclGetCannAttributeList` / `aclGetCannAttribute`,
//! `aclrtGetDeviceCapability` and `aclrtCheckArchCompatibility` through the
//! C ABI: the host runtime lists Inf/NaN and bf16 (not JIT compilation),
//! supports neither device feature, and runs kernels built for its own SoC
//! only; bad input is refused with a message and nothing is written.

mod common;

use aclalloc::base::error::*;
use aclalloc::ffi::cann::capabilities::*;
use aclalloc::ffi::cann::device_info::aclrtGetSocName;
use aclalloc::ffi::cann::errmsg::aclGetRecentErrMsg;
use std::ffi::CStr;

use common::device0 as setup;
use common::message as last_message;

fn attribute(attr: aclCannAttr) -> Result<i32, aclError> {
    let mut v = -7;
    // SAFETY: a valid out-pointer.
    match unsafe { aclGetCannAttribute(attr, &mut v) } {
        ACL_SUCCESS => Ok(v),
        rc => {
            assert_eq!(v, -7, "nothing written on failure");
            Err(rc)
        }
    }
}

#[test]
fn the_list_holds_what_the_host_supports_and_each_attribute_agrees() {
    setup();
    let mut list: *const aclCannAttr = std::ptr::null();
    let mut num = 99usize;
    // SAFETY: valid out-pointers; the list is the library's, `num` long.
    let listed = unsafe {
        assert_eq!(aclGetCannAttributeList(&mut list, &mut num), ACL_SUCCESS);
        assert!(!list.is_null());
        std::slice::from_raw_parts(list, num).to_vec()
    };
    assert_eq!(listed, [ACL_CANN_ATTR_INF_NAN, ACL_CANN_ATTR_BF16]);
    for attr in [
        ACL_CANN_ATTR_INF_NAN,
        ACL_CANN_ATTR_BF16,
        ACL_CANN_ATTR_JIT_COMPILE,
    ] {
        assert_eq!(attribute(attr), Ok(i32::from(listed.contains(&attr))));
    }
    assert_eq!(attribute(ACL_CANN_ATTR_JIT_COMPILE), Ok(0));

    // Refused, with a message; nothing written.
    for bad in [ACL_CANN_ATTR_UNDEFINED, 3, i32::MAX] {
        assert_eq!(attribute(bad), Err(ACL_ERROR_INVALID_PARAM));
        assert!(last_message().contains("cannAttr"));
    }
    // SAFETY: NULL out-pointers are refused before any write.
    unsafe {
        assert_eq!(
            aclGetCannAttribute(ACL_CANN_ATTR_BF16, std::ptr::null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(last_message().contains("value"));
        let mut untouched = 99usize;
        assert_eq!(
            aclGetCannAttributeList(std::ptr::null_mut(), &mut untouched),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(last_message().contains("cannAttrList"));
        assert_eq!(untouched, 99);
        let mut no_list: *const aclCannAttr = std::ptr::null();
        assert_eq!(
            aclGetCannAttributeList(&mut no_list, std::ptr::null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(last_message().contains("num"));
        assert!(no_list.is_null());
    }
}

#[test]
fn a_host_device_supports_neither_feature_and_bad_input_is_refused() {
    setup();
    let capability = |device: i32, feature: aclrtDevFeatureType| {
        let mut v = -7;
        // SAFETY: a valid out-pointer.
        match unsafe { aclrtGetDeviceCapability(device, feature, &mut v) } {
            ACL_SUCCESS => Ok(v),
            rc => {
                assert_eq!(v, -7, "nothing written on failure");
                Err(rc)
            }
        }
    };
    assert_eq!(
        capability(0, ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV),
        Ok(ACL_DEV_FEATURE_NOT_SUPPORT)
    );
    assert_eq!(
        capability(0, ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV),
        Ok(ACL_DEV_FEATURE_NOT_SUPPORT)
    );
    assert_eq!(capability(0, 2), Err(ACL_ERROR_INVALID_PARAM));
    assert!(last_message().contains("devFeatureType"));
    assert_eq!(
        capability(99, ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV),
        Err(ACL_ERROR_RT_INVALID_DEVICEID)
    );
    assert!(!aclGetRecentErrMsg().is_null());
    assert_eq!(
        capability(-1, ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV),
        Err(ACL_ERROR_RT_INVALID_DEVICEID)
    );
    // SAFETY: NULL is refused before any write.
    assert_eq!(
        unsafe {
            aclrtGetDeviceCapability(
                0,
                ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV,
                std::ptr::null_mut(),
            )
        },
        ACL_ERROR_INVALID_PARAM
    );
    assert!(last_message().contains("value"));
}

#[test]
fn kernels_of_the_host_soc_only_are_compatible() {
    setup();
    let check = |soc: &CStr| {
        let mut v = -7;
        // SAFETY: a NUL-terminated string and a valid out-pointer.
        match unsafe { aclrtCheckArchCompatibility(soc.as_ptr(), &mut v) } {
            ACL_SUCCESS => Ok(v),
            rc => {
                assert_eq!(v, -7, "nothing written on failure");
                Err(rc)
            }
        }
    };
    // SAFETY: the SoC name is a static NUL-terminated string.
    let own = unsafe { CStr::from_ptr(aclrtGetSocName()) };
    assert_eq!(check(own), Ok(1));
    assert_eq!(check(c"Ascend910B3"), Ok(0));
    assert_eq!(check(c"aclalloc-host2"), Ok(0));
    assert_eq!(check(c""), Err(ACL_ERROR_INVALID_PARAM));
    assert!(last_message().contains("socVersion"));
    let mut v = -7;
    // SAFETY: NULL pointers are refused before any write.
    unsafe {
        assert_eq!(
            aclrtCheckArchCompatibility(std::ptr::null(), &mut v),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(last_message().contains("socVersion"));
        assert_eq!(v, -7);
        assert_eq!(
            aclrtCheckArchCompatibility(own.as_ptr(), std::ptr::null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(last_message().contains("canCompatible"));
    }
}
