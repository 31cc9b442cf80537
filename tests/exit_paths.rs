//! The ways a tracked program ends, alone (`ACLALLOC_TRACK=1`) and under
//! `aclalloc run`: stopped by a signal, replaced by `exec`, after a `chdir`
//! with a relative TMPDIR; and what the run records: a history too large
//! for memory, a block whose address was never asked. (docs/HARDENING.md,
//! "Exit paths and aclalloc run")

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn program() -> &'static PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = common::scratch("exit_paths");
        let out = dir.join("exit_paths");
        let src = common::root().join("tests/service/exit_paths.c");
        common::compile("cc", "c11", &[&src], &out, &[]);
        out
    })
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A test runner may hand its children stop signals ignored, and the
/// library leaves an ignored signal alone: give the defaults a service
/// manager would.
fn with_default_stop_signals(command: &mut Command) -> &mut Command {
    // SAFETY: only async-signal-safe calls (signal) between fork and exec.
    unsafe {
        command.pre_exec(|| {
            for sig in [libc::SIGHUP, libc::SIGINT, libc::SIGTERM] {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        })
    }
}

/// `aclalloc run OPTIONS -- program MODE...`.
fn run(options: &[&str], mode: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_aclalloc"));
    command
        .arg("run")
        .args(options)
        .arg("--")
        .arg(program())
        .args(mode);
    with_default_stop_signals(&mut command);
    command
}

/// The program alone with tracking from the environment, its report in `report`.
fn alone(mode: &str, report: &Path) -> Command {
    let mut command = Command::new(program());
    command
        .arg(mode)
        .env("ACLALLOC_TRACK", "1")
        .env("ACLALLOC_TRACK_REPORT", report)
        .env_remove("ACLALLOC_RECORD_HISTORY");
    with_default_stop_signals(&mut command);
    command
}

/// The leak every mode makes, as the report's fault line shows it.
fn has_leak(report: &str, size: usize) -> bool {
    report
        .lines()
        .any(|l| l.starts_with("==aclalloc== fault leak:") && l.contains(&format!("size={size} ")))
}

/// Waits (at most 30 s) for `child`, killing it on timeout.
fn wait(child: &mut Child, what: &str) -> ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what}: did not end within 30 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Starts `command` with stdout piped and returns it and the program's pid
/// (from its "pid N ready" line).
fn started(command: &mut Command) -> (Child, i32) {
    let mut child = command.stdout(Stdio::piped()).spawn().expect("start");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("the program's first line");
    let pid = line
        .strip_prefix("pid ")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    (child, pid)
}

fn kill(pid: i32, sig: i32) {
    // SAFETY: kill with a process id and a signal number.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
}

// --- Signals ---

/// Alone: SIGTERM raised on `mode`'s thread ends the program as SIGTERM
/// does, nothing after `raise` runs, and the report is complete.
fn raised_alone(mode: &str) {
    let dir = common::scratch(&format!("exit_paths_alone_{mode}"));
    let report = dir.join("report.txt");
    for round in 0..5 {
        let out = alone(mode, &report).output().unwrap();
        let stdout = text(&out.stdout);
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGTERM),
            "round {round}: {:?}\n{stdout}",
            out.status
        );
        assert!(!stdout.contains("went on"), "round {round}: {stdout}");
        let written = std::fs::read_to_string(&report).unwrap_or_default();
        assert!(has_leak(&written, 4242), "round {round}:\n{written}");
        std::fs::remove_file(&report).unwrap();
    }
}

#[test]
fn sigterm_raised_on_the_main_thread_ends_a_tracked_program_after_its_report() {
    raised_alone("raise");
}

#[test]
fn sigterm_raised_on_another_thread_ends_a_tracked_program_after_its_report() {
    raised_alone("raise-thread");
}

/// A program killed by a signal gives the launcher's status 128+N, with or
/// without `--error-exitcode`, after the report (with its faults counted).
#[test]
fn sigterm_raised_under_aclalloc_run_gives_128_plus_n_whatever_the_error_exitcode() {
    for round in 0..5 {
        for mode in ["raise", "raise-thread"] {
            for options in [&[][..], &["--error-exitcode", "9"][..]] {
                let out = run(options, &[mode]).output().unwrap();
                let (stdout, report) = (text(&out.stdout), text(&out.stderr));
                assert_eq!(
                    out.status.code(),
                    Some(128 + libc::SIGTERM),
                    "{mode} {round} {options:?}:\n{report}"
                );
                assert!(!stdout.contains("went on"), "{mode} {round}: {stdout}");
                assert!(has_leak(&report, 4242), "{mode} {round}:\n{report}");
            }
        }
    }
}

/// Under `aclalloc run`, `sig` sent to the program (`to_launcher`: to the
/// launcher) ends it with the report complete, and the launcher exits with
/// 128+N (`error_exitcode`: with `--error-exitcode 9` given, which a signal
/// overrides).
fn stopped_from_outside(sig: i32, to_launcher: bool, error_exitcode: bool) {
    let options: &[&str] = if error_exitcode {
        &["--error-exitcode", "9"]
    } else {
        &[]
    };
    let (mut launcher, pid) = started(run(options, &["wait"]).stderr(Stdio::piped()));
    let target = if to_launcher {
        launcher.id() as i32
    } else {
        pid
    };
    kill(target, sig);
    let status = wait(&mut launcher, "the launcher");
    let mut report = String::new();
    std::io::Read::read_to_string(&mut launcher.stderr.take().unwrap(), &mut report).unwrap();
    assert_eq!(status.code(), Some(128 + sig), "signal {sig}:\n{report}");
    assert!(has_leak(&report, 4242), "signal {sig}:\n{report}");
}

#[test]
fn a_signal_from_outside_ends_the_program_after_its_report() {
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
        stopped_from_outside(sig, false, false);
    }
    stopped_from_outside(libc::SIGTERM, false, true);
}

#[test]
fn sigterm_to_the_launcher_goes_to_the_program_which_reports() {
    stopped_from_outside(libc::SIGTERM, true, false);
    stopped_from_outside(libc::SIGHUP, true, false);
    stopped_from_outside(libc::SIGTERM, true, true);
}

#[test]
fn sigterm_from_outside_ends_a_program_running_alone() {
    let dir = common::scratch("exit_paths_alone_wait");
    let report = dir.join("report.txt");
    let (mut child, pid) = started(&mut alone("wait", &report));
    kill(pid, libc::SIGTERM);
    let status = wait(&mut child, "the program");
    assert_eq!(status.signal(), Some(libc::SIGTERM));
    assert!(has_leak(&std::fs::read_to_string(&report).unwrap(), 4242));
}

// --- aclalloc run's files ---

#[test]
fn a_relative_tmpdir_survives_a_chdir_in_the_program() {
    let dir = common::scratch("exit_paths_relative_tmpdir");
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    let out = run(&["--error-exitcode", "9"], &["chdir"])
        .current_dir(&dir)
        .env("TMPDIR", "tmp")
        .output()
        .unwrap();
    let report = text(&out.stderr);
    assert!(has_leak(&report, 4242), "{report}");
    assert_eq!(out.status.code(), Some(9), "{report}");
}

// --- The history ---

#[test]
fn a_history_too_large_is_refused_before_the_program_starts() {
    let out = run(&["--history", "100000000000"], &["chdir"])
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--history 100000000000") && stderr.contains("ask for fewer events"),
        "{stderr}"
    );
    assert!(!text(&out.stdout).contains("ready"), "the program ran");
}

#[test]
fn a_history_too_large_from_the_environment_leaves_the_pools_working() {
    let dir = common::scratch("exit_paths_history_env");
    let out = alone("default", &dir.join("report.txt"))
        .env("ACLALLOC_RECORD_HISTORY", "100000000000")
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("default pool: 0"), "{stdout}");
    assert!(
        stderr.contains("ACLALLOC_RECORD_HISTORY=100000000000") && stderr.contains("no history"),
        "{stderr}"
    );
}

#[test]
fn a_leaked_block_whose_address_was_never_asked_is_in_the_history_and_the_page() {
    let dir = common::scratch("exit_paths_unaddressed");
    let (json, html) = (dir.join("run.json"), dir.join("run.html"));
    let out = run(
        &[
            "--history",
            "1000",
            "--json",
            json.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
        ],
        &["unaddressed"],
    )
    .output()
    .unwrap();
    let report = text(&out.stderr);
    assert!(out.status.success() && has_leak(&report, 12345), "{report}");
    let snapshot: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let trace = snapshot["device_traces"][0].as_array().unwrap();
    assert!(
        trace
            .iter()
            .any(|e| e["action"] == "alloc" && e["size"] == 12345),
        "{snapshot}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    let start = page.find("id=\"aclalloc-data\">").unwrap() + "id=\"aclalloc-data\">".len();
    let end = start + page[start..].find("</script>").unwrap();
    let data: serde_json::Value = serde_json::from_str(&page[start..end]).unwrap();
    let allocs = &data["devices"][0]["allocs"];
    let sizes = allocs["size"].as_array().unwrap();
    let at = sizes
        .iter()
        .position(|s| *s == 12345)
        .unwrap_or_else(|| panic!("{data}"));
    // Drawn from its allocation in the trace to the end, not as made before it.
    assert!(allocs["start"][at].as_i64().unwrap() >= 0, "{data}");
    assert_eq!(allocs["end"][at], -1, "{data}");
}

// --- exec ---

#[test]
fn what_was_recorded_before_an_exec_is_reported() {
    // execle gives the new image an environment of only PATH: it keeps the
    // launcher's variables all the same, so it reports too.
    let family = [
        "execv", "execve", "execvp", "execvpe", "fexecve", "execl", "execlp", "execle",
    ];
    for how in family {
        let out = run(&["--error-exitcode", "9"], &["exec", how])
            .output()
            .unwrap();
        let (stdout, report) = (text(&out.stdout), text(&out.stderr));
        assert!(!stdout.contains("went on"), "{how}: {stdout}");
        assert!(has_leak(&report, 4242), "{how}:\n{report}");
        // The new image's report too, after the replaced one's.
        assert_eq!(
            report.matches("allocator tracking report").count(),
            2,
            "{how}:\n{report}"
        );
        assert!(
            report.contains("image 1 (until its exec)"),
            "{how}:\n{report}"
        );
        assert_eq!(out.status.code(), Some(9), "{how}:\n{report}");
    }
}

#[test]
fn an_exec_alone_writes_the_replaced_images_report_beside_the_new_ones() {
    let dir = common::scratch("exit_paths_exec_alone");
    let report = dir.join("report.txt");
    // The preload object takes exec; the library is preloaded too, so that
    // /bin/true has it and writes its own report.
    let out = alone("exec", &report)
        .env("LD_PRELOAD", preload())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let before = std::fs::read_to_string(dir.join("report.txt.before-exec-0")).unwrap();
    assert!(has_leak(&before, 4242), "{before}");
    let after = std::fs::read_to_string(&report).unwrap();
    assert!(!has_leak(&after, 4242), "{after}");
}

/// The launcher's objects, for LD_PRELOAD: the preload object, then the library.
fn preload() -> String {
    let dir = common::lib_dir();
    format!(
        "{}:{}",
        dir.join("libaclalloc_preload.so").display(),
        dir.join("libaclalloc.so").display()
    )
}

#[test]
fn an_exec_alone_without_the_preload_object_writes_no_report_before_it() {
    // The library alone takes no libc function: a linked program's exec is
    // libc's, and only the new image reports.
    let dir = common::scratch("exit_paths_exec_linked");
    let report = dir.join("report.txt");
    let out = alone("exec", &report).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!dir.join("report.txt.before-exec-0").exists());
}

#[test]
fn a_program_started_by_spawn_system_or_popen_is_tracked_too() {
    // posix_spawn and posix_spawnp are given an environment of only PATH;
    // system and popen use the process's. Each child leaks as its parent
    // does, so both leaks are in the run's reports.
    for how in ["posix_spawn", "posix_spawnp", "system", "popen"] {
        let out = run(&["--error-exitcode", "9"], &["spawn", how])
            .output()
            .unwrap();
        let (stdout, report) = (text(&out.stdout), text(&out.stderr));
        assert!(stdout.contains("went on after plain"), "{how}: {stdout}");
        assert!(stdout.contains("went on after spawn"), "{how}: {stdout}");
        assert_eq!(report.matches("size=4242 ").count(), 2, "{how}:\n{report}");
        assert_eq!(out.status.code(), Some(9), "{how}:\n{report}");
    }
}

#[test]
fn a_failed_exec_or_a_forked_childs_exec_leaves_one_report_per_image() {
    for mode in ["exec-missing", "fork-exec"] {
        let out = run(&[], &[mode]).output().unwrap();
        let (stdout, report) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "{mode}: {stdout}\n{report}");
        assert!(stdout.contains("went on"), "{mode}: {stdout}");
        assert!(!report.contains("until its exec"), "{mode}:\n{report}");
        // The program's leak once: not again from the forked child.
        assert_eq!(report.matches("size=4242 ").count(), 1, "{mode}:\n{report}");
    }
}
