//! `scripts/cann-prefix.sh PREFIX` writes an install that CANN-shaped build
//! files accept: a program built with `-I PREFIX/include -L PREFIX/lib64
//! -lascendcl`, as CANN's samples are, runs on the library from that prefix
//! alone.

mod common;

use std::process::Command;

#[test]
fn a_program_linked_with_lascendcl_from_the_prefix_runs() {
    let root = common::root();
    let dir = common::scratch("cann_prefix");
    let prefix = dir.join("prefix");
    let status = Command::new("bash")
        .arg(root.join("scripts/cann-prefix.sh"))
        .arg(&prefix)
        .env("ACLALLOC_LIB", common::lib_dir().join("libaclalloc.so"))
        .status()
        .expect("bash");
    assert!(status.success(), "cann-prefix.sh failed");
    for file in [
        "include/acl/acl.h",
        "include/acl/acl_rt.h",
        "include/aclalloc.h",
        "lib64/libascendcl.so",
        "lib64/libacl_rt.so",
        "lib64/libaclalloc.so",
        "bin/setenv.bash",
        "cmake/ascendc.cmake",
    ] {
        assert!(prefix.join(file).exists(), "{file} missing");
    }
    let lib64 = prefix.join("lib64");
    let program = dir.join("events");
    let status = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
        .arg("-I")
        .arg(prefix.join("include"))
        .arg("-I")
        .arg(root.join("c_examples"))
        .arg(root.join("c_examples/events.c"))
        .arg("-o")
        .arg(&program)
        .arg("-L")
        .arg(&lib64)
        .args(["-lascendcl", "-lpthread"])
        .status()
        .expect("cc");
    assert!(status.success(), "cc failed");
    // The loader finds the library through the prefix only, as setenv.bash says.
    let out = Command::new(&program)
        .env("LD_LIBRARY_PATH", &lib64)
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.ends_with("events: ok\n"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let setenv = std::fs::read_to_string(prefix.join("bin/setenv.bash")).unwrap();
    assert!(setenv.contains(&format!("ASCEND_HOME_PATH=\"{}\"", prefix.display())));
}

#[test]
fn the_operator_library_stand_ins_run_a_captured_add() {
    let root = common::root();
    let dir = common::scratch("cann_prefix_aclnn");
    let prefix = dir.join("prefix");
    let status = Command::new("bash")
        .arg(root.join("scripts/cann-prefix.sh"))
        .arg(&prefix)
        .env("ACLALLOC_LIB", common::lib_dir().join("libaclalloc.so"))
        .status()
        .expect("bash");
    assert!(status.success(), "cann-prefix.sh failed");
    for file in [
        "include/aclnnop/aclnn_add.h",
        "include/aclnnop/aclnn_mul.h",
        "include/aclnn/aclnn_base.h",
        "lib64/libopapi.so",
        "lib64/libnnopbase.so",
    ] {
        assert!(prefix.join(file).exists(), "{file} missing");
    }
    let lib64 = prefix.join("lib64");
    let program = dir.join("aclnn_capture");
    // As the samples link: the runtime and the operator library by path.
    let status = Command::new("c++")
        .args(["-std=c++17", "-Wall", "-Wextra", "-Werror"])
        .arg("-I")
        .arg(prefix.join("include"))
        .arg(root.join("tests/cann_prefix/aclnn_capture.cpp"))
        .arg("-o")
        .arg(&program)
        .arg(lib64.join("libascendcl.so"))
        .arg(lib64.join("libnnopbase.so"))
        .arg(lib64.join("libopapi.so"))
        .status()
        .expect("c++");
    assert!(status.success(), "c++ failed");
    let out = Command::new(&program)
        .env("LD_LIBRARY_PATH", &lib64)
        .output()
        .expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout,
        "105.0 12.0 18.0 24.0\n205.0 12.0 18.0 24.0\naclnn_capture: ok\n"
    );
}
