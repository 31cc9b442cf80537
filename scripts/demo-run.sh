#!/usr/bin/env bash
# `aclalloc run` in front of a runtime: builds libaclalloc and the aclalloc
# command, the stand-in vendor runtime of the tests (tests/vendor) and an
# application linked against it, then runs the application under aclalloc,
# once clean and once with a block reused across streams before a
# synchronize, and shows the reports.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet
out=build/demo-run
mkdir -p "$out"
cc -std=c11 -O2 -fPIC -shared -Iinclude -Itests/vendor tests/vendor/libfakeascendcl.c \
  -o "$out/libfakeascendcl.so" -ldl -lpthread
cc -std=c11 -O2 -Iinclude -Itests/vendor tests/vendor/alloc_app.c -o "$out/alloc_app" \
  -L"$out" -lfakeascendcl -Wl,-rpath,"$PWD/$out" -ldl -lpthread

echo "== aclalloc run -- alloc_app            (clean)"
target/release/aclalloc run -- "$out/alloc_app"
echo
echo "== aclalloc run -- alloc_app cross-stream"
target/release/aclalloc run --json "$out/snapshot.json" -- "$out/alloc_app" cross-stream
echo "(JSON snapshot in $out/snapshot.json)"
