//! A service's life under `aclalloc run` and as a shared object: stopped by
//! a signal, unloaded while its threads run. (docs/HARDENING.md)

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt as _, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn stopped_program() -> &'static PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = common::scratch("service");
        let out = dir.join("stopped");
        let src = common::root().join("tests/service/stopped.c");
        common::compile("cc", "c11", &[&src], &out, &[]);
        out
    })
}

/// Runs the program under `aclalloc run --report FILE`, waits for "ready",
/// sends `sig` to the program (`to_launcher`: to the launcher instead), and
/// returns the launcher's exit code and the report.
fn stop_with(sig: i32, to_launcher: bool) -> (Option<i32>, String) {
    let dir = common::scratch(&format!("service-sig{sig}-{to_launcher}"));
    let report = dir.join("report.txt");
    let mut launcher = Command::new(env!("CARGO_BIN_EXE_aclalloc"));
    launcher
        .arg("run")
        .arg("--report")
        .arg(&report)
        .arg("--")
        .arg(stopped_program())
        .stdout(Stdio::piped());
    // A test runner started under nohup, or as a background job of a
    // non-interactive shell, hands its children SIGHUP or SIGINT ignored,
    // and the library (rightly) leaves an ignored signal alone: give the
    // service the default actions a service manager would.
    // SAFETY: only async-signal-safe calls (signal) between fork and exec.
    unsafe {
        launcher.pre_exec(|| {
            for sig in [libc::SIGHUP, libc::SIGINT, libc::SIGTERM] {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    let mut launcher = launcher.spawn().expect("run aclalloc");
    let mut line = String::new();
    BufReader::new(launcher.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("the program's first line");
    let pid: i32 = line
        .strip_prefix("pid ")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    let target = if to_launcher {
        launcher.id() as i32
    } else {
        pid
    };
    // SAFETY: kill with a process id and a signal number.
    assert_eq!(unsafe { libc::kill(target, sig) }, 0);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = launcher.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = launcher.kill();
            let _ = unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("the program did not end within 30 s of signal {sig}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.signal(), None, "the launcher itself was not killed");
    (
        status.code(),
        std::fs::read_to_string(&report).unwrap_or_default(),
    )
}

fn assert_reported(sig: i32, to_launcher: bool) {
    let (code, report) = stop_with(sig, to_launcher);
    assert_eq!(code, Some(128 + sig), "signal {sig}; report:\n{report}");
    assert!(
        report.contains("==aclalloc==") && !report.contains("no report"),
        "signal {sig}: the report is missing:\n{report}"
    );
    // The launch's workspace is counted: the report is the real one.
    assert!(
        report.contains("totals: allocations=1 frees=1"),
        "signal {sig}: the program's allocation is not in the report:\n{report}"
    );
}

#[test]
fn sigterm_to_the_program_writes_the_report_and_keeps_the_status() {
    assert_reported(libc::SIGTERM, false);
}

#[test]
fn sigterm_and_sighup_to_the_launcher_reach_the_program() {
    assert_reported(libc::SIGTERM, true);
    assert_reported(libc::SIGHUP, true);
}

#[test]
fn sigint_and_sighup_to_the_program_write_the_report() {
    assert_reported(libc::SIGINT, false);
    assert_reported(libc::SIGHUP, false);
}

#[test]
fn sigkill_gives_no_report_and_says_why() {
    let (code, report) = stop_with(libc::SIGKILL, false);
    assert_eq!(code, Some(128 + libc::SIGKILL));
    assert!(
        report.contains("no report: the program was killed"),
        "{report}"
    );
}

/// The library is never unloaded once loaded (`-z nodelete`): a stream's
/// worker thread runs its code for as long as the stream lives, and a
/// plugin host may dlclose it meanwhile (c_examples/dlclose_workers.c does).
#[test]
fn the_library_is_marked_never_to_be_unloaded() {
    let lib = common::lib_dir().join("libaclalloc.so");
    let out = Command::new("readelf")
        .arg("-d")
        .arg(&lib)
        .output()
        .expect("run readelf");
    let text = String::from_utf8_lossy(&out.stdout);
    let flags = text
        .lines()
        .find(|l| l.contains("FLAGS_1"))
        .unwrap_or_else(|| panic!("no FLAGS_1 in the dynamic section:\n{text}"));
    assert!(flags.contains("NODELETE"), "{flags}");
}

/// A C++ exception thrown by an allocator callback is an allocation failure
/// whose message carries its what(); it never crosses the library, and the
/// next launch on the same stream succeeds, with tracking on too (the
/// allocator's record is not left busy).
#[test]
fn a_callback_that_throws_fails_the_launch_and_the_next_one_succeeds() {
    let dir = common::scratch("service-throwing");
    let exe = dir.join("throwing");
    let src = common::root().join("tests/service/throwing.cpp");
    common::compile("c++", "c++17", &[&src], &exe, &[]);
    for track in ["0", "1"] {
        let out = Command::new(&exe)
            .env("ACLALLOC_TRACK", track)
            .output()
            .expect("run the program");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{:?}\n{stdout}\n{stderr}", out.status);
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 3, "{stdout}");
        assert!(!lines[0].starts_with("first launch 0:"), "{stdout}");
        assert!(
            lines[0].contains(
                "The alloc callback (aclrtAllocatorAllocFunc) threw a C++ exception: out of blocks"
            ),
            "{stdout}"
        );
        assert_eq!(lines[1..], ["second launch 0", "synchronize 0"], "{stdout}");
    }
}
