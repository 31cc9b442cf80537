//! A kernel that does nothing, for launches that exercise only the allocator.
#![allow(non_snake_case)]

use crate::base::boundary::ffi_boundary;
use std::ffi::c_void;

/// An `aclallocKernelFunc` that does nothing, for launches that only take and
/// give back a workspace (bindings use it so the stream's worker never calls
/// back into their interpreter).
///
/// # Safety
/// Any arguments; none is read.
#[no_mangle]
pub unsafe extern "C" fn aclallocEmptyKernel(
    workspace: *mut c_void,
    size: usize,
    userData: *mut c_void,
) {
    ffi_boundary!(|| {
        let _ = (workspace, size, userData);
        Ok(())
    })
}
