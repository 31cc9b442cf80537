#!/usr/bin/env bash
# `aclalloc run` in front of a runtime: builds libaclalloc and the aclalloc
# command, the stand-in vendor runtime of the tests (tests/vendor) and an
# application linked against it, then runs the application under aclalloc,
# once clean and once with a bug put in on purpose, and shows the reports
# and where the memory page of the second run is.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/prereqs.sh demo

cargo build --release --quiet
out=build/demo-run
mkdir -p "$out"
cc -std=c11 -O2 -fPIC -shared -Iinclude -Itests/vendor tests/vendor/libfakeascendcl.c \
  -o "$out/libfakeascendcl.so" -ldl -lpthread
cc -std=c11 -O2 -Iinclude -Itests/vendor tests/vendor/alloc_app.c -o "$out/alloc_app" \
  -L"$out" -lfakeascendcl -Wl,-rpath,"$PWD/$out" -ldl -lpthread

cat <<'EOF'
The application registers its own memory allocator on two streams and runs
operators; the runtime takes each operator's scratch memory (its workspace)
from that allocator and gives it back when the operator is done. aclalloc
sits between the runtime and the allocator and checks every call.

== 1. aclalloc run -- alloc_app            (a correct program)
The application prints its own lines first; aclalloc's report follows, each
line starting with ==aclalloc==. What to look for: one allocator, used by two streams; "allocations" and
"allocated bytes" show how many workspaces it handed out and the most memory
it held at once (peak); "faults=0" on the totals line: nothing wrong.

EOF
target/release/aclalloc run -- "$out/alloc_app"

cat <<EOF

== 2. aclalloc run --html ... -- alloc_app cross-stream   (a bug put in on purpose)
What was injected: the program hands memory that stream 1 has just given
back to work on stream 2 without waiting for stream 1 to finish
(aclrtSynchronizeStream). On a real device stream 1's operator may still be
using that memory while stream 2 overwrites it: wrong results, no crash.
What to look for: "faults=1" on the totals line, and the line
"fault cross-stream-reuse-before-synchronize" naming the stream that took
the memory (stream=), the one that freed it (freed-on=), the address and the
size. The fix is a synchronize of the freeing stream before the reuse.

EOF
target/release/aclalloc run --json "$out/snapshot.json" --html "$out/memory.html" \
  -- "$out/alloc_app" cross-stream

cat <<EOF

The memory page of run 2 is $out/memory.html: open it in any browser (it
needs no network). Its timeline shows every workspace over time, coloured by
stream (the orange bands are stream 2's), with the peak marked; its faults
table lists the cross-stream reuse. The same data as JSON, in PyTorch's
snapshot shape: $out/snapshot.json ('aclalloc viz' draws such files).
EOF
