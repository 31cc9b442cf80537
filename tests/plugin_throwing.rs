//! A pluggable allocator's function that throws a C++ exception, reached
//! through the C functions and through the descriptor callbacks, on a
//! thread's first call (the slow path) and on the hot path after it: the
//! call fails (`ACL_ERROR_BAD_ALLOC`, NULL) with a message naming the
//! function, its symbol, its library and the exception's what(); the
//! exception never crosses the library, and the next calls succeed.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The plugin and the program that drives it, built once per test.
fn build(name: &str) -> (PathBuf, PathBuf) {
    let dir = common::scratch(&format!("plugin-throwing-{name}"));
    let so = dir.join("libthrowing_plugin.so");
    let status = Command::new("c++")
        .args([
            "-std=c++17",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-shared",
            "-fPIC",
        ])
        .arg(common::root().join("tests/plugin_support/throwing_plugin.cpp"))
        .arg("-o")
        .arg(&so)
        .status()
        .expect("run c++");
    assert!(status.success(), "building the throwing plugin failed");
    let exe = dir.join("throwing_main");
    let src = common::root().join("tests/plugin_support/throwing_main.cpp");
    common::compile("c++", "c++17", &[&src], &exe, &[]);
    (so, exe)
}

/// Runs the program with the plugin throwing on call `at` (0: never); it
/// must exit normally. Returns each pair's line and the live block count.
fn run(exe: &Path, so: &Path, how: &str, at: u32) -> (Vec<String>, String) {
    let out = Command::new(exe)
        .arg(so)
        .arg(how)
        .env("THROWING_CALL", at.to_string())
        .output()
        .expect("run the program");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let context = format!(
        "{how}, call {at}:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{:?} {context}", out.status);
    let lines: Vec<String> = stdout.lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 5, "{context}");
    (lines[..4].to_vec(), lines[4].clone())
}

/// `line` reports the pair's codes and names the function and what() it threw.
fn threw(line: &str, codes: &str, function: &str, so: &Path) {
    assert!(line.starts_with(codes), "{line}");
    for part in [
        function,
        &so.display().to_string(),
        "threw a C++ exception: the plugin gives up",
    ] {
        assert!(line.contains(part), "{part} not in: {line}");
    }
}

const ALLOC: &str = "alloc function (allocSymbol) throwing_malloc";
const FREE: &str = "free function (freeSymbol) throwing_free";

#[test]
fn a_throwing_plugin_function_is_an_allocation_failure_through_the_c_functions() {
    let (so, exe) = build("c");
    // Calls alternate alloc, free: call 1 is the first pair's alloc (the
    // thread's first pin: the slow path), calls 3 and 4 the second pair's
    // (the hot path). ACL_ERROR_BAD_ALLOC is 200000; -1: no free was made.
    for (at, pair, codes, function) in [
        (1, 0, "pair 1: 200000 -1 ", ALLOC),
        (3, 1, "pair 2: 200000 -1 ", ALLOC),
        (4, 1, "pair 2: 0 200000 ", FREE),
    ] {
        let (pairs, live) = run(&exe, &so, "c", at);
        threw(&pairs[pair], codes, function, &so);
        for (i, line) in pairs.iter().enumerate().filter(|(i, _)| *i != pair) {
            assert_eq!(line, &format!("pair {}: 0 0 ", i + 1), "call {at}");
        }
        assert_eq!(live, "live 0", "call {at}");
    }
}

#[test]
fn a_throwing_plugin_function_is_an_allocation_failure_through_the_descriptor() {
    let (so, exe) = build("launch");
    for (at, pair) in [(1, 0), (3, 1)] {
        let (pairs, live) = run(&exe, &so, "launch", at);
        let line = &pairs[pair];
        assert!(
            !line.starts_with(&format!("pair {}: 0 ", pair + 1)),
            "{line}"
        );
        threw(line, &format!("pair {}: ", pair + 1), ALLOC, &so);
        for (i, line) in pairs.iter().enumerate().filter(|(i, _)| *i != pair) {
            assert_eq!(line, &format!("pair {}: 0 0 ", i + 1), "call {at}");
        }
        assert_eq!(live, "live 0", "call {at}");
    }
    // A free that throws leaves the block freed and the launches succeed;
    // the message is on whichever thread gave the workspace back.
    let (pairs, live) = run(&exe, &so, "launch", 6);
    for (i, line) in pairs.iter().enumerate() {
        let codes = format!("pair {}: 0 0 ", i + 1);
        assert!(line == &codes || line.contains(FREE), "{line}");
    }
    assert_eq!(live, "live 0");
}
