//! The checked-in header is what cbindgen generates from the current sources,
//! and it compiles cleanly as C11 and C++17.

mod common;

#[test]
fn checked_in_header_is_fresh() {
    let generated = std::fs::read_to_string(env!("ACLALLOC_GENERATED_HEADER"))
        .expect("build.rs writes the generated header");
    let checked_in = std::fs::read_to_string(common::root().join("include/aclalloc.h"))
        .expect("include/aclalloc.h");
    assert!(
        generated == checked_in,
        "include/aclalloc.h is stale: regenerate it with `ACLALLOC_UPDATE_HEADER=1 cargo build` and commit it"
    );
}

#[test]
fn header_version_matches_the_crate() {
    let header = std::fs::read_to_string(common::root().join("include/aclalloc.h")).unwrap();
    let want = format!(
        "#define ACLALLOC_VERSION_STRING \"{}\"",
        env!("CARGO_PKG_VERSION")
    );
    assert!(header.contains(&want), "missing: {want}");
    for (name, value) in [
        ("MAJOR", env!("CARGO_PKG_VERSION_MAJOR")),
        ("MINOR", env!("CARGO_PKG_VERSION_MINOR")),
        ("PATCH", env!("CARGO_PKG_VERSION_PATCH")),
    ] {
        let want = format!("#define ACLALLOC_VERSION_{name} {value}");
        assert!(header.contains(&want), "missing: {want}");
    }
}

/// Every CANN include path compiles, in C and in C++, with warnings as errors.
#[test]
fn headers_compile_as_c11_and_cpp17() {
    let dir = common::scratch("header");
    let includes =
        "#include \"acl/acl.h\"\n#include \"acl/acl_base.h\"\n#include \"acl/acl_rt.h\"\n\
                    #include \"acl/acl_rt_allocator.h\"\n#include \"aclalloc.h\"\n";
    let body = "int main(void) { aclError e = aclrtAllocatorUnregister((aclrtStream)0); \
                return e == ACL_ERROR_INVALID_PARAM ? 0 : 1; }\n";
    for (compiler, std, file) in [("cc", "c11", "h.c"), ("c++", "c++17", "h.cpp")] {
        let source = dir.join(file);
        std::fs::write(&source, format!("{includes}{body}")).unwrap();
        let binary = dir.join(format!("{file}.bin"));
        common::compile(compiler, std, &[&source], &binary, &[]);
        let status = std::process::Command::new(&binary).status().unwrap();
        assert!(status.success(), "{file}: unexpected result");
    }
}
