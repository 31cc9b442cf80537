//! The checked-in header is what cbindgen generates from the current sources,
//! and it compiles cleanly as C11 and C++17.

mod common;

/// The headers build.rs generates, relative to `include/`.
const GENERATED: [&str; 6] = [
    "aclalloc.h",
    "acl/acl.h",
    "acl/acl_base.h",
    "acl/acl_rt.h",
    "acl/acl_rt_allocator.h",
    "acl/acl_rt_memory_soma.h",
];

#[test]
fn checked_in_headers_are_fresh() {
    let generated_dir = std::path::Path::new(env!("ACLALLOC_GENERATED_INCLUDE"));
    for file in GENERATED {
        let generated = std::fs::read_to_string(generated_dir.join(file))
            .unwrap_or_else(|e| panic!("build.rs writes {file}: {e}"));
        let checked_in = std::fs::read_to_string(common::root().join("include").join(file))
            .unwrap_or_else(|e| panic!("include/{file}: {e}"));
        assert!(
            generated == checked_in,
            "include/{file} is stale: regenerate the headers with \
             `ACLALLOC_UPDATE_HEADER=1 cargo build --release` and commit them"
        );
    }
}

/// Every macro aclalloc.h defines carries the library's prefix: a `pub`
/// constant anywhere in the crate becomes a `#define` here, and an unprefixed
/// one (`PHYSICAL_TAG`, `GRANULARITY` were) lands in every C file that
/// includes the header.
#[test]
fn aclalloc_header_defines_only_prefixed_macros() {
    let header = std::fs::read_to_string(common::root().join("include/aclalloc.h")).unwrap();
    let unprefixed: Vec<&str> = header
        .lines()
        .filter_map(|l| l.strip_prefix("#define "))
        .filter_map(|rest| rest.split_whitespace().next())
        .filter(|name| !name.starts_with("ACLALLOC_"))
        .collect();
    assert!(
        unprefixed.is_empty(),
        "include/aclalloc.h defines macros without the ACLALLOC_ prefix: {unprefixed:?}; \
         make the constant crate-visible (pub(crate)) or give it the prefix"
    );
}

/// aclalloc.h declares only aclalloc's own names; CANN's come from <acl/acl.h>
/// (CANN's copy on a CANN machine), so none may be redeclared here.
#[test]
fn aclalloc_header_declares_no_cann_name() {
    let header = std::fs::read_to_string(common::root().join("include/aclalloc.h")).unwrap();
    for line in header.lines() {
        let cann = |prefix: &str| {
            line.strip_prefix(prefix)
                .is_some_and(|rest| !rest.starts_with("alloc"))
        };
        let declares_cann = line.starts_with("#define ACL_")
            || cann("typedef int acl")
            || cann("typedef void *acl")
            || cann("aclError acl");
        assert!(!declares_cann, "aclalloc.h redeclares CANN's API: {line}");
    }
    assert!(header.contains("#include <acl/acl.h>"));
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
                    #include \"acl/acl_rt_allocator.h\"\n#include \"acl/acl_rt_memory_soma.h\"\n\
                    #include \"aclalloc.h\"\n";
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
