//! Error codes with CANN's values, and the error type of the safe Rust API.
//!
//! An [`Error`] is `Copy` and owns no heap memory, so a failure can be recorded
//! for `aclGetRecentErrMsg` without allocating: the text is only formatted when
//! somebody reads it. That keeps the failure path cheap for callers that probe
//! streams which have no allocator on every operator launch.

use std::os::raw::c_int;

/// The ACL error code type (`int` in CANN's `acl_base.h`).
#[allow(non_camel_case_types)]
pub type aclError = c_int;

/// The call succeeded.
pub const ACL_SUCCESS: aclError = 0;
/// A parameter is NULL, out of range, or not a live handle.
pub const ACL_ERROR_INVALID_PARAM: aclError = 100000;
/// Host memory for the library's own bookkeeping could not be allocated.
pub const ACL_ERROR_BAD_ALLOC: aclError = 200000;
/// A bug or an unexpected state inside the library (for example a caught panic).
pub const ACL_ERROR_INTERNAL_ERROR: aclError = 500000;
/// A generic failure.
pub const ACL_ERROR_FAILURE: aclError = 500001;

/// Why a call failed. [`Error::code`] gives the ACL error code; `Display`
/// gives the reason in CANN's wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A required pointer parameter (or descriptor field) was NULL.
    #[error("{param} cannot be a NULL pointer")]
    NullPointer {
        /// The parameter's name as CANN's header spells it.
        param: &'static str,
    },
    /// A parameter was not NULL but is not acceptable.
    #[error("Parameter {param} is invalid. Reason: {reason}")]
    InvalidParam {
        /// The parameter's name as CANN's header spells it.
        param: &'static str,
        /// Why it was refused.
        reason: &'static str,
    },
    /// `aclrtAllocatorGetByStream` on a stream that has no allocator.
    #[error(
        "Parameter stream is invalid. Reason: The stream is not registered with any allocator"
    )]
    StreamNotRegistered,
    /// The library could not allocate memory for its own bookkeeping.
    #[error("Out of host memory: {what}")]
    BadAlloc {
        /// What could not be allocated.
        what: &'static str,
    },
    /// An operation could not be carried out (for example a report file
    /// could not be written).
    #[error("{reason}")]
    Failure {
        /// What failed.
        reason: &'static str,
    },
    /// A bug or an unexpected state inside the library.
    #[error("Internal error. Reason: {reason}")]
    Internal {
        /// What went wrong.
        reason: &'static str,
    },
}

impl Error {
    /// The ACL error code a C caller receives for this error.
    pub const fn code(&self) -> aclError {
        match self {
            Error::NullPointer { .. } | Error::InvalidParam { .. } | Error::StreamNotRegistered => {
                ACL_ERROR_INVALID_PARAM
            }
            Error::BadAlloc { .. } => ACL_ERROR_BAD_ALLOC,
            Error::Internal { .. } => ACL_ERROR_INTERNAL_ERROR,
            Error::Failure { .. } => ACL_ERROR_FAILURE,
        }
    }

    /// The words between the function's name and the reason, so that the full
    /// message reads as CANN's do: "`F` failed because `x` cannot be a NULL
    /// pointer." or "`F` failed. Parameter ...".
    pub(crate) const fn connective(&self) -> &'static str {
        match self {
            Error::NullPointer { .. } => " failed because ",
            _ => " failed. ",
        }
    }
}

/// The result type of the safe Rust API.
pub type Result<T, E = Error> = std::result::Result<T, E>;
