//! Tagged regions in front of a runtime that is not aclalloc's: the
//! stand-in vendor runtime of tests/vendor and region_app.c, a program that
//! links only the runtime and allocates its own memory (aclrtMalloc, and a
//! torch_npu-style expandable segment) inside a region, then sleeps and
//! wakes it. Run under `aclalloc run` and with libaclalloc preloaded: the
//! region's memory is made with the runtime's virtual-memory calls, sleep
//! gives every page back to it, copies of sleeping memory are refused
//! naming the tag, contents survive at the same addresses, a short wake
//! leaves nothing allocated, and frees work asleep (the program checks each
//! through the stand-in's counters and prints a line per check).

mod common;

use common::vendor::{self, text};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;

const CHECKS: [&str; 7] = [
    "unmatched end refused",
    "region memory made with the runtime's virtual-memory calls",
    "asleep: memory given back, copies refused naming the tag",
    "awake: contents restored at the same addresses",
    "short wake rolled back",
    "100 cycles",
    "freed asleep",
];

/// region_app linked against the stand-in runtime, built once.
fn app() -> &'static PathBuf {
    static APP: OnceLock<PathBuf> = OnceLock::new();
    APP.get_or_init(|| {
        let dir = common::scratch("region_vendor");
        vendor::build_runtime(&dir.join("libfakeascendcl.so"), None);
        let app = dir.join("region_app");
        let (search, rpath) = (
            format!("-L{}", dir.display()),
            format!("-Wl,-rpath,{}", dir.display()),
        );
        vendor::cc(&[
            vendor::dir().join("region_app.c").as_os_str(),
            "-o".as_ref(),
            app.as_os_str(),
            search.as_ref(),
            "-lfakeascendcl".as_ref(),
            rpath.as_ref(),
            "-ldl".as_ref(),
        ]);
        app
    })
}

fn passed(how: &str, out: &Output) {
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "{how}: exit {:?}\n{stdout}\n{}",
        out.status.code(),
        text(&out.stderr)
    );
    for check in CHECKS {
        assert!(
            stdout.lines().any(|l| l == check),
            "{how}: no {check:?}\n{stdout}"
        );
    }
}

#[test]
fn a_region_sleeps_and_wakes_in_front_of_the_vendor_runtime_under_aclalloc_run() {
    let out = vendor::under_aclalloc(&[], &[app()]);
    passed("aclalloc run", &out);
}

#[test]
fn a_region_sleeps_and_wakes_in_front_of_the_vendor_runtime_preloaded() {
    let out = Command::new(app())
        .env("LD_PRELOAD", common::lib_dir().join("libaclalloc.so"))
        .env_remove("ACLALLOC_TRACK")
        .output()
        .unwrap();
    passed("LD_PRELOAD", &out);
}

#[test]
fn without_aclalloc_the_program_says_what_it_lacks() {
    // The program needs aclalloc's exports: alone it stops before any check.
    let out = vendor::direct(&[app()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("aclallocRegionBegin is not loaded"));
}
