//! `aclGetRecentErrMsg`.

use crate::base::boundary::ffi_boundary;
use crate::base::errlog;
use crate::ffi::wiring::forward;
use std::cell::RefCell;
use std::ffi::{c_char, CString};

thread_local! {
    /// The text last handed out on this thread; it lives until the next read.
    static LAST_READ: RefCell<Option<CString>> = const { RefCell::new(None) };
}

/// Returns the messages of this thread's failed ACL calls since the last
/// call, newest first, one per line, and clears them; NULL when there are
/// none. The string stays valid until this thread calls it again. In front
/// of a real runtime: this library's messages if any (a failed forwarded
/// call drops this library's older ones), otherwise the runtime's.
#[no_mangle]
pub extern "C" fn aclGetRecentErrMsg() -> *const c_char {
    ffi_boundary!(|| {
        let ours = own_messages();
        Ok(match forward::recent_err_msg() {
            // SAFETY: the real runtime's function, which takes no arguments.
            Some(real) if ours.is_null() => unsafe { real() },
            _ => ours,
        })
    })
}

/// This library's messages for this thread, as a C string that lives until
/// the next read; NULL when there are none.
fn own_messages() -> *const c_char {
    let text =
        errlog::take_recent().map(|t| CString::new(t.replace('\0', " ")).unwrap_or_default());
    LAST_READ
        .try_with(|last| {
            let mut last = last.borrow_mut();
            *last = text;
            last.as_ref().map_or(std::ptr::null(), |t| t.as_ptr())
        })
        .unwrap_or(std::ptr::null())
}
