//! Turning tracking on from the environment, and the reports at exit.
//!
//! | variable | meaning |
//! | --- | --- |
//! | `ACLALLOC_TRACK` | a truth value ([`env::truth`]): tracking on from load time (default off; an invalid value: one line on stderr, and off) |
//! | `ACLALLOC_TRACK_REPORT` | file for the text report at exit (default: stderr); `%p` becomes the pid |
//! | `ACLALLOC_TRACK_JSON` | file for the JSON snapshot at exit (default: none); `%p` becomes the pid |

use super::{report_leaks_now, report_text, set_enabled, snapshot_json};
use crate::base::env;
use crate::base::sync::statics::{AtomicBool, AtomicI32, AtomicU8};
use crate::base::sync::Ordering;
use std::ffi::OsString;
use std::io::Write as _;
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::PathBuf;

static AT_EXIT: AtomicBool = AtomicBool::new(false);
/// Tracking was asked for by `ACLALLOC_TRACK` (as `aclalloc run` does): the
/// report at exit is then written whatever the program did with tracking.
static FROM_ENV: AtomicBool = AtomicBool::new(false);

/// The process that arranged for the reports at exit (a forked child
/// inherits the arrangement, not the pid).
static ARMED_PID: AtomicI32 = AtomicI32::new(0);

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
        // Signals end a process without `atexit`.
        super::signals::install();
    }
}

/// Arranges (once) for [`write_exit_reports`] to run at exit.
pub fn report_at_exit() {
    if !AT_EXIT.swap(true, Ordering::AcqRel) {
        // SAFETY: getpid has no preconditions.
        ARMED_PID.store(unsafe { libc::getpid() }, Ordering::Release);
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
/// or by the signal watcher); returns once they are written, also when
/// another thread writes them, so the process does not end half-way.
pub(crate) fn write_reports_once() {
    const WRITING: u8 = 1;
    const DONE: u8 = 2;
    static STATE: AtomicU8 = AtomicU8::new(0);
    if STATE
        .compare_exchange(0, WRITING, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
    {
        let _ = std::panic::catch_unwind(write_exit_reports);
        STATE.store(DONE, Ordering::Release);
    }
    while STATE.load(Ordering::Acquire) != DONE {
        std::thread::sleep(std::time::Duration::from_millis(1));
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
    write_reports("");
}

/// The files of the report and the snapshot written before an `exec`, taken
/// back if the `exec` fails.
static BEFORE_EXEC: parking_lot::Mutex<Vec<PathBuf>> = parking_lot::Mutex::new(Vec::new());

/// Before `exec` replaces this image: its reports as at exit, to the report
/// files with `.before-exec-N` appended (the new image writes the files
/// themselves at its exit; N counts the images of this process). Nothing in
/// a forked child (its parent reports the blocks it inherited) or when no
/// report at exit is due. [`exec_failed`] takes them back.
pub fn write_reports_before_exec() {
    // SAFETY: getpid has no preconditions.
    let here = unsafe { libc::getpid() } == ARMED_PID.load(Ordering::Acquire);
    if !(here && AT_EXIT.load(Ordering::Acquire))
        || !(FROM_ENV.load(Ordering::Acquire) || super::enabled())
    {
        return;
    }
    let taken = |n: &u32| {
        ["ACLALLOC_TRACK_REPORT", "ACLALLOC_TRACK_JSON"]
            .iter()
            .filter_map(|v| report_file(v))
            .any(|p| with_suffix(p, &format!(".before-exec-{n}")).exists())
    };
    let n = (0..).find(|n| !taken(n)).unwrap_or(0);
    let written = std::panic::catch_unwind(|| write_reports(&format!(".before-exec-{n}")));
    BEFORE_EXEC.lock().extend(written.unwrap_or_default());
}

/// The `exec` failed and this image goes on: its report at exit will say
/// everything, so the files written before it go.
pub fn exec_failed() {
    for path in std::mem::take(&mut *BEFORE_EXEC.lock()) {
        let _ = std::fs::remove_file(path);
    }
}

fn with_suffix(path: PathBuf, suffix: &str) -> PathBuf {
    let mut name = path.into_os_string();
    name.push(suffix);
    PathBuf::from(name)
}

/// [`write_exit_reports`] to the files with `suffix` appended; returns the
/// files written.
fn write_reports(suffix: &str) -> Vec<PathBuf> {
    if let Some(hook) = BEFORE_REPORT.get() {
        hook();
    }
    report_leaks_now();
    let text = report_text();
    let mut written = Vec::new();
    match report_file("ACLALLOC_TRACK_REPORT").map(|p| with_suffix(p, suffix)) {
        Some(path) => match std::fs::write(&path, &text) {
            Ok(()) => written.push(path),
            Err(e) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "==aclalloc== could not write the report to {}: {e}\n{text}",
                    path.display()
                );
            }
        },
        None => {
            let _ = std::io::stderr().write_all(text.as_bytes());
        }
    }
    if let Some(path) = report_file("ACLALLOC_TRACK_JSON").map(|p| with_suffix(p, suffix)) {
        match std::fs::write(&path, snapshot_json()) {
            Ok(()) => written.push(path),
            Err(e) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "==aclalloc== could not write the snapshot to {}: {e}",
                    path.display()
                );
            }
        }
    }
    written
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
