//! The C++ trampoline that foreign calls go through (src/base/foreign_call.rs):
//! catching a C++ exception and pausing a forced unwind take C++ code.

fn main() {
    println!("cargo:rerun-if-changed=src/base/guarded_call.cpp");
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .warnings_into_errors(true)
        .file("src/base/guarded_call.cpp")
        .compile("aclalloc_guarded_call");
}
