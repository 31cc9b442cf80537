//! `aclrtQueryDeviceStatus`, `aclrtGet/Set/ResetDeviceResLimit` and
//! `aclrtGetDeviceUtilizationRate` through the C ABI: a host device is
//! normal, a limit reads back until reset (and is what
//! `aclrtGetResInCurrentThread` reports), utilization reports memory (cores: 0);
//! bad input is refused with a message and nothing is written.

mod common;

use aclalloc::base::error::*;
use aclalloc::ffi::cann::device_info::*;
use aclalloc::ffi::cann::device_limits::*;
use aclalloc::ffi::cann::errmsg::aclGetRecentErrMsg;

use common::device0 as setup;
use common::message as last_message;

fn limit(kind: aclrtDevResLimitType) -> u32 {
    let mut v = 0;
    // SAFETY: a valid out-pointer.
    assert_eq!(
        unsafe { aclrtGetDeviceResLimit(0, kind, &mut v) },
        ACL_SUCCESS
    );
    v
}

#[test]
fn limits_read_back_until_reset_and_bad_input_is_refused() {
    setup();
    let cores = std::thread::available_parallelism().unwrap().get() as u32;
    let initial = limit(ACL_RT_DEV_RES_VECTOR_CORE);
    assert!(initial >= 1);
    assert_eq!(
        aclrtSetDeviceResLimit(0, ACL_RT_DEV_RES_VECTOR_CORE, 1),
        ACL_SUCCESS
    );
    assert_eq!(
        aclrtSetDeviceResLimit(0, ACL_RT_DEV_RES_CUBE_CORE, 8),
        ACL_SUCCESS
    );
    assert_eq!(limit(ACL_RT_DEV_RES_VECTOR_CORE), 1);
    assert_eq!(limit(ACL_RT_DEV_RES_CUBE_CORE), 8);
    let mut v = 0;
    // SAFETY: a valid out-pointer.
    assert_eq!(
        unsafe { aclrtGetResInCurrentThread(ACL_RT_DEV_RES_VECTOR_CORE, &mut v) },
        ACL_SUCCESS
    );
    assert_eq!(v, 1);
    // Setting again replaces.
    assert_eq!(
        aclrtSetDeviceResLimit(0, ACL_RT_DEV_RES_VECTOR_CORE, 2),
        ACL_SUCCESS
    );
    assert_eq!(limit(ACL_RT_DEV_RES_VECTOR_CORE), 2);
    assert_eq!(aclrtResetDeviceResLimit(0), ACL_SUCCESS);
    assert_eq!(limit(ACL_RT_DEV_RES_VECTOR_CORE), cores);
    assert_eq!(limit(ACL_RT_DEV_RES_CUBE_CORE), cores);

    // Refused, with a message; nothing written, nothing changed.
    assert_eq!(
        aclrtSetDeviceResLimit(0, ACL_RT_DEV_RES_CUBE_CORE, 0),
        ACL_ERROR_INVALID_PARAM
    );
    assert!(last_message().contains("at least 1"));
    assert_eq!(aclrtSetDeviceResLimit(0, 7, 1), ACL_ERROR_INVALID_PARAM);
    assert!(last_message().contains("aclrtDevResLimitType"));
    assert_eq!(
        aclrtSetDeviceResLimit(99, ACL_RT_DEV_RES_CUBE_CORE, 1),
        ACL_ERROR_RT_INVALID_DEVICEID
    );
    assert!(!aclGetRecentErrMsg().is_null());
    assert_eq!(aclrtResetDeviceResLimit(-1), ACL_ERROR_RT_INVALID_DEVICEID);
    assert!(!aclGetRecentErrMsg().is_null());
    let mut v = 12345u32;
    // SAFETY: valid or NULL out-pointers.
    unsafe {
        assert_eq!(
            aclrtGetDeviceResLimit(0, 7, &mut v),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(v, 12345);
        assert_eq!(
            aclrtGetDeviceResLimit(0, ACL_RT_DEV_RES_CUBE_CORE, std::ptr::null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(last_message().contains("value"));
        assert_eq!(
            aclrtGetDeviceResLimit(99, ACL_RT_DEV_RES_CUBE_CORE, &mut v),
            ACL_ERROR_RT_INVALID_DEVICEID
        );
        assert_eq!(v, 12345);
    }
    assert_eq!(limit(ACL_RT_DEV_RES_CUBE_CORE), cores);
}

#[test]
fn a_host_device_is_normal_and_reports_its_memory_utilization() {
    setup();
    let mut status = -1;
    // SAFETY: valid or NULL out-pointers.
    unsafe {
        assert_eq!(aclrtQueryDeviceStatus(0, &mut status), ACL_SUCCESS);
        assert_eq!(status, ACL_RT_DEVICE_STATUS_NORMAL);
        status = -1;
        assert_eq!(
            aclrtQueryDeviceStatus(99, &mut status),
            ACL_ERROR_RT_INVALID_DEVICEID
        );
        assert_eq!(status, -1);
        assert_eq!(
            aclrtQueryDeviceStatus(0, std::ptr::null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(last_message().contains("deviceStatus"));
        let mut info = aclrtUtilizationInfo {
            cubeUtilization: -7,
            vectorUtilization: -7,
            aicpuUtilization: -7,
            memoryUtilization: -7,
            utilizationExtend: std::ptr::null_mut(),
        };
        assert_eq!(aclrtGetDeviceUtilizationRate(0, &mut info), ACL_SUCCESS);
        assert!((0..=100).contains(&info.memoryUtilization));
        assert_eq!(info.cubeUtilization, 0);
        let mut reserved = 0u8;
        info.memoryUtilization = -7;
        info.utilizationExtend = (&mut reserved as *mut u8).cast();
        assert_eq!(
            aclrtGetDeviceUtilizationRate(0, &mut info),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(last_message().contains("utilizationExtend"));
        assert_eq!(info.memoryUtilization, -7);
        info.utilizationExtend = std::ptr::null_mut();
        assert_eq!(
            aclrtGetDeviceUtilizationRate(0, std::ptr::null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtGetDeviceUtilizationRate(99, &mut info),
            ACL_ERROR_RT_INVALID_DEVICEID
        );
    }
}
