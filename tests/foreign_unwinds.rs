//! A thread that leaves through `pthread_exit` or `pthread_cancel` from
//! inside a callback the library calls (an allocator callback on the
//! launching thread, a kernel or a free callback on the stream's worker, a
//! pluggable allocator's alloc through its C function or its descriptor)
//! ends with its value, and the library stays consistent: the same stream
//! and allocator go on serving from another thread, every block comes back
//! once (tests/unwind_support/forced_unwind.c). The callback may end the
//! thread inside its own `pthread_cleanup_push` while the thread called the
//! library inside one of its own: both handlers run, inner first.

mod common;

use std::process::Command;

#[test]
fn a_thread_ended_inside_a_callback_or_kernel_leaves_the_library_usable() {
    let dir = common::scratch("forced-unwind");
    let exe = dir.join("forced_unwind");
    let src = common::root().join("tests/unwind_support/forced_unwind.c");
    common::compile("cc", "c11", &[&src], &exe, &["-ldl"]);
    let so = dir.join("libexiting_plugin.so");
    let status = Command::new("cc")
        .args([
            "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
        ])
        .arg(common::root().join("tests/unwind_support/exiting_plugin.c"))
        .arg("-o")
        .arg(&so)
        .status()
        .expect("run cc");
    assert!(status.success(), "building the plugin failed");
    for place in [
        "alloc",
        "free",
        "kernel",
        "alloc-cleanup",
        "plugin-c",
        "plugin-launch",
    ] {
        for how in ["exit", "cancel"] {
            let mut command = Command::new(&exe);
            command.args([place, how]);
            if place.starts_with("plugin") {
                command.arg(&so);
            }
            let out = command.output().unwrap();
            assert!(
                out.status.success() && out.stdout.ends_with(b"ok\n"),
                "{place} {how}: {:?}\n{}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}
