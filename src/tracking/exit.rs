//! Turning tracking on from the environment, and the reports at exit.
//!
//! | variable | meaning |
//! | --- | --- |
//! | `ACLALLOC_TRACK` | a truth value ([`env::truth`]): tracking on from load time (default off; an invalid value: one line on stderr, and off) |
//! | `ACLALLOC_TRACK_REPORT` | file for the text report at exit (default: stderr); `%p` becomes the pid |
//! | `ACLALLOC_TRACK_JSON` | file for the JSON snapshot at exit (default: none); `%p` becomes the pid |

use super::{report_leaks_now, report_text, set_enabled, snapshot_json};
use crate::base::env;
use crate::base::sync::statics::AtomicBool;
use crate::base::sync::Ordering;
use std::ffi::OsString;
use std::io::Write as _;
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::PathBuf;

static AT_EXIT: AtomicBool = AtomicBool::new(false);
/// Tracking was asked for by `ACLALLOC_TRACK` (as `aclalloc run` does): the
/// report at exit is then written whatever the program did with tracking.
static FROM_ENV: AtomicBool = AtomicBool::new(false);

const TRACK_VAR: &str = "ACLALLOC_TRACK";

/// What `ACLALLOC_TRACK` asks for: its truth value; unset, off; invalid, a
/// line on stderr and off (read at load time, where no call can fail).
fn tracking_requested() -> bool {
    env::with_var_no_alloc(TRACK_VAR, |raw| {
        env::or_default(env::truth_var(TRACK_VAR, raw), false, "off")
    })
}

/// Reads `ACLALLOC_TRACK` and, when it asks for tracking, turns it on and
/// arranges for the reports at exit. Allocates nothing (load time).
pub fn init_from_env() {
    if tracking_requested() {
        set_enabled(true);
        super::leaks::stacks_from_env();
        FROM_ENV.store(true, Ordering::Release);
        report_at_exit();
        // SIGTERM/SIGINT/SIGHUP end a process without `atexit`.
        super::signals::install();
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
    // A program that turned tracking off again wrote its own report.
    if FROM_ENV.load(Ordering::Acquire) || super::enabled() {
        write_reports_once();
    }
}

/// [`write_exit_reports`] unless the reports were already written (at exit,
/// or by the signal watcher while the program went on to exit).
pub(crate) fn write_reports_once() {
    static WRITTEN: AtomicBool = AtomicBool::new(false);
    if !WRITTEN.swap(true, Ordering::AcqRel) {
        let _ = std::panic::catch_unwind(write_exit_reports);
    }
}

/// `%p` in a path becomes the process id.
pub fn expand(path: &str) -> String {
    path.replace("%p", &std::process::id().to_string())
}

/// [`expand`] on a file name taken from the environment byte for byte.
fn expand_os(path: PathBuf) -> PathBuf {
    let (bytes, pid) = (path.as_os_str().as_bytes(), std::process::id().to_string());
    let mut out = Vec::with_capacity(bytes.len() + 8);
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(b"%p") {
            out.extend_from_slice(pid.as_bytes());
            i += 2;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    PathBuf::from(OsString::from_vec(out))
}

/// The file a path variable names, `%p` expanded; `None` when unset or empty.
fn report_file(variable: &str) -> Option<PathBuf> {
    env::path(env::var(variable).as_deref()).map(expand_os)
}

/// What runs just before the reports at exit (a last look for a real runtime loaded too late).
static BEFORE_REPORT: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Sets what runs just before the reports at exit.
pub fn before_exit_report(hook: fn()) {
    let _ = BEFORE_REPORT.set(hook);
}

/// Reports every live block as a leak, then writes the text report and, if
/// `ACLALLOC_TRACK_JSON` is set, the JSON snapshot.
pub fn write_exit_reports() {
    if let Some(hook) = BEFORE_REPORT.get() {
        hook();
    }
    report_leaks_now();
    let text = report_text();
    match report_file("ACLALLOC_TRACK_REPORT") {
        Some(path) => {
            if let Err(e) = std::fs::write(&path, &text) {
                let _ = writeln!(
                    std::io::stderr(),
                    "==aclalloc== could not write the report to {}: {e}\n{text}",
                    path.display()
                );
            }
        }
        None => {
            let _ = std::io::stderr().write_all(text.as_bytes());
        }
    }
    if let Some(path) = report_file("ACLALLOC_TRACK_JSON") {
        if let Err(e) = std::fs::write(&path, snapshot_json()) {
            let _ = writeln!(
                std::io::stderr(),
                "==aclalloc== could not write the snapshot to {}: {e}",
                path.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_expansion_in_text_and_in_bytes() {
        let pid = std::process::id().to_string();
        assert_eq!(expand("r.%p.txt"), format!("r.{pid}.txt"));
        assert_eq!(expand("plain"), "plain");
        let raw = PathBuf::from(OsString::from_vec(b"r\xff.%p.%%p".to_vec()));
        let mut expected = b"r\xff.".to_vec();
        expected.extend_from_slice(pid.as_bytes());
        expected.extend_from_slice(b".%");
        expected.extend_from_slice(pid.as_bytes());
        assert_eq!(expand_os(raw).into_os_string().into_vec(), expected);
    }
}
