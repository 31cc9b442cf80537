//! A pluggable allocator's function that throws a C++ exception, reached
//! through the C functions and through the descriptor callbacks, on a
//! thread's first call (the slow path) and on the hot path after it: the
//! process ends at once (SIGABRT) with one line naming the function, its
//! symbol and its library; the exception never crosses the library.

mod common;

use std::os::unix::process::ExitStatusExt;
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

/// Runs the program with the plugin throwing on call `at`; the process
/// must abort after printing `pair {pair}` and name `function`.
fn aborts_naming(exe: &Path, so: &Path, how: &str, at: u32, pair: u32, function: &str) {
    let out = Command::new(exe)
        .arg(so)
        .arg(how)
        .env("THROWING_CALL", at.to_string())
        .output()
        .expect("run the program");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let context = format!("{how}, call {at}:\n{stdout}\n{stderr}");
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{context}");
    let last = stdout.lines().last().unwrap_or_default();
    assert_eq!(last, format!("pair {pair}"), "{context}");
    let line = stderr
        .lines()
        .find(|l| l.contains("did not return normally"))
        .unwrap_or_else(|| panic!("no line naming the function: {context}"));
    assert!(line.contains(function), "{line}");
    assert!(line.contains(&so.display().to_string()), "{line}");
    assert!(
        line.contains("catch exceptions inside the function"),
        "{line}"
    );
}

#[test]
fn a_throwing_plugin_function_aborts_with_its_name_through_the_c_functions() {
    let (so, exe) = build("c");
    // Calls alternate alloc, free: call 1 is the first pair's alloc (the
    // thread's first pin: the slow path), calls 3 and 4 the second pair's
    // (the hot path), call 6 the third pair's free.
    aborts_naming(
        &exe,
        &so,
        "c",
        1,
        1,
        "alloc function (allocSymbol) throwing_malloc",
    );
    aborts_naming(
        &exe,
        &so,
        "c",
        3,
        2,
        "alloc function (allocSymbol) throwing_malloc",
    );
    aborts_naming(
        &exe,
        &so,
        "c",
        4,
        2,
        "free function (freeSymbol) throwing_free",
    );
    aborts_naming(
        &exe,
        &so,
        "c",
        6,
        3,
        "free function (freeSymbol) throwing_free",
    );
    // Without a throw, every pair returns.
    let out = Command::new(&exe).arg(&so).arg("c").output().unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn a_throwing_plugin_function_aborts_with_its_name_through_the_descriptor() {
    let (so, exe) = build("launch");
    aborts_naming(
        &exe,
        &so,
        "launch",
        1,
        1,
        "alloc function (allocSymbol) throwing_malloc",
    );
    aborts_naming(
        &exe,
        &so,
        "launch",
        3,
        2,
        "alloc function (allocSymbol) throwing_malloc",
    );
    aborts_naming(
        &exe,
        &so,
        "launch",
        6,
        3,
        "free function (freeSymbol) throwing_free",
    );
    let out = Command::new(&exe).arg(&so).arg("launch").output().unwrap();
    assert!(out.status.success(), "{out:?}");
}
