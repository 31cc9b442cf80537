//! CANN's task ids and exception callbacks (`acl_rt.h`):
//! `aclrtGetThreadLastTaskId`, `aclrtSetExceptionInfoCallback`,
//! `aclrtExceptionInfoCallbackRegister`/`Unregister` and the getters of
//! `aclrtExceptionInfo` (see `crate::runtime`'s exceptions).
#![allow(non_snake_case, non_camel_case_types)]

use crate::base::error::{Error, Result};
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args;
use crate::ffi::wiring::dispatch::real_or_host;
use crate::runtime::exceptions;
pub use crate::runtime::exceptions::aclrtExceptionInfo;
use std::ffi::c_void;

/// `void fn(aclrtExceptionInfo *exceptionInfo)`: told about a task that
/// failed on a stream.
pub type aclrtExceptionInfoCallback =
    Option<unsafe extern "C" fn(exceptionInfo: *mut aclrtExceptionInfo)>;

/// The id of the last task the calling thread enqueued on a stream (a
/// kernel, a copy, a callback, an event record or wait, ...); 0 before its
/// first. Ids are unique in the process and increase; a failed task's
/// exception information gives the same id.
///
/// # Safety
/// `taskId` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetThreadLastTaskId(taskId: *mut u32) -> aclError {
    real_or_host!(aclrtGetThreadLastTaskId(taskId: *mut u32) {
        // SAFETY: the caller's contract.
        unsafe { args::write_out(taskId, "taskId", || Ok(exceptions::thread_last_task_id())) }
    })
}

/// Sets the callback told about every task that fails on a stream (NULL
/// unsets it; a later call replaces it). It runs in the synchronize that
/// reports the failure (`aclrtSynchronizeStream`, `aclrtSynchronizeDevice`,
/// ...), on that thread, before it returns. Deprecated in CANN for
/// `aclrtExceptionInfoCallbackRegister`.
#[no_mangle]
pub extern "C" fn aclrtSetExceptionInfoCallback(callback: aclrtExceptionInfoCallback) -> aclError {
    real_or_host!(aclrtSetExceptionInfoCallback(callback: aclrtExceptionInfoCallback) {
        exceptions::set_callback(callback);
        Ok(())
    })
}

/// Adds a callback told about every task that fails on a stream, as
/// `aclrtSetExceptionInfoCallback`'s; registering one twice adds it once.
#[no_mangle]
pub extern "C" fn aclrtExceptionInfoCallbackRegister(
    callback: aclrtExceptionInfoCallback,
) -> aclError {
    real_or_host!(aclrtExceptionInfoCallbackRegister(callback: aclrtExceptionInfoCallback) {
        exceptions::register_callback(args::required(callback, "callback")?);
        Ok(())
    })
}

/// Removes a callback `aclrtExceptionInfoCallbackRegister` added (one not
/// registered: nothing happens).
#[no_mangle]
pub extern "C" fn aclrtExceptionInfoCallbackUnregister(
    callback: aclrtExceptionInfoCallback,
) -> aclError {
    real_or_host!(aclrtExceptionInfoCallbackUnregister(callback: aclrtExceptionInfoCallback) {
        exceptions::unregister_callback(args::required(callback, "callback")?);
        Ok(())
    })
}

/// The exception information C passed in.
///
/// # Safety
/// A non-NULL `info` points to the information a callback was given.
unsafe fn info<'a>(info: *const aclrtExceptionInfo) -> Result<&'a aclrtExceptionInfo> {
    // SAFETY: the caller's contract.
    unsafe { info.as_ref() }.ok_or(Error::NullPointer { param: "info" })
}

/// The failed task's id (as `aclrtGetThreadLastTaskId` gave it to the
/// thread that enqueued it); 0xFFFFFFFF for NULL.
///
/// # Safety
/// `info` is NULL or the information an exception callback was given.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetTaskIdFromExceptionInfo(info: *const aclrtExceptionInfo) -> u32 {
    real_or_host!(aclrtGetTaskIdFromExceptionInfo(info: *const aclrtExceptionInfo) -> u32 {
        // SAFETY: the caller's contract.
        unsafe { self::info(info) }.map(|i| i.task_id)
    })
}

/// The failed task's stream id (as `aclrtStreamGetId` gives it);
/// 0xFFFFFFFF for NULL.
///
/// # Safety
/// `info` is NULL or the information an exception callback was given.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetStreamIdFromExceptionInfo(info: *const aclrtExceptionInfo) -> u32 {
    real_or_host!(aclrtGetStreamIdFromExceptionInfo(info: *const aclrtExceptionInfo) -> u32 {
        // SAFETY: the caller's contract.
        unsafe { self::info(info) }.map(|i| i.stream_id)
    })
}

/// The id (Linux thread id) of the thread that enqueued the failed task;
/// 0xFFFFFFFF for NULL.
///
/// # Safety
/// `info` is NULL or the information an exception callback was given.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetThreadIdFromExceptionInfo(info: *const aclrtExceptionInfo) -> u32 {
    real_or_host!(aclrtGetThreadIdFromExceptionInfo(info: *const aclrtExceptionInfo) -> u32 {
        // SAFETY: the caller's contract.
        unsafe { self::info(info) }.map(|i| i.thread_id)
    })
}

/// The device of the failed task's stream; 0xFFFFFFFF for NULL.
///
/// # Safety
/// `info` is NULL or the information an exception callback was given.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetDeviceIdFromExceptionInfo(info: *const aclrtExceptionInfo) -> u32 {
    real_or_host!(aclrtGetDeviceIdFromExceptionInfo(info: *const aclrtExceptionInfo) -> u32 {
        // SAFETY: the caller's contract.
        unsafe { self::info(info) }.map(|i| i.device_id)
    })
}

/// The code the task failed with (what the synchronize reporting it
/// returns); 0xFFFFFFFF for NULL.
///
/// # Safety
/// `info` is NULL or the information an exception callback was given.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetErrorCodeFromExceptionInfo(
    info: *const aclrtExceptionInfo,
) -> u32 {
    real_or_host!(aclrtGetErrorCodeFromExceptionInfo(info: *const aclrtExceptionInfo) -> u32 {
        // SAFETY: the caller's contract.
        unsafe { self::info(info) }.map(|i| i.error_code)
    })
}

/// The arguments the failed kernel was launched with, on the device. A host
/// kernel's argument is host memory it owns: NULL and 0 length.
///
/// # Safety
/// `info` is NULL or the information an exception callback was given;
/// `devArgsPtr` and `devArgsLen` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetArgsFromExceptionInfo(
    info: *const aclrtExceptionInfo,
    devArgsPtr: *mut *mut c_void,
    devArgsLen: *mut u32,
) -> aclError {
    real_or_host!(aclrtGetArgsFromExceptionInfo(info: *const aclrtExceptionInfo, devArgsPtr: *mut *mut c_void, devArgsLen: *mut u32) {
        // SAFETY: the caller's contract.
        unsafe { self::info(info) }?;
        // SAFETY: the caller's contract.
        let ptr = unsafe { args::Out::required(devArgsPtr, "devArgsPtr") }?;
        // SAFETY: the caller's contract.
        let len = unsafe { args::Out::required(devArgsLen, "devArgsLen") }?;
        ptr.write(std::ptr::null_mut());
        len.write(0);
        Ok(())
    })
}

/// The handle of the failed kernel (`aclrtBinaryGetFunction`'s). Host
/// kernels have none: NULL.
///
/// # Safety
/// `info` is NULL or the information an exception callback was given;
/// `func` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetFuncHandleFromExceptionInfo(
    info: *const aclrtExceptionInfo,
    func: *mut aclrtFuncHandle,
) -> aclError {
    real_or_host!(aclrtGetFuncHandleFromExceptionInfo(info: *const aclrtExceptionInfo, func: *mut aclrtFuncHandle) {
        // SAFETY: the caller's contract.
        unsafe { self::info(info) }?;
        // SAFETY: the caller's contract.
        unsafe { args::write_out(func, "func", || Ok(std::ptr::null_mut())) }
    })
}
