//! The one panic boundary: every export, and every callback this library
//! hands to C (allocator callbacks of the default allocator and of pluggable
//! allocators), runs its body through [`boundary`]. It lives in the bottom
//! layer so that a callback defined in any layer uses this one.

use crate::base::errlog;
use crate::base::error::{aclError, Error, ACL_SUCCESS};
use crate::base::foreign_call;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// How an export's C return value encodes success and failure.
pub trait FfiReturn {
    /// What the body produces on success.
    type Ok;
    fn success(value: Self::Ok) -> Self;
    fn failure(code: aclError) -> Self;
    /// True for a value that reports a failure (an error code).
    fn is_failure(&self) -> bool {
        false
    }
}

/// `aclError` functions: `ACL_SUCCESS` or the error's code.
impl FfiReturn for aclError {
    type Ok = ();
    fn success(_: ()) -> Self {
        ACL_SUCCESS
    }
    fn failure(code: aclError) -> Self {
        code
    }
    fn is_failure(&self) -> bool {
        *self != ACL_SUCCESS
    }
}

/// `void` functions (the free callback): the failure is only recorded.
impl FfiReturn for () {
    type Ok = ();
    fn success(_: ()) -> Self {}
    fn failure(_: aclError) -> Self {}
}

/// Functions returning a value: the value, or a failure value (a count:
/// `u64::MAX`; an id: `u32::MAX`; a handle or a string: NULL).
macro_rules! value_returns {
    ($($ty:ty => $failure:expr),*) => {$(
        impl FfiReturn for $ty {
            type Ok = $ty;
            fn success(value: $ty) -> Self {
                value
            }
            fn failure(_: aclError) -> Self {
                $failure
            }
        }
    )*};
}
value_returns!(u64 => u64::MAX, u32 => u32::MAX);

/// `size_t` results (a data buffer's size): 0 on failure, as CANN's.
impl FfiReturn for usize {
    type Ok = usize;
    fn success(value: usize) -> Self {
        value
    }
    fn failure(_: aclError) -> Self {
        0
    }
}

/// A pointer result: NULL on failure.
impl<T> FfiReturn for *mut T {
    type Ok = *mut T;
    fn success(value: *mut T) -> Self {
        value
    }
    fn failure(_: aclError) -> Self {
        std::ptr::null_mut()
    }
}

/// A pointer result: NULL on failure.
impl<T> FfiReturn for *const T {
    type Ok = *const T;
    fn success(value: *const T) -> Self {
        value
    }
    fn failure(_: aclError) -> Self {
        std::ptr::null()
    }
}

/// What a panic caught at the boundary is reported as.
const PANIC: Error = Error::Internal {
    reason: "a panic inside aclalloc was caught at the C boundary (details on stderr)",
};

/// Runs an export's body: a failure is recorded under `function` for
/// `aclGetRecentErrMsg` and returned as its code; a panic is caught and
/// reported as `ACL_ERROR_INTERNAL_ERROR` (a bug in a diagnostic path should
/// fail one call, not the service). The error becomes its C value inside
/// `catch_unwind`, so only a word crosses it.
///
/// When a callback was left by a forced unwind (`foreign_call`), the unwind
/// goes on from here once the body has returned and released everything
/// (inside `catch_unwind` it would abort). `extern "C"`, so that an export
/// calling it out of line has no landing pad for it; the resuming call is
/// through an opaque pointer, so that the unwind tables cover it as a call
/// that may unwind with nothing to clean up (a direct call of a function
/// known not to unwind is left out of them, and the unwinder would stop
/// there). tests/foreign_unwinds.rs fails if either stops holding.
#[allow(improper_ctypes_definitions)]
#[inline]
pub extern "C" fn boundary<R: FfiReturn>(
    function: &'static str,
    body: impl FnOnce() -> Result<R::Ok, Error>,
) -> R {
    let guarded = move || match body() {
        Ok(value) => R::success(value),
        Err(error) => fail(function, error),
    };
    let value = match catch_unwind(AssertUnwindSafe(guarded)) {
        Ok(value) => value,
        Err(_) => fail(function, PANIC),
    };
    if foreign_call::any_unwind_paused() {
        let resume: extern "C" fn() = std::hint::black_box(foreign_call::resume_if_paused);
        resume();
    }
    value
}

/// Runs a forwarding body whose result, from a real runtime, is passed
/// through; only a panic of this library's becomes `ACL_ERROR_INTERNAL_ERROR`.
#[inline]
pub fn passthrough<R: FfiReturn>(function: &'static str, body: impl FnOnce() -> R) -> R {
    let recorded = errlog::recorded_count();
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(value) => {
            if value.is_failure() && errlog::recorded_count() == recorded {
                // The runtime's own message is the newest: drop older ones.
                errlog::discard_unread();
            }
            value
        }
        Err(_) => fail(function, PANIC),
    }
}

/// Records `error` for `aclGetRecentErrMsg` under `function` and returns
/// the C failure value for its code (out of line: the error path).
#[cold]
#[inline(never)]
fn fail<R: FfiReturn>(function: &'static str, error: Error) -> R {
    errlog::record(function_name(function), error);
    R::failure(error.code())
}

/// The export's name from the path [`ffi_boundary!`] passes
/// (`crate::ffi::ext::tracking::aclallocTrackingSetEnabled::here`): its
/// last segment but the marker function and closures. A plain name is
/// returned as it is. Run on failure only, never on the way of a success.
pub(crate) fn function_name(path: &'static str) -> &'static str {
    path.rsplit("::")
        .find(|segment| *segment != "here" && !segment.starts_with('{'))
        .unwrap_or(path)
}

/// [`boundary`] named after the function it is written in (the export):
/// the name is written once, in the signature. The path of a marker
/// function is a constant; [`function_name`] reads the name from it only
/// when a failure is recorded.
#[doc(hidden)]
#[macro_export]
macro_rules! ffi_boundary {
    ($body:expr) => {{
        fn here() {}
        $crate::base::boundary::boundary(std::any::type_name_of_val(&here), $body)
    }};
}
pub use ffi_boundary;

/// [`passthrough`] named after the function it is written in, as [`ffi_boundary!`].
#[doc(hidden)]
#[macro_export]
macro_rules! ffi_passthrough {
    ($body:expr) => {{
        fn here() {}
        $crate::base::boundary::passthrough(std::any::type_name_of_val(&here), $body)
    }};
}
pub use ffi_passthrough;

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(non_snake_case)]
    fn aclallocNamedExport() -> aclError {
        ffi_boundary!(|| Err(Error::NullPointer { param: "out" }))
    }

    #[test]
    fn the_macro_names_the_function_it_is_written_in() {
        let _ = errlog::take_recent();
        assert_eq!(
            aclallocNamedExport(),
            Error::NullPointer { param: "out" }.code()
        );
        let message = errlog::take_recent().unwrap();
        assert!(message.contains("aclallocNamedExport"), "{message}");
        assert!(
            !message.contains("::") && !message.contains("here"),
            "{message}"
        );
        assert_eq!(function_name("aclrtFoo"), "aclrtFoo");
        assert_eq!(
            function_name("a::b::aclrtFoo::{{closure}}::here"),
            "aclrtFoo"
        );
    }
    use crate::base::error::ACL_ERROR_INTERNAL_ERROR;
    use std::ffi::c_void;

    #[test]
    fn success_errors_and_panics_come_out_as_their_c_values_with_a_message() {
        let _ = errlog::take_recent();
        let ok: *mut c_void = boundary("test_ok", || Ok(0x40 as *mut c_void));
        assert_eq!(ok as usize, 0x40);
        assert_eq!(errlog::take_recent(), None, "a success records nothing");

        let error = Error::NullPointer { param: "devPtr" };
        let code: aclError = boundary("test_error", || Err(error));
        assert_eq!(code, error.code());
        let message = errlog::take_recent().unwrap();
        assert!(
            message.contains("test_error") && message.contains("devPtr"),
            "{message}"
        );

        let null: *mut c_void = boundary("test_null", || Err(error));
        assert!(null.is_null());

        let code: aclError = boundary("test_panic", || -> Result<(), Error> {
            panic!("a bug in a diagnostic path (expected by this test)")
        });
        assert_eq!(code, ACL_ERROR_INTERNAL_ERROR);
        let message = errlog::take_recent().unwrap();
        assert!(
            message.contains("test_panic") && message.contains("panic"),
            "{message}"
        );
    }
}
