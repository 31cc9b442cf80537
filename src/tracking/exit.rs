//! Turning tracking on from the environment, and the reports at exit.
//!
//! | variable | meaning |
//! | --- | --- |
//! | `ACLALLOC_TRACK` | `1`, `on`, `yes` or `true`: tracking on from load time |
//! | `ACLALLOC_TRACK_REPORT` | file for the text report at exit (default: stderr); `%p` becomes the pid |
//! | `ACLALLOC_TRACK_JSON` | file for the JSON snapshot at exit (default: none); `%p` becomes the pid |

use super::{report_leaks_now, report_text, set_enabled, snapshot_json};
use std::ffi::CStr;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

static AT_EXIT: AtomicBool = AtomicBool::new(false);
/// Tracking was asked for by `ACLALLOC_TRACK` (as `aclalloc run` does): the
/// report at exit is then written whatever the program did with tracking.
static FROM_ENV: AtomicBool = AtomicBool::new(false);

fn truthy(value: &[u8]) -> bool {
    matches!(
        value.to_ascii_lowercase().as_slice(),
        b"1" | b"on" | b"yes" | b"true"
    )
}

/// Reads `ACLALLOC_TRACK` and, when it asks for tracking, turns it on and
/// arranges for the reports at exit. Called from the library's load-time
/// constructor; uses `getenv` only, so it allocates nothing.
pub fn init_from_env() {
    // SAFETY: a NUL-terminated name; the result is read before anything can
    // change the environment (the constructor runs before main).
    let value = unsafe { libc::getenv(c"ACLALLOC_TRACK".as_ptr()) };
    if value.is_null() {
        return;
    }
    // SAFETY: getenv returns a NUL-terminated string.
    if truthy(unsafe { CStr::from_ptr(value) }.to_bytes()) {
        set_enabled(true);
        FROM_ENV.store(true, Ordering::Release);
        report_at_exit();
    }
}

/// Arranges (once) for [`write_exit_reports`] to run at exit.
pub(crate) fn report_at_exit() {
    if !AT_EXIT.swap(true, Ordering::AcqRel) {
        // SAFETY: registering a plain function; failure only means no report.
        unsafe { libc::atexit(at_exit) };
    }
}

extern "C" fn at_exit() {
    // A program that turned tracking on itself and off again before exit
    // has had its say (typically its own aclallocTrackingWriteReport): a
    // second, unasked report at exit would only repeat it.
    if FROM_ENV.load(Ordering::Acquire) || super::enabled() {
        let _ = std::panic::catch_unwind(write_exit_reports);
    }
}

/// `%p` in a path becomes the process id.
pub fn expand(path: &str) -> String {
    path.replace("%p", &std::process::id().to_string())
}

/// Reports every still-live block as a leak, then writes the text report
/// (to `ACLALLOC_TRACK_REPORT` or stderr) and, if `ACLALLOC_TRACK_JSON` is
/// set, the JSON snapshot.
pub fn write_exit_reports() {
    report_leaks_now();
    let text = report_text();
    match std::env::var("ACLALLOC_TRACK_REPORT") {
        Ok(path) if !path.is_empty() => {
            let path = expand(&path);
            if let Err(e) = std::fs::write(&path, &text) {
                let _ = writeln!(
                    std::io::stderr(),
                    "==aclalloc== could not write the report to {path}: {e}\n{text}"
                );
            }
        }
        _ => {
            let _ = std::io::stderr().write_all(text.as_bytes());
        }
    }
    if let Ok(path) = std::env::var("ACLALLOC_TRACK_JSON") {
        if !path.is_empty() {
            let path = expand(&path);
            if let Err(e) = std::fs::write(&path, snapshot_json()) {
                let _ = writeln!(
                    std::io::stderr(),
                    "==aclalloc== could not write the snapshot to {path}: {e}"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switch_values_and_pid_expansion() {
        assert!(truthy(b"1") && truthy(b"ON") && truthy(b"yes") && truthy(b"True"));
        assert!(!truthy(b"0") && !truthy(b"") && !truthy(b"off"));
        let pid = std::process::id().to_string();
        assert_eq!(expand("r.%p.txt"), format!("r.{pid}.txt"));
        assert_eq!(expand("plain"), "plain");
    }
}
