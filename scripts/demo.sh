#!/usr/bin/env bash
# The C examples: builds libaclalloc and the examples, then runs them, showing
# the allocator API serving an inference-style workload.
set -euo pipefail
cd "$(dirname "$0")/.."

cmake -S c_examples -B build/c_examples -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/c_examples -j 2 >/dev/null
for example in custom_allocator shared_descriptor error_handling runtime_sample inference_loop pool_inference \
    pluggable_inference pluggable_errors ge_pool_allocator tracking; do
  echo "== $example"
  # From the build directory, as ctest runs them: some write files there.
  (cd build/c_examples && "./$example")
done
