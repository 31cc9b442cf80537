//! A thread that leaves through `pthread_exit` or `pthread_cancel` from
//! inside a callback the library calls (an allocator callback on the
//! launching thread, a kernel or a free callback on the stream's worker)
//! ends with its value, and the library stays consistent: the same stream
//! and allocator go on serving from another thread, every block comes back
//! once (tests/unwind_support/forced_unwind.c).

mod common;

use std::process::Command;

#[test]
fn a_thread_ended_inside_a_callback_or_kernel_leaves_the_library_usable() {
    let dir = common::scratch("forced-unwind");
    let exe = dir.join("forced_unwind");
    let src = common::root().join("tests/unwind_support/forced_unwind.c");
    common::compile("cc", "c11", &[&src], &exe, &[]);
    for place in ["alloc", "free", "kernel"] {
        for how in ["exit", "cancel"] {
            let out = Command::new(&exe).args([place, how]).output().unwrap();
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
