//! `aclrtSetDeviceSatMode` / `aclrtGetDeviceSatMode`,
//! `aclrtSetStreamOverflowSwitch` / `aclrtGetStreamOverflowSwitch` and
//! `aclrtGetOverflowStatus` / `aclrtResetOverflowStatus` through the C ABI:
//! the mode starts as Inf/NaN and reads back what was set; the switch is the
//! stream attribute `ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK`; the status is
//! 64 zero bytes written in stream order; bad input is refused with a
//! message and nothing is written.

mod common;

use common::streams::new_stream;

use aclalloc::base::error::*;
use aclalloc::ffi::cann::errmsg::aclGetRecentErrMsg;
use aclalloc::ffi::cann::memory::*;
use aclalloc::ffi::cann::overflow::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::stream_attribute::*;
use aclalloc::ffi::cann::types::*;
use std::ffi::c_void;
use std::ptr::null_mut;

use common::device0 as setup;
use common::message as last_message;

fn mode() -> aclrtFloatOverflowMode {
    let mut m = -7;
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtGetDeviceSatMode(&mut m) }, ACL_SUCCESS);
    m
}

fn switch(stream: aclrtStream) -> Result<u32, aclError> {
    let mut flag = 77;
    // SAFETY: a valid out-pointer.
    match unsafe { aclrtGetStreamOverflowSwitch(stream, &mut flag) } {
        ACL_SUCCESS => Ok(flag),
        rc => {
            assert_eq!(flag, 77, "nothing written on failure");
            Err(rc)
        }
    }
}

fn set_switch(stream: aclrtStream, flag: u32) -> aclError {
    // SAFETY: the handle is looked up, never trusted.
    unsafe { aclrtSetStreamOverflowSwitch(stream, flag) }
}

// One test: the mode is the process's.
#[test]
fn the_mode_starts_as_infnan_reads_back_and_refuses_undef() {
    setup();
    assert_eq!(mode(), ACL_RT_OVERFLOW_MODE_INFNAN);
    assert_eq!(
        aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_SATURATION),
        ACL_SUCCESS
    );
    assert_eq!(mode(), ACL_RT_OVERFLOW_MODE_SATURATION);

    // Refused, with a message; the mode unchanged.
    for bad in [ACL_RT_OVERFLOW_MODE_UNDEF, -1, 3] {
        assert_eq!(aclrtSetDeviceSatMode(bad), ACL_ERROR_INVALID_PARAM);
        assert!(last_message().contains("mode"));
        assert_eq!(mode(), ACL_RT_OVERFLOW_MODE_SATURATION);
    }
    // SAFETY: NULL is refused before any write.
    assert_eq!(
        unsafe { aclrtGetDeviceSatMode(std::ptr::null_mut()) },
        ACL_ERROR_INVALID_PARAM
    );
    assert!(last_message().contains("mode"));

    assert_eq!(
        aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_INFNAN),
        ACL_SUCCESS
    );
    assert_eq!(mode(), ACL_RT_OVERFLOW_MODE_INFNAN);
}

#[test]
fn the_switch_is_the_stream_attribute_and_bad_input_is_refused() {
    setup();
    let (a, b) = (new_stream(), new_stream());
    assert_eq!(switch(a), Ok(0));
    assert_eq!(set_switch(a, 1), ACL_SUCCESS);
    assert_eq!(switch(a), Ok(1));
    assert_eq!(switch(b), Ok(0), "per stream");

    // One storage with ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK, both ways.
    let mut v = aclrtStreamAttrValue { reserve: [9; 4] };
    // SAFETY: valid values.
    unsafe {
        assert_eq!(
            aclrtGetStreamAttribute(a, ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK, &mut v),
            ACL_SUCCESS
        );
        assert_eq!(v.overflowSwitch, 1);
        v = aclrtStreamAttrValue { reserve: [0; 4] };
        assert_eq!(
            aclrtSetStreamAttribute(a, ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK, &mut v),
            ACL_SUCCESS
        );
    }
    assert_eq!(switch(a), Ok(0));

    // The default stream has one too.
    assert_eq!(set_switch(null_mut(), 1), ACL_SUCCESS);
    assert_eq!(switch(null_mut()), Ok(1));
    assert_eq!(set_switch(null_mut(), 0), ACL_SUCCESS);

    // Refused, with a message; nothing changed or written.
    assert_eq!(set_switch(a, 2), ACL_ERROR_INVALID_PARAM);
    assert!(last_message().contains("flag"));
    assert_eq!(switch(a), Ok(0));
    // SAFETY: NULL is refused before any write.
    assert_eq!(
        unsafe { aclrtGetStreamOverflowSwitch(a, std::ptr::null_mut()) },
        ACL_ERROR_INVALID_PARAM
    );
    assert!(last_message().contains("flag"));
    // SAFETY: live streams, destroyed once.
    unsafe {
        assert_eq!(aclrtDestroyStream(a), ACL_SUCCESS);
        assert_eq!(aclrtDestroyStream(b), ACL_SUCCESS);
    }
    assert_ne!(set_switch(a, 1), ACL_SUCCESS);
    assert!(!aclGetRecentErrMsg().is_null());
    assert!(switch(a).is_err());
    assert!(!aclGetRecentErrMsg().is_null());
}

#[test]
fn the_status_is_64_zero_bytes_in_stream_order_and_bad_input_is_refused() {
    setup();
    let stream = new_stream();
    let mut dev: *mut c_void = null_mut();
    let mut host = [0xABu8; 64];
    // SAFETY: valid pointers and sizes; live device memory and stream.
    unsafe {
        assert_eq!(
            aclrtMalloc(&mut dev, 128, ACL_MEM_MALLOC_HUGE_FIRST),
            ACL_SUCCESS
        );
        assert_eq!(aclrtMemset(dev, 128, 0xCD, 128), ACL_SUCCESS);
        assert_eq!(aclrtGetOverflowStatus(dev, 64, stream), ACL_SUCCESS);
        assert_eq!(aclrtSynchronizeStream(stream), ACL_SUCCESS);
        assert_eq!(
            aclrtMemcpy(
                host.as_mut_ptr().cast(),
                64,
                dev,
                64,
                ACL_MEMCPY_DEVICE_TO_HOST
            ),
            ACL_SUCCESS
        );
        assert_eq!(host, [0u8; 64], "nothing overflowed");
        // The 64 bytes only: the rest of the allocation is untouched.
        let mut tail = [0u8; 64];
        assert_eq!(
            aclrtMemcpy(
                tail.as_mut_ptr().cast(),
                64,
                dev.cast::<u8>().add(64).cast(),
                64,
                ACL_MEMCPY_DEVICE_TO_HOST
            ),
            ACL_SUCCESS
        );
        assert_eq!(tail, [0xCDu8; 64]);

        assert_eq!(aclrtResetOverflowStatus(stream), ACL_SUCCESS);
        assert_eq!(aclrtResetOverflowStatus(null_mut()), ACL_SUCCESS);
        assert_eq!(aclrtGetOverflowStatus(dev, 64, null_mut()), ACL_SUCCESS);
        assert_eq!(aclrtSynchronizeStream(null_mut()), ACL_SUCCESS);

        // Refused, with a message; nothing written.
        assert_eq!(aclrtMemset(dev, 128, 0xCD, 128), ACL_SUCCESS);
        assert_eq!(
            aclrtGetOverflowStatus(null_mut(), 64, stream),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(last_message().contains("outputAddr"));
        assert_eq!(
            aclrtGetOverflowStatus(dev, 32, stream),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(last_message().contains("outputSize"));
        assert_eq!(
            aclrtGetOverflowStatus(dev.cast::<u8>().add(96).cast(), 64, stream),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(last_message().contains("outputAddr"));
        let mut on_host = [0xEEu8; 64];
        assert_eq!(
            aclrtGetOverflowStatus(on_host.as_mut_ptr().cast(), 64, stream),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(last_message().contains("outputAddr"));
        assert_eq!(on_host, [0xEEu8; 64]);
        assert_eq!(aclrtSynchronizeStream(stream), ACL_SUCCESS);
        assert_eq!(
            aclrtMemcpy(
                host.as_mut_ptr().cast(),
                64,
                dev,
                64,
                ACL_MEMCPY_DEVICE_TO_HOST
            ),
            ACL_SUCCESS
        );
        assert_eq!(host, [0xCDu8; 64]);

        assert_eq!(aclrtDestroyStream(stream), ACL_SUCCESS);
        assert_ne!(aclrtGetOverflowStatus(dev, 64, stream), ACL_SUCCESS);
        assert!(!aclGetRecentErrMsg().is_null());
        assert_ne!(aclrtResetOverflowStatus(stream), ACL_SUCCESS);
        assert!(!aclGetRecentErrMsg().is_null());
        assert_eq!(aclrtFree(dev), ACL_SUCCESS);
        assert_eq!(
            aclrtGetOverflowStatus(dev, 64, null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(last_message().contains("outputAddr"));
    }
}
