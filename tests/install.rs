//! The library as a system library: its SONAME, the symbols it exports, and
//! an install into a prefix that a downstream project finds through
//! pkg-config and through CMake's `find_package`.

mod common;

use std::path::Path;
use std::process::Command;

fn run(command: &mut Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("could not run {command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

/// The dynamic symbols `library` defines, without the version-node entries.
fn exported_symbols(library: &Path) -> Vec<String> {
    run(Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(library))
    .lines()
    .filter_map(|line| {
        let mut fields = line.split_whitespace();
        let (_address, kind, name) = (fields.next()?, fields.next()?, fields.next()?);
        (kind != "A").then(|| name.split('@').next().unwrap_or(name).to_string())
    })
    .collect()
}

/// The functions the generated headers declare (aclalloc.h and CANN's
/// include/acl/*.h): `acl...(` outside a typedef.
fn header_functions() -> Vec<String> {
    let header = [
        "aclalloc.h",
        "acl/acl.h",
        "acl/acl_base.h",
        "acl/acl_rt.h",
        "acl/acl_rt_allocator.h",
        "acl/acl_rt_memory_soma.h",
    ]
    .map(|h| std::fs::read_to_string(common::root().join("include").join(h)).unwrap())
    .join("\n");
    header
        .lines()
        .filter(|line| !line.trim_start().starts_with("typedef"))
        .flat_map(|line| {
            line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '('))
                .filter_map(|token| {
                    token
                        .strip_suffix('(')
                        .or(token.split_once('(').map(|t| t.0))
                })
                .filter(|name| name.starts_with("acl"))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn only_acl_functions_are_exported_and_all_declared_ones_are() {
    let library = common::lib_dir().join("libaclalloc.so");
    let exported = exported_symbols(&library);
    println!("{} exported symbols", exported.len());
    for name in &exported {
        let rest = name.strip_prefix("acl").unwrap_or_default();
        assert!(
            rest.starts_with(|c: char| c.is_ascii_alphabetic()),
            "libaclalloc.so exports {name}, which is not an acl*/aclalloc* function"
        );
    }
    let declared = header_functions();
    assert!(declared.len() >= 11, "header functions: {declared:?}");
    for name in &declared {
        assert!(
            exported.contains(name),
            "aclalloc.h declares {name}, but libaclalloc.so does not export it"
        );
    }
    for name in &exported {
        assert!(
            declared.contains(name),
            "{name} is exported but declared in no header"
        );
    }
}

/// The dynamic symbols of the C library the tests link against.
fn libc_symbols() -> Vec<String> {
    let path = run(Command::new("cc").arg("-print-file-name=libc.so.6"));
    let libc = std::path::PathBuf::from(path.trim());
    assert!(libc.is_absolute(), "cc does not know libc.so.6: {path}");
    exported_symbols(&libc)
}

#[test]
fn the_library_takes_no_libc_name_and_the_preload_object_only_the_exec_family() {
    let libc = libc_symbols();
    assert!(
        libc.iter().any(|n| n == "execve"),
        "{} libc symbols",
        libc.len()
    );
    let library = exported_symbols(&common::lib_dir().join("libaclalloc.so"));
    let taken: Vec<_> = library.iter().filter(|n| libc.contains(n)).collect();
    assert!(taken.is_empty(), "libaclalloc.so exports libc's {taken:?}");

    let mut preload = exported_symbols(&common::lib_dir().join("libaclalloc_preload.so"));
    preload.sort();
    let family = [
        "execl",
        "execle",
        "execlp",
        "execv",
        "execve",
        "execvp",
        "execvpe",
        "fexecve",
        "posix_spawn",
        "posix_spawnp",
    ];
    assert_eq!(preload, family);
    assert!(family.iter().all(|n| libc.iter().any(|l| l == n)));
}

#[test]
fn a_linked_program_calls_libcs_exec() {
    let dir = common::scratch("install_libc_exec");
    let program = dir.join("libc_exec");
    let source = common::root().join("tests/service/libc_exec.c");
    common::compile("cc", "c11", &[&source], &program, &["-ldl"]);
    // Tracking on, as it would be from the environment: the exec is still
    // libc's, so the replaced image writes no report before it.
    let report = dir.join("report.txt");
    let out = Command::new(&program)
        .arg("/bin/true")
        .env("ACLALLOC_TRACK", "1")
        .env("ACLALLOC_TRACK_REPORT", &report)
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!dir.join("report.txt.before-exec-0").exists());
}

#[test]
fn soname_carries_the_abi_version() {
    let dynamic = run(Command::new("readelf")
        .arg("-d")
        .arg(common::lib_dir().join("libaclalloc.so")));
    let want = format!("Library soname: [{}]", common::soname());
    assert!(dynamic.contains(&want), "no {want} in:\n{dynamic}");
}

/// A tool this test needs is missing: its `Debug` form is the one line
/// `cargo test` prints for a test that returns it (no panic, no backtrace).
struct Missing(String);

impl std::fmt::Debug for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Ok(true) when every tool (its command, then what is missing and how to
/// install it, as scripts/prereqs.sh says it) is on PATH. A missing one
/// fails the test under CI, and skips it elsewhere, with one line.
fn tools_present(tools: &[(&str, &str)]) -> Result<bool, Missing> {
    let missing: Vec<String> = tools
        .iter()
        .filter(|(name, _)| Command::new(name).arg("--version").output().is_err())
        .map(|(_, missing)| format!("missing: {missing}"))
        .collect();
    if missing.is_empty() {
        return Ok(true);
    }
    let line = missing.join("; ");
    if std::env::var_os("CI").is_some() {
        return Err(Missing(format!("{line} (CI is set: required)")));
    }
    eprintln!("SKIPPED: {line}");
    Ok(false)
}

#[test]
fn installed_prefix_serves_pkg_config_and_find_package() -> Result<(), Missing> {
    if !tools_present(&[
        ("cmake", "cmake (>= 3.16): apt-get install cmake"),
        ("pkg-config", "pkg-config: apt-get install pkg-config"),
    ])? {
        return Ok(());
    }
    let dir = common::scratch("install");
    let prefix = dir.join("prefix");
    run(Command::new(common::root().join("scripts/install.sh"))
        .arg(&prefix)
        .arg("--lib-dir")
        .arg(common::lib_dir()));

    let version = env!("CARGO_PKG_VERSION");
    let lib = prefix.join("lib");
    let real = format!("libaclalloc.so.{version}");
    assert_eq!(
        std::fs::read_link(lib.join("libaclalloc.so")).unwrap(),
        Path::new(&common::soname())
    );
    assert_eq!(
        std::fs::read_link(lib.join(common::soname())).unwrap(),
        Path::new(&real)
    );
    assert!(lib.join(&real).is_file());
    for header in [
        "aclalloc.h",
        "acl/acl.h",
        "acl/acl_base.h",
        "acl/acl_rt.h",
        "acl/acl_rt_allocator.h",
        "acl/acl_rt_memory_soma.h",
        "aclalloc/ge_allocator.h",
    ] {
        assert!(
            prefix.join("include").join(header).is_file(),
            "{header} not installed"
        );
    }
    let expected_output = format!(
        "aclalloc {version} ({}.{}.{}) ok",
        env!("CARGO_PKG_VERSION_MAJOR"),
        env!("CARGO_PKG_VERSION_MINOR"),
        env!("CARGO_PKG_VERSION_PATCH")
    );
    let source = common::root().join("tests/consumer/consumer.c");

    // pkg-config.
    let pkg_config = |args: &[&str]| {
        run(Command::new("pkg-config")
            .env("PKG_CONFIG_PATH", lib.join("pkgconfig"))
            .args(args)
            .arg("aclalloc"))
        .trim()
        .to_string()
    };
    assert_eq!(pkg_config(&["--modversion"]), version);
    let flags = pkg_config(&["--cflags", "--libs"]);
    let binary = dir.join("consumer-pkg-config");
    run(Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
        .arg(&source)
        .arg("-o")
        .arg(&binary)
        .args(flags.split_whitespace())
        .arg(format!("-Wl,-rpath,{}", lib.display())));
    assert_eq!(run(&mut Command::new(&binary)).trim(), expected_output);
    let needed = run(Command::new("readelf").arg("-d").arg(&binary));
    assert!(
        needed.contains(&format!("Shared library: [{}]", common::soname())),
        "the consumer must depend on the SONAME:\n{needed}"
    );

    // CMake's find_package.
    let build = dir.join("cmake-build");
    run(Command::new("cmake")
        .arg("-S")
        .arg(common::root().join("tests/consumer"))
        .arg("-B")
        .arg(&build)
        .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display())));
    run(Command::new("cmake").arg("--build").arg(&build));
    assert_eq!(
        run(&mut Command::new(build.join("consumer"))).trim(),
        expected_output
    );

    // A newer or ABI-incompatible version is refused.
    let refused = dir.join("cmake-refused");
    std::fs::create_dir_all(&refused).unwrap();
    std::fs::write(
        refused.join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.16)\nproject(r NONE)\nfind_package(aclalloc 99 REQUIRED)\n",
    )
    .unwrap();
    let status = Command::new("cmake")
        .arg("-S")
        .arg(&refused)
        .arg("-B")
        .arg(refused.join("build"))
        .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display()))
        .output()
        .unwrap();
    assert!(
        !status.status.success(),
        "find_package(aclalloc 99) must fail"
    );
    Ok(())
}

/// The section names of an ELF file (`readelf -S`).
fn sections(file: &Path) -> String {
    run(Command::new("readelf").args(["-S", "-W"]).arg(file))
}

/// The installed tool runs from the prefix and finds the installed library
/// in ../lib; the library and the tool are stripped unless --no-strip.
#[test]
fn installed_tool_runs_and_binaries_are_stripped() {
    let dir = common::scratch("install_tool");
    let prefix = dir.join("prefix");
    run(Command::new(common::root().join("scripts/install.sh"))
        .arg(&prefix)
        .arg("--lib-dir")
        .arg(common::lib_dir()));
    let tool = prefix.join("bin/aclalloc");
    let library = prefix.join(format!("lib/libaclalloc.so.{}", env!("CARGO_PKG_VERSION")));

    let help = run(Command::new(&tool).arg("--help"));
    assert!(help.contains("../lib/libaclalloc.so relative to that directory"));
    // The preloaded library is the installed one, and it is loaded: the
    // program prints LD_PRELOAD and what its child maps.
    let out = Command::new(&tool)
        .args([
            "run",
            "--",
            "sh",
            "-c",
            "echo \"$LD_PRELOAD\"; grep -m1 -o '/[^ ]*libaclalloc[.]so[^ ]*' /proc/self/maps",
        ])
        .env_remove("ACLALLOC_LIB")
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let installed = library.canonicalize().unwrap();
    let preload = prefix.join("lib/libaclalloc_preload.so");
    let want = format!(
        "{}:{1}\n{1}\n",
        preload.canonicalize().unwrap().display(),
        installed.display()
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), want);

    for file in [&library, &preload, &tool] {
        let table = sections(file);
        // (.debug_gdb_scripts is a loaded section rustc adds, not debug info.)
        for debug in [".debug_info", ".debug_line"] {
            assert!(!table.contains(debug), "{} keeps {debug}", file.display());
        }
        assert!(
            !table.contains(".symtab"),
            "{} keeps its symbol table",
            file.display()
        );
    }
    // Still a working library: its exports are intact.
    assert_eq!(
        exported_symbols(&library),
        exported_symbols(&common::lib_dir().join("libaclalloc.so"))
    );

    let unstripped = dir.join("unstripped");
    run(Command::new(common::root().join("scripts/install.sh"))
        .arg(&unstripped)
        .arg("--lib-dir")
        .arg(common::lib_dir())
        .arg("--no-strip"));
    let kept = unstripped.join(format!("lib/libaclalloc.so.{}", env!("CARGO_PKG_VERSION")));
    assert!(
        sections(&kept).contains(".debug_line"),
        "--no-strip must keep line tables"
    );
    for license in ["LICENSE-MIT", "LICENSE-APACHE"] {
        assert!(prefix.join("share/doc/aclalloc").join(license).is_file());
    }
}
