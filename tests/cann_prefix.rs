//! `scripts/cann-prefix.sh PREFIX` writes an install that CANN-shaped build
//! files accept: a program built with `-I PREFIX/include -L PREFIX/lib64
//! -lascendcl`, as CANN's samples are, runs on the library from that prefix
//! alone.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// `scripts/cann-prefix.sh DIR/prefix` over the library under test.
fn write_prefix(dir: &Path) -> PathBuf {
    let prefix = dir.join("prefix");
    let status = Command::new("bash")
        .arg(common::root().join("scripts/cann-prefix.sh"))
        .arg(&prefix)
        .env("ACLALLOC_LIB", common::lib_dir().join("libaclalloc.so"))
        .status()
        .expect("bash");
    assert!(status.success(), "cann-prefix.sh failed");
    prefix
}

#[test]
fn a_program_linked_with_lascendcl_from_the_prefix_runs() {
    let root = common::root();
    let dir = common::scratch("cann_prefix");
    let prefix = write_prefix(&dir);
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

/// `ascendc_fatbin_library(name sources...)` of the prefix's ascendc.cmake
/// builds the kernel binary a program loads by file name, from the host
/// stand-in named like each kernel source in `ACLALLOC_FATBIN_KERNELS`, at
/// `fatbin/<name>/<name>.o` under the build directory and the install
/// prefix, as CANN's does; a kernel source without a stand-in gives a
/// warning and a binary without its kernels.
#[test]
fn ascendc_fatbin_library_builds_a_loadable_kernel_binary() {
    use aclalloc::base::error::{ACL_ERROR_INVALID_PARAM, ACL_SUCCESS};
    use aclalloc::ffi::cann::kernels::*;
    use std::ffi::CString;
    use std::ptr::null_mut;

    let root = common::root();
    let dir = common::scratch("cann_prefix_fatbin");
    let prefix = write_prefix(&dir);
    let project = dir.join("project");
    std::fs::create_dir_all(&project).unwrap();
    // Kernel sources as a sample names them: only their file names count.
    std::fs::write(
        project.join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.16)\n\
         project(fatbin_check C CXX)\n\
         set(CMAKE_INSTALL_PREFIX \"${CMAKE_CURRENT_LIST_DIR}/out\" CACHE STRING \"\" FORCE)\n\
         include(${ASCENDC_CMAKE_DIR}/ascendc.cmake)\n\
         ascendc_fatbin_library(kernels ../kernel_func/kernel_binary_kernels.c)\n\
         ascendc_fatbin_library(none ../kernel_func/no_stand_in.cpp)\n",
    )
    .unwrap();
    let build = project.join("build");
    let configure = configure_with_prefix(
        &project,
        &build,
        &prefix,
        &[format!(
            "-DACLALLOC_FATBIN_KERNELS={}",
            root.join("c_examples").display()
        )],
    );
    let said = String::from_utf8_lossy(&configure.stderr);
    assert!(configure.status.success(), "{said}");
    assert!(said.contains("no host stand-in no_stand_in.cpp"), "{said}");
    for step in [&["--build"][..], &["--install"][..]] {
        let out = Command::new("cmake")
            .args(step)
            .arg(&build)
            .output()
            .expect("cmake");
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(build.join("fatbin/kernels/kernels.o").exists());
    let installed = project.join("out/fatbin/kernels/kernels.o");
    let empty = project.join("out/fatbin/none/none.o");
    assert!(installed.exists() && empty.exists());

    common::device0();
    let name = CString::new("blocks").unwrap();
    for (path, kernel) in [(&installed, ACL_SUCCESS), (&empty, ACL_ERROR_INVALID_PARAM)] {
        let path = CString::new(path.to_str().unwrap()).unwrap();
        let (mut bin, mut f) = (null_mut(), null_mut());
        // SAFETY: valid strings and out-pointers; handles are looked up.
        unsafe {
            assert_eq!(
                aclrtBinaryLoadFromFile(path.as_ptr(), null_mut(), &mut bin),
                ACL_SUCCESS
            );
            assert_eq!(aclrtBinaryGetFunction(bin, name.as_ptr(), &mut f), kernel);
            assert_eq!(aclrtBinaryUnLoad(bin), ACL_SUCCESS);
        }
    }
}

#[test]
fn the_operator_library_stand_ins_run_a_captured_add() {
    let root = common::root();
    let dir = common::scratch("cann_prefix_aclnn");
    let prefix = write_prefix(&dir);
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

/// `ascendc_library(name type sources...)` of the prefix's ascendc.cmake
/// builds a kernel source's host stand-in from the file of the same name in
/// `ACLALLOC_LIBRARY_KERNELS` (which may include the program's own headers)
/// and the other sources' from `ACLALLOC_HOST_KERNELS`; the program links
/// it as it would the kernels and runs them.
#[test]
fn ascendc_library_takes_a_programs_own_kernel_stand_ins() {
    let dir = common::scratch("cann_prefix_library");
    let prefix = write_prefix(&dir);
    let (project, own, shared) = (dir.join("project"), dir.join("own"), dir.join("shared"));
    for d in [&project, &own, &shared] {
        std::fs::create_dir_all(d).unwrap();
    }
    let write = |path: PathBuf, text: &str| std::fs::write(path, text).unwrap();
    write(project.join("scale.h"), "int Scale(int x);\n");
    // The kernel sources themselves are never compiled: only their names count.
    write(
        project.join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.16)\n\
         project(library_check CXX)\n\
         include(${ASCENDC_CMAKE_DIR}/ascendc.cmake)\n\
         ascendc_library(kernels STATIC scale.cpp ../kernel_func/offset.cpp)\n\
         add_executable(main main.cpp)\n\
         target_link_libraries(main PRIVATE kernels)\n",
    );
    write(
        project.join("main.cpp"),
        "#include <cstdio>\n#include \"scale.h\"\nint Offset(int x);\n\
         int main() { std::printf(\"%d %d\\n\", Scale(3), Offset(3)); return 0; }\n",
    );
    write(
        own.join("scale.cpp"),
        "#include \"scale.h\"\nint Scale(int x) { return 2 * x; }\n",
    );
    write(
        shared.join("shared.cpp"),
        "int Offset(int x) { return x + 10; }\n",
    );
    let build = project.join("build");
    let configure = configure_with_prefix(
        &project,
        &build,
        &prefix,
        &[
            format!("-DACLALLOC_LIBRARY_KERNELS={}", own.display()),
            format!(
                "-DACLALLOC_HOST_KERNELS={}",
                shared.join("shared.cpp").display()
            ),
        ],
    );
    assert!(
        configure.status.success(),
        "{}",
        String::from_utf8_lossy(&configure.stderr)
    );
    let built = Command::new("cmake")
        .arg("--build")
        .arg(&build)
        .output()
        .expect("cmake");
    assert!(
        built.status.success(),
        "{}{}",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
    let out = Command::new(build.join("main"))
        .env("LD_LIBRARY_PATH", prefix.join("lib64"))
        .output()
        .expect("run");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "6 13\n");
}

/// `cmake -S project -B build` with the prefix's CMake modules
/// (`ASCENDC_CMAKE_DIR`, as a sample's own CMake takes them) and `defines`.
fn configure_with_prefix(
    project: &Path,
    build: &Path,
    prefix: &Path,
    defines: &[String],
) -> std::process::Output {
    Command::new("cmake")
        .arg("-S")
        .arg(project)
        .arg("-B")
        .arg(build)
        .arg(format!(
            "-DASCENDC_CMAKE_DIR={}",
            prefix.join("cmake").display()
        ))
        .args(defines)
        .output()
        .expect("cmake")
}
