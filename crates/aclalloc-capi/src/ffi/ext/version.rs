//! aclalloc's own version at run time, beside CANN's (`aclsysGetVersionStr`
//! reports the CANN whose headers this library implements).
#![allow(non_snake_case)]

use crate::base::boundary::ffi_boundary;
use crate::base::types::aclError;
use crate::ffi::wiring::args::Out;

/// The version of the loaded `libaclalloc.so` (the header's
/// `ACLALLOC_VERSION_*` macros are the version a program was built
/// against). Each out-parameter is required; nothing is written on failure.
///
/// # Safety
/// Each pointer is NULL or valid for a write of `int32_t`.
#[no_mangle]
pub unsafe extern "C" fn aclallocGetVersion(
    major: *mut i32,
    minor: *mut i32,
    patch: *mut i32,
) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract, for each out-parameter.
        let (major, minor, patch) = unsafe {
            (
                Out::required(major, "major")?,
                Out::required(minor, "minor")?,
                Out::required(patch, "patch")?,
            )
        };
        let part = |s: &str| s.parse::<i32>().unwrap_or(0);
        major.write(part(env!("CARGO_PKG_VERSION_MAJOR")));
        minor.write(part(env!("CARGO_PKG_VERSION_MINOR")));
        patch.write(part(env!("CARGO_PKG_VERSION_PATCH")));
        Ok(())
    })
}
