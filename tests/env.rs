//! The environment variables, end to end: every variable the code reads is
//! in the table of docs/ENVIRONMENT.md, and the host runtime's configuration
//! refuses bad values through the C ABI with a message naming them. The
//! runtime reads its variables once per process, so each case runs this
//! binary again as a child (`child_reads_the_runtime_configuration`, a no-op
//! unless `ENV_TEST_CHILD` is set).

mod common;

use aclalloc::base::error::*;
use aclalloc::ffi::cann::runtime::aclrtGetDeviceCount;
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::process::Command;

/// Quoted `"ACLALLOC_..."` names in the Rust files under `dir`.
fn names_in(dir: &Path, names: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            names_in(&path, names);
        } else if path.extension() == Some(OsStr::new("rs")) {
            let text = std::fs::read_to_string(&path).unwrap();
            for piece in text.split("\"ACLALLOC_").skip(1) {
                let name: String = piece
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                if piece[name.len()..].starts_with('"') {
                    names.insert(format!("ACLALLOC_{name}"));
                }
            }
        }
    }
}

#[test]
fn every_variable_the_code_reads_is_in_the_documented_table() {
    let root = common::root();
    let mut read = BTreeSet::new();
    names_in(&root.join("src"), &mut read);
    names_in(&root.join("crates"), &mut read);
    names_in(&root.join("fuzz/fuzz_targets"), &mut read);
    let build = std::fs::read_to_string(root.join("build.rs")).unwrap();
    assert!(build.contains("\"ACLALLOC_UPDATE_HEADER\""));
    read.insert("ACLALLOC_UPDATE_HEADER".into());
    assert!(
        read.contains("ACLALLOC_ALLOC_CONF"),
        "the scan finds names: {read:?}"
    );

    let page =
        std::fs::read_to_string(root.join("docs/ENVIRONMENT.md")).expect("docs/ENVIRONMENT.md");
    let listed: BTreeSet<String> = page
        .lines()
        .filter_map(|l| l.strip_prefix("| `ACLALLOC_"))
        .map(|rest| format!("ACLALLOC_{}", rest.split('`').next().unwrap()))
        .collect();
    assert_eq!(
        read, listed,
        "the code's variables and the table of docs/ENVIRONMENT.md differ"
    );
}

/// In a child: the device count, or the failure and its message, on stdout.
#[test]
fn child_reads_the_runtime_configuration() {
    if std::env::var_os("ENV_TEST_CHILD").is_none() {
        return;
    }
    let mut count = 0u32;
    let code = unsafe { aclrtGetDeviceCount(&mut count) };
    if code == ACL_SUCCESS {
        println!("CHILD count={count}");
    } else {
        println!("CHILD code={code} message={}", common::message());
    }
}

/// In a child: the SoC name the host runtime reports, on stdout.
#[test]
fn child_reads_the_soc_name() {
    if std::env::var_os("ENV_TEST_CHILD").is_none() {
        return;
    }
    let name = aclalloc::ffi::cann::device_info::aclrtGetSocName();
    // SAFETY: a NUL-terminated string that lives as long as the process.
    let name = unsafe { std::ffi::CStr::from_ptr(name) };
    println!("CHILD soc={}", name.to_string_lossy());
}

#[test]
fn the_soc_name_is_the_variables_when_valid() {
    let soc = |value: &[u8]| {
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_reads_the_soc_name", "--nocapture"])
            .env("ENV_TEST_CHILD", "1")
            .env("ACLALLOC_SOC_NAME", OsStr::from_bytes(value))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let line = stdout
            .lines()
            .find_map(|l| l.strip_prefix("CHILD soc="))
            .unwrap_or_else(|| panic!("no CHILD line: {stdout}"))
            .to_string();
        (line, stderr)
    };
    assert_eq!(soc(b"Ascend910_9362").0, "Ascend910_9362");
    let (name, stderr) = soc(b"bad\tname");
    assert_eq!(name, "aclalloc-host");
    assert!(stderr.contains("ACLALLOC_SOC_NAME"), "{stderr}");
    assert_eq!(soc(&[b'x'; 64]).0, "aclalloc-host", "too long");
}

fn child(variable: &str, value: &[u8]) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_reads_the_runtime_configuration",
            "--nocapture",
        ])
        .env("ENV_TEST_CHILD", "1")
        .env_remove("ACLALLOC_DEVICE_COUNT")
        .env_remove("ACLALLOC_DEVICE_MEMORY")
        .env(variable, OsStr::from_bytes(value))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("CHILD "))
        .unwrap_or_else(|| panic!("no CHILD line: {stdout}"))
        .to_string()
}

#[test]
fn the_runtime_configuration_is_read_by_the_rules_and_refused_with_its_reason() {
    assert_eq!(child("ACLALLOC_DEVICE_COUNT", b" 3 "), "count=3");
    assert_eq!(
        child("ACLALLOC_DEVICE_COUNT", b""),
        "count=1",
        "blank: the default"
    );
    assert_eq!(child("ACLALLOC_DEVICE_MEMORY", b"64mib"), "count=1");
    let refused = |variable: &str, value: &[u8], reason: &str| {
        assert_eq!(
            child(variable, value),
            format!(
                "code={ACL_ERROR_INVALID_PARAM} message=aclrtGetDeviceCount failed. Environment variable {variable} is invalid. Reason: {reason}."
            )
        );
    };
    let count = "accepted: a whole number from 1 to 64";
    refused(
        "ACLALLOC_DEVICE_COUNT",
        b"two",
        &format!("the value \"two\" is not accepted; {count}"),
    );
    refused(
        "ACLALLOC_DEVICE_COUNT",
        b"65",
        &format!("the value \"65\" is not accepted; {count}"),
    );
    refused(
        "ACLALLOC_DEVICE_COUNT",
        b"\xff2",
        &format!("the value \"\u{fffd}2\" is not UTF-8 text; {count}"),
    );
    let memory = "accepted: a size of at least 4KiB: bytes, or a whole number with a binary unit: K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB (16GiB, 512MiB)";
    refused(
        "ACLALLOC_DEVICE_MEMORY",
        b"16 parsecs",
        &format!("the value \"16 parsecs\" is not accepted; {memory}"),
    );
    refused(
        "ACLALLOC_DEVICE_MEMORY",
        b"1.5GiB",
        &format!("the value \"1.5GiB\" is not accepted; {memory}"),
    );
}
