#!/usr/bin/env bash
# The C examples: builds libaclalloc and the examples, then runs every one of
# them, showing the allocator API serving an inference-style workload.
set -euo pipefail
cd "$(dirname "$0")/.."

cmake -S c_examples -B build/c_examples -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/c_examples -j 2 >/dev/null

# build/c_examples/examples/NAME holds each example's binary path (written by
# CMakeLists.txt for every aclalloc_example), so a new example runs here
# without being listed. The conformance suite is a test, not an example.
ran=0
for entry in build/c_examples/examples/*; do
  example="$(basename "$entry")"
  [ "$example" != conformance ] || continue
  echo "== $example"
  # From the build directory, as ctest runs them: some write files there.
  (cd build/c_examples && "$(cat "examples/$example")")
  ran=$((ran + 1))
done

# Linked with -lascendcl against a stand-in; at run time the loader finds
# aclalloc under CANN's name.
echo "== ascendcl_app"
(cd build/c_examples && LD_LIBRARY_PATH="$PWD/ascendcl" ./ascendcl_app)
ran=$((ran + 1))
echo "== $ran examples ran"
