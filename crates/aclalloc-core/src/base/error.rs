//! Error codes with CANN's values, and the error type of the safe Rust API.
//!
//! An [`Error`] is `Copy` and owns no heap memory, so recording a failure for
//! `aclGetRecentErrMsg` never allocates: the text is formatted when read.

use super::env::ConfigError;
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

// The host runtime's codes (CANN's `acl_base.h` and `rt_error_codes.h`).

/// `aclInit` was called again before `aclFinalize`.
pub const ACL_ERROR_REPEAT_INITIALIZE: aclError = 100002;
/// The configuration file given to `aclInit` cannot be read.
pub const ACL_ERROR_INVALID_FILE: aclError = 100003;
/// `aclFinalize` without a matching `aclInit`.
pub const ACL_ERROR_REPEAT_FINALIZE: aclError = 100037;
/// A device id is out of range.
pub const ACL_ERROR_RT_INVALID_DEVICEID: aclError = 107001;
/// The calling thread has no current context (no `aclrtSetDevice` or `aclrtSetCurrentContext` yet).
pub const ACL_ERROR_RT_CONTEXT_NULL: aclError = 107002;

// Pluggable and default allocators.

/// Something is used before it was initialized (here: the default
/// allocator, which is built at its first allocation).
pub const ACL_ERROR_UNINITIALIZE: aclError = 100001;
/// A file lacks something it must provide (here: a symbol of an allocator's shared object).
pub const ACL_ERROR_FILE_MISSING_ATTR: aclError = 100007;
/// Resources that depend on the object are still alive.
pub const ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED: aclError = 148051;
/// The operation is not supported (here: a hook the allocator does not offer).
pub const ACL_ERROR_API_NOT_SUPPORT: aclError = 200001;
/// Device memory is exhausted, or an allocator returned no memory.
pub const ACL_ERROR_RT_MEMORY_ALLOCATION: aclError = 207001;
/// An event whose recorded work has not run (or that was never recorded).
pub const ACL_ERROR_RT_EVENT_NOT_COMPLETE: aclError = 507006;
/// A wait for a stream's work ran out of time.
pub const ACL_ERROR_RT_STREAM_SYNC_TIMEOUT: aclError = 507046;
/// A wait for an event ran out of time.
pub const ACL_ERROR_RT_EVENT_SYNC_TIMEOUT: aclError = 507047;
/// `aclrtProcessReport` found no callback to run in time.
pub const ACL_ERROR_RT_REPORT_TIMEOUT: aclError = 507012;
/// The calling process may not use what it asked for (a pid whitelist).
pub const ACL_ERROR_RT_NO_PERMISSION: aclError = 207006;
/// A task stopped by `aclrtStreamStop`, or a copy, set or wait killed by
/// `aclrtStreamAbort` (as the device reports them).
pub const ACL_ERROR_RT_INTERNAL_ERROR: aclError = 507000;
/// A replayed task that would touch device memory freed or unmapped since
/// it was recorded (the device reports a memory error for such a task).
pub const ACL_ERROR_RT_DEVICE_MEM_ERROR: aclError = 507053;
/// A kernel killed by `aclrtStreamAbort` (as the device reports an AI Core
/// kernel it kills).
pub const ACL_ERROR_RT_VECTOR_CORE_EXCEPTION: aclError = 507035;
/// A synchronize overtaken by `aclrtStreamAbort`.
pub const ACL_ERROR_RT_STREAM_ABORT: aclError = 107023;
/// A stream's capture failed: a stream that joined it was destroyed, or
/// an event tied it to work outside the capture.
pub const ACL_ERROR_RT_CAPTURE_DEPENDENCY: aclError = 107024;
/// A stream that joined a capture was not joined back to the stream that began it.
pub const ACL_ERROR_RT_STREAM_UNJOINED: aclError = 107025;
/// The model is being captured (or built), and cannot be used as asked.
pub const ACL_ERROR_RT_MODEL_CAPTURED: aclError = 107026;
/// The stream is already capturing.
pub const ACL_ERROR_RT_STREAM_CAPTURED: aclError = 107027;
/// The stream is not capturing.
pub const ACL_ERROR_RT_STREAM_NOT_CAPTURED: aclError = 107029;
/// The stream is capturing, and the call cannot be captured.
pub const ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT: aclError = 107030;
/// A task group was begun while one is open, or ended while none is.
pub const ACL_ERROR_STREAM_TASK_GROUP_STATUS: aclError = 107033;
/// The capture was not begun on this stream (it joined another's).
pub const ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED: aclError = 107036;
/// The capture was ended by another thread than the one that began it.
pub const ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD: aclError = 107038;
/// An array the caller passed is too small for what the call returns.
pub const ACL_ERROR_RT_INSUFFICIENT_INPUT_ARRAY: aclError = 107039;
/// A task group's update does not match the tasks it replaces, or its model is not captured.
pub const ACL_ERROR_RT_MODEL_UPDATE_FAILED: aclError = 107040;
/// A call that would wait for the device (a synchronization, a query, a
/// synchronous copy or set) while a stream is capturing in a mode that
/// forbids it.
pub const ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC: aclError = 107041;
/// The feature is not supported on this device or runtime (CANN's
/// `rt_error_codes.h`), which programs probe for before using one.
pub const ACL_ERROR_RT_FEATURE_NOT_SUPPORT: aclError = 207000;
/// The stream is not bound to a model (a label set or switch on a stream
/// no model build holds).
pub const ACL_ERROR_RT_STREAM_MODEL: aclError = 107005;
/// An address is not aligned to the size of the data it holds (a reduce's).
pub const ACL_ERROR_RT_ADDR_UNALIGNED: aclError = 107008;
/// A label used in another context than the one it was made in.
pub const ACL_ERROR_RT_LABEL_CONTEXT: aclError = 507031;
/// `aclrtHostRegisterV2` of a range that overlaps one registered already.
pub const ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED: aclError = 507910;
/// Host memory that was never registered (`aclrtHostUnregister`,
/// `aclrtHostGetDevicePointer`).
pub const ACL_ERROR_HOST_MEMORY_NOT_REGISTERED: aclError = 507911;

/// Why a call failed. [`Error::code`] gives the ACL error code; `Display`
/// gives the reason in CANN's wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A required pointer parameter (or descriptor field) was NULL; `param`
    /// as CANN's header spells it.
    #[error("{param} cannot be a NULL pointer")]
    NullPointer { param: &'static str },
    /// A parameter was not NULL but is not acceptable, and why.
    #[error("Parameter {param} is invalid. Reason: {reason}")]
    InvalidParam {
        param: &'static str,
        reason: &'static str,
    },
    /// An address the device records refuse: `len` bytes at `addr` given as `param`.
    #[error("Parameter {param} is invalid. Reason: {reason} (address {addr:#x}, {len} bytes)")]
    InvalidAddress {
        param: &'static str,
        addr: usize,
        len: usize,
        reason: &'static str,
    },
    /// A pool was given back one of its blocks that it already took back.
    #[error("Parameter block is invalid. Reason: The block was already freed (double free)")]
    PoolDoubleFree,
    /// A pool was given an address that is not one of its blocks.
    #[error("Parameter block is invalid. Reason: It is not a block of this pool")]
    PoolForeignBlock,
    /// `aclrtAllocatorGetByStream` on a stream that has no allocator.
    #[error(
        "Parameter stream is invalid. Reason: The stream is not registered with any allocator"
    )]
    StreamNotRegistered,
    /// The library could not allocate `what` for its own bookkeeping.
    #[error("Out of host memory: {what}")]
    BadAlloc { what: &'static str },
    /// An operation could not be carried out (for example a report file could not be written).
    #[error("{reason}")]
    Failure { reason: &'static str },
    /// An allocator's shared object cannot be loaded; `detail` is the loader's own text (dlerror).
    #[error("The allocator library cannot be loaded: {detail}")]
    LibraryLoad { detail: &'static str },
    /// The symbol the configuration field `param` named is not in the
    /// allocator's shared object (`detail`: the loader's text).
    #[error("The symbol given as {param} cannot be resolved: {detail}")]
    SymbolMissing {
        param: &'static str,
        detail: &'static str,
    },
    /// An allocator ("pluggable", "default", ...) returned NULL.
    #[error("The {allocator} allocator returned NULL for {size} bytes on device {device}")]
    AllocatorReturnedNull {
        allocator: &'static str,
        size: usize,
        device: i32,
    },
    /// A pointer this allocator never handed out was given back to it.
    #[error("Trying to free a pointer not allocated here")]
    ForeignPointer,
    /// A pointer this allocator handed out was given back a second time.
    #[error("Trying to free a pointer not allocated here (it was allocated here and already freed: a double free)")]
    DoubleFree,
    /// The default allocator has not been built yet.
    #[error("The default allocator is built at its first allocation, and none has happened yet")]
    DefaultNotInUse,
    /// The default allocator served memory already and cannot be swapped.
    #[error("can't swap an already initialized allocator")]
    AlreadyInitialized,
    /// An object cannot be destroyed while `count` of `what` still use it.
    #[error("It is still in use. {what}: {count}")]
    StillInUse { what: &'static str, count: usize },
    /// The operation `what` is not offered by this allocator.
    #[error("Not supported: {what}")]
    NotSupported { what: &'static str },
    /// A caching pool could not serve `requested` bytes (`allocated` handed out,
    /// `reserved` held, under `limit`, `usize::MAX`: none) for `cause`.
    #[error(
        "Out of memory in the caching pool. Reason: tried to allocate {requested} bytes with {allocated} bytes allocated and {reserved} bytes reserved by the pool, limit {}; {cause}",
        LimitText(*limit)
    )]
    PoolOutOfMemory {
        requested: usize,
        allocated: usize,
        reserved: usize,
        limit: usize,
        cause: &'static str,
    },
    /// A foreign function (an allocator callback, a pluggable allocator's
    /// function) threw a C++ exception: which one, and its what().
    #[error("{what}")]
    Threw { what: &'static str },
    /// A bug or an unexpected state inside the library.
    #[error("Internal error. Reason: {reason}")]
    Internal { reason: &'static str },
    /// `aclInit` while already initialized.
    #[error("ACL is already initialized; call aclFinalize before calling aclInit again")]
    RepeatInitialize,
    /// `aclFinalize` while not initialized.
    #[error("ACL is not initialized (aclInit was not called, or aclFinalize was already called)")]
    RepeatFinalize,
    /// `aclInit`'s configuration file cannot be read.
    #[error("Parameter configPath is invalid. Reason: the file cannot be read")]
    InvalidConfigFile,
    /// A device id the caller gave outside `[0, count)`.
    #[error("Parameter deviceId is invalid. Reason: device {device} does not exist; there are {count} devices (set ACLALLOC_DEVICE_COUNT for more)")]
    InvalidDevice { device: i64, count: u32 },
    /// No current context on the calling thread.
    #[error("There is no current context on this thread; call aclrtSetDevice, aclrtCreateContext or aclrtSetCurrentContext first")]
    NoContext,
    /// `size` bytes would exceed the device's memory: `free` of its `capacity` bytes are free.
    #[error("Device {device} is out of memory: {size} bytes were requested, {free} of its {capacity} bytes are free (set ACLALLOC_DEVICE_MEMORY for more)")]
    DeviceMemoryExhausted {
        device: u32,
        size: usize,
        free: usize,
        capacity: usize,
    },
    /// The operating system refused to reserve `size` bytes of address space.
    #[error("The host could not reserve {size} bytes of address space for device {device}")]
    ReserveFailed { device: u32, size: usize },
    /// The allocator of `stream` returned NULL from alloc for a launch's workspace of `size` bytes.
    #[error("The allocator of stream {stream:#x} returned NULL from alloc for a workspace of {size} bytes")]
    WorkspaceAlloc { stream: usize, size: usize },
    /// The allocator of `stream` returned NULL from getAddrFromBlock for a
    /// workspace of `size` bytes.
    #[error("The allocator of stream {stream:#x} returned NULL from getAddrFromBlock for a workspace block of {size} bytes; the block was given back with free")]
    WorkspaceAddr { stream: usize, size: usize },
    /// An event's recorded work has not run yet, or it was never recorded.
    #[error("Parameter {param} is invalid. Reason: the event has not completed (it was not recorded, or its recorded work has not run)")]
    EventNotComplete { param: &'static str },
    /// A wait for a stream's work gave up after `timeout_ms` milliseconds.
    #[error("The stream's work did not finish within {timeout_ms} ms (it keeps running)")]
    StreamTimeout { timeout_ms: i32 },
    /// A wait for an event gave up after `timeout_ms` milliseconds.
    #[error("The event did not complete within {timeout_ms} ms")]
    EventTimeout { timeout_ms: i32 },
    /// `aclrtProcessReport` found no callback within `timeout_ms` milliseconds.
    #[error("No callback was ready within {timeout_ms} ms")]
    ReportTimeout { timeout_ms: i32 },
    /// An environment variable's value is refused (see [`super::env`]).
    #[error("{0}")]
    Config(&'static ConfigError),
    /// A task on the stream failed (a host kernel reported `code` with
    /// `aclallocFailCurrentTask`); reported once, by the next synchronize.
    #[error("A task on the stream failed with error {code}")]
    TaskFailed { code: aclError },
    /// The calling process is not allowed to use what it asked for, and why.
    #[error("No permission. Reason: {what}")]
    NoPermission { what: &'static str },
    /// The runtime does not support the call in this state, and why (CANN's
    /// `ACL_ERROR_RT_FEATURE_NOT_SUPPORT`).
    #[error("The feature is not supported. Reason: {what}")]
    FeatureNotSupported { what: &'static str },
    /// A host memory range overlaps one registered already.
    #[error("The memory range has already been registered")]
    HostMemoryAlreadyRegistered,
    /// Host memory that was not registered (for what `what` asks of it).
    #[error("The host pointer has not been registered{what}")]
    HostMemoryNotRegistered { what: &'static str },
    /// A kernel binary cannot be loaded; `detail` is the loader's own text.
    #[error("The kernel binary cannot be loaded: {detail}")]
    BinaryLoad { detail: &'static str },

    /// A graph capture's or a model build's rules refused the call
    /// (`code`: CANN's `ACL_ERROR_RT_*` code: the capture codes, 107024 to
    /// 107041, and those of labels and reduces).
    #[error("{reason}")]
    Capture {
        code: aclError,
        reason: &'static str,
    },
}

impl Error {
    /// The ACL error code a C caller receives for this error.
    pub const fn code(&self) -> aclError {
        match self {
            Error::NullPointer { .. }
            | Error::InvalidParam { .. }
            | Error::InvalidAddress { .. }
            | Error::PoolDoubleFree
            | Error::PoolForeignBlock
            | Error::StreamNotRegistered
            | Error::ForeignPointer
            | Error::DoubleFree
            | Error::Config(_) => ACL_ERROR_INVALID_PARAM,
            Error::LibraryLoad { .. } | Error::BinaryLoad { .. } | Error::InvalidConfigFile => {
                ACL_ERROR_INVALID_FILE
            }
            Error::FeatureNotSupported { .. } => ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
            Error::HostMemoryAlreadyRegistered => ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
            Error::HostMemoryNotRegistered { .. } => ACL_ERROR_HOST_MEMORY_NOT_REGISTERED,
            Error::SymbolMissing { .. } => ACL_ERROR_FILE_MISSING_ATTR,
            Error::AlreadyInitialized | Error::RepeatInitialize => ACL_ERROR_REPEAT_INITIALIZE,
            Error::DefaultNotInUse => ACL_ERROR_UNINITIALIZE,
            Error::StillInUse { .. } => ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED,
            Error::NotSupported { .. } => ACL_ERROR_API_NOT_SUPPORT,
            Error::BadAlloc { .. } | Error::Threw { .. } => ACL_ERROR_BAD_ALLOC,
            Error::Internal { .. } => ACL_ERROR_INTERNAL_ERROR,
            Error::Failure { .. } => ACL_ERROR_FAILURE,
            Error::RepeatFinalize => ACL_ERROR_REPEAT_FINALIZE,
            Error::InvalidDevice { .. } => ACL_ERROR_RT_INVALID_DEVICEID,
            Error::NoContext => ACL_ERROR_RT_CONTEXT_NULL,
            Error::EventNotComplete { .. } => ACL_ERROR_RT_EVENT_NOT_COMPLETE,
            Error::StreamTimeout { .. } => ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
            Error::EventTimeout { .. } => ACL_ERROR_RT_EVENT_SYNC_TIMEOUT,
            Error::ReportTimeout { .. } => ACL_ERROR_RT_REPORT_TIMEOUT,
            Error::TaskFailed { code } => *code,
            Error::NoPermission { .. } => ACL_ERROR_RT_NO_PERMISSION,
            Error::Capture { code, .. } => *code,
            Error::AllocatorReturnedNull { .. }
            | Error::PoolOutOfMemory { .. }
            | Error::DeviceMemoryExhausted { .. }
            | Error::ReserveFailed { .. }
            | Error::WorkspaceAlloc { .. }
            | Error::WorkspaceAddr { .. } => ACL_ERROR_RT_MEMORY_ALLOCATION,
        }
    }

    /// The words between the function's name and the reason, as CANN words
    /// them: "`F` failed because ..." or "`F` failed. Parameter ...".
    pub(crate) const fn connective(&self) -> &'static str {
        match self {
            Error::NullPointer { .. } => " failed because ",
            _ => " failed. ",
        }
    }
}

impl From<ConfigError> for Error {
    fn from(error: ConfigError) -> Self {
        Error::Config(error.interned())
    }
}

/// Shows a byte limit, or "none" for `usize::MAX`.
struct LimitText(usize);

impl std::fmt::Display for LimitText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            usize::MAX => f.write_str("none"),
            bytes => write!(f, "{bytes} bytes"),
        }
    }
}

/// The result type of the safe Rust API.
pub type Result<T, E = Error> = std::result::Result<T, E>;
