//! CANN's model running instances (`acl_rt.h`, `aclmdlRI*`): graph capture
//! of a stream's work, task groups and their updates, conditional tasks,
//! the model build API with stream activation and switches, and replay
//! (see `crate::runtime::capture` and `crate::runtime::model`).
#![allow(non_snake_case, non_camel_case_types)]

use crate::base::error::{Error, Result};
use crate::ffi::cann::stream_info::aclrtCallback;
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args::{self, Out, OutSlice};
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;
use crate::runtime::capture;
use std::ffi::{c_char, c_void};

/// A model running instance: a captured or built model.
pub type aclmdlRI = *mut c_void;
/// An updatable task group of a captured model.
pub type aclrtTaskGrp = *mut c_void;
/// A condition of a captured model.
pub type aclmdlRICondHandle = *mut c_void;

/// Which calls a capture forbids (`aclmdlRICaptureBegin`,
/// `aclmdlRICaptureThreadExchangeMode`).
pub type aclmdlRICaptureMode = i32;
/// Forbidden calls are refused on the capturing thread and on every thread in global mode.
pub const ACL_MODEL_RI_CAPTURE_MODE_GLOBAL: aclmdlRICaptureMode = 0;
/// Forbidden calls are refused on the capturing thread only.
pub const ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL: aclmdlRICaptureMode = 1;
/// Nothing is refused.
pub const ACL_MODEL_RI_CAPTURE_MODE_RELAXED: aclmdlRICaptureMode = 2;

/// A stream's capture status (`aclmdlRICaptureGetInfo`).
pub type aclmdlRICaptureStatus = i32;
/// The stream is not capturing.
pub const ACL_MODEL_RI_CAPTURE_STATUS_NONE: aclmdlRICaptureStatus = 0;
/// The stream is capturing.
pub const ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE: aclmdlRICaptureStatus = 1;
/// The capture failed; `aclmdlRICaptureEnd` says why.
pub const ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED: aclmdlRICaptureStatus = 2;

/// How a condition's value is set (`aclmdlRICondHandleCreate`).
pub type aclmdlRICondHandleFlag = i32;
/// To its default each time its model starts.
pub const ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT: aclmdlRICondHandleFlag = 1;

/// A conditional task's kind (`aclmdlRIAddCondTask`).
pub type aclmdlRICondTaskType = i32;
/// The first model when the condition is not 0, else the second (if any).
pub const ACL_MODEL_RI_COND_TYPE_IF: aclmdlRICondTaskType = 0;
/// The model, while the condition is not 0.
pub const ACL_MODEL_RI_COND_TYPE_WHILE: aclmdlRICondTaskType = 1;
/// The model the condition indexes (none when it is out of range).
pub const ACL_MODEL_RI_COND_TYPE_SWITCH: aclmdlRICondTaskType = 2;

/// How `aclrtSwitchStream` compares its values.
pub type aclrtCondition = i32;
/// `left == right`.
pub const ACL_RT_EQUAL: aclrtCondition = 0;
/// `left != right`.
pub const ACL_RT_NOT_EQUAL: aclrtCondition = 1;
/// `left > right`.
pub const ACL_RT_GREATER: aclrtCondition = 2;
/// `left >= right`.
pub const ACL_RT_GREATER_OR_EQUAL: aclrtCondition = 3;
/// `left < right`.
pub const ACL_RT_LESS: aclrtCondition = 4;
/// `left <= right`.
pub const ACL_RT_LESS_OR_EQUAL: aclrtCondition = 5;

/// The type of `aclrtSwitchStream`'s values.
pub type aclrtCompareDataType = i32;
/// 32-bit signed integers.
pub const ACL_RT_SWITCH_INT32: aclrtCompareDataType = 0;
/// 64-bit signed integers.
pub const ACL_RT_SWITCH_INT64: aclrtCompareDataType = 1;

/// `aclmdlRIBindStream`: the stream runs when the model starts.
pub const ACL_MODEL_STREAM_FLAG_HEAD: u32 = 0x0000_0000;
/// `aclmdlRIBindStream`: the stream runs when a task activates it.
pub const ACL_MODEL_STREAM_FLAG_DEFAULT: u32 = 0x7FFF_FFFF;

/// A conditional task (`aclmdlRIAddCondTask`): its condition, kind, and
/// `size` models, written to `modelRIArray`.
///
/// cbindgen:field-names=[handle, type, size, modelRIArray]
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclmdlRICondTaskParams {
    /// The condition.
    pub handle: aclmdlRICondHandle,
    /// `ACL_MODEL_RI_COND_TYPE_*`.
    pub type_: aclmdlRICondTaskType,
    /// How many models: 1 or 2 for IF, 1 for WHILE, 1 or more for SWITCH.
    pub size: u32,
    /// Receives the models' handles (`size` of them).
    pub modelRIArray: *mut aclmdlRI,
}

fn model(model: aclmdlRI) -> Result<usize> {
    args::address(model, "modelRI").map(|m| m.as_ptr() as usize)
}

/// Begins capturing `stream`'s work into a new model (`mode`: what the
/// capture forbids meanwhile). The default stream cannot be captured
/// (`ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC`); a stream already capturing:
/// `ACL_ERROR_RT_STREAM_CAPTURED`.
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRICaptureBegin(
    stream: aclrtStream,
    mode: aclmdlRICaptureMode,
) -> aclError {
    real_or_host!(aclmdlRICaptureBegin(stream: aclrtStream, mode: aclmdlRICaptureMode) {
        host().capture_begin(args::optional_stream(stream), mode)
    })
}

/// As `aclmdlRICaptureBegin`, into an empty model `aclmdlRIAddCondTask` made.
///
/// # Safety
/// None for the host runtime: the handles are looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRICaptureToModelRIBegin(
    stream: aclrtStream,
    modelRI: aclmdlRI,
    mode: aclmdlRICaptureMode,
) -> aclError {
    real_or_host!(aclmdlRICaptureToModelRIBegin(stream: aclrtStream, modelRI: aclmdlRI, mode: aclmdlRICaptureMode) {
        host().capture_to_model_begin(args::optional_stream(stream), model(modelRI)?, mode)
    })
}

/// The capture status of `stream` and the model it records into (NULL
/// when it is not capturing); `modelRI` may be NULL.
///
/// # Safety
/// `status` is NULL or writable; `modelRI` likewise.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRICaptureGetInfo(
    stream: aclrtStream,
    status: *mut aclmdlRICaptureStatus,
    modelRI: *mut aclmdlRI,
) -> aclError {
    real_or_host!(aclmdlRICaptureGetInfo(stream: aclrtStream, status: *mut aclmdlRICaptureStatus, modelRI: *mut aclmdlRI) {
        // SAFETY: the caller's contract.
        let status = unsafe { Out::required(status, "status") }?;
        // SAFETY: the caller's contract.
        let model_out = unsafe { Out::optional(modelRI) };
        let (now, m) = host().capture_info(args::optional_stream(stream))?;
        status.write(now);
        args::write_optional(model_out, m as aclmdlRI);
        Ok(())
    })
}

/// Ends the capture begun on `stream`: the model, ready to run. A capture
/// that failed (a forbidden call, a stream of it destroyed, a task group
/// left open) leaves nothing behind and fails with why.
///
/// # Safety
/// `modelRI` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRICaptureEnd(
    stream: aclrtStream,
    modelRI: *mut aclmdlRI,
) -> aclError {
    real_or_host!(aclmdlRICaptureEnd(stream: aclrtStream, modelRI: *mut aclmdlRI) {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(modelRI, "modelRI") }?;
        let m = host().capture_end(args::optional_stream(stream))?;
        out.write(m as aclmdlRI);
        Ok(())
    })
}

/// Sets this thread's capture mode to `*mode` and writes back the old one.
///
/// # Safety
/// `mode` is NULL or readable and writable.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRICaptureThreadExchangeMode(
    mode: *mut aclmdlRICaptureMode,
) -> aclError {
    real_or_host!(aclmdlRICaptureThreadExchangeMode(mode: *mut aclmdlRICaptureMode) {
        // SAFETY: the caller's contract.
        let wanted = *unsafe { args::input(mode, "mode") }?;
        let old = capture::exchange_thread_mode(wanted)?;
        // SAFETY: the caller's contract; checked non-NULL above.
        unsafe { Out::required(mode, "mode") }?.write(old);
        Ok(())
    })
}

/// Opens a task group on the capturing `stream`: the tasks captured until
/// `aclmdlRICaptureTaskGrpEnd` can be replaced later.
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRICaptureTaskGrpBegin(stream: aclrtStream) -> aclError {
    real_or_host!(aclmdlRICaptureTaskGrpBegin(stream: aclrtStream) {
        host().task_group_begin(args::optional_stream(stream))
    })
}

/// Closes the task group open on `stream`; its handle.
///
/// # Safety
/// `handle` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRICaptureTaskGrpEnd(
    stream: aclrtStream,
    handle: *mut aclrtTaskGrp,
) -> aclError {
    real_or_host!(aclmdlRICaptureTaskGrpEnd(stream: aclrtStream, handle: *mut aclrtTaskGrp) {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(handle, "handle") }?;
        let group = host().task_group_end(args::optional_stream(stream))?;
        out.write(group as aclrtTaskGrp);
        Ok(())
    })
}

/// The work queued on `stream` until `aclmdlRICaptureTaskUpdateEnd` is
/// recorded as the task group's new tasks.
///
/// # Safety
/// None for the host runtime: the handles are looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRICaptureTaskUpdateBegin(
    stream: aclrtStream,
    handle: aclrtTaskGrp,
) -> aclError {
    real_or_host!(aclmdlRICaptureTaskUpdateBegin(stream: aclrtStream, handle: aclrtTaskGrp) {
        let group = args::address(handle, "handle")?.as_ptr() as usize;
        host().task_update_begin(args::optional_stream(stream), group)
    })
}

/// Replays from now on run the group's new tasks; they must match the
/// old ones in number and kind (else `ACL_ERROR_RT_MODEL_UPDATE_FAILED`).
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRICaptureTaskUpdateEnd(stream: aclrtStream) -> aclError {
    real_or_host!(aclmdlRICaptureTaskUpdateEnd(stream: aclrtStream) {
        host().task_update_end(args::optional_stream(stream))
    })
}

/// Queues a replay of the model on `stream` (NULL: the default stream):
/// its tasks run in order; the workspaces its capture took serve again.
///
/// # Safety
/// None for the host runtime: the handles are looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIExecuteAsync(modelRI: aclmdlRI, stream: aclrtStream) -> aclError {
    real_or_host!(aclmdlRIExecuteAsync(modelRI: aclmdlRI, stream: aclrtStream) {
        host().execute_model(model(modelRI)?, args::optional_stream(stream))
    })
}

/// Runs the model and waits for it (`timeout` in ms; -1: no limit).
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIExecute(modelRI: aclmdlRI, timeout: i32) -> aclError {
    real_or_host!(aclmdlRIExecute(modelRI: aclmdlRI, timeout: i32) {
        host().execute_model_sync(model(modelRI)?, timeout)
    })
}

/// Destroys the model; the workspaces it holds go back to their
/// allocators once its queued replays have run.
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIDestroy(modelRI: aclmdlRI) -> aclError {
    real_or_host!(aclmdlRIDestroy(modelRI: aclmdlRI) {
        host().destroy_model(model(modelRI)?)
    })
}

/// Stops the model's queued and running replays at their next task.
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIAbort(modelRI: aclmdlRI) -> aclError {
    real_or_host!(aclmdlRIAbort(modelRI: aclmdlRI) {
        host().abort_model(model(modelRI)?)
    })
}

/// Writes the model's streams and tasks as JSON to the file `path`.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIDebugJsonPrint(
    modelRI: aclmdlRI,
    path: *const c_char,
    flags: u32,
) -> aclError {
    real_or_host!(aclmdlRIDebugJsonPrint(modelRI: aclmdlRI, path: *const c_char, flags: u32) {
        let _ = flags;
        // SAFETY: the caller's contract.
        let path = unsafe { args::c_str(path, "path") }?;
        let text = host().model_json(model(modelRI)?)?;
        std::fs::write(path, text).map_err(|_| Error::InvalidParam {
            param: "path",
            reason: "The file cannot be written",
        })
    })
}

/// Begins building a model from the work of the streams bound to it
/// (`flag`: 0).
///
/// # Safety
/// `modelRI` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIBuildBegin(modelRI: *mut aclmdlRI, flag: u32) -> aclError {
    real_or_host!(aclmdlRIBuildBegin(modelRI: *mut aclmdlRI, flag: u32) {
        // SAFETY: the caller's contract.
        unsafe { args::write_out(modelRI, "modelRI", || Ok(host().build_begin(flag)? as aclmdlRI)) }
    })
}

/// Binds `stream` to the model being built: its work becomes the model's
/// (`flag`: `ACL_MODEL_STREAM_FLAG_HEAD` or `ACL_MODEL_STREAM_FLAG_DEFAULT`).
///
/// # Safety
/// None for the host runtime: the handles are looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIBindStream(
    modelRI: aclmdlRI,
    stream: aclrtStream,
    flag: u32,
) -> aclError {
    real_or_host!(aclmdlRIBindStream(modelRI: aclmdlRI, stream: aclrtStream, flag: u32) {
        host().bind_stream(model(modelRI)?, args::optional_stream(stream), flag)
    })
}

/// The model's end task, on one of its bound streams.
///
/// # Safety
/// None for the host runtime: the handles are looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIEndTask(modelRI: aclmdlRI, stream: aclrtStream) -> aclError {
    real_or_host!(aclmdlRIEndTask(modelRI: aclmdlRI, stream: aclrtStream) {
        host().end_task(model(modelRI)?, args::optional_stream(stream))
    })
}

/// Ends the build: the model is ready, its streams run their own work again.
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIBuildEnd(modelRI: aclmdlRI, reserve: *mut c_void) -> aclError {
    real_or_host!(aclmdlRIBuildEnd(modelRI: aclmdlRI, reserve: *mut c_void) {
        let _ = reserve;
        host().build_end(model(modelRI)?)
    })
}

/// Unbinds `stream` from the model (the tasks it gave stay the model's).
///
/// # Safety
/// None for the host runtime: the handles are looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIUnbindStream(modelRI: aclmdlRI, stream: aclrtStream) -> aclError {
    real_or_host!(aclmdlRIUnbindStream(modelRI: aclmdlRI, stream: aclrtStream) {
        host().unbind_stream(model(modelRI)?, args::optional_stream(stream))
    })
}

/// A condition of the model: a 64-bit value in device memory, set to
/// `defaultLaunchValue` each time the model starts (`flag`:
/// `ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT`).
///
/// # Safety
/// `handle` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRICondHandleCreate(
    modelRI: aclmdlRI,
    defaultLaunchValue: u32,
    flag: aclmdlRICondHandleFlag,
    handle: *mut aclmdlRICondHandle,
) -> aclError {
    real_or_host!(aclmdlRICondHandleCreate(modelRI: aclmdlRI, defaultLaunchValue: u32, flag: aclmdlRICondHandleFlag, handle: *mut aclmdlRICondHandle) {
        // SAFETY: the caller's contract.
        unsafe {
            args::write_out(handle, "handle", || {
                let m = model(modelRI)?;
                Ok(host().condition_create(m, defaultLaunchValue, flag)? as aclmdlRICondHandle)
            })
        }
    })
}

/// Where the condition's value lives (device memory the program sets
/// with copies and kernels).
///
/// # Safety
/// `ptr` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRICondHandleGetCondPtr(
    handle: aclmdlRICondHandle,
    ptr: *mut *mut u64,
) -> aclError {
    real_or_host!(aclmdlRICondHandleGetCondPtr(handle: aclmdlRICondHandle, ptr: *mut *mut u64) {
        // SAFETY: the caller's contract.
        unsafe {
            args::write_out(ptr, "ptr", || {
                let h = args::address(handle, "handle")?.as_ptr() as usize;
                host().condition_ptr(h)
            })
        }
    })
}

/// On the capturing `stream`, a conditional task over `params.size` new
/// empty models, whose handles go to `params.modelRIArray`; each is then
/// captured with `aclmdlRICaptureToModelRIBegin` (`flags`: 0).
///
/// # Safety
/// `params.modelRIArray` is NULL or writable for `params.size` handles.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIAddCondTask(
    params: aclmdlRICondTaskParams,
    stream: aclrtStream,
    flags: u32,
) -> aclError {
    real_or_host!(aclmdlRIAddCondTask(params: aclmdlRICondTaskParams, stream: aclrtStream, flags: u32) {
        // SAFETY: the caller's contract.
        let out = unsafe { OutSlice::new(params.modelRIArray, params.size as usize, "modelRIArray") }?;
        if params.modelRIArray.is_null() {
            return Err(Error::NullPointer { param: "modelRIArray" });
        }
        let cond = args::address(params.handle, "handle")?.as_ptr() as usize;
        let models = host().add_condition_task(
            cond,
            params.type_,
            params.size,
            args::optional_stream(stream),
            flags,
        )?;
        out.fill(models.into_iter().map(|m| m as aclmdlRI));
        Ok(())
    })
}

/// On a stream bound to a model being built, a task that runs the tasks
/// of `activeStream` (bound to the same model).
///
/// # Safety
/// None for the host runtime: the handles are looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtActiveStream(
    activeStream: aclrtStream,
    stream: aclrtStream,
) -> aclError {
    real_or_host!(aclrtActiveStream(activeStream: aclrtStream, stream: aclrtStream) {
        host().active_stream(args::optional_stream(activeStream), args::optional_stream(stream))
    })
}

/// On a stream bound to a model being built, a task that runs the tasks of
/// `trueStream` when `*leftValue cond *rightValue` (device memory, of
/// `dataType`), else those of `falseStream` if not NULL.
///
/// # Safety
/// None for the host runtime: the values are checked as live device memory.
#[no_mangle]
pub unsafe extern "C" fn aclrtSwitchStream(
    leftValue: *mut c_void,
    cond: aclrtCondition,
    rightValue: *mut c_void,
    dataType: aclrtCompareDataType,
    trueStream: aclrtStream,
    falseStream: aclrtStream,
    stream: aclrtStream,
) -> aclError {
    real_or_host!(aclrtSwitchStream(leftValue: *mut c_void, cond: aclrtCondition, rightValue: *mut c_void, dataType: aclrtCompareDataType, trueStream: aclrtStream, falseStream: aclrtStream, stream: aclrtStream) {
        let left = args::address(leftValue, "leftValue")?;
        let right = args::address(rightValue, "rightValue")?;
        let on_true = args::stream(trueStream)?;
        host().switch_stream(
            left.as_ptr(),
            cond,
            right.as_ptr(),
            dataType,
            Some(on_true),
            args::optional_stream(falseStream),
            args::optional_stream(stream),
        )
    })
}

/// Names the model (`aclmdlRIGetName` gives it back).
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRISetName(modelRI: aclmdlRI, name: *const c_char) -> aclError {
    real_or_host!(aclmdlRISetName(modelRI: aclmdlRI, name: *const c_char) {
        // SAFETY: the caller's contract.
        let name = unsafe { args::c_str(name, "name") }?;
        host().set_model_name(model(modelRI)?, name)
    })
}

/// The model's name (empty when none was set), as much of it as fits in
/// `maxLen` bytes with its NUL.
///
/// # Safety
/// `name` is NULL or writable for `maxLen` bytes.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIGetName(
    modelRI: aclmdlRI,
    maxLen: u32,
    name: *mut c_char,
) -> aclError {
    real_or_host!(aclmdlRIGetName(modelRI: aclmdlRI, maxLen: u32, name: *mut c_char) {
        if name.is_null() {
            return Err(Error::NullPointer { param: "name" });
        }
        // SAFETY: the caller's contract.
        let out = unsafe { OutSlice::new(name, maxLen as usize, "name") }?;
        let text = host().model_name(model(modelRI)?)?;
        args::write_text(out, &text);
        Ok(())
    })
}

/// The model's id, unique in the process.
///
/// # Safety
/// `modelRIId` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIGetId(modelRI: aclmdlRI, modelRIId: *mut u32) -> aclError {
    real_or_host!(aclmdlRIGetId(modelRI: aclmdlRI, modelRIId: *mut u32) {
        // SAFETY: the caller's contract.
        unsafe { args::write_out(modelRIId, "modelRIId", || host().model_id(model(modelRI)?)) }
    })
}

/// The streams whose work the model holds: with `streams` NULL, their
/// number in `*numStreams`; else up to `*numStreams` of them, and their
/// number (`ACL_ERROR_RT_INSUFFICIENT_INPUT_ARRAY` when the array is too
/// small, with nothing written).
///
/// # Safety
/// `numStreams` is NULL or readable and writable; `streams` is NULL or
/// writable for `*numStreams` handles.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIGetStreams(
    modelRI: aclmdlRI,
    streams: *mut aclrtStream,
    numStreams: *mut u32,
) -> aclError {
    real_or_host!(aclmdlRIGetStreams(modelRI: aclmdlRI, streams: *mut aclrtStream, numStreams: *mut u32) {
        // SAFETY: the caller's contract.
        let capacity = *unsafe { args::input(numStreams, "numStreams") }?;
        let all = host().model_streams(model(modelRI)?)?;
        let count = u32::try_from(all.len()).unwrap_or(u32::MAX);
        if !streams.is_null() {
            if (capacity as usize) < all.len() {
                return Err(Error::Capture {
                    code: crate::base::error::ACL_ERROR_RT_INSUFFICIENT_INPUT_ARRAY,
                    reason: "The streams array is smaller than the model's number of streams (call with streams NULL for it)",
                });
            }
            // SAFETY: the caller's contract: `capacity` handles.
            let out = unsafe { OutSlice::new(streams, capacity as usize, "streams") }?;
            out.fill(all.into_iter().map(|s| s as aclrtStream));
        }
        // SAFETY: the caller's contract; checked non-NULL above.
        unsafe { Out::required(numStreams, "numStreams") }?.write(count);
        Ok(())
    })
}

/// `func(userData)` when the model is destroyed (registering `func` again
/// replaces its data).
///
/// # Safety
/// `func` may be called with `userData` by the thread that destroys the model.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIDestroyRegisterCallback(
    modelRI: aclmdlRI,
    func: aclrtCallback,
    userData: *mut c_void,
) -> aclError {
    real_or_host!(aclmdlRIDestroyRegisterCallback(modelRI: aclmdlRI, func: aclrtCallback, userData: *mut c_void) {
        let f = args::required(func, "func")?;
        host().on_model_destroy(model(modelRI)?, f, userData as usize)
    })
}

/// Takes back a callback `aclmdlRIDestroyRegisterCallback` registered.
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclmdlRIDestroyUnregisterCallback(
    modelRI: aclmdlRI,
    func: aclrtCallback,
) -> aclError {
    real_or_host!(aclmdlRIDestroyUnregisterCallback(modelRI: aclmdlRI, func: aclrtCallback) {
        let f = args::required(func, "func")?;
        host().forget_model_destroy(model(modelRI)?, f)
    })
}
