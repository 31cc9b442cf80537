//! `aclalloc run` for programs that load the ACL runtime with dlopen: a
//! library needing the runtime (alloc_app.c's inference loop built as a
//! library, against the stand-in vendor runtime of tests/vendor) opened
//! `RTLD_LOCAL` and `RTLD_GLOBAL` by a launcher, after the program opened
//! `libascendcl.so` itself, from python3 with `ctypes.CDLL`, and as a CPython
//! extension module linking the runtime (built here).
//!
//! For each: the program's output is the same with and without `aclalloc
//! run`, the vendor's counters match the user's, the report counts the
//! runtime's allocations, and an injected leak is reported with its size.
//!
//! The plugin's ACL calls bind to libaclalloc's exports (the preload comes
//! first in the global scope); libaclalloc decides "forward or implement" at
//! the first call that needs a runtime and finds one loaded `RTLD_LOCAL` among
//! the loaded objects (docs/DLOPEN_RUNTIME.md).

mod common;

use common::vendor::{self, behaviour, fault_lines, text};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const PHASE_2: &str = "the runtime discovery (docs/DLOPEN_RUNTIME.md)";

struct Built {
    dir: PathBuf,
    /// The stand-in vendor runtime as libascendcl.so (SONAME libascendcl.so).
    ascendcl: PathBuf,
    /// alloc_app.c as a library needing libascendcl.so.
    plugin_ascendcl: PathBuf,
    /// alloc_app.c as a library needing libfakeascendcl.so.
    plugin_fake: PathBuf,
    launcher: PathBuf,
    /// The real python3 executable (not a shim script).
    python: PathBuf,
}

fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = common::scratch("dlopen_runtime");
        let vendor = vendor::dir();
        let runtime_dir = dir.join("runtime");
        std::fs::create_dir_all(&runtime_dir).unwrap();
        let runtime = |soname: &str| {
            let lib = runtime_dir.join(soname);
            vendor::build_runtime(&lib, Some(soname));
            lib
        };
        let ascendcl = runtime("libascendcl.so");
        runtime("libfakeascendcl.so");
        let libdir = format!("-L{}", runtime_dir.display());
        let rpath = format!("-Wl,-rpath,{}", runtime_dir.display());
        let plugin = |name: &str, needs: &str| {
            let lib = dir.join(name);
            let flags = ["-fPIC", "-shared", "-DALLOC_APP_LIBRARY"];
            vendor::build_alloc_app(&lib, &runtime_dir, needs, &flags);
            lib
        };
        let plugin_ascendcl = plugin("libplugin_ascendcl.so", "-lascendcl");
        let plugin_fake = plugin("libplugin_fake.so", "-lfakeascendcl");
        let launcher = dir.join("dlopen_launcher");
        vendor::cc(&[
            vendor.join("dlopen_launcher.c").as_os_str(),
            "-o".as_ref(),
            launcher.as_os_str(),
            "-ldl".as_ref(),
        ]);
        build_python_module(&dir, &vendor, &libdir, &rpath);
        Built {
            python: python_executable(),
            dir,
            ascendcl,
            plugin_ascendcl,
            plugin_fake,
            launcher,
        }
    })
}

/// python3's own executable: a shim script (pyenv) in front of it would run
/// other programs under `aclalloc run` too, each with its own report.
fn python_executable() -> PathBuf {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 is required (.ci/run installs it)");
    assert!(out.status.success(), "python3 does not run");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// `vendorapp`, a CPython extension module linking the stand-in runtime as
/// libascendcl.so, built with python3-config's flags.
fn build_python_module(dir: &Path, vendor: &Path, libdir: &str, rpath: &str) {
    let config = |arg: &str| {
        let out = Command::new("python3-config").arg(arg).output().expect(
            "python3-config is required to build the extension module: install python3-dev \
             (.ci/run does)",
        );
        assert!(out.status.success(), "python3-config {arg} failed");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let includes = config("--includes");
    let module = dir.join(format!("vendorapp{}", config("--extension-suffix")));
    let mut args: Vec<std::ffi::OsString> = includes.split_whitespace().map(Into::into).collect();
    args.extend(
        [
            "-fPIC",
            "-shared",
            "-DALLOC_APP_LIBRARY",
            // Python's headers are not -Wextra clean on every version.
            "-Wno-missing-field-initializers",
            "-Wno-unused-parameter",
        ]
        .map(Into::into),
    );
    args.push(vendor.join("python_module.c").into());
    args.push(vendor.join("alloc_app.c").into());
    args.push("-o".into());
    args.push(module.into());
    for a in [libdir, "-lascendcl", rpath, "-ldl", "-lpthread"] {
        args.push(a.into());
    }
    let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    vendor::cc(&refs);
}

/// The ways a program gets the runtime by dlopen.
#[derive(Clone, Copy, Debug)]
enum Way {
    /// dlopen(plugin needing libascendcl.so, RTLD_LOCAL).
    LocalAscendcl,
    /// dlopen(plugin needing libfakeascendcl.so, RTLD_LOCAL).
    LocalFake,
    /// dlopen(plugin needing libascendcl.so, RTLD_GLOBAL).
    Global,
    /// dlopen("…/libascendcl.so", RTLD_LOCAL) by the program, then the plugin.
    Preopen,
    /// python3: ctypes.CDLL(plugin).
    PythonCtypes,
    /// python3: import of an extension module linking the runtime.
    PythonModule,
}

const WAYS: [Way; 6] = [
    Way::LocalAscendcl,
    Way::LocalFake,
    Way::Global,
    Way::Preopen,
    Way::PythonCtypes,
    Way::PythonModule,
];

/// The program and its arguments for `way`, running `mode`.
fn program(way: Way, mode: &str) -> Vec<std::ffi::OsString> {
    let b = built();
    let launcher = |how: &str, plugin: &Path| {
        vec![
            b.launcher.clone().into(),
            how.into(),
            b.ascendcl.clone().into(),
            plugin.into(),
            mode.into(),
        ]
    };
    match way {
        Way::LocalAscendcl => launcher("local", &b.plugin_ascendcl),
        Way::LocalFake => launcher("local", &b.plugin_fake),
        Way::Global => launcher("global", &b.plugin_ascendcl),
        Way::Preopen => launcher("preopen", &b.plugin_ascendcl),
        Way::PythonCtypes => vec![
            b.python.clone().into(),
            "-c".into(),
            format!(
                "import ctypes, sys\n\
                 lib = ctypes.CDLL({:?})\n\
                 argv = (ctypes.c_char_p * 3)(b'app', {:?}.encode(), None)\n\
                 sys.exit(lib.alloc_app_main(2, argv))",
                b.plugin_ascendcl.to_str().unwrap(),
                mode
            )
            .into(),
        ],
        Way::PythonModule => vec![
            b.python.clone().into(),
            "-c".into(),
            format!(
                "import sys\nsys.path.insert(0, {:?})\nimport vendorapp\nsys.exit(vendorapp.run({:?}))",
                b.dir.to_str().unwrap(),
                mode
            )
            .into(),
        ],
    }
}

fn direct(way: Way, mode: &str) -> Output {
    vendor::direct(&program(way, mode))
}

fn under_aclalloc(way: Way, mode: &str) -> Output {
    vendor::under_aclalloc(&[], &program(way, mode))
}

/// The launcher in `mode` under `aclalloc run`, loading the vendor runtime
/// and the plugin that needs it: its output, stdout and stderr.
fn launcher_under_aclalloc(mode: &str) -> (Output, String, String) {
    let b = built();
    let out = Command::new(env!("CARGO_BIN_EXE_aclalloc"))
        .arg("run")
        .arg("--")
        .arg(&b.launcher)
        .arg(mode)
        .arg(&b.ascendcl)
        .arg(&b.plugin_ascendcl)
        .arg("clean")
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    (out, stdout, stderr)
}

fn line<'a>(stdout: &'a str, prefix: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no '{prefix}' line in:\n{stdout}"))
}

/// A field `name=N` of a line.
fn field(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{name}=")))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {name}= in {line}"))
}

/// The fixtures work: each way runs the inference loop on the stand-in
/// vendor runtime, whose executor served every workspace from the user's
/// allocator through both of its paths.
#[test]
fn every_way_runs_on_the_vendor_runtime_without_aclalloc() {
    for way in WAYS {
        let out = direct(way, "clean");
        let stdout = text(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("result: ok"),
            "{way:?}:\n{stdout}{}",
            text(&out.stderr)
        );
        assert!(
            stdout.contains("vendor executor: internal=20 exported=20 allocs=40 frees=40"),
            "{way:?}: the vendor runtime did the launches:\n{stdout}"
        );
        assert!(
            stdout.contains("user allocator: allocs=40 frees=40 get_addrs=40 bad_frees=0 live=0"),
            "{way:?}:\n{stdout}"
        );
    }
}

/// Same output, same vendor work, and a report that counts the runtime's
/// allocations of the user's allocator.
#[test]
fn under_aclalloc_every_way_behaves_the_same_and_is_tracked() {
    for way in WAYS {
        let plain = direct(way, "clean");
        let tracked = under_aclalloc(way, "clean");
        let report = text(&tracked.stderr);
        assert!(
            tracked.status.success(),
            "{way:?} ({PHASE_2}):\n{}{report}",
            text(&tracked.stdout)
        );
        assert_eq!(
            behaviour(&plain),
            behaviour(&tracked),
            "{way:?}: output\n{report}"
        );
        let (plain_out, tracked_out) = (text(&plain.stdout), text(&tracked.stdout));
        let vendor = line(&tracked_out, "vendor executor:");
        assert_eq!(line(&plain_out, "vendor executor:"), vendor, "{way:?}");
        let user = line(&tracked_out, "user allocator:");
        assert_eq!(field(vendor, "allocs"), field(user, "allocs"), "{way:?}");
        assert_eq!(field(vendor, "frees"), field(user, "frees"), "{way:?}");
        let allocs = field(vendor, "allocs");
        assert!(allocs >= 40, "{way:?}: {vendor}");
        let totals = format!("totals: allocations={allocs} frees={allocs} live=0 faults=0");
        assert!(
            report.contains(&totals),
            "{way:?}: want '{totals}' in\n{report}"
        );
    }
}

/// A block taken and never returned is reported as a leak with its size.
#[test]
fn under_aclalloc_every_way_reports_an_injected_leak_with_its_size() {
    for way in WAYS {
        let plain = direct(way, "leak");
        let tracked = under_aclalloc(way, "leak");
        let report = text(&tracked.stderr);
        assert!(tracked.status.success(), "{way:?} ({PHASE_2}):\n{report}");
        assert_eq!(
            behaviour(&plain),
            behaviour(&tracked),
            "{way:?}: output\n{report}"
        );
        let faults = fault_lines(&report);
        assert_eq!(faults.len(), 1, "{way:?}: one fault\n{report}");
        assert!(
            faults[0].contains("fault leak: ") && faults[0].contains("size=3000"),
            "{way:?}: {}",
            faults[0]
        );
    }
}

/// A runtime that arrives after libaclalloc already served as the runtime
/// is named once on stderr and not used: the program keeps running on the
/// host runtime, no crash, no mixing of the two worlds.
#[test]
fn a_runtime_arriving_after_aclalloc_served_is_named_once_and_not_used() {
    let (out, stdout, stderr) = launcher_under_aclalloc("served");
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("result: ok"), "{stdout}");
    // The host runtime ran the launches the program made through the ACL
    // API (the vendor's own table was never filled: internal=0); the
    // vendor-only entry point the program resolves itself still runs, and
    // finds the allocators through the exported aclrtAllocatorGetByStream.
    assert!(
        stdout.contains("kernels: 40 run, 0 without workspace"),
        "{stdout}"
    );
    assert!(
        stdout.contains("vendor executor: internal=0 exported=20"),
        "{stdout}"
    );
    // Said once on stderr when seen (the plugin's aclInit; its other cold
    // calls and the check at exit stay silent), and once in the report.
    let runtime = built().ascendcl.to_str().unwrap();
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("was loaded after libaclalloc began serving"))
        .collect();
    assert_eq!(warnings.len(), 1, "one warning:\n{stderr}");
    assert!(
        warnings[0].contains(runtime),
        "it names {runtime}: {}",
        warnings[0]
    );
    let in_report: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("==aclalloc== note: ") && l.contains(runtime))
        .collect();
    assert_eq!(in_report.len(), 1, "the report names it once:\n{stderr}");
    assert_eq!(
        stderr.lines().filter(|l| l.contains(runtime)).count(),
        2,
        "named nowhere else:\n{stderr}"
    );
}

/// A descriptor needs no runtime: made before the runtime is loaded, it
/// decides nothing, and the program still ends up on the real runtime. The
/// early descriptor stays libaclalloc's; registered on a real stream, the
/// runtime gets a copy of it, and the runtime's executor reaches its
/// allocator through that copy (and through the tracking layer).
#[test]
fn a_descriptor_made_before_the_runtime_is_loaded_does_not_keep_it_out() {
    let (out, stdout, stderr) = launcher_under_aclalloc("descfirst");
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("vendor executor: internal=20 exported=20 allocs=40 frees=40"),
        "the plugin ran on the vendor runtime:\n{stdout}"
    );
    assert!(
        stdout.contains(
            "early descriptor: set=1 registered=1 launched=1 unregistered=1 destroyed=1 \
             allocs=1 frees=1 kernels=1"
        ),
        "{stdout}{stderr}"
    );
    assert!(
        !stderr.contains("was loaded after libaclalloc began serving"),
        "{stderr}"
    );
    // The plugin's 40 workspaces and the early descriptor's one.
    assert!(
        stderr.contains("totals: allocations=41 frees=41 live=0 faults=0"),
        "{stderr}"
    );
}
