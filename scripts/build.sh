#!/usr/bin/env bash
# Builds libaclalloc and the aclalloc tool (`cargo build --release`, extra
# arguments passed on), then gives the library its SONAME link in
# target/release: a program linked with `-L target/release -laclalloc`
# records the SONAME libaclalloc.so.<major> and cannot start without it.
# (A build script cannot make that link: cargo writes the library after it.)
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release "$@"
major=$(sed -n 's/^#define ACLALLOC_VERSION_MAJOR //p' include/aclalloc.h)
release="${CARGO_TARGET_DIR:-target}/release"
ln -sfn libaclalloc.so "$release/libaclalloc.so.$major"
echo "built $release/libaclalloc.so (SONAME link libaclalloc.so.$major) and $release/aclalloc"
