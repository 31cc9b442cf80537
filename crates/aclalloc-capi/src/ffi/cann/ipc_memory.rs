//! CANN's IPC memory calls (`acl_rt.h`): device memory from `aclrtMalloc`
//! handed to other processes by key, through the same rendezvous as
//! shareable handles (`crate::runtime::sharing`).
#![allow(non_snake_case, non_camel_case_types)]

use crate::base::error::Error;
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args::{self, OutSlice};
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;
use std::ffi::{c_char, c_void};

/// Export flag: importers must be whitelisted (the default).
pub const ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT: u64 = 0x0;
/// Export flag: any process may import the key.
pub const ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION: u64 = 0x1;
/// Import flag: the default.
pub const ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT: u64 = 0x0;
/// Import flag: peer access between the devices (every device is the
/// host's memory: no effect).
pub const ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS: u64 = 0x1;

/// The length of a key buffer CANN documents (64 characters and a NUL).
const KEY_LEN: usize = 65;

/// # Safety
/// A non-NULL `key` is a NUL-terminated string.
unsafe fn key_arg<'a>(key: *const c_char) -> crate::base::error::Result<&'a str> {
    // SAFETY: the caller's contract.
    unsafe { args::c_str(key, "key") }
}

/// Makes the `aclrtMalloc` allocation holding `[devPtr, devPtr + size)`
/// shareable and writes its key (`len`: at least 65). `flags`:
/// `ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT` (importers whitelisted with
/// `aclrtIpcMemSetImportPid`) or `..._DISABLE_PID_VALIDATION`. Waits for
/// the work already queued; no other thread may write the allocation
/// during the call.
///
/// # Safety
/// `key` is NULL or writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcMemGetExportKey(
    devPtr: *mut c_void,
    size: usize,
    key: *mut c_char,
    len: usize,
    flags: u64,
) -> aclError {
    real_or_host!(aclrtIpcMemGetExportKey(devPtr: *mut c_void, size: usize, key: *mut c_char, len: usize, flags: u64) {
        let ptr = args::address(devPtr, "devPtr")?.as_ptr() as usize;
        if key.is_null() {
            return Err(Error::NullPointer { param: "key" });
        }
        if len < KEY_LEN {
            return Err(Error::InvalidParam { param: "len", reason: "It must be at least 65 (a key and its NUL)" });
        }
        let text = host().ipc_export(ptr, size, flags)?;
        // SAFETY: the caller's contract.
        let out = unsafe { OutSlice::new(key, len, "key") }?;
        args::write_text(out, &text);
        Ok(())
    })
}

/// Adds `num` pids (from `aclrtDeviceGetBareTgid`) to the whitelist of a
/// key this process exported.
///
/// # Safety
/// `key` is NULL or a string; `pid` is NULL or readable for `num` elements.
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcMemSetImportPid(
    key: *const c_char,
    pid: *mut i32,
    num: usize,
) -> aclError {
    real_or_host!(aclrtIpcMemSetImportPid(key: *const c_char, pid: *mut i32, num: usize) {
        // SAFETY: the caller's contract.
        let key = unsafe { key_arg(key) }?;
        // SAFETY: the caller's contract.
        let pids = unsafe { args::input_array(pid.cast_const(), num, "pid") }?;
        host().ipc_allow_import(key, &pids)
    })
}

/// Maps another process's exported memory into this process and writes
/// its address (the same address for a key imported again). A pid not
/// whitelisted: `ACL_ERROR_RT_NO_PERMISSION`; a key naming no live export:
/// `ACL_ERROR_INVALID_PARAM`.
///
/// # Safety
/// `devPtr` is NULL or writable; `key` is NULL or a string.
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcMemImportByKey(
    devPtr: *mut *mut c_void,
    key: *const c_char,
    flags: u64,
) -> aclError {
    real_or_host!(aclrtIpcMemImportByKey(devPtr: *mut *mut c_void, key: *const c_char, flags: u64) {
        // SAFETY: the caller's contract.
        let out = unsafe { args::Out::required(devPtr, "devPtr") }?;
        // SAFETY: the caller's contract.
        let key = unsafe { key_arg(key) }?;
        out.write(host().ipc_import(key, flags)? as *mut c_void);
        Ok(())
    })
}

/// Closes a key: an importer's mapping goes at its last close; the
/// exporter's close ends the export (importers keep their memory).
///
/// # Safety
/// `key` is NULL or a string.
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcMemClose(key: *const c_char) -> aclError {
    real_or_host!(aclrtIpcMemClose(key: *const c_char) {
        // SAFETY: the caller's contract.
        let key = unsafe { key_arg(key) }?;
        host().ipc_close(key)
    })
}

/// `aclrtIpcMemSetAttr`'s attribute types.
pub type aclrtIpcMemAttrType = i32;
/// The link another die's access to the memory goes through.
pub const ACL_RT_IPC_MEM_ATTR_ACCESS_LINK: aclrtIpcMemAttrType = 0;
/// `ACL_RT_IPC_MEM_ATTR_ACCESS_LINK` value: SIO (the default).
pub const ACL_RT_IPC_MEM_ATTR_ACCESS_LINK_SIO: u64 = 0;
/// `ACL_RT_IPC_MEM_ATTR_ACCESS_LINK` value: HCCS.
pub const ACL_RT_IPC_MEM_ATTR_ACCESS_LINK_HCCS: u64 = 1;
/// `ACL_RT_IPC_MEM_ATTR_ACCESS_LINK` value: UB, one port.
pub const ACL_RT_IPC_MEM_ATTR_ACCESS_LINK_UB_ONE_PORT_PATH: u64 = 2;
/// `ACL_RT_IPC_MEM_ATTR_ACCESS_LINK` value: UB, several ports.
pub const ACL_RT_IPC_MEM_ATTR_ACCESS_LINK_UB_MULTI_PORT_PATH: u64 = 3;

/// Pids of processes on another server (its `sdid`) to whitelist.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclrtServerPid {
    /// The server.
    pub sdid: u32,
    /// `num` pids.
    pub pid: *mut i32,
    /// How many pids.
    pub num: usize,
}

/// Sets an attribute of a key this process exported: `type`
/// `ACL_RT_IPC_MEM_ATTR_ACCESS_LINK` with an `..._ACCESS_LINK_*` value (no
/// effect on the host, which has no links between dies).
///
/// # Safety
/// `key` is NULL or a string.
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcMemSetAttr(
    key: *const c_char,
    r#type: aclrtIpcMemAttrType,
    attr: u64,
) -> aclError {
    real_or_host!(aclrtIpcMemSetAttr(key: *const c_char, r#type: aclrtIpcMemAttrType, attr: u64) {
        // SAFETY: the caller's contract.
        let key = unsafe { key_arg(key) }?;
        host().ipc_set_attr(key, r#type, attr)
    })
}

/// Whitelists processes of other servers: the host runtime shares between
/// processes of one host only (`ACL_ERROR_API_NOT_SUPPORT` once the
/// arguments are checked).
///
/// # Safety
/// `key` is NULL or a string; `serverPids` is NULL or readable for `num`
/// elements.
#[no_mangle]
pub unsafe extern "C" fn aclrtIpcMemImportPidInterServer(
    key: *const c_char,
    serverPids: *mut aclrtServerPid,
    num: usize,
) -> aclError {
    real_or_host!(aclrtIpcMemImportPidInterServer(key: *const c_char, serverPids: *mut aclrtServerPid, num: usize) {
        // SAFETY: the caller's contract.
        unsafe { key_arg(key) }?;
        // SAFETY: the caller's contract.
        unsafe { inter_server(serverPids, num) }
    })
}

/// The checks of the inter-server whitelist calls, then their refusal.
///
/// # Safety
/// `server_pids` is NULL or readable for `num` elements.
pub(super) unsafe fn inter_server(
    server_pids: *mut aclrtServerPid,
    num: usize,
) -> crate::base::error::Result<()> {
    if server_pids.is_null() {
        return Err(Error::NullPointer {
            param: "serverPids",
        });
    }
    if num == 0 {
        return Err(Error::InvalidParam {
            param: "num",
            reason: "It must be at least 1",
        });
    }
    Err(Error::NotSupported {
        what: "whitelisting processes of other servers: the host runtime shares between processes of one host",
    })
}
