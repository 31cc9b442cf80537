//! CANN's stream control (`acl_rt.h`): abort and stop, stream-ordered
//! writes and waits on a device word, stream state callbacks, and streams
//! created from a config handle (`aclrtCreateStreamV2`).
#![allow(non_snake_case, non_camel_case_types)]

use crate::base::error::{Error, Result};
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args;
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;
use crate::registry::StreamKey;
use parking_lot::Mutex;
use std::ffi::{c_char, c_void, CString};

/// `aclrtValueWait`: the word is at least the value.
pub const ACL_STREAM_WAIT_VALUE_GEQ: u32 = 0x0000_0000;
/// `aclrtValueWait`: the word equals the value.
pub const ACL_STREAM_WAIT_VALUE_EQ: u32 = 0x0000_0001;
/// `aclrtValueWait`: the word and the value share a set bit.
pub const ACL_STREAM_WAIT_VALUE_AND: u32 = 0x0000_0002;
/// `aclrtValueWait`: some bit is clear in both the word and the value.
pub const ACL_STREAM_WAIT_VALUE_NOR: u32 = 0x0000_0003;

/// Stores `value` in the 8-byte device word `devAddr` when `stream` (NULL:
/// the default stream) reaches this point. `flag` is reserved: 0.
///
/// # Safety
/// None for the host runtime: the address is checked against device memory.
#[no_mangle]
pub unsafe extern "C" fn aclrtValueWrite(
    devAddr: *mut c_void,
    value: u64,
    flag: u32,
    stream: aclrtStream,
) -> aclError {
    real_or_host!(aclrtValueWrite(devAddr: *mut c_void, value: u64, flag: u32, stream: aclrtStream) {
        host().value_write(devAddr, value, flag, args::optional_stream(stream))
    })
}

/// Holds `stream` (NULL: the default stream) at this point until the 8-byte
/// device word `devAddr` satisfies `flag` (`ACL_STREAM_WAIT_VALUE_*`) for
/// `value`; work queued after it runs only then.
///
/// # Safety
/// None for the host runtime: the address is checked against device memory.
#[no_mangle]
pub unsafe extern "C" fn aclrtValueWait(
    devAddr: *mut c_void,
    value: u64,
    flag: u32,
    stream: aclrtStream,
) -> aclError {
    real_or_host!(aclrtValueWait(devAddr: *mut c_void, value: u64, flag: u32, stream: aclrtStream) {
        host().value_wait(devAddr, value, flag, args::optional_stream(stream))
    })
}

/// Aborts `stream` (not the default stream: NULL is refused). On the host:
/// the task running (or, when the stream's worker is between tasks, the
/// next to start) is interrupted, every other queued task is dropped
/// (events they record count as complete, what they own is freed), and
/// later launches run as usual. The interrupted task fails: the next
/// `aclrtSynchronizeStream` returns `ACL_ERROR_RT_VECTOR_CORE_EXCEPTION`
/// (507035) for a kernel or host function, `ACL_ERROR_RT_INTERNAL_ERROR`
/// (507000) for a copy, set or wait. A synchronize already waiting when the
/// abort comes returns `ACL_ERROR_RT_STREAM_ABORT` (107023). A host kernel
/// cannot be killed: one that runs long polls `aclallocCurrentTaskCancelled`
/// to end early (a value wait does).
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamAbort(stream: aclrtStream) -> aclError {
    real_or_host!(aclrtStreamAbort(stream: aclrtStream) {
        host().abort_stream(args::optional_stream(stream)).map(drop)
    })
}

/// Stops the task running on `stream` without dropping queued work (not
/// the default stream: NULL is refused). On the host: the task running (or,
/// when the stream's worker is between tasks, the next to start) is
/// interrupted and fails with `ACL_ERROR_RT_INTERNAL_ERROR` (507000), which
/// the next `aclrtSynchronizeStream` returns once; one not started does not
/// run, and a running host kernel learns it through
/// `aclallocCurrentTaskCancelled`. The queued work and later launches run
/// after it (with `ACL_STOP_ON_FAILURE`, queued work is dropped until the
/// failure is reported, as after any failed task). Nothing happens on an
/// idle stream.
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtStreamStop(stream: aclrtStream) -> aclError {
    real_or_host!(aclrtStreamStop(stream: aclrtStream) {
        host().stop_stream(args::optional_stream(stream))
    })
}

/// The change a stream state callback reports.
pub type aclrtStreamState = i32;
/// After a stream was created.
pub const ACL_RT_STREAM_STATE_CREATE_POST: aclrtStreamState = 1;
/// Before a stream is destroyed.
pub const ACL_RT_STREAM_STATE_DESTROY_PRE: aclrtStreamState = 2;

/// `void fn(aclrtStream stm, aclrtStreamState state, void *args)`.
pub type aclrtStreamStateCallback =
    Option<unsafe extern "C" fn(stm: aclrtStream, state: aclrtStreamState, args: *mut c_void)>;

type StateFn = unsafe extern "C" fn(aclrtStream, aclrtStreamState, *mut c_void);

/// Registered stream state callbacks: (name, callback, its argument).
static STATE_CALLBACKS: Mutex<Vec<(CString, StateFn, usize)>> = Mutex::new(Vec::new());

fn register_state_callback(name: &[u8], callback: Option<StateFn>, arg: usize) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidParam {
            param: "regName",
            reason: "It must not be empty",
        });
    }
    let mut list = STATE_CALLBACKS.lock();
    let at = list.iter().position(|(n, ..)| n.as_bytes() == name);
    match (callback, at) {
        (Some(_), Some(_)) => Err(Error::InvalidParam {
            param: "regName",
            reason: "A callback is already registered under this name (unregister it first: callback NULL)",
        }),
        (Some(f), None) => {
            let name = CString::new(name).map_err(|_| Error::InvalidParam {
                param: "regName",
                reason: "It holds a NUL byte",
            })?;
            list.push((name, f, arg));
            Ok(())
        }
        (None, Some(i)) => {
            list.remove(i);
            Ok(())
        }
        (None, None) => Ok(()),
    }
}

/// Tells every registered stream state callback that `stream` changed.
/// Runs on the calling thread, outside the list's lock, so a callback may
/// register or unregister.
pub(crate) fn stream_state_changed(stream: aclrtStream, state: aclrtStreamState) {
    let callbacks: Vec<(StateFn, usize)> = STATE_CALLBACKS
        .lock()
        .iter()
        .map(|&(_, f, a)| (f, a))
        .collect();
    for (f, arg) in callbacks {
        // SAFETY: the registrant's contract: a callback callable with a
        // stream, a state and the argument it gave.
        unsafe { f(stream, state, arg as *mut c_void) };
    }
}

/// Registers `callback` under `regName` (one per name): it is called with
/// `args` after each stream is created and before each is destroyed, on the
/// creating or destroying thread. A NULL `callback` unregisters the name.
///
/// # Safety
/// `regName` is NULL or a NUL-terminated string; `callback` may be called
/// from any thread that creates or destroys a stream.
#[no_mangle]
pub unsafe extern "C" fn aclrtRegStreamStateCallback(
    regName: *const c_char,
    callback: aclrtStreamStateCallback,
    args: *mut c_void,
) -> aclError {
    real_or_host!(aclrtRegStreamStateCallback(regName: *const c_char, callback: aclrtStreamStateCallback, args: *mut c_void) {
        // SAFETY: the caller's contract.
        let name = unsafe { args::c_bytes(regName, "regName") }?;
        register_state_callback(name.to_bytes(), callback, args as usize)
    })
}

/// What `aclrtSetStreamConfigOpt` sets in a stream config handle.
pub type aclrtStreamConfigAttr = i32;
/// The model work address (`void *`); unused by the host runtime.
pub const ACL_RT_STREAM_WORK_ADDR_PTR: aclrtStreamConfigAttr = 0;
/// The model work size (`size_t`); unused by the host runtime.
pub const ACL_RT_STREAM_WORK_SIZE: aclrtStreamConfigAttr = 1;
/// The stream's `ACL_STREAM_*` flags (`uint32_t` or `size_t`).
pub const ACL_RT_STREAM_FLAG: aclrtStreamConfigAttr = 2;
/// The stream's priority (`uint32_t`, 0 to 7).
pub const ACL_RT_STREAM_PRIORITY: aclrtStreamConfigAttr = 3;

/// The configuration `aclrtCreateStreamV2` creates a stream with.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclrtStreamConfigHandle {
    pub workptr: *mut c_void,
    pub workSize: usize,
    pub flag: usize,
    pub priority: u32,
}

/// Live config handles: only these are read, written or freed. A list (a
/// program holds a few): its buffer starts where its pointer points, so a
/// leak checker at exit sees it reachable, not "possibly lost" as a hash
/// set's buffer, pointed into the middle, would be.
static CONFIG_HANDLES: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn live_config(handle: *const aclrtStreamConfigHandle) -> Result<*mut aclrtStreamConfigHandle> {
    if handle.is_null() {
        return Err(Error::NullPointer { param: "handle" });
    }
    let live = CONFIG_HANDLES.lock().contains(&(handle as usize));
    if !live {
        return Err(Error::InvalidParam {
            param: "handle",
            reason: "It is not a live handle from aclrtCreateStreamConfigHandle",
        });
    }
    Ok(handle.cast_mut())
}

/// A new stream config handle (flags 0, priority 0, no work memory); NULL
/// on failure. Free it with `aclrtDestroyStreamConfigHandle`.
#[no_mangle]
pub extern "C" fn aclrtCreateStreamConfigHandle() -> *mut aclrtStreamConfigHandle {
    real_or_host!(aclrtCreateStreamConfigHandle() -> *mut aclrtStreamConfigHandle {
        let handle = Box::into_raw(Box::new(aclrtStreamConfigHandle {
            workptr: std::ptr::null_mut(),
            workSize: 0,
            flag: 0,
            priority: 0,
        }));
        CONFIG_HANDLES.lock().push(handle as usize);
        Ok(handle)
    })
}

/// Frees a handle from `aclrtCreateStreamConfigHandle`; streams created
/// with it are unaffected.
///
/// # Safety
/// None for the host runtime: the handle is looked up before use.
#[no_mangle]
pub unsafe extern "C" fn aclrtDestroyStreamConfigHandle(
    handle: *mut aclrtStreamConfigHandle,
) -> aclError {
    real_or_host!(aclrtDestroyStreamConfigHandle(handle: *mut aclrtStreamConfigHandle) {
        let handle = live_config(handle)?;
        CONFIG_HANDLES.lock().retain(|&h| h != handle as usize);
        // SAFETY: a live handle is a box made by aclrtCreateStreamConfigHandle,
        // just taken out of the live set, so it is freed once.
        drop(unsafe { Box::from_raw(handle) });
        Ok(())
    })
}

/// Sets `attr` of a config handle from `attrValue` (`valueSize` bytes: the
/// size of the attribute's type).
///
/// # Safety
/// `attrValue` is NULL or readable for `valueSize` bytes.
#[no_mangle]
pub unsafe extern "C" fn aclrtSetStreamConfigOpt(
    handle: *mut aclrtStreamConfigHandle,
    attr: aclrtStreamConfigAttr,
    attrValue: *const c_void,
    valueSize: usize,
) -> aclError {
    real_or_host!(aclrtSetStreamConfigOpt(handle: *mut aclrtStreamConfigHandle, attr: aclrtStreamConfigAttr, attrValue: *const c_void, valueSize: usize) {
        let handle = live_config(handle)?;
        if attrValue.is_null() {
            return Err(Error::NullPointer { param: "attrValue" });
        }
        let wrong_size = Error::InvalidParam {
            param: "valueSize",
            reason: "It is not the size of the attribute's type",
        };
        // SAFETY: the caller's contract, for the size checked in each arm.
        let read_u32 = || unsafe { attrValue.cast::<u32>().read_unaligned() };
        // SAFETY: as above.
        let read_usize = || unsafe { attrValue.cast::<usize>().read_unaligned() };
        let mut config = {
            let _live = CONFIG_HANDLES.lock();
            // SAFETY: a live handle points to the box it was made with.
            unsafe { *handle }
        };
        match (attr, valueSize) {
            (ACL_RT_STREAM_WORK_ADDR_PTR, 8) => config.workptr = read_usize() as *mut c_void,
            (ACL_RT_STREAM_WORK_SIZE, 8) => config.workSize = read_usize(),
            (ACL_RT_STREAM_FLAG, 4) => config.flag = read_u32() as usize,
            (ACL_RT_STREAM_FLAG, 8) => config.flag = read_usize(),
            (ACL_RT_STREAM_PRIORITY, 4) => config.priority = read_u32(),
            (ACL_RT_STREAM_WORK_ADDR_PTR..=ACL_RT_STREAM_PRIORITY, _) => return Err(wrong_size),
            _ => {
                return Err(Error::InvalidParam {
                    param: "attr",
                    reason: "It is not an aclrtStreamConfigAttr",
                })
            }
        }
        let live = CONFIG_HANDLES.lock();
        // Written under the set's lock: a concurrent destroy waits for it.
        if live.contains(&(handle as usize)) {
            // SAFETY: still live, so still the box it was made with.
            unsafe { *handle = config };
        }
        Ok(())
    })
}

/// Creates a stream with the priority and flags of a config handle.
///
/// # Safety
/// `stream` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateStreamV2(
    stream: *mut aclrtStream,
    handle: *const aclrtStreamConfigHandle,
) -> aclError {
    real_or_host!(aclrtCreateStreamV2(stream: *mut aclrtStream, handle: *const aclrtStreamConfigHandle) {
        // SAFETY: the caller's contract.
        let out = unsafe { args::Out::required(stream, "stream") }?;
        let handle = live_config(handle)?;
        let config = {
            let _live = CONFIG_HANDLES.lock();
            // SAFETY: a live handle points to the box it was made with.
            unsafe { *handle }
        };
        let flag = u32::try_from(config.flag).map_err(|_| Error::InvalidParam {
            param: "handle",
            reason: "Its flag holds bits that are not ACL_STREAM_* flags",
        })?;
        let key: StreamKey = host().create_stream(config.priority, flag)?;
        out.write(key.as_ptr());
        stream_state_changed(key.as_ptr(), ACL_RT_STREAM_STATE_CREATE_POST);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_holds_one_callback_until_unregistered() {
        unsafe extern "C" fn cb(_: aclrtStream, _: aclrtStreamState, _: *mut c_void) {}
        let name = b"state-callback-test";
        register_state_callback(name, Some(cb), 0).unwrap();
        assert!(register_state_callback(name, Some(cb), 0).is_err(), "taken");
        register_state_callback(name, None, 0).unwrap();
        register_state_callback(name, Some(cb), 0).unwrap();
        register_state_callback(name, None, 0).unwrap();
        assert!(register_state_callback(b"", Some(cb), 0).is_err());
    }
}
