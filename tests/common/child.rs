//! Tests with several real processes: the test binary runs itself again as
//! a child in a role (its `child_role` test, ignored in the parent's run),
//! told what to do through environment variables, and both sides talk in
//! lines over the child's stdin and stdout.

use aclalloc::base::error::{ACL_ERROR_REPEAT_INITIALIZE, ACL_SUCCESS};
use aclalloc::ffi::cann::runtime::{aclInit, aclrtSetDevice};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::{Mutex, MutexGuard};

static SERIAL: Mutex<()> = Mutex::new(());

/// One test of the binary at a time (they share the process's runtime and
/// exports), with the runtime initialized and device 0 current.
pub fn init() -> MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: a NULL configuration path is allowed.
    let rc = unsafe { aclInit(std::ptr::null()) };
    assert!(rc == ACL_SUCCESS || rc == ACL_ERROR_REPEAT_INITIALIZE);
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    guard
}

/// In a child: the role and the argument the parent gave it in
/// `{prefix}_ROLE` and `{prefix}_ARG`; `None` in the parent's own run.
pub fn role(prefix: &str) -> Option<(String, String)> {
    let role = std::env::var(format!("{prefix}_ROLE")).ok()?;
    let arg = std::env::var(format!("{prefix}_ARG")).unwrap_or_default();
    Some((role, arg))
}

/// This test binary run as a child in `role` with `arg` (in
/// `{prefix}_ROLE` and `{prefix}_ARG`, see [`role`]); it talks over
/// stdin/stdout.
pub fn spawn(prefix: &str, role: &str, arg: &str) -> (Child, BufReader<ChildStdout>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_role",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(format!("{prefix}_ROLE"), role)
        .env(format!("{prefix}_ARG"), arg)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    (child, out)
}

/// The rest of the next line a child printed holding `tag` and a space.
pub fn expect(out: &mut BufReader<ChildStdout>, tag: &str) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the child ended before {tag}"
        );
        // The harness may print its own text before the first line.
        if let Some(at) = line.find(&format!("{tag} ")) {
            return line[at + tag.len()..].trim().to_owned();
        }
    }
}

/// Sends the child one line.
pub fn say(child: &mut Child, line: &str) {
    let stdin = child.stdin.as_mut().unwrap();
    writeln!(stdin, "{line}").unwrap();
    stdin.flush().unwrap();
}

/// In a child: the next line the parent sent.
pub fn wait_line() -> String {
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    line.trim().to_owned()
}
