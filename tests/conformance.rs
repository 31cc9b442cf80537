//! Builds the shared conformance suite (`../shared/conformance`) against the
//! library of this test run and requires it to end with "0 failed".

mod common;

use std::process::Command;

#[test]
fn shared_conformance_suite_passes() {
    let suite = common::root().join("../shared/conformance/acl_allocator_conformance.c");
    assert!(
        suite.exists(),
        "the conformance suite is expected at {} (the project's shared/ folder beside the repository)",
        suite.display()
    );
    let dir = common::scratch("conformance");
    let binary = dir.join("acl_conformance");
    common::compile("cc", "c11", &[&suite], &binary, &[]);
    let output = Command::new(&binary).output().expect("run the suite");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last = stdout.lines().last().unwrap_or_default();
    println!("conformance: {last}");
    assert!(
        output.status.success() && last.ends_with(" 0 failed"),
        "conformance suite: {last}\n{stderr}"
    );
}
