//! CANN's notifies (`acl_rt.h`): a flag one stream sets and another waits
//! for, also between processes by key (see `crate::runtime::notify`).
#![allow(non_snake_case, non_camel_case_types)]

use crate::base::error::{Error, Result};
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args::{self, OutSlice};
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;
use std::ffi::{c_char, c_void};

/// A notify handle.
pub type aclrtNotify = *mut c_void;

/// `aclrtCreateNotify` flag: the default.
pub const ACL_NOTIFY_DEFAULT: u32 = 0x0000_0000;
/// `aclrtCreateNotify` flag: used on the device only (the same on the host).
pub const ACL_NOTIFY_DEVICE_USE_ONLY: u32 = 0x0000_0001;
/// Export flag: importers must be whitelisted (the default).
pub const ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT: u64 = 0x0;
/// Export flag: any process may import the key.
pub const ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION: u64 = 0x2;
/// Import flag: the default.
pub const ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT: u64 = 0x0;
/// Import flag: peer access between the devices (no effect on the host).
pub const ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS: u64 = 0x2;

fn required(notify: aclrtNotify) -> Result<usize> {
    args::address(notify, "notify").map(|n| n.as_ptr() as usize)
}

/// Creates a notify in the current context (`flag`: `ACL_NOTIFY_DEFAULT`
/// or `ACL_NOTIFY_DEVICE_USE_ONLY`).
///
/// # Safety
/// `notify` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateNotify(notify: *mut aclrtNotify, flag: u64) -> aclError {
    real_or_host!(aclrtCreateNotify(notify: *mut aclrtNotify, flag: u64) {
        // SAFETY: the caller's contract.
        unsafe { args::write_out(notify, "notify", || Ok(host().create_notify(flag)? as aclrtNotify)) }
    })
}

/// Destroys a notify at once; work already queued on it still runs.
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtDestroyNotify(notify: aclrtNotify) -> aclError {
    real_or_host!(aclrtDestroyNotify(notify: aclrtNotify) {
        host().destroy_notify(required(notify)?)
    })
}

/// Sets the notify when `stream` (NULL: the default stream) reaches this point.
///
/// # Safety
/// None for the host runtime: the handles are looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtRecordNotify(notify: aclrtNotify, stream: aclrtStream) -> aclError {
    real_or_host!(aclrtRecordNotify(notify: aclrtNotify, stream: aclrtStream) {
        host().record_notify(required(notify)?, args::optional_stream(stream))
    })
}

/// Makes `stream` run nothing queued after this call until the notify is
/// set, then clears it. `timeout`: seconds, 0 for no limit (past it the
/// stream goes on). Returns at once.
///
/// # Safety
/// None for the host runtime: the handles are looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtWaitAndResetNotify(
    notify: aclrtNotify,
    stream: aclrtStream,
    timeout: u32,
) -> aclError {
    real_or_host!(aclrtWaitAndResetNotify(notify: aclrtNotify, stream: aclrtStream, timeout: u32) {
        host().wait_notify(required(notify)?, args::optional_stream(stream), timeout)
    })
}

/// The notify's id.
///
/// # Safety
/// `notifyId` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtGetNotifyId(notify: aclrtNotify, notifyId: *mut u32) -> aclError {
    real_or_host!(aclrtGetNotifyId(notify: aclrtNotify, notifyId: *mut u32) {
        let n = required(notify)?;
        // SAFETY: the caller's contract.
        unsafe { args::write_out(notifyId, "notifyId", || host().notify_id(n)) }
    })
}

/// Writes the key another process imports the notify with (`flags`:
/// `ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT`, importers whitelisted with
/// `aclrtNotifySetImportPid`, or `..._DISABLE_PID_VALIDATION`).
///
/// # Safety
/// `key` is NULL or writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn aclrtNotifyGetExportKey(
    notify: aclrtNotify,
    key: *mut c_char,
    len: usize,
    flags: u64,
) -> aclError {
    real_or_host!(aclrtNotifyGetExportKey(notify: aclrtNotify, key: *mut c_char, len: usize, flags: u64) {
        let n = required(notify)?;
        if key.is_null() {
            return Err(Error::NullPointer { param: "key" });
        }
        let text = host().export_notify(n, flags)?;
        if len <= text.len() {
            return Err(Error::InvalidParam { param: "len", reason: "The key does not fit (65 bytes always do)" });
        }
        // SAFETY: the caller's contract.
        let out = unsafe { OutSlice::new(key, len, "key") }?;
        args::write_text(out, &text);
        Ok(())
    })
}

/// Imports another process's notify by key: records and waits here act on
/// the same notify there.
///
/// # Safety
/// `notify` is NULL or writable; `key` is NULL or a string.
#[no_mangle]
pub unsafe extern "C" fn aclrtNotifyImportByKey(
    notify: *mut aclrtNotify,
    key: *const c_char,
    flags: u64,
) -> aclError {
    real_or_host!(aclrtNotifyImportByKey(notify: *mut aclrtNotify, key: *const c_char, flags: u64) {
        // SAFETY: the caller's contract.
        let out = unsafe { args::Out::required(notify, "notify") }?;
        // SAFETY: the caller's contract.
        let key = unsafe { args::c_str(key, "key") }?;
        out.write(host().import_notify(key, flags)? as aclrtNotify);
        Ok(())
    })
}

/// Adds `num` pids to the whitelist of a notify this process exported.
///
/// # Safety
/// `pid` is NULL or readable for `num` elements.
#[no_mangle]
pub unsafe extern "C" fn aclrtNotifySetImportPid(
    notify: aclrtNotify,
    pid: *mut i32,
    num: usize,
) -> aclError {
    real_or_host!(aclrtNotifySetImportPid(notify: aclrtNotify, pid: *mut i32, num: usize) {
        let n = required(notify)?;
        // SAFETY: the caller's contract.
        let pids = unsafe { args::input_array(pid.cast_const(), num, "pid") }?;
        host().allow_notify_import(n, &pids)
    })
}

/// Clears `num` notifies at once (a dead one among them: none is cleared).
///
/// # Safety
/// `notifies` is NULL or readable for `num` elements.
#[no_mangle]
pub unsafe extern "C" fn aclrtNotifyBatchReset(notifies: *mut aclrtNotify, num: usize) -> aclError {
    real_or_host!(aclrtNotifyBatchReset(notifies: *mut aclrtNotify, num: usize) {
        // SAFETY: the caller's contract.
        let list = unsafe { args::input_array(notifies.cast_const(), num, "notifies") }?;
        let handles = list.into_iter().map(required).collect::<Result<Vec<_>>>()?;
        host().reset_notifies(&handles)
    })
}

/// Whitelists processes of other servers for a notify: the host runtime
/// shares between processes of one host only (`ACL_ERROR_API_NOT_SUPPORT`
/// once the arguments are checked).
///
/// # Safety
/// `serverPids` is NULL or readable for `num` elements.
#[no_mangle]
pub unsafe extern "C" fn aclrtNotifySetImportPidInterServer(
    notify: aclrtNotify,
    serverPids: *mut crate::ffi::cann::ipc_memory::aclrtServerPid,
    num: usize,
) -> aclError {
    real_or_host!(aclrtNotifySetImportPidInterServer(notify: aclrtNotify, serverPids: *mut crate::ffi::cann::ipc_memory::aclrtServerPid, num: usize) {
        host().notify_id(required(notify)?)?;
        // SAFETY: the caller's contract.
        unsafe { crate::ffi::cann::ipc_memory::inter_server(serverPids, num) }
    })
}
