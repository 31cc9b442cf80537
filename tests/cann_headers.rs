//! aclalloc.h next to CANN's headers: a program including CANN's
//! `<acl/acl.h>` (here a CANN-shaped fixture, first on the include path) and
//! `<aclalloc.h>`, in either order, compiles as C and C++ with warnings as
//! errors and runs on the library; the same program builds against
//! `include/` alone.

mod common;

use std::path::Path;
use std::process::Command;

fn build_and_run(compiler: &str, std: &str, cann_first: bool, aclalloc_first: bool) {
    let root = common::root();
    let lib = common::lib_dir();
    let name = format!(
        "{compiler}-{}-{}",
        if cann_first { "cann" } else { "ours" },
        if aclalloc_first {
            "aclalloc-first"
        } else {
            "acl-first"
        }
    );
    let dir = common::scratch(&format!("cann_headers/{name}"));
    let binary = dir.join("program");
    let language = if compiler == "cc" { "c" } else { "c++" };
    let mut cmd = Command::new(compiler);
    cmd.arg(format!("-std={std}"))
        .args(["-Wall", "-Wextra", "-Werror"]);
    if cann_first {
        cmd.arg("-I").arg(root.join("tests/cann_fixture/include"));
    }
    cmd.arg("-I").arg(root.join("include"));
    if aclalloc_first {
        cmd.arg("-DACLALLOC_FIRST");
    }
    let status = cmd
        .args(["-x", language])
        .arg(root.join("tests/cann_fixture/pool_and_tracking.c"))
        .args(["-x", "none", "-o"])
        .arg(&binary)
        .arg("-L")
        .arg(&lib)
        .args(["-laclalloc", "-lpthread"])
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .status()
        .unwrap_or_else(|e| panic!("could not run {compiler}: {e}"));
    assert!(status.success(), "{name}: {compiler} failed");
    let out = Command::new(&binary).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let headers = if cann_first {
        "headers: cann fixture"
    } else {
        "headers: aclalloc include/"
    };
    assert!(
        out.status.success() && stdout == format!("{headers}\nok\n"),
        "{name}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn cann_headers_then_aclalloc_h() {
    build_and_run("cc", "c11", true, false);
    build_and_run("c++", "c++17", true, false);
}

#[test]
fn aclalloc_h_then_cann_headers() {
    build_and_run("cc", "c11", true, true);
    build_and_run("c++", "c++17", true, true);
}

#[test]
fn both_orders_against_include_alone() {
    for aclalloc_first in [false, true] {
        build_and_run("cc", "c11", false, aclalloc_first);
        build_and_run("c++", "c++17", false, aclalloc_first);
    }
}

/// Our generated include/acl/*.h keep CANN's include guards and shapes, so
/// whichever copy is found first, the other one's guard stops a second
/// definition. Checked on the text against the fixture, which mirrors CANN.
#[test]
fn generated_acl_headers_use_canns_guards_and_shapes() {
    let root = common::root();
    for file in [
        "acl.h",
        "acl_base.h",
        "acl_rt.h",
        "acl_rt_allocator.h",
        "acl_rt_memory_soma.h",
    ] {
        let ours = read(&root.join("include/acl").join(file));
        let cann = read(&root.join("tests/cann_fixture/include/acl").join(file));
        let guard = |text: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix("#ifndef ").map(str::to_owned))
                .unwrap()
        };
        assert_eq!(guard(&ours), guard(&cann), "include guard of acl/{file}");
    }
    let rt = read(&root.join("include/acl/acl_rt.h"));
    for shape in [
        "typedef enum aclrtMemcpyKind {",
        "} aclrtMemcpyKind;",
        "typedef enum aclrtMemMallocPolicy {",
        "typedef enum aclrtMemAttr {",
        "ACL_MEM_ACCESS_USER_SPACE_READONLY = 0x100000,",
        "#define ACL_STREAM_FAST_LAUNCH 0x00000001U",
        "#define ACL_STREAM_DEVICE_USE_ONLY 0x00000020U",
    ] {
        assert!(rt.contains(shape), "acl_rt.h lacks `{shape}`");
    }
    let base = read(&root.join("include/acl/acl_base.h"));
    for shape in [
        "typedef int aclError;",
        "static const int ACL_SUCCESS = 0;",
        "static const int ACL_ERROR_INVALID_PARAM = 100000;",
        // Where CANN declares them: acl_base.h, not acl_rt.h.
        "typedef enum aclDataType {",
        "typedef uint16_t aclFloat16;",
        "size_t aclDataTypeSize(aclDataType dataType);",
        "aclFloat16 aclFloatToFloat16(float value);",
    ] {
        assert!(base.contains(shape), "acl_base.h lacks `{shape}`");
    }
    assert!(
        !rt.contains("typedef enum aclDataType {"),
        "aclDataType twice"
    );
}

/// The enum values in include/acl/acl_rt.h are the ones the library uses.
#[test]
fn enum_values_match_the_library() {
    use aclalloc::ffi::cann::types::*;
    let rt = read(&common::root().join("include/acl/acl_rt.h"));
    for (name, value) in [
        ("ACL_MEMCPY_DEVICE_TO_HOST", ACL_MEMCPY_DEVICE_TO_HOST),
        (
            "ACL_MEMCPY_INTER_DEVICE_TO_DEVICE",
            ACL_MEMCPY_INTER_DEVICE_TO_DEVICE,
        ),
        (
            "ACL_MEM_MALLOC_HUGE1G_ONLY_P2P",
            ACL_MEM_MALLOC_HUGE1G_ONLY_P2P,
        ),
        ("ACL_HBM_MEM_P2P_HUGE1G", ACL_HBM_MEM_P2P_HUGE1G),
        ("ACL_MEM_P2P_HUGE1G", ACL_MEM_P2P_HUGE1G),
    ] {
        assert!(
            rt.contains(&format!("    {name} = {value},")),
            "{name} is not {value} in acl_rt.h"
        );
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// CANN's own sample `example/3_memory_advanced/allocator/0_custom_allocator`
/// (hicann/runtime) compiles unmodified against include/ and runs on the
/// library. Its source is under the CANN Open Software License, so it is not
/// copied into this repository: point `ACLALLOC_CANN_EXAMPLES` at a checkout's
/// `example/` directory and run this test with `--ignored`.
#[test]
#[ignore = "needs CANN's examples: ACLALLOC_CANN_EXAMPLES=<hicann/runtime>/example"]
fn canns_custom_allocator_sample_builds_unmodified_and_runs() {
    let examples = std::env::var_os("ACLALLOC_CANN_EXAMPLES").expect(
        "set ACLALLOC_CANN_EXAMPLES to the example/ directory of a hicann/runtime checkout",
    );
    let examples = Path::new(&examples);
    let sample = examples.join("3_memory_advanced/allocator/0_custom_allocator/main.cpp");
    assert!(sample.is_file(), "no {}", sample.display());
    let lib = common::lib_dir();
    let binary = common::scratch("cann_sample").join("main");
    let status = Command::new("c++")
        .args(["-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror"])
        .arg("-I")
        .arg(common::root().join("include"))
        .arg("-I")
        .arg(examples)
        .arg(&sample)
        .arg("-o")
        .arg(&binary)
        .arg("-L")
        .arg(&lib)
        .arg("-laclalloc")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .status()
        .unwrap();
    assert!(
        status.success(),
        "CANN's sample does not compile against include/"
    );
    let out = Command::new(&binary).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("allocCount=2 freeCount=2"), "{stdout}");
}
