//! A kernel that does nothing, for launches that exercise only the allocator.
#![allow(non_snake_case)]

use super::boundary::boundary;
use std::ffi::c_void;

/// An `aclallocKernelFunc` that does nothing: pass it to `aclallocLaunchKernel`
/// when a launch is only there to take and give back a workspace. Bindings
/// use it for launches without a kernel of their own (the Python package's
/// `launch_kernel(stream, size)`), so the stream's worker never calls back
/// into the binding's interpreter.
///
/// # Safety
/// Any arguments; none is read.
#[no_mangle]
pub unsafe extern "C" fn aclallocEmptyKernel(
    workspace: *mut c_void,
    size: usize,
    userData: *mut c_void,
) {
    // Through the boundary like every export, though nothing here can fail.
    boundary("aclallocEmptyKernel", || {
        let _ = (workspace, size, userData);
        Ok(())
    })
}
