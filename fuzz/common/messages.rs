//! The check the pool and runtime targets share: what `aclGetRecentErrMsg`
//! says after an op is exactly that op's expected failures.

use aclalloc::ffi::cann::errmsg::aclGetRecentErrMsg;
use std::ffi::CStr;

/// Reads this thread's messages and checks them against `failed` (the
/// functions expected to have failed, oldest first): one line each, newest
/// first, each naming its function in CANN's shape and ending with a period.
/// Lines starting with one of `ignored` (refusals of the device underneath,
/// which the model does not predict) are skipped.
pub fn check(failed: Vec<&'static str>, ignored: &[&str]) {
    let text = aclGetRecentErrMsg();
    let lines: Vec<String> = if text.is_null() {
        Vec::new()
    } else {
        // SAFETY: NUL-terminated, valid until this thread's next read.
        let text = unsafe { CStr::from_ptr(text) }.to_str().expect("UTF-8");
        text.lines()
            .filter(|l| !ignored.iter().any(|d| l.starts_with(d)))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(lines.len(), failed.len(), "{lines:?} vs {failed:?}");
    for (line, function) in lines.iter().zip(failed.iter().rev()) {
        assert!(
            line.starts_with(&format!("{function} failed")) && line.ends_with('.'),
            "message {line:?} is not from {function}"
        );
    }
}
