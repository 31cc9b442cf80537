//! Generates the C header from the Rust sources with cbindgen.
//!
//! The header is written to OUT_DIR on every build; `tests/header.rs` fails
//! when the checked-in `include/aclalloc.h` differs from it. Set
//! `ACLALLOC_UPDATE_HEADER=1` to copy the fresh one over the checked-in one.

use std::env;
use std::path::PathBuf;

fn main() {
    let crate_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=Cargo.toml");
    println!("cargo:rerun-if-env-changed=ACLALLOC_UPDATE_HEADER");
    link_as_system_library();

    let mut config =
        cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let version = env::var("CARGO_PKG_VERSION").expect("set by cargo");
    config.after_includes = Some(version_macros(&version));

    let generated = out_dir.join("aclalloc.h");
    cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen could not generate the header")
        .write_to_file(&generated);
    println!(
        "cargo:rustc-env=ACLALLOC_GENERATED_HEADER={}",
        generated.display()
    );

    if env::var_os("ACLALLOC_UPDATE_HEADER").is_some() {
        std::fs::copy(&generated, crate_dir.join("include/aclalloc.h"))
            .expect("copy the header into include/");
    }
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
