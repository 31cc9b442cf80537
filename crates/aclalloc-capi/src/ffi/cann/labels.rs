//! CANN's labels (`acl_rt.h`, label management): places in the tasks of a
//! model being built, and switches among them by an index in device memory
//! (see `crate::runtime::labels`).
#![allow(non_snake_case, non_camel_case_types)]

use crate::base::error::{Error, Result};
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args;
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;
use crate::runtime::labels::MAX_LABELS;
use std::ffi::c_void;

/// A label: a place in the tasks of a stream bound to a model being built.
pub type aclrtLabel = *mut c_void;
/// An ordered list of labels to switch among.
pub type aclrtLabelList = *mut c_void;

fn label(label: aclrtLabel) -> Result<usize> {
    args::address(label, "label").map(|l| l.as_ptr() as usize)
}

fn label_list(list: aclrtLabelList) -> Result<usize> {
    args::address(list, "labelList").map(|l| l.as_ptr() as usize)
}

/// Creates a label in the current context (at most 65535 per process).
///
/// # Safety
/// `label` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateLabel(label: *mut aclrtLabel) -> aclError {
    real_or_host!(aclrtCreateLabel(label: *mut aclrtLabel) {
        // SAFETY: the caller's contract.
        unsafe { args::write_out(label, "label", || Ok(host().create_label()? as aclrtLabel)) }
    })
}

/// Sets the label on `stream` (bound to a model being built with
/// `aclmdlRIBindStream`): a switch to it carries on with the tasks queued
/// on `stream` after this call. A label is set once.
///
/// # Safety
/// None for the host runtime: the handles are looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtSetLabel(label: aclrtLabel, stream: aclrtStream) -> aclError {
    real_or_host!(aclrtSetLabel(label: aclrtLabel, stream: aclrtStream) {
        let l = self::label(label)?;
        host().set_label(l, Some(args::stream(stream)?))
    })
}

/// Destroys the label (a model that uses it keeps it).
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtDestroyLabel(label: aclrtLabel) -> aclError {
    real_or_host!(aclrtDestroyLabel(label: aclrtLabel) {
        host().destroy_label(self::label(label)?)
    })
}

/// A list of the `num` labels of `labels` (1 to 65535), in order.
///
/// # Safety
/// `labels` is NULL or readable for `num` labels; `labelList` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtCreateLabelList(
    labels: *mut aclrtLabel,
    num: usize,
    labelList: *mut aclrtLabelList,
) -> aclError {
    real_or_host!(aclrtCreateLabelList(labels: *mut aclrtLabel, num: usize, labelList: *mut aclrtLabelList) {
        if labelList.is_null() {
            return Err(Error::NullPointer { param: "labelList" });
        }
        // The count is checked before the array is read.
        if num == 0 || num > MAX_LABELS {
            return Err(Error::InvalidParam { param: "num", reason: "It must be in (0, 65535]" });
        }
        // SAFETY: the caller's contract.
        let handles = unsafe { args::input_array(labels.cast_const(), num, "labels") }?;
        let handles: Vec<usize> = handles.into_iter().map(|l| l as usize).collect();
        // SAFETY: the caller's contract.
        unsafe {
            args::write_out(labelList, "labelList", || {
                Ok(host().create_label_list(&handles)? as aclrtLabelList)
            })
        }
    })
}

/// Destroys the list (a switch that uses it keeps it).
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtDestroyLabelList(labelList: aclrtLabelList) -> aclError {
    real_or_host!(aclrtDestroyLabelList(labelList: aclrtLabelList) {
        host().destroy_label_list(label_list(labelList)?)
    })
}

/// On `stream` (bound to a model being built), a task that reads the
/// `uint32_t` index at `ptr` (device memory) when it runs and carries on
/// after that label of `labelList` (its last when the index is past
/// `maxValue - 1`); the switching stream's later tasks do not run.
///
/// # Safety
/// None for the host runtime: `ptr` is checked as live device memory.
#[no_mangle]
pub unsafe extern "C" fn aclrtSwitchLabelByIndex(
    ptr: *mut c_void,
    maxValue: u32,
    labelList: aclrtLabelList,
    stream: aclrtStream,
) -> aclError {
    real_or_host!(aclrtSwitchLabelByIndex(ptr: *mut c_void, maxValue: u32, labelList: aclrtLabelList, stream: aclrtStream) {
        let index = args::address(ptr, "ptr")?;
        let list = label_list(labelList)?;
        host().switch_label_by_index(index.as_ptr(), maxValue, list, Some(args::stream(stream)?))
    })
}
