//! Generates the C headers from the Rust sources with cbindgen.
//!
//! Two families: `include/aclalloc.h` (aclalloc's own `aclalloc*` API,
//! including `<acl/acl.h>` for CANN's types) and `include/acl/*.h` (CANN's API
//! with CANN's include guards and shapes, see `buildscript/acl_headers.rs`). They
//! are written to OUT_DIR/include on every build; `tests/header.rs` fails when
//! a checked-in one differs. Set `ACLALLOC_UPDATE_HEADER=1` to copy the fresh
//! ones over the checked-in ones.

#[path = "buildscript/acl_headers.rs"]
mod acl_headers;
#[path = "buildscript/scan.rs"]
mod scan;

use std::env;
use std::path::{Path, PathBuf};

/// The crates whose C items go into the headers, bottom layer first.
const LIBRARY_CRATES: &[&str] = &[
    "aclalloc-core",
    "aclalloc-pool",
    "aclalloc-runtime",
    "aclalloc-tracking",
    "aclalloc-plugin",
    "aclalloc-capi",
];

fn main() {
    let crate_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    println!("cargo:rerun-if-changed=src");
    for krate in LIBRARY_CRATES {
        println!("cargo:rerun-if-changed=crates/{krate}/src");
    }
    println!("cargo:rerun-if-changed=buildscript");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=Cargo.toml");
    println!("cargo:rerun-if-env-changed=ACLALLOC_UPDATE_HEADER");
    link_as_system_library();
    build_preload_object(&crate_dir, &out_dir);

    let sources: Vec<PathBuf> = LIBRARY_CRATES
        .iter()
        .map(|krate| crate_dir.join("crates").join(krate).join("src"))
        .collect();
    let scan = scan::scan(&sources);
    let generated = out_dir.join("include");
    std::fs::create_dir_all(generated.join("acl")).expect("create OUT_DIR/include/acl");

    let mut files = vec![PathBuf::from("aclalloc.h")];
    let mut config = base_config(&crate_dir);
    let version = env::var("CARGO_PKG_VERSION").expect("set by cargo");
    config.after_includes = Some(version_macros(&version));
    config.export.exclude.extend(
        scan.names
            .iter()
            .filter(|n| acl_headers::is_acl(n))
            .cloned(),
    );
    generate(&crate_dir, config, &generated.join("aclalloc.h"));

    for header in acl_headers::ALL {
        let mut config = base_config(&crate_dir);
        config.include_guard = Some(header.guard.to_owned());
        config.header = Some(format!(
            "/*\n * CANN's <acl/{}> as aclalloc implements it: CANN's include guard, types and\n \
             * values, so code written against CANN's headers builds unchanged, and\n \
             * <aclalloc.h> builds against CANN's own copy of this file as well.\n \
             * SPDX-License-Identifier: MIT OR Apache-2.0\n */",
            header.file
        ));
        config.includes = header.includes.iter().map(|s| s.to_string()).collect();
        config.sys_includes = vec!["stddef.h".into(), "stdint.h".into()];
        config.after_includes = Some(acl_headers::vocabulary(&header, &scan));
        config.export.exclude.extend(
            scan.names
                .iter()
                .filter(|n| {
                    acl_headers::header_of(n, &scan) != Some(header.file)
                        || acl_headers::written_by_hand(n, &scan)
                })
                .cloned(),
        );
        // cbindgen emits a type only when something emitted uses it, and the
        // handle typedefs of acl_base.h are used from the other headers.
        config.export.include.extend(
            scan.names
                .iter()
                .filter(|n| {
                    acl_headers::header_of(n, &scan) == Some(header.file)
                        && !acl_headers::written_by_hand(n, &scan)
                })
                .cloned(),
        );
        // The enum typedefs are written with their values by hand.
        config
            .export
            .exclude
            .extend(acl_headers::ENUMS.iter().map(|s| s.to_string()));
        // CANN names its structs: `typedef struct aclrtMemLocation {...} aclrtMemLocation;`.
        config.style = cbindgen::Style::Both;
        let file = Path::new("acl").join(header.file);
        generate(&crate_dir, config, &generated.join(&file));
        files.push(file);
    }

    println!(
        "cargo:rustc-env=ACLALLOC_GENERATED_INCLUDE={}",
        generated.display()
    );
    if env::var_os("ACLALLOC_UPDATE_HEADER").is_some() {
        for file in &files {
            std::fs::copy(generated.join(file), crate_dir.join("include").join(file))
                .expect("copy a header into include/");
        }
    }
}

fn base_config(crate_dir: &Path) -> cbindgen::Config {
    cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml")
}

/// Writes one header. The binding crate is `aclalloc-capi`, which defines
/// every export; cbindgen.toml names the lower crates whose types it uses.
fn generate(crate_dir: &Path, config: cbindgen::Config, path: &Path) {
    cbindgen::Builder::new()
        .with_crate(crate_dir.join("crates/aclalloc-capi"))
        .with_config(config)
        .generate()
        .expect("cbindgen could not generate a header")
        .write_to_file(path);
}

/// The shared library's ABI identity: SONAME `libaclalloc.so.<major>`; the
/// major version is the ABI version (bump it on any ABI break).
///
/// No linker version script: rustc already passes one for a cdylib that
/// exports exactly the `#[no_mangle]` functions, and ld takes the union of
/// several scripts, so an extra one could only add symbols, never hide them.
/// `tests/install.rs` checks the exported list instead.
fn link_as_system_library() {
    let major = env::var("CARGO_PKG_VERSION_MAJOR").expect("set by cargo");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libaclalloc.so.{major}");
    // Stream worker threads run the library's code for as long as their
    // streams live, and a plugin host may dlclose the library while one
    // runs: unmapping it under them would crash the process. Joining them in
    // a destructor instead would make dlclose wait for (or drop) work still
    // queued and would deadlock when dlclose runs on a worker or under the
    // loader's lock, so the library is never unloaded once loaded.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
}

/// `libaclalloc_preload.so`, the object that takes libc's `exec` family and
/// `posix_spawn` for `aclalloc run` (preload/aclalloc_preload.c): a plain C
/// shared object, so that libaclalloc.so itself takes no libc name. Cargo
/// builds no C shared object, so the compiler the `cc` crate finds builds it
/// into OUT_DIR, and a copy goes beside the library in `target/<profile>/`,
/// where `aclalloc run` looks for it.
fn build_preload_object(crate_dir: &Path, out_dir: &Path) {
    let source = crate_dir.join("preload/aclalloc_preload.c");
    println!("cargo:rerun-if-changed={}", source.display());
    let built = out_dir.join("libaclalloc_preload.so");
    let compiler = cc::Build::new().get_compiler();
    let status = compiler
        .to_command()
        .args(["-shared", "-fPIC", "-O2", "-g", "-std=c11"])
        .args([
            "-Wall",
            "-Wextra",
            "-Werror",
            "-Wl,-soname,libaclalloc_preload.so",
        ])
        .arg(&source)
        .arg("-o")
        .arg(&built)
        .arg("-ldl")
        .status()
        .expect("run the C compiler for libaclalloc_preload.so");
    assert!(
        status.success(),
        "the C compiler failed on {}",
        source.display()
    );
    // OUT_DIR is target/<profile>/build/<package>-<hash>/out.
    let profile_dir = out_dir.ancestors().nth(3).expect("OUT_DIR under target/");
    std::fs::copy(&built, profile_dir.join("libaclalloc_preload.so"))
        .expect("copy libaclalloc_preload.so beside the library");
}

/// `ACLALLOC_VERSION_*` macros, so C code can check what it was built against.
fn version_macros(version: &str) -> String {
    let mut parts = version
        .split(['.', '-', '+'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor, patch) = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    format!(
        "\n#define ACLALLOC_VERSION_MAJOR {major}\n#define ACLALLOC_VERSION_MINOR {minor}\n\
         #define ACLALLOC_VERSION_PATCH {patch}\n#define ACLALLOC_VERSION_STRING \"{version}\"\n"
    )
}
