//! Builds the shared conformance suite (`../shared/conformance`) against the
//! library of this test run and requires it to end with "0 failed".
//!
//! The suite lives beside the repository, not in it: a clone made by a user
//! has none, and there the test says so and passes; in CI (`CI` set) the
//! suite is required.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

const SUITE: &str = "../shared/conformance/acl_allocator_conformance.c";

/// Where the suite is for a checkout at `root`: `Ok(None)` means skip
/// (not there, not CI), `Err` says what is missing when CI requires it.
fn suite_location(root: &Path, ci: bool) -> Result<Option<PathBuf>, String> {
    let suite = root.join(SUITE);
    if suite.exists() {
        return Ok(Some(suite));
    }
    let why = format!(
        "the shared conformance suite is not at {} (the project's shared/ folder beside the repository)",
        suite.display()
    );
    if ci {
        Err(format!(
            "{why}; CI is set, so it is required: check out shared/ next to the repository"
        ))
    } else {
        Ok(None)
    }
}

/// `CI` set to anything but empty, `0` or `false`, as CI services do.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false"))
}

#[test]
fn shared_conformance_suite_passes() {
    let suite = match suite_location(&common::root(), in_ci()) {
        Ok(Some(suite)) => suite,
        Ok(None) => {
            eprintln!(
                "SKIPPED shared_conformance_suite_passes: no {SUITE} beside this checkout \
                 (a user's clone has none; CI requires it)"
            );
            return;
        }
        Err(message) => panic!("{message}"),
    };
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

/// A checkout with and without a shared/ folder beside it, in and out of CI.
#[test]
fn missing_suite_is_skipped_outside_ci_and_required_in_ci() {
    let base = common::scratch("conformance_location");
    let root = base.join("repo");
    std::fs::create_dir_all(&root).unwrap();

    assert_eq!(suite_location(&root, false), Ok(None));
    let err = suite_location(&root, true).unwrap_err();
    assert!(
        err.contains("CI is set") && err.contains("acl_allocator_conformance.c"),
        "{err}"
    );

    let shared = base.join("shared/conformance");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::write(
        shared.join("acl_allocator_conformance.c"),
        "int main(void){return 0;}\n",
    )
    .unwrap();
    for ci in [false, true] {
        let found = suite_location(&root, ci).unwrap().expect("found");
        assert!(found.ends_with("shared/conformance/acl_allocator_conformance.c"));
        assert!(found.exists());
    }
}
