//! The stand-in vendor runtime of tests/vendor and the programs built on it:
//! compiling them, running them with and without `aclalloc run`, and reading
//! what they print.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// tests/vendor: the stand-in runtime and its applications.
pub fn dir() -> PathBuf {
    super::root().join("tests/vendor")
}

/// Runs `cc` with C11, warnings as errors, and the project's and the vendor's
/// headers on the include path.
pub fn cc(args: &[&OsStr]) {
    let status = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-g"])
        .arg("-I")
        .arg(super::root().join("include"))
        .arg("-I")
        .arg(dir())
        .args(args)
        .status()
        .expect("run cc");
    assert!(status.success(), "cc failed: {args:?}");
}

/// Builds the stand-in runtime (libfakeascendcl.c) as the shared library
/// `lib`, with `soname` when given.
pub fn build_runtime(lib: &Path, soname: Option<&str>) {
    let soname = soname.map(|s| format!("-Wl,-soname,{s}"));
    let mut args: Vec<&OsStr> = vec![
        "-fPIC".as_ref(),
        "-shared".as_ref(),
        "-o".as_ref(),
        lib.as_os_str(),
    ];
    let source = dir().join("libfakeascendcl.c");
    args.push(source.as_os_str());
    args.extend(soname.iter().map(OsStr::new));
    args.extend([OsStr::new("-ldl"), OsStr::new("-lpthread")]);
    cc(&args);
}

/// Builds alloc_app.c (the inference loop) as `output`, linked with the
/// library `link` (`-lNAME`) from `libdir`, where it is also found at run
/// time; `flags` go first (`-fPIC -shared -DALLOC_APP_LIBRARY` for the
/// library form).
pub fn build_alloc_app(output: &Path, libdir: &Path, link: &str, flags: &[&str]) {
    let source = dir().join("alloc_app.c");
    let (search, rpath) = (
        format!("-L{}", libdir.display()),
        format!("-Wl,-rpath,{}", libdir.display()),
    );
    let mut args: Vec<&OsStr> = flags.iter().map(OsStr::new).collect();
    args.extend([
        source.as_os_str(),
        "-o".as_ref(),
        output.as_os_str(),
        search.as_ref(),
        link.as_ref(),
        rpath.as_ref(),
        "-ldl".as_ref(),
        "-lpthread".as_ref(),
    ]);
    cc(&args);
}

/// Builds ordered_app.c (stream-ordered pools) as `output`, linked with
/// the library `link` (`-lNAME`) from `libdir`, where it is also found at
/// run time.
pub fn build_ordered_app(output: &Path, libdir: &Path, link: &str) {
    let source = dir().join("ordered_app.c");
    let search = format!("-L{}", libdir.display());
    let rpath = format!("-Wl,-rpath,{}", libdir.display());
    cc(&[
        source.as_os_str(),
        "-o".as_ref(),
        output.as_os_str(),
        search.as_ref(),
        link.as_ref(),
        rpath.as_ref(),
    ]);
}

/// The stand-in runtime and alloc_app linked against it, built in `dir`;
/// returns the application.
pub fn app_on_the_vendor_runtime(dir: &Path) -> PathBuf {
    build_runtime(&dir.join("libfakeascendcl.so"), None);
    let app = dir.join("alloc_app");
    build_alloc_app(&app, dir, "-lfakeascendcl", &[]);
    app
}

/// Runs `program` (its path and arguments) as it is: no preload, no tracking.
pub fn direct<S: AsRef<OsStr>>(program: &[S]) -> Output {
    Command::new(&program[0])
        .args(&program[1..])
        .env_remove("LD_PRELOAD")
        .env_remove("ACLALLOC_TRACK")
        .output()
        .expect("run the program")
}

/// Runs `program` under `aclalloc run OPTIONS --`.
pub fn under_aclalloc<S: AsRef<OsStr>>(options: &[&str], program: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aclalloc"))
        .arg("run")
        .args(options)
        .arg("--")
        .args(program)
        .output()
        .expect("run aclalloc")
}

/// Bytes a program printed, as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// stdout without the `#` lines (handles, which differ between runs).
pub fn behaviour(out: &Output) -> String {
    text(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The fault lines of an `aclalloc run` report.
pub fn fault_lines(report: &str) -> Vec<String> {
    report
        .lines()
        .filter(|l| l.starts_with("==aclalloc== fault "))
        .map(str::to_string)
        .collect()
}
