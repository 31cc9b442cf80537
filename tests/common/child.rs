//! Tests with several real processes: the test binary runs itself again as
//! a child in a role (its `child_role` test, ignored in the parent's run),
//! told what to do through environment variables, and both sides talk in
//! lines over the child's stdin and stdout.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};

/// This test binary run as a child with `env` set; it talks over
/// stdin/stdout.
pub fn spawn(env: &[(&str, &str)]) -> (Child, BufReader<ChildStdout>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_role",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .envs(env.iter().copied())
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
