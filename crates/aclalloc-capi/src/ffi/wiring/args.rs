//! Checking and converting the raw arguments C passes in. The only code that
//! writes through a caller's pointer is [`Out::write`], and every export calls
//! it only after everything else has succeeded.

use crate::base::error::{Error, Result};
use crate::registry::{DescriptorHandle, StreamKey};
use std::ffi::c_void;
use std::ptr::NonNull;

/// A required non-NULL value (a function pointer, an object).
pub(crate) fn required<T>(value: Option<T>, param: &'static str) -> Result<T> {
    value.ok_or(Error::NullPointer { param })
}

/// A non-NULL stream handle.
pub(crate) fn stream(stream: *mut c_void) -> Result<StreamKey> {
    StreamKey::from_ptr(stream).ok_or(Error::NullPointer { param: "stream" })
}

/// A non-NULL descriptor handle; whether it is live is the core's check.
pub(crate) fn descriptor(desc: *mut c_void) -> Result<DescriptorHandle> {
    DescriptorHandle::from_ptr(desc).ok_or(Error::NullPointer {
        param: "allocatorDesc",
    })
}

/// An out-parameter: where a result goes once the call has succeeded.
pub(crate) struct Out<T>(NonNull<T>);

impl<T> Out<T> {
    /// A required out-parameter.
    ///
    /// # Safety
    /// A non-NULL `ptr` must be valid for a write of `T`, as the C function's
    /// contract says.
    pub(crate) unsafe fn required(ptr: *mut T, param: &'static str) -> Result<Self> {
        NonNull::new(ptr)
            .map(Out)
            .ok_or(Error::NullPointer { param })
    }

    /// An optional out-parameter (NULL: the caller does not want it).
    ///
    /// # Safety
    /// As for [`Out::required`].
    pub(crate) unsafe fn optional(ptr: *mut T) -> Option<Self> {
        NonNull::new(ptr).map(Out)
    }

    /// Stores the result.
    pub(crate) fn write(self, value: T) {
        // SAFETY: the constructor's contract.
        unsafe { self.0.as_ptr().write(value) }
    }
}

/// Writes what `value` gives to the required out-parameter `ptr`; NULL is
/// refused before `value` runs.
///
/// # Safety
/// As for [`Out::required`].
pub(crate) unsafe fn write_out<T>(
    ptr: *mut T,
    param: &'static str,
    value: impl FnOnce() -> Result<T>,
) -> Result<()> {
    // SAFETY: the caller's contract.
    let out = unsafe { Out::required(ptr, param) }?;
    out.write(value()?);
    Ok(())
}

/// Writes `value` to an optional out-parameter, if the caller gave one.
pub(crate) fn write_optional<T>(out: Option<Out<T>>, value: T) {
    if let Some(out) = out {
        out.write(value);
    }
}

/// A NUL-terminated UTF-8 string argument.
///
/// # Safety
/// A non-NULL `ptr` must point to a NUL-terminated string that outlives the call.
pub(crate) unsafe fn c_str<'a>(
    ptr: *const std::ffi::c_char,
    param: &'static str,
) -> Result<&'a str> {
    // SAFETY: the caller's contract.
    unsafe { c_bytes(ptr, param) }?
        .to_str()
        .map_err(|_| Error::InvalidParam {
            param,
            reason: "It is not valid UTF-8",
        })
}

/// A required NUL-terminated string of any bytes (a path, a symbol name).
///
/// # Safety
/// A non-NULL `ptr` must point to a NUL-terminated string that outlives the call.
pub(crate) unsafe fn c_bytes<'a>(
    ptr: *const std::ffi::c_char,
    param: &'static str,
) -> Result<&'a std::ffi::CStr> {
    if ptr.is_null() {
        return Err(Error::NullPointer { param });
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::ffi::CStr::from_ptr(ptr) })
}

/// An optional string of any bytes: NULL and "" both mean "not given".
///
/// # Safety
/// As for [`c_bytes`].
pub(crate) unsafe fn optional_c_bytes<'a>(
    ptr: *const std::ffi::c_char,
) -> Option<&'a std::ffi::CStr> {
    // SAFETY: the caller's contract.
    unsafe { c_bytes(ptr, "") }.ok().filter(|s| !s.is_empty())
}

/// A required input struct, read by reference.
///
/// # Safety
/// A non-NULL `ptr` must point to a valid `T` that outlives the call.
pub(crate) unsafe fn input<'a, T>(ptr: *const T, param: &'static str) -> Result<&'a T> {
    // SAFETY: the caller's contract.
    unsafe { ptr.as_ref() }.ok_or(Error::NullPointer { param })
}

/// An optional input struct, copied out (NULL: `None`).
///
/// # Safety
/// A non-NULL `ptr` must point to a valid `T`.
pub(crate) unsafe fn optional_input<T: Copy>(ptr: *const T) -> Option<T> {
    // SAFETY: the caller's contract.
    unsafe { ptr.as_ref() }.copied()
}

/// A caller's array of `capacity` elements (NULL allowed when `capacity` is 0).
pub(crate) struct OutSlice<T> {
    ptr: *mut T,
    capacity: usize,
}

impl<T> OutSlice<T> {
    /// # Safety
    /// A non-NULL `ptr` must be valid for writes of `capacity` elements.
    pub(crate) unsafe fn new(ptr: *mut T, capacity: usize, param: &'static str) -> Result<Self> {
        if ptr.is_null() && capacity > 0 {
            return Err(Error::NullPointer { param });
        }
        Ok(OutSlice { ptr, capacity })
    }

    /// Writes as many of `items` as fit.
    pub(crate) fn fill(self, items: impl IntoIterator<Item = T>) {
        for (i, item) in items.into_iter().take(self.capacity).enumerate() {
            // SAFETY: `i < capacity`, the constructor's contract.
            unsafe { self.ptr.add(i).write(item) }
        }
    }
}

/// Copies `text` into a caller's buffer of `size` bytes like `snprintf`: at
/// most `size - 1` bytes and a NUL (nothing when `size` is 0).
pub(crate) fn write_text(buffer: OutSlice<std::ffi::c_char>, text: &str) {
    if buffer.capacity == 0 {
        return;
    }
    let n = text.len().min(buffer.capacity - 1);
    let bytes = text.as_bytes()[..n].iter().map(|&b| b as std::ffi::c_char);
    buffer.fill(bytes.chain(std::iter::once(0)));
}

/// A stream argument where NULL means the current context's default stream.
pub(crate) fn optional_stream(stream: *mut c_void) -> Option<StreamKey> {
    StreamKey::from_ptr(stream)
}

/// A non-NULL context handle; whether it is live is the runtime's check.
pub(crate) fn context(context: *mut c_void) -> Result<usize> {
    if context.is_null() {
        return Err(Error::NullPointer { param: "context" });
    }
    Ok(context as usize)
}

/// A non-NULL memory address.
pub(crate) fn address<T>(ptr: *mut T, param: &'static str) -> Result<NonNull<u8>> {
    NonNull::new(ptr.cast::<u8>()).ok_or(Error::NullPointer { param })
}

/// An optional C string (NULL: none).
///
/// # Safety
/// A non-NULL `ptr` must point to a NUL-terminated string that outlives the
/// call.
pub(crate) unsafe fn optional_cstr<'a>(ptr: *const std::ffi::c_char) -> Option<&'a std::ffi::CStr> {
    // SAFETY: the caller's contract.
    (!ptr.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(ptr) })
}

/// A required input array of `count` elements, copied out (NULL: refused).
///
/// # Safety
/// A non-NULL `ptr` must be valid for reads of `count` elements.
pub(crate) unsafe fn input_array<T: Copy>(
    ptr: *const T,
    count: usize,
    param: &'static str,
) -> Result<Vec<T>> {
    if ptr.is_null() {
        return Err(Error::NullPointer { param });
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(ptr, count) }.to_vec())
}
