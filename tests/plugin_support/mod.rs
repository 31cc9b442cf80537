//! Building and inspecting the test plugin (c_examples/my_plugin_allocator.c).
#![allow(dead_code)]

use super::common;
use std::path::{Path, PathBuf};
use std::process::Command;

/// glibc's RTLD_NOLOAD: find an object only if it is loaded already.
const RTLD_NOLOAD: i32 = 4;

/// Builds a private copy of the test plugin: a distinct path is a distinct
/// object with its own counters, so parallel tests do not share counts.
pub fn build(name: &str) -> PathBuf {
    let dir = common::scratch(&format!("plugin-{name}"));
    let so = dir.join("libmy_plugin.so");
    let status = Command::new("cc")
        .args([
            "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
        ])
        .arg(common::root().join("c_examples/my_plugin_allocator.c"))
        .arg("-o")
        .arg(&so)
        .status()
        .expect("run cc");
    assert!(status.success(), "building the test plugin failed");
    so
}

fn open_loaded(so: &Path) -> Option<libloading::os::unix::Library> {
    // SAFETY: the object is loaded already; nothing new runs.
    unsafe {
        libloading::os::unix::Library::open(Some(so), libloading::os::unix::RTLD_NOW | RTLD_NOLOAD)
    }
    .ok()
}

/// True while the object at `so` is loaded in this process.
pub fn is_loaded(so: &Path) -> bool {
    open_loaded(so).is_some()
}

/// The plugin's own counters (see my_plugin_counters), from the loaded object:
/// live blocks, allocs, frees, mismatched frees, init calls, init's device
/// count, empty-cache calls, live bytes, cached blocks, blocks taken from the
/// system.
pub fn counters(so: &Path) -> [i64; 10] {
    let lib = open_loaded(so).expect("the plugin is loaded");
    // SAFETY: the test plugin's signature.
    let f: libloading::os::unix::Symbol<unsafe extern "C" fn(*mut i64)> =
        unsafe { lib.get(b"my_plugin_counters\0") }.unwrap();
    let mut out = [0i64; 10];
    unsafe { f(out.as_mut_ptr()) };
    out
}
