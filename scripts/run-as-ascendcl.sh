#!/usr/bin/env bash
# Runs a program linked against CANN's library (-lascendcl) on aclalloc:
#
#   scripts/run-as-ascendcl.sh ./my_inference_app [args...]
#
# Makes target/release/ascendcl/libascendcl.so a link to libaclalloc.so
# (building the library first if needed) and puts that directory first on
# the loader's search path. The program needs no change and no relinking.
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 PROGRAM [ARGS...]" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
lib="$root/target/release/libaclalloc.so"
[ -f "$lib" ] || (cd "$root" && cargo build --release >&2)
dir="$root/target/release/ascendcl"
mkdir -p "$dir"
ln -sfn ../libaclalloc.so "$dir/libascendcl.so"
export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$@"
