//! The one panic boundary: every export, and every callback this library
//! hands to C (allocator callbacks of the default allocator and of pluggable
//! allocators), runs its body through [`boundary`]. It lives in the bottom
//! layer so that a callback defined in any layer uses this one.

use crate::core::errlog;
use crate::core::error::{aclError, Error, ACL_SUCCESS};
use std::ffi::c_char;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// How an export's C return value encodes success and failure.
pub(crate) trait FfiReturn {
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

/// Count-returning functions: the count, or `u64::MAX` when the count could
/// not be taken.
impl FfiReturn for u64 {
    type Ok = u64;
    fn success(value: u64) -> Self {
        value
    }
    fn failure(_: aclError) -> Self {
        u64::MAX
    }
}

/// Handle-returning functions: the handle, or NULL.
impl FfiReturn for *mut c_void {
    type Ok = *mut c_void;
    fn success(value: *mut c_void) -> Self {
        value
    }
    fn failure(_: aclError) -> Self {
        std::ptr::null_mut()
    }
}

/// String-returning functions: the string, or NULL.
impl FfiReturn for *const c_char {
    type Ok = *const c_char;
    fn success(value: *const c_char) -> Self {
        value
    }
    fn failure(_: aclError) -> Self {
        std::ptr::null()
    }
}

/// Runs an export's body: a failure is recorded under `function` for
/// `aclGetRecentErrMsg` and returned as its code; a panic is caught and
/// reported as `ACL_ERROR_INTERNAL_ERROR`.
///
/// Why `catch_unwind` and not `panic = "abort"`: this library lives inside
/// long-running inference services, and a bug in a diagnostic path of ours
/// should fail one call, not take the service down. Unwinding out of an
/// `extern "C"` function would abort anyway, so catching here is what turns a
/// panic into an error code.
///
/// The body's error is turned into the C value inside the unwind guard, so
/// that only that value (a word) crosses `catch_unwind`, whose result goes
/// through memory: an `Error` there cost every successful call of a
/// pluggable allocator's callbacks a dozen stores and loads (1 to 2 ns per
/// alloc+free pair, docs/BENCHMARKS.md). A panic while recording the
/// error is caught too, and reported as an internal error.
#[inline]
pub(crate) fn boundary<R: FfiReturn>(
    function: &'static str,
    body: impl FnOnce() -> Result<R::Ok, Error>,
) -> R {
    let guarded = move || match body() {
        Ok(value) => R::success(value),
        Err(error) => fail(function, error),
    };
    match catch_unwind(AssertUnwindSafe(guarded)) {
        Ok(value) => value,
        Err(_) => fail(
            function,
            Error::Internal {
                reason: "a panic inside aclalloc was caught at the C boundary (details on stderr)",
            },
        ),
    }
}

/// Runs a forwarding body whose result comes from a real runtime and is
/// passed through as it is (codes and messages are the runtime's). Only a
/// panic in this library's own bookkeeping is turned into
/// `ACL_ERROR_INTERNAL_ERROR`.
#[inline]
pub(crate) fn passthrough<R: FfiReturn>(function: &'static str, body: impl FnOnce() -> R) -> R {
    let recorded = errlog::recorded_count();
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(value) => {
            if value.is_failure() && errlog::recorded_count() == recorded {
                // The real runtime failed and left its own message: it is
                // the most recent failure, so aclGetRecentErrMsg must give
                // it, not an older unread message of this library's.
                errlog::discard_unread();
            }
            value
        }
        Err(_) => fail(
            function,
            Error::Internal {
                reason: "a panic inside aclalloc was caught at the C boundary (details on stderr)",
            },
        ),
    }
}

/// Records `error` for `aclGetRecentErrMsg` under `function` and returns
/// the C failure value for its code (out of line: the error path).
#[cold]
#[inline(never)]
fn fail<R: FfiReturn>(function: &'static str, error: Error) -> R {
    errlog::record(function, error);
    R::failure(error.code())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::error::ACL_ERROR_INTERNAL_ERROR;

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
