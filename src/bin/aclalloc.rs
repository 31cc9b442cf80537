//! The `aclalloc` command; it lives in the `aclalloc-cli` crate, and its
//! documentation is `aclalloc --help`.

fn main() -> std::process::ExitCode {
    aclalloc_cli::main()
}
