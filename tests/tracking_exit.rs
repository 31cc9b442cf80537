//! The report at exit: written when tracking is on at exit or was asked for
//! by `ACLALLOC_TRACK`; not repeated after a program that turned tracking on
//! itself wrote its report and turned tracking off.

mod common;

use std::process::Command;

const PROGRAM: &str = r#"
#include <string.h>
#include "acl/acl.h"
#include "aclalloc.h"
int main(int argc, char **argv) {
    if (aclallocTrackingSetEnabled(1) != ACL_SUCCESS) return 1;
    if (argc > 1 && strcmp(argv[1], "report-then-off") == 0) {
        if (aclallocTrackingWriteReport(NULL) != ACL_SUCCESS) return 1;
        if (aclallocTrackingSetEnabled(0) != ACL_SUCCESS) return 1;
    }
    return 0;
}
"#;

/// How many reports the program writes to stderr in `mode`.
fn reports(mode: &str, from_env: bool) -> usize {
    let dir = common::scratch(&format!("tracking_exit_{mode}_{from_env}"));
    let source = dir.join("program.c");
    std::fs::write(&source, PROGRAM).unwrap();
    let binary = dir.join("program");
    common::compile("cc", "c11", &[&source], &binary, &[]);
    let mut command = Command::new(&binary);
    command.arg(mode).env_remove("ACLALLOC_TRACK_REPORT");
    if from_env {
        command.env("ACLALLOC_TRACK", "1");
    } else {
        command.env_remove("ACLALLOC_TRACK");
    }
    let out = command.output().unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stderr)
        .matches("allocator tracking report")
        .count()
}

#[test]
fn report_at_exit_while_tracking_is_on() {
    assert_eq!(reports("stay-on", false), 1);
}

#[test]
fn no_second_report_after_the_program_turned_tracking_off() {
    assert_eq!(reports("report-then-off", false), 1);
}

#[test]
fn aclalloc_track_always_gets_its_report_at_exit() {
    assert_eq!(reports("report-then-off", true), 2);
}
